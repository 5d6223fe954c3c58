"""`Run`: runs steps of roles, shows their questions on a terminal, and tells views what happens."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload, runtime_checkable

from ._scope import StepScope, current_scope
from .errors import InputError, MissingCredentialsError, ModelCallBlockedError, at_call_site, warn
from .events import (
    Event,
    QuestionAnswered,
    QuestionAsked,
    StepFailed,
    StepFinished,
    StepReplayed,
    StepStarted,
    input_label,
)
from .loop import LoopOutcome, LoopTool, Reporting, run_loop
from .models.base import Model, ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd
from .payloads import JsonValue, dump, payload_spec
from .replay import modes
from .replay.explain import Miss, ReplayMissError, explain_miss, note_miss, note_used
from .replay.fingerprint import Fingerprint, fingerprint
from .replay.modes import Mode, check_mode, resolve_mode
from .replay.records import RecordedQuestion, StepRecord
from .replay.stores import MemoryStore, RecordingWarning, Store
from .roles import Role, RoleFactory
from .screens import Screen
from .terminals import ConsoleTerminal, ScriptedTerminal, Terminal
from .tools import ReportingTool, Tool, ToolResult
from .transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock, user_text

if TYPE_CHECKING:
    from .functions.interpreter import UnitOutcome, Work
    from .notebook._kernel import LoopWaker

T = TypeVar("T")
Out = TypeVar("Out")

EventSink = Callable[[Event], None]
"""Anything that takes events: a view, a printer, a list's ``append``."""


@runtime_checkable
class StepView(Protocol):
    """What draws one step: told whether it replays, then every event, then how it ended."""

    def begin(self, *, replaying: bool) -> None:
        """The step starts; ``replaying`` says it is answered from a recording."""

    def event(self, event: Event) -> None:
        """One event of the step."""

    def finish(self, record: StepRecord | None) -> None:
        """The step finished; ``record`` is what was kept (None in mode ``off``)."""

    def fail(self, error: BaseException) -> None:
        """The step failed or was interrupted; its work was wiped."""


ViewFactory = Callable[[Role[Any]], StepView]
"""Makes the view of one step of a role."""


class Occurrences:
    """Numbers identical steps (same fingerprint) in the order they start, within one execution key."""

    def __init__(self) -> None:
        self._execution: object = None
        self._taken: dict[str, int] = {}

    def take(self, execution: object, base: str) -> int:
        """The next number for a step with fingerprint ``base``."""
        if execution != self._execution:  # a new cell execution starts counting again
            self._execution, self._taken = execution, {}
        number = self._taken.get(base, 0)
        self._taken[base] = number + 1
        return number

    def give_back(self, execution: object, base: str, number: int) -> None:
        """Give back the number of a failed step, unless an identical step has taken a later one since.

        A failed step recorded nothing: retrying it is the same step again, not the next one.
        """
        if execution == self._execution and self._taken.get(base) == number + 1:
            self._taken[base] = number


class _Environment(Protocol):
    def occurrences(self) -> Occurrences: ...
    def terminal(self) -> Terminal: ...
    def store(self) -> Store: ...
    def view(self, role: Role[Any]) -> StepView: ...
    def execution_key(self) -> object: ...
    def cell_id(self) -> str | None: ...


def _notebook_environment() -> _Environment | None:
    from .notebook._kernel import in_kernel  # cheap: imports nothing unless a kernel is running

    if not in_kernel():
        return None
    from .notebook.environment import NotebookEnvironment

    return NotebookEnvironment()


def _wake_for_interrupts() -> LoopWaker | None:
    """In a kernel, keep the loop waking while a step runs, so an interrupt ends it at once (see `LoopWaker`)."""
    from .notebook._kernel import wake_for_interrupts

    return wake_for_interrupts()


def _emit_to(view: StepView, rest: EventSink) -> EventSink:
    def emit(event: Event) -> None:
        __tracebackhide__ = True
        view.event(event)
        rest(event)

    return emit


