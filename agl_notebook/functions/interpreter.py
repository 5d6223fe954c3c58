"""The semantics of an agent's commands: one top-level call of one function, run command by command.

`agl_notebook.functions.agent.Agent.call` makes the call (docs/functions.md).

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
import os
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .._canonical import digest
from .._secret_logs import scrub_logs
from .._secrets import scrub, scrub_text, secrets_from_environment
from ..errors import MissingCredentialsError, ModelCallBlockedError, ReplayMissError
from ..events import QuestionAnswered, QuestionAsked
from ..loop import LoopTool, Reporting, run_loop
from ..models.base import Model, ToolSpec, Usage, model_network
from ..payloads import JsonValue
from ..replay import modes
from ..run.views import EventSink
from ..screens import ChoiceInput, ConfirmInput, Input, NumberInput, Screen, TextInput
from ..tools import with_report_instruction
from ..transcript import user_text
from ._http import MIN_SECRET, build_request, send
from ._tape import Tape, TapeModel, error_entry
from .errors import (
    ApiError,
    CommandBudgetError,
    CommandError,
    ExpressionLimitError,
    FunctionCallError,
    LoopBoundError,
    ReentrancyError,
    ReplayedError,
)
from .events import ApiRequested, ApiResponded, CommandStarted, ErrorHandled, FunctionCalled, FunctionReturned, Logged
from .expressions import Limits, measure
from .spec import (
    AgentSpec,
    ApiArgs,
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
)

if TYPE_CHECKING:
    from ..run import Run

from .conversions import error_info, input_schema, json_safe, to_json, tool_spec, tool_text, validator

logger = logging.getLogger("agl_notebook.functions")
scrub_logs(logger.name)  # a `log` command's line reaches no handler with a secret in it
_CHAIN_DEPTH = 32  # how many causes of an error are read to see whether the traceback may show them

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

MAX_CALL_DEPTH = 100
"""The most functions one call chain may hold at once (``func`` commands and tool calls in one another): deeper is a
`CommandError` naming the chain, never Python's recursion limit."""

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


def _mark(error: BaseException, path: str) -> None:
    """Remember where an error first escaped a command, for the handler's ``exc.command`` and the final message."""
    if getattr(error, "agl_path", None) is None:
        try:
            error.agl_path = path  # type: ignore[attr-defined]
            error.agl_chain = tuple(n for _, n in _running.get())  # type: ignore[attr-defined]
        except AttributeError:  # an exception type with __slots__
            pass


def backend_for(run: Run, model_id: str) -> str:
    """The backend a call's ``llm`` naming ``model_id`` is recorded for: the Run's model's, else Claude's."""
    if run.model is not None:
        return run.model.backend_id(model_id)
    from ..models import resolve_backend_id  # the one place that knows which backend a model id string gets

    return resolve_backend_id(model_id or "?")


# --------------------------------------------------------------------------------------------------------------
# One call


class _Frame:
    __slots__ = ("depth", "fn", "vars")

    def __init__(self, fn: Function, variables: dict[str, Any], depth: int) -> None:
        self.fn, self.vars, self.depth = fn, variables, depth


_MISSING: Any = object()


@dataclasses.dataclass(frozen=True)
class AgentSetup:
    """What a call needs of its agent."""

    spec: AgentSpec
    """The validated agent."""
    limits: Limits
    """The expression sandbox's bounds."""
    max_commands: int
    """The most commands one top-level call may run."""
    environ: Mapping[str, str] | None
    """Where profiles' environment variables are read (``os.environ`` when None)."""
    transport: Any
    """The httpx2 transport for ``api`` requests, or None for the default."""


