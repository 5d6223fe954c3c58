"""The notebook view of a step: one display with a display id, live widgets while it runs, static at the end.

Why this shape (FINDINGS, "How a finished step must be left in the cell"): JupyterLab never falls back to text/html
when a widget's model is gone, so an output that still refers to a widget shows "model not found" after reopening;
and nbval compares the first display of a re-execution with the saved output. So a live step displays one bundle
(the widget view plus a placeholder text/plain and text/html) with a display id, updates it in place when the step
ends to the final static bundle only (its record in the output metadata: path 2), and closes its widgets. A replay
displays that final bundle directly, which is what the live run left in the saved notebook. So does a live step in
a headless run (nbclient, nbval), where nobody watches: its first display is then the final one, as nbval needs.

Drawing is coalesced: the widget is redrawn at most `REDRAWS_PER_SECOND` times a second however many deltas and
tool events arrive; whatever arrived since the last redraw is drawn within one interval, or by the final update.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..errors import InputError
from ..events import Event, StepStarted
from ..replay.explain import Miss, explain_miss
from ..replay.records import StepRecord, block_to_json
from ..replay.scrub import scrub_text, secrets_from_environment
from ..roles import Role
from ..screens import ChoiceInput, ConfirmInput, Input, NumberInput, Screen, TextInput
from .nbfile import LIVE_VIEW_KEY, METADATA_KEY, PROVENANCE_KEY
from .render import StepTrace, render_html, render_text

REDRAWS_PER_SECOND = 20
_TICK = 0.1  # seconds between wake-ups while waiting for an answer
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LIVE_METADATA = {LIVE_VIEW_KEY: {"version": 1}}
"""The output metadata of a live display: the extension saves it without its (then dead) widget view."""
SAVED_WHILE_RUNNING = "was running when the notebook was saved; run the cell again"
"""What a live display's placeholder says: it is seen only where the widget is not (a saved file, reopened)."""


