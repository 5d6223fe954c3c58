"""Miss explanations: when a step does not replay, name the nearest record and the parts that differ."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UpstreamUnexpected
from .fingerprint import Fingerprint, part_names
from .records import StepRecord


class ReplayMissError(UpstreamUnexpected):
    """A step had to replay (mode ``replay``) and no recording matches it."""

    def __init__(self, message: str, *, nearest: StepRecord | None, differing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.nearest = nearest
        """The closest record, if there is any."""
        self.differing = differing
        """The fingerprint parts in which it differs (``occurrence`` when only that does)."""


def nearest_record(fp: Fingerprint, occurrence: int, records: Sequence[StepRecord]
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


def explain_miss(role: str, fp: Fingerprint, occurrence: int, records: Sequence[StepRecord], *,
                 where: str) -> tuple[str, StepRecord | None, tuple[str, ...]]:
    """A sentence saying why no record matches, with the nearest record and what differs."""
    nearest, differing = nearest_record(fp, occurrence, records)
    if nearest is None:
        return f"No recording of a step of role {role!r} exists in {where}.", None, ()
    if differing == ("occurrence",):
        return (f"{where} holds identical steps of role {role!r}, but not a recording for occurrence "
                f"{occurrence + 1} of it in this cell execution (the nearest is occurrence "
                f"{nearest.occurrence + 1})."), nearest, differing
    return (f"No recording matches this step of role {role!r} in {where}. The nearest (role {nearest.role!r}, "
            f"recorded with {nearest.backend}) differs in: {', '.join(differing)}."), nearest, differing


@dataclass(frozen=True)
class Miss:
    """A step that found no recording and ran live (mode ``auto``); explained only when someone asks."""

    role: str
    fingerprint: Fingerprint
    occurrence: int
    records: Sequence[StepRecord]
    """The records there were when it missed (before its own was added)."""
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
