"""`run.map`: one role over many inputs, each item a step with its own record, drawn in one view.

Each item is exactly the step ``run.step(role, input)`` would be (the same fingerprint, occurrence numbers taken in
input order), run through the one engine (`agl_notebook.run._engine.run_unit`) with the item's view and the map's
store (``run.store.for_map(key)``), so a finished item replays with no model call. A failed item, and one the map's
Stop left unrun, keeps a failure record instead: mode ``replay`` replays it as the item's failure (a
`RecordedItemError`), and mode ``auto`` runs the item again. Items start in input order while fewer than the pacer's
limit run (`agl_notebook.run._pacer`); a failure does not stop the others. With ``engine=Batches(...)`` every item
joins the engine as a participant (keyed by its record key) before any starts, and all start at once: the engine
sends their requests in waves, one batch per wave (docs/batches.md). See docs/map.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._map_scope import MapItemContext, current_map_item, current_pacer, current_scoring
from ..errors import BudgetExceededError, InputError, ItemNotRunError, RecordedItemError, RoleIncompleteError
from ..media import Media, check_media
from ..models.base import (
    Model,
    ModelEvent,
    ModelRequest,
    model_engine_record,
    model_intercepts_markup,
    model_thinks,
)
from ..models.prices import dollars
from ..payloads import JsonObject, dump, payload_spec
from ..replay.modes import Mode, resolve_mode
from ..replay.records import recorded_failure
from ..replay.stores import map_store
from ..roles import Role
from ..transcript import Message
from ._engine import Context, MapVersions, keep_failure, run_unit
from ._judge import Judge, Scoring, Verdict, judge
from ._map_state import MapItem, MapResults, MapState, MapView, item_fields
from ._meter import Meter, estimate
from ._pacer import MAX_CONCURRENCY, MIN_CONCURRENCY, MapPacer
from ._stats import MAX_SCORE, averageable
from ._step import _tool_spec as _spec
from ._step import check_input, reporting_of
from ._vs_previous import previous_of, scored_previous

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..models.batch_replies import BatchStatus
    from ..models.batches import Batches, Participant
    from ..replay.stores import Store
    from ._step import StepPlan
    from .views import StepView

OnError = Literal["keep", "raise"]
Score = Callable[[Any, Any], Any]
"""A score function of (input, result): a number or a bool, a `Verdict`, or an awaitable of one of those."""

DEFAULT_CONCURRENCY = 8
"""Items run at once by default (the pacer lowers it while the API throttles)."""
DEFAULT_RETRIES = 4
"""How many times a map's request that failed transiently is retried by default."""
MAX_RETRY_WAIT = 60.0
"""The longest a map's request waits before a retry, whatever ``retry-after`` asks."""
ENGINE_STATE = "batch_state"
"""The ``kind`` of a batch map's sidecar lines holding its engine's state (`Batches.state`)."""
_KEY = re.compile(r"[^A-Za-z0-9_-]+")


def map_key(role: str, name: str | None) -> str:
    """The key of a map: its ``name``, else its role's name, with every run of other characters made one ``-``."""
    raw = name if name is not None else role
    if not isinstance(raw, str):
        raise InputError(f"run.map(name=...) takes a string, not {type(raw).__name__}.")
    key = _KEY.sub("-", raw).strip("-")[:80]
    if not key:
        raise InputError(f"run.map(name={raw!r}): a map's name needs a letter or a digit.")
    return key


@dataclasses.dataclass(frozen=True)
class MapHost:
    """What a map takes from its `Run`: the store, where units run, the Run's mode, and how a step is planned."""

    store: Store
    context: Context
    mode: Mode | None
    model: Callable[[Role[Any]], tuple[Model, str]]
    plan: Callable[[Role[Any], object, tuple[Model, str], StepView | None], StepPlan]
    meter: Meter | None = None
    """The Run's account: an engine given to the map passes it, and its first wave is estimated and budgeted by it."""


