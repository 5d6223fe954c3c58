"""Client tools: handlers you register that the agent calls mid-turn, and the round-trip loop around them.

See docs/client-tools.md.

::

    from agl_notebook.client_tools import ToolResult, stream

    async def get_weather(args, ctx):
        return ToolResult(content=json.dumps({"city": args.get("city"), "temp": 22}))

    async for event in stream(
        {"name": "assistant", "instructions": "Use the available tools to answer questions."},
        "What is the weather in Sydney?",
        tool_handlers={"get_weather": get_weather},
        client_tools=[{"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object"}}],
    ):
        if event.type == "response.output_text.delta":
            print(event.delta, end="")

A thin API over the same machinery as roles: a run is one step of a role built from the agent (its name and
instructions) and the client tools, run by an `agl_notebook.Run` through the one tool loop. So it streams the same
events, keeps the same structured transcript (every tool_use answered by a tool_result with its id), and in a
notebook draws the same live view and is recorded in, and replayed from, the notebook like any step. What differs
from roles, on purpose (docs/client-tools.md):

- A handler is ``handler(args: dict, ctx: ToolExecutionContext)`` returning an awaitable `ToolResult`. If it raises,
  or returns anything but a `ToolResult` with string content, the model gets an error result with the exception's
  type and message and the run goes on.
- The arguments are not checked against ``parameters`` (it is the schema the model is shown); they reach the handler
  as the model wrote them (a copy, so a handler cannot change what was recorded).
- A tool the agent calls that was not listed in ``client_tools`` for this turn gets ``Tool not offered this turn:
  <name>`` and no handler runs, even if ``tool_handlers`` has one; this holds also when no tools are listed.
- A tool listed in ``client_tools`` without a handler is offered to the model, and a call to it gets the error
  result ``No handler for tool <name>: ...`` (the run goes on).
- ``max_tool_roundtrips=N`` allows N round trips, so N+1 model requests. If the last reply still asks for tools,
  those calls are answered "not run", ``run.truncated`` is emitted and ``result.truncated`` is True.
- A client tool may declare ``"approval"``: ``"ask"`` (a person approves, edits or denies every call before its
  handler runs) or a policy ``policy(args, request)`` returning ``"approve"``, ``"deny"`` or ``"ask"``, as for a
  role's `agl_notebook.tool` (docs/roles-and-tools.md, "Approvals"). An edit is not checked against
  ``parameters`` (the arguments never are), only that it is an object. It is not sent to the model.
- Tool calls written as text (``<｜DSML｜tool_call>{"name": ..., "arguments": {...}}</｜DSML｜tool_call>``) are
  turned into ordinary calls for every model; the markup never reaches the events or ``result.text``. A span that
  cannot be read is dropped with a ``markup.error`` event; the transcript keeps it as the model wrote it, so the
  model and a replay see what was written (`agl_notebook.models.markup`).

The stream carries the loop's events: ``response.output_text.delta``, ``client.tool.requested|executing|result|
roundtrip``, ``run.truncated``, ``markup.error``, ``question.asked|answered``, ``approval.requested|decided``. The
step lifecycle events a `Run`
also emits (``step.*``) go only to the Run's own views and sinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypedDict, Unpack

from . import _tally
from .approvals import ApprovalPolicy, check_policy
from .errors import InputError
from .events import (
    ApprovalDecided,
    ApprovalRequested,
    ClientToolExecuting,
    ClientToolRequested,
    ClientToolResult,
    ClientToolRoundtrip,
    Event,
    MarkupError,
    OutputTextDelta,
    QuestionAnswered,
    QuestionAsked,
    RunTruncated,
    StepFailed,
    StepFinished,
    StepReplayed,
    StepStarted,
)
from .loop import DEFAULT_MAX_TOOL_ROUNDTRIPS, current_tool_call_id, error_text
from .models.base import Model, Usage, is_model
from .models.markup import DSML_TOOL_CALL_CLOSE, DSML_TOOL_CALL_OPEN
from .payloads import JsonObject, PayloadSpec
from .replay.modes import Mode
from .roles import Claude, Role
from .run import Run
from .terminals import Terminal
from .tools import Tool, is_tool_name
from .tools import ToolResult as _RoleToolResult
from .transcript import Message

__all__ = [
    "DEFAULT_MAX_TOOL_ROUNDTRIPS",
    "DSML_TOOL_CALL_CLOSE",
    "DSML_TOOL_CALL_OPEN",
    "DEFAULT_MODEL",
    # Events
    "ApprovalDecided",
    "ApprovalRequested",
    "ClientToolExecuting",
    "ClientToolRequested",
    "ClientToolResult",
    "ClientToolRoundtrip",
    "Event",
    "MarkupError",
    "OutputTextDelta",
    "QuestionAnswered",
    "QuestionAsked",
    "RunTruncated",
    # Running
    "RunOptions",
    "RunResult",
    "Runner",
    "run",
    "stream",
    # Handlers
    "ToolExecutionContext",
    "ToolHandler",
    "ToolHandlers",
    "ToolResult",
]

DEFAULT_MODEL = Claude.SONNET
"""The model a run uses when neither the call, the `Runner` nor its `Run` names one."""


@dataclass(frozen=True)
class ToolResult:
    """What a client tool's handler returns."""

    content: str
    """What the agent reads back."""
    is_error: bool = False
    """True tells the agent the call failed."""