def _show_miss(view: StepView | None, miss: Miss) -> None:
    """Tell a view that can show it (an optional method) why a step runs live, before its model call."""
    show = getattr(view, "show_miss", None)
    if show is not None:
        show(miss)


class Run:
    """Runs steps: one role on one input until the agent reports.

    Args:
        model: A model for every role, overriding each role's own (a `ScriptedModel` when no credentials exist).
        answers: Scripted answers to questions: a list used in order, or a function of the `Screen`.
        terminal: Where questions are shown; by default scripted answers if given, else standard input.
        on_event: Called with every event of every step, in order (interleaved when steps run concurrently).
        view: Makes the view of each step (in a notebook, the widget view is the default).
        store: Where recordings are found and kept; by default a fresh `MemoryStore` for this Run.
        mode: The replay mode for this Run's steps (``auto``, ``replay``, ``refresh``, ``off``); see
            `agl_notebook.replay.modes` for the precedence.
    """

    def __init__(
        self,
        *,
        model: Model | None = None,
        answers: Sequence[object] | Callable[[Screen[Any]], object] | None = None,
        terminal: Terminal | None = None,
        on_event: EventSink | None = None,
        store: Store | None = None,
        mode: Mode | None = None,
        view: ViewFactory | None = None,
    ) -> None:
        if model is not None and not isinstance(model, Model):
            raise InputError(f"Run(model=...) takes a model backend such as ScriptedModel, not {model!r}; to "
                             "name a Claude model, use @role(model=Claude.OPUS).")
        if terminal is not None and answers is not None:
            raise InputError("Run takes answers or a terminal, not both.")
        self.model = model
        """The model every step runs on, if set."""
        # Inside a Jupyter kernel the notebook supplies the defaults: widget views, input-widget questions, and
        # recordings read from the notebook file.
        self._environment = _notebook_environment()
        env = self._environment
        self._terminal = terminal or (ScriptedTerminal(answers) if answers is not None
                                      else env.terminal() if env is not None else ConsoleTerminal())
        self._view_factory: ViewFactory | None = view or (env.view if env is not None else None)
        self._sinks: list[EventSink] = [on_event] if on_event else []
        self.store: Store = store if store is not None else env.store() if env is not None else MemoryStore()
        """Where this Run's recordings are found and kept."""
        self.mode: Mode | None = check_mode(mode, where="Run(mode=...)") if mode is not None else None
        """The Run's replay mode, if set (a step's own mode wins)."""
        # Outside a kernel identical steps are numbered within this Run; in a kernel, within a cell execution,
        # across every Run of the cell (their recordings share the notebook).
        self._occurrences = env.occurrences() if env is not None else Occurrences()
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
    async def step(self, role: Role[T], input: object, *, mode: Mode | None = None, label: str | None = None
                   ) -> T: ...
    @overload
    async def step(self, role: RoleFactory[..., T], input: object, *, mode: Mode | None = None,
                   label: str | None = None) -> T: ...
    async def step(self, role: Role[T] | RoleFactory[..., T], input: object, *, mode: Mode | None = None,
                   label: str | None = None) -> T:
        """Run one step of ``role`` on ``input`` and return the reported payload (None without a reporting tool).

        ``label`` is shown in the step's view beside the role, to tell it from other steps of the role (by default,
        the input's first text field, shortened); it is not part of what the model sees.

        A recorded step replays (mode ``auto`` or ``replay``): no model call, no tool call, no question, the same
        events (plus ``step.replayed``) and the same result. Otherwise it runs live and, unless the mode is
        ``off``, its record is kept in the Run's store.

        Raises:
            InputError: ``input`` is not one of the role's accepted types, or the role has no model.
            RoleIncompleteError: The agent never reported; the step's work was wiped.
            ReplayMissError: Mode ``replay`` and no recording matches; the message names the nearest.
            Exception: A tool's handler raised: the step's work was wiped and the same exception is re-raised.
            StepInterrupted: In a notebook, the kernel was interrupted: the step's work was wiped, nothing recorded.
        """
        __tracebackhide__ = True  # IPython shows the person's frames, not these (unless %xmode --show)
        # Everything up to the first await runs as soon as the step starts, in the order steps are started:
        # that is what makes the occurrence number (and so replay under asyncio.gather) deterministic.
        resolved = self._resolve_role(role)
        _check_input(resolved, input)
        model, model_id = self._model_for(resolved)
        step_mode = resolve_mode(step=mode, run=self.mode)
        view = self._view_factory(resolved) if self._view_factory is not None else None
        emit = self._emit if view is None else _emit_to(view, self._emit)
        scope = StepScope(resolved.name, emit, view=view)
        plan = _StepPlan.build(resolved, input, model, model_id, scope)

        def finished(outcome: LoopOutcome) -> Event:
            self.outcomes.append(outcome)
            return StepFinished(resolved.name, outcome.result_json, outcome.requests, outcome.truncated)

        outcome = await self._recorded(
            name=resolved.name, label=label, input_json=plan.input_json, backend=plan.backend, fp=plan.fingerprint,
            mode=step_mode, view=view, scope=scope, network=getattr(model, "network", True),
            blocked=f"A step of role {resolved.name!r} would call a model", live=lambda: plan.run_live(emit),
            replay=plan.replay, record=lambda record_id, occurrence, outcome: plan.record(
                record_id, occurrence, outcome, self._cell_id()),
            finished=finished, unfit=plan.unfit)
        result: T = outcome.result
        return result

    async def unit(self, name: str, input: JsonValue, *, parts: Mapping[str, JsonValue], backend: str,
                   network: bool, work: Work, mode: Mode | None = None) -> UnitOutcome:
        """Run (or replay) one unit of work other than a step: a top-level call of an agent's function.

        What `agl_notebook.functions.UnitRunner` asks: the unit is fingerprinted from ``name`` (as the role),
        ``backend``, ``input`` and each of ``parts``, numbered, recorded and replayed like a step (same modes,
        events, views and store). A replay runs ``work(record.tape)`` and must give the recorded result; a live run
        is ``work(None)``, its tape kept in the record.

        Raises:
            ReplayMissError: Mode ``replay`` and no recording matches (the message names the differing parts), or
                the recording does not replay to its own result.
            ModelCallBlockedError: A ``network`` unit would run live where model calls are blocked.
        """
        __tracebackhide__ = True
        # As in `step`, everything up to the first await runs when the unit starts (the occurrence number).
        unit_mode = resolve_mode(step=mode, run=self.mode)
        fp = fingerprint(role=name, backend=backend, system="", tools=(), reporting=None, input_type="arguments",
                         input=input, settings={}, extra=parts)
        view = self._view_factory(_unit_role(name)) if self._view_factory is not None else None
        scope = StepScope(name, self._emit if view is None else _emit_to(view, self._emit), view=view)

        async def replay(record: StepRecord) -> UnitOutcome:
            __tracebackhide__ = True
            outcome = await work(record.tape)
            if outcome.result != record.result:
                raise ReplayMissError(f"The recording {record.id} of {name!r} does not replay to its own result: "
                                      "it is damaged. Run the call in mode 'refresh' to record it again.",
                                      nearest=record, differing=())
            return dataclasses.replace(outcome, usage=record.usage)

        def record(record_id: str, occurrence: int, outcome: UnitOutcome) -> StepRecord:
            return StepRecord(id=record_id, parts=fp.parts, occurrence=occurrence, role=name, backend=backend,
                              input=input, result=outcome.result, transcript=(), usage=outcome.usage,
                              cell_id=self._cell_id(), recorded_at=_now(), tape=outcome.tape)

        return await self._recorded(
            name=name, label=None, input_json=input, backend=backend, fp=fp, mode=unit_mode, view=view, scope=scope,
            network=network, blocked=f"A call of {name!r} would reach a model or a server", live=lambda: work(None),
            replay=replay, record=record,
            finished=lambda outcome: StepFinished(name, outcome.result, outcome.requests))

    async def _recorded(self, *, name: str, label: str | None, input_json: JsonValue, backend: str, fp: Fingerprint,
                        mode: Mode,
                        view: StepView | None, scope: StepScope, network: bool, blocked: str,
                        live: Callable[[], Awaitable[Out]], replay: Callable[[StepRecord], Awaitable[Out]],
                        record: Callable[[str, int, Out], StepRecord], finished: Callable[[Out], Event],
                        unfit: Callable[[StepRecord], Sequence[str]] = lambda record: ()) -> Out:
        """What a step and a unit share: number it, replay its record or run it live and keep one, tell the view.

        Everything before the first await runs as soon as this is awaited (the occurrence number is taken there).
        ``unfit`` says why a found record can no longer be replayed (its result no longer builds the payload): such
        a record runs live in mode ``auto``, with a warning, and is a `ReplayMissError` in mode ``replay``.
        """
        __tracebackhide__ = True
        emit = scope.emit
        occurrence = self._next_occurrence(fp.base)
        record_id = fp.with_occurrence(occurrence)
        token = current_scope.set(scope)
        waker = _wake_for_interrupts() if self._environment is not None else None
        kept: StepRecord | None = None
        try:
            # Told before the first await, so views take their places in the order steps start.
            emit(StepStarted(name, input_json, backend, input_label(input_json) if label is None else label))
            ready = getattr(self.store, "ready", None)  # a store that must hear from elsewhere first (the notebook's)
            if ready is not None and mode in ("auto", "replay"):
                await ready()
            found = self.store.get(record_id) if mode in ("auto", "replay") else None
            unfit_message: str | None = None
            nearest_unfit: StepRecord | None = None
            if found is not None and (problems := unfit(found)):
                unfit_message = _no_longer_fits(found, name, problems, where=repr(self.store))
                if mode == "auto":
                    warn(f"{unfit_message} The step runs live; its new record is kept in this session.",
                         RecordingWarning)
                nearest_unfit, found = found, None
            if view is not None:
                view.begin(replaying=found is not None)
            if waker is not None and waker.interrupted:
                # This cell was interrupted before the step began (a step under asyncio.gather starting after
                # another one noticed the interrupt): it does not run.
                import asyncio

                raise asyncio.CancelledError
            if found is not None:
                emit(StepReplayed(name, found.id, found.backend))
                outcome = await replay(found)
                kept = found
                note_used(self._cell_id(), self._execution_key(), found.id)
            elif mode == "replay" and unfit_message is not None:
                raise ReplayMissError(f"{unfit_message} Mode 'replay' never calls a model: run it in mode 'auto' or "
                                      "'refresh' to record it again.", nearest=nearest_unfit, differing=())
            elif mode == "replay":
                message, nearest, differing = explain_miss(name, fp, occurrence, self.store.records(),
                                                           where=repr(self.store))
                raise ReplayMissError(f"{message} Mode 'replay' never calls a model: run it in mode 'auto' or "
                                      "'refresh' to record it.", nearest=nearest, differing=differing)
            else:
                if mode == "auto" and unfit_message is None:  # a miss to explain (an unfit record was warned of)
                    miss = Miss(name, fp, occurrence, tuple(self.store.records()), repr(self.store), self._cell_id())
                    note_miss(miss)
                    _show_miss(view, miss)
                if modes.session.block_model_calls and network:
                    raise ModelCallBlockedError(
                        f"{blocked}, and model calls are blocked here "
                        f"(under nbval, or {modes.BLOCK_VARIABLE}=1). Record it first: run the notebook with "
                        "`agl-notebook execute --record`, or run the cell in JupyterLab and save.")
                try:
                    outcome = await live()
                except MissingCredentialsError as e:
                    if mode != "auto":
                        raise
                    message, _, _ = explain_miss(name, fp, occurrence, self.store.records(), where=repr(self.store))
                    raise MissingCredentialsError(f"This step is not recorded, so it must run live. {message}\n\n"
                                                  f"{e}") from None
                if waker is not None and waker.interrupted:
                    # The interrupt came while nothing yielded (a blocking tool): end as the cell's cancellation
                    # would have. A CancelledError, not a KeyboardInterrupt: raised in a task of its own (a step
                    # under asyncio.gather), a KeyboardInterrupt would escape the event loop and stop the kernel.
                    import asyncio  # loaded already: a waker exists only on a running event loop

                    raise asyncio.CancelledError
                if mode != "off":
                    kept = self.store.put(record(record_id, occurrence, outcome))
                    note_used(self._cell_id(), self._execution_key(), kept.id)
        except BaseException as e:  # KeyboardInterrupt and cancellation wipe the step too
            scope.wipe()
            self._release_occurrence(fp.base, occurrence)
            try:
                emit(StepFailed(name, type(e).__name__, str(e)))
                if view is not None:
                    view.fail(e)
            except Exception as reporting_error:  # a broken view must not hide why the step failed
                e.add_note(f"(Drawing the failure failed too: {type(reporting_error).__name__}: {reporting_error})")
            if waker is not None and waker.interrupted and _is_interrupt(e):
                from .interrupts import StepInterrupted, interrupted_message

                raise StepInterrupted(interrupted_message(name)) from None
            raise
        finally:
            current_scope.reset(token)
            if waker is not None:
                waker.cancel()
        emit(finished(outcome))
        if view is not None:
            view.finish(kept)
        return outcome

    def step_sync(self, role: Role[T] | RoleFactory[..., T], input: object, *, mode: Mode | None = None) -> T:
        """`step`, for code that cannot await (a synchronous cell or script).

        The step runs on a worker thread with its own event loop; in a notebook the cell's thread meanwhile
        services widget messages, so questions are answered in the same cell. An interrupt cancels the step, which
        then ends with a `StepInterrupted` in a notebook (a `KeyboardInterrupt` elsewhere).
        """
        __tracebackhide__ = True
        from .notebook.sync import run_sync

        resolved = self._resolve_role(role)
        finished = False

        async def step() -> T:
            __tracebackhide__ = True
            nonlocal finished
            result = await self.step(resolved, input, mode=mode)
            finished = True
            return result

        try:
            # The step runs on a worker thread, where the person's line is not on the stack for a warning to point at.
            return at_call_site(run_sync, step)
        except KeyboardInterrupt:
            # Outside a kernel Ctrl-C stays a KeyboardInterrupt; so does one that came after the step had finished
            # and kept its record.
            if finished or self._environment is None:
                raise
            from .interrupts import StepInterrupted, interrupted_message

            raise StepInterrupted(interrupted_message(resolved.name)) from None

    def _next_occurrence(self, base: str) -> int:
        return self._occurrences.take(self._execution_key(), base)

    def _release_occurrence(self, base: str, occurrence: int) -> None:
        self._occurrences.give_back(self._execution_key(), base, occurrence)

    def _execution_key(self) -> object:
        """What occurrence numbers count within: the whole Run, or a cell execution in a notebook."""
        return self._environment.execution_key() if self._environment is not None else None

    def _cell_id(self) -> str | None:
        """The notebook cell running the step, where known."""
        return self._environment.cell_id() if self._environment is not None else None

    def _emit(self, event: Event) -> None:
        __tracebackhide__ = True  # a sink is the person's: its frame shows, not this one
        for sink in self._sinks:
            sink(event)

    def _resolve_role(self, role: Role[T] | RoleFactory[..., T]) -> Role[T]:
        if isinstance(role, Role):
            return role
        if not isinstance(role, RoleFactory):
            raise InputError(f"run.step() takes a Role or a @role function, not {role!r}.")
        required = _required_parameters(role.function)
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
        if isinstance(chosen, str):
            from .models import resolve_model  # lazily: the Anthropic backend imports the anthropic SDK

            return resolve_model(chosen), chosen
        if chosen is not None:
            return chosen, model_id
        raise InputError(f"Role {role.name!r} has no model: give it one with @role(model=Claude.OPUS), or run "
                         "it with Run(model=ScriptedModel(...)).")


