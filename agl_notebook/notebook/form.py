"""The question form: a screen drawn as one widget whose frontend sends every field's value in one message at Submit.

Why one widget and one message: while a cell awaits the answer the kernel is busy, and ipykernel handles widget
messages then without publishing the "idle" status that the browser's widget code waits for before it sends a
model's next change; a form of one widget per field lost every edit after the first. A custom message is sent at
once, whatever the kernel's status (ipywidgets' ``WidgetModel.send`` skips the throttle that ``save_changes`` obeys).
The kernel checks the values and answers through synced traits: an error per field, a message about the whole
answer, the number of the submission it checked, and whether it was accepted. The form stays editable until then.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .._secrets import scrub, scrub_text, secrets_from_environment
from ..errors import InputError
from ..screens import ActionInput, ChoiceInput, ConfirmInput, Input, NumberInput, Screen

_TICK = 0.1  # seconds between wake-ups while waiting for an answer
_HERE = Path(__file__).parent


class QuestionForm(anywidget.AnyWidget):
    """The form's widget: its frontend (form.js) draws the fields and sends them all at Submit."""

    _esm = (_HERE / "form.js").read_text(encoding="utf-8")
    _css = (_HERE / "form.css").read_text(encoding="utf-8")
    title = traitlets.Unicode("").tag(sync=True)
    """The question's text, drawn above the fields (empty inside a step, whose view shows it already)."""
    fields: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    """One description per input: kind, label, hint, placeholder, options."""
    errors: traitlets.List[str] = traitlets.List().tag(sync=True)
    """One message per field: what is wrong with it, or empty."""
    message = traitlets.Unicode("").tag(sync=True)
    """What is wrong with the answer as a whole, or empty."""
    checked = traitlets.Int(0).tag(sync=True)
    """The number of the last submission the kernel checked."""
    accepted = traitlets.Bool(False).tag(sync=True)
    """True once a submission was valid; the form then takes no more."""


