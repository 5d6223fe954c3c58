"""The notebook view of a ``run.map``: one display for the whole map, live while it runs, static at the end.

As a step's view (`agl_notebook.notebook.view`): one display with a display id, updated in place when the map ends
to a deterministic static bundle (the summary, the first rows and the failures: `agl_notebook.run._map_state`)
whose output metadata carries the map's records block (``map_store.saved_block()``), its widgets closed; headless,
only that bundle is displayed, in the cell's start order. Its items draw nothing of their own: each has an
`_ItemView` that folds the item's events into a trace (kept for the rows the table shows, so opening a row shows
that item's step) and sends its questions and approvals to the map's view, where they queue and are answered one
at a time with the item's input shown.

Redraws are coalesced to `REDRAWS_PER_SECOND`, each one widget message, however many items run (docs/map.md).
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .._scope import Decision
from .._secrets import scrub_text, secrets_from_environment
from .._view_values import escaped
from ..approvals import ApprovalRequest, Approve, decide
from ..errors import InputError
from ..events import ApprovalDecided, ApprovalRequested, Event, QuestionAnswered, QuestionAsked
from ..payloads import JsonObject
from ..replay.records import StepRecord
from ..roles import Role
from ..run._map_state import FAILURES, ROWS, MapItem, MapState, render_map_html, render_map_text
from ..screens import Screen
from .approval_form import ApprovalPanel
from .form import _Form, close_widgets
from .nbfile import METADATA_KEY
from .render import StepTrace, render_html
from .view import (
    LIVE_METADATA,
    SAVED_WHILE_RUNNING,
    WIDGET_MIME,
    DisplayOrder,
    _descriptions,
    _ipython_display,
    show_final,
)

REDRAWS_PER_SECOND = 2
"""The most widget messages a second a running map sends (a question's form adds its own, at a person's pace)."""
KEPT_FAILURES = FAILURES * 5
"""How many failed items beyond the first rows keep their trace (to open them from the table)."""
_HERE = Path(__file__).parent


class MapWidget(anywidget.AnyWidget):
    """The map's live widget: the kernel's HTML, a Stop button, a row's step, "Only changed items" (map.js)."""

    _esm = (_HERE / "map.js").read_text(encoding="utf-8")
    _css = (_HERE / "map.css").read_text(encoding="utf-8")
    html = traitlets.Unicode("").tag(sync=True)
    """The progress line and the table, drawn by the kernel."""
    detail = traitlets.Unicode("").tag(sync=True)
    """The opened item's step view, or empty."""
    stopping = traitlets.Bool(False).tag(sync=True)
    """Stop was pressed: no more items start."""
    ended = traitlets.Bool(False).tag(sync=True)
    paired = traitlets.Bool(False).tag(sync=True)
    """Some item has a previous version: the view offers "Only changed items" (its rows marked ``data-changed``)."""


