"""Running agents: `Agent.call` runs one top-level call of one function (docs/functions.md).

Semantics, as the agent file's schema documents them:

- A function runs its commands in order; ``result`` holds the previous command's value. Arguments arrive as
  variables; an argument the caller omits is None. ``return`` ends the function with a value; falling off the end
  returns None. ``end`` ends the whole top-level call with a value.
- An error a command raises runs the command's own ``onError`` (whose last value becomes the command's value), else
  the function's ``onError`` instead of the rest of the function, with ``exc`` holding the error (`ErrorInfo`). The
  function's handler sees only the arguments, ``exc`` and what it sets itself; without a ``return`` there, the
  function returns None and its caller continues. An error no handler takes ends the call with `FunctionCallError`.
- A function never runs twice at once in one call chain: `ReentrancyError`, with the chain, never handled.
- ``llm`` runs the one tool loop (`agl_notebook.loop.run_loop`) with the agent's tool functions as tools, each call
  of the model running the function through this interpreter; with ``output`` the model hands back a typed result.
  ``ask`` goes through the run's terminal (input widgets in a notebook). ``api`` goes through a profile.

Recording: a top-level call is one unit of work. Its effects (model replies, API responses, answers) go on a tape
(`agl_notebook.functions._tape`); replaying the tape runs the same commands and gives the same events and result
without reaching a model, a server or a person. `Run.unit` (the run layer's unit contract,
`agl_notebook.run.units`) fingerprints, records and replays the call like a step.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .._canonical import digest
from .._scope import current_scope
from ..errors import InputError, MissingCredentialsError, ModelCallBlockedError, ReplayMissError
from ..events import Event, QuestionAnswered, QuestionAsked
from ..loop import LoopTool, Reporting, run_loop
from ..models.base import Model, ToolSpec, Usage, model_network
from ..payloads import JsonObject, JsonValue
from ..replay import modes
from ..run.units import UnitOutcome
from ..run.views import EventSink
from ..screens import ChoiceInput, ConfirmInput, Input, NumberInput, Screen, TextInput
from ..tools import with_report_instruction
from ..transcript import user_text
from ._http import build_request, send
from ._tape import Tape, TapeModel, error_entry
from .errors import (
    ApiError,
    CommandBudgetError,
    CommandError,
    ErrorInfo,
    ExpressionError,
    ExpressionLimitError,
    ExpressionRuntimeError,
    FunctionCallError,
    LoopBoundError,
    ReentrancyError,
    ReplayedError,
)
from .events import ApiRequested, ApiResponded, CommandStarted, ErrorHandled, FunctionCalled, FunctionReturned, Logged
from .expressions import DEFAULT_LIMITS, Limits, measure, to_text
from .spec import (
    AgentSpec,
    ApiArgs,
    Arg,
    AskArgs,
    Block,
    Command,
    FuncArgs,
    Function,
    IfArgs,
    LlmArgs,
    LoopArgs,
    SetArgs,
    ValueArgs,
    walk_commands,
)

if TYPE_CHECKING:
    from ..replay.modes import Mode
    from ..run import Run

logger = logging.getLogger("agl_notebook.functions")

_running: ContextVar[tuple[tuple[int, str], ...]] = ContextVar("agl_notebook_functions_running", default=())
"""The functions running in this task's call chain, as (agent id, name), outermost first."""

FATAL: tuple[type[BaseException], ...] = (
    ReentrancyError,
    CommandBudgetError,
    ReplayMissError,
    ModelCallBlockedError,
    MissingCredentialsError,
)
"""Errors no ``onError`` takes: handling them would hide a bug, a broken recording, or a blocked model call."""

REPORT_TOOL = "report_result"
"""The tool an ``llm`` command with ``output`` offers the model to hand back its result."""


