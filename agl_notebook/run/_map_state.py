"""A map's state as its view and its results see it, the view's protocol, and its deterministic table.

The engine (`agl_notebook.run._map`) changes the state; a `MapView` is told when and redraws from it. The table
(text and HTML) depends only on the items' inputs, results, scores and errors, never on times or on whether an item
was live or replayed, so a replayed map draws what the live run left in the saved notebook (docs/map.md).
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, overload

from .._secrets import scrub_text, secrets_from_environment
from .._view_values import clipped, escaped, scrubbed, shown, value_html
from ..errors import InputError, ItemNotRunError, RecordedItemError
from ..models.prices import RecordedCost
from ..models.prices import dollars as format_dollars
from ..payloads import JsonObject, JsonValue
from ._stats import Interval, input_scores, mean_interval
from ._vs_previous import PreviousItem, VsPrevious, outcome, pairs_frame, vs_previous

if TYPE_CHECKING:
    from ..models.batch_replies import BatchStatus
    from ..transcript import Message
    from .views import StepView

ItemStatus = Literal["queued", "running", "done", "failed", "stopped"]

ROWS = 50
"""The static view (and the live table) shows the items of the first this many inputs."""
FAILURES = 20
"""It also lists the first this many failures among the rest."""
CELL_LENGTH = 60
"""A cell of the ``text/plain`` table is cut to this many characters (after scrubbing); the HTML table draws each
value as a step's view does, capped at `agl_notebook._view_values.VIEW_VALUE_BYTES`."""
ERROR_LENGTH = 200
"""An item's error is cut to this many characters (after scrubbing) in the table and the list of failures."""


@dataclass(eq=False, slots=True)
class MapItem:
    """One item of a map: its input and, once it ended, its result (or error) and score."""

    index: int
    """Its place in the inputs, from 0 (every repeat of an input has the input's index)."""
    value: object
    """The input payload."""
    input_json: JsonValue
    """The input as JSON."""
    repeat: int = 0
    """Which repeat of its input this is, from 0 (``epochs=k`` runs each input k times)."""
    status: ItemStatus = "queued"
    result: object = None
    """The reported payload (done)."""
    result_json: JsonValue = None
    score: float | bool | None = None
    reasoning: str | None = None
    """A judge's reasoning for the score (a `Verdict` the score returned), or None."""
    error: BaseException | None = None
    """Why it failed (failed), or why it did not run (stopped)."""
    transcript: tuple[Message, ...] = ()
    """A failed item's transcript: what its agent was sent last."""
    tokens: int = 0
    """Input and output tokens its requests spent (recorded ones for a replay)."""
    cost: RecordedCost | None = None
    """What its record says it cost (docs/cost.md); None: no cost kept (a scripted model's, or an older record)."""
    replayed: bool = False
    previous: PreviousItem | None = None
    """What its previous version ended with (a map against its previous run; docs/iterating.md), or None."""


