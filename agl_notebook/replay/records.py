"""Step records: what a finished step leaves behind so it can replay, as JSON only.

The format (docs/recordings.md), version `FORMAT`::

    {"version": 1, "records": [record, ...]}          # notebook metadata["agl_notebook"], a JSON file, an output

    record = {"kind": "step", "format": 1, "id": ..., "parts": {part: digest}, "occurrence": n, "cell_id": ...,
              "role": ..., "backend": ..., "input": ..., "result": ..., "transcript": [...],
              "questions": [{"tool_call_id", "text", "inputs", "answer"}],
              "decisions": [{"tool_call_id", "tool", "decision", "always", "arguments"?, "message"?, "by"?}],
              "usage": {...}, "cost"?: {"usd": dollars or null, "rates": day}, "tape": [...], "engine": {...}?,
              "recorded_at": ..., "partial": {"waiting": "approval" | "question", "tool_call_id": ..., "tool": ...}?}

``decisions`` (approvals of tool calls), ``cost``, ``engine`` and ``partial`` came after format 1 was first written:
each is left out when empty, so records without them read as they did. A record with ``partial`` is the progress of
a step that was waiting for a person when it was kept (docs/recordings.md, "Partial records"): it is resumed, never
replayed. ``cost`` is what the step cost when it was recorded (docs/cost.md): a record without it shows no dollars,
and a step on a model that is never billed (a scripted one) has none. ``engine`` is what answered a step besides its
backend (a batch engine's batches), recorded, never fingerprinted.

Reading never executes anything: it is `json` plus checks of each field's type. A record that fails the checks is
reported with its position and kept aside untouched, so writing the block back loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .._families import InputError
from .._fieldwise import Fieldwise
from .._scope import Decision, DecisionKind
from ..models.base import Usage
from ..payloads import JsonObject, JsonValue
from ..transcript import Message, message_from_json

if TYPE_CHECKING:
    from ..models.prices import RecordedCost

FORMAT = 1
"""The record format this version writes and reads."""


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
    partial: Waiting | None = None
    """Set on a partial record: the step's progress so far, kept while it waits for a person; None when finished.
    Its transcript ends with the assistant message holding the call waited on (then, when some calls of that
    message finished before it, a user message of their results); its result is None."""
    kind: str = field(default="step", init=False)
    format: int = field(default=FORMAT, init=False)

    def to_json(self) -> JsonObject:
        """The record's JSON."""
        from ..transcript import messages_to_json

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
            "transcript": messages_to_json(self.transcript),
        }
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
            data["cost"] = {"usd": self.cost.usd, "rates": self.cost.rates_as_of}
        if self.tape:
            data["tape"] = list(self.tape)
        if self.engine is not None:
            data["engine"] = dict(self.engine)
        data["recorded_at"] = self.recorded_at
        if self.partial is not None:
            p = self.partial
            data["partial"] = {"waiting": p.on, "tool_call_id": p.tool_call_id, "tool": p.tool}
        return data


def record_from_json(data: JsonValue, *, where: str = "record") -> StepRecord:
    """Read a record, checking every field; an `InputError` names the first thing wrong and where."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object.")
    if data.get("kind") != "step":
        raise InputError(f"{where}.kind: expected 'step', got {data.get('kind')!r}.")
    if data.get("format") != FORMAT:
        raise InputError(f"{where}.format: this version reads format {FORMAT}, the record has {data.get('format')!r}.")
    parts = data.get("parts")
    if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
        raise InputError(f"{where}.parts: expected an object of digests.")
    transcript = data.get("transcript")
    if not isinstance(transcript, list):
        raise InputError(f"{where}.transcript: expected a list of messages.")
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
        transcript=tuple(message_from_json(m, where=f"{where}.transcript[{i}]") for i, m in enumerate(transcript)),
        questions=tuple(_question(q, f"{where}.questions[{i}]") for i, q in enumerate(questions)),
        decisions=tuple(_decision(d, f"{where}.decisions[{i}]") for i, d in enumerate(decisions)),
        usage=Usage(**{k: int(v) for k, v in usage.items() if k in _USAGE_FIELDS}),  # type: ignore[arg-type]
        cell_id=cell_id if isinstance(cell_id, str) else None,
        recorded_at=str(data.get("recorded_at", "")),
        tape=tuple(tape),
        cost=_cost(data.get("cost"), f"{where}.cost"),
        engine=engine,
        partial=_waiting(data["partial"], f"{where}.partial") if "partial" in data else None,
    )


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

    return RecordedCost(None if usd is None else float(usd), rates)


_USAGE_FIELDS_IN_ORDER = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_1h_input_tokens",
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
