"""Forking a step at a turn: its first turns taken from a record, the rest asked live (docs/forking.md).

A fork is a resume with a cut. `StepPlan.fork_live` runs the loop on a `ForkingModel`, which answers the first
``at_turn`` replies from the record and asks the live model from then on, with tools that give the recorded results
of the replayed turns' calls (no handler runs; their questions and decisions are told as recorded). What would make
the replayed turns other than recorded is refused before any request (`fork_refusal`), and the first live request is
checked to carry them exactly as recorded (`ForkingModel`): a divergence the checks did not foresee (a tool whose
payload changed, so a recorded call is now rejected) is refused there, still before the request is sent.

The fork is a record of its own: ``fork`` (the record forked and the turn) is a part of its fingerprint, and its
record keeps the same in ``engine["fork"]``. It replays like any record; the point where its live turns began is
told (``step.forked``) at the same place live and replayed, so its view is the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..models.base import Model, ModelEvent, ModelRequest, Thinking, model_intercepts_markup
from ..payloads import JsonObject, JsonValue, payload_spec
from ..replay.records import StepRecord
from ..transcript import Message, RawBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from ..replay.stores import Store
    from ..roles import Role

_THINKING_TYPES = ("thinking", "redacted_thinking")


@dataclass
class Fork:
    """Where a forked step's first turns come from: a record (by id, or found for a map's item) and how many turns."""

    at_turn: int
    """How many model turns (replies) are replayed from the record; the next one is asked live."""
    record_id: str | None = None
    """The record forked, by id (a step's fork)."""
    record: StepRecord | None = None
    """The record forked, when it was handed over whole."""
    store: Store | None = None
    """Where the record is looked up."""
    map_key: str | None = None
    """A map item's fork: the key of the map forked, whose item of the same input and occurrence is the record."""
    occurrence: int = 0
    """A map item's fork: which identical item of the forked map (its repeats, duplicate inputs) is the record."""
    source: StepRecord | None = field(default=None, init=False)
    """The record forked, once found."""

    def part(self) -> JsonValue:
        """The fingerprint's ``fork`` part: which record, and at which turn."""
        if self.map_key is not None:
            return {"map": self.map_key, "occurrence": self.occurrence, "at_turn": self.at_turn}
        return {"from": self.record_id, "at_turn": self.at_turn}

    def engine(self) -> JsonObject:
        """What the fork's record keeps in ``engine["fork"]``."""
        source = self.source
        forked: JsonObject = {"from": source.id if source is not None else self.record_id, "at_turn": self.at_turn}
        if self.map_key is not None:
            forked["map"] = self.map_key
        return forked

    def find(self, role: Role[Any], input_json: JsonValue) -> StepRecord:
        """The record forked; an `InputError` when there is none, or it is not a finished step's record."""
        record = self.record
        if record is None and self.store is not None and self.record_id is not None:
            record = self.store.get(self.record_id)
        if record is None and self.store is not None and self.map_key is not None:
            record = _map_item_record(self.store, role.name, input_json, self.occurrence)
        if record is None:
            if self.map_key is not None:
                raise InputError(
                    f"Cannot fork: the map {self.map_key!r} has no record of role {role.name!r} for this input "
                    f"(occurrence {self.occurrence}); run that map first, or fork another."
                )
            raise InputError(
                f"Cannot fork: no record {self.record_id!r} in {self.store!r}. fork_from takes the id of a finished "
                "step's record in this Run's store (the id in the step's view, or `agl-notebook list`)."
            )
        if record.failure is not None:
            raise InputError(
                f"Cannot fork the record {record.id} of role {record.role!r}: it is a map item's failure record "
                f"({record.failure.type}), which keeps no turns."
            )
        if record.partial is not None:
            raise InputError(
                f"Cannot fork the record {record.id} of role {record.role!r}: it is partial (the step was waiting "
                f"for a person on its call to {record.partial.tool!r} and never finished). Resume it first by "
                "running its cell again, then fork the finished record."
            )
        self.source = record
        return record


class MapFork:
    """A map's fork of a previous map: each item forks that map's record of the same input and occurrence."""

    def __init__(self, key: str, at_turn: int, store: Store) -> None:
        self.key = key
        self.at_turn = at_turn
        self.store = store
        self._seen: dict[str, int] = {}

    @classmethod
    def of(cls, fork_from: object, at_turn: object, store: Store) -> MapFork:
        """The fork ``run.map(fork_from=..., at_turn=...)`` asks for, its options checked."""
        from ..replay.stores import map_store

        if fork_from is None:
            raise InputError("run.map(): at_turn forks a previous map: give fork_from=<its results or its name> too.")
        key = getattr(fork_from, "key", fork_from)
        if not isinstance(key, str) or not key.strip():
            raise InputError(
                f"run.map(): fork_from takes a previous map's results or its name, not {type(fork_from).__name__}."
            )
        check_fork_options(key, at_turn, where="run.map()")
        assert isinstance(at_turn, int)
        return cls(key, at_turn, map_store(store, key))

    @property
    def name(self) -> str:
        """The forked map's name, unless one is given."""
        return f"{self.key}-at-turn-{self.at_turn}"

    def item(self, value: object) -> Fork:
        """The fork of the next item of ``value``.

        Items are planned in input (then repeat) order, so the k-th item of an input forks that input's k-th record
        (its occurrence).
        """
        from .._canonical import canonical_json
        from ..payloads import dump

        input_json = value if isinstance(value, str) else dump(value)
        seen = canonical_json(input_json)
        occurrence = self._seen[seen] = self._seen.get(seen, -1) + 1
        return Fork(self.at_turn, store=self.store, map_key=self.key, occurrence=occurrence)


def check_fork_options(fork_from: object, at_turn: object, *, where: str) -> None:
    """Refuse a fork's options of the wrong type, where they were given."""
    if at_turn is None:
        raise InputError(f"{where}: fork_from needs at_turn, the number of model turns to replay (0 or more).")
    if isinstance(at_turn, bool) or not isinstance(at_turn, int) or at_turn < 0:
        raise InputError(f"{where}: at_turn takes a whole number of model turns, 0 or more, not {at_turn!r}.")
    if not isinstance(fork_from, str | StepRecord) or (isinstance(fork_from, str) and not fork_from.strip()):
        given = "an empty string" if isinstance(fork_from, str) else type(fork_from).__name__
        raise InputError(f"{where}: fork_from takes a record id (a string) or a StepRecord, not {given}.")


def turns(transcript: Sequence[Message]) -> int:
    """How many model turns (replies kept as assistant messages) a transcript holds."""
    return sum(1 for m in transcript if m.role == "assistant")


def prefix_length(transcript: Sequence[Message], at_turn: int) -> int:
    """How many messages of ``transcript`` the first ``at_turn`` turns make.

    That is up to the next reply: their results, and a reminder, included.
    """
    seen = 0
    for index, message in enumerate(transcript):
        if message.role == "assistant":
            if seen == at_turn:
                return index
            seen += 1
    return len(transcript)


def replayed_calls(prefix: Sequence[Message]) -> list[ToolUseBlock]:
    """The tool calls of the replayed turns."""
    return [b for m in prefix if m.role == "assistant" for b in m.content if isinstance(b, ToolUseBlock)]


def fork_refusal(
    record: StepRecord,
    at_turn: int,
    *,
    role: Role[Any],
    backend: str,
    input_json: JsonValue,
    tools: Sequence[str],
    settings_digest: str,
) -> str | None:
    """Why ``record`` cannot be forked at ``at_turn`` by a step of ``role`` on ``backend``, or None when it can."""
    name = f"the record {record.id} of role {record.role!r}"
    n = turns(record.transcript)
    if at_turn >= n:
        return (
            f"Cannot fork {name} at turn {at_turn}: it has {n} model turn{'s' if n != 1 else ''}, so at_turn "
            f"takes 0 to {max(n - 1, 0)} (the turns replayed; the next one is asked live)."
        )
    if record.backend != backend:
        return (
            f"Cannot fork {name}: it was recorded with {record.backend}, and this step runs on {backend}. Its "
            "replayed turns would be sent to another model than the one that wrote them; fork it on its own backend."
        )
    if record.input != input_json:
        return (
            f"Cannot fork {name}: its turns answered another input. Fork it with the input it was recorded with "
            "(leave the input out: the record's is used)."
        )
    thinks_now = isinstance(role.thinking, Thinking) and role.thinking.mode != "disabled"
    thought = any(
        isinstance(b, RawBlock) and b.data.get("type") in _THINKING_TYPES for m in record.transcript for b in m.content
    )
    if (thinks_now or thought) and record.parts.get("settings") != settings_digest:
        then = "with thinking" if thought else "without thinking"
        now = f"thinks ({role.thinking.mode})" if isinstance(role.thinking, Thinking) and thinks_now else "does not"
        return (
            f"Cannot fork {name}: it was recorded {then} under other settings, and the role now {now} under its "
            "current ones. Thinking blocks are sent back only to the thinking settings that wrote them: fork it with "
            "the role's thinking, effort and token settings as they were when it was recorded."
        )
    prefix = record.transcript[: prefix_length(record.transcript, at_turn)]
    results = {b.tool_use_id: b for m in prefix for b in m.content if isinstance(b, ToolResultBlock)}
    offered = set(tools)
    missing = sorted(
        {c.name for c in replayed_calls(prefix) if c.name not in offered and not _never_ran(results.get(c.id), c.name)}
    )
    if missing:
        listed = ", ".join(repr(t) for t in missing)
        return (
            f"Cannot fork {name} at turn {at_turn}: its replayed turns called {listed}, which role {role.name!r} "
            "no longer has. Their recorded results would answer calls to tools the model is no longer offered; "
            "fork at an earlier turn, or give the role the tool again."
        )
    return None


def _never_ran(result: ToolResultBlock | None, tool: str) -> bool:
    """A recorded call that reached no tool: the guard answered it (not offered then either)."""
    from ..loop import not_offered

    return result is not None and result.is_error and result.content == not_offered(tool)


def recorded_input(role: Role[Any], record: StepRecord) -> object:
    """The record's input, built again as a value the role accepts (a fork whose input was left out)."""
    value = record.input
    if isinstance(value, str) and (not role.accepts or str in role.accepts):
        return value
    for accepted in role.accepts:
        if accepted is str:
            continue
        built, problems = payload_spec(accepted).validate(value)
        if not problems:
            return built
    why = (
        "the role names no types it accepts (Role(accepts=...))"
        if not role.accepts
        else f"it does not build any type role {role.name!r} accepts now"
    )
    raise InputError(
        f"Cannot fork the record {record.id} without its input: {why}, so the recorded input cannot be built again. "
        "Give the input: run.step(role, input, fork_from=..., at_turn=...)."
    )


def _map_item_record(store: Store, role: str, input_json: JsonValue, occurrence: int) -> StepRecord | None:
    """The finished record of a map's item of ``input_json`` (and its occurrence), if the map kept one.

    A map run again after its role changed keeps the records of both versions: the latest recorded is forked.
    """
    found = [
        r
        for r in store.records()
        if r.role == role and r.occurrence == occurrence and r.finished and r.input == input_json
    ]
    return max(found, key=lambda r: r.recorded_at) if found else None


class ForkingModel:
    """Replies from a record to the requests of its first turns, then from the live model.

    ``recorded`` answers from the record (a `agl_notebook.run._step.RecordedModel`). ``on_fork`` is called with the
    first request that is not answered from the record, before it is sent: it checks the request carries the
    replayed turns as recorded, and tells the views where the live turns begin.
    """

    def __init__(self, recorded: Model, prefix: int, live: Model, on_fork: Callable[[ModelRequest], None]) -> None:
        self._recorded = recorded
        self._prefix = prefix
        self._live = live
        self._on_fork = on_fork
        self.intercept_markup = model_intercepts_markup(live)
        self.forked = False
        """Whether a request went past the replayed turns."""

    def backend_id(self, model: str) -> str:
        return self._live.backend_id(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if len(request.messages) < self._prefix:
            return self._recorded.stream(request)
        if not self.forked:
            self.forked = True
            self._on_fork(request)
        return self._live.stream(request)


def divergence(sent: Sequence[Message], prefix: Sequence[Message]) -> str | None:
    """Where the messages a fork is about to send differ from the recorded turns, or None when they do not."""
    if tuple(sent[: len(prefix)]) == tuple(prefix):
        return None
    index = next((i for i, (a, b) in enumerate(zip(sent, prefix, strict=False)) if a != b), min(len(sent), len(prefix)))
    what = "the input" if index == 0 else f"message {index} ({prefix[index].role if index < len(prefix) else 'end'})"
    return (
        f"the step, replayed, no longer gives what was recorded at {what}: the role now answers a replayed call "
        "otherwise (a tool whose payload changed, a lower round-trip limit, another reporting tool). Fork at an "
        "earlier turn, or with the role as it was."
    )
