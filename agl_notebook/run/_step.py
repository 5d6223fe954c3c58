"""A step of a role as a unit of work.

The plan (what the model is sent, the fingerprint, how to run it live or replay it) and the model that replies
from a record.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._scope import Question, StepScope
from ..errors import InputError, ReplayMissError
from ..events import QuestionAnswered, QuestionAsked, StepFinished, StepForked
from ..loop import LoopOutcome, LoopTool, Progress, Reporting, run_loop
from ..media import check_media, labelled_json, media_in
from ..models.base import (
    NO_USAGE,
    Cited,
    Model,
    ModelEvent,
    ModelRequest,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
    model_accepts,
    model_engine_record,
    model_intercepts_markup,
    model_thinks,
)
from ..payloads import JsonObject, JsonValue, dump, payload_spec
from ..replay.fingerprint import Fingerprint, fingerprint, tool_json
from ..replay.records import RecordedQuestion, StepRecord, Waiting
from ..replay.versions import contents_of
from ..roles import Role
from ..tools import ReportingTool, Tool, ToolResult, with_report_instruction
from ..transcript import (
    Block,
    MediaBlock,
    Message,
    RawBlock,
    TextBlock,
    ToolResultBlock,
    ToolText,
    ToolUseBlock,
    result_text,
    user_text,
)
from ._approvals import Gatekeeper
from ._fork import Fork, ForkingModel
from .views import StepView

if TYPE_CHECKING:
    from ..events import Event
    from ..models.prices import PriceTable, RecordedCost
    from ..replay.modes import Mode
    from ._mcp import GateOf, StepMCP


def now() -> str:
    """The time a record is made, as kept in it (to the second, UTC)."""
    global _now_spelled
    second = int(time.time())
    if _now_spelled[0] != second:  # spelled once a second: a map's items, a Run's steps, share it (isoformat: 2 µs)
        import datetime  # with the first record made, not with every notebook (1 ms)

        _now_spelled = (second, datetime.datetime.fromtimestamp(second, datetime.UTC).isoformat(timespec="seconds"))
    return _now_spelled[1]


_now_spelled: tuple[int, str] = (-1, "")


def system_text(role: Role[Any]) -> str:
    """The system text a role's agent reads: its instructions, and how to hand back its result."""
    report = role.reporting_tool
    if report is None:
        return role.instructions
    return with_report_instruction(role.instructions, report.name, ends="your work on this step")


def input_message(value: object) -> str:
    """The first user message of a step: a string as it is, a payload as its type name and JSON."""
    if isinstance(value, str):
        return value
    import json

    return f"{type(value).__name__}:\n{json.dumps(dump(value), indent=2, ensure_ascii=False)}"


def input_first_message(value: object) -> Message:
    """The first user message of a step: its images and documents as content blocks, then the rest as JSON.

    Each attachment comes after a line naming it, and is a label in the JSON (``"[image 1]"``), never JSON text.
    Images come first because Claude works best with an image before the text about it (Anthropic's advice).
    """
    if isinstance(value, str):
        return user_text(value)
    found = media_in(value, type(value).__name__)
    if not found:
        return user_text(input_message(value))
    import json

    labels: dict[int, str] = {}
    counts: dict[str, int] = {}
    blocks: list[Block] = []
    for path, media in found:
        counts[media.kind] = counts.get(media.kind, 0) + 1
        label = labels.setdefault(id(media), f"[{media.kind} {counts[media.kind]}]")
        blocks += [TextBlock(f"{label} ({path}):"), MediaBlock(media, path)]
    shown = json.dumps(labelled_json(value, labels), indent=2, ensure_ascii=False)
    blocks.append(TextBlock(f"{type(value).__name__}:\n{shown}"))
    return Message("user", tuple(blocks))


def _input_json(value: object) -> JsonValue:
    return value if isinstance(value, str) else dump(value)


