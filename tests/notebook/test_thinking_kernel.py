"""A step that thinks, in real kernels: run live (its thinking streamed into the live widget), saved, then replayed
after a restart with no model call, leaving the same saved outputs (``text/plain`` and ``text/html``).

The model is a backend of one's own defined in the notebook (``thinking = True``): its thinking streams in pieces,
then is kept whole with a signature; a redacted block follows. The notebook file is written as JupyterLab saves it
(each output with its metadata, the step's record in it), and the second kernel finds it by ``JPY_SESSION_NAME``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat as _nbformat

from tests.support.kernel_harness import Kernel

v4: Any = _nbformat.v4

SETUP = """\
import asyncio
from dataclasses import dataclass
from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook.models.base import TextDelta, ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.transcript import RawBlock

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

THOUGHT = "Six sevens: add <six> & seven, six times over, and that makes forty-two. " * 3

class Thinker:
    thinking = True
    network = False
    calls = 0

    def backend_id(self, model):
        return "thinker:1"

    async def stream(self, request):
        Thinker.calls += 1
        for start in range(0, len(THOUGHT), 12):
            await asyncio.sleep(0.03)  # slower than a redraw: the live widget shows the thinking as it grows
            yield ThinkingDelta(THOUGHT[start:start + 12])
        yield RawBlock({"type": "thinking", "thinking": THOUGHT, "signature": "SigOpaque=="})
        yield RawBlock({"type": "redacted_thinking", "data": "EncryptedOpaque=="})
        yield TextDelta("It is 42.")
        yield ToolCall("toolu_1", "report_answer", {"text": "42"})
        yield TurnEnd("tool_use")

thinker = Role(name="thinker", instructions="Think, then answer.",
               tools=[reporting_tool("report_answer", "Report the answer.", Answer)])"""

STEP = 'run = Run(model=Thinker())\nanswer = await run.step(thinker, "What is six times seven?")'
CALLS = "print(Thinker.calls)"


def run_cells(notebook: Path) -> tuple[Kernel, str, list[str]]:
    """A kernel on ``notebook`` that ran its set-up and its step; the step's message id, and its live drawings."""
    k = Kernel(cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    k.run(SETUP, cell_id="setup")
    step = k.execute(STEP, cell_id="step")
    drawn: list[str] = []

    def finished() -> bool:
        drawn.extend(s["value"] for s in k.widgets.values() if "value" in s and s["value"] not in drawn)
        return step in k.replies

    k.wait_for(finished, timeout=60)
    k.pump(0.3)
    assert k.replies[step]["content"]["status"] == "ok", k.stream(step)
    return k, step, drawn


def calls(k: Kernel) -> str:
    msg_id = k.execute(CALLS)
    k.wait_reply(msg_id)
    return k.stream(msg_id).strip()


def test_a_thinking_step_run_live_then_replayed_after_a_restart_leaves_equal_saved_outputs(tmp_path: Path) -> None:
    notebook = tmp_path / "thinking.ipynb"
    _nbformat.write(  # type: ignore[no-untyped-call]
        v4.new_notebook(cells=[v4.new_code_cell(SETUP, id="setup"), v4.new_code_cell(STEP, id="step")]), notebook
    )
    k, step, drawn = run_cells(notebook)
    try:
        live = k.step_display(step)
        assert calls(k) == "1"
    finally:
        k.close()
    # Live: the thinking streamed into a collapsed block of the step's widget, growing, before it was settled.
    streaming = [d for d in drawn if "<summary>Thinking…</summary>" in d]
    assert streaming, "the thinking was drawn while it streamed"
    assert all(re.search(r'<details class="agl-thinking"[^>]* data-agl-keep="item-0"', d) for d in streaming)
    assert not any(re.search(r"<details[^>]* open", d) for d in streaming), "collapsed"

    page, plain = live["data"]["text/html"], live["data"]["text/plain"]
    assert "<summary>Thinking</summary>" in page and "<summary>Thinking (redacted)</summary>" in page
    assert "add &lt;six&gt; &amp; seven" in page and "Six sevens" not in plain
    assert "SigOpaque" not in page and "EncryptedOpaque" not in page and "data-agl-keep" not in page
    assert live["metadata"]["agl_notebook_provenance"]["source"] == "live"

    # Saved as JupyterLab saves it: the step's output with its metadata (the record), then a restart.
    saved = v4.new_output("display_data", data=live["data"], metadata=live["metadata"])
    nb = v4.new_notebook(
        cells=[v4.new_code_cell(SETUP, id="setup"), v4.new_code_cell(STEP, id="step", outputs=[saved])]
    )
    _nbformat.write(nb, notebook)  # type: ignore[no-untyped-call]
    k, step, _ = run_cells(notebook)
    try:
        replayed = k.step_display(step)
        assert calls(k) == "0", "replayed with no model call"
    finally:
        k.close()
    assert replayed["metadata"]["agl_notebook_provenance"]["source"] == "replayed"
    assert replayed["data"] == live["data"], "the same saved outputs, text/plain and text/html"
