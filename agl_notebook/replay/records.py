"""Step records: what a finished step leaves behind so it can replay, as JSON only.

The format (docs/recordings.md), version `FORMAT`::

    {"version": 1, "records": [record, ...]}          # notebook metadata["agl_notebook"], a JSON file, an output

    record = {"kind": "step", "format": 1, "id": ..., "parts": {part: digest}, "occurrence": n, "cell_id": ...,
              "role": ..., "backend": ..., "input": ..., "result": ..., "transcript": [...],
              "questions": [{"tool_call_id", "text", "inputs", "answer"}],
              "decisions": [{"tool_call_id", "tool", "decision", "always", "arguments"?, "message"?, "by"?}],
              "usage": {...}, "cost"?: {"usd": dollars or null, "rates": day}, "tape": [...], "engine": {...}?,
              "containers"?: [[messages, container id], ...], "recorded_at": ...,
              "partial": {"waiting": "approval" | "question", "tool_call_id": ..., "tool": ...}?,
              "cells"?: [{"id"?: cell id, "source": digest of the cell's source}], "cells_dropped"?: true,
              "scrubbed_blocks"?: [[message, block], ...], "views"?: n,
              "contents"?: {part: content}, "change"?: {...}, "replaced"?: record}

    failure record = {"kind": "failure", "format": 1, "id": ..., "parts": {...}, "occurrence": n, "cell_id"?: ...,
              "role": ..., "backend": ..., "input": ..., "recorded_at": ...,
              "failure": {"status": "failed" | "not_run", "type": <error class name>, "message": <scrubbed>},
              "cells"?: [...], "cells_dropped"?: true}

A step record holding a block kept as the API sent it (thinking and the rest, `RawBlock`; in its transcript or its
tape) is ``"format": 2`` (`KEPT_BLOCKS_FORMAT`), so a reader from before kept blocks keeps it aside instead of
replaying it without them; ``scrubbed_blocks`` says which kept blocks had a secret scrubbed out of their readable
text (docs/recordings.md, "Thinking and other kept blocks"). ``views`` is the version of the step's view that drew
the record when it was recorded (`VIEWS`), so a replay draws the same.

``contents``, ``change`` and ``replaced`` are a step's versions (docs/iterating.md, `agl_notebook.replay.versions`):
what its agent was told, what changed since its previous version, and the version a refresh replaced. Each is left
out when empty, and a reader from before them ignores them, so format 1 stays format 1.

``containers`` are the code execution containers the step's replies named, each with where it was first named (the
number of messages of the request that reply answered): a resumed or forked step's live requests send the container
its replayed turns named (docs/server-tools.md). Left out when none was, so records without it read as they did.

``decisions`` (approvals of tool calls), ``cost``, ``engine`` and ``partial`` came after format 1 was first written:
each is left out when empty, so records without them read as they did. A record with ``partial`` is the progress of
a step that was waiting for a person when it was kept (docs/recordings.md, "Partial records"): it is resumed, never
replayed. ``cost`` is what the step cost when it was recorded (docs/cost.md): a record without it shows no dollars,
and a step on a model that is never billed (a scripted one) has none. ``engine`` is what answered a step besides its
backend (a batch engine's batches), recorded, never fingerprinted. ``cells`` are the notebook cells that recorded
or replayed the step (`CellUse`), which ``agl-notebook gc`` judges a record's use by: a record without it was kept
before cells were (or outside a notebook), and is never judged unused by its cell.

A **failure record** (kind ``failure``, its own ``format``) is what a ``run.map`` item that failed, or that the map's
Stop left unrun, leaves under the id its finished record would have: the error's class name and its message,
scrubbed, then cut to `FAILURE_MESSAGE_CHARS`. It is read as a `StepRecord` whose ``failure`` is set (no result, no
transcript, no usage), so every store and file keeps it as it keeps records; only a map item in mode ``replay``
replays it (the engine, `agl_notebook.run._engine`). A reader from before failure records keeps it aside as a record
of a kind it does not know.

Reading never executes anything: it is `json` plus checks of each field's type. A record that fails the checks is
reported with its position and kept aside untouched, so writing the block back loses nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .._families import InputError
from .._fieldwise import Fieldwise
from .._scope import Decision, DecisionKind
from ..models.base import Usage
from ..payloads import JsonObject, JsonValue
from ..transcript import Message, RawBlock, message_from_json

if TYPE_CHECKING:
    from ..models.prices import RecordedCost

FORMAT = 1
"""The record format of a step whose replies hold only text and tool calls: what every version writes and reads."""
KEPT_BLOCKS_FORMAT = 2
"""The format of a record holding a block kept as the API sent it (thinking, redacted thinking, a type not read
here; `RawBlock`), in its transcript or its tape. A reader from before kept blocks reads format 1 only, so it keeps
such a record aside as unreadable, with a warning, instead of replaying it without its blocks. The fingerprint's
``format`` part stays `FORMAT`: a step recorded before kept blocks existed still replays."""
READ_FORMATS = (FORMAT, KEPT_BLOCKS_FORMAT)
"""The step record formats this version reads."""
VIEWS = 3
"""The version of the step's view this version draws: 2 added the code that forks a finished step at each turn,
3 an answer to a screen of several inputs as each input's label and value (`notebook/render.py`). A record keeps
the version that drew it (`StepRecord.views`); never part of the format or the fingerprint."""

FAILURE_FORMAT = 1
"""The format of failure records (kind ``failure``) this version writes and reads."""
RECORD_KINDS = ("step", "failure")
"""The ``kind`` of every record this version reads."""
FAILURE_MESSAGE_CHARS = 10_000
"""A failure record keeps at most this many characters of the error's message (scrubbed first, then cut)."""