async def run_map(
    run: MapHost,
    role: Role[Any],
    inputs: object,
    *,
    concurrency: int,
    retries: int,
    on_error: OnError,
    score: Score | None,
    name: str | None,
    mode: Mode | None,
    view: MapView | None,
    engine: Batches | None = None,
    epochs: int = 1,
) -> MapResults:
    """`Run.map`: check everything, then run the items (see the module docstring)."""
    __tracebackhide__ = True
    values = _payloads(role, inputs)
    _check_options(concurrency, retries, on_error, score)
    check_epochs(epochs, "run.map")
    model = run.model(role)
    if engine is not None:
        _check_engine(engine)
        # The live model's id, and the engine's backend id is the live one's: the fingerprint stays the live one's.
        model = (run.meter.wrap(engine) if run.meter is not None else engine, model[1])
    item_mode = resolve_mode(step=mode, run=run.mode)
    context = run.context
    env = context.environment
    # Two maps of one key in one cell execution are told apart by number, in the order they start.
    base = map_key(role.name, name)
    number = context.occurrences.take(context.execution_key(), f"map:{base}")
    key = base if number == 0 else f"{base}-{number + 1}"
    store = map_store(run.store, key)
    item_context = Context(store, context.occurrences, env, keeps_failures=True, versions=MapVersions(store))
    reporting = role.reporting_tool
    # Each input's repeats follow it, so identical steps (an input's repeats) are numbered in input, then repeat,
    # order: the k records of an input are occurrences 0..k-1 of its step, and repeat 0 is the record a map without
    # repeats keeps.
    jsons = [value if isinstance(value, str) else dump(value) for value in values]
    state = MapState(
        key,
        role.name,
        [MapItem(i, value, jsons[i], r) for i, value in enumerate(values) for r in range(epochs)],
        fields=item_fields(reporting.input_schema if reporting is not None else None),
        scored=score is not None,
        epochs=epochs,
        judged=isinstance(score, Judge),
    )
    pacer = MapPacer(concurrency, retries, MAX_RETRY_WAIT)
    if view is None and env is not None:
        make = getattr(env, "map_view", None)  # an environment that draws maps (the notebook's)
        view = make(role) if make is not None else None

    def prepare(item: MapItem) -> tuple[_Tap, StepPlan]:
        tap = _Tap(model[0])
        item_view = view.item_view(item) if view is not None else None
        return tap, run.plan(role, item.value, (tap, model[1]), item_view)

    joined: list[tuple[MapItem, tuple[_Tap, StepPlan, Participant]]] = []
    detach: Callable[[], None] | None = None
    if engine is not None:
        state.batched = True
        # Every item joins before any starts (a wave goes out once every participant waits on a request), and
        # all start at once: the pacer's limit is the live API's; a waiting item costs a task, not a connection.
        ready = [(item, *prepare(item)) for item in state.items]
        detach = _keep_engine_state(engine, store, state, view)
        try:
            if run.meter is not None:
                state.estimate = _first_wave(run.meter, ready, store, item_mode)
        except BaseException:
            detach()
            raise
        # A wave's replies all arrive at once: their tool calls run at most `concurrency` at once, as live items do.
        tools_at_once = asyncio.Semaphore(concurrency)
        joined = [
            (item, (tap, plan, engine.join(key, limit=tools_at_once))) for item, tap, plan, key in _with_keys(ready)
        ]
        for _, (_, plan, participant) in joined:
            _park_while_waiting(plan, participant)
    if view is not None:
        view.begin(state)
    reporting_plan = reporting_of(role)  # builds an item's previous result, to score it as results are now

    async def run_item(item: MapItem, prepared: tuple[_Tap, StepPlan, Participant] | None = None) -> None:
        __tracebackhide__ = True
        if prepared is None:
            current_pacer.set(pacer)  # a batch map's requests are paced by its engine, not by the live API's limit
        current_map_item.set(MapItemContext(key, item.index, item.input_json, item.repeat))
        item.status = "running"
        state.running += 1
        if view is not None:
            view.changed(item)
        tap: _Tap | None = None
        plan: StepPlan | None = None
        try:
            if prepared is None:
                tap, plan = prepare(item)
                outcome = await run_unit(plan, item_mode, item_context)
            else:
                tap, plan, participant = prepared
                with participant:  # its requests join the engine's waves; it leaves when the step ends
                    outcome = await run_unit(plan, item_mode, item_context)
            item.result, item.result_json = outcome.result, outcome.result_json
            item.tokens = outcome.usage.tokens  # as a step's view counts them: cache writes and reads included
            item.cost = plan.cost  # the record's, so a replay shows the dollars the live run left
            item.replayed = tap.requests == 0
            if score is not None:
                scoring = Scoring(key, item.index, item.repeat, item_mode, item_context, run.model, run.plan)
                item.score, item.reasoning = await _scored(score, item, scoring)
            item.status = "done"
            state.done += 1
            state.tokens += item.tokens
        except RecordedItemError as e:
            item.error = e  # replayed from its failure record (mode replay): the failure the live run showed
            if e.status == "not_run":
                item.status = "stopped"
                state.stopped += 1
            else:
                item.status = "failed"
                state.failed += 1
                state.failures.append(item)
        except Exception as e:
            item.error, item.status = e, "failed"
            messages = tap.messages if tap is not None else ()
            item.transcript = tuple(e.transcript) if isinstance(e, RoleIncompleteError) else messages
            state.failed += 1
            state.failures.append(item)
        finally:
            if plan is not None and plan.kept is not None:
                previous = previous_of(plan.kept.change)
                if previous is not None:
                    judged = score is None or isinstance(score, Judge)
                    item.previous = scored_previous(previous, item.value, None if judged else score, reporting_plan)
            state.running -= 1
            if prepared is None:
                pacer.end_item()
            if item.status == "running":  # cancelled: an interrupt
                item.status = "queued"
            if view is not None:
                view.changed(item)

    tasks: list[asyncio.Task[None]] = []
    try:
        tasks.extend(asyncio.ensure_future(run_item(item, prepared)) for item, prepared in joined)
        for item in state.items[len(tasks) :]:
            await pacer.start_item()
            if view is not None and view.stop_requested:
                pacer.end_item()
                break
            state.limit = pacer.limit
            tasks.append(asyncio.ensure_future(run_item(item)))
        await asyncio.gather(*tasks)
        if len(tasks) < len(state.items) and item_mode in ("auto", "refresh"):
            # Stopped: each item not started keeps a failure record, so a replay shows it as not run, as here.
            for item in state.items[len(tasks) :]:
                plan = run.plan(role, item.value, model, None)
                occurrence = context.occurrences.take(context.execution_key(), plan.fingerprint.base)
                not_run = recorded_failure("not_run", ItemNotRunError(_not_run(key)))
                keep_failure(plan, plan.fingerprint.with_occurrence(occurrence), occurrence, item_context, not_run)
        state.state = "stopped" if len(tasks) < len(state.items) or state.stopped else "finished"
    except BaseException as e:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        state.state = "interrupted"
        if env is not None and isinstance(e, KeyboardInterrupt | asyncio.CancelledError):
            from ..interrupts import StepInterrupted

            batches = (
                " Its batches go on: running the cell again re-attaches to them (agl-notebook batches cancel "
                "NOTEBOOK cancels them)."
                if engine is not None
                else ""
            )
            raise StepInterrupted(
                f"The map {key!r} was interrupted: the {state.done} items that finished keep their records; "
                f"run the cell again to run the other {state.total - state.done} (the finished ones replay)." + batches
            ) from None
        raise
    finally:
        for _, (_, _, participant) in joined:
            participant.leave()  # one whose task was cancelled before it began never entered its block
        if detach is not None:
            detach()
        for item in state.items[len(tasks) :]:
            item.status, item.error = "stopped", ItemNotRunError(_not_run(key))
        state.stopped += len(state.items) - len(tasks)  # and those replayed as not run (mode replay)
        state.limit = pacer.limit
        if view is not None:
            view.finish(store.saved_block())
    drawn_here: Callable[[], bool] | None = None
    if view is not None and env is not None:
        execution = context.execution_key()

        def drawn_here() -> bool:
            return context.execution_key() == execution

    results = MapResults(state, tuple(pacer.trace), pacer.throttled, drawn_here=drawn_here)
    if on_error == "raise":
        for item in state.items:
            if item.status == "failed" and item.error is not None:
                raise item.error
    return results


