"""A minimal Jupyter frontend for tests: a real kernel driven through jupyter_client.

It executes code (optionally with a JupyterLab-style ``cellId``), collects every iopub message, keeps the widget
models the kernel opens (so a test can find a question's form), and sends the comm messages a
browser sends when a person types an answer and presses Submit.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
"""The MIME type of a widget's view in a display: what a frontend draws live."""


class Kernel:
    """One real kernel and the messages it sent."""

    def __init__(self, *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.km = KernelManager(kernel_name="python3")
        full_env = {**os.environ, **(env or {})}
        self.km.start_kernel(cwd=str(cwd), env=full_env)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=60)
        except BaseException:  # a kernel that never got ready is not left running
            self.close()
            raise
        self.iopub: list[dict[str, Any]] = []
        self.replies: dict[str, dict[str, Any]] = {}
        self.widgets: dict[str, dict[str, Any]] = {}  # comm id -> latest state

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    # Sending --------------------------------------------------------------------------------------------------

    def execute(self, code: str, *, cell_id: str | None = None, allow_stdin: bool = True) -> str:
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": allow_stdin,
            "stop_on_error": True,
        }
        msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def answer_stdin(self, text: str, timeout: float = 30) -> str:
        """Wait for the kernel's input() prompt on the stdin channel and answer it; returns the prompt."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.01)
            try:
                msg = self.kc.get_stdin_msg(timeout=0.05)
            except queue.Empty:
                continue
            if msg["header"]["msg_type"] == "input_request":
                self.kc.input(text)
                return str(msg["content"]["prompt"])
        raise TimeoutError("the kernel asked for no input")

    def comm_msg(self, comm_id: str, data: dict[str, Any]) -> None:
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def type_into(self, comm_id: str, value: Any) -> None:
        """What the widget frontend sends when a value changes (continuous_update=False: once, on change)."""
        self.comm_msg(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})

    def click(self, comm_id: str) -> None:
        """What the widget frontend sends when a Button is clicked."""
        self.comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}})

    def submit_form(self, comm_id: str, values: list[Any], attempt: int = 1) -> None:
        """What the question form's frontend sends at Submit: every field's value in one custom message."""
        self.comm_msg(
            comm_id, {"method": "custom", "content": {"kind": "submit", "attempt": attempt, "values": values}}
        )

    def answer_question(self, text: str) -> None:
        """Wait for a question's form, type ``text`` into its one field and submit it (as a person would)."""
        self.wait_for(lambda: any("fields" in self.widgets[c] for c in self.widget_ids("AnyModel")))
        (form_id,) = [c for c in self.widget_ids("AnyModel") if "fields" in self.widgets[c]]
        self.submit_form(form_id, [text])

    # Receiving ------------------------------------------------------------------------------------------------

    def pump(self, timeout: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.01)
            except queue.Empty:
                msg = None
            if msg is not None:
                self._note(msg)
            try:
                reply = self.kc.get_shell_msg(timeout=0)
                self.replies[reply["parent_header"].get("msg_id", "")] = reply
            except queue.Empty:
                pass
            if msg is None and time.monotonic() >= deadline:
                return

    def _note(self, msg: dict[str, Any]) -> None:
        self.iopub.append(msg)
        kind = msg["header"]["msg_type"]
        content = msg["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content["comm_id"] in self.widgets:
            data = content["data"]
            if data.get("method") in ("update", "echo_update"):
                self.widgets[content["comm_id"]].update(data.get("state", {}))
        elif kind == "comm_close":
            self.widgets.pop(content["comm_id"], None)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the kernel did not get there in time")
            self.pump()

    def wait_reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        self.wait_for(lambda: msg_id in self.replies, timeout)
        self.pump(0.3)  # the trailing iopub messages
        return self.replies[msg_id]

    def run(self, code: str, timeout: float = 60, **kwargs: Any) -> dict[str, Any]:
        """Execute and wait; returns the reply content, failing the test on an error."""
        msg_id = self.execute(code, **kwargs)
        reply = self.wait_reply(msg_id, timeout)["content"]
        assert reply["status"] == "ok", f"{reply.get('ename')}: {reply.get('evalue')}\n{self.stream(msg_id)}"
        return dict(reply)

    def messages(self, msg_id: str, *kinds: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.iopub
            if m["parent_header"].get("msg_id") == msg_id and (not kinds or m["header"]["msg_type"] in kinds)
        ]

    def stream(self, msg_id: str) -> str:
        return "".join(m["content"]["text"] for m in self.messages(msg_id, "stream"))

    def widget_ids(self, model_name: str) -> list[str]:
        return [cid for cid, state in self.widgets.items() if state.get("_model_name") == model_name]

    def question_forms(self) -> list[str]:
        """The question forms shown now (a step's live view is an anywidget too, without fields)."""
        return [c for c in self.widget_ids("AnyModel") if "fields" in self.widgets[c]]

    def final_outputs(self, msg_id: str) -> list[dict[str, Any]]:
        """The cell's outputs as a notebook would save them: displays with update_display_data applied."""
        outputs: list[dict[str, Any]] = []
        by_display: dict[str, int] = {}
        for m in self.messages(msg_id, "display_data", "update_display_data", "execute_result", "stream", "error"):
            kind, content = m["header"]["msg_type"], m["content"]
            display_id = (content.get("transient") or {}).get("display_id")
            if kind == "update_display_data":
                if display_id in by_display:
                    shown = outputs[by_display[display_id]]
                    outputs[by_display[display_id]] = {
                        "type": shown["type"],
                        "data": content["data"],
                        "metadata": content["metadata"],
                    }
                continue
            if display_id is not None:
                by_display[display_id] = len(outputs)
            outputs.append(
                {"type": kind, **{k: content[k] for k in ("data", "metadata", "text", "ename") if k in content}}
            )
        return outputs

    def step_display(self, msg_id: str) -> dict[str, Any]:
        """The one display of a step in the cell's final outputs (the one with HTML)."""
        displays = [o for o in self.final_outputs(msg_id) if "data" in o and "text/html" in o["data"]]
        assert len(displays) == 1, displays
        return displays[0]


@contextmanager
def started_kernel(cwd: Path, *setup: str) -> Iterator[Kernel]:
    """A kernel working in ``cwd`` that has run each ``setup`` cell (failing the test if one fails); shut down after."""
    kernel = Kernel(cwd=cwd)
    try:
        for code in setup:
            kernel.run(code)
        yield kernel
    finally:
        kernel.close()
