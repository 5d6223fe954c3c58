"""`Run`: runs steps of roles, shows their questions on a terminal, and tells views what happens.

The run layer: `Run` (this module) is the facade; `agl_notebook.run._engine` records or replays any unit of work
(`agl_notebook.run.units`); `agl_notebook.run._step` makes a step of a role such a unit; `agl_notebook.run.views`
declares what a step is drawn on; `agl_notebook.run.environment` is where a Run gets its defaults (the notebook's,
in a kernel); `agl_notebook.run.sync` runs a step from synchronous code.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._scope import StepScope, current_scope
from ..errors import InputError, at_call_site
from ..loop import LoopOutcome
from ..models.base import Model, is_model, model_network
from ..payloads import JsonValue
from ..replay.fingerprint import fingerprint
from ..replay.modes import Mode, check_mode, resolve_mode
from ..replay.records import StepRecord
from ..replay.stores import MemoryStore, Store
from ..roles import Role, RoleFactory
from ..terminals import ConsoleTerminal, ScriptedApprovals, ScriptedTerminal, Terminal
from ._approvals import Gatekeeper
from ._engine import Context, run_unit
from ._fork import Fork
from ._meter import Meter, RunSummary
from ._step import StepPlan, check_input, input_message, system_text
from .environment import Environment, current_environment
from .occurrences import Occurrences
from .units import TapedUnit, UnitOutcome, Work
from .views import EventSink, StepView, ViewFactory, emit_to

if TYPE_CHECKING:
    from ..events import Event
    from ..models.batches import Batches
    from ..models.prices import PriceTable, Rates
    from ..screens import Screen
    from ._compare import Comparison
    from ._map_state import MapItemError, MapResults, MapView

__all__ = [
    "Comparison",
    "EventSink",
    "MapItemError",
    "MapResults",
    "Occurrences",
    "Run",
    "RunSummary",
    "StepView",
    "ViewFactory",
    "input_message",
    "system_text",
]

_LAZY = {"Comparison": "._compare", "MapItemError": "._map_state", "MapResults": "._map_state"}
"""Public names whose modules load when first asked for: a map's and a comparison's results (a few ms of
`import agl_notebook` that a notebook of plain steps never needs)."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


T = TypeVar("T")


class _RecordedInput:
    """The input of a fork that leaves it out: the record's."""

    def __repr__(self) -> str:
        return "<the record's input>"


RECORDED_INPUT: Any = _RecordedInput()
"""`Run.step`'s input when none is given: a fork's is its record's."""

HISTORY = 100
"""How many outcomes `Run.outcomes` keeps: the latest ones, oldest dropped first."""


