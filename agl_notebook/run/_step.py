"""A step of a role as a unit of work.

The plan (what the model is sent, the fingerprint, how to run it live or replay it) and the model that replies
from a record.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from .._scope import StepScope
from ..errors import InputError, ReplayMissError
from ..events import Event, QuestionAnswered, QuestionAsked, StepFinished
from ..loop import LoopOutcome, LoopTool, Reporting, run_loop
from ..models.base import Model, ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd
from ..models.prices import PriceTable
from ..payloads import JsonValue, dump, payload_spec
from ..replay.fingerprint import Fingerprint, fingerprint
from ..replay.records import RecordedQuestion, StepRecord
from ..roles import Role
from ..tools import ReportingTool, Tool, ToolResult, with_report_instruction
from ..transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock, user_text
from ._approvals import Gatekeeper
from .views import StepView


def now() -> str:
    """The time a record is made, as kept in it."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


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


def _input_json(value: object) -> JsonValue:
    return value if isinstance(value, str) else dump(value)


def check_input(role: Role[Any], value: object) -> None:
    if role.accepts:
        if not isinstance(value, role.accepts):
            names = ", ".join(a.__qualname__ for a in role.accepts)
            raise InputError(f"Role {role.name!r} accepts {names}, not {type(value).__qualname__}.")
    elif not (isinstance(value, str) or (dataclasses.is_dataclass(value) and not isinstance(value, type))):
        raise InputError(f"A step's input is a payload dataclass or a string, not {type(value).__qualname__}.")
    if not isinstance(value, str):
        payload_spec(type(value))  # it must be JSON-able to be shown to the model


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
    ) -> StepPlan:
        tools = [t for t in role.tools if isinstance(t, Tool)]
        reporting = _reporting(role.reporting_tool)
        backend = model.backend_id(model_id)
        system = system_text(role)
        input_json = _input_json(value)
        fp = fingerprint(
            role=role.name,
            backend=backend,
            system=system,
            tools=tuple(_tool_spec(t) for t in tools),
            reporting=reporting.spec if reporting else None,
            input_type=type(value).__qualname__,
            input=input_json,
            settings={
                "max_tokens": role.max_tokens,
                "max_tool_roundtrips": role.max_tool_roundtrips,
                "reminders": role.reminders,
            },
        )
        return cls(
            role,
            model,
            model_id,
            backend,
            system,
            user_text(input_message(value)),
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
        )

    async def live(self) -> LoopOutcome:
        """Run the loop on the model, the tools' handlers running."""
        __tracebackhide__ = True
        return await self._loop(self.model, [self._live_tool(t) for t in self.tools])

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
        outcome = await self._loop(RecordedModel(record), [self._replay_tool(t, record, results) for t in self.tools])
        if outcome.result_json != record.result:
            raise ReplayMissError(
                f"The recording {record.id} of role {self.role.name!r} does not replay to its own "
                "result: it is damaged. Run the step in mode 'refresh' to record it again.",
                nearest=record,
                differing=(),
            )
        return dataclasses.replace(outcome, usage=record.usage)

    def record(self, record_id: str, occurrence: int, outcome: LoopOutcome, cell_id: str | None) -> StepRecord:
        """The record of a live run."""
        return StepRecord(
            id=record_id,
            parts=self.fingerprint.parts,
            occurrence=occurrence,
            role=self.role.name,
            backend=self.backend,
            input=self.input_json,
            result=outcome.result_json,
            transcript=outcome.transcript,
            questions=tuple(self.questions),
            decisions=tuple(self.scope.decisions),
            usage=outcome.usage,
            cell_id=cell_id,
            recorded_at=now(),
            cost=self.prices.record_cost(self.backend, outcome.usage) if self.prices is not None else None,
        )

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
        )

    def _live_tool(self, t: Tool[Any]) -> LoopTool:
        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            asked = len(self.scope.questions)
            result = await t.handler(payload)
            if not isinstance(result, ToolResult):
                raise InputError(
                    f"The handler of tool {t.name!r} returned {type(result).__name__}; it must return a ToolResult."
                )
            self.questions.extend(
                RecordedQuestion(call_id, q.text, q.inputs, q.answer) for q in self.scope.questions[asked:]
            )
            return result.text, result.rejected

        return LoopTool(_tool_spec(t), call, t.spec.validate, self.gatekeeper.live_gate(t, self.scope))

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
            return recorded.content, recorded.is_error

        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            for q in record.questions:
                if q.tool_call_id == call_id:
                    self.scope.emit(QuestionAsked(q.text, q.inputs))
                    self.scope.emit(QuestionAnswered(q.text, q.answer))
            return recorded_result(call_id)

        gate = self.gatekeeper.replay_gate(t, record.decisions, self.scope, recorded_result)
        return LoopTool(_tool_spec(t), call, t.spec.validate, gate)


class RecordedModel:
    """Replies from a record: the reply to a request of k messages is the transcript's message k."""

    def __init__(self, record: StepRecord) -> None:
        self._transcript = record.transcript
        self._backend = record.backend

    def backend_id(self, model: str) -> str:
        return self._backend

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        transcript, k = self._transcript, len(request.messages)
        reply = transcript[k] if k < len(transcript) and transcript[k].role == "assistant" else None
        if reply is None:  # an empty reply is not kept in a transcript
            yield TurnEnd("end_turn")
            return
        for block in reply.content:
            if isinstance(block, TextBlock):
                yield TextDelta(block.text)
            elif isinstance(block, ToolUseBlock):
                yield ToolCall(block.id, block.name, block.input)
        paused = k + 1 < len(transcript) and transcript[k + 1].role == "assistant"
        yield TurnEnd("pause_turn" if paused else "tool_use" if reply.tool_uses else "end_turn")


def _tool_spec(t: Tool[Any]) -> ToolSpec:
    return ToolSpec(t.name, t.description, t.input_schema)


def _reporting(report: ReportingTool[Any] | None) -> Reporting | None:
    if report is None:
        return None
    return Reporting(ToolSpec(report.name, report.description, report.input_schema), report.spec.validate, dump)
