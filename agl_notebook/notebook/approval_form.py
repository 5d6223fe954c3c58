"""The approval form: a tool call waiting for approval, drawn as one widget (Approve, Edit, Deny, Always approve).

Built like the question form (`agl_notebook.notebook.form`, whose docstring says why): nothing is synced while the
person edits; each action is one custom message (``approve``, ``always``, ``deny`` with its message, ``edit`` with
the whole edited arguments object), and the kernel answers through synced traits. An edit is checked with the tool's
own payload validation, so the person reads the messages the agent would get, each placed next to the field its
path names (`edit_fields` describes the fields from the payload's JSON Schema, ``describe()`` texts included); the
form stays open until an edit passes.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .._scope import Decision
from .._secrets import scrub, scrub_text, secrets_from_environment
from ..approvals import ApprovalRequest, Approve, Deny, Edit, decide, decision_words
from ..errors import InputError
from ..payloads import JsonValue
from .form import close_widgets

_TICK = 0.1  # seconds between wake-ups while waiting, so an interrupt lands at once (see form.py)
_HERE = Path(__file__).parent


class ApprovalForm(anywidget.AnyWidget):
    """The form's widget: its frontend (approval.js) draws the call and the actions, and sends one message each."""

    _esm = (_HERE / "approval.js").read_text(encoding="utf-8")
    _css = (_HERE / "form.css").read_text(encoding="utf-8") + (_HERE / "approval.css").read_text(encoding="utf-8")
    tool = traitlets.Unicode("").tag(sync=True)
    """The tool's name."""
    arguments: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The validated arguments, as JSON: what is shown, and what an edit starts from."""
    fields: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The edit form's fields (`edit_fields`)."""
    errors: traitlets.List[dict[str, str]] = traitlets.List().tag(sync=True)
    """The problems of the last edit checked: ``{"path", "text"}``, ``text`` as the agent would read it."""
    message = traitlets.Unicode("").tag(sync=True)
    """What is wrong with the last message as a whole, or empty."""
    checked = traitlets.Int(0).tag(sync=True)
    """The number of the last edit the kernel checked."""
    decided = traitlets.Unicode("").tag(sync=True)
    """The decision in words once made; the form then takes no more."""