class NotebookMapView:
    """Draws one map in the running cell."""

    def __init__(
        self,
        role: Role[Any],
        *,
        display: Callable[..., Any] | None = None,
        live: bool = True,
        order: DisplayOrder | None = None,
    ) -> None:
        self._role = role
        self._descriptions = _descriptions(role)
        self._display = display or _ipython_display
        self._live = live
        self._order = order
        self._ticket: int | None = None
        self._secrets = secrets_from_environment()
        self._state: MapState | None = None
        self._handle: Any = None
        self._widget: MapWidget | None = None
        self._questions: Any = None
        self._box: Any = None
        self._traces: dict[int, StepTrace] = {}
        self._kept_failures = 0
        self._stop = False
        self._started = 0.0
        self._last_draw = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._asking: asyncio.Lock | None = None
        # Questions and approvals not yet answered, by item: counted from the item's events, which come before the
        # terminal's one-at-a-time lock (a count taken here in the queue saw only the item past that lock).
        self._waiting: dict[tuple[int, int], int] = {}
        self._always: set[str] = set()  # tools the person chose to always approve: queued calls of them pass
        self.redraws = 0
        """How many times the live widget was redrawn (each one widget message)."""

    # MapView ------------------------------------------------------------------------------------------------

    def begin(self, state: MapState) -> None:
        """Show the live widget (the header at once), or, headless, take the map's place in the cell's order."""
        self._state = state
        self._started = time.monotonic()
        if not self._live:
            if self._order is not None:
                self._ticket = self._order.ticket()
            return
        import ipywidgets as widgets

        self._loop = asyncio.get_running_loop()
        self._widget = MapWidget(html=self._live_html())
        self._widget.on_msg(self._on_message)
        self._questions = widgets.VBox([])
        self._box = widgets.VBox([self._widget, self._questions])
        text = f"agl_notebook map {state.key!r} of role {state.role!r} {SAVED_WHILE_RUNNING}."
        bundle = {
            WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": self._box.model_id},
            "text/plain": text,
            "text/html": f"<div>{html.escape(text)}</div>",
        }
        self._handle = self._display(bundle, metadata=LIVE_METADATA, raw=True, display_id=True)
        self._last_draw = time.monotonic()

    def item_view(self, item: MapItem) -> _ItemView:
        """The item's view: its trace, and its questions sent here."""
        return _ItemView(self, item, StepTrace(self._role.name, result_descriptions=self._descriptions))

    def changed(self, item: MapItem) -> None:
        """Redraw within half a second (at most `REDRAWS_PER_SECOND` widget messages a second)."""
        self.redraw()

    def redraw(self) -> None:
        """Redraw soon, coalesced as `changed` (a batch map's batch was polled)."""
        if self._widget is None or self._timer is not None:
            return
        wait = 1 / REDRAWS_PER_SECOND - (time.monotonic() - self._last_draw)
        if wait <= 0:
            self._draw()
        elif self._loop is not None:
            self._timer = self._loop.call_later(wait, self._draw)

    @property
    def stop_requested(self) -> bool:
        """Stop was pressed."""
        return self._stop

    def finish(self, saved: JsonObject) -> None:
        """Replace the live widget by the static bundle carrying the map's records block, or display it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        assert self._state is not None
        bundle = {
            "text/plain": render_map_text(self._state, self._secrets),
            "text/html": render_map_html(self._state, self._secrets),
        }
        metadata: dict[str, Any] = {METADATA_KEY: saved}
        show_final(bundle, metadata, self._handle, self._order, self._ticket, self._display)
        if self._box is not None:
            close_widgets(self._widget, self._questions, self._box)
            self._box = self._widget = self._questions = None
        self._traces.clear()

    # Questions and approvals of items, one at a time --------------------------------------------------------

    async def ask(self, item: MapItem, screen: Screen[Any]) -> list[object]:
        """Draw the item's question (with its input) once the questions before it are answered; its values."""
        form = await self._queued(item, f"asks: {screen.text}")
        question = _Form(screen, title=False)
        try:
            self._questions.children = (*form, question.box)
            return await question.answer()
        finally:
            question.close()
            self._done_asking(form)

    async def ask_approval(self, item: MapItem, request: ApprovalRequest) -> Decision:
        """Draw the item's tool call for approval once the ones before it are decided; the decision.

        "Always" approves this call and every pending (queued) call of the same tool in the map: they are not shown.
        """
        form = await self._queued(item, f"asks to call {request.tool}")
        if request.tool in self._always:
            self._done_asking(form)
            return decide(request, Approve())
        panel = ApprovalPanel(request)
        try:
            self._questions.children = (*form, panel.box)
            decision = await panel.decision()
            if decision.always:
                self._always.add(request.tool)
            return decision
        finally:
            panel.close()
            self._done_asking(form)

    async def _queued(self, item: MapItem, what: str) -> tuple[Any, ...]:
        if self._box is None:
            raise InputError("A map item's question can only be drawn while the map's live view is shown.")
        if self._asking is None:
            self._asking = asyncio.Lock()
        await self._asking.acquire()
        import ipywidgets as widgets

        label = escaped(_one_line(item.input_json, self._secrets), self._secrets)
        header = widgets.HTML(
            value=f'<div style="margin:6px 0 2px 0"><b>Item {item.index}</b> ({label}) '
            f"{escaped(what, self._secrets)}</div>"
        )
        return (header,)

    def _done_asking(self, shown: tuple[Any, ...]) -> None:
        close_widgets(*shown)
        if self._questions is not None:
            self._questions.children = ()
        if self._asking is not None:
            self._asking.release()
        self._dirty()

    # Drawing ------------------------------------------------------------------------------------------------

    def _dirty(self) -> None:
        if self._widget is not None and self._timer is None and self._loop is not None:
            self._timer = self._loop.call_later(1 / REDRAWS_PER_SECOND, self._draw)

    def _draw(self) -> None:
        self._timer = None
        if self._widget is None:
            return
        self._last_draw = time.monotonic()
        self._widget.html = self._live_html()
        if not self._widget.paired and self._state is not None and self._state.paired:
            self._widget.paired = True  # told once; which rows the person shows stays in the browser
        self.redraws += 1

    def _live_html(self) -> str:
        state = self._state
        assert state is not None
        ended = state.done + state.failed
        elapsed = time.monotonic() - self._started
        left = ""
        if ended and state.queued + state.running:
            seconds = elapsed / ended * (state.queued + state.running)
            left = f", about {_duration(seconds)} left"
        asking = sum(1 for count in self._waiting.values() if count > 0)
        waiting = f", {asking} waiting for you" if asking else ""
        share = ended / state.total if state.total else 1.0
        bar = (
            f'<div style="height:6px;background:rgba(127,127,127,0.2);border-radius:3px;margin:2px 0 4px 0">'
            f'<div style="height:6px;width:{share * 100:.1f}%;background:rgba(46,160,67,0.6);border-radius:3px">'
            "</div></div>"
        )
        line = (
            f"{state.done} done, {state.failed} failed, {state.running} running, {state.queued} queued; "
            f"{state.tokens} tokens{_dollars(state)}; concurrency {state.limit}{left}{waiting}"
        )
        batches = _batch_lines(state) if state.batched else ""  # counts, ids and dollars: nothing of a person's
        return bar + f"<div>{html.escape(line)}</div>" + batches + render_map_html(state, self._secrets, clickable=True)

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Runs on the kernel's main thread or a subshell's: only flags and synced traits change here.
        if not isinstance(content, dict) or self._widget is None:
            return
        kind = content.get("kind")
        if kind == "stop":
            self._stop = True
            self._widget.stopping = True
        elif kind == "open" and isinstance(content.get("index"), int):
            trace = self._traces.get(content["index"])
            self._widget.detail = (
                render_html(trace, self._secrets) + self._verdict_html(content["index"])
                if trace is not None
                else "<div>That item's step is not kept (only the first rows' and some failures' are).</div>"
            )
        elif kind == "close":
            self._widget.detail = ""

    def _verdict_html(self, index: int) -> str:
        """A judged item's verdict under its step: the score and the judge's reasoning (its first repeat's)."""
        state = self._state
        if state is None or not state.judged or not 0 <= index < state.inputs:
            return ""
        item = state.repeats(index)[0]
        if item.reasoning is None or item.score is None:
            return ""
        return (
            f'<div class="agl-verdict" style="margin:6px 0"><b>Verdict: {escaped(str(item.score), self._secrets)}'
            f"</b> {escaped(item.reasoning, self._secrets)}</div>"
        )

    def _asked(self, item: MapItem, change: int) -> None:
        """One more (``change`` 1) or one fewer (-1) of the item's questions and approvals waits for the person."""
        key = (item.index, item.repeat)
        self._waiting[key] = max(0, self._waiting.get(key, 0) + change)
        self._dirty()

    def _ended(self, item: MapItem, trace: StepTrace, *, failed: bool) -> None:
        """An item's step ended: keep its trace if the table can show its row (a repeated input's row: repeat 0)."""
        if self._waiting.pop((item.index, item.repeat), 0):  # a question that ended unanswered (the step failed)
            self._dirty()
        if item.index < ROWS and item.repeat == 0:
            self._traces[item.index] = trace
        elif failed and item.index >= ROWS and self._kept_failures < KEPT_FAILURES:
            self._kept_failures += 1
            self._traces[item.index] = trace