@dataclass(frozen=True, eq=False, repr=False)
class RecordedQuestion(Fieldwise):
    """A question asked during a recorded step, with its answer."""

    tool_call_id: str
    """The tool call that asked it."""
    text: str
    """The screen's text."""
    inputs: tuple[str, ...]
    """The labels of its inputs."""
    answer: JsonValue
    """The answer as JSON."""


WaitingOn = Literal["approval", "question"]
"""What a waiting step waits for: a person's decision on a tool call, or their answer to a tool's question."""


@dataclass(frozen=True, eq=False, repr=False)
class Waiting(Fieldwise):
    """What the step of a partial record was waiting for when it was kept."""

    on: WaitingOn
    """A decision on the call (``approval``), or an answer to a question its handler asked (``question``)."""
    tool_call_id: str
    """The call waited on: the first call of the transcript's last assistant message without a result."""
    tool: str
    """The called tool's name."""


FailureStatus = Literal["failed", "not_run"]
"""How a map item ended without a result: it failed, or the map was stopped before it started."""


@dataclass(frozen=True, eq=False, repr=False)
class RecordedFailure(Fieldwise):
    """Why a map item has no result, as its failure record keeps it."""

    status: FailureStatus
    """``failed`` (it ran and raised), or ``not_run`` (the map's Stop kept it from starting)."""
    type: str
    """The class name of the error it ended with (``BudgetExceededError``, ``ItemNotRunError``, ...)."""
    message: str
    """The error's message, scrubbed of secrets, then cut to `FAILURE_MESSAGE_CHARS`."""


MAX_CELLS = 32
"""The most cells a record keeps (`StepRecord.cells`); past it the oldest go and the record says some went."""


@dataclass(frozen=True, eq=False, repr=False)
class CellUse(Fieldwise):
    """A notebook cell that recorded or replayed a step: its id, when known, and a digest of its source.

    The digest recognises the cell in a notebook rebuilt from a script (jupytext gives its cells new ids) and in a
    headless run, whose kernel is told no cell id.
    """

    cell_id: str | None
    """The cell's id (nbformat 4.5), or None when the kernel could not tell it."""
    source: str
    """`source_digest` of the cell's source when it ran the step."""

    def to_json(self) -> JsonObject:
        """``{"id"?: ..., "source": ...}``."""
        return {**({"id": self.cell_id} if self.cell_id is not None else {}), "source": self.source}