@dataclass
class MapState:
    """Everything a map's view shows, changed by the engine as items run."""

    key: str
    """The map's key (its records' name)."""
    role: str
    items: list[MapItem]
    fields: tuple[str, ...] = ()
    """The reported payload's fields: the table's columns."""
    scored: bool = False
    epochs: int = 1
    """How many times each input runs: the items are the inputs' repeats, input by input."""
    judged: bool = False
    """The score is a judge's: the table has a verdict column (the judge's reasoning)."""
    done: int = 0
    failed: int = 0
    running: int = 0
    stopped: int = 0
    tokens: int = 0
    limit: int = 0
    """The pacer's concurrency now."""
    state: Literal["running", "finished", "stopped", "interrupted"] = "running"
    failures: list[MapItem] = field(default_factory=list)
    """The failed items, in the order they failed."""
    batched: bool = False
    """Its items are answered through the Message Batches API (``engine=Batches(...)``; docs/batches.md)."""
    estimate: str | None = None
    """A batch map's estimated cost of its first wave at the batch price, as the live view shows it."""
    batches: dict[str, BatchStatus] = field(default_factory=dict)
    """A batch map's batches as last polled, by batch id (the live view shows them, never the static one)."""
    _interval: tuple[Interval | None] | None = field(default=None, repr=False)
    _vs_previous: tuple[VsPrevious | None] | None = field(default=None, repr=False)

    @property
    def paired(self) -> bool:
        """Whether any item has a previous version (the table then shows it)."""
        return any(item.previous is not None for item in self.items)

    def vs_previous(self) -> VsPrevious | None:
        """The comparison with the previous run, once the map ended (None: no item has a previous version)."""
        if self.state == "running":
            return None
        if self._vs_previous is None:
            self._vs_previous = (vs_previous(self),)
        return self._vs_previous[0]

    @property
    def total(self) -> int:
        """How many items the map has (inputs times repeats)."""
        return len(self.items)

    @property
    def inputs(self) -> int:
        """How many inputs the map has."""
        return len(self.items) // self.epochs

    def repeats(self, index: int) -> list[MapItem]:
        """The items of input ``index``: its repeats, in order."""
        return self.items[index * self.epochs : (index + 1) * self.epochs]

    def input_scores(self) -> list[float | None]:
        """Each input's score: the mean of its repeats' scores (None where none scored)."""
        return input_scores([[item.score for item in self.repeats(i)] for i in range(self.inputs)])

    def agreement(self, index: int) -> tuple[int, int]:
        """How many of input ``index``'s ended repeats gave its most common outcome, and how many ended.

        An outcome is the reported payload (as canonical JSON) or, for a failed repeat, its error's class name.
        """
        outcomes: dict[str, int] = {}
        for item in self.repeats(index):
            if item.status == "done":
                key = "r" + json.dumps(item.result_json, sort_keys=True, ensure_ascii=False)
            elif item.status == "failed":
                key = "e" + error_name(item.error) if item.error is not None else "e"
            else:
                continue
            outcomes[key] = outcomes.get(key, 0) + 1
        return (max(outcomes.values()) if outcomes else 0), sum(outcomes.values())

    def consistency(self) -> list[float | None]:
        """Per input, the share of its ended repeats that gave its most common outcome (None: none ended)."""
        out: list[float | None] = []
        for i in range(self.inputs):
            agree, ended = self.agreement(i)
            out.append(agree / ended if ended else None)
        return out

    def consistent_inputs(self) -> tuple[int, int]:
        """How many inputs had every ended repeat agree, among those with two or more ended."""
        counted = [self.agreement(i) for i in range(self.inputs)]
        several = [(a, e) for a, e in counted if e >= 2]
        return sum(a == e for a, e in several), len(several)

    def score_interval(self) -> Interval | None:
        """The mean input score with its 95% interval (cluster bootstrap over inputs); computed once the map ended.

        While it runs the view shows the mean alone: a bootstrap at every redraw would cost what the map does.
        """
        if self.state == "running":
            return None
        if self._interval is None:
            self._interval = (mean_interval(self.input_scores()),)
        return self._interval[0]

    @property
    def queued(self) -> int:
        """Items not started yet."""
        return self.total - self.done - self.failed - self.running - self.stopped

    def mean_score(self) -> float | None:
        """The mean of the input scores so far (each the mean of its repeats'; True counts 1, False 0), or None."""
        scores = [s for s in self.input_scores() if s is not None]
        return math.fsum(scores) / len(scores) if scores else None

    def usd(self) -> tuple[float, int]:
        """What the ended items' records say they cost, in dollars, and how many of those had no price."""
        costs = [item.cost for item in self.items if item.cost is not None]
        return sum(c.usd for c in costs if c.usd is not None), sum(c.usd is None for c in costs)

    def dollars(self) -> str | None:
        """The recorded cost as the table's summary shows it, or None when no item kept one (docs/cost.md)."""
        if not any(item.cost is not None for item in self.items):
            return None
        usd, unknown = self.usd()
        if not unknown:
            return format_dollars(usd)
        no_usage = sum(item.cost is not None and item.cost.usage_unknown for item in self.items)
        why = [f"{n} with {what} unknown" for n, what in ((no_usage, "usage"), (unknown - no_usage, "price")) if n]
        return f"{format_dollars(usd)} ({', '.join(why)})"