class _Return(BaseException):
    """``return``: a control-flow signal, not an error (a BaseException, so no ``except Exception`` takes it)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _End(BaseException):
    """``end``: ends the whole top-level call."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Agent:
    """A validated agent, ready to call. Build it with `agl_notebook.functions.load_agent`.

    Args:
        spec: The validated agent.
        environ: Where the profiles' environment variables are read (``os.environ`` when None), when a live
            request is made.
        transport: The httpx2 transport for ``api`` requests (``httpx2.MockTransport`` in tests), else the default.
        limits: The expression sandbox's bounds.
        max_commands: The most commands one top-level call may run (each loop has its own bound too; this one
            stops nested loops and long chains that together run away).
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        environ: Mapping[str, str] | None = None,
        transport: Any = None,
        limits: Limits = DEFAULT_LIMITS,
        max_commands: int = 1_000_000,
    ) -> None:
        self.spec = spec
        """The validated agent."""
        self.limits = limits
        """The expression sandbox's bounds."""
        self.max_commands = max_commands
        """The most commands one top-level call may run."""
        self._environ = environ
        self._transport = transport
        self._default_run: Run | None = None

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.spec.name

    @property
    def functions(self) -> tuple[str, ...]:
        """The names of its functions, in file order."""
        return tuple(self.spec.functions)

    def tool_specs(self) -> list[ToolSpec]:
        """Its tool functions as a model is shown them."""
        return [_tool_spec(fn) for fn in self.spec.functions.values() if fn.is_tool]

    def __repr__(self) -> str:
        return f"Agent({self.spec.name!r}, functions={list(self.spec.functions)})"

    async def call(
        self, function: str, args: Mapping[str, Any] | None = None, *, run: Run | None = None, mode: Mode | None = None
    ) -> JsonValue:
        """Call ``function`` with ``args`` and return its result as JSON.

        Args:
            function: The function's name.
            args: Its arguments by name; an omitted one is None (as with ``func``).
            run: The run whose model, terminal, store, views and mode the call uses (a default `Run` if None).
            mode: The replay mode of this call (as for `Run.step`).

        Raises:
            InputError: No such function, or an argument it does not declare or that is not JSON.
            FunctionCallError: An error no ``onError`` handled; it names the command and the call chain.
            ReentrancyError: A function was called while running.
        """
        fn = self.spec.functions.get(function)
        if fn is None:
            raise InputError(
                f"The agent {self.spec.name!r} has no function {function!r}; its functions are "
                f"{', '.join(self.spec.functions)}."
            )
        given = dict(args or {})
        declared = [a.name for a in fn.args]
        unknown = [k for k in given if k not in declared]
        if unknown:
            raise InputError(
                f"{function} has no argument {unknown[0]!r}; its arguments are {', '.join(declared) or 'none'}."
            )
        try:
            input_json = to_json(given)
            measure(given, self.limits)
        except (CommandError, ExpressionError) as e:
            raise InputError(f"The arguments of {function} must be JSON values: {e}") from None
        run = self._run(run)
        name = f"{self.spec.name}.{function}"

        async def work(recorded: Sequence[JsonValue] | None) -> UnitOutcome:
            return await self._work(fn, given, run, recorded)

        outcome = await run.unit(
            name,
            input_json,
            parts=self.fingerprint_parts(function),
            backend=self.backend(function, run),
            network=self.network(function, run),
            work=work,
            mode=mode,
        )
        return outcome.result

    def call_sync(
        self, function: str, args: Mapping[str, Any] | None = None, *, run: Run | None = None, mode: Mode | None = None
    ) -> JsonValue:
        """`call`, for code that cannot await (a synchronous cell or script); see `agl_notebook.Run.run_sync`."""
        chosen = self._run(run)
        return chosen.run_sync(lambda: self.call(function, args, run=chosen, mode=mode))

    def _run(self, run: Run | None) -> Run:
        """The Run given, else this agent's default one (made on first use)."""
        if run is not None:
            return run
        if self._default_run is None:
            from ..run import Run

            self._default_run = Run()
        return self._default_run

    async def replay(
        self, function: str, args: Mapping[str, Any] | None, tape: Sequence[JsonValue], *, run: Run | None = None
    ) -> UnitOutcome:
        """Run a call from a recorded tape (what a Run's ``unit`` does on a hit); no model, server or person."""
        return await self._work(self.spec.functions[function], dict(args or {}), _fresh(run), tape)

    async def record(
        self, function: str, args: Mapping[str, Any] | None = None, *, run: Run | None = None
    ) -> UnitOutcome:
        """Run a call live and return its result with the tape that replays it."""
        return await self._work(self.spec.functions[function], dict(args or {}), _fresh(run), None)

    async def _work(
        self, fn: Function, args: dict[str, Any], run: Run, recorded: Sequence[JsonValue] | None
    ) -> UnitOutcome:
        """One top-level call of ``fn``: live when ``recorded`` is None, else replaying that tape."""
        tape = Tape(recorded)
        scope = current_scope.get()
        call = _TopLevelCall(self, run, tape, scope.emit if scope is not None else _no_events)
        result = await call.top(fn, args)
        tape.finish()
        return UnitOutcome(result, tuple(tape.entries), call.usage, call.requests)

    # Fingerprints -------------------------------------------------------------------------------------------

    def reachable(self, function: str) -> list[str]:
        """``function`` and every function it may call (through ``func`` or as a model's tool), in order found."""
        seen: list[str] = []
        todo = [function]
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.append(name)
            todo.extend(self.spec.calls.get(name, ()))
        return seen

    def _commands(self, function: str) -> list[Command]:
        out: list[Command] = []
        for name in self.reachable(function):
            fn = self.spec.functions[name]
            out.extend(walk_commands(fn.commands + (fn.on_error or ())))
        return out

    def fingerprint_parts(self, function: str) -> dict[str, JsonValue]:
        """What a call's fingerprint covers beside its input and backend.

        Every function it may reach, the profiles they use (no secret: only variable names), the default model and
        the sandbox's bounds.
        """
        names = self.reachable(function)
        profiles = sorted({c.args.profile for c in self._commands(function) if c.kind == "api"})
        agent: JsonValue = {
            "name": self.spec.name,
            "model": self.spec.model,
            "functions": {n: self.spec.raw_functions.get(n) for n in names},
            "profiles": {p: self.spec.raw_profiles.get(p) for p in profiles},
            "limits": dataclasses.asdict(self.limits),
        }
        return {"agent": digest(agent)[:16], "function": function}

    def backend(self, function: str, run: Run) -> str:
        """The backends of every model the call may use, for its fingerprint (``none`` without ``llm``)."""
        ids = sorted({c.args.model or self.spec.model or "" for c in self._commands(function) if c.kind == "llm"})
        return ",".join(_backend_for(run, m) for m in ids) or "none"

    def network(self, function: str, run: Run) -> bool:
        """Whether a live call may reach the network (an ``api`` command, or a model that is not scripted)."""
        commands = self._commands(function)
        if any(c.kind == "api" for c in commands):
            return True
        return any(c.kind == "llm" for c in commands) and model_network(run.model)