def source_digest(source: str) -> str:
    """A digest of a cell's source: 32 hex digits of its SHA-256, trailing spaces and blank edge lines aside.

    Those are what a round trip through a script (jupytext) or an editor may change without changing the code.
    """
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    text = "\n".join(lines).strip("\n")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def with_cells(record: StepRecord, uses: Iterable[CellUse], *, dropped: bool = False) -> StepRecord:
    """``record`` with ``uses`` added to its cells (``record`` itself when nothing is new).

    A cell with an id is kept once, with its latest source; a cell without one once per source. Past `MAX_CELLS`
    the oldest go, and the record says so (`StepRecord.cells_dropped`): it can no longer be proved unused.
    """
    cells = list(record.cells)
    for use in uses:
        if use.cell_id is None and any(c.source == use.source for c in cells):
            continue  # a cell known already (by its id too, perhaps), run headlessly
        same = next((i for i, c in enumerate(cells) if c.cell_id == use.cell_id), None) if use.cell_id else None
        if same is not None:
            if cells[same] == use:
                continue
            del cells[same]
        cells.append(use)
    dropped = dropped or record.cells_dropped or len(cells) > MAX_CELLS
    cells = cells[-MAX_CELLS:]
    if tuple(cells) == record.cells and dropped == record.cells_dropped:
        return record
    return dataclasses.replace(record, cells=tuple(cells), cells_dropped=dropped)