class MapView(Protocol):
    """What draws a map: begun, told of each change, and drawn once more at the end."""

    def begin(self, state: MapState) -> None:
        """The map starts (every item queued)."""

    def item_view(self, item: MapItem) -> StepView | None:
        """The view of one item's step (it never displays anything of its own), or None."""
        ...

    def changed(self, item: MapItem) -> None:
        """An item started or ended; redraw soon (a view coalesces redraws)."""

    def finish(self, saved: JsonObject) -> None:
        """The map ended (finished, stopped or interrupted): draw the final static view, carrying ``saved``."""

    @property
    def stop_requested(self) -> bool:
        """The person asked to stop: queued items are not started."""
        ...


@dataclasses.dataclass(frozen=True, eq=False)
class MapItemError:
    """A map item that failed (or, the map stopped, never ran): where it stands in the inputs, and why."""

    index: int
    """Its place in the inputs, from 0."""
    input: object
    """Its input."""
    error: BaseException
    """Why it failed; an `ItemNotRunError` for an item the map's Stop button kept from starting. Replayed from a
    failure record (mode ``replay``), a `RecordedItemError` carrying the recorded class name and message."""
    transcript: tuple[Message, ...] = ()
    """What its agent had been sent when it failed (empty if it never reached the model)."""

    def __repr__(self) -> str:
        text = f"MapItemError(index={self.index}, error={error_name(self.error)}: {self.error})"
        return scrub_text(text, secrets_from_environment())


