"""What ``agl-notebook list``, ``clear`` and ``gc`` know about a notebook's recordings, on its JSON (no kernel).

Whether a recording is used — some cell of the notebook still replays it — is decided from what the notebook holds,
never from its fingerprint (that needs the live role, which only running the cell gives; ``agl-notebook explain``
does that). A record keeps every cell that recorded or replayed it (``cells``: the cell's id and a digest of its
source, docs/recordings.md), and it is:

1. **used** when the output of a code cell that has code keeps it or names it (its records block holds it, or its
   provenance names its id), or when a code cell that has code is one of its cells: by id, or by the digest of its
   source (a notebook rebuilt from a script by jupytext has new cell ids but the same sources); a record kept before
   cells were kept counts the one ``cell_id`` it names;
2. **unused** only when that is proved: no code cell of the notebook has code at all; or it names its cells (all of
   them: none was dropped past the limit), the notebook's cells carry ids, and none of its cells is a code cell with
   code there, by id or by source;
3. **unknown** otherwise: a record kept before cells were kept (its ``cell_id`` alone never proves it unused: a
   second cell may replay it), a notebook whose cells carry no ids (nbformat before 4.5), or a sidecar's record whose
   cells are none of this notebook's (another notebook of the folder may share the file).

"Used" means a cell that could run the step is still there, not that the step still replays: a cell edited since may
ask something else (``explain`` tells).

A **partial** record (the progress of a step waiting for a person, docs/recordings.md) is none of those: it is a
step's unfinished work, which resumes when its cell runs again. ``list`` shows it as ``partial``, its cost is in no
total, and ``gc`` removes it only with ``--unknown-too`` (``clear`` by its id).

A record in a sidecar file the notebook names (a large map's) is judged the same way, used too by the cells whose
outputs name the file.
"""

from __future__ import annotations

import datetime
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import InputError
from ..models.prices import PriceTable, declared_rates, dollars
from ..notebook.nbfile import METADATA_KEY, PROVENANCE_KEY, cell_source, outputs_metadata
from ..payloads import JsonObject
from ..replay.records import RECORD_KINDS, StepRecord, block_from_json, record_from_json, source_digest, with_cells
from .sidecars import Sidecar

Status = Literal["used", "unused", "unknown", "partial"]

SHORT_ID = 12
"""The characters of a record id shown (and the fewest a prefix given to ``clear`` may have: `MIN_PREFIX`)."""
MIN_PREFIX = 6


@dataclass
class Recording:
    """One recording of the notebook (one id), wherever it is kept."""

    record: StepRecord
    """The record (an output's copy when there is one: it is the newer)."""
    in_metadata: bool = False
    """Kept in the notebook metadata."""
    output_cells: list[int] = field(default_factory=list)
    """Indices of the cells whose outputs keep it."""
    sidecar: str | None = None
    """The sidecar file keeping it, if one does."""
    naming_cells: list[int] = field(default_factory=list)
    """Indices of the cells whose outputs name that sidecar file."""
    provenance_cells: list[int] = field(default_factory=list)
    """Indices of the cells whose outputs' provenance names its id (the display it replayed or recorded)."""
    status: Status = "unknown"
    cell: int | None = None
    """The 1-based number of the cell it is attributed to, when there is one."""
    why: str = ""
    """A short reason for the status (shown in the table)."""
    reason: str = ""
    """The reason in a sentence."""

    @property
    def kept(self) -> list[str]:
        """Where it is kept: ``metadata``, ``output``, ``sidecar``, or several."""
        return (
            (["metadata"] if self.in_metadata else [])
            + (["output"] if self.output_cells else [])
            + (["sidecar"] if self.sidecar else [])
        )

    def to_json(self, now: datetime.datetime) -> JsonObject:
        """The recording as ``list --json`` gives it."""
        r = self.record
        return {
            "id": r.id,
            "short_id": r.id[:SHORT_ID],
            "role": r.role,
            "backend": r.backend,
            "input_tokens": r.usage.input_tokens,
            "output_tokens": r.usage.output_tokens,
            "tokens": tokens(r),
            "cost_usd": r.cost.usd if r.cost is not None else None,
            "cost_rates": r.cost.rates_as_of if r.cost is not None else None,
            **({"usage_unknown": True} if usage_unknown(r) else {}),  # its server said no usage: tokens a floor
            "recorded_at": r.recorded_at or None,
            "age": age(r.recorded_at, now),
            "kept": list(self.kept),
            "output_cells": [i + 1 for i in self.output_cells],
            "cell_id": r.cell_id,
            "cells": [c.to_json() for c in r.cells],
            "cell": self.cell,
            "occurrence": r.occurrence,
            "status": self.status,
            "reason": self.reason,
            **({"sidecar": self.sidecar} if self.sidecar else {}),  # only then: older programs see what they did
            **({"partial": r.to_json()["partial"]} if r.partial is not None else {}),  # what the step waits for
            **({"failure": r.to_json()["failure"]} if r.failure is not None else {}),  # a map item's failure record
        }