@dataclass(frozen=True, eq=False, repr=False)
class StepRecord(Fieldwise):
    """A finished step, as recorded."""

    id: str
    """The step's fingerprint id (with its occurrence)."""
    parts: dict[str, str]
    """A digest per fingerprint part, so a miss can say which part differs."""
    occurrence: int
    """Which identical step of its cell execution (or Run) this was, from 0."""
    role: str
    """The role's name."""
    backend: str
    """What the record claims it was made with: ``anthropic:<model id>`` or ``scripted:<digest>``."""
    input: JsonValue
    """The step's input as JSON."""
    result: JsonValue
    """The reported payload as JSON, or None."""
    transcript: tuple[Message, ...]
    """The whole conversation."""
    questions: tuple[RecordedQuestion, ...] = ()
    """Questions asked and their answers."""
    decisions: tuple[Decision, ...] = ()
    """Decisions on tool calls that needed approval (what an edit changed is not kept: a replay works it out)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the live run spent."""
    cell_id: str | None = None
    """The notebook cell that ran the step, when known."""
    recorded_at: str = ""
    """When it was recorded (ISO 8601, UTC); shown by the command line, never in a view."""
    tape: tuple[JsonValue, ...] = ()
    """A unit of work's effects in order (model replies, API responses, answers), which replay it; empty for a
    step, whose transcript replays it."""
    cost: RecordedCost | None = None
    """What the live run cost, priced when it was recorded (None: a record from before costs were kept, or a model
    that is never billed); views show it as it is, never priced again."""
    engine: JsonObject | None = None
    """What answered the step when not its backend's live API alone (the Message Batches engine: ``{"engine":
    "batches", "answered_by": [batch id or "live", ...]}``); None for a live step. Never part of the fingerprint."""
    containers: tuple[tuple[int, str], ...] = ()
    """The code execution containers its replies named: ``(messages, id)``, the reply to the request of ``messages``
    messages first naming ``id`` (`agl_notebook.loop.LoopOutcome.containers`). Never part of the fingerprint."""
    partial: Waiting | None = None
    """Set on a partial record: the step's progress so far, kept while it waits for a person; None when finished.
    Its transcript ends with the assistant message holding the call waited on (then, when some calls of that
    message finished before it, a user message of their results); its result is None."""
    failure: RecordedFailure | None = None
    """Set on a failure record (kind ``failure``): a map item that failed or never ran; None on a step's record."""

    cells: tuple[CellUse, ...] = ()
    """The notebook cells that recorded or replayed it, oldest first (empty: kept outside a notebook, or by a version
    from before cells were kept). Never part of the fingerprint."""
    cells_dropped: bool = False
    """More than `MAX_CELLS` cells used it, and the oldest were dropped from `cells`."""

    scrubbed_blocks: tuple[tuple[int, int], ...] = ()
    """Where scrubbing a secret changed a kept block's readable text (its thinking): ``(message, block)`` indexes into
    the transcript. Such a block no longer matches its signature, so the API would refuse it: the record replays,
    but a partial record with any is never resumed (`resume_refusal`)."""
    views: int = VIEWS
    """Which version of the step's view drew it when it was recorded (`VIEWS`; 1 for a record without the field).
    A replay draws what that version drew, so a notebook saved before the view gained a part still replays equal to
    its saved outputs under nbval."""

    contents: JsonObject = field(default_factory=dict)
    """The contents of the parts a person edits (instructions, tools, reporting, settings), each left out when
    another record of the notebook keeps the same digest's (`agl_notebook.replay.versions`). Never fingerprinted."""
    change: JsonObject | None = None
    """What changed since the step's previous version (`versions.change_summary`), drawn by its view; None: none."""
    replaced: StepRecord | None = None
    """The previous version a run in mode ``refresh`` replaced, kept inside this record (never replayed)."""
    kind: str = field(default="step", init=False)
    format: int = field(default=FORMAT, init=False)

    def __post_init__(self) -> None:
        if self.failure is not None:
            object.__setattr__(self, "kind", "failure")
            object.__setattr__(self, "format", FAILURE_FORMAT)
        elif holds_kept_blocks(self.transcript, self.tape):
            object.__setattr__(self, "format", KEPT_BLOCKS_FORMAT)

    @property
    def finished(self) -> bool:
        """A finished step's record: neither the progress of a waiting step nor a failure record."""
        return self.partial is None and self.failure is None

    def to_json(self) -> JsonObject:
        """The record's JSON."""
        from ..transcript import messages_to_json

        if self.failure is not None:
            return self._failure_json(self.failure)
        blobs: dict[str, JsonValue] = {}
        # Empty questions, a missing cell id and zero token counts are left out: a notebook holds many records,
        # and a reader fills in the same defaults.
        data: JsonObject = {
            "kind": self.kind,
            "format": self.format,
            "id": self.id,
            "parts": dict(self.parts),
            "occurrence": self.occurrence,
            "role": self.role,
            "backend": self.backend,
            "input": self.input,
            "result": self.result,
            "transcript": messages_to_json(self.transcript, blobs),
        }
        if blobs:  # each image's or document's bytes once, by digest, however often the transcript names them
            data["blobs"] = dict(sorted(blobs.items()))
        if self.cell_id is not None:
            data["cell_id"] = self.cell_id
        if self.questions:
            data["questions"] = [
                {"tool_call_id": q.tool_call_id, "text": q.text, "inputs": list(q.inputs), "answer": q.answer}
                for q in self.questions
            ]
        if self.decisions:
            data["decisions"] = [_decision_json(d) for d in self.decisions]
        usage: JsonObject = {
            name: getattr(self.usage, name) for name in _USAGE_FIELDS_IN_ORDER if getattr(self.usage, name)
        }
        if usage:
            data["usage"] = usage
        if self.cost is not None:
            cost: JsonObject = {"usd": self.cost.usd, "rates": self.cost.rates_as_of}
            if self.cost.usage_unknown:
                cost["usage"] = "unknown"  # a server said no usage (docs/cost.md)
            data["cost"] = cost
        if self.tape:
            data["tape"] = list(self.tape)
        if self.engine is not None:
            data["engine"] = dict(self.engine)
        if self.containers:
            data["containers"] = [[k, container] for k, container in self.containers]
        data["recorded_at"] = self.recorded_at
        if self.partial is not None:
            p = self.partial
            data["partial"] = {"waiting": p.on, "tool_call_id": p.tool_call_id, "tool": p.tool}
        if self.cells:
            data["cells"] = [c.to_json() for c in self.cells]
        if self.cells_dropped:
            data["cells_dropped"] = True
        if self.scrubbed_blocks:
            data["scrubbed_blocks"] = [[m, b] for m, b in self.scrubbed_blocks]
        if self.views != 1:
            data["views"] = self.views
        if self.contents:
            data["contents"] = dict(self.contents)
        if self.change is not None:
            data["change"] = dict(self.change)
        if self.replaced is not None:
            data["replaced"] = self.replaced.to_json()
        return data

    def _failure_json(self, failure: RecordedFailure) -> JsonObject:
        # Only what names the item and why it failed: no result, transcript, usage or cost (it is not a cost).
        data: JsonObject = {
            "kind": self.kind,
            "format": self.format,
            "id": self.id,
            "parts": dict(self.parts),
            "occurrence": self.occurrence,
            "role": self.role,
            "backend": self.backend,
            "input": self.input,
        }
        if self.cell_id is not None:
            data["cell_id"] = self.cell_id
        data["recorded_at"] = self.recorded_at
        data["failure"] = {"status": failure.status, "type": failure.type, "message": failure.message}
        if self.cells:  # the cells that ran the item, as a step's record keeps them (gc judges its use by them)
            data["cells"] = [c.to_json() for c in self.cells]
        if self.cells_dropped:
            data["cells_dropped"] = True
        if self.change is not None:
            data["change"] = dict(self.change)
        return data