def _no_events(event: Event) -> None:
    pass


def _fresh(run: Run | None) -> Run:
    """The Run given, else a new one (`Agent.record` and `Agent.replay` do not share the agent's default Run)."""
    if run is not None:
        return run
    from ..run import Run

    return Run()


def _backend_for(run: Run, model_id: str) -> str:
    if run.model is not None:
        return run.model.backend_id(model_id)
    from ..models import resolve_backend_id  # the one place that knows which backend a model id string gets

    return resolve_backend_id(model_id or "?")


# --------------------------------------------------------------------------------------------------------------
# JSON at the edges


def to_json(value: Any) -> JsonValue:
    """A sandbox value as JSON (tuples become lists, ``exc`` its fields); `CommandError` if it cannot be."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CommandError(f"{value} cannot be written as JSON.")
        return value
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for k, v in value.items():
            if isinstance(k, str):
                out[k] = to_json(v)
            elif k is None or isinstance(k, bool | int | float):
                out[json.dumps(k)] = to_json(v)
            else:
                raise CommandError(f"a {type(k).__name__} key cannot be written as JSON.")
        return out
    if isinstance(value, ErrorInfo):
        return to_json(value.to_json())
    raise CommandError(f"a {type(value).__name__} value cannot be written as JSON.")


def _json_safe(value: Any) -> JsonValue:
    try:
        return to_json(value)
    except CommandError:
        return repr(value)


def error_info(error: BaseException) -> ErrorInfo:
    """An error as ``exc`` shows it."""
    path = str(getattr(error, "agl_path", ""))
    if isinstance(error, ExpressionRuntimeError):
        return ErrorInfo(error.python_type or type(error).__name__, error.message, command=path)
    if isinstance(error, ExpressionError):
        return ErrorInfo(type(error).__name__, error.message, command=path)
    if isinstance(error, ReplayedError):
        return ErrorInfo(error.type_name, str(error), command=path)
    if isinstance(error, ApiError):
        return ErrorInfo(type(error).__name__, str(error), status=error.status, body=error.body, command=path)
    return ErrorInfo(type(error).__name__, str(error) or type(error).__name__, command=path)


def _mark(error: BaseException, path: str) -> None:
    """Remember where an error first escaped a command, for the handler's ``exc.command`` and the final message."""
    if getattr(error, "agl_path", None) is None:
        try:
            error.agl_path = path  # type: ignore[attr-defined]
            error.agl_chain = tuple(n for _, n in _running.get())  # type: ignore[attr-defined]
        except AttributeError:  # an exception type with __slots__
            pass