def _is_interrupt(error: BaseException) -> bool:
    import asyncio  # loaded already: only a step on a running event loop asks

    return isinstance(error, KeyboardInterrupt | asyncio.CancelledError)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@functools.cache
def _unit_role(name: str) -> Role[None]:
    """What a unit's view is made for: a role of the unit's name, with no tools (so no result descriptions)."""
    return Role(name, instructions=f"Runs {name} (a unit of work, not a model's role).")


@functools.cache
def _required_parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


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


def _no_longer_fits(record: StepRecord, name: str, problems: Sequence[str], *, where: str) -> str:
    """What to say of a matching recording whose result no longer builds the payload."""
    cell = f" (recorded in cell {record.cell_id})" if record.cell_id else ""
    return (f"The recording {record.id} of {name!r}{cell} in {where} no longer fits: its reported result does not "
            f"build the payload now: {'; '.join(problems)}. The recording is left as it is.")


@dataclasses.dataclass
class _StepPlan:
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
    questions: list[RecordedQuestion] = dataclasses.field(default_factory=list)

    @classmethod
    def build(cls, role: Role[Any], value: object, model: Model, model_id: str, scope: StepScope) -> _StepPlan:
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
            settings={"max_tokens": role.max_tokens, "max_tool_roundtrips": role.max_tool_roundtrips,
                      "reminders": role.reminders},
        )
        return cls(role, model, model_id, backend, system, user_text(input_message(value)), tools, reporting,
                   input_json, fp, scope)

    async def run_live(self, emit: EventSink) -> LoopOutcome:
        __tracebackhide__ = True
        return await self._loop(self.model, [self._live_tool(t) for t in self.tools], emit)

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
        outcome = await self._loop(_RecordedModel(record), [self._replay_tool(t, record, results)
                                                             for t in self.tools], self.scope.emit)
        if outcome.result_json != record.result:
            raise ReplayMissError(f"The recording {record.id} of role {self.role.name!r} does not replay to its own "
                                  "result: it is damaged. Run the step in mode 'refresh' to record it again.",
                                  nearest=record, differing=())
        return dataclasses.replace(outcome, usage=record.usage)

    def record(self, record_id: str, occurrence: int, outcome: LoopOutcome, cell_id: str | None) -> StepRecord:
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
            usage=outcome.usage,
            cell_id=cell_id,
            recorded_at=_now(),
        )

    async def _loop(self, model: Model, tools: list[LoopTool], emit: EventSink) -> LoopOutcome:
        __tracebackhide__ = True
        return await run_loop(
            model=model,
            model_id=self.model_id,
            system=self.system,
            messages=[self.first_message],
            tools=tools,
            reporting=self.reporting,
            emit=emit,
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
                raise InputError(f"The handler of tool {t.name!r} returned {type(result).__name__}; it must "
                                 "return a ToolResult.")
            self.questions.extend(RecordedQuestion(call_id, q.text, q.inputs, q.answer)
                                  for q in self.scope.questions[asked:])
            return result.text, result.rejected

        return LoopTool(_tool_spec(t), call, t.spec.validate)

    def _replay_tool(self, t: Tool[Any], record: StepRecord, results: dict[str, ToolResultBlock]) -> LoopTool:
        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            __tracebackhide__ = True
            for q in record.questions:
                if q.tool_call_id == call_id:
                    self.scope.emit(QuestionAsked(q.text, q.inputs))
                    self.scope.emit(QuestionAnswered(q.text, q.answer))
            recorded = results.get(call_id)
            if recorded is None:
                raise ReplayMissError(f"The recording {record.id} has no result for the call {call_id} to "
                                      f"{t.name!r}: it is damaged. Run the step in mode 'refresh'.",
                                      nearest=record, differing=())
            return recorded.content, recorded.is_error

        return LoopTool(_tool_spec(t), call, t.spec.validate)


class _RecordedModel:
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