def step_settings(role: Role[Any]) -> dict[str, JsonValue]:
    """The settings part of a step's fingerprint.

    A setting added since the first format is in it only when set, so every record made before it was added still
    matches a step that does not set it.
    """
    settings: dict[str, JsonValue] = {
        "max_tokens": role.max_tokens,
        "max_tool_roundtrips": role.max_tool_roundtrips,
        "reminders": role.reminders,
    }
    if isinstance(role.thinking, Thinking):
        settings["thinking"] = role.thinking.to_json()
    if role.effort is not None:
        settings["effort"] = role.effort
    if role.strict_tools:
        settings["strict_tools"] = True
    if role.server_tools:
        settings["server_tools"] = [t.to_json() for t in role.server_tools]
    return settings


def check_input(role: Role[Any], value: object) -> None:
    if role.accepts:
        if not isinstance(value, role.accepts):
            names = ", ".join(a.__qualname__ for a in role.accepts)
            raise InputError(f"Role {role.name!r} accepts {names}, not {type(value).__qualname__}.")
    elif not (isinstance(value, str) or (dataclasses.is_dataclass(value) and not isinstance(value, type))):
        raise InputError(f"A step's input is a payload dataclass or a string, not {type(value).__qualname__}.")
    if not isinstance(value, str):
        payload_spec(type(value))  # it must be JSON-able to be shown to the model
        check_media(value, type(value).__qualname__)  # each image and document read and checked before any request