def recorded_failure(status: FailureStatus, error: BaseException, secrets: Sequence[str] = ()) -> RecordedFailure:
    """What a failure record keeps of ``error``: its class name and its message, scrubbed before it is cut."""
    from .._secrets import scrub_text, secrets_from_environment

    message = scrub_text(str(error), (*secrets_from_environment(), *secrets))
    if len(message) > FAILURE_MESSAGE_CHARS:
        cut = len(message) - FAILURE_MESSAGE_CHARS
        message = message[:FAILURE_MESSAGE_CHARS] + f"\u2026 ({cut:,} more characters not recorded)"
    return RecordedFailure(status, _error_name(error), message)


def _error_name(error: BaseException) -> str:
    """The class name an error is shown with (a replayed failure's is the one it recorded)."""
    recorded = getattr(error, "type_name", None)
    return recorded if isinstance(recorded, str) and recorded else type(error).__name__


def record_from_json(data: JsonValue, *, where: str = "record") -> StepRecord:
    """Read a record, checking every field; an `InputError` names the first thing wrong and where."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object.")
    if data.get("kind") == "failure":
        return _failure_record(data, where)
    if data.get("kind") != "step":
        raise InputError(f"{where}.kind: expected 'step' or 'failure', got {data.get('kind')!r}.")
    if data.get("format") not in READ_FORMATS or isinstance(data.get("format"), bool):
        raise InputError(
            f"{where}.format: this version reads formats {' and '.join(map(str, READ_FORMATS))}, the record has "
            f"{data.get('format')!r}."
        )
    parts = data.get("parts")
    if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
        raise InputError(f"{where}.parts: expected an object of digests.")
    transcript = data.get("transcript")
    if not isinstance(transcript, list):
        raise InputError(f"{where}.transcript: expected a list of messages.")
    blobs = data.get("blobs", {})
    if not isinstance(blobs, dict):
        raise InputError(f"{where}.blobs: expected an object of base64 texts by digest.")
    questions = data.get("questions", [])
    if not isinstance(questions, list):
        raise InputError(f"{where}.questions: expected a list.")
    decisions = data.get("decisions", [])
    if not isinstance(decisions, list):
        raise InputError(f"{where}.decisions: expected a list.")
    usage = data.get("usage", {})
    if not isinstance(usage, dict) or not all(isinstance(v, int) for v in usage.values()):
        raise InputError(f"{where}.usage: expected an object of token counts.")
    tape = data.get("tape", [])
    if not isinstance(tape, list):
        raise InputError(f"{where}.tape: expected a list of effects.")
    engine = data.get("engine")
    if engine is not None and not isinstance(engine, dict):
        raise InputError(f"{where}.engine: expected an object (what answered the step).")
    cell_id = data.get("cell_id")
    occurrence = data.get("occurrence")
    if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
        raise InputError(f"{where}.occurrence: expected a whole number >= 0.")
    return StepRecord(
        id=_string(data, "id", where),
        parts={str(k): str(v) for k, v in parts.items()},
        occurrence=occurrence,
        role=_string(data, "role", where),
        backend=_string(data, "backend", where),
        input=data.get("input"),
        result=data.get("result"),
        transcript=tuple(
            message_from_json(m, where=f"{where}.transcript[{i}]", blobs=blobs) for i, m in enumerate(transcript)
        ),
        questions=tuple(_question(q, f"{where}.questions[{i}]") for i, q in enumerate(questions)),
        decisions=tuple(_decision(d, f"{where}.decisions[{i}]") for i, d in enumerate(decisions)),
        usage=Usage(**{k: int(v) for k, v in usage.items() if k in _USAGE_FIELDS}),  # type: ignore[arg-type]
        cell_id=cell_id if isinstance(cell_id, str) else None,
        recorded_at=str(data.get("recorded_at", "")),
        tape=tuple(tape),
        cost=_cost(data.get("cost"), f"{where}.cost"),
        engine=engine,
        containers=_containers(data.get("containers", []), f"{where}.containers"),
        partial=_waiting(data["partial"], f"{where}.partial") if "partial" in data else None,
        cells=_cells(data.get("cells", []), f"{where}.cells"),
        cells_dropped=data.get("cells_dropped") is True,
        scrubbed_blocks=_scrubbed_blocks(data.get("scrubbed_blocks", []), f"{where}.scrubbed_blocks"),
        views=_views(data.get("views", 1), f"{where}.views"),
        contents=_object(data.get("contents", {}), f"{where}.contents") or {},
        change=_object(data.get("change"), f"{where}.change"),
        replaced=record_from_json(data["replaced"], where=f"{where}.replaced") if "replaced" in data else None,
    )


def _object(data: JsonValue, where: str) -> JsonObject | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object.")
    return data


def holds_kept_blocks(transcript: Sequence[Message], tape: Sequence[JsonValue] = ()) -> bool:
    """Whether a transcript or a tape holds a block kept as the API sent it (a record of `KEPT_BLOCKS_FORMAT`)."""
    for message in transcript:  # loops, not a generator: every record read passes here
        for block in message.content:
            if type(block) is RawBlock:
                return True
    return any(tape_kept_blocks(entry) for entry in tape) if tape else False


def tape_kept_blocks(entry: JsonValue) -> list[JsonObject]:
    """The events of a tape entry that keep a reply's block or its thinking (``{"block": ...}``, ``{"thinking": ...}``).

    A model reply's entry is ``{"kind": "model", "events": [...]}`` (`agl_notebook.functions._tape`).
    """
    events = entry.get("events") if isinstance(entry, dict) else None
    if not isinstance(events, list):
        return []
    return [e for e in events if isinstance(e, dict) and ("block" in e or "thinking" in e)]


def resume_refusal(record: StepRecord, role: str) -> str | None:
    """Why a partial record cannot be resumed, or None when it can.

    A kept block whose readable text had a secret scrubbed out would not go back as the API sent it: a thinking block
    no longer matches its signature (the API would refuse the request), a server tool's result says ``[REDACTED]``
    where the API's own text was. So the step must run again from the start instead; the message names each block.
    """
    if not record.scrubbed_blocks:
        return None
    kinds = [_kept_type(record, m, b) for m, b in record.scrubbed_blocks]
    if all(kind in ("thinking", "redacted_thinking") for kind in kinds):
        places = ", ".join(f"message {m} block {b}" for m, b in record.scrubbed_blocks)
        what = f"the model's thinking before it was kept ({places}), so that thinking no longer matches its signature"
        why = "and the API would refuse it when it is sent back"
    else:  # a server tool's result, say: nothing signs it, but it would not go back as the API sent it
        named = zip(kinds, record.scrubbed_blocks, strict=True)
        places = ", ".join(f"{kind} (message {m} block {b})" for kind, (m, b) in named)
        what = f"blocks the API sent before they were kept ({places}), so they would not go back as the API sent them"
        why = "(a thinking block among them no longer matches its signature)" if "thinking" in kinds else ""
    return (
        f"The partial record {record.id} of role {role!r} cannot be resumed: a secret was scrubbed out of {what}"
        f"{' ' + why if why else ''}. Run the step in mode 'refresh' to run it again from the start (its new records "
        "replace this one)."
    )


def _kept_type(record: StepRecord, message: int, block: int) -> str:
    """The type of the kept block at ``(message, block)`` of the record's transcript (``a block`` if none is)."""
    try:
        kept = record.transcript[message].content[block]
    except IndexError:
        return "a block"
    return str(kept.data.get("type")) if isinstance(kept, RawBlock) else "a block"


