"""`Run`: runs steps of roles, shows their questions on a terminal, and tells views what happens."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from ._scope import StepScope, current_scope
from .errors import InputError
from .events import Event, StepFailed, StepFinished, StepStarted
from .loop import LoopOutcome, LoopTool, Reporting, run_loop
from .models.base import Model, ToolSpec
from .payloads import JsonValue, dump, payload_spec
from .roles import Role, RoleFactory
from .screens import Screen
from .terminals import ConsoleTerminal, ScriptedTerminal, Terminal
from .tools import ReportingTool, Tool, ToolResult
from .transcript import user_text

T = TypeVar("T")

EventSink = Callable[[Event], None]
"""Anything that takes events: a view, a printer, a list's ``append``."""


class Run:
    """Runs steps: one role on one input until the agent reports.

    Args:
        model: A model for every role, overriding each role's own (a `ScriptedModel` when no credentials exist).
        answers: Scripted answers to questions: a list used in order, or a function of the `Screen`.
        terminal: Where questions are shown; by default scripted answers if given, else standard input.
        on_event: Called with every event of every step, in order (interleaved when steps run concurrently).
    """

    def __init__(
        self,
        *,
        model: Model | None = None,
        answers: Sequence[object] | Callable[[Screen[Any]], object] | None = None,
        terminal: Terminal | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        if model is not None and not isinstance(model, Model):
            raise InputError(f"Run(model=...) takes a model backend such as ScriptedModel, not {model!r}; to "
                             "name a Claude model, use @role(model=Claude.OPUS).")
        if terminal is not None and answers is not None:
            raise InputError("Run takes answers or a terminal, not both.")
        self.model = model
        """The model every step runs on, if set."""
        self._terminal = terminal or (ScriptedTerminal(answers) if answers is not None else ConsoleTerminal())
        self._sinks: list[EventSink] = [on_event] if on_event else []
        self.outcomes: list[LoopOutcome] = []
        """The outcome of every finished step, in the order they finished (transcripts, usage, requests)."""

    @property
    def terminal(self) -> Terminal:
        """Where a tool's questions are shown: ``await run.terminal.show(screen_fn, **kwargs)``."""
        return self._terminal

    @property
    def current_step(self) -> StepScope:
        """The step the calling code runs in (to register undo work or get a scratch folder)."""
        scope = current_scope.get()
        if scope is None:
            raise InputError("run.current_step is only available inside a running step (in a tool's handler).")
        return scope

    def add_sink(self, sink: EventSink) -> None:
        """Send every later event to ``sink`` too."""
        self._sinks.append(sink)

    @overload
    async def step(self, role: Role[T], input: object) -> T: ...
    @overload
    async def step(self, role: RoleFactory[..., T], input: object) -> T: ...
    async def step(self, role: Role[T] | RoleFactory[..., T], input: object) -> T:
        """Run one step of ``role`` on ``input`` and return the reported payload (None without a reporting tool).

        Raises:
            InputError: ``input`` is not one of the role's accepted types, or the role has no model.
            RoleIncompleteError: The agent never reported; the step's work was wiped.
            Exception: A tool's handler raised: the step's work was wiped and the same exception is re-raised.
        """
        resolved = self._resolve_role(role)
        _check_input(resolved, input)
        model, model_id = self._model_for(resolved)
        input_json = _input_json(input)
        scope = StepScope(resolved.name, self._emit)
        token = current_scope.set(scope)
        try:
            self._emit(StepStarted(resolved.name, input_json, model.backend_id(model_id)))
            outcome = await run_loop(
                model=model,
                model_id=model_id,
                system=system_text(resolved),
                messages=[user_text(input_message(input))],
                tools=[_loop_tool(t) for t in resolved.tools if isinstance(t, Tool)],
                reporting=_reporting(resolved.reporting_tool),
                emit=self._emit,
                max_tool_roundtrips=resolved.max_tool_roundtrips,
                reminders=resolved.reminders,
                max_tokens=resolved.max_tokens,
                role=resolved.name,
                handler_errors="raise",
            )
        except BaseException as e:  # KeyboardInterrupt and cancellation wipe the step too
            scope.wipe()
            self._emit(StepFailed(resolved.name, type(e).__name__, str(e)))
            raise
        finally:
            current_scope.reset(token)
        self.outcomes.append(outcome)
        self._emit(StepFinished(resolved.name, outcome.result_json, outcome.requests, outcome.truncated))
        result: T = outcome.result
        return result

    def _emit(self, event: Event) -> None:
        for sink in self._sinks:
            sink(event)

    def _resolve_role(self, role: Role[T] | RoleFactory[..., T]) -> Role[T]:
        if isinstance(role, Role):
            return role
        if not isinstance(role, RoleFactory):
            raise InputError(f"run.step() takes a Role or a @role function, not {role!r}.")
        required = [p for p in inspect.signature(role.function).parameters.values()
                    if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not required:
            return role()
        if len(required) == 1 and (required[0].name == "run" or required[0].annotation in (Run, "Run")):
            return role(self) if required[0].kind is not inspect.Parameter.KEYWORD_ONLY else role(run=self)
        names = ", ".join(p.name for p in required)
        raise InputError(f"{role.function.__qualname__} needs arguments ({names}): call it first, as "
                         f"run.step({role.function.__name__}(...), input).")

    def _model_for(self, role: Role[Any]) -> tuple[Model, str]:
        chosen = self.model or role.model
        model_id = role.model if isinstance(role.model, str) else ""
        if isinstance(chosen, Model):
            return chosen, model_id
        if isinstance(chosen, str):
            from .models import resolve_model  # lazily: the Anthropic backend imports the anthropic SDK

            return resolve_model(chosen), chosen
        raise InputError(f"Role {role.name!r} has no model: give it one with @role(model=Claude.OPUS), or run "
                         "it with Run(model=ScriptedModel(...)).")


def system_text(role: Role[Any]) -> str:
    """The system text a role's agent reads: its instructions, and how to hand back its result."""
    report = role.reporting_tool
    if report is None:
        return role.instructions
    return (f"{role.instructions.rstrip()}\n\nWhen you have the result, hand it back by calling the "
            f"`{report.name}` tool. Calling it ends your work on this step.")


def input_message(value: object) -> str:
    """The first user message of a step: a string as it is, a payload as its type name and JSON."""
    if isinstance(value, str):
        return value
    import json

    return f"{type(value).__name__}:\n{json.dumps(dump(value), indent=2, ensure_ascii=False)}"


def _input_json(value: object) -> JsonValue:
    return value if isinstance(value, str) else dump(value)


def _check_input(role: Role[Any], value: object) -> None:
    if role.accepts:
        if not isinstance(value, role.accepts):
            names = ", ".join(a.__qualname__ for a in role.accepts)
            raise InputError(f"Role {role.name!r} accepts {names}, not {type(value).__qualname__}.")
    elif not (isinstance(value, str) or (dataclasses.is_dataclass(value) and not isinstance(value, type))):
        raise InputError(f"A step's input is a payload dataclass or a string, not {type(value).__qualname__}.")
    if not isinstance(value, str):
        payload_spec(type(value))  # it must be JSON-able to be shown to the model


def _loop_tool(t: Tool[Any]) -> LoopTool:
    async def call(payload: Any, call_id: str) -> tuple[str, bool]:
        result = await t.handler(payload)
        if not isinstance(result, ToolResult):
            raise InputError(f"The handler of tool {t.name!r} returned {type(result).__name__}; it must return a "
                             "ToolResult.")
        return result.text, result.rejected

    return LoopTool(ToolSpec(t.name, t.description, t.input_schema), call, t.spec.validate)


def _reporting(report: ReportingTool[Any] | None) -> Reporting | None:
    if report is None:
        return None
    return Reporting(ToolSpec(report.name, report.description, report.input_schema), report.spec.validate, dump)
