"""The notebook view of a step: one display with a display id, live widgets while it runs, static at the end.

Why this shape (docs/architecture.md, "One display per step"): JupyterLab never falls back to text/html
when a widget's model is gone, so an output that still refers to a widget shows "model not found" after reopening;
and nbval compares the first display of a re-execution with the saved output. So a live step displays one bundle
(the widget view plus a placeholder text/plain and text/html) with a display id, updates it in place when the step
ends to the final static bundle only (its record in the output metadata: path 2), and closes its widgets. A replay
displays that final bundle directly, which is what the live run left in the saved notebook. So does a live step in
a headless run (nbclient, nbval), where nobody watches: its first display is then the final one, as nbval needs.

Order: a cell's views appear in the order its steps started, not the order they ended (steps run together under
``asyncio.gather`` end in any order, and a replay must draw what the live run left). With a person watching, each
step displays its header at once, when it starts ("waiting for <model>"), and later updates that display in place.
Headless, nothing is displayed before the end, so a `DisplayOrder` holds back a finished step's bundle until every
step of the cell that started before it has displayed its own.

Drawing is coalesced: the widget is redrawn at most `REDRAWS_PER_SECOND` times a second however many deltas and
tool events arrive; whatever arrived since the last redraw is drawn within one interval, or by the final update.
Each redraw replaces the widget's HTML; its script (step.js) gives every collapsible block (the model's thinking
as it streams, a tool call) the open state and scroll position the person left it with, so a block opened while the
model thinks stays open as its text grows. The final static bundle draws every block collapsed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from .._scope import Decision
from .._secrets import scrub_text, secrets_from_environment
from ..approvals import ApprovalRequest
from ..errors import InputError
from ..events import Event, StepFailed, StepStarted
from ..replay.explain import Miss, explain_miss
from ..replay.records import StepRecord, block_to_json
from ..roles import Role
from ..screens import Screen
from .approval_form import ApprovalPanel
from .form import _Form, close_widgets
from .nbfile import LIVE_VIEW_KEY, METADATA_KEY, PROVENANCE_KEY
from .render import StepTrace, render_html, render_text

REDRAWS_PER_SECOND = 20
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LIVE_METADATA = {LIVE_VIEW_KEY: {"version": 1}}
"""The output metadata of a live display: the extension saves it without its (then dead) widget view."""
HEADLINE_LENGTH = 240
"""The most characters of an error's message a failed step's view shows."""
SAVED_WHILE_RUNNING = "was running when the notebook was saved; run the cell again"
"""What a live display's placeholder says: it is seen only where the widget is not (a saved file, reopened)."""
_HERE = Path(__file__).parent


@cache
def step_widget_class() -> type[Any]:
    """The class of a running step's live widget, made on first use (a headless run never imports anywidget).

    Its ``value`` is the kernel's HTML of the trace; step.js draws it, keeping each block the person opened open
    across redraws.
    """
    import anywidget
    import traitlets

    class StepWidget(anywidget.AnyWidget):
        _esm = (_HERE / "step.js").read_text(encoding="utf-8")
        value = traitlets.Unicode("").tag(sync=True)
        """The live drawing of the trace (`render_html` with ``live=True``)."""

    return StepWidget