def _views(data: JsonValue, where: str) -> int:
    if not isinstance(data, int) or isinstance(data, bool) or data < 1:
        raise InputError(f"{where}: expected a whole number >= 1, got {data!r}.")
    return data


def _scrubbed_blocks(data: JsonValue, where: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(data, list):
        raise InputError(f"{where}: expected a list of [message, block] indexes.")
    places: list[tuple[int, int]] = []
    for i, item in enumerate(data):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in item)
        ):
            raise InputError(f"{where}[{i}]: expected [message index, block index], whole numbers >= 0.")
        places.append((int(item[0]), int(item[1])))  # type: ignore[arg-type]
    return tuple(places)


def _containers(data: JsonValue, where: str) -> tuple[tuple[int, str], ...]:
    if not isinstance(data, list):
        raise InputError(f"{where}: expected a list of [messages, container id].")
    named: list[tuple[int, str]] = []
    for i, item in enumerate(data):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], int)
            and not isinstance(item[0], bool)
            and item[0] >= 1
            and isinstance(item[1], str)
            and item[1]
        ):
            raise InputError(f"{where}[{i}]: expected [messages, container id], a whole number >= 1 and a text.")
        named.append((item[0], item[1]))
    return tuple(named)


def _failure_record(data: dict[str, JsonValue], where: str) -> StepRecord:
    """A failure record (kind ``failure``), every field checked."""
    if data.get("format") != FAILURE_FORMAT:
        raise InputError(
            f"{where}.format: this version reads failure records of format {FAILURE_FORMAT}, the record has "
            f"{data.get('format')!r}."
        )
    parts = data.get("parts")
    if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
        raise InputError(f"{where}.parts: expected an object of digests.")
    occurrence = data.get("occurrence")
    if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
        raise InputError(f"{where}.occurrence: expected a whole number >= 0.")
    failure = data.get("failure")
    if not isinstance(failure, dict):
        raise InputError(f"{where}.failure: expected an object with 'status', 'type' and 'message'.")
    status = failure.get("status")
    if status not in ("failed", "not_run"):
        raise InputError(f"{where}.failure.status: expected 'failed' or 'not_run', got {status!r}.")
    message = failure.get("message")
    if not isinstance(message, str):
        raise InputError(f"{where}.failure.message: expected a string.")
    cell_id = data.get("cell_id")
    return StepRecord(
        id=_string(data, "id", where),
        parts={str(k): str(v) for k, v in parts.items()},
        occurrence=occurrence,
        role=_string(data, "role", where),
        backend=_string(data, "backend", where),
        input=data.get("input"),
        result=None,
        transcript=(),
        cell_id=cell_id if isinstance(cell_id, str) else None,
        recorded_at=str(data.get("recorded_at", "")),
        cells=_cells(data.get("cells", []), f"{where}.cells"),
        cells_dropped=data.get("cells_dropped") is True,
        failure=RecordedFailure(
            "failed" if status == "failed" else "not_run", _string(failure, "type", f"{where}.failure"), message
        ),
        change=_object(data.get("change"), f"{where}.change"),
    )