@dataclass
class Scan:
    """Every recording of a notebook, judged."""

    recordings: list[Recording]
    """In the order they are found: the notebook metadata's, then each output's."""
    unreadable: int
    """Records (or whole output blocks) this version cannot read; left alone except by ``clear --all``."""
    problems: list[str]
    """What could not be read, and where."""

    def counts(self) -> dict[str, int]:
        """How many recordings are used, unused and unknown; and partial, when any is (as older programs saw it)."""
        counted = {"used": 0, "unused": 0, "unknown": 0}
        for recording in self.recordings:
            counted[recording.status] = counted.get(recording.status, 0) + 1
        return counted


def scan(nb: dict[str, Any], *, where: str, sidecars: Sequence[Sidecar] = ()) -> Scan:
    """Read and judge every recording in ``nb`` (a notebook as JSON; its metadata block is known to be usable).

    ``sidecars``: the sidecar files it names, as read (`agl_notebook.cli.sidecars.sidecars_of`); their records are
    recordings of the notebook too.
    """
    found: dict[str, Recording] = {}
    unreadable = 0
    problems: list[str] = []
    metadata = nb.get("metadata")
    block = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    if block is not None:
        read = block_from_json(block, where=f"{where} metadata[{METADATA_KEY!r}]")
        unreadable += len(read.unreadable)
        problems.extend(read.problems)
        for record in read.records:
            held = found.get(record.id)
            if held is None or record.partial is None:  # a partial record never replaces a finished one
                found[record.id] = Recording(_with_cells_of(record, held), in_metadata=True)
    for index, number, output_metadata in outputs_metadata(nb):
        if METADATA_KEY not in output_metadata:
            continue
        try:
            read = block_from_json(output_metadata[METADATA_KEY], where=f"{where} cell {index + 1} output {number + 1}")
        except InputError as e:
            unreadable += 1
            problems.append(str(e))
            continue
        unreadable += len(read.unreadable)
        problems.extend(read.problems)
        for record in read.records:
            recording = found.get(record.id)
            if recording is None:
                recording = found[record.id] = Recording(record)
            elif record.partial is None or recording.record.partial is not None:
                # The output's copy is the newer (a partial one never over a finished one); it keeps every cell.
                recording.record = _with_cells_of(record, recording)
            if index not in recording.output_cells:
                recording.output_cells.append(index)
    for sidecar in sidecars:
        beside = sidecar.read
        if beside is None:
            problems.append(sidecar.problem or f"{sidecar.path}: cannot be read.")
            continue
        problems.extend(beside.problems)
        unreadable += sum(1 for line in beside.lines if line.record is None and line.kind in (None, *RECORD_KINDS))
        for record in beside.records.values():
            recording = found.get(record.id)
            if recording is None:
                recording = found[record.id] = Recording(record)
            else:
                recording.record = _with_cells_of(recording.record, Recording(record))
            recording.sidecar = sidecar.naming.file
            recording.naming_cells = list(sidecar.output_cells)
    for index, _, output_metadata in outputs_metadata(nb):
        provenance = output_metadata.get(PROVENANCE_KEY)
        named = provenance.get("record_id") if isinstance(provenance, dict) else None
        recording = found.get(named) if isinstance(named, str) else None
        if recording is not None and index not in recording.provenance_cells:
            recording.provenance_cells.append(index)
    cells = _Cells(nb)
    for recording in found.values():
        _judge(recording, cells)
    return Scan(list(found.values()), unreadable, problems)