class NotebookView:
    """Draws one step in the running cell."""

    def __init__(
        self,
        role: Role[Any],
        *,
        display: Callable[..., Any] | None = None,
        send_record: Callable[[StepRecord], None] | None = None,
        live: bool = True,
        order: DisplayOrder | None = None,
    ) -> None:
        self.trace = StepTrace(role.name, result_descriptions=_descriptions(role))
        self._order = order
        self._ticket: int | None = None
        self._secrets = secrets_from_environment()  # read once per step, not per redraw
        self._display = display or _ipython_display
        self._send_record = send_record
        self._live = live
        self._handle: Any = None
        self._box: Any = None
        self._html: Any = None
        self._questions: Any = None
        self._replaying = False
        self._miss: tuple[str, tuple[str, ...]] | None = None
        self._dirty = False
        self._last_draw = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.redraws = 0
        """How many times the live widget was redrawn (the benchmark counts widget messages with it)."""

    # StepView -----------------------------------------------------------------------------------------------

    def begin(self, *, replaying: bool) -> None:
        """Show the live widget, unless the step replays or nobody watches (then only the final bundle is shown)."""
        self._replaying = replaying
        if replaying or not self._live:
            return
        import ipywidgets as widgets

        self._html = step_widget_class()(value=render_html(self.trace, self._secrets, live=True))
        self._questions = widgets.VBox([])
        self._box = widgets.VBox([self._html, self._questions])
        bundle = {
            WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": self._box.model_id},
            "text/plain": f"agl_notebook step: role {self.trace.role!r} {SAVED_WHILE_RUNNING}.",
            "text/html": f"<div>agl_notebook step <b>{_escape(self.trace.role)}</b> {SAVED_WHILE_RUNNING}.</div>",
        }
        if self._handle is not None:
            self._handle.update(bundle, metadata=LIVE_METADATA, raw=True)
        else:
            self._handle = self._display(bundle, metadata=LIVE_METADATA, raw=True, display_id=True)
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def event(self, event: Event) -> None:
        """Fold the event into the trace and redraw, at most `REDRAWS_PER_SECOND` times a second for text."""
        if isinstance(event, StepFailed):  # the error follows in the cell with its whole message (`fail`)
            event = StepFailed(event.role, event.error, headline(scrub_text(event.message, self._secrets)))
        self.trace.apply(event)
        if isinstance(event, StepStarted):
            self._started()
            return
        if self._box is None:
            return
        self._dirty = True
        if time.monotonic() - self._last_draw >= 1 / REDRAWS_PER_SECOND:
            self._draw()
        elif self._timer is None and self._loop is not None:
            # What stops arriving is still drawn within one interval.
            self._timer = self._loop.call_later(1 / REDRAWS_PER_SECOND, self._draw)

    def show_miss(self, miss: Miss) -> None:
        """Say in the live view, before the model is called, why a step with recordings of its role runs live."""
        text, nearest, differing = explain_miss(
            miss.role, miss.fingerprint, miss.occurrence, miss.records, where=miss.where
        )
        if nearest is None or nearest.role != miss.role:
            return  # never recorded: nothing "no longer matches"
        self._miss = (scrub_text(text, self._secrets), differing)
        if self._box is not None:
            self._dirty = True
            self._draw()

    def finish(self, record: StepRecord | None) -> None:
        """Replace the live widget by the final static bundle (carrying the record), or display it (a replay)."""
        self._final(record)

    def fail(self, error: BaseException) -> None:
        """Show what failed and why, statically; nothing is recorded.

        The view keeps the message's first paragraph: the error itself follows in the cell's output with the whole
        message, so a long one (no credentials, a miss explained) is not printed twice.
        """
        self.trace.end_failed(type(error).__name__, headline(scrub_text(str(error), self._secrets)))
        self._final(None)

    # Questions ----------------------------------------------------------------------------------------------

    async def ask(self, screen: Screen[Any]) -> list[object]:
        """Draw the screen's inputs inside the step's widget and wait for a valid answer, sent once on submit."""
        if self._box is None:
            raise InputError("A question can only be drawn while the step's live view is shown.")
        form = _Form(screen, title=False)  # the step's view already shows the question's text above the form
        self._questions.children = (*self._questions.children, form.box)
        try:
            return await form.answer()
        finally:
            form.close()
            self._questions.children = tuple(c for c in self._questions.children if c is not form.box)

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Draw the approval form inside the step's widget and wait for the person's checked decision."""
        if self._box is None:
            raise InputError("A tool call can only be approved while the step's live view is shown.")
        panel = ApprovalPanel(request)
        self._questions.children = (*self._questions.children, panel.box)
        try:
            return await panel.decision()
        finally:
            panel.close()
            self._questions.children = tuple(c for c in self._questions.children if c is not panel.box)

    # Drawing ------------------------------------------------------------------------------------------------

    def _started(self) -> None:
        """The step started (before its first await, so in start order): take its place in the cell."""
        if self._live:
            # The header at once ("waiting for <model>"), before the recordings are read or a reply arrives.
            bundle = {
                "text/plain": render_text(self.trace, self._secrets),
                "text/html": render_html(self.trace, self._secrets),
            }
            self._handle = self._display(bundle, metadata=LIVE_METADATA, raw=True, display_id=True)
        elif self._order is not None:
            self._ticket = self._order.ticket()

    def _draw(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._html is None or not self._dirty:
            return
        self._dirty = False
        self._last_draw = time.monotonic()
        miss = (
            f'<div class="agl-miss" style="{_MISS}"><b>Runs live:</b> {_escape(self._miss[0])}</div>'
            if self._miss is not None
            else ""
        )
        self._html.value = miss + render_html(self.trace, self._secrets, live=True)
        self.redraws += 1

    def _final(self, record: StepRecord | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if record is not None and record.cost is not None:
            self.trace.take_cost(record.cost, record.usage.tokens)
        if record is not None:  # drawn as the record's version of the view drew it (an older notebook unchanged)
            self.trace.views = record.views
        if record is not None and record.finished and record.transcript and record.views >= 2:
            turns = sum(1 for m in record.transcript if m.role == "assistant")
            self.trace.take_fork_points(record.id, turns)
        if record is not None:
            self.trace.change = record.change
        if record is None and self.trace.state == "finished":
            self.trace.recorded = False  # mode "off": finished, and nothing kept
        bundle = final_bundle(self.trace, self._secrets)
        metadata: dict[str, Any] = {METADATA_KEY: block_to_json([record])} if record is not None else {}
        if self.trace.state == "finished":
            metadata[PROVENANCE_KEY] = self._provenance(record)
        show_final(bundle, metadata, self._handle, self._order, self._ticket, self._display)
        if record is not None and self._send_record is not None:
            self._send_record(record)
        if self._box is not None:
            close_widgets(self._html, self._questions, self._box)
            self._box = self._html = self._questions = None

    def _provenance(self, record: StepRecord | None) -> dict[str, Any]:
        """What the final display's metadata says of how it came to be (`nbfile.PROVENANCE_KEY`)."""
        provenance: dict[str, Any] = {
            "version": 1,
            "source": "replayed" if self._replaying else "live",
            "model_requests": 0 if self._replaying else self.trace.requests,
            "recorded_at": record.recorded_at if record is not None and record.recorded_at else None,
            "record_id": record.id if record is not None else None,
            "backend": self.trace.backend,
        }
        if self._miss is not None and not self._replaying:
            provenance["miss"], provenance["differing"] = self._miss[0], list(self._miss[1])
        return provenance


