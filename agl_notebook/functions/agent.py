"""`Agent`: a validated agent file, ready to call; each top-level call is one unit of work (docs/functions.md).

`Agent.call` runs the call through `Run.unit`, which fingerprints, records and replays it like a step; the
commands themselves run in `agl_notebook.functions.interpreter`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._canonical import digest
from .._scope import current_scope
from ..errors import InputError
from ..events import Event
from ..models.base import ToolSpec, model_network
from ..payloads import JsonValue
from ..run.units import UnitOutcome
from ._tape import MAX_TAPE_BYTES, Tape
from .errors import (
    CommandError,
    ExpressionError,
)
from .expressions import DEFAULT_LIMITS, Limits, measure
from .spec import (
    AgentSpec,
    Command,
    Function,
    walk_commands,
)

if TYPE_CHECKING:
    from ..replay.modes import Mode
    from ..run import Run

from .conversions import to_json, tool_spec
from .interpreter import AgentSetup, TopLevelCall, backend_for


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
        max_recording_bytes: The most bytes one top-level call's recording may take, as JSON (its tape).
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        environ: Mapping[str, str] | None = None,
        transport: Any = None,
        limits: Limits = DEFAULT_LIMITS,
        max_commands: int = 1_000_000,
        max_recording_bytes: int = MAX_TAPE_BYTES,
    ) -> None:
        self.spec = spec
        """The validated agent."""
        self.limits = limits
        """The expression sandbox's bounds."""
        self.max_commands = max_commands
        """The most commands one top-level call may run."""
        self.max_recording_bytes = max_recording_bytes
        """The most bytes one top-level call's recording may take."""
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
        return [tool_spec(fn) for fn in self.spec.functions.values() if fn.is_tool]

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
        tape = Tape(recorded, max_bytes=self.max_recording_bytes)
        scope = current_scope.get()
        setup = AgentSetup(self.spec, self.limits, self.max_commands, self._environ, self._transport)
        call = TopLevelCall(setup, run, tape, scope.emit if scope is not None else _no_events)
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
        return ",".join(backend_for(run, m) for m in ids) or "none"

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