def _with_cells_of(record: StepRecord, other: Recording | None) -> StepRecord:
    """``record`` keeping the cells of another copy of its id, too (a partial record keeps its own)."""
    if other is None or record.partial is not None or other.record.partial is not None:
        return record
    older = other.record
    return with_cells(record, older.cells, dropped=older.cells_dropped) if older.cells else record


class _Cells:
    """The notebook's cells as the rule needs them."""

    def __init__(self, nb: dict[str, Any]) -> None:
        raw = nb.get("cells")
        self.cells: list[Any] = raw if isinstance(raw, list) else []
        self.by_id: dict[str, int] = {}
        self.by_source: dict[str, int] = {}
        """The first code cell with code of each source digest."""
        for index, cell in enumerate(self.cells):
            cell_id = cell.get("id") if isinstance(cell, dict) else None
            if isinstance(cell_id, str) and cell_id:
                self.by_id.setdefault(cell_id, index)
            source = cell_source(cell)
            if source is not None and source.strip():
                self.by_source.setdefault(source_digest(source), index)
        self.any_code = any(self.has_code(i) for i in range(len(self.cells)))

    def is_code(self, index: int) -> bool:
        cell = self.cells[index]
        return isinstance(cell, dict) and cell.get("cell_type") == "code"

    def has_code(self, index: int) -> bool:
        """A code cell whose source is not blank."""
        if not self.is_code(index):
            return False
        source = self.cells[index].get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        return isinstance(source, str) and bool(source.strip())


def _judge(recording: Recording, cells: _Cells) -> None:
    _judge_use(recording, cells)
    waiting = recording.record.partial
    if waiting is not None:
        what = "an approval of" if waiting.on == "approval" else "an answer in"
        where = f", cell {recording.cell}" if recording.cell is not None else ""
        recording.status, recording.why = "partial", f"waiting{where}"
        recording.reason = (
            f"the progress of a step waiting for {what} its call to {waiting.tool!r}, which resumes when its cell "
            f"runs again ({recording.reason})"
        )


