"""`run.map`: one role over many inputs, each item a step with its own record, drawn in one view.

Each item is exactly the step ``run.step(role, input)`` would be (the same fingerprint, occurrence numbers taken in
input order), run through the one engine (`agl_notebook.run._engine.run_unit`) with the item's view and the map's
store (``run.store.for_map(key)``), so a finished item replays with no model call and a failed one, never recorded,
runs again. Items start in input order while fewer than the pacer's limit run (`agl_notebook.run._pacer`); a
failure does not stop the others. See docs/map.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._map_scope import MapItemContext, current_map_item, current_pacer
from ..errors import InputError, ItemNotRunError, RoleIncompleteError
from ..models.base import Model, ModelEvent, ModelRequest, model_intercepts_markup
from ..payloads import dump, payload_spec
from ..replay.modes import Mode, resolve_mode
from ..replay.stores import map_store
from ..roles import Role
from ..transcript import Message
from ._engine import Context, run_unit
from ._map_state import MapItem, MapResults, MapState, MapView, item_fields
from ._pacer import MAX_CONCURRENCY, MIN_CONCURRENCY, MapPacer
from ._step import check_input

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..replay.stores import Store
    from ._step import StepPlan
    from .views import StepView

OnError = Literal["keep", "raise"]
Score = Callable[[Any, Any], "float | int | bool"]

DEFAULT_CONCURRENCY = 8
"""Items run at once by default (the pacer lowers it while the API throttles)."""
DEFAULT_RETRIES = 4
"""How many times a map's request that failed transiently is retried by default."""
MAX_RETRY_WAIT = 60.0
"""The longest a map's request waits before a retry, whatever ``retry-after`` asks."""
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
) -> MapResults:
    """`Run.map`: check everything, then run the items (see the module docstring)."""
    __tracebackhide__ = True
    values = _payloads(role, inputs)
    _check_options(concurrency, retries, on_error, score)
    model = run.model(role)
    item_mode = resolve_mode(step=mode, run=run.mode)
    context = run.context
    env = context.environment
    # Two maps of one key in one cell execution are told apart by number, in the order they start.
    base = map_key(role.name, name)
    number = context.occurrences.take(context.execution_key(), f"map:{base}")
    key = base if number == 0 else f"{base}-{number + 1}"
    store = map_store(run.store, key)
    item_context = Context(store, context.occurrences, env)
    reporting = role.reporting_tool
    state = MapState(
        key,
        role.name,
        [MapItem(i, value, value if isinstance(value, str) else dump(value)) for i, value in enumerate(values)],
        fields=item_fields(reporting.input_schema if reporting is not None else None),
        scored=score is not None,
    )
    pacer = MapPacer(concurrency, retries, MAX_RETRY_WAIT)
    if view is None and env is not None:
        make = getattr(env, "map_view", None)  # an environment that draws maps (the notebook's)
        view = make(role) if make is not None else None
    if view is not None:
        view.begin(state)

    async def run_item(item: MapItem) -> None:
        __tracebackhide__ = True
        current_pacer.set(pacer)
        current_map_item.set(MapItemContext(key, item.index, item.input_json))
        tap = _Tap(model[0])
        item.status = "running"
        state.running += 1
        if view is not None:
            view.changed(item)
        try:
            item_view = view.item_view(item) if view is not None else None
            plan = run.plan(role, item.value, (tap, model[1]), item_view)
            outcome = await run_unit(plan, item_mode, item_context)
            item.result, item.result_json = outcome.result, outcome.result_json
            item.tokens = outcome.usage.tokens  # as a step's view counts them: cache writes and reads included
            item.cost = plan.cost  # the record's, so a replay shows the dollars the live run left
            item.replayed = tap.requests == 0
            if score is not None:
                item.score = _scored(score, item)
            item.status = "done"
            state.done += 1
            state.tokens += item.tokens
        except Exception as e:
            item.error, item.status = e, "failed"
            item.transcript = tuple(e.transcript) if isinstance(e, RoleIncompleteError) else tap.messages
            state.failed += 1
            state.failures.append(item)
        finally:
            state.running -= 1
            pacer.end_item()
            if item.status == "running":  # cancelled: an interrupt
                item.status = "queued"
            if view is not None:
                view.changed(item)

    tasks: list[asyncio.Task[None]] = []
    try:
        for item in state.items:
            await pacer.start_item()
            if view is not None and view.stop_requested:
                pacer.end_item()
                break
            state.limit = pacer.limit
            tasks.append(asyncio.ensure_future(run_item(item)))
        await asyncio.gather(*tasks)
        state.state = "stopped" if len(tasks) < len(state.items) else "finished"
    except BaseException as e:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        state.state = "interrupted"
        if env is not None and isinstance(e, KeyboardInterrupt | asyncio.CancelledError):
            from ..interrupts import StepInterrupted

            raise StepInterrupted(
                f"The map {key!r} was interrupted: the {state.done} items that finished keep their records; "
                f"run the cell again to run the other {state.total - state.done} (the finished ones replay)."
            ) from None
        raise
    finally:
        for item in state.items[len(tasks) :]:
            item.status, item.error = "stopped", ItemNotRunError(_not_run(key))
        state.stopped = len(state.items) - len(tasks)
        state.limit = pacer.limit
        if view is not None:
            view.finish(store.saved_block())
    results = MapResults(state, tuple(pacer.trace), pacer.throttled)
    if on_error == "raise":
        for item in state.items:
            if item.status == "failed" and item.error is not None:
                raise item.error
    return results


def _not_run(key: str) -> str:
    return f"The map {key!r} was stopped before this item started; run the cell again to run it."


def _scored(score: Score, item: MapItem) -> float | bool:
    """The item's score, checked: a number or a bool."""
    __tracebackhide__ = True
    value = score(item.value, item.result)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value == value:  # not NaN
        return float(value)
    raise InputError(
        f"score(input, result) must return a number or a bool, not {value!r:.60} (item {item.index}); the item's "
        "result is recorded, so fixing score and running the cell again replays it."
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
    values: list[object] = []
    for i, row in enumerate(frame.to_dict(orient="records")):
        value, problems = spec.validate(row)
        if problems:
            raise InputError(f"run.map: row {i} of the DataFrame is not a {kind.__qualname__}: {'; '.join(problems)}")
        values.append(value)
    return values


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


class _Tap:
    """The item's model, passed through, keeping what it was last sent (a failed item's transcript)."""

    __slots__ = ("intercept_markup", "messages", "model", "network", "requests")

    def __init__(self, model: Model) -> None:
        self.model = model
        self.network = getattr(model, "network", True)
        self.intercept_markup = model_intercepts_markup(model)
        self.messages: tuple[Message, ...] = ()
        self.requests = 0

    def backend_id(self, model: str) -> str:
        return self.model.backend_id(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.messages = request.messages
        self.requests += 1
        return self.model.stream(request)