class TopLevelCall:
    """One top-level call: its tape, its events, its HTTP client, its model usage."""

    def __init__(self, setup: AgentSetup, run: Run, tape: Tape, emit: EventSink) -> None:
        self.setup = setup
        self.spec = setup.spec
        self.run = run
        self.tape = tape
        self.emit = emit
        self.limits = setup.limits
        self.environ: Mapping[str, str] = setup.environ if setup.environ is not None else os.environ
        self.usage = Usage()
        self.requests = 0
        self.tool_depth = 0
        self.commands = 0
        self._client: Any = None
        self._identity = id(setup.spec)
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
        """Run ``fn`` as the top-level call: its result as JSON (``end`` included)."""
        try:
            try:
                value = await self.function(fn, args, "")
            except _End as end:
                value = end.value
            return to_json(value)
        except FATAL:
            raise
        except Exception as e:
            # The error leaves the call here, into a cell's traceback, a log or stderr: scrubbed once, at this exit.
            # Its cause is kept for the traceback only when nothing in that chain holds a secret (the library
            # cannot rewrite another's exception; its message is in this one's, scrubbed).
            secrets = self._secrets()
            info = error_info(e)
            body = scrub(to_json(info.body), secrets) if info.body is not None else None
            info = dataclasses.replace(info, message=scrub_text(info.message, secrets), body=body)
            chain = tuple(getattr(e, "agl_chain", ())) or (fn.name,)
            where = f" at {info.command}" if info.command else ""
            shown = chain if len(chain) <= 8 else (*chain[:3], "…", *chain[-4:])  # a chain may be 100 long
            route = f" (call chain: {' → '.join(shown)})" if len(chain) > 1 else ""
            raise FunctionCallError(
                scrub_text(f"{fn.name} failed{where}{route}: {info.type}: {info.message}", secrets),
                function=fn.name,
                error=info,
                path=info.command,
                chain=chain,
            ) from (e if _holds_no_secret(e, secrets) else None)
        finally:
            if self._client is not None:
                await self._client.aclose()

    def _secrets(self) -> tuple[str, ...]:
        """What an error leaving the call is scrubbed of: the environment's secrets and the profiles' values."""
        values = (self.environ.get(v) for p in self.spec.profiles.values() for v in p.variables)
        return (*secrets_from_environment(), *(v for v in values if v and len(v) >= MIN_SECRET))

    # Functions and blocks -------------------------------------------------------------------------------------

    async def function(self, fn: Function, args: Mapping[str, Any], caller: str) -> Any:
        """Run one function's commands with ``args`` as its variables; its ``onError`` takes what they raise."""
        running = _running.get()
        key = (self._identity, fn.name)
        if key in running:
            chain = (*(n for _, n in running), fn.name)
            raise ReentrancyError(
                f"{fn.name} is already running: {' → '.join(chain)}. A function cannot call itself "
                "while it is running, directly or through others; repeat work with a loop.",
                chain=chain,
            )
        depth = len(running)
        if depth >= MAX_CALL_DEPTH:
            names = [n for _, n in running]
            shown = " → ".join([*names[:3], "…", *names[-3:], fn.name])
            raise CommandError(
                f"calling {fn.name} would make the call chain {depth + 1} functions deep ({shown}); at most "
                f"{MAX_CALL_DEPTH} may run in one another."
            )
        token = _running.set((*running, key))
        try:
            variables = {a.name: args.get(a.name) for a in fn.args}
            variables["result"] = None
            self.emit(FunctionCalled(fn.name, json_safe(args), depth, caller))
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
            self.emit(FunctionReturned(fn.name, json_safe(value), depth))
            return value
        finally:
            _running.reset(token)

    async def block(self, frame: _Frame, block: Block) -> Any:
        """Run a block's commands in order; the last one's value."""
        value = None
        for command in block:
            value = await self.command(frame, command)
        return value

    async def command(self, frame: _Frame, command: Command) -> Any:
        """Run one command (counted against the call's budget); its own ``onError`` takes what it raises."""
        self.commands += 1
        if self.commands > self.setup.max_commands:
            raise CommandBudgetError(
                f"the call ran more than {self.setup.max_commands:,} commands (at "
                f"{command.path}); raise the agent's max_commands if that is intended."
            )
        self.emit(CommandStarted(frame.fn.name, command.kind, command.path))
        try:
            try:
                value = await self._handlers[command.kind](frame, command.args, command)
            except RecursionError:  # a backstop: the bounds on nesting should keep it from ever happening
                raise CommandError(f"{command.path} nested too deeply to run (Python's recursion limit).") from None
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
        """``set``: assign variables; the last value."""
        value = None
        variables = frame.vars
        for name, template in args.assignments:
            value = variables[name] = template.render(variables)
        return value

    async def c_log(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        """``log``: a message to the events and the logger."""
        value = args.value.render(frame.vars)
        message = value if isinstance(value, str) else json.dumps(to_json(value), ensure_ascii=False)
        logger.info("%s: %s", frame.fn.name, message)
        self.emit(Logged(frame.fn.name, command.path, message))
        return message

    async def c_return(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        """``return``: end the function with a value."""
        raise _Return(args.value.render(frame.vars))

    async def c_end(self, frame: _Frame, args: ValueArgs, command: Command) -> Any:
        """``end``: end the whole top-level call with a value (not from inside a tool call)."""
        if self.tool_depth:
            raise CommandError("end cannot run inside a tool call: a model's call cannot end the whole run.")
        raise _End(args.value.render(frame.vars))

    async def c_func(self, frame: _Frame, args: FuncArgs, command: Command) -> Any:
        """``func``: call another function of the agent."""
        target = self.spec.functions[args.target]
        values = {name: template.render(frame.vars) for name, template in args.args}
        return await self.function(target, values, command.path)

    async def c_if(self, frame: _Frame, args: IfArgs, command: Command) -> Any:
        """``if``: run the branch the condition picks."""
        branch = args.then if args.condition.render(frame.vars) else args.orelse
        return await self.block(frame, branch)

    async def c_loop(self, frame: _Frame, args: LoopArgs, command: Command) -> Any:
        """``loop``: run the body for each item of a list (or key of a dict), at most ``max``; each last value."""
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
        """``ask``: a question through the run's terminal (the tape's answer on replay)."""
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
        """``api``: one HTTP request through a profile (the tape's response on replay)."""
        variables = frame.vars
        profile = self.spec.profiles[args.profile]
        path = args.path.render(variables) if args.path is not None else ""
        if isinstance(args.query, tuple):
            query: Any = {name: t.render(variables) for name, t in args.query}
        else:
            query = args.query.render(variables)
        headers = {name: t.render(variables) for name, t in args.headers}
        body = to_json(args.body.render(variables)) if args.body is not None else None
        request = build_request(profile, args.method, path, query, headers, body, args.timeout, where=command.path)
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

            self._client = httpx2.AsyncClient(transport=self.setup.transport, trust_env=False, follow_redirects=False)
        return self._client

    async def c_llm(self, frame: _Frame, args: LlmArgs, command: Command) -> Any:
        """``llm``: the tool loop with the agent's tool functions as tools; the text, or the typed output."""
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
                validator(args.output, self.limits, enforce_required=True),
                lambda payload: to_json(payload),
            )
            system = with_report_instruction(system, name, ends="your work")
        model, model_id, backend = self._model_for(args.model, command)
        outcome = await run_loop(
            model=TapeModel(model, backend, self.tape, max_depth=self.limits.max_value_depth),
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
        backend = backend_for(self.run, model_id)
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
        # Its requests pass the Run's account, so they count against its budget (docs/cost.md).
        return self.run.meter.wrap(chosen), model_id, backend

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

        return LoopTool(tool_spec(fn), call, validator(fn.args, self.limits))


def _holds_no_secret(error: BaseException, secrets: tuple[str, ...]) -> bool:
    """Whether no exception in ``error``'s chain of causes shows a secret (or a key's shape) when printed."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_DEPTH:
        seen.add(id(current))
        try:
            text = f"{type(current).__name__}: {current}"
        except Exception:  # an exception that cannot print itself shows nothing of itself either
            text = ""
        if scrub_text(text, secrets) != text:
            return False
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return current is None