class NotebookView:
    """Draws one step in the running cell."""

    def __init__(self, role: Role[Any], *, display: Callable[..., Any] | None = None,
                 send_record: Callable[[StepRecord], None] | None = None, live: bool = True) -> None:
        self.trace = StepTrace(role.name, result_descriptions=_descriptions(role))
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

        self._html = widgets.HTML(value="")
        self._questions = widgets.VBox([])
        self._box = widgets.VBox([self._html, self._questions])
        bundle = {
            WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": self._box.model_id},
            "text/plain": f"agl_notebook step: role {self.trace.role!r} {SAVED_WHILE_RUNNING}.",
            "text/html": f"<div>agl_notebook step <b>{_escape(self.trace.role)}</b> {SAVED_WHILE_RUNNING}.</div>",
        }
        self._handle = self._display(bundle, metadata=LIVE_METADATA, raw=True, display_id=True)
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def event(self, event: Event) -> None:
        """Fold the event into the trace and redraw, at most `REDRAWS_PER_SECOND` times a second for text."""
        self.trace.apply(event)
        if self._box is None or isinstance(event, StepStarted):
            return
        self._dirty = True
        if time.monotonic() - self._last_draw >= 1 / REDRAWS_PER_SECOND:
            self._draw()
        elif self._timer is None and self._loop is not None:
            # What stops arriving is still drawn within one interval.
            self._timer = self._loop.call_later(1 / REDRAWS_PER_SECOND, self._draw)

    def show_miss(self, miss: Miss) -> None:
        """Say in the live view, before the model is called, why a step with recordings of its role runs live."""
        text, nearest, differing = explain_miss(miss.role, miss.fingerprint, miss.occurrence, miss.records,
                                                where=miss.where)
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
        """Show what failed and why, statically; nothing is recorded."""
        if self.trace.state != "failed":
            self.trace.state, self.trace.error = "failed", (type(error).__name__, str(error))
        if isinstance(error, KeyboardInterrupt | asyncio.CancelledError) and not str(error):
            # An interrupt (or a cancelled task) carries no message: say what happened to the step.
            self.trace.error = (type(error).__name__, "the step was interrupted; nothing was recorded")
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

    # Drawing ------------------------------------------------------------------------------------------------

    def _draw(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._html is None or not self._dirty:
            return
        self._dirty = False
        self._last_draw = time.monotonic()
        miss = (f'<div class="agl-miss" style="{_MISS}"><b>Runs live:</b> {_escape(self._miss[0])}</div>'
                if self._miss is not None else "")
        self._html.value = miss + render_html(self.trace, self._secrets)
        self.redraws += 1

    def _final(self, record: StepRecord | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        bundle = final_bundle(self.trace, self._secrets)
        metadata: dict[str, Any] = {METADATA_KEY: block_to_json([record])} if record is not None else {}
        if self.trace.state == "finished":
            metadata[PROVENANCE_KEY] = self._provenance(record)
        if self._handle is not None:
            self._handle.update(bundle, metadata=metadata, raw=True)
        else:
            self._display(bundle, metadata=metadata, raw=True)
        if record is not None and self._send_record is not None:
            self._send_record(record)
        if self._box is not None:
            close_widgets(self._html, self._questions, self._box)
            self._box = self._html = self._questions = None

    def _provenance(self, record: StepRecord | None) -> dict[str, Any]:
        """What the final display's metadata says of how it came to be (`nbfile.PROVENANCE_KEY`)."""
        provenance: dict[str, Any] = {
            "version": 1, "source": "replayed" if self._replaying else "live",
            "model_requests": 0 if self._replaying else self.trace.requests,
            "recorded_at": record.recorded_at if record is not None and record.recorded_at else None,
            "record_id": record.id if record is not None else None, "backend": self.trace.backend}
        if self._miss is not None and not self._replaying:
            provenance["miss"], provenance["differing"] = self._miss[0], list(self._miss[1])
        return provenance


_MISS = "margin:2px 0 6px 0;padding:4px 8px;border-left:3px solid #b54708"


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


class _Form:
    """A screen drawn as input widgets with a submit button; the answer is validated in place."""

    def __init__(self, screen: Screen[Any], *, title: bool = True) -> None:
        import ipywidgets as widgets

        self.screen = screen
        self._future: asyncio.Future[list[object]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fields = [_field(i) for i in screen.inputs]
        self.error = widgets.HTML(value="")
        self.submit = widgets.Button(description="Submit", button_style="primary")
        self.submit.on_click(self._on_submit)
        self.title = widgets.HTML(value=f"<b>{_escape(screen.text)}</b>" if title else "")
        self.box = widgets.VBox([self.title, *self.fields, self.error, self.submit])

    async def answer(self) -> list[object]:
        self._loop = asyncio.get_running_loop()
        self._future = future = self._loop.create_future()
        # Wake the loop every tick while waiting: ipykernel 7.4 delivers a kernel interrupt to an awaiting cell
        # through a loop callback that a loop asleep on one future would only run when something else woke it.
        while not future.done():
            await asyncio.wait((future,), timeout=_TICK)
        values: list[object] = future.result()
        return values

    def _on_submit(self, _button: Any) -> None:
        # Runs on the kernel's main thread, or a subshell's: hand the answer to the step's loop thread-safely.
        try:
            values = [_read(item, f) for item, f in zip(self.screen.inputs, self.fields, strict=True)]
            self.screen.validate(values)
        except InputError as e:
            self.error.value = f'<span style="color:#b42318">{_escape(str(e))}</span>'
            return
        self.error.value = ""
        future, loop = self._future, self._loop
        if future is not None and loop is not None:
            loop.call_soon_threadsafe(_resolve, future, values)

    def close(self) -> None:
        close_widgets(self.title, *self.fields, self.error, self.submit, self.box)


def close_widgets(*items: Any) -> None:
    """Close widgets with the layout and style models each one made, so no model outlives the step."""
    for item in items:
        for part in (getattr(item, "layout", None), getattr(item, "style", None), item):
            if part is not None:
                part.close()


def _resolve(future: asyncio.Future[list[object]], values: list[object]) -> None:
    if not future.done():
        future.set_result(values)


def _field(item: Input) -> Any:
    import ipywidgets as widgets

    # Values travel once, on submit: continuous text updates stall while a cell awaits (FINDINGS).
    if isinstance(item, ConfirmInput):
        return widgets.ToggleButtons(options=("Yes", "No"), value=None, description=item.label)
    if isinstance(item, ChoiceInput):
        return widgets.Dropdown(options=item.options, value=None, description=item.label)
    if isinstance(item, TextInput) and item.multiline:
        return widgets.Textarea(description=item.label, continuous_update=False)
    placeholder = "a number" if isinstance(item, NumberInput) or item.type is not str else ""
    return widgets.Text(description=item.label, continuous_update=False, placeholder=placeholder)


def _read(item: Input, field: Any) -> object:
    value = field.value
    if isinstance(item, ConfirmInput):
        if value is None:
            raise InputError(f"{item.label}: choose Yes or No.")
        return value == "Yes"
    if isinstance(item, ChoiceInput):
        if value is None:
            raise InputError(f"{item.label}: choose one of {', '.join(item.options)}.")
        return item.validate(value)
    return item.parse(str(value))


async def standalone_ask(screen: Screen[Any]) -> list[object]:
    """Ask outside a step: a form in its own display, replaced by the static question and answer when given."""
    form = _Form(screen)
    placeholder = f"Question: {screen.text}\n(It was unanswered when the notebook was saved; run the cell again.)"
    handle = _ipython_display({WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": form.box.model_id},
                               "text/plain": placeholder}, metadata=LIVE_METADATA, raw=True, display_id=True)
    try:
        values = await form.answer()
    finally:
        form.close()
    answer = screen.answer_json(screen.validate(values))
    text = f"Question: {screen.text}\nAnswer: {answer}"
    handle.update({"text/plain": text, "text/html": f"<pre>{_escape(text)}</pre>"}, raw=True)
    return values