def _with_keys(ready: list[tuple[MapItem, _Tap, StepPlan]]) -> Iterator[tuple[MapItem, _Tap, StepPlan, str]]:
    """Each prepared item with its record key: its fingerprint's record id, identical steps numbered in input order."""
    seen: dict[str, int] = {}
    for item, tap, plan in ready:
        base = plan.fingerprint.base
        occurrence = seen[base] = seen.get(base, -1) + 1
        yield item, tap, plan, plan.fingerprint.with_occurrence(occurrence)


def _first_wave(meter: Meter, ready: list[tuple[MapItem, _Tap, StepPlan]], store: Store, mode: Mode) -> str:
    """The estimated cost of the first wave at the batch price (items with a record replay, free), as the view says.

    An item whose record is a failure record runs live again, except in mode ``replay``, which replays the failure.

    Raises:
        BudgetExceededError: The Run's budget cannot pay for it: nothing is created.
    """
    total, unpriced, requests = 0.0, 0, 0
    for _, _, plan, key in _with_keys(ready):
        found = store.get(key)
        if found is not None and (found.failure is None or mode == "replay"):
            continue
        requests += 1
        rates = meter.prices.rates_for(plan.backend)
        if rates is None:
            unpriced += 1
            continue
        tools = [*(_spec(t) for t in plan.tools), *([plan.reporting.spec] if plan.reporting is not None else [])]
        request = ModelRequest(plan.model_id, plan.system, (plan.first_message,), tuple(tools), plan.role.max_tokens)
        total += estimate(request, rates.batched()).likely
    budget = meter.budget_usd
    if budget is not None and meter.spent_usd + total > budget:
        raise BudgetExceededError(
            f"The first wave of this batch map ({requests} requests, estimated at {dollars(total)} at the batch "
            f"price) would pass this Run's budget: spent {dollars(meter.spent_usd)} of {dollars(budget)}. No batch "
            "was created; nothing was recorded.",
            spent_usd=meter.spent_usd,
            budget_usd=budget,
            needed_usd=total,
        )
    text = f"first wave: {requests} requests, estimated {dollars(total)} at the batch price"
    return text + (f" ({unpriced} with no price)" if unpriced else "")