class _ItemView:
    """The view of one map item: its trace, never a display of its own; its questions go to the map's view."""

    __slots__ = ("_map", "item", "trace")

    def __init__(self, map_view: NotebookMapView, item: MapItem, trace: StepTrace) -> None:
        self._map = map_view
        self.item = item
        self.trace = trace

    def begin(self, *, replaying: bool) -> None:
        """Nothing to draw: the map's view shows the item's row."""

    def event(self, event: Event) -> None:
        """Fold the event into the item's trace; count the item's questions waiting for the person."""
        self.trace.apply(event)
        if isinstance(event, QuestionAsked | ApprovalRequested):
            self._map._asked(self.item, 1)
        elif isinstance(event, QuestionAnswered | ApprovalDecided):
            self._map._asked(self.item, -1)

    def finish(self, record: StepRecord | None) -> None:
        """The item's step finished (``record`` None: mode ``off``, nothing kept)."""
        self.trace.recorded = record is not None
        if record is not None:  # drawn as the record's version of the view drew it
            self.trace.views = record.views
        self._map._ended(self.item, self.trace, failed=False)

    def fail(self, error: BaseException) -> None:
        """The item's step failed (nothing recorded)."""
        self.trace.end_failed(type(error).__name__, str(error))
        self._map._ended(self.item, self.trace, failed=True)

    async def ask(self, screen: Screen[Any]) -> list[object]:
        """The question, queued in the map's view."""
        return await self._map.ask(self.item, screen)

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """The approval, queued in the map's view."""
        return await self._map.ask_approval(self.item, request)


def _one_line(value: object, secrets: tuple[str, ...]) -> str:
    """An item's input on one line of at most 120 characters: scrubbed first, so no cut keeps part of a secret."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(scrub_text(text, secrets).split())
    return text if len(text) <= 120 else text[:119] + "\u2026"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


SHOWN_BATCHES = 6
"""How many of a batch map's batches its live view lists (the latest)."""


def _batch_lines(state: MapState) -> str:
    """A batch map's estimate, its latest batches with their status and counts, and what an interrupt does."""
    lines = [state.estimate] if state.estimate is not None else []
    statuses = list(state.batches.values())
    if len(statuses) > SHOWN_BATCHES:
        lines.append(f"... {len(statuses) - SHOWN_BATCHES} earlier batches")
    for status in statuses[-SHOWN_BATCHES:]:
        counts = ", ".join(f"{n} {name}" for name, n in status.request_counts.items())
        lines.append(f"wave {status.wave}: batch {status.batch_id} {status.processing_status}: {counts}")
    lines.append(
        "An interrupt stops the polling, not the batches: run the cell again to re-attach to them "
        "(agl-notebook batches cancel NOTEBOOK cancels them)."
    )
    return "".join(f'<div class="agl-map-batch">{html.escape(line)}</div>' for line in lines)


def _dollars(state: MapState) -> str:
    shown = state.dollars()
    return f", {shown}" if shown is not None else ""