class ApprovalPanel:
    """A tool call waiting for approval, drawn as an `ApprovalForm`; resolves with the person's checked decision."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        self._future: asyncio.Future[Decision] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):  # a message handled before `decision` starts waiting is kept
            self._loop = asyncio.get_running_loop()
            self._future = self._loop.create_future()
        # What the frontend draws (and a saved notebook's widget state keeps) is scrubbed of secrets. An edit starts
        # from the scrubbed arguments; a part the person left as drawn is read as the original (`_unscrubbed`).
        self._secrets = secrets_from_environment()
        self._shown = scrub(dict(request.arguments), self._secrets)
        assert isinstance(self._shown, dict)
        fields = scrub(edit_fields(request.spec.schema, request.arguments), self._secrets)
        assert isinstance(fields, dict)
        self.box = ApprovalForm(
            tool=scrub_text(request.tool, self._secrets),
            arguments=self._shown,
            fields=fields,
        )
        self.box.on_msg(self._on_message)

    async def decision(self) -> Decision:
        """Wait for the decision (waking every tick, as the question form does)."""
        if self._future is None or self._loop is not asyncio.get_running_loop():
            self._loop = asyncio.get_running_loop()
            self._future = self._loop.create_future()
        future = self._future
        while not future.done():
            await asyncio.wait((future,), timeout=_TICK)
        return future.result()

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Runs on the kernel's main thread, or a subshell's: the decision goes to the step's loop thread-safely.
        if not isinstance(content, dict) or self.box.decided:
            return
        decision, errors, message = self.check(content)
        attempt = content.get("attempt")
        with self.box.hold_sync():
            self.box.errors = [{k: scrub_text(v, self._secrets) for k, v in e.items()} for e in errors]
            self.box.message = scrub_text(message, self._secrets)
            if content.get("kind") == "edit":
                self.box.checked = attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0
            if decision is not None:
                self.box.decided = scrub_text(
                    decision_words(decision.decision, by=decision.by, always=decision.always, changed=decision.changed),
                    self._secrets,
                )
        future, loop = self._future, self._loop
        if decision is not None and future is not None and loop is not None:
            loop.call_soon_threadsafe(_resolve, future, decision)

    def check(self, content: dict[str, Any]) -> tuple[Decision | None, list[dict[str, str]], str]:
        """The decision one message asks for: (the decision, or None; problems by path; a problem with the whole)."""
        kind = content.get("kind")
        try:
            if kind == "approve":
                return decide(self.request, Approve()), [], ""
            if kind == "always":
                return decide(self.request, Approve(always=True)), [], ""
            if kind == "deny":
                text = content.get("message")
                return decide(self.request, Deny(text if isinstance(text, str) else "")), [], ""
            if kind == "edit":
                arguments = _unscrubbed(content.get("arguments"), self._shown, dict(self.request.arguments))
                _, problems = self.request.check(arguments)
                if problems:
                    return None, [_placed(p) for p in problems], ""
                assert isinstance(arguments, dict)  # check() said so
                return decide(self.request, Edit(arguments)), [], ""
        except InputError as e:
            return None, [], str(e)
        return None, [], f"The form sent {kind!r:.40}, which is no action; please try again."

    def close(self) -> None:
        """Close the widget (and its layout and style models)."""
        close_widgets(self.box)


def _unscrubbed(edited: Any, shown: JsonValue, original: JsonValue) -> Any:
    """The edited arguments, with each part the person left as it was drawn (scrubbed) read as the original.

    So an edit of one field does not send ``[REDACTED]`` for another field that held a secret. A key the scrubber
    changed is matched by its place among the drawn keys.
    """
    if edited == shown:
        return original
    if isinstance(edited, dict) and isinstance(shown, dict) and isinstance(original, dict):
        keys = dict(zip(shown, original, strict=True))
        return {
            keys.get(k, k): _unscrubbed(v, shown[k], original[keys[k]]) if k in keys else v for k, v in edited.items()
        }
    if isinstance(edited, list) and isinstance(shown, list) and isinstance(original, list):
        return [
            _unscrubbed(v, shown[i], original[i]) if i < len(shown) and i < len(original) else v
            for i, v in enumerate(edited)
        ]
    return edited


def _resolve(future: asyncio.Future[Decision], decision: Decision) -> None:
    if not future.done():
        future.set_result(decision)


def _placed(problem: str) -> dict[str, str]:
    """A validation problem with the path it names (``days: expected ...`` names ``days``; ``arguments`` the whole)."""
    path, sep, _ = problem.partition(": ")
    return {"path": path if sep else "", "text": problem}


def edit_fields(schema: JsonValue, value: JsonValue = None, *, depth: int = 0) -> dict[str, Any]:
    """The edit form's description of a JSON Schema (a payload's, or a client tool's ``parameters``).

    Each node has a ``kind``: ``text``, ``integer``, ``number``, ``boolean``, ``object`` (its ``fields``, each with
    a ``name``), ``list`` (its ``item``), ``optional`` (its ``inner``, or None) or ``json`` (a JSON text area: what a
    form does not fit, such as a fixed tuple, or an object whose value has keys its schema does not list); and the
    field's ``description`` (its ``describe()`` text), if any.
    """
    if not isinstance(schema, dict):
        return {"kind": "json", "description": ""}
    node = _node(schema, value, depth)
    description = schema.get("description")
    node["description"] = description if isinstance(description, str) else ""
    return node


_SCALARS = {"string": "text", "integer": "integer", "number": "number", "boolean": "boolean"}
_DEEPEST = 6  # nesting drawn as fields; deeper is a JSON text area


def _node(schema: dict[str, JsonValue], value: JsonValue, depth: int) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _SCALARS:
        return {"kind": _SCALARS[kind]}
    options = schema.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        inner = next(o for o in options if o != {"type": "null"})
        return {"kind": "optional", "inner": edit_fields(inner, value, depth=depth)}
    if depth >= _DEEPEST:
        return {"kind": "json"}
    properties = schema.get("properties")
    if kind == "object" and isinstance(properties, dict) and properties:
        if isinstance(value, dict) and any(k not in properties for k in value):
            return {"kind": "json"}  # keys the schema does not list: only the JSON shows them all
        current = value if isinstance(value, dict) else {}
        return {
            "kind": "object",
            "fields": [
                {"name": name, **edit_fields(sub, current.get(name), depth=depth + 1)}
                for name, sub in properties.items()
            ],
        }
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and "prefixItems" not in schema:
        first = value[0] if isinstance(value, list) and value else None
        return {"kind": "list", "item": edit_fields(items, first, depth=depth + 1)}
    return {"kind": "json"}