def _keep_engine_state(engine: Batches, store: Store, state: MapState, view: MapView | None) -> Callable[[], None]:
    """Re-attach the engine to the batches the map's sidecar names, and write its state there as batches are made.

    Written as soon as a batch is created (and again when one ends), so a kernel that dies mid-wave leaves the batch
    in the file: the cell run again re-attaches to it instead of creating it again (docs/batches.md). A store that
    keeps no lines of its own (outside a notebook) keeps no state: the engine's own ``on_state`` is the way then.
    """
    keep = getattr(store, "keep_line", None)
    latest = getattr(store, "latest_line", None)
    saved = latest(ENGINE_STATE) if callable(latest) else None
    where = f"{store!r}, the map's sidecar line {ENGINE_STATE!r}"
    on_state = (lambda state: keep(ENGINE_STATE, {"state": state})) if callable(keep) else None
    redraw = getattr(view, "redraw", None)  # a view that draws the batches (the notebook's live one)

    def on_status(status: BatchStatus) -> None:
        state.batches[status.batch_id] = status
        if callable(redraw):
            redraw()

    saved_state = saved.get("state") if saved is not None else None
    return engine.attach(saved_state, on_state=on_state, on_status=on_status, where=where)


def _park_while_waiting(plan: StepPlan, participant: Participant) -> None:
    """While the item waits for a person (a question, an approval), the waves go on without it (docs/batches.md)."""
    before = plan.scope.on_waiting

    def park() -> None:
        if before is not None:
            before()
        participant.park()

    plan.scope.on_waiting = park


def _check_engine(engine: object) -> None:
    from ..models.batches import Batches  # loaded already: the caller made one

    if not isinstance(engine, Batches):
        raise InputError(f"run.map(engine=...) takes a Batches engine (agl_notebook.models.batches), not {engine!r}.")


def _not_run(key: str) -> str:
    return f"The map {key!r} was stopped before this item started; run the cell again to run it."


async def _scored(score: Score, item: MapItem, scoring: Scoring) -> tuple[float | bool, str | None]:
    """The item's score, checked (a number or a bool, or a judge's `Verdict`), and a judge's reasoning.

    An async score is awaited with `current_scoring` naming the item: a step it runs is numbered by (map, item,
    repeat) and kept in the map's store (agl_notebook.run._judge).
    """
    __tracebackhide__ = True
    token = current_scoring.set(scoring)
    try:
        value = score(item.value, item.result)
        if inspect.isawaitable(value):
            value = await value
    finally:
        current_scoring.reset(token)
    reasoning: str | None = None
    if isinstance(value, Verdict):
        reasoning = value.reasoning
        value = value.score
    if isinstance(value, bool):
        return value, reasoning
    if isinstance(value, int | float) and averageable(value):
        return float(value), reasoning
    from .._secrets import scrub_text, secrets_from_environment

    said = scrub_text(repr(value), secrets_from_environment())[:60]  # scrubbed before it is cut
    raise InputError(
        f"score(input, result) must return a number or a bool, not {said} (item {item.index}): a finite "
        f"number of at most {MAX_SCORE:g} either way, so means and intervals can be summed; the item's result is "
        "recorded, so fixing score and running the cell again replays it."
    )