class Run:
    """Runs steps: one role on one input until the agent reports.

    Args:
        model: A model for every role, overriding each role's own (a `ScriptedModel` when no credentials exist).
        answers: Scripted answers to questions: a list used in order, or a function of the `Screen`.
        approvals: Scripted decisions on tool calls that ask for approval: ``"approve"`` or ``"deny"`` for every
            call, a list used in order, or a function of the `agl_notebook.approvals.ApprovalRequest`; each one
            ``"approve"``, ``"always"``, ``"deny"``, ``Approve()``, ``Edit(arguments)`` or ``Deny(message)``.
        terminal: Where questions are shown and calls approved; by default scripted answers and decisions where
            given, else the notebook's widgets in a kernel, else standard input.
        on_event: Called with every event of every step, in order (interleaved when steps run concurrently).
        view: Makes the view of each step (in a notebook, the widget view is the default).
        store: Where recordings are found and kept; by default a fresh `MemoryStore` for this Run.
        mode: The replay mode for this Run's steps (``auto``, ``replay``, ``refresh``, ``off``); see
            `agl_notebook.replay.modes` for the precedence.
        prices: The rates requests are priced at: a `PriceTable`, or ``{model id: Rates(...)}`` added to (or
            replacing rows of) the library's table; by default the library's (or the file ``AGL_NOTEBOOK_PRICES``
            names). Each record keeps what its step cost at these rates (docs/cost.md).
        budget_usd: The most this Run's live model requests may cost, in dollars: a request that would pass it is
            not made, and its step fails with `BudgetExceededError`. Replays cost nothing.
    """

    def __init__(
        self,
        *,
        model: Model | None = None,
        answers: Sequence[object] | Callable[[Screen[Any]], object] | None = None,
        approvals: ScriptedApprovals | None = None,
        terminal: Terminal | None = None,
        on_event: EventSink | None = None,
        store: Store | None = None,
        mode: Mode | None = None,
        view: ViewFactory | None = None,
        prices: PriceTable | Mapping[str, Rates] | None = None,
        budget_usd: float | None = None,
    ) -> None:
        if model is not None and not is_model(model):
            raise InputError(
                f"Run(model=...) takes a model backend such as ScriptedModel, not {model!r}; to "
                "name a Claude model, use @role(model=Claude.OPUS)."
            )
        if terminal is not None and (answers is not None or approvals is not None):
            raise InputError("Run takes answers and approvals, or a terminal, not both.")
        self.model = model
        """The model every step runs on, if set."""
        # Inside a Jupyter kernel the notebook supplies the defaults: widget views, input-widget questions, and
        # recordings read from the notebook file.
        self._environment: Environment | None = current_environment()
        env = self._environment
        if terminal is None:
            terminal = env.terminal() if env is not None else ConsoleTerminal()
            if answers is not None or approvals is not None:
                terminal = ScriptedTerminal(answers, approvals=approvals, inner=terminal)
        self._terminal = terminal
        self._gatekeeper = Gatekeeper(terminal)
        self._view_factory: ViewFactory | None = view or (env.view if env is not None else None)
        self._sinks: list[EventSink] = [on_event] if on_event else []
        self.store: Store = store if store is not None else env.store() if env is not None else MemoryStore()
        """Where this Run's recordings are found and kept."""
        self.mode: Mode | None = check_mode(mode, where="Run(mode=...)") if mode is not None else None
        """The Run's replay mode, if set (a step's own mode wins)."""
        # Outside a kernel identical steps are numbered within this Run; in a kernel, within a cell execution,
        # across every Run of the cell (their recordings share the notebook).
        self._occurrences = env.occurrences() if env is not None else Occurrences()
        self.meter = Meter(prices, budget_usd)  # refuses a bad table here, where it was given
        """The account of what this Run's live requests cost, and its budget (shared by every step of the Run)."""
        self.outcomes: list[LoopOutcome] = []
        """The outcomes of the latest finished steps (at most `HISTORY`, oldest dropped first), in the order they
        finished (transcripts, usage, requests). `step_outcome` returns a step's own."""

    @property
    def terminal(self) -> Terminal:
        """Where a tool's questions are shown: ``await run.terminal.show(screen_fn, **kwargs)``."""
        return self._terminal

    @property
    def always_approved(self) -> set[str]:
        """The tools a person chose to "always approve" in this Run; remove a name to be asked again."""
        return self._gatekeeper.always

    @property
    def prices(self) -> PriceTable:
        """The rates this Run prices requests at."""
        return self.meter.prices

    @property
    def spent_usd(self) -> float:
        """What this Run's live model requests have cost so far, in dollars (zero when every step replayed).

        Shown in live views and `summary`, never in a saved output: a saved view shows each record's own cost.
        """
        return self.meter.spent_usd

    def summary(self) -> RunSummary:
        """What this Run has done live so far: requests, tokens, dollars spent, and its budget."""
        m = self.meter
        return RunSummary(m.requests, m.usage, m.spent_usd, m.budget_usd, m.unpriced, m.prices.as_of)

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
    async def step(
        self,
        role: Role[T],
        input: object = RECORDED_INPUT,
        *,
        mode: Mode | None = None,
        label: str | None = None,
        fork_from: str | StepRecord | LoopOutcome | None = None,
        at_turn: int | None = None,
    ) -> T: ...
    @overload
    async def step(
        self,
        role: RoleFactory[..., T],
        input: object = RECORDED_INPUT,
        *,
        mode: Mode | None = None,
        label: str | None = None,
        fork_from: str | StepRecord | LoopOutcome | None = None,
        at_turn: int | None = None,
    ) -> T: ...
    async def step(
        self,
        role: Role[T] | RoleFactory[..., T],
        input: object = RECORDED_INPUT,
        *,
        mode: Mode | None = None,
        label: str | None = None,
        fork_from: str | StepRecord | LoopOutcome | None = None,
        at_turn: int | None = None,
    ) -> T:
        """Run one step of ``role`` on ``input`` and return the reported payload (None without a reporting tool).

        ``label`` is shown in the step's view beside the role, to tell it from other steps of the role (by default,
        the input's first text field, shortened); it is not part of what the model sees.

        ``fork_from`` (a record id, a `StepRecord`, or a recorded step's outcome from `step_outcome`) and
        ``at_turn=k`` fork a recorded step (docs/forking.md): its first k model turns come from that record (no
        model call, no handler, questions and decisions as recorded), then the step goes on live with the role as
        it is now. The input may be left out: the record's is used. A
        fork is a record of its own, and replays like any.

        A recorded step replays (mode ``auto`` or ``replay``): no model call, no tool call, no question, the same
        events (plus ``step.replayed``) and the same result. Otherwise it runs live and, unless the mode is
        ``off``, its record is kept in the Run's store.

        Raises:
            InputError: ``input`` is not one of the role's accepted types, or the role has no model; or a fork that
                cannot be made (another backend or thinking settings, a tool the replayed turns called is gone,
                ``at_turn`` past the record's turns, no such finished record), refused before any request.
            RoleIncompleteError: The agent never reported; the step's work was wiped.
            ReplayMissError: Mode ``replay`` and no recording matches; the message names the nearest.
            Exception: A tool's handler raised: the step's work was wiped and the same exception is re-raised.
            StepInterrupted: In a notebook, the kernel was interrupted: the step's work was wiped, nothing recorded.
        """
        __tracebackhide__ = True  # IPython shows the person's frames, not these (unless %xmode --show)
        outcome = await self.step_outcome(role, input, mode=mode, label=label, fork_from=fork_from, at_turn=at_turn)
        result: T = outcome.result
        return result

    async def step_outcome(
        self,
        role: Role[Any] | RoleFactory[..., Any],
        input: object = RECORDED_INPUT,
        *,
        mode: Mode | None = None,
        label: str | None = None,
        on_event: EventSink | None = None,
        fork_from: str | StepRecord | LoopOutcome | None = None,
        at_turn: int | None = None,
    ) -> LoopOutcome:
        """`step`, returning the step's whole outcome (result, transcript, usage, requests, truncation).

        ``on_event`` gets this step's own events (after its view, before the Run's sinks); not those of the steps
        its tools start, which have events of their own.
        """
        __tracebackhide__ = True
        # Everything up to the first await runs as soon as the step starts, in the order steps are started:
        # that is what makes the occurrence number (and so replay under asyncio.gather) deterministic.
        resolved = self._resolve_role(role)
        fork: Fork | None = None
        if fork_from is not None or at_turn is not None:
            fork = self._fork(fork_from, at_turn)
            if input is RECORDED_INPUT:
                input = await self._recorded_input(resolved, fork)
        elif input is RECORDED_INPUT:
            raise InputError("run.step() takes the step's input (only a fork, with fork_from=, may leave it out).")
        check_input(resolved, input)
        # A judge's step inside a map's score. `_map_scope` loads with the first map (not with `import agl_notebook`):
        # until then no score can be running.
        map_scope = sys.modules.get("agl_notebook._map_scope")
        scoring = map_scope.current_scoring.get() if map_scope is not None else None
        if scoring is not None:  # a judge's step inside a map's score: numbered by (map, item, repeat), kept there
            outcome: LoopOutcome = await scoring.step(resolved, input, mode)
            return outcome
        view = self._view_factory(resolved) if self._view_factory is not None else None
        plan = self._plan_step(
            resolved, input, self._model_for(resolved), view=view, label=label, on_event=on_event, fork=fork
        )
        return await run_unit(plan, resolve_mode(step=mode, run=self.mode), self._context())

    def _plan_step(
        self,
        role: Role[Any],
        input: object,
        model: tuple[Model, str],
        *,
        view: StepView | None,
        label: str | None,
        on_event: EventSink | None,
        fork: Fork | None = None,
    ) -> StepPlan:
        """The plan of one step of ``role`` (checked) on ``input``: `step_outcome`'s, and each item's of a map."""
        emit = self._emit if on_event is None else _emit_both(on_event, self._emit)
        if view is not None:
            emit = emit_to(view, emit)
        scope = StepScope(role.name, emit, view=view)
        network = model_network(model[0])
        return StepPlan.build(
            role,
            input,
            model[0],
            model[1],
            scope,
            view=view,
            label=label,
            network=network,
            keep=self._keep,
            gatekeeper=self._gatekeeper,
            prices=self.meter.prices if network else None,  # a scripted model is never billed
            fork=fork,
        )

    async def map(
        self,
        role: Role[Any] | RoleFactory[..., Any],
        inputs: object,
        *,
        concurrency: int = 8,
        retries: int = 4,
        on_error: Literal["keep", "raise"] = "keep",
        score: Callable[[Any, Any], Any] | None = None,
        name: str | None = None,
        mode: Mode | None = None,
        view: MapView | None = None,
        engine: Batches | None = None,
        epochs: int = 1,
        fork_from: MapResults | str | None = None,
        at_turn: int | None = None,
    ) -> MapResults:
        """Run ``role`` on every input (a list of payloads, or a pandas DataFrame whose columns name the fields).

        Each item is a step with its own record, as ``run.step(role, input)`` would be: a finished item replays
        with no model call, a failed one is not recorded and runs again next time. Items start in input order,
        at most ``concurrency`` at once (halved while the API answers 429 or 529, grown back as requests succeed);
        a request that failed transiently is retried up to ``retries`` times (a 400 never is). In a notebook one
        live view shows the whole map. See docs/map.md.

        Args:
            role: The role each item is a step of.
            inputs: The inputs: a sequence of what the role accepts, or a DataFrame (pandas).
            concurrency: Items (and requests) at once, 1 to 64.
            retries: Retries of a request that failed transiently (429, 529, other 5xx, a lost connection).
            on_error: ``keep``: a failed item is a `MapItemError` among the results; ``raise``: once every item
                ended, the first failure in input order is raised.
            score: A function of (input, result) giving a number or a bool, per item (it may be ``async`` and run
                a judge's steps; `agl_notebook.judge` makes one); the view and the results show each and their mean
                with its 95% interval (docs/evaluating.md).
            name: Names the map's records (by default the role's name; docs/map.md, "The map's key").
            mode: The replay mode of every item (a Run's and the notebook's otherwise).
            view: What draws the map (in a notebook, its live view by default).
            engine: A `Batches` engine: every item's requests go through the Message Batches API in waves, all
                items at once (``concurrency`` and ``retries`` pace the live API only; docs/batches.md).
            epochs: How many times each input runs (each repeat its own record); ``results[i]`` is input i's first
                repeat, ``results.repeats[i]`` all of them, and scores are per input, its repeats' mean.
            fork_from: A previous map (its results, or its name) whose every item is forked ``at_turn``: each item's
                first turns come from that map's record of the same input (docs/forking.md). The map is named
                ``<that map's name>-at-turn-<k>`` unless ``name`` is given.
            at_turn: How many model turns of each item are replayed (with ``fork_from``).

        Returns:
            The results in input order: each item's reported payload, or a `MapItemError`.

        Raises:
            InputError: An input the role does not accept (the message names it), or a bad option.
            StepInterrupted: In a notebook, the kernel was interrupted: finished items keep their records.
        """
        __tracebackhide__ = True
        from ._map import MapHost, run_map  # lazily: asyncio, only for code that maps

        forks = None
        if fork_from is not None or at_turn is not None:
            from ._fork import MapFork

            forks = MapFork.of(fork_from, at_turn, self.store)
            name = name if name is not None else forks.name

        def plan(role: Role[Any], input: object, model: tuple[Model, str], view: StepView | None) -> StepPlan:
            fork = forks.item(input) if forks is not None else None
            return self._plan_step(role, input, model, view=view, label=None, on_event=None, fork=fork)

        return await run_map(
            MapHost(self.store, self._context(), self.mode, self._model_for, plan, self.meter),
            self._resolve_role(role),
            inputs,
            concurrency=concurrency,
            retries=retries,
            on_error=on_error,
            score=score,
            name=name,
            mode=mode,
            view=view,
            engine=engine,
            epochs=epochs,
        )

    async def compare(
        self,
        variants: Mapping[str, Role[Any] | RoleFactory[..., Any]],
        inputs: object,
        *,
        score: Callable[[Any, Any], Any] | None = None,
        name: str | None = None,
        concurrency: int = 8,
        retries: int = 4,
        mode: Mode | None = None,
        epochs: int = 1,
    ) -> Comparison:
        """Run every variant on the same inputs, one map each, and compare what they reported (docs/cost.md).

        Each variant is a `map` of its own (named ``<name>-<variant>``, ``compare-<variant>`` by default), so its
        items are recorded, replayed and resumed as a map's are; the variants run one after another. A failed item
        is kept among its variant's results (``on_error="keep"``).

        Returns:
            The grid: a row per input, each reported field side by side per variant with the cells that differ
            marked; per variant its tokens, recorded dollars, failures and mean score; per field its agreement (the
            share of inputs on which every variant reports the same value). ``.to_pandas()`` has the grid. With a
            score, each mean carries its 95% interval and each pair of variants its paired difference and a
            sentence saying whether it can be told from noise (``epochs`` repeats each input; docs/evaluating.md).
        """
        __tracebackhide__ = True
        from ._compare import run_compare

        options = {"concurrency": concurrency, "retries": retries, "mode": mode, "epochs": epochs}
        return await run_compare(self, variants, inputs, score=score, name=name, map_options=options)

    def map_sync(
        self,
        role: Role[Any] | RoleFactory[..., Any],
        inputs: object,
        *,
        concurrency: int = 8,
        retries: int = 4,
        on_error: Literal["keep", "raise"] = "keep",
        score: Callable[[Any, Any], Any] | None = None,
        name: str | None = None,
        mode: Mode | None = None,
        engine: Batches | None = None,
        epochs: int = 1,
        fork_from: MapResults | str | None = None,
        at_turn: int | None = None,
    ) -> MapResults:
        """`map`, for code that cannot await (a synchronous cell or script); see `run_sync`."""
        __tracebackhide__ = True

        def make() -> Coroutine[Any, Any, MapResults]:
            return self.map(
                role,
                inputs,
                concurrency=concurrency,
                retries=retries,
                on_error=on_error,
                score=score,
                name=name,
                mode=mode,
                engine=engine,
                epochs=epochs,
                fork_from=fork_from,
                at_turn=at_turn,
            )

        return at_call_site(self.run_sync, make)

    async def unit(
        self,
        name: str,
        input: JsonValue,
        *,
        parts: Mapping[str, JsonValue],
        backend: str,
        network: bool,
        work: Work,
        mode: Mode | None = None,
    ) -> UnitOutcome:
        """Run (or replay) one unit of work other than a step: a top-level call of an agent's function.

        `agl_notebook.functions.Agent.call` runs every call through this: the unit is fingerprinted from ``name``
        (as the role), ``backend``, ``input`` and each of ``parts``, numbered, recorded and replayed like a step
        (same modes, events, views and store). A replay runs ``work(record.tape)`` and must give the recorded
        result; a live run is ``work(None)``, its tape kept in the record.

        Raises:
            ReplayMissError: Mode ``replay`` and no recording matches (the message names the differing parts), or
                the recording does not replay to its own result.
            ModelCallBlockedError: A ``network`` unit would run live where model calls are blocked.
        """
        __tracebackhide__ = True
        # As in `step`, everything up to the first await runs when the unit starts (the occurrence number).
        unit_mode = resolve_mode(step=mode, run=self.mode)
        fp = fingerprint(
            role=name,
            backend=backend,
            system="",
            tools=(),
            reporting=None,
            input_type="arguments",
            input=input,
            settings={},
            extra=parts,
        )
        view = self._view_factory(_unit_role(name)) if self._view_factory is not None else None
        scope = StepScope(name, self._emit if view is None else emit_to(view, self._emit), view=view)
        unit = TapedUnit(name, input, backend, fp, network, view, scope, work)
        return await run_unit(unit, unit_mode, self._context())

    def run_sync(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` to its end from code that cannot await (a synchronous cell or script).

        It runs on a worker thread with its own event loop; in a notebook the calling thread meanwhile services
        widget messages, so questions are answered in the same cell. An interrupt cancels it (its step is wiped)
        and is re-raised as a KeyboardInterrupt.
        """
        __tracebackhide__ = True
        from .sync import run_sync  # lazily: threads and asyncio only for code that cannot await

        pump = self._environment.message_pump() if self._environment is not None else None
        return run_sync(make, pump=pump)

    def step_sync(self, role: Role[T] | RoleFactory[..., T], input: object, *, mode: Mode | None = None) -> T:
        """`step`, for code that cannot await (a synchronous cell or script).

        The step runs on a worker thread with its own event loop; in a notebook the cell's thread meanwhile
        services widget messages, so questions are answered in the same cell. An interrupt cancels the step, which
        then ends with a `StepInterrupted` in a notebook (a `KeyboardInterrupt` elsewhere).
        """
        __tracebackhide__ = True
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
            return at_call_site(self.run_sync, step)
        except KeyboardInterrupt:
            # Outside a kernel Ctrl-C stays a KeyboardInterrupt; so does one that came after the step had finished
            # and kept its record.
            if finished or self._environment is None:
                raise
            from ..interrupts import StepInterrupted, interrupted_message

            raise StepInterrupted(interrupted_message(resolved.name)) from None

    def _fork(self, fork_from: object, at_turn: object) -> Fork:
        """What a step forks, its options checked where they were given."""
        from ._fork import check_fork_options

        if fork_from is None:
            raise InputError("run.step(): at_turn forks a recorded step: give fork_from=<record id> too.")
        if isinstance(fork_from, LoopOutcome):  # a step's outcome: its record, found by its transcript
            fork_from = next(
                (r for r in self.store.records() if r.finished and r.transcript == fork_from.transcript), None
            )
            if fork_from is None:
                raise InputError(
                    "run.step(): this Run's store keeps no record of that outcome (a step in mode 'off' keeps none): "
                    "fork_from takes a recorded step's outcome, its record, or its record's id."
                )
        check_fork_options(fork_from, at_turn, where="run.step()")
        assert isinstance(at_turn, int)
        if isinstance(fork_from, StepRecord):
            return Fork(at_turn, record_id=fork_from.id, record=fork_from, store=self.store)
        assert isinstance(fork_from, str)
        return Fork(at_turn, record_id=fork_from.strip(), store=self.store)

    async def _recorded_input(self, role: Role[Any], fork: Fork) -> object:
        """The input of the record a fork names, built again (a fork whose input was left out)."""
        from ._fork import recorded_input

        if fork.record is None and fork.store is not None and fork.store.get(fork.record_id or "") is None:
            await fork.store.ready()  # recordings the frontend hands over after a restart
        found = fork.record or (fork.store.get(fork.record_id or "") if fork.store is not None else None)
        if found is None:
            fork.find(role, None)  # raises, saying there is no such record
        assert found is not None
        return recorded_input(role, found)

    def _context(self) -> Context:
        return Context(self.store, self._occurrences, self._environment)

    def _keep(self, outcome: LoopOutcome) -> None:
        """Keep a finished step's outcome in the bounded history."""
        self.outcomes.append(outcome)
        if len(self.outcomes) > HISTORY:
            del self.outcomes[0]

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
        raise InputError(
            f"{role.function.__qualname__} needs arguments ({names}): call it first, as "
            f"run.step({role.function.__name__}(...), input)."
        )

    def _model_for(self, role: Role[Any]) -> tuple[Model, str]:
        """The model a step of ``role`` runs on, each request passing the Run's account (prices, budget)."""
        model, model_id = self._resolve_model(role)
        return self.meter.wrap(model), model_id

    def _resolve_model(self, role: Role[Any]) -> tuple[Model, str]:
        chosen = self.model or role.model
        model_id = role.model if isinstance(role.model, str) else ""
        if isinstance(chosen, str):
            from ..models import resolve_model  # lazily: the Anthropic backend imports the anthropic SDK

            return resolve_model(chosen), chosen
        if chosen is not None:
            return chosen, model_id
        raise InputError(
            f"Role {role.name!r} has no model: give it one with @role(model=Claude.OPUS), or run "
            "it with Run(model=ScriptedModel(...))."
        )


@functools.cache
def _unit_role(name: str) -> Role[None]:
    """What a unit's view is made for: a role of the unit's name, with no tools (so no result descriptions)."""
    return Role(name, instructions=f"Runs {name} (a unit of work, not a model's role).")


@functools.cache
def _required_parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [
        p
        for p in inspect.signature(function).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def _emit_both(first: EventSink, rest: EventSink) -> EventSink:
    def emit(event: Event) -> None:
        __tracebackhide__ = True
        first(event)
        rest(event)

    return emit