def _judge_use(recording: Recording, cells: _Cells) -> None:
    def decide(status: Status, why: str, reason: str, cell: int | None = None) -> None:
        recording.status, recording.why, recording.reason, recording.cell = status, why, reason, cell

    record = recording.record
    for index in recording.output_cells:
        if cells.has_code(index):
            return decide(
                "used", f"cell {index + 1}", f"kept in the output of cell {index + 1}, which displayed it", index + 1
            )
    for index in recording.provenance_cells:
        if cells.has_code(index):
            return decide(
                "used", f"cell {index + 1}", f"the output of cell {index + 1} says it displayed it", index + 1
            )
    for index in recording.naming_cells:
        if cells.has_code(index):
            return decide(
                "used",
                f"cell {index + 1}",
                f"kept in the sidecar {recording.sidecar}, which the output of cell {index + 1} names",
                index + 1,
            )
    for use in reversed(record.cells):  # the latest first
        named = cells.by_id.get(use.cell_id) if use.cell_id is not None else None
        if named is not None and cells.has_code(named):
            return decide("used", f"cell {named + 1}", f"used by cell {named + 1} (id {use.cell_id})", named + 1)
    for use in reversed(record.cells):
        same = cells.by_source.get(use.source)
        if same is not None:
            was = f" (id {use.cell_id} then)" if use.cell_id is not None else ""
            return decide(
                "used",
                f"cell {same + 1}",
                f"used by a cell with the source cell {same + 1} has{was}",
                same + 1,
            )
    cell_id = record.cell_id
    named = cells.by_id.get(cell_id) if cell_id is not None else None
    if named is not None and cells.has_code(named):
        return decide("used", f"cell {named + 1}", f"recorded in cell {named + 1} (id {cell_id})", named + 1)
    if not cells.any_code:
        return decide("unused", "no code", "no code cell of the notebook has code to run a step")
    if not record.cells:
        where = (
            f"recorded in cell {named + 1} (id {cell_id}), which has no code now or is no longer a code cell"
            if named is not None
            else f"recorded in a cell (id {cell_id}) no longer in the notebook"
            if cell_id is not None
            else "recorded without a cell id (headless runs of older versions sent none)"
        )
        return decide(
            "unknown",
            "cells not kept" if cell_id is not None else "no cell id",
            f"{where}; kept before every cell using a recording was, so another cell may replay it",
            named + 1 if named is not None else None,
        )
    if record.cells_dropped:
        return decide(
            "unknown",
            "many cells",
            "used by more cells than a record keeps, and none of those it keeps is in the notebook now",
        )
    if not cells.by_id:
        return decide(
            "unknown",
            "no cell ids",
            "none of its cells has its source here, and the notebook's cells carry no ids (nbformat before 4.5) "
            "to look for them",
        )
    here = any(c.cell_id in cells.by_id for c in record.cells if c.cell_id is not None)
    if recording.sidecar and not (recording.in_metadata or recording.output_cells or here):
        return decide(
            "unknown",
            "cell elsewhere",
            f"none of its cells is in the notebook, and the sidecar {recording.sidecar} keeping it may be shared "
            "with another notebook of the folder whose map has the same key",
        )
    if len(record.cells) == 1 and (only := record.cells[0].cell_id) is not None:
        named = cells.by_id.get(only)
        if named is None:
            return decide(
                "unused", "cell deleted", f"its cell (id {only}) is no longer in the notebook, nor its source"
            )
        return decide(
            "unused",
            "cell empty" if cells.is_code(named) else "not code",
            f"its cell {named + 1} (id {only}) "
            f"{'has no code now' if cells.is_code(named) else 'is no longer a code cell'}, and no cell has its source",
            named + 1,
        )
    gone = ", ".join(sorted({c.cell_id for c in record.cells if c.cell_id is not None})) or "none told"
    return decide(
        "unused",
        "cells gone",
        f"no cell that recorded or replayed it (ids: {gone}) is a code cell with code now, and no cell has the "
        "source one of them had",
    )


# Removing ----------------------------------------------------------------------------------------------------------


@dataclass
class Removed:
    """What `remove` took out of a notebook."""

    from_metadata: int = 0
    """Records taken from the notebook metadata."""
    from_outputs: int = 0
    """Record copies taken from outputs' metadata."""
    unreadable: int = 0
    """Records (or whole output blocks) this version cannot read, taken out by ``clear --all``."""


def remove(nb: dict[str, Any], ids: set[str], *, unreadable: bool = False) -> Removed:
    """Take records out of the notebook metadata and outputs' metadata, in place.

    Taken: the records with these ids and, with ``unreadable``, every record (or whole output block) this version
    cannot read. Other records, and the outputs themselves, are kept as they are; a block left empty is removed.
    """
    removed = Removed()
    metadata = nb.get("metadata")
    if isinstance(metadata, dict) and _usable(metadata.get(METADATA_KEY)):  # an unusable one is refused before
        taken, bad = _filter_block(metadata, ids, unreadable)
        removed.from_metadata += taken
        removed.unreadable += bad
    for _, _, output_metadata in outputs_metadata(nb):
        if METADATA_KEY not in output_metadata:
            continue
        if not _usable(output_metadata[METADATA_KEY]):
            if unreadable:
                del output_metadata[METADATA_KEY]
                removed.unreadable += 1
            continue
        taken, bad = _filter_block(output_metadata, ids, unreadable)
        removed.from_outputs += taken
        removed.unreadable += bad
    return removed