@dataclass(frozen=True)
class ToolExecutionContext:
    """What a handler is told about the call it runs."""

    tool_call_id: str | None = None
    """The id of the tool call (its result carries the same id)."""


ToolHandler: TypeAlias = Callable[[dict[str, Any], ToolExecutionContext], Awaitable[ToolResult]]
"""``handler(args, ctx)``: any callable returning an awaitable `ToolResult` (an async function, or a lambda
returning a coroutine)."""
ToolHandlers: TypeAlias = dict[str, ToolHandler]
"""Handlers by tool name."""


@dataclass(frozen=True)
class RunResult:
    """How a client-tools run went."""

    events: tuple[Event, ...]
    """Every event the stream yielded, in order."""
    text: str
    """The text the agent wrote after its last tool round trip, as streamed (never any markup)."""
    truncated: bool
    """True when the round-trip limit cut the run short (some calls of the last reply were not run)."""
    transcript: tuple[Message, ...]
    """The whole conversation: the message, then every reply (tool_use blocks) and result (tool_result blocks)."""
    requests: int
    """How many model requests were made (at most ``max_tool_roundtrips + 1``)."""
    usage: Usage
    """Tokens over every request (a replayed run reports what the recording spent)."""
    replayed: bool = False
    """True when the run was answered from a recording: no model, no handler ran."""


class RunOptions(TypedDict, total=False):
    """The options of a run, each optional, as keywords of `Runner.run`, `Runner.stream`, `run`, `stream` ..."""

    tool_handlers: Mapping[str, ToolHandler] | None
    """Handlers by tool name; only tools listed in ``client_tools`` are ever run."""
    client_tools: Sequence[Mapping[str, Any]] | None
    """The tools offered: ``{"name", "description", "parameters"}``, ``parameters`` being the JSON Schema the model
    is shown (``{"type": "object", ...}``), and optionally ``"approval"``: ``"ask"`` or a policy function."""
    max_tool_roundtrips: int
    """How many tool round trips are allowed (so at most this plus one model requests); by default
    `DEFAULT_MAX_TOOL_ROUNDTRIPS`."""
    model: Model | str | None
    """The model for this run, over the Runner's."""
    max_tokens: int
    """The most output tokens per model reply (4096 by default)."""
    mode: Mode | None
    """The replay mode of this run (``auto``, ``replay``, ``refresh``, ``off``), over the Run's."""


_OPTIONS = frozenset(RunOptions.__annotations__)
_STEP_EVENTS = (StepStarted, StepFinished, StepFailed, StepReplayed)


class _Collector:
    """Where one run's events go: its own step's events, less the lifecycle events (``step.*``).

    `Run.step_outcome` sends it no event of another step (nor of the steps its handlers start); the lifecycle
    events stay with the Run's views and sinks.
    """

    def __init__(self, forward: Callable[[Event], None]) -> None:
        self.forward = forward
        self.replayed = False
        self.text: list[str] = []  # the streamed text since the last round trip: the run's final text

    def __call__(self, event: Event) -> None:
        if isinstance(event, _STEP_EVENTS):
            if isinstance(event, StepReplayed):
                self.replayed = True
            return
        if isinstance(event, OutputTextDelta):
            self.text.append(event.delta)
        elif isinstance(event, ClientToolRoundtrip):
            self.text.clear()
        self.forward(event)