class MapResults(Sequence[Any]):
    """The results of a map in input order: each input's reported payload, or a `MapItemError`.

    With repeats (``epochs=k``), ``results[i]`` is input i's first repeat (repeat 0: what the same map without
    repeats gives), and ``results.repeats[i]`` has all k; scores are per input, the mean of its repeats'.
    Shown in a notebook as the map's table (deterministic text and HTML); ``to_pandas()`` has every row.
    """

    def __init__(
        self,
        state: MapState,
        trace: tuple[tuple[float, int], ...] = (),
        throttled: int = 0,
        *,
        drawn_here: Callable[[], bool] | None = None,
    ) -> None:
        self._state = state
        # While the cell execution that drew the map's view runs, the table is on screen already (`__repr__`).
        self._drawn_here = drawn_here
        every = [
            item.result
            if item.status == "done"
            else MapItemError(item.index, item.value, item.error or ItemNotRunError("not run"), item.transcript)
            for item in state.items
        ]
        k = state.epochs
        self._repeats: list[tuple[Any, ...]] = [tuple(every[i * k : (i + 1) * k]) for i in range(state.inputs)]
        self._values: list[Any] = [values[0] for values in self._repeats]
        self._failures = [value for value in every if isinstance(value, MapItemError)]
        self.key = state.key
        """The map's key: what its records are kept under."""
        self.concurrency_trace = trace
        """Every change of the map's concurrency: (seconds since it started, the new limit)."""
        self.throttled = throttled
        """How many of its requests the API throttled (429, 529)."""

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._values[index]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    @property
    def items(self) -> tuple[MapItem, ...]:
        """Every item, in input order: its result as JSON, status, error, score, tokens and recorded cost."""
        return tuple(self._state.items)

    @property
    def failures(self) -> list[MapItemError]:
        """The items that failed or did not run (every repeat), in input order."""
        return list(self._failures)

    @property
    def epochs(self) -> int:
        """How many times each input ran."""
        return self._state.epochs

    @property
    def repeats(self) -> list[tuple[Any, ...]]:
        """Per input, every repeat's reported payload (or `MapItemError`), in repeat order."""
        return list(self._repeats)

    @property
    def scores(self) -> list[float | bool | None]:
        """Each input's score (None: not scored, or not done), in input order; with repeats, their mean."""
        if self._state.epochs == 1:
            return [item.score for item in self._state.items]
        return list(self._state.input_scores())

    @property
    def repeat_scores(self) -> list[tuple[float | bool | None, ...]]:
        """Per input, every repeat's score."""
        state = self._state
        return [tuple(item.score for item in state.repeats(i)) for i in range(state.inputs)]

    @property
    def consistency(self) -> list[float | None]:
        """Per input, the share of its repeats that gave its most common outcome (1.0: they all agree)."""
        return self._state.consistency()

    @property
    def reasonings(self) -> list[str | None]:
        """Per input, a judge's reasoning for its first repeat's score (None: no judge, or not scored)."""
        return [self._state.repeats(i)[0].reasoning for i in range(self._state.inputs)]

    @property
    def mean_score(self) -> float | None:
        """The mean of the input scores (True counts 1), or None."""
        return self._state.mean_score()

    @property
    def score_interval(self) -> Interval | None:
        """The mean input score with its 95% interval (a bootstrap over inputs, repeats drawn with their input)."""
        return self._state.score_interval()

    def vs_previous(self) -> Any:
        """The items paired with their previous versions, as a pandas DataFrame (docs/iterating.md).

        A row per item that has a previous version: its input, how it compares (``outcome``), the previous result,
        error and score, and the result, score and status now. Needs pandas.
        """
        return pairs_frame(self._state.items)

    @property
    def compared(self) -> VsPrevious | None:
        """The map against its previous run: the counts, the mean scores before and after, the paired difference."""
        return self._state.vs_previous()

    def to_pandas(self) -> Any:
        """A pandas DataFrame: a row per input and repeat, the reported fields, the score, the status and the error.

        With repeats the index is (``index``, ``repeat``); without, ``index`` alone.

        Needs pandas (``pip install agl_notebook[pandas]``).
        """
        try:
            import pandas  # type: ignore[import-untyped]  # optional, and without stubs
        except ImportError:
            raise InputError("results.to_pandas() needs pandas: pip install 'agl_notebook[pandas]'.") from None
        state = self._state
        secrets = secrets_from_environment()
        rows: list[dict[str, Any]] = []
        for item in state.items:
            row: dict[str, Any] = {"index": item.index, "repeat": item.repeat, "input": item.input_json}
            result = item.result_json if isinstance(item.result_json, dict) else {"result": item.result_json}
            row.update({name: result.get(name) if item.status == "done" else None for name in state.fields})
            if state.scored:
                row["score"] = item.score
            if state.judged:
                row["reasoning"] = scrub_text(item.reasoning, secrets) if item.reasoning is not None else None
            row["status"] = item.status
            error = f"{error_name(item.error)}: {item.error}" if item.error is not None else None
            row["error"] = scrub_text(error, secrets) if error is not None else None
            rows.append(row)
        frame = pandas.DataFrame(rows)
        if state.epochs == 1:
            return frame.drop(columns="repeat").set_index("index")
        return frame.set_index(["index", "repeat"])

    # What a cell shows when the results are its last expression: the table, scrubbed like every view (an error
    # message or an input may hold a secret the environment knows). In the cell whose map drew its view, the table
    # is just above: one line then, the same live and replayed.
    def __repr__(self) -> str:
        if self._drawn_here is not None and self._drawn_here():
            return shown(f"{summary_text(self._state)} (the table is above)", secrets_from_environment())
        return render_map_text(self._state, secrets_from_environment())

    def _repr_html_(self) -> str:
        if self._drawn_here is not None and self._drawn_here():
            return f"<pre>{html.escape(repr(self))}</pre>"
        return render_map_html(self._state, secrets_from_environment())


# --- The table ----------------------------------------------------------------------------------------------------