def _usable(block: Any) -> bool:
    try:
        block_from_json(block, where="block")
    except InputError:
        return False
    return True


def _filter_block(holder: dict[str, Any], ids: set[str], unreadable: bool) -> tuple[int, int]:
    """Filter the records list of ``holder[METADATA_KEY]`` (a usable block); returns (records, unreadable) taken."""
    block = holder[METADATA_KEY]
    kept: list[Any] = []
    taken = bad = 0
    for item in block["records"]:
        readable = _readable(item)
        if readable is not None and readable.id in ids:
            taken += 1
        elif readable is None and unreadable:
            bad += 1
        else:
            kept.append(item)
    if taken or bad:
        if kept:
            block["records"] = kept
        else:
            del holder[METADATA_KEY]
    return taken, bad


def _readable(item: Any) -> StepRecord | None:
    try:
        return record_from_json(item)
    except InputError:
        return None


# Showing -----------------------------------------------------------------------------------------------------------


def tokens(record: StepRecord) -> int:
    """Input plus output tokens the live run spent (those its server said: none of a request that said no usage)."""
    return record.usage.input_tokens + record.usage.output_tokens


def usage_unknown(record: StepRecord) -> bool:
    """Whether a server answered some request of the recorded step without saying its usage."""
    return record.cost is not None and record.cost.usage_unknown


def shown_tokens(record: StepRecord) -> str:
    """``list``'s TOKENS: the count, ``unknown`` when no request said its usage, ``123+`` when only some did."""
    count = tokens(record)
    if not usage_unknown(record):
        return str(count)
    return f"{count}+" if count else "unknown"


def recorded_dollars(record: StepRecord) -> str:
    """What the recording says its step cost when recorded: dollars, ``price unknown``, ``usage unknown`` or ``-``.

    ``price unknown``: the model had no price; ``usage unknown``: its server said no usage; ``-``: none kept.
    """
    return record.cost.words() if record.cost is not None else "-"


@dataclass(frozen=True)
class CostTotals:
    """What a notebook's recordings cost when they were recorded, and what recording them again would cost today."""

    recorded_usd: float
    """The sum of the recorded costs that have a price."""
    recorded_unknown: int
    """Recordings whose cost was kept as "price unknown" (the model had no price)."""
    recorded_missing: int
    """Recordings of billed models that kept no cost (made before costs were kept)."""
    today_usd: float
    """What recording every step again would cost at today's rates, from each recording's tokens."""
    today_unknown: int
    """Recordings of billed models with no price today (left out of `today_usd`)."""
    rates_as_of: str
    """The day today's rates were taken."""
    billed: int = 0
    """Recordings of models that are billed (a scripted model is not)."""
    usage_unknown: int = 0
    """Recordings whose server said no usage for some request ("usage unknown"): no dollars recorded, and left out
    of today's sum too (their tokens are not known)."""

    def to_json(self) -> JsonObject:
        """The totals as ``list --json`` gives them."""
        return {
            "recorded_usd": self.recorded_usd,
            "recorded_unknown": self.recorded_unknown,
            "recorded_missing": self.recorded_missing,
            "today_usd": self.today_usd,
            "today_unknown": self.today_unknown,
            "today_rates": self.rates_as_of,
            **({"usage_unknown": self.usage_unknown} if self.usage_unknown else {}),  # only then, as before
        }

    def lines(self) -> list[str]:
        """The totals in words, for the table's foot (none when no recording is of a billed model)."""
        if not self.billed:
            return []
        recorded = f"recorded cost: {dollars(self.recorded_usd)}"
        if self.usage_unknown:
            recorded += f", and {self.usage_unknown} with usage unknown"
        if self.recorded_unknown:
            recorded += f", and {self.recorded_unknown} with price unknown"
        if self.recorded_missing:
            recorded += f", and {self.recorded_missing} recorded before costs were kept"
        today = f"re-recording every step today: {dollars(self.today_usd)} at the rates of {self.rates_as_of}"
        left_out = [
            f"{n} {why}"
            for n, why in (
                (self.usage_unknown, "with usage unknown"),
                (self.today_unknown, "on models with no price"),
            )
            if n
        ]
        if left_out:
            today += f" ({' and '.join(left_out)} left out)"
        return [recorded + ".", today + "."]