@dataclass(frozen=True)
class _Call:
    """One run, checked and built: the role to step and the message to step it on."""

    role: Role[None]
    message: str
    mode: Mode | None


class Runner:
    """Runs client-tools agents through one `agl_notebook.Run`: its model, store, replay mode, views and terminal.

    Args:
        model: The model for runs that do not name one: a `Model` (e.g. `agl_notebook.ScriptedModel`) or a model
            id; by default `DEFAULT_MODEL` through the Anthropic backend.
        run: The `agl_notebook.Run` the runs go through (shared with role steps, if you like); by default a new
            one. Its ``model``, if set, overrides every other (as it does for roles).

    Examples:
        >>> runner = Runner(model=ScriptedModel(["Hello."]))  # doctest: +SKIP
        >>> result = await runner.run({"name": "greeter", "instructions": "Greet."}, "Hi")  # doctest: +SKIP
    """

    def __init__(self, *, model: Model | str | None = None, run: Run | None = None) -> None:
        _check_model(model, "Runner(model=...)")
        if run is not None and not isinstance(run, Run):
            raise InputError(f"Runner(run=...) takes an agl_notebook.Run, not {run!r}.")
        self.model = model
        """The model for runs that do not name one."""
        self.session: Run = run if run is not None else Run()
        """The `agl_notebook.Run` every run goes through."""

    @property
    def terminal(self) -> Terminal:
        """Where handlers ask a person: ``await runner.terminal.show(screen_fn, **kwargs)`` (recorded, replayed)."""
        return self.session.terminal

    async def run(
        self,
        agent: Mapping[str, Any],
        message: str,
        **options: Unpack[RunOptions],
    ) -> RunResult:
        """Run the agent on ``message`` until it stops calling tools (or the round-trip limit); see `stream`."""
        call = self._call(agent, message, options, "run")
        return await self._execute(call)

    def run_sync(
        self,
        agent: Mapping[str, Any],
        message: str,
        **options: Unpack[RunOptions],
    ) -> RunResult:
        """`run`, for code that cannot await (a synchronous cell or script).

        The run goes on a worker thread with its own event loop; in a notebook the cell's thread meanwhile
        services widget messages, so handlers can ask questions in the same cell. An interrupt cancels the run.
        """
        call = self._call(agent, message, options, "run_sync")
        return self.session.run_sync(lambda: self._execute(call))

    def stream(
        self,
        agent: Mapping[str, Any],
        message: str,
        **options: Unpack[RunOptions],
    ) -> AsyncIterator[Event]:
        """The events of a run of the agent on ``message``, as they happen.

        Args:
            agent: ``{"name": ..., "instructions": ...}``: the agent's name and its system text.
            message: The user's message.
            options: `RunOptions`: ``tool_handlers``, ``client_tools``, ``max_tool_roundtrips``, ``model``,
                ``max_tokens``, ``mode``.

        Raises:
            InputError: At once, for an agent, message, tool, handler or limit that is not usable.
            Exception: While iterating, whatever stops the run (the model refused, a replay missed, ...).
        """
        call = self._call(agent, message, options, "stream")
        return self._stream(call)

    async def _stream(self, call: _Call) -> AsyncIterator[Event]:
        # The run is a task of its own and the consumer sees each event as soon as it is emitted: a deque and a
        # wake-up future (cheaper per event than an asyncio.Queue; everything happens on this event loop).
        ready: deque[Event] = deque()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] | None = None

        def wake(_: object = None) -> None:
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        def push(event: Event) -> None:
            ready.append(event)
            wake()

        task = asyncio.ensure_future(self._execute(call, push))
        task.add_done_callback(wake)
        try:
            while True:
                while ready:
                    yield ready.popleft()
                if task.done():
                    break
                waiter = loop.create_future()
                await waiter
            task.result()  # the run's error, if it failed
        finally:
            if not task.done():  # the consumer stopped early: stop the run (its step is wiped)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _execute(self, call: _Call, forward: Callable[[Event], None] | None = None) -> RunResult:
        """Run the step; its events go to ``forward``, or (without one) into the result's ``events``."""
        events: list[Event] = []
        collector = _Collector(forward or events.append)
        with _tally.counted_as("client-tools run"):
            outcome = await self.session.step_outcome(call.role, call.message, mode=call.mode, on_event=collector)
        return RunResult(
            tuple(events),
            "".join(collector.text),
            outcome.truncated,
            outcome.transcript,
            outcome.requests,
            outcome.usage,
            collector.replayed,
        )

    def _call(self, agent: object, message: object, options: RunOptions, where: str) -> _Call:
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"{where}() got an unexpected keyword argument {unknown[0]!r}; its options are "
                f"{', '.join(sorted(_OPTIONS))}."
            )
        tool_handlers, client_tools = options.get("tool_handlers"), options.get("client_tools")
        max_tool_roundtrips = options.get("max_tool_roundtrips", DEFAULT_MAX_TOOL_ROUNDTRIPS)
        model, max_tokens, mode = options.get("model"), options.get("max_tokens", 4096), options.get("mode")
        name, instructions = _check_agent(agent)
        if not isinstance(message, str) or not message.strip():
            raise InputError(f"The message must be a non-empty string, not {message!r}.")
        handlers = _check_handlers(tool_handlers)
        specs = _check_client_tools(client_tools)
        for what, value, least in (("max_tool_roundtrips", max_tool_roundtrips, 0), ("max_tokens", max_tokens, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise InputError(f"{what} must be a whole number >= {least}, not {value!r}.")
        _check_model(model, "model=...")
        tools = [_tool(spec, handlers.get(spec.name)) for spec in specs]
        role: Role[None] = Role(
            name,
            instructions,
            tools,
            model=model or self.model or DEFAULT_MODEL,
            max_tokens=max_tokens,
            max_tool_roundtrips=max_tool_roundtrips,
            reminders=0,
        )
        return _Call(role, message, mode)

    def __repr__(self) -> str:
        return f"Runner(model={self.model!r}, run={self.session!r})"


def stream(
    agent: Mapping[str, Any],
    message: str,
    **options: Unpack[RunOptions],
) -> AsyncIterator[Event]:
    """The events of one run, as they happen, on a new `Runner` (see `Runner.stream`)."""
    return Runner().stream(agent, message, **options)


async def run(
    agent: Mapping[str, Any],
    message: str,
    **options: Unpack[RunOptions],
) -> RunResult:
    """One run to its end, on a new `Runner` (see `Runner.run`); the result holds its ``events``."""
    return await Runner().run(agent, message, **options)


# Checking what was given ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClientTool:
    name: str
    description: str
    parameters: JsonObject
    approval: ApprovalPolicy = None


_TOOL_KEYS = {"name", "description", "parameters", "approval"}


def _check_agent(agent: object) -> tuple[str, str]:
    if not isinstance(agent, Mapping):
        raise InputError(f"The agent is a dict {{'name': ..., 'instructions': ...}}, not {type(agent).__name__}.")
    unknown = sorted(map(str, set(agent) - {"name", "instructions"}))
    if unknown:
        raise InputError(f"The agent has unknown keys {unknown}; an agent is {{'name': ..., 'instructions': ...}}.")
    name, instructions = agent.get("name"), agent.get("instructions")
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"The agent needs a non-empty 'name' string, not {name!r}.")
    if not isinstance(instructions, str) or not instructions.strip():
        raise InputError(f"The agent {name!r} needs non-empty 'instructions': the system text it reads.")
    return name, instructions


def _check_handlers(handlers: object) -> dict[str, ToolHandler]:
    if handlers is None:
        return {}
    if not isinstance(handlers, Mapping):
        raise InputError(f"tool_handlers is a dict of handlers by tool name, not {type(handlers).__name__}.")
    for name, handler in handlers.items():
        if not isinstance(name, str):
            raise InputError(f"tool_handlers: the key {name!r} is not a tool name (a string).")
        if not callable(handler):
            raise InputError(
                f"tool_handlers[{name!r}] must be a callable handler(args, ctx) returning an awaitable "
                f"ToolResult, not {handler!r}."
            )
    return dict(handlers)


def _check_client_tools(tools: object) -> list[_ClientTool]:
    if tools is None:
        return []
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise InputError("client_tools is a list of {'name', 'description', 'parameters'} dicts.")
    checked: list[_ClientTool] = []
    seen: set[str] = set()
    for i, t in enumerate(tools):
        where = f"client_tools[{i}]"
        if not isinstance(t, Mapping):
            raise InputError(
                f"{where}: a client tool is a dict {{'name', 'description', 'parameters'}}, not {type(t).__name__}."
            )
        unknown = sorted(map(str, set(t) - _TOOL_KEYS))
        if unknown:
            raise InputError(
                f"{where}: unknown keys {unknown}; a client tool has name, description, parameters and, optionally, "
                "approval."
            )
        name, description = t.get("name"), t.get("description", "")
        parameters = t.get("parameters", {"type": "object"})
        if not isinstance(name, str) or not is_tool_name(name):
            raise InputError(f"{where}: the name must be 1 to 64 letters, digits, '_' or '-', not {name!r}.")
        if name in seen:
            raise InputError(f"{where}: two client tools are named {name!r}; names are unique.")
        seen.add(name)
        if not isinstance(description, str):
            raise InputError(f"{where} ({name!r}): the description must be a string, not {description!r}.")
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise InputError(
                f"{where} ({name!r}): parameters must be a JSON Schema of an object, "
                f"{{'type': 'object', ...}}, not {parameters!r}."
            )
        try:
            # A private copy, as JSON: it is part of the run's fingerprint, so it must not change under the run.
            schema = json.loads(json.dumps(parameters, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise InputError(f"{where} ({name!r}): parameters must be JSON ({e}).") from None
        approval = t.get("approval")
        check_policy(f"{where} ({name!r})", approval)
        checked.append(_ClientTool(name, description, schema, approval))
    return checked


def _check_model(model: object, where: str) -> None:
    if model is None or is_model(model):
        return
    if not isinstance(model, str) or not model.strip():
        raise InputError(f"{where} takes a model backend (such as ScriptedModel) or a model id, not {model!r}.")


# Client tools as role tools ---------------------------------------------------------------------------------------


def _as_given(data: Any, path: str, problems: list[str]) -> Any:
    """The arguments pass as the model wrote them (a copy): ``parameters`` is what the model is shown, not a check."""
    return copy.deepcopy(data)


def _tool(spec: _ClientTool, handler: ToolHandler | None) -> Tool[Any]:
    async def call(args: dict[str, Any]) -> _RoleToolResult:
        content, is_error = await _call_handler(
            spec.name, handler, args, ToolExecutionContext(current_tool_call_id.get())
        )
        return _RoleToolResult(content, rejected=is_error)

    # Built directly rather than with tool(): the schema is the user's JSON Schema, not one made from a dataclass.
    return Tool(spec.name, spec.description, dict, call, PayloadSpec(dict, spec.parameters, _as_given), spec.approval)


async def _call_handler(
    name: str, handler: ToolHandler | None, args: dict[str, Any], ctx: ToolExecutionContext
) -> tuple[str, bool]:
    """Run a handler; what it raises, or a result of the wrong type, becomes an error result (type and message)."""
    if handler is None:
        return (
            f"No handler for tool {name}: it is listed in client_tools but tool_handlers has no handler for it.",
            True,
        )
    try:
        pending = handler(args, ctx)
        if not inspect.isawaitable(pending):
            raise TypeError(
                f"the handler of tool {name!r} returned {type(pending).__name__}, not an awaitable; "
                "make it an async function returning ToolResult"
            )
        result = await pending
        if not isinstance(result, ToolResult):
            raise TypeError(
                f"the handler of tool {name!r} returned {type(result).__name__}; it must return "
                "ToolResult(content, is_error=False) from agl_notebook.client_tools"
            )
        if not isinstance(result.content, str):
            raise TypeError(
                f"the handler of tool {name!r} returned ToolResult content of type "
                f"{type(result.content).__name__}; content must be a string"
            )
    except Exception as e:
        return error_text(e), True
    return result.content, bool(result.is_error)