_MISS = "margin:2px 0 6px 0;padding:4px 8px;border-left:3px solid #b54708"


class DisplayOrder:
    """Displays the final bundles of one cell execution's headless steps in the order the steps started."""

    def __init__(self) -> None:
        self._issued = 0
        self._shown = 0
        self._held: dict[int, Callable[[], object]] = {}

    def ticket(self) -> int:
        """A place in the order, taken when a step starts."""
        self._issued += 1
        return self._issued - 1

    def show(self, ticket: int, draw: Callable[[], object]) -> None:
        """Draw the bundle of ``ticket`` now if every earlier one is drawn, else when they are."""
        self._held[ticket] = draw
        while self._shown in self._held:
            self._held.pop(self._shown)()
            self._shown += 1


def show_final(
    bundle: dict[str, Any],
    metadata: dict[str, Any],
    handle: Any,
    order: DisplayOrder | None,
    ticket: int | None,
    display: Callable[..., Any],
) -> None:
    """Draw a finished view: its live display updated in place, else (headless) displayed in start order."""
    if handle is not None:
        handle.update(bundle, metadata=metadata, raw=True)
    elif order is not None and ticket is not None:
        order.show(ticket, lambda: display(bundle, metadata=metadata, raw=True))
    else:
        display(bundle, metadata=metadata, raw=True)


def final_bundle(trace: StepTrace, secrets: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The static bundle a finished (or failed) step leaves in the notebook."""
    return {"text/plain": render_text(trace, secrets), "text/html": render_html(trace, secrets)}


def _descriptions(role: Role[Any]) -> dict[str, str]:
    report = role.reporting_tool
    if report is None:
        return {}
    properties = report.input_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    found: dict[str, str] = {}
    for name, schema in properties.items():
        if isinstance(schema, dict) and isinstance(schema.get("description"), str):
            found[name] = str(schema["description"])
    return found


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _ipython_display(*args: Any, **kwargs: Any) -> Any:
    from IPython.display import display

    return display(*args, **kwargs)  # type: ignore[no-untyped-call]


async def standalone_ask(screen: Screen[Any]) -> list[object]:
    """Ask outside a step: a form in its own display, replaced by the static question and answer when given."""
    secrets = secrets_from_environment()  # what is drawn and saved is scrubbed; the answer is the person's own
    form = _Form(screen)
    placeholder = scrub_text(
        f"Question: {screen.text}\n(It was unanswered when the notebook was saved; run the cell again.)", secrets
    )
    handle = _ipython_display(
        {
            WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": form.box.model_id},
            "text/plain": placeholder,
        },
        metadata=LIVE_METADATA,
        raw=True,
        display_id=True,
    )
    try:
        values = await form.answer()
    finally:
        form.close()
    answer = screen.answer_json(screen.validate(values))
    text = scrub_text(f"Question: {screen.text}\nAnswer: {answer}", secrets)
    handle.update({"text/plain": text, "text/html": f"<pre>{_escape(text)}</pre>"}, raw=True)
    return values


async def standalone_approval(request: ApprovalRequest) -> Decision:
    """Ask for approval outside a step's view: the form in its own display, replaced by the decision in words."""
    from ..approvals import decision_words

    secrets = secrets_from_environment()  # what is drawn and saved is scrubbed; the call keeps its own arguments
    panel = ApprovalPanel(request)
    placeholder = scrub_text(
        f"Approval of a call to {request.tool}\n(It was undecided when the notebook was saved; run the cell again.)",
        secrets,
    )
    handle = _ipython_display(
        {
            WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": panel.box.model_id},
            "text/plain": placeholder,
        },
        metadata=LIVE_METADATA,
        raw=True,
        display_id=True,
    )
    try:
        decision = await panel.decision()
    finally:
        panel.close()
    words = decision_words(
        decision.decision, by=decision.by, always=decision.always, changed=decision.changed, message=decision.message
    )
    text = scrub_text(f"The call to {request.tool}: {words}", secrets)
    handle.update({"text/plain": text, "text/html": f"<pre>{_escape(text)}</pre>"}, raw=True)
    return decision


def headline(message: str) -> str:
    """The first paragraph of an error's ``message``, cut at a word within `HEADLINE_LENGTH`, saying if more follows."""
    whole = message.strip()
    first = whole.split("\n\n", 1)[0].strip()
    if len(first) > HEADLINE_LENGTH:
        first = first[:HEADLINE_LENGTH].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"
    return first if first == whole else f"{first} (the rest is in the error's message)"