def shown_items(state: MapState) -> tuple[list[MapItem], list[MapItem]]:
    """The rows of the table (the ended items among the first `ROWS` inputs) and the failures listed below them."""
    if state.paired:  # against the previous run: the changed items first, whichever inputs they are
        ended = [state.repeats(i)[0] for i in range(state.inputs)]
        ended = [item for item in ended if item.status in ("done", "failed")]
        changed = [item for item in ended if outcome(item) in _CHANGED]
        rows = (changed + [item for item in ended if outcome(item) not in _CHANGED])[:ROWS]
        later = sorted(
            (item for item in state.failures if item not in rows), key=lambda item: (item.index, item.repeat)
        )
        return rows, later[:FAILURES]
    firsts = (state.repeats(i)[0] for i in range(min(ROWS, state.inputs)))
    rows = [item for item in firsts if item.status in ("done", "failed")]
    later = sorted((item for item in state.failures if item.index >= ROWS), key=lambda item: (item.index, item.repeat))
    return rows, later[:FAILURES]


_CHANGED: tuple[str | None, ...] = ("improved", "regressed", "changed", "newly failing", "newly passing")


def previous_text(state: MapState) -> str | None:
    """The line saying the map against its previous run, or None."""
    compared = state.vs_previous()
    return compared.line() if compared is not None else None


def summary_text(state: MapState) -> str:
    """One line: the counts, the mean score and the tokens."""
    parts = [f"{state.done} done", f"{state.failed} failed"]
    interval = state.score_interval() if state.scored else None
    if state.stopped:
        parts.append(f"{state.stopped} not run")
    if state.state == "running":
        parts += [f"{state.running} running", f"{state.queued} queued"]
    mean = state.mean_score()
    if interval is not None:
        parts.append(f"mean score {interval.text()}")
    elif mean is not None:
        parts.append(f"mean score {mean:.3g}")
    if state.epochs > 1:
        agree, several = state.consistent_inputs()
        parts.append(f"every repeat agrees on {agree} of {several} inputs")
    parts.append(f"{state.tokens} tokens")
    dollars = state.dollars()
    if dollars is not None:
        parts.append(dollars)
    ended = {"running": "", "finished": "", "stopped": " (stopped)", "interrupted": " (interrupted)"}[state.state]
    size = f"{state.total} items" if state.epochs == 1 else f"{state.inputs} inputs x {state.epochs} repeats"
    return f"map {state.key!r} of role {state.role!r}: {size}{ended}: " + ", ".join(parts)


def columns(state: MapState) -> list[str]:
    """The table's columns."""
    return [
        "#",
        "input",
        *state.fields,
        *(["score"] if state.scored else []),
        *(["agree"] if state.epochs > 1 else []),
        *(["verdict"] if state.judged else []),
        "status",
        *(["previous", *(["previous score"] if state.scored else [])] if state.paired else []),
    ]


def row_cells(state: MapState, item: MapItem) -> list[Cell]:
    """One row's cells: each a value drawn as a step's view draws payloads, or a line of text (index, status)."""
    cells: list[Cell] = [Cell(str(item.index)), Cell(value=_input_shown(item.input_json))]
    if item.status == "done":
        fields = item.result_json if isinstance(item.result_json, dict) else {}
        if state.fields == ("result",) and not isinstance(item.result_json, dict):
            cells.append(Cell(value=item.result_json))
        else:
            cells += [Cell(value=fields.get(name)) for name in state.fields]
    else:
        cells += [Cell("")] * len(state.fields)
    repeats = state.repeats(item.index) if state.epochs > 1 else [item]
    if state.scored:
        score = item.score if state.epochs == 1 else input_scores([[r.score for r in repeats]])[0]
        cells.append(Cell("" if score is None else _score(score)))
    if state.epochs > 1:
        agree, ended = state.agreement(item.index)
        cells.append(Cell(f"{agree}/{ended}" if ended else ""))
    if state.judged:
        cells.append(Cell("") if item.reasoning is None else Cell(value=item.reasoning))
    failed = [r for r in repeats if r.status == "failed"]
    if not failed and item.status == "done":
        cells.append(Cell("done"))
    elif state.epochs > 1:
        text = f"{len(failed)} of {len(repeats)} repeats failed: {_error_text(failed[0])}" if failed else item.status
        cells.append(Cell(text, cut=ERROR_LENGTH))
    else:
        cells.append(Cell(_error_text(item), cut=ERROR_LENGTH))
    if state.paired:
        previous = item.previous
        if previous is None:
            cells.append(Cell(""))
        elif previous.failed:
            cells.append(Cell(f"failed: {previous.error}", cut=ERROR_LENGTH))
        else:
            cells.append(Cell(value=previous.result_json))
        if state.scored:
            score = previous.score if previous is not None else None
            cells.append(Cell("" if score is None else _score(score)))
    return cells


