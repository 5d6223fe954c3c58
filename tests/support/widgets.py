"""The notebook view without a kernel: a display that keeps what it shows, and comms that keep what they send."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from agl_notebook import Role
from agl_notebook.notebook.view import NotebookView

Sent = list[tuple[str, Any]]
"""The widget messages sent, in order: (message type, data)."""


class RecordingComm(BaseComm):
    """A comm that keeps what it would have sent."""

    def __init__(self, sent: Sent, *args: Any, **kwargs: Any) -> None:
        self._sent = sent
        super().__init__(*args, **kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        self._sent.append((msg_type, data))


def recording_comms(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """From now on every comm (so every widget) records its messages in the list returned instead of sending them."""
    messages: Sent = []
    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(messages, *a, **k))
    return messages


class FakeDisplay:
    """Stands in for IPython's display: keeps every bundle shown and every update of it."""

    def __init__(self) -> None:
        self.shown: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.updates: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def __call__(
        self, bundle: dict[str, Any], *, raw: bool, metadata: dict[str, Any] | None = None, display_id: bool = False
    ) -> Any:
        assert raw
        self.shown.append((bundle, metadata or {}))
        return self if display_id else None

    def update(self, bundle: dict[str, Any], *, raw: bool, metadata: dict[str, Any] | None = None) -> None:
        self.updates.append((bundle, metadata or {}))


def views_on(displays: list[FakeDisplay], *, live: bool = False) -> Callable[[Role[Any]], NotebookView]:
    """A Run's view factory: each step drawn by a `NotebookView` on a new `FakeDisplay`, appended to ``displays``."""

    def view(role: Role[Any]) -> NotebookView:
        displays.append(FakeDisplay())
        return NotebookView(role, display=displays[-1], live=live)

    return view


def from_browser(widget: Any, content: Any) -> None:
    """What the form's frontend sends: a custom message on the widget's comm, as the kernel receives it."""
    widget.comm.handle_msg(
        {"content": {"comm_id": widget.comm.comm_id, "data": {"method": "custom", "content": content}}, "buffers": []}
    )


def form_state(sent: Sent, widget: Any) -> dict[str, Any]:
    """The form's state as the browser knows it: its opening state with every update since applied."""
    state: dict[str, Any] = {}
    for kind, data in sent:
        if kind == "comm_open" and data["state"].get("_model_name") == "AnyModel":
            state = dict(data["state"])
        elif kind == "comm_msg" and data.get("method") == "update" and state:
            state.update(data["state"])
    return state