def check_epochs(epochs: object, where: str) -> None:
    """``epochs`` is a whole number of runs per input, 1 or more."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise InputError(
            f"{where}(epochs=...) takes how many times each input runs, an int of 1 or more, not {epochs!r}."
        )


def _payloads(role: Role[Any], inputs: object) -> list[object]:
    """The inputs as payloads, each checked against the role (an `InputError` names the first wrong one)."""
    if _is_dataframe(inputs):
        return _from_dataframe(role, inputs)
    if isinstance(inputs, str | bytes | dict) or not isinstance(inputs, Sequence | Iterator | range):
        raise InputError(
            f"run.map takes a list of inputs or a pandas DataFrame, not {type(inputs).__name__}; for one input, "
            "use run.step."
        )
    values = list(inputs)
    for i, value in enumerate(values):
        try:
            check_input(role, value)
        except InputError as e:
            raise InputError(f"run.map: inputs[{i}]: {e}") from None
    return values


def _is_dataframe(value: object) -> bool:
    module = type(value).__module__
    return (module == "pandas" or module.startswith("pandas.")) and type(value).__name__ == "DataFrame"


def _from_dataframe(role: Role[Any], frame: Any) -> list[object]:
    """One payload per row: the columns name the fields of the one payload type the role accepts."""
    kinds = [kind for kind in role.accepts if dataclasses.is_dataclass(kind)]
    if len(kinds) != 1:
        raise InputError(
            f"run.map was given a DataFrame, but role {role.name!r} does not accept exactly one payload type "
            "(its columns name the payload's fields): give it accepts=[YourPayload], or pass a list of inputs."
        )
    kind = kinds[0]
    spec = payload_spec(kind)
    fields = {f.name for f in dataclasses.fields(kind)}
    unknown = [str(c) for c in frame.columns if c not in fields]
    if unknown:
        raise InputError(
            f"run.map: the DataFrame's columns {unknown} are not fields of {kind.__qualname__} "
            f"({', '.join(sorted(fields))}); select the columns to pass, or rename them."
        )
    media = _media_fields(kind)
    values: list[object] = []
    for i, row in enumerate(frame.to_dict(orient="records")):
        for name, make in media.items():  # a column of paths, bytes or URLs builds the image or document fields
            if isinstance(row.get(name), str | bytes | os.PathLike):
                row[name] = make(row[name])
        value, problems = spec.validate(row)
        if problems:
            raise InputError(f"run.map: row {i} of the DataFrame is not a {kind.__qualname__}: {'; '.join(problems)}")
        check_media(value, f"run.map: row {i}: {kind.__qualname__}")
        values.append(value)
    return values


def _media_fields(kind: type[Any]) -> dict[str, type[Media]]:
    """The fields of a payload type that are an image or a document (or optionally one), by name."""
    hints = typing.get_type_hints(kind)
    found: dict[str, type[Media]] = {}
    for f in dataclasses.fields(kind):
        hint = hints[f.name]
        options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        made = [o for o in options if isinstance(o, type) and issubclass(o, Media)]
        if len(made) == 1:
            found[f.name] = made[0]
    return found


def _check_options(concurrency: object, retries: object, on_error: object, score: object) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise InputError(f"run.map(concurrency=...) takes an int, not {concurrency!r}.")
    if not MIN_CONCURRENCY <= concurrency <= MAX_CONCURRENCY:
        raise InputError(f"run.map(concurrency={concurrency}): it must be from {MIN_CONCURRENCY} to {MAX_CONCURRENCY}.")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InputError(f"run.map(retries=...) takes an int >= 0, not {retries!r}.")
    if on_error not in ("keep", "raise"):
        raise InputError(f"run.map(on_error=...) takes 'keep' or 'raise', not {on_error!r}.")
    if score is not None and not callable(score):
        raise InputError(f"run.map(score=...) takes a function of (input, result), not {score!r}.")
    if isinstance(score, Judge):
        judge(score.role, score.rubric)  # type: ignore[unreachable]  # checked again: a Judge made by hand


class _Tap:
    """The item's model, passed through, keeping what it was last sent (a failed item's transcript)."""

    __slots__ = ("intercept_markup", "messages", "model", "network", "requests", "thinking")

    def __init__(self, model: Model) -> None:
        self.model = model
        self.network = getattr(model, "network", True)
        self.intercept_markup = model_intercepts_markup(model)
        self.thinking = model_thinks(model)  # a role that thinks is refused on a model that does not say it can
        self.messages: tuple[Message, ...] = ()
        self.requests = 0

    def backend_id(self, model: str) -> str:
        return self.model.backend_id(model)

    def engine_record(self) -> JsonObject | None:
        return model_engine_record(self.model)  # a batch map's step records the batches that answered it

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.messages = request.messages
        self.requests += 1
        return self.model.stream(request)