@dataclasses.dataclass
class StepPlan:
    """One step, resolved: what the model will be sent, its fingerprint, and how to run it live or replay it."""

    role: Role[Any]
    model: Model
    model_id: str
    backend: str
    system: str
    first_message: Message
    tools: list[Tool[Any]]
    reporting: Reporting | None
    input_json: JsonValue
    fingerprint: Fingerprint
    scope: StepScope
    view: StepView | None
    label: str | None
    network: bool
    keep: Callable[[LoopOutcome], None]
    gatekeeper: Gatekeeper
    questions: list[RecordedQuestion] = dataclasses.field(default_factory=list)
    prices: PriceTable | None = None
    """What a live run's record is priced at (None: its record keeps no cost)."""
    cost: RecordedCost | None = None
    """What the step's record says it cost, once it is recorded or replayed (a map's row shows it)."""
    progress: Progress = dataclasses.field(default_factory=Progress)
    """How far the loop has got: what a partial record keeps."""
    _running: tuple[str, int] | None = None  # the call whose handler runs, and how many questions came before it
    _earlier_usage: Usage = NO_USAGE  # what a resumed step's partial record spent
    mcp: StepMCP | None = None
    """The role's MCP tools (docs/mcp.md), when it has MCP servers."""
    fork: Fork | None = None
    """Where a forked step's first turns come from (docs/forking.md); None for a step run from its start."""
    kept: StepRecord | None = None
    """The record the step replayed or kept (a failure record included), once it ended; the engine sets it."""

    @property
    def name(self) -> str:
        """The role's name."""
        return self.role.name

    @property
    def blocked(self) -> str:
        """How a refused live run is told."""
        return f"A step of role {self.role.name!r} would call a model"

    @classmethod
    def build(
        cls,
        role: Role[Any],
        value: object,
        model: Model,
        model_id: str,
        scope: StepScope,
        *,
        view: StepView | None,
        label: str | None,
        network: bool,
        keep: Callable[[LoopOutcome], None],
        gatekeeper: Gatekeeper,
        prices: PriceTable | None = None,
        fork: Fork | None = None,
    ) -> StepPlan:
        strict = role.strict_tools or any(t.strict for t in role.tools)
        if (role.thinking is not None or role.effort is not None or strict) and not model_thinks(model):
            asked = [
                name
                for name, on in (
                    ("thinking", role.thinking is not None),
                    ("effort", role.effort is not None),
                    ("strict tools", strict),
                )
                if on
            ]
            raise InputError(
                f"Role {role.name!r} asks for {' and '.join(asked)}, but its model {model!r} does not take "
                "thinking, effort or strict tools (a backend of your own says it does with a true `thinking` "
                "attribute). Nothing was sent."
            )
        if role.server_tools and not model_accepts(model, "server_tools"):
            names = ", ".join(t.name for t in role.server_tools)
            raise InputError(
                f"Role {role.name!r} offers server tools ({names}), which Anthropic runs, but its model {model!r} "
                "cannot run them: use a Claude model (AnthropicModel), or a ScriptedModel whose turns script their "
                "blocks. Nothing was sent."
            )
        for path, media in media_in(value, type(value).__name__):
            if not model_accepts(model, f"{media.kind}s"):
                raise InputError(
                    f"{path}: the model {model!r} does not take {media.kind}s (its backend declares what it accepts). "
                    "Nothing was sent."
                )
        shared = _role_parts(role)
        tools, reporting, system = list(shared.tools), shared.reporting, shared.system
        backend = model.backend_id(model_id)
        input_json = _input_json(value)
        mcp = None
        if role.mcp:
            from ._mcp import StepMCP  # with the first role that has MCP servers

            own = [t.name for t in role.tools]
            mcp = StepMCP(role.mcp, role.name, own, approvals=role.mcp_approvals, ask_destructive=role.ask_destructive)
        if fork is not None and mcp is not None:
            raise InputError(
                f"Role {role.name!r} has MCP servers: forking its steps is not supported yet (docs/forking.md)."
            )
        extra: dict[str, JsonValue] = {"mcp": StepMCP.choice_part(role.mcp)} if mcp is not None else {}
        if fork is not None:
            extra["fork"] = fork.part()  # a fork is a record of its own, never "the step" it forked
        fp = fingerprint(
            role=role.name,
            backend=backend,
            system=system,
            tools=shared.specs,
            reporting=reporting.spec if reporting else None,
            input_type=type(value).__qualname__,
            input=input_json,
            settings=shared.settings,
            extra=extra or None,
        )
        return cls(
            role,
            model,
            model_id,
            backend,
            system,
            input_first_message(value),
            tools,
            reporting,
            input_json,
            fp,
            scope,
            view,
            label,
            network,
            keep,
            gatekeeper,
            prices=prices,
            mcp=mcp,
            fork=fork,
        )

    async def live(self) -> LoopOutcome:
        """Run the loop on the model, the tools' handlers running (a fork's first turns from its record)."""
        __tracebackhide__ = True
        if self.fork is not None:
            return await self._fork_live(self.fork)
        mcp = await self._live_mcp(lambda t: self.gatekeeper.live_gate(t, self.scope))
        return await self._loop(self.model, [self._live_tool(t) for t in self.tools] + mcp)

    async def relisted(self, record: StepRecord, mode: Mode) -> bool:
        """Whether the role's MCP servers, listed live, no longer offer the tools ``record`` was made with."""
        if self.mcp is None or not await self.mcp.relisted(record, mode):
            return False
        self._note_mcp_parts()
        return True

    async def _live_mcp(self, gate_of: GateOf) -> list[LoopTool]:
        if self.mcp is None:
            return []
        tools = await self.mcp.live_tools(gate_of, self.gatekeeper.terminal)
        self._note_mcp_parts()
        return [self._keeping_questions(t) for t in tools]

    def _keeping_questions(self, tool: LoopTool) -> LoopTool:
        """``tool``, its call's questions (an MCP server's requests for input) kept for the record by call id."""

        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            asked = len(self.scope.questions)
            self._running = (call_id, asked)
            try:
                result = await tool.call(payload, call_id)
            finally:
                self._running = None
            self.questions.extend(
                RecordedQuestion(call_id, q.text, q.inputs, q.answer) for q in self.scope.questions[asked:]
            )
            return result

        return dataclasses.replace(tool, call=call)

    def _telling_questions(self, tool: LoopTool, record: StepRecord) -> LoopTool:
        """``tool``, telling the views a recorded call's questions again before it answers from ``record``."""

        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            self._tell_questions(record, call_id)
            return await tool.call(payload, call_id)

        return dataclasses.replace(tool, call=call)

    def _tell_questions(self, record: StepRecord, call_id: str, *, keep: bool = False) -> None:
        """Tell the views the questions ``record`` keeps for ``call_id`` (with ``keep``, kept for the new record)."""
        for q in record.questions:
            if q.tool_call_id == call_id:
                self.scope.emit(QuestionAsked(q.text, q.inputs))
                self.scope.emit(QuestionAnswered(q.text, q.answer))
                if keep:
                    self.questions.append(q)

    def _note_mcp_parts(self) -> None:
        """Add each MCP tool's digest to the fingerprint's parts (kept in the record; the id is unchanged)."""
        assert self.mcp is not None
        parts = {k: v for k, v in self.fingerprint.parts.items() if not k.startswith("mcp:")}
        self.fingerprint = Fingerprint({**parts, **self.mcp.parts()}, self.fingerprint.base)

    def _engine_record(self) -> JsonObject | None:
        """The record's ``engine``: the model's, and the snapshot of each MCP server's tools."""
        engine = model_engine_record(self.model)
        if self.fork is not None:
            engine = {**(engine or {}), "fork": self.fork.engine()}
        if self.mcp is None or self.mcp.listed is None:
            return engine
        return {**(engine or {}), "mcp": self.mcp.snapshot()}

    def unfit(self, record: StepRecord) -> Sequence[str]:
        """Why the record's result no longer builds the role's payload (a field or a check changed since), if so."""
        if self.reporting is None:
            return ()
        if not isinstance(record.result, dict):
            return (f"the recorded result is {type(record.result).__name__}, not an object",)
        _, problems = self.reporting.validate(record.result)
        return problems

    async def replay(self, record: StepRecord) -> LoopOutcome:
        """Run the loop again on the recorded replies: validation and events as live, no model, no handler."""
        __tracebackhide__ = True
        results = {b.tool_use_id: b for m in record.transcript for b in m.content if isinstance(b, ToolResultBlock)}
        tools = [self._replay_tool(t, record, results) for t in self.tools]
        if self.mcp is not None:
            told = _results_of(record, results)
            tools += [
                self._telling_questions(t, record)
                for t in self.mcp.recorded_tools(
                    record, lambda t: self.gatekeeper.replay_gate(t, record.decisions, self.scope, told(t.name))
                )
            ]
        model: Model = RecordedModel(record)
        if self.fork is not None:  # where its live turns began is told where it was told live
            model = self._fork_point(record, model)
        outcome = await self._loop(model, tools)
        if outcome.result_json != record.result:
            raise ReplayMissError(
                f"The recording {record.id} of role {self.role.name!r} does not replay to its own "
                "result: it is damaged. Run the step in mode 'refresh' to record it again.",
                nearest=record,
                differing=(),
            )
        self.cost = record.cost
        return dataclasses.replace(outcome, usage=record.usage)

    async def resume(self, partial: StepRecord) -> LoopOutcome:
        """Resume from a partial record: its prefix replayed, then live (docs/recordings.md, "Partial records").

        The model is not asked for the replies the transcript holds, and no handler runs for a call with a recorded
        result: both are told to the views as in a replay, with their questions and decisions. The call the step
        waited on runs live: its approval is asked again, or (decided already) its handler runs, its earlier answers
        given again from the record as it asks the same questions.
        """
        __tracebackhide__ = True
        results = {b.tool_use_id: b for m in partial.transcript for b in m.content if isinstance(b, ToolResultBlock)}
        for q in partial.questions:
            if q.tool_call_id not in results:
                self.scope.resumed.setdefault(q.tool_call_id, []).append(Question(q.text, q.inputs, q.answer))
        self._earlier_usage = partial.usage
        model: Model = ResumingModel(partial, self.model)
        if self.fork is not None:  # a fork waiting in its live turns: where they began is told again
            model = self._fork_point(partial, model)
        tools = [self._resuming_tool(t, partial, results) for t in self.tools]
        told = _results_of(partial, results)
        mcp = await self._live_mcp(
            lambda t: self.gatekeeper.resume_gate(t, partial.decisions, self.scope, set(results), told(t.name))
        )
        tools += [_answered_from(t, results, lambda i: self._tell_questions(partial, i, keep=True)) for t in mcp]
        outcome = await self._loop(model, tools)
        return dataclasses.replace(outcome, usage=partial.usage + outcome.usage)

    async def _fork_live(self, fork: Fork) -> LoopOutcome:
        """A fork: the first turns from the record forked (no request, no handler), then live."""
        __tracebackhide__ = True
        from ._fork import divergence, fork_refusal, prefix_length

        if fork.store is not None:
            await fork.store.ready()  # a previous map's store, perhaps not this step's
        record = fork.find(self.role, self.input_json)
        refusal = fork_refusal(
            record,
            fork.at_turn,
            role=self.role,
            backend=self.backend,
            input_json=self.input_json,
            tools=[t.name for t in self.tools],
            settings_digest=self.fingerprint.parts["settings"],
        )
        if refusal is not None:
            raise InputError(refusal)
        cut = prefix_length(record.transcript, fork.at_turn)
        prefix = record.transcript[:cut]
        results = {b.tool_use_id: b for m in prefix for b in m.content if isinstance(b, ToolResultBlock)}
        replayed = dataclasses.replace(
            record,
            transcript=prefix,
            questions=tuple(q for q in record.questions if q.tool_call_id in results),
            decisions=tuple(d for d in record.decisions if d.tool_call_id in results),
        )
        tools = [self._resuming_tool(t, replayed, results) for t in self.tools]

        def forked(request: ModelRequest) -> None:
            differs = divergence(request.messages, prefix)
            if differs is not None:
                raise InputError(f"Cannot fork the record {record.id} at turn {fork.at_turn}: {differs}")
            self.scope.emit(StepForked(self.role.name, record.id, fork.at_turn))

        model = ForkingModel(RecordedModel(record), cut, self.model, forked)
        outcome = await self._loop(model, tools)
        if not model.forked:
            raise InputError(
                f"Cannot fork the record {record.id} at turn {fork.at_turn}: the role, replaying its turns, ended the "
                "step before any live turn (its reporting tool now takes a payload it refused when recorded)."
            )
        return outcome

    def _fork_point(self, record: StepRecord, model: Model) -> Model:
        """``model``, telling ``step.forked`` before the first request past a fork's replayed turns."""
        from ._fork import prefix_length

        fork = self.fork
        assert fork is not None
        forked_from = (record.engine or {}).get("fork")
        source = forked_from.get("from") if isinstance(forked_from, dict) else None
        source_id = source if isinstance(source, str) else fork.record_id or ""

        def forked(request: ModelRequest) -> None:
            self.scope.emit(StepForked(self.role.name, source_id, fork.at_turn))

        return ForkingModel(model, prefix_length(record.transcript, fork.at_turn), model, forked)

    def partial(self, record_id: str, occurrence: int, cell_id: str | None) -> StepRecord | None:
        """The step's progress so far, as a partial record; None when it is not waiting inside a tool call."""
        transcript = list(self.progress.transcript)
        on = self.scope.waiting
        if on is None or not transcript or transcript[-1].role != "assistant":
            return None
        done = {b.tool_use_id for b in self.progress.results if isinstance(b, ToolResultBlock)}
        waiting = next((c for c in transcript[-1].tool_uses if c.id not in done), None)
        if waiting is None:
            return None
        if self.progress.results:
            transcript.append(Message("user", tuple(self.progress.results)))
        questions = list(self.questions)
        if self._running is not None:  # the questions the waiting call's handler asked so far
            call_id, asked = self._running
            questions += [RecordedQuestion(call_id, q.text, q.inputs, q.answer) for q in self.scope.questions[asked:]]
        return StepRecord(
            id=record_id,
            parts=self.fingerprint.parts,
            occurrence=occurrence,
            role=self.role.name,
            backend=self.backend,
            input=self.input_json,
            result=None,
            transcript=tuple(transcript),
            questions=tuple(questions),
            decisions=tuple(self.scope.decisions),
            usage=self._earlier_usage + self.progress.usage,
            cell_id=cell_id,
            recorded_at=now(),
            engine=self._engine_record(),
            containers=tuple(self.progress.containers),
            partial=Waiting(on, waiting.id, waiting.name),
        )

    def record(self, record_id: str, occurrence: int, outcome: LoopOutcome, cell_id: str | None) -> StepRecord:
        """The record of a live run."""
        engine = self._engine_record()
        if self.prices is not None:
            from ..models.prices import batched_usage  # loaded with the table (`Meter.prices`)

            batched = batched_usage(outcome.usage, engine)
            # Each request's usage, when they add up to the step's (not so for a resumed step's earlier requests).
            requests = outcome.request_usages if sum(outcome.request_usages, NO_USAGE) == outcome.usage else ()
            self.cost = self.prices.record_cost(self.backend, outcome.usage, batched=batched, requests=requests)
            if self.scope.usage_unknown and self.cost is not None:  # a server said no usage: no dollars to claim
                self.cost = dataclasses.replace(self.cost, usd=None, usage_unknown=True)
        return StepRecord(
            id=record_id,
            parts=self.fingerprint.parts,
            occurrence=occurrence,
            role=self.role.name,
            backend=self.backend,
            input=self.input_json,
            contents=dict(self.contents()),
            result=outcome.result_json,
            transcript=outcome.transcript,
            questions=tuple(self.questions),
            decisions=tuple(self.scope.decisions),
            usage=outcome.usage,
            cell_id=cell_id,
            recorded_at=now(),
            cost=self.cost,
            engine=engine,
            containers=outcome.containers,
        )

    def contents(self) -> JsonObject:
        """What the model was told besides the input, as its record keeps it (docs/iterating.md).

        Made once per distinct set of digests: a role's steps share it (a map's items, a notebook's re-runs).
        """
        parts = self.fingerprint.parts
        key = tuple(parts.get(p, "") for p in ("instructions", "tools", "reporting", "settings"))
        found = _CONTENTS.get(key)
        if found is None:
            if len(_CONTENTS) >= 256:
                _CONTENTS.clear()
            found = _CONTENTS[key] = self._contents()
        return found

    def _contents(self) -> JsonObject:
        role = self.role
        tools = [tool_json(_tool_spec(t, strict=role.strict_tools)) for t in self.tools]
        reporting = tool_json(self.reporting.spec) if self.reporting is not None else None
        return contents_of(self.system, tools, reporting, step_settings(role))

    def finished(self, outcome: LoopOutcome) -> Event:
        """``step.finished``, once the outcome is kept in the Run's history."""
        self.keep(outcome)
        return StepFinished(self.role.name, outcome.result_json, outcome.requests, outcome.truncated)

    async def _loop(self, model: Model, tools: list[LoopTool]) -> LoopOutcome:
        __tracebackhide__ = True
        return await run_loop(
            model=model,
            model_id=self.model_id,
            system=self.system,
            messages=[self.first_message],
            tools=tools,
            reporting=self.reporting,
            emit=self.scope.emit,
            max_tool_roundtrips=self.role.max_tool_roundtrips,
            reminders=self.role.reminders,
            max_tokens=self.role.max_tokens,
            role=self.role.name,
            progress=self.progress,
            thinking=self.role.thinking if isinstance(self.role.thinking, Thinking) else None,
            effort=self.role.effort,
            server_tools=tuple(t.to_json() for t in self.role.server_tools),
        )

    def _live_tool(self, t: Tool[Any]) -> LoopTool:
        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            asked = len(self.scope.questions)
            self._running = (call_id, asked)
            try:
                result = await t.handler(payload)
            finally:
                self._running = None
            if not isinstance(result, ToolResult):
                raise InputError(
                    f"The handler of tool {t.name!r} returned {type(result).__name__}; it must return a ToolResult."
                )
            self.questions.extend(
                RecordedQuestion(call_id, q.text, q.inputs, q.answer) for q in self.scope.questions[asked:]
            )
            if result.images:
                for i, image in enumerate(result.images):
                    image.check(f"the result of tool {t.name!r}: images[{i}]")
                return ToolText(result.text, tuple(result.images)), result.rejected
            return result.text, result.rejected

        return LoopTool(
            _role_parts(self.role).spec_of(t),
            call,
            t.spec.validate,
            self.gatekeeper.live_gate(t, self.scope),
        )

    def _replay_tool(self, t: Tool[Any], record: StepRecord, results: dict[str, ToolResultBlock]) -> LoopTool:
        def recorded_result(call_id: str) -> tuple[str, bool]:
            recorded = results.get(call_id)
            if recorded is None:
                raise ReplayMissError(
                    f"The recording {record.id} has no result for the call {call_id} to "
                    f"{t.name!r}: it is damaged. Run the step in mode 'refresh'.",
                    nearest=record,
                    differing=(),
                )
            return result_text(recorded), recorded.is_error

        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            for q in record.questions:
                if q.tool_call_id == call_id:
                    self.scope.emit(QuestionAsked(q.text, q.inputs))
                    self.scope.emit(QuestionAnswered(q.text, q.answer))
            return recorded_result(call_id)

        gate = self.gatekeeper.replay_gate(t, record.decisions, self.scope, recorded_result)
        return LoopTool(_tool_spec(t, strict=self.role.strict_tools), call, t.spec.validate, gate)

    def _resuming_tool(self, t: Tool[Any], partial: StepRecord, results: dict[str, ToolResultBlock]) -> LoopTool:
        live = self._live_tool(t)

        def recorded_result(call_id: str) -> tuple[str, bool]:
            return result_text(results[call_id]), results[call_id].is_error

        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            if call_id not in results:
                return await live.call(payload, call_id)
            for q in partial.questions:
                if q.tool_call_id == call_id:
                    self.scope.emit(QuestionAsked(q.text, q.inputs))
                    self.scope.emit(QuestionAnswered(q.text, q.answer))
                    self.questions.append(q)
            return recorded_result(call_id)

        gate = self.gatekeeper.resume_gate(t, partial.decisions, self.scope, set(results), recorded_result)
        return LoopTool(_tool_spec(t, strict=self.role.strict_tools), call, t.spec.validate, gate)