# --------------------------------------------------------------------------------------------------------------
# One call


class _Frame:
    __slots__ = ("depth", "fn", "vars")

    def __init__(self, fn: Function, variables: dict[str, Any], depth: int) -> None:
        self.fn, self.vars, self.depth = fn, variables, depth


_MISSING: Any = object()


class _TopLevelCall:
    """One top-level call: its tape, its events, its HTTP client, its model usage."""

    def __init__(self, agent: Agent, run: Run, tape: Tape, emit: EventSink) -> None:
        self.agent = agent
        self.spec = agent.spec
        self.run = run
        self.tape = tape
        self.emit = emit
        self.limits = agent.limits
        self.environ: Mapping[str, str] = agent._environ if agent._environ is not None else os.environ
        self.usage = Usage()
        self.requests = 0
        self.tool_depth = 0
        self.commands = 0
        self._client: Any = None
        self._identity = id(agent.spec)
        self._handlers: dict[str, Callable[[_Frame, Any, Command], Awaitable[Any]]] = {
            "set": self.c_set,
            "log": self.c_log,
            "return": self.c_return,
            "end": self.c_end,
            "func": self.c_func,
            "ask": self.c_ask,
            "api": self.c_api,
            "llm": self.c_llm,
            "if": self.c_if,
            "loop": self.c_loop,
        }

    async def top(self, fn: Function, args: dict[str, Any]) -> JsonValue:
        try:
            try:
                value = await self.function(fn, args, "")
            except _End as end:
                value = end.value
            return to_json(value)
        except FATAL:
            raise
        except Exception as e:
            info = error_info(e)
            chain = tuple(getattr(e, "agl_chain", ())) or (fn.name,)
            where = f" at {info.command}" if info.command else ""
            route = f" (call chain: {' → '.join(chain)})" if len(chain) > 1 else ""
            raise FunctionCallError(
                f"{fn.name} failed{where}{route}: {info.type}: {info.message}",
                function=fn.name,
                error=info,
                path=info.command,
                chain=chain,
            ) from e
        finally:
            if self._client is not None:
                await self._client.aclose()

    # Functions and blocks -------------------------------------------------------------------------------------

    async def function(self, fn: Function, args: Mapping[str, Any], caller: str) -> Any:
        running = _running.get()
        key = (self._identity, fn.name)
        if key in running:
            chain = (*(n for _, n in running), fn.name)
            raise ReentrancyError(
                f"{fn.name} is already running: {' → '.join(chain)}. A function cannot call itself "
                "while it is running, directly or through others; repeat work with a loop.",
                chain=chain,
            )
        token = _running.set((*running, key))
        depth = len(running)
        try:
            variables = {a.name: args.get(a.name) for a in fn.args}
            variables["result"] = None
            self.emit(FunctionCalled(fn.name, _json_safe(args), depth, caller))
            try:
                await self.block(_Frame(fn, variables, depth), fn.commands)
                value = None
            except _Return as r:
                value = r.value
            except FATAL:
                raise
            except Exception as e:
                if fn.on_error is None:
                    raise
                info = error_info(e)
                self.emit(ErrorHandled(fn.name, f"{fn.path}.onError", info.type, info.message))
                handler = {a.name: args.get(a.name) for a in fn.args}
                handler.update(exc=info, result=None)
                try:
                    await self.block(_Frame(fn, handler, depth), fn.on_error)
                    value = None
                except _Return as r:
                    value = r.value
            self.emit(FunctionReturned(fn.name, _json_safe(value), depth))
            return value
        finally:
            _running.reset(token)

    async def block(self, frame: _Frame, block: Block) -> Any:
        value = None
        for command in block:
            value = await self.command(frame, command)
        return value

    async def command(self, frame: _Frame, command: Command) -> Any:
        self.commands += 1
        if self.commands > self.agent.max_commands:
            raise CommandBudgetError(
                f"the call ran more than {self.agent.max_commands:,} commands (at "
                f"{command.path}); raise the agent's max_commands if that is intended."
            )
        self.emit(CommandStarted(frame.fn.name, command.kind, command.path))
        try:
            value = await self._handlers[command.kind](frame, command.args, command)
        except FATAL:
            raise
        except Exception as e:
            _mark(e, command.path)
            if command.on_error is None:
                raise
            info = error_info(e)
            self.emit(ErrorHandled(frame.fn.name, f"{command.path}.onError", info.type, info.message))
            saved = frame.vars.get("exc", _MISSING)
            frame.vars["exc"] = info
            try:
                value = await self.block(frame, command.on_error)
            finally:
                if saved is _MISSING:
                    frame.vars.pop("exc", None)
                else:
                    frame.vars["exc"] = saved
        frame.vars["result"] = value
        return value

    # Commands -------------------------------------------------------------------------------------------------

    async def c_set(self, frame: _Frame, args: SetArgs, command: Command) -> Any:
        value = None
        variables = frame.vars
        for name, template in args.assignments:
            value = variables[name] = template.render(variables)
        return value

    async def c_log(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        value = args.value.render(frame.vars)
        message = value if isinstance(value, str) else json.dumps(to_json(value), ensure_ascii=False)
        logger.info("%s: %s", frame.fn.name, message)
        self.emit(Logged(frame.fn.name, command.path, message))
        return message

    async def c_return(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        raise _Return(args.value.render(frame.vars))

    async def c_end(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        if self.tool_depth:
            raise CommandError("end cannot run inside a tool call: a model's call cannot end the whole run.")
        raise _End(args.value.render(frame.vars))

    async def c_func(self, frame: _Frame, args: FuncArgs, command: Command) -> Any:
        target = self.spec.functions[args.target]
        values = {name: template.render(frame.vars) for name, template in args.args}
        return await self.function(target, values, command.path)

    async def c_if(self, frame: _Frame, args: IfArgs, command: Command) -> Any:
        branch = args.then if args.condition.render(frame.vars) else args.orelse
        return await self.block(frame, branch)

    async def c_loop(self, frame: _Frame, args: LoopArgs, command: Command) -> Any:
        over = args.over.render(frame.vars)
        if isinstance(over, dict):
            over = list(over)
        if not isinstance(over, list | tuple):
            raise CommandError(f"loop goes over a list (or a dict's keys), not {type(over).__name__}.")
        if len(over) > args.max:
            raise LoopBoundError(
                f"the loop was given {len(over):,} items and its bound is max={args.max:,}; raise "
                "max or give it fewer items (nothing is skipped silently)."
            )
        values: list[Any] = []
        variables = frame.vars
        max_weight = self.limits.max_weight
        weight = 1  # the result is a list of every iteration's value, weighed as it grows like any sandbox value
        for i, item in enumerate(over):
            variables[args.item] = item
            if args.index is not None:
                variables[args.index] = i
            value = await self.block(frame, args.do)
            try:
                weight += 1 + measure(value, self.limits, depth=1, budget=max_weight - weight - 1)
            except ExpressionLimitError as e:
                raise LoopBoundError(
                    f"the loop at {command.path} stopped at item {i + 1:,} of {len(over):,}: its result, the list of "
                    f"each item's last value, would be too large ({e.message}). End the body with a command whose "
                    "value is small, such as a set of only what you need."
                ) from None
            values.append(value)
        return values

    async def c_ask(self, frame: _Frame, args: AskArgs, command: Command) -> Any:
        text = args.text.render(frame.vars)
        if not isinstance(text, str) or not text.strip():
            raise CommandError("ask needs its text to be a non-empty string.")
        item = self._input(args, frame)
        screen: Screen[Any] = Screen(text, [item])
        key = digest({"text": text, "input": args.input, "label": args.label})[:24]
        if self.tape.replaying:
            entry = self.tape.take("ask", key, f"the answer to {text[:60]!r}")
            self.emit(QuestionAsked(text, (args.label,)))
            error = entry.get("error")
            if isinstance(error, dict):
                raise ReplayedError(str(error.get("type")), str(error.get("message")))
            self.emit(QuestionAnswered(text, entry.get("answer")))
            return entry.get("answer")
        try:
            answer = await self.run.terminal.show(lambda: screen)
        except FATAL:
            raise
        except Exception as e:
            self.tape.record({"kind": "ask", "key": key, "text": text, "error": error_entry(e)})
            raise
        as_json = screen.answer_json(answer)
        self.tape.record({"kind": "ask", "key": key, "text": text, "answer": as_json})
        return answer

    def _input(self, args: AskArgs, frame: _Frame) -> Input:
        if args.input in ("text", "multiline"):
            return TextInput(args.label, str, multiline=args.input == "multiline")
        if args.input in ("number", "integer"):
            return NumberInput(args.label, int if args.input == "integer" else float, args.minimum, args.maximum)
        if args.input == "choice":
            options = args.options.render(frame.vars) if args.options is not None else None
            if not isinstance(options, list | tuple) or not all(isinstance(o, str) for o in options):
                raise CommandError("a choice's options must be a list of strings.")
            return ChoiceInput(args.label, tuple(options))
        return ConfirmInput(args.label)

    async def c_api(self, frame: _Frame, args: ApiArgs, command: Command) -> Any:
        variables = frame.vars
        profile = self.spec.profiles[args.profile]
        path = args.path.render(variables) if args.path is not None else ""
        if isinstance(args.query, tuple):
            query: Any = {name: t.render(variables) for name, t in args.query}
        else:
            query = args.query.render(variables)
        headers = {name: t.render(variables) for name, t in args.headers}
        body = to_json(args.body.render(variables)) if args.body is not None else None
        request = build_request(profile, args.method, path, query, headers, body, args.timeout)
        if not self.tape.replaying:
            modes.refuse_blocked_call(f"{command.path} would send {args.method} {request.public_url}")
        self.emit(ApiRequested(profile.name, args.method, request.public_url))
        try:
            status, value = await send(
                request, client=self._http, tape=self.tape, environ=self.environ, limits=self.limits
            )
        except ApiError as e:
            self.emit(ApiResponded(profile.name, args.method, request.public_url, e.status, True))
            raise
        self.emit(ApiResponded(profile.name, args.method, request.public_url, status, False))
        return value

    def _http(self) -> Any:
        if self._client is None:
            import httpx2

            self._client = httpx2.AsyncClient(transport=self.agent._transport, trust_env=False, follow_redirects=False)
        return self._client

    async def c_llm(self, frame: _Frame, args: LlmArgs, command: Command) -> Any:
        variables = frame.vars
        prompt = args.prompt.render(variables)
        if not isinstance(prompt, str) or not prompt.strip():
            prompt = json.dumps(to_json(prompt), ensure_ascii=False) if prompt is not None else ""
        if not prompt.strip():
            raise CommandError("llm needs a non-empty prompt.")
        system = args.system.render(variables) if args.system is not None else ""
        if not isinstance(system, str):
            raise CommandError("llm's system text must be a string.")
        names = args.tools if args.tools != ("*",) else tuple(n for n, f in self.spec.functions.items() if f.is_tool)
        tools = [self._loop_tool(self.spec.functions[n], command.path) for n in names]
        reporting = None
        if args.output is not None:
            name = REPORT_TOOL if REPORT_TOOL not in names else f"{REPORT_TOOL}_"
            reporting = Reporting(
                ToolSpec(
                    name, "Hand back the result of this task. Calling it ends your work.", input_schema(args.output)
                ),
                _validator(args.output, self.limits, enforce_required=True),
                lambda payload: to_json(payload),
            )
            system = with_report_instruction(system, name, ends="your work")
        model, model_id, backend = self._model_for(args.model, command)
        outcome = await run_loop(
            model=TapeModel(model, backend, self.tape),
            model_id=model_id,
            system=system,
            messages=[user_text(prompt)],
            tools=tools,
            reporting=reporting,
            emit=self.emit,
            max_tool_roundtrips=args.max_tool_roundtrips,
            max_tokens=args.max_tokens,
            role=frame.fn.name,
        )
        self.usage += outcome.usage
        self.requests += outcome.requests
        return outcome.result if args.output is not None else outcome.text

    def _model_for(self, declared: str | None, command: Command) -> tuple[Model | None, str, str]:
        model_id = declared or self.spec.model or ""
        backend = _backend_for(self.run, model_id)
        if self.tape.replaying:
            return None, model_id, backend
        chosen = self.run.model
        if chosen is None:
            if not model_id:
                raise CommandError(
                    f'{command.path} has no model: give it "model", give the agent a default '
                    '"model", or run it with Run(model=ScriptedModel(...)).'
                )
            from ..models import resolve_model

            chosen = resolve_model(model_id)
        if model_network(chosen):
            modes.refuse_blocked_call(f"{command.path} would call a model")
        return chosen, model_id, backend

    def _loop_tool(self, fn: Function, path: str) -> LoopTool:
        async def call(payload: Any, call_id: str) -> tuple[str, bool]:
            self.tool_depth += 1
            try:
                value = await self.function(fn, payload, f"{path} (tool call {call_id})")
                return tool_text(value), False
            except FATAL:
                raise
            except Exception as e:
                info = error_info(e)
                return f"{info.type}: {info.message}", True
            finally:
                self.tool_depth -= 1

        return LoopTool(_tool_spec(fn), call, _validator(fn.args, self.limits))


def tool_text(value: Any) -> str:
    """What a model reads back from a tool function: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_json(value), ensure_ascii=False)


def input_schema(args: Sequence[Arg]) -> JsonObject:
    """The JSON Schema a model is shown for a function's arguments (or an ``llm`` output's fields)."""
    properties: JsonObject = {}
    for a in args:
        schema = a.type.schema() if a.type is not None else {}
        if a.description:
            schema["description"] = a.description
        properties[a.name] = schema
    out: JsonObject = {"type": "object", "properties": properties, "additionalProperties": False}
    required: list[JsonValue] = [a.name for a in args if a.required]
    if required:
        out["required"] = required
    return out


def _tool_spec(fn: Function) -> ToolSpec:
    description = fn.description.render({}) if fn.description is not None else ""
    return ToolSpec(fn.name, to_text(description), input_schema(fn.args))


def _validator(
    args: Sequence[Arg], limits: Limits, *, enforce_required: bool = False
) -> Callable[[JsonObject], tuple[Any, tuple[str, ...]]]:
    """Checks what a model passes.

    A tool argument's ``required`` only tells the model (an omitted argument is None, as for ``func``); an ``llm``
    output field's is enforced, so the model is asked again for a field it left out.
    """
    names = [a.name for a in args]

    def validate(data: JsonObject) -> tuple[Any, tuple[str, ...]]:
        problems: list[str] = []
        out: dict[str, Any] = {}
        for a in args:
            if a.name in data:
                value = data[a.name]
                if a.type is not None:
                    before = len(problems)
                    a.type.check(value, a.name, problems)
                    if len(problems) == before:
                        value = a.type.convert(value)
                out[a.name] = value
            elif a.required and enforce_required:
                problems.append(f"{a.name}: this required argument is missing.")
        for key in data:
            if key not in names:
                problems.append(f"{key}: unknown argument; the arguments are {', '.join(names) or 'none'}.")
        if not problems:
            try:
                measure(out, limits)
            except ExpressionError as e:
                problems.append(f"arguments: {e.message}")
        return (None, tuple(problems)) if problems else (out, ())

    return validate