class _Form:
    """A screen drawn as a `QuestionForm`; an answer is validated in the kernel and sent back until it is valid."""

    def __init__(self, screen: Screen[Any], *, title: bool = True) -> None:
        self.screen = screen
        self._future: asyncio.Future[list[object]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The future exists as soon as the form does: a Submit handled on another thread before `answer` starts
        # waiting is kept, not lost.
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
            self._future = self._loop.create_future()
        # What the frontend draws (and a saved notebook's widget state keeps) is scrubbed of secrets; a choice
        # whose option was scrubbed comes back as the scrubbed text and is read as the option it stands for.
        self._secrets = secrets_from_environment()
        fields: list[Any] = [_field(i) for i in screen.inputs]
        shown: list[Any] = [scrub(f, self._secrets) for f in fields]
        self._options: list[dict[str, str]] = [
            dict(zip(s["options"], i.options, strict=True)) if isinstance(i, ChoiceInput) else {}
            for s, i in zip(shown, screen.inputs, strict=True)
        ]
        self.box = QuestionForm(
            title=scrub_text(screen.text, self._secrets) if title else "",
            fields=shown,
            errors=[""] * len(screen.inputs),
        )
        self.box.on_msg(self._on_message)

    async def answer(self) -> list[object]:
        if self._future is None or self._loop is not asyncio.get_running_loop():
            self._loop = asyncio.get_running_loop()
            self._future = self._loop.create_future()
        future = self._future
        # Wake the loop every tick while waiting: ipykernel 7.4 delivers a kernel interrupt to an awaiting cell
        # through a loop callback that a loop asleep on one future would only run when something else woke it.
        while not future.done():
            await asyncio.wait((future,), timeout=_TICK)
        values: list[object] = future.result()
        return values

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Runs on the kernel's main thread, or a subshell's: hand the answer to the step's loop thread-safely.
        if not isinstance(content, dict) or content.get("kind") != "submit" or self.box.accepted:
            return
        attempt = content.get("attempt")
        values, errors, message = self.check(content.get("values"))
        with self.box.hold_sync():  # one update: the errors and the submission they answer arrive together
            self.box.errors = [scrub_text(e, self._secrets) for e in errors]
            self.box.message = scrub_text(message, self._secrets)
            self.box.checked = attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0
            self.box.accepted = values is not None
        future, loop = self._future, self._loop
        if values is not None and future is not None and loop is not None:
            loop.call_soon_threadsafe(_resolve, future, values)

    def check(self, raw: object) -> tuple[list[object] | None, list[str], str]:
        """Parse what the form sent: (the values, or None if any is wrong; one error per field; a whole error)."""
        count = len(self.screen.inputs)
        if not isinstance(raw, list) or len(raw) != count:
            return None, [""] * count, f"The form sent {raw!r:.80} instead of {count} value(s); please submit again."
        first = self.screen.inputs[0]
        if isinstance(first, ActionInput) and raw[0] in first.dismissing:  # declined or cancelled: no field read
            return [raw[0], *([None] * (count - 1))], [""] * count, ""
        values: list[object] = []
        errors: list[str] = []
        for item, shown, value in zip(self.screen.inputs, self._options, raw, strict=True):
            if isinstance(value, str) and value in shown and value not in getattr(item, "options", ()):
                value = shown[value]  # a scrubbed option, as drawn: the option it stands for
            try:
                values.append(_read(item, value))
                errors.append("")
            except InputError as e:
                errors.append(str(e))
        if any(errors):
            return None, errors, ""
        try:
            self.screen.validate(values)
        except InputError as e:
            return None, errors, str(e)
        return values, errors, ""

    def close(self) -> None:
        close_widgets(self.box)


def close_widgets(*items: Any) -> None:
    """Close widgets with the layout and style models each one made, so no model outlives the step."""
    for item in items:
        for part in (getattr(item, "layout", None), getattr(item, "style", None), item):
            if part is not None:
                part.close()


def _resolve(future: asyncio.Future[list[object]], values: list[object]) -> None:
    if not future.done():
        future.set_result(values)


def _field(item: Input) -> dict[str, Any]:
    """What the frontend needs to draw one input."""
    if isinstance(item, ConfirmInput):
        return {"kind": "confirm", "label": item.label}
    if isinstance(item, ActionInput):  # the form's buttons, in place of Submit
        return {"kind": "actions", "label": item.label, "options": list(item.options)}
    if isinstance(item, ChoiceInput):
        # No preselected option: a default would reach the agent, and the record, as a choice nobody made.
        return {"kind": "choice", "label": item.label, "options": list(item.options), "placeholder": "Choose one\u2026"}
    if isinstance(item, NumberInput):
        # The range stays in view as a hint once the placeholder is typed over.
        bounds = item.range_text()
        return {
            "kind": "number",
            "label": item.label,
            "integer": item.type is int,
            "placeholder": bounds or item.expected(),
            "hint": item.expected() if bounds else "",
        }
    if item.type is not str:
        return {
            "kind": "number",
            "label": item.label,
            "integer": item.type is int,
            "placeholder": item.expected(),
            "hint": "",
        }
    return {"kind": "textarea" if item.multiline else "text", "label": item.label}


def _read(item: Input, value: object) -> object:
    """Turn one field's value as sent by the form into the answer, or raise `InputError` saying what to fix."""
    if isinstance(item, ConfirmInput):
        if not isinstance(value, bool):
            raise InputError(f"{item.label}: choose Yes or No.")
        return value
    if isinstance(item, ChoiceInput):
        if value is None or value == "":
            raise InputError(f"{item.label}: choose one of {', '.join(item.options)}.")
        return item.validate(value)
    if not isinstance(value, str):
        raise InputError(f"{item.label}: expected typed text, got {value!r:.40}.")
    return item.parse(value)