def render_map_text(state: MapState, secrets: tuple[str, ...] | None = None) -> str:
    """The static view as plain text: the summary, the rows, the failures.

    Every value is scrubbed of ``secrets`` (default: the environment's) before it is cut.
    """
    secrets = secrets_from_environment() if secrets is None else secrets
    rows, failures = shown_items(state)
    lines = [shown(summary_text(state), secrets)]
    against = previous_text(state)
    if against is not None:
        lines.append(shown(against, secrets))
    if rows:
        lines.append(" | ".join(shown(name, secrets) for name in columns(state)))
        lines += [" | ".join(cell.text(secrets) for cell in row_cells(state, item)) for item in rows]
    if state.total > ROWS:
        lines.append(f"(the first {ROWS} inputs are shown; results.to_pandas() has every row)")
    if failures:
        lines.append(f"failures after the first {ROWS} inputs:")
        lines += [f"{_where(state, item)}: {clipped(_error_text(item), secrets, ERROR_LENGTH)}" for item in failures]
    more = sum(1 for item in state.failures if item.index >= ROWS) - len(failures)
    if more > 0:
        lines.append(f"... and {more} more failures")
    return "\n".join(lines)


def render_map_html(state: MapState, secrets: tuple[str, ...] | None = None, *, clickable: bool = False) -> str:
    """The static view as HTML; ``clickable`` marks rows (for the live view, which opens an item's step).

    Every value is scrubbed of ``secrets`` (default: the environment's), then capped or cut, then escaped; payloads
    are drawn as a step's view draws them (an object as rows, ``None`` as ``null`` in code type).
    """
    secrets = secrets_from_environment() if secrets is None else secrets
    rows, failures = shown_items(state)
    head = escaped(summary_text(state), secrets)
    out = [f'<div class="agl-map" style="{_BOX}"><div style="{_HEAD}"><b>{head}</b></div>']
    against = previous_text(state)
    if against is not None:
        out.append(f'<div class="agl-vs-previous" style="{_NOTE}">{escaped(against, secrets)}</div>')
    if rows:
        out.append(f'<div style="{_SCROLL}"><table style="{_TABLE}"><thead><tr>')
        out += [f'<th style="{_TD}">{escaped(name, secrets)}</th>' for name in columns(state)]
        out.append("</tr></thead><tbody>")
        for item in rows:
            tint = "" if item.status == "done" else f"background:{_BAD}"
            mark = (
                f' data-item="{item.index}"{_changed_mark(item)} tabindex="0" title="Open this item\'s step"'
                f' style="cursor:pointer;{tint}"'
                if clickable
                else f' style="{tint}"'
            )
            cells = "".join(f'<td style="{_TD}">{cell.html(secrets)}</td>' for cell in row_cells(state, item))
            out.append(f"<tr{mark}>{cells}</tr>")
        out.append("</tbody></table></div>")
    if state.total > ROWS:
        out.append(f'<div style="{_NOTE}">The first {ROWS} inputs are shown; results.to_pandas() has every row.</div>')
    if failures:
        out.append(f'<div style="{_HEAD}">Failures after the first {ROWS} inputs:</div><ul style="{_LIST}">')
        for item in failures:
            mark = (
                f' data-item="{item.index}"{_changed_mark(item)} tabindex="0" style="cursor:pointer"'
                if clickable
                else ""
            )
            error = html.escape(clipped(_error_text(item), secrets, ERROR_LENGTH), quote=True)
            out.append(f"<li{mark}>{_where(state, item)}: {error}</li>")
        out.append("</ul>")
    more = sum(1 for item in state.failures if item.index >= ROWS) - len(failures)
    if more > 0:
        out.append(f'<div style="{_NOTE}">... and {more} more failures</div>')
    out.append("</div>")
    return "".join(out)