def cost_totals(records: list[StepRecord], prices: PriceTable) -> CostTotals:
    """The recorded and today's cost of ``records`` (a scripted step costs nothing either way).

    A partial record (a step still waiting) is left out: it kept no cost, and its tokens are not a whole step's. So
    is a failure record (a map item that failed or never ran): it is not a cost, and recording it again is a retry.
    A step whose server said no usage is counted apart from one whose model has no price: its tokens are not known,
    so it is priced neither then nor today. A step whose record keeps the rates the person gave its model
    (``free=True``, ``rates=``) is priced today at those, as when it was recorded.
    """
    recorded = today = 0.0
    unknown = missing = today_unknown = billed_count = no_usage = 0
    for r in records:
        if not r.finished:
            continue
        billed = prices.priced(r.backend)
        billed_count += billed
        if r.cost is None:
            missing += billed
        elif r.cost.usage_unknown:
            no_usage += 1
            continue
        elif r.cost.usd is None:
            unknown += 1
        else:
            recorded += r.cost.usd
        if billed:
            declared = declared_rates(r.engine)  # the person's word when recording (free=True, rates=...)
            now = declared.cost(r.usage) if declared is not None else prices.cost(r.backend, r.usage)
            if now is None:
                today_unknown += 1
            else:
                today += now
    return CostTotals(recorded, unknown, missing, today, today_unknown, prices.as_of, billed_count, no_usage)


def age(recorded_at: str, now: datetime.datetime) -> str:
    """How long ago ``recorded_at`` (ISO 8601; UTC when it names no zone) was: ``3 days ago``, or ``unknown``."""
    if not recorded_at:
        return "unknown"
    try:
        when = datetime.datetime.fromisoformat(recorded_at)
    except ValueError:
        return "unknown"
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    seconds = (now - when).total_seconds()
    if seconds < -60:
        return "in the future"
    if seconds < 60:
        return "just now"
    for unit, size in (
        ("year", 365 * 86400),
        ("month", 30 * 86400),
        ("week", 7 * 86400),
        ("day", 86400),
        ("hour", 3600),
        ("minute", 60),
    ):
        if seconds >= size and (unit != "month" or seconds >= 60 * 86400):
            n = int(seconds // size)
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now"  # unreachable: under a minute is handled above


# Control characters (escape sequences, bell, backspace, carriage return), Unicode format characters (bidirectional
# overrides, zero-width ones) and line or paragraph separators: what lets text retitle or clear a terminal, move
# its cursor, or hide or reorder other text.
_UNPRINTABLE = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))


def printable(text: str, *, keep: str = "") -> str:
    r"""``text`` safe to write to a terminal: each control or format character shown as its escape (ESC as ``\x1b``).

    Every command's output goes through it, since anything a notebook holds (a record's role or backend, an id, a
    file name, an error raised by its code) may come from someone else. ``keep`` names characters left as they are.
    """
    if text.isprintable():  # no character of those categories (nor a line break): the common case, quickly
        return text
    return "".join(ch if ch in keep or unicodedata.category(ch) not in _UNPRINTABLE else _escaped(ch) for ch in text)


def printable_json(value: object) -> str:
    """``value`` as indented JSON readable on a terminal: non-ASCII text kept, but `printable`'s characters escaped.

    ``json.dumps`` escapes only the C0 controls; C1 controls (a lone CSI) and bidirectional overrides would pass raw.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(
        ch if ch == "\n" or unicodedata.category(ch) not in _UNPRINTABLE else _json_escaped(ch) for ch in text
    )


def _json_escaped(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def table(rows: list[list[str]]) -> list[str]:
    """Rows as left-aligned columns two spaces apart (each cell made `printable`, its line breaks too)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
