"""Miss explanations: when a step does not replay, name the nearest record and the parts that differ."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from .._fieldwise import Fieldwise
from ..errors import ReplayMissError as ReplayMissError  # its home is errors.py; named here as before
from .fingerprint import Fingerprint, part_names
from .records import StepRecord


def nearest_record(
    fp: Fingerprint, occurrence: int, records: Sequence[StepRecord]
) -> tuple[StepRecord | None, tuple[str, ...]]:
    """The record sharing most fingerprint parts with this step (the same role first), and the parts that differ."""
    best: StepRecord | None = None
    best_key: tuple[int, int, int] = (-1, -1, -1)
    for record in records:
        same = sum(1 for p in part_names(fp.parts, record.parts) if record.parts.get(p) == fp.parts.get(p))
        key = (int(record.parts.get("role") == fp.parts["role"]), same, -abs(record.occurrence - occurrence))
        if key > best_key:
            best, best_key = record, key
    if best is None:
        return None, ()
    differing = tuple(p for p in part_names(fp.parts, best.parts) if best.parts.get(p) != fp.parts.get(p))
    if not differing and best.occurrence != occurrence:
        differing = ("occurrence",)
    return best, differing


def explain_miss(
    role: str, fp: Fingerprint, occurrence: int, records: Sequence[StepRecord], *, where: str
) -> tuple[str, StepRecord | None, tuple[str, ...]]:
    """A sentence saying why no record matches, with the nearest record and what differs."""
    nearest, differing = nearest_record(fp, occurrence, records)
    if nearest is None:
        return f"No recording of a step of role {role!r} exists in {where}.", None, ()
    if not differing and nearest.failure is not None:
        failure = nearest.failure
        ended = "was stopped before it ran" if failure.status == "not_run" else f"failed ({failure.type})"
        return (
            f"{where} holds only a failure record of this step of role {role!r}: as a map item it {ended} when it "
            "was recorded, so no finished recording exists.",
            nearest,
            differing,
        )
    if differing == ("occurrence",):
        return (
            (
                f"{where} holds identical steps of role {role!r}, but not a recording for occurrence "
                f"{occurrence + 1} of it in this cell execution (the nearest is occurrence "
                f"{nearest.occurrence + 1})."
            ),
            nearest,
            differing,
        )
    return (
        (
            f"No recording matches this step of role {role!r} in {where}. The nearest (role {nearest.role!r}, "
            f"recorded with {nearest.backend}) differs in: {', '.join(differing)}."
        ),
        nearest,
        differing,
    )


class RecordsWhenAsked(Sequence[StepRecord]):
    """A store's records, read when first asked for and then kept; of the missing step's own id, the one held then.

    ``then`` is the record of the step's id the store held when it missed (a failure record, a partial one, one made
    with other tools), if any. A miss is explained only when someone asks (``%agl explain``); a copy of every record
    at each miss made a map of N live items do N copies of up to N records (O(N²): 1.2 s more for a 10,000-item map
    in memory). Read later, the records are those there were at the miss plus what was recorded since, less the
    step's own new record (a perfect match), so the nearest is what it missed, as before.
    """

    def __init__(
        self, records: Callable[[], Sequence[StepRecord]], own_id: str, then: StepRecord | None = None
    ) -> None:
        self._read = records
        self._own_id = own_id
        self._then = then
        self._held: tuple[StepRecord, ...] | None = None

    def _records(self) -> tuple[StepRecord, ...]:
        if self._held is None:
            own, then = self._own_id, self._then
            held = [r for r in self._read() if r.id != own]
            if then is not None:
                held.append(then)  # the record of its id as it was (the store now holds the step's new one)
            self._held = tuple(held)
            self._read, self._then = tuple, None  # the store is no longer held
        return self._held

    def __len__(self) -> int:
        return len(self._records())

    @overload
    def __getitem__(self, index: int) -> StepRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StepRecord]: ...

    def __getitem__(self, index: int | slice) -> StepRecord | Sequence[StepRecord]:
        return self._records()[index]

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self._records())


@dataclass(frozen=True, eq=False, repr=False)
class Miss(Fieldwise):
    """A step that found no recording and ran live (mode ``auto``); explained only when someone asks."""

    role: str
    fingerprint: Fingerprint
    occurrence: int
    records: Sequence[StepRecord]
    """The records there were when it missed (before its own was added), or `RecordsWhenAsked`."""
    where: str
    cell_id: str | None = None

    def explain(self) -> str:
        """Why it did not replay: the nearest record and the parts that differ."""
        return explain_miss(self.role, self.fingerprint, self.occurrence, self.records, where=self.where)[0]


_recent: deque[Miss] = deque(maxlen=50)


def note_miss(miss: Miss) -> None:
    """Remember a miss (the last 50 are kept) for ``%agl explain``."""
    _recent.append(miss)


def recent_misses() -> list[Miss]:
    """The latest misses, oldest first."""
    return list(_recent)


# Which records each cell's latest execution used, for saying which records are stale ------------------------------

# cell id -> (the execution key of its latest execution that kept or replayed a record, those records' ids in order)
_used: dict[str, tuple[object, dict[str, None]]] = {}


def note_used(cell_id: str | None, execution: object, record_id: str) -> None:
    """Remember that a step of the cell's current execution replayed or kept this record."""
    if cell_id is None:
        return
    noted = _used.get(cell_id)
    if noted is None or noted[0] != execution:
        noted = _used[cell_id] = (execution, {})
    noted[1][record_id] = None


def stale_reasons(records: Sequence[StepRecord], *, cells: Mapping[str, int] | None = None) -> dict[str, str]:
    """Why each stale record (by id) is stale; records not known to be stale are left out.

    A record is stale when the latest run of its cell in this kernel replayed or kept other records and not this
    one (what differs from the nearest of those is said), or when ``cells`` (the saved notebook's cell ids and
    numbers) holds no cell with its id. A record with no cell id, or of a cell that has not run here, cannot be told;
    one that the latest run of any cell used (an identical step in another cell replays it) is not stale.
    """
    by_id = {r.id: r for r in records}
    used_anywhere = {record_id for _, ids in _used.values() for record_id in ids}
    reasons: dict[str, str] = {}
    for record in records:
        if record.cell_id is None or record.id in used_anywhere:
            continue
        noted = _used.get(record.cell_id)
        if noted is not None:
            used = [by_id[i] for i in noted[1] if i in by_id]
            nearest, differing = nearest_record(Fingerprint({"role": "", **record.parts}, ""), record.occurrence, used)
            if nearest is None or nearest.role != record.role:
                reasons[record.id] = f"stale: its cell's latest run here ran no step of role {record.role!r}"
            elif differing == ("occurrence",):
                reasons[record.id] = (
                    f"stale: its cell's latest run here ran this step fewer times (it used "
                    f"{nearest.id[:12]}, occurrence {nearest.occurrence + 1})"
                )
            else:
                reasons[record.id] = (
                    f"stale: its cell's latest run here used {nearest.id[:12]} instead, which "
                    f"differs in: {', '.join(differing)}"
                )
        elif cells is not None and record.cell_id not in cells:
            reasons[record.id] = "stale: no cell of the saved notebook has its cell id (deleted, or not saved yet)"
    return reasons