def _changed_mark(item: MapItem) -> str:
    """A live row's mark when it changed since the previous run: the live view's "Only changed items" keeps those.

    Only the live (clickable) table carries it: the saved static view stays as it was.
    """
    return ' data-changed=""' if outcome(item) in _CHANGED else ""


_NO_VALUE = object()


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the table: a line of text, or a value drawn as a payload."""

    line: str = ""
    """The text of a cell that is not a value (the index, the score, the status or error)."""
    value: object = _NO_VALUE
    """The JSON value to draw; unset for a line of text."""
    cut: int = CELL_LENGTH
    """How many characters of it ``text/plain`` shows (a line of text: the HTML view too)."""

    def text(self, secrets: tuple[str, ...]) -> str:
        """The cell in ``text/plain``: scrubbed, then cut to one short line."""
        text = self.line if self.value is _NO_VALUE else _cell_text(scrubbed(cast(JsonValue, self.value), secrets))
        text = " ".join(scrub_text(text, secrets).split())  # scrubbed before its spaces change: a secret may hold some
        return text if len(text) <= self.cut else text[: self.cut - 1] + "\u2026"

    def html(self, secrets: tuple[str, ...]) -> str:
        """The cell in ``text/html``: a value as a step's view draws it (scrubbed, capped); a line scrubbed, cut."""
        if self.value is _NO_VALUE:
            return html.escape(clipped(self.line, secrets, self.cut), quote=True)
        return value_html(cast(JsonValue, self.value), secrets, scroll=_CELL_SCROLL)


def _where(state: MapState, item: MapItem) -> str:
    """An item as the list of failures names it: its index, and its repeat when inputs repeat."""
    return str(item.index) if state.epochs == 1 else f"{item.index} (repeat {item.repeat})"


def _error_text(item: MapItem) -> str:
    if item.error is None:
        return item.status
    return f"{item.status}: {error_name(item.error)}: {item.error}"


def error_name(error: BaseException) -> str:
    """The class name an item's error is shown with: a replayed failure's is the one it recorded, as live."""
    return error.type_name if isinstance(error, RecordedItemError) else type(error).__name__


def _score(score: float | bool) -> str:
    return str(score) if isinstance(score, bool) else f"{score:.3g}"


def _input_shown(value: JsonValue) -> JsonValue:
    """An input of one text field is shown as its text (``Query("...")`` as the text)."""
    if isinstance(value, dict) and len(value) == 1:
        only = next(iter(value.values()))
        if isinstance(only, str):
            return only
    return value


def _cell_text(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def item_fields(reporting_schema: JsonObject | None) -> tuple[str, ...]:
    """The table's result columns: the reported payload's fields, or ``result`` for a role that reports nothing."""
    properties = reporting_schema.get("properties") if reporting_schema is not None else None
    if not isinstance(properties, dict) or not properties:
        return ("result",)
    return tuple(str(name) for name in properties)


_BOX = "border:1px solid rgba(127,127,127,0.45);border-radius:6px;padding:6px 10px;margin:4px 0;font-size:13px"
_HEAD = "margin:2px 0 6px 0"
_TABLE = "border-collapse:collapse;margin:2px 0"
_SCROLL = "max-height:24em;overflow:auto"  # 50 rows stay about 24 lines tall, as a step's long blocks do
_TD = "text-align:left;vertical-align:top;padding:2px 8px;border-bottom:1px solid rgba(127,127,127,0.25)"
_NOTE = "opacity:0.8;margin:4px 0"
_LIST = "margin:0;padding-left:2.2em"
_BAD = "rgba(209,36,47,0.14)"
_CELL_SCROLL = "max-height:12em;overflow:auto"  # a long value scrolls inside its cell: a row stays a few lines tall