_CONTENTS: dict[tuple[str, ...], JsonObject] = {}


class ResumingModel:
    """Replies from a partial record while its transcript holds the reply, then from the live model."""

    def __init__(self, partial: StepRecord, live: Model) -> None:
        self._recorded = RecordedModel(partial)
        self._transcript = partial.transcript
        self._live = live
        self.intercept_markup = model_intercepts_markup(live)
        self.live_requests = 0
        """Requests sent to the live model."""

    def backend_id(self, model: str) -> str:
        return self._live.backend_id(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        k = len(request.messages)
        if k < len(self._transcript) and self._transcript[k].role == "assistant":
            return self._recorded.stream(request)
        self.live_requests += 1
        return self._live.stream(request)


class RecordedModel:
    """Replies from a record: the reply to a request of k messages is the transcript's message k.

    A reply names the code execution container where the record says it was first named, so the loop sends it on
    its later requests: a resumed or forked step's live ones carry it as the step's first run did.
    """

    def __init__(self, record: StepRecord) -> None:
        self._transcript = record.transcript
        self._backend = record.backend
        self._containers = dict(record.containers)

    def backend_id(self, model: str) -> str:
        return self._backend

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        transcript, k = self._transcript, len(request.messages)
        reply = transcript[k] if k < len(transcript) and transcript[k].role == "assistant" else None
        container = self._containers.get(k)
        if reply is None:  # an empty reply is not kept in a transcript
            yield TurnEnd("end_turn", NO_USAGE, container)
            return
        for block in reply.content:
            if isinstance(block, TextBlock):
                yield TextDelta(block.text)
                if block.citations:
                    yield Cited(block.text, block.citations)
            elif isinstance(block, ToolUseBlock):
                yield ToolCall(block.id, block.name, block.input)
            elif isinstance(block, RawBlock):
                thought = block.thinking
                if thought:  # drawn live as it was when recorded, then kept whole
                    yield ThinkingDelta(thought)
                yield block
        paused = k + 1 < len(transcript) and transcript[k + 1].role == "assistant"
        yield TurnEnd("pause_turn" if paused else "tool_use" if reply.tool_uses else "end_turn", NO_USAGE, container)


def _results_of(
    record: StepRecord, results: dict[str, ToolResultBlock]
) -> Callable[[str], Callable[[str], tuple[str, bool]]]:
    """For a tool's name, its recorded result by call id (what a replayed or resumed denial answers with)."""

    def of_tool(name: str) -> Callable[[str], tuple[str, bool]]:
        def recorded_result(call_id: str) -> tuple[str, bool]:
            recorded = results.get(call_id)
            if recorded is None:
                raise ReplayMissError(
                    f"The recording {record.id} has no result for the call {call_id} to {name!r}: it is damaged. "
                    "Run the step in mode 'refresh'.",
                    nearest=record,
                    differing=(),
                )
            return result_text(recorded), recorded.is_error

        return recorded_result

    return of_tool


def _answered_from(
    tool: LoopTool, results: dict[str, ToolResultBlock], told: Callable[[str], object] | None = None
) -> LoopTool:
    """``tool``, answering a call with a recorded result from ``results`` without running it (a resumed step).

    ``told``: called with the id of a call answered from the record first (it tells that call's questions).
    """

    async def call(payload: Any, call_id: str) -> tuple[str, bool]:
        recorded = results.get(call_id)
        if recorded is not None:
            if told is not None:
                told(call_id)
            return result_text(recorded), recorded.is_error
        return await tool.call(payload, call_id)

    return dataclasses.replace(tool, call=call)


class _RoleParts:
    """What every step of one role is planned with, whatever its input: worked out once per `Role` object.

    A role is frozen, and so are its tools, so these never change while it lives. Planning them again for each step
    (the system text, each tool as the model is shown it, the settings) was a tenth of a live step's own CPU. A plain
    class: a generated dataclass would add its compiled methods to ``import agl_notebook`` (docs/architecture.md).
    """

    __slots__ = ("reporting", "settings", "specs", "system", "tools")

    def __init__(self, role: Role[Any]) -> None:
        self.system = system_text(role)
        self.tools = tuple(t for t in role.tools if isinstance(t, Tool))
        """The role's tools that are not its reporting tool."""
        self.specs = tuple(_tool_spec(t, strict=role.strict_tools) for t in self.tools)
        """Each of ``tools`` as the model is shown it, in order."""
        self.reporting = _reporting(role.reporting_tool, strict=role.strict_tools)
        self.settings = step_settings(role)
        """The settings part of the fingerprint (`step_settings`); read, never changed."""

    def spec_of(self, tool: Tool[Any]) -> ToolSpec:
        """``tool`` (one of ``tools``) as the model is shown it."""
        for t, spec in zip(self.tools, self.specs, strict=True):
            if t is tool:
                return spec
        raise AssertionError(f"{tool!r} is not a tool of this role")  # pragma: no cover


# By the role's id, with a weak reference that tells a live role from a later object reusing a dead one's id (a
# role is compared and hashed by its fields, which would cost more than the planning saved). Bounded: a role made
# per call (a factory's) leaves an entry each time.
_ROLE_PARTS: dict[int, tuple[weakref.ref[Role[Any]], _RoleParts]] = {}
_ROLE_PARTS_LIMIT = 1024


def _role_parts(role: Role[Any]) -> _RoleParts:
    entry = _ROLE_PARTS.get(id(role))
    if entry is not None and entry[0]() is role:
        return entry[1]
    parts = _RoleParts(role)
    if len(_ROLE_PARTS) >= _ROLE_PARTS_LIMIT:
        _ROLE_PARTS.clear()
    _ROLE_PARTS[id(role)] = (weakref.ref(role), parts)
    return parts


def _tool_spec(t: Tool[Any], *, strict: bool = False) -> ToolSpec:
    """The tool as the model is shown it: strict when the tool or its role (``strict``) asks for it."""
    return ToolSpec(t.name, t.description, t.input_schema, strict or t.strict)


def reporting_of(role: Role[Any]) -> Reporting | None:
    """The role's reporting tool as the loop sees it (what builds its payload from JSON), or None."""
    return _reporting(role.reporting_tool, strict=role.strict_tools)


def _reporting(report: ReportingTool[Any] | None, *, strict: bool = False) -> Reporting | None:
    if report is None:
        return None
    spec = ToolSpec(report.name, report.description, report.input_schema, strict or report.strict)
    return Reporting(spec, report.spec.validate, dump)