def _cells(data: JsonValue, where: str) -> tuple[CellUse, ...]:
    if not isinstance(data, list):
        raise InputError(f"{where}: expected a list of cells.")
    cells: list[CellUse] = []
    for i, item in enumerate(data):
        cell_id = item.get("id") if isinstance(item, dict) else None
        source = item.get("source") if isinstance(item, dict) else None
        if not isinstance(source, str) or not (cell_id is None or isinstance(cell_id, str)):
            raise InputError(f'{where}[{i}]: expected {{"id": a cell id (optional), "source": a digest}}.')
        cells.append(CellUse(cell_id or None, source))
    return tuple(cells)


def _cost(data: JsonValue, where: str) -> RecordedCost | None:
    if data is None:
        return None
    usd = data.get("usd") if isinstance(data, dict) else None
    rates = data.get("rates") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or isinstance(usd, bool)
        or not (usd is None or (isinstance(usd, int | float) and usd >= 0))
        or not isinstance(rates, str)
    ):
        raise InputError(f'{where}: expected {{"usd": dollars >= 0 or null, "rates": the rates\' day}}.')
    from ..models.prices import RecordedCost  # the first record that has a cost loads the prices

    return RecordedCost(None if usd is None else float(usd), rates, data.get("usage") == "unknown")


_USAGE_FIELDS_IN_ORDER = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_1h_input_tokens",
    "web_search_requests",
    "web_fetch_requests",
)
_USAGE_FIELDS = set(_USAGE_FIELDS_IN_ORDER)


@dataclass(frozen=True, eq=False, repr=False)
class RecordsBlock(Fieldwise):
    """A block of records as read: the good records, and what could not be read (kept as it was)."""

    records: tuple[StepRecord, ...]
    """The records that read cleanly, in order."""
    unreadable: tuple[JsonValue, ...] = ()
    """Records that did not, kept verbatim so writing the block back loses nothing."""
    problems: tuple[str, ...] = ()
    """What was wrong with each unreadable record, or with the block."""


