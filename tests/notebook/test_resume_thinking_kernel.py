"""A step that thinks, waiting for an approval in a real kernel, restarted as JupyterLab restarts it, then resumed:
the partial record keeps every kept block as the model sent it, and the first live request after the resume sends
them all back byte for byte, the waiting turn's thinking included (issue 27, item 5). The model is a backend of the
notebook's own that thinks; each request's kept blocks are written to a file outside the kernel, so they survive the
restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.notebook.frontend import DISCARD_SECONDS
from tests.notebook.test_resume_kernel import approval_form, finish, partials, restart_as_jupyterlab_does
from tests.support.fake_extension import FakeExtension
from tests.support.kernel_harness import Kernel
from tests.support.resume_notebook import ROLES

v4: Any = _nbformat.v4

THINKER = """
import dataclasses, json
from agl_notebook.models.base import ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.transcript import RawBlock, block_to_json

def kept_blocks(turn):
    blocks = [{"type": "thinking", "thinking": f"Turn {turn}: mail next.", "signature": f"EqQBCk/sig{turn}+=="}]
    if turn == 0:
        blocks.append({"type": "redacted_thinking", "data": "RWNyeXB0ZWQ=/0"})
        blocks.append({"type": "future_block", "z": 1, "a": {"nested": [1, None]}})
    return blocks

class Thinker:
    thinking = True
    network = False

    def backend_id(self, model):
        return "thinker:1"

    async def stream(self, request):
        sent = [block_to_json(b) for m in request.messages if m.role == "assistant" for b in m.raw_blocks]
        note("requests.txt", json.dumps(sent))
        turn = sum(1 for m in request.messages if m.role == "assistant")
        for block in kept_blocks(turn):
            if block["type"] == "thinking":
                yield ThinkingDelta(block["thinking"])
            yield RawBlock(block)
        if turn < 2:
            yield ToolCall(f"toolu_0{turn}_0", "send_mail", {"subject": ["Minutes", "Budget"][turn]})
        else:
            results = [m.content[0].content for m in request.messages[2::2]]
            yield ToolCall("toolu_02_0", "report", {"results": results})
        yield TurnEnd("tool_use")

thinking_mailer = dataclasses.replace(mailer, thinking="adaptive")
"""

SETUP = 'NOTES_PREFIX = ""\n' + ROLES + "\n" + THINKER
STEP = 'run = Run(model=Thinker())\nprint(*(await run.step(thinking_mailer, "Send")).results, sep=" | ")'


def kept_blocks(turn: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": f"Turn {turn}: mail next.", "signature": f"EqQBCk/sig{turn}+=="}
    ]
    if turn == 0:
        blocks.append({"type": "redacted_thinking", "data": "RWNyeXB0ZWQ=/0"})
        blocks.append({"type": "future_block", "z": 1, "a": {"nested": [1, None]}})
    return blocks


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "thinking.ipynb"
    nb = v4.new_notebook(cells=[v4.new_code_cell(c, id=f"c{i}") for i, c in enumerate([SETUP, STEP])])
    _nbformat.write(nb, path)  # type: ignore[no-untyped-call]
    return path


@pytest.fixture
def kernel(notebook: Path) -> Iterator[Kernel]:
    k = Kernel(cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        yield k
    finally:
        k.close()


def start(k: Kernel, extension: FakeExtension) -> str:
    setup = k.execute(SETUP, cell_id="c0")
    extension.wait_for(lambda: setup in k.replies)
    assert k.replies[setup]["content"]["status"] == "ok", k.stream(setup)
    return k.execute(STEP, cell_id="c1")


def requests(folder: Path) -> list[list[dict[str, Any]]]:
    path = folder / "requests.txt"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def exact(blocks: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(b) for b in blocks]  # keys in their order: equal only when equal byte for byte


def test_a_thinking_step_resumed_after_a_restart_sends_every_earlier_block_back_byte_for_byte(
    kernel: Kernel, notebook: Path
) -> None:
    folder, extension = notebook.parent, FakeExtension(kernel, notebook.name)
    step = start(kernel, extension)
    kernel.comm_msg(approval_form(kernel, extension, "Minutes"), {"method": "custom", "content": {"kind": "approve"}})
    approval_form(kernel, extension, "Budget")
    extension.wait_for(lambda: partials(extension))
    (partial,) = partials(extension)
    assert partial["format"] == 2, "a record holding kept blocks"
    kept = [
        b
        for m in partial["transcript"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] not in ("text", "tool_use")
    ]
    assert exact(kept) == exact(kept_blocks(0) + kept_blocks(1)), "the waiting turn's thinking is in it"

    restart_as_jupyterlab_does(kernel, step)
    time.sleep(DISCARD_SECONDS + 0.5)
    extension.serve()
    assert partials(extension) == [partial], "the partial record survived the restart"

    step = start(kernel, extension)
    form = approval_form(kernel, extension, "Budget")
    assert len(requests(folder)) == 2, "no model request before the approval showed again"
    kernel.comm_msg(form, {"method": "custom", "content": {"kind": "approve"}})
    assert finish(kernel, extension, step) == "Sent Minutes. | Sent Budget.\n"
    sent = requests(folder)
    assert len(sent) == 3, "then live: one request, for the report"
    assert exact(sent[2]) == exact(kept_blocks(0) + kept_blocks(1)), "every earlier block, byte for byte"
    (record,) = extension.records()
    assert "partial" not in record and record["id"] == partial["id"] and record["format"] == 2