def block_from_json(data: JsonValue, *, where: str) -> RecordsBlock:
    """Read ``{"version": 1, "records": [...]}``.

    Raises:
        InputError: The block itself is unusable (not an object, another version, no list of records).
    """
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object with 'version' and 'records'. Found {_shape(data)}.")
    if "version" not in data:
        raise InputError(f"{where}.version: missing; this version of agl_notebook reads version {FORMAT}.")
    version = data["version"]
    if version != FORMAT or isinstance(version, bool):
        raise InputError(
            f"{where}.version: this version of agl_notebook reads version {FORMAT}, found "
            f"{version!r}{' (a string)' if isinstance(version, str) else ''}."
        )
    raw = data.get("records")
    if not isinstance(raw, list):
        raise InputError(f"{where}.records: expected a list. Found {_shape(raw)}.")
    good: list[StepRecord] = []
    bad: list[JsonValue] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        try:
            good.append(record_from_json(item, where=f"{where}.records[{i}]"))
        except InputError as e:
            bad.append(item)
            problems.append(str(e))
    return RecordsBlock(tuple(good), tuple(bad), tuple(problems))


def block_to_json(records: Sequence[StepRecord], unreadable: Sequence[JsonValue] = ()) -> JsonObject:
    """Write ``{"version": 1, "records": [...]}``, the unreadable records kept after the good ones."""
    written: list[JsonValue] = [r.to_json() for r in records]
    return {"version": FORMAT, "records": written + list(unreadable)}


def _shape(value: JsonValue) -> str:
    """What a value that should have been an object or a list is, in words, for a message."""
    if isinstance(value, str):
        size = f"a string of {len(value):,} characters"
        if not value.lstrip().startswith(("{", "[")):
            return size
        try:
            json.loads(value)
        except json.JSONDecodeError as e:
            return f"{size} holding JSON cut short or broken (line {e.lineno}, column {e.colno}: {e.msg})"
        except ValueError:  # a number of more than 4,300 digits
            return f"{size} holding JSON with a number too long to read"
        except RecursionError:
            return f"{size} holding JSON nested too deeply to read"
        return f"{size} holding JSON: the block was saved as text instead of as an object"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a list" if isinstance(value, list) else "an object"


def _string(data: dict[str, JsonValue], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}.{key}: expected a non-empty string.")
    return value


def _question(data: JsonValue, where: str) -> RecordedQuestion:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object.")
    inputs = data.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise InputError(f"{where}.inputs: expected a list of labels.")
    return RecordedQuestion(
        _string(data, "tool_call_id", where),
        _string(data, "text", where),
        tuple(str(i) for i in inputs),
        data.get("answer"),
    )


def _waiting(data: JsonValue, where: str) -> Waiting:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object saying what the step waits for.")
    on = data.get("waiting")
    if on not in ("approval", "question"):
        raise InputError(f"{where}.waiting: expected 'approval' or 'question', got {on!r}.")
    return Waiting(
        "approval" if on == "approval" else "question",
        _string(data, "tool_call_id", where),
        _string(data, "tool", where),
    )


def _decision_json(d: Decision) -> JsonObject:
    data: JsonObject = {"tool_call_id": d.tool_call_id, "tool": d.tool, "decision": d.decision, "always": d.always}
    if d.arguments is not None:
        data["arguments"] = d.arguments
    if d.message:
        data["message"] = d.message
    if d.by != "person":
        data["by"] = d.by
    return data


_DECISIONS: tuple[DecisionKind, ...] = ("approve", "edit", "deny")


def _decision(data: JsonValue, where: str) -> Decision:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object.")
    decision = next((d for d in _DECISIONS if d == data.get("decision")), None)
    if decision is None:
        raise InputError(f"{where}.decision: expected one of {', '.join(_DECISIONS)}, got {data.get('decision')!r}.")
    always, arguments = data.get("always", False), data.get("arguments")
    message, by = data.get("message", ""), data.get("by", "person")
    if not isinstance(always, bool):
        raise InputError(f"{where}.always: expected true or false.")
    if decision == "edit" and not isinstance(arguments, dict):
        raise InputError(f"{where}.arguments: an edit keeps the arguments it ran with, as an object.")
    if not isinstance(message, str):
        raise InputError(f"{where}.message: expected a string.")
    if not isinstance(by, str) or not by:
        raise InputError(f"{where}.by: expected a non-empty string.")
    return Decision(
        _string(data, "tool_call_id", where),
        _string(data, "tool", where),
        decision,
        always,
        arguments if isinstance(arguments, dict) else None,
        message,
        by,
    )
