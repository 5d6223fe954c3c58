"""The model's thinking in JupyterLab, light and dark (issue 27): streamed live into a collapsed "Thinking" block that
a person can open while it grows (and that stays open as it grows), then drawn collapsed in the final view, opened by
a click, with a redacted block shown as redacted; every text readable in both themes.

The model is a backend of one's own defined in the notebook (``thinking = True``): it streams its thinking word by
word, then waits for a file named "release" before it keeps the block (with a signature), a redacted block, and
reports. Screenshots of the final view, a thinking block opened, go to ``build/browser-artifacts/<test>/`` as
``thinking_light.png`` and ``thinking_dark.png`` (copied into docs/screenshots by hand when they change).
"""

from __future__ import annotations

import json
from typing import Any

from tests.browser.harness import JS_CONTRAST, RUN_CELLS, UI_ACTION, WCAG_AA, Jupyter, NotebookPage

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

SETUP = """\
import asyncio
from dataclasses import dataclass
from pathlib import Path
from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook.models.base import TextDelta, ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.transcript import RawBlock

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

WORDS = ("The person asks for six times seven. Six sevens are seven added six times: 7, 14, 21, 28, 35, 42. "
         "Check it another way: six times six is 36, plus one more six is 42. Both agree, so the answer is 42.")

class Thinker:
    thinking = True
    network = False

    def backend_id(self, model):
        return "thinker:1"

    async def stream(self, request):
        streamed = []
        for word in WORDS.split(" "):
            await asyncio.sleep(0.25)  # slow enough for a person (and the test) to open the block as it grows
            piece = word + " "
            streamed.append(piece)
            yield ThinkingDelta(piece)
        while not Path("release").exists():
            await asyncio.sleep(0.05)
        yield RawBlock({"type": "thinking", "thinking": "".join(streamed).strip(), "signature": "SigOpaque=="})
        yield RawBlock({"type": "redacted_thinking", "data": "EncryptedOpaque=="})
        yield TextDelta("Six times seven is 42.")
        yield ToolCall("toolu_1", "report_answer", {"text": "42"})
        yield TurnEnd("tool_use")

thinker = Role(name="thinker", instructions="Think, then answer.",
               tools=[reporting_tool("report_answer", "Report the answer.", Answer)])"""

STEP = 'run = Run(model=Thinker())\nanswer = await run.step(thinker, "What is six times seven?")\nanswer.text'
CELLS = [SETUP, STEP]
STEP_CELL = 1
THINKING = ".agl-thinking"

_JS_BLOCK = """(details) => ({open: details.open, text: details.querySelector('div')?.innerText ?? ''})"""


def block_state(block: Any) -> dict[str, Any]:
    state: dict[str, Any] = block.evaluate(_JS_BLOCK)
    return state


def check_contrast(nb: NotebookPage, stage: str) -> None:
    found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-step")
    nb.artifacts.write(f"contrast-{stage}.json", json.dumps(found, indent=1))
    texts = " ".join(f["text"] for f in found)
    assert "Thinking" in texts and "six times seven" in texts, f"{stage}: the thinking was not measured: {found}"
    poor = [f for f in found if f["ratio"] < WCAG_AA]
    assert not poor, f"{stage}: texts under {WCAG_AA}:1 in the step's view: {poor}"


def test_thinking_streams_collapsed_opens_on_a_click_and_reads_in_light_and_dark(jupyter: Jupyter) -> None:
    name = "thinking.ipynb"
    release = jupyter.server.root / "release"
    release.unlink(missing_ok=True)
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name)
    nb.run_all()

    # Live: the thinking streams into a collapsed block of the step's widget.
    live = nb.output(STEP_CELL).locator(THINKING).first
    nb.wait_visible(live, "the live Thinking block", RUN_CELLS)
    nb.wait_until(lambda: "Thinking…" in live.locator("summary").inner_text(), "the streaming summary", UI_ACTION)
    assert block_state(live)["open"] is False, "collapsed while it streams"
    assert not live.locator("div").is_visible()
    nb.output(STEP_CELL).scroll_into_view_if_needed()  # the block itself is replaced at each redraw
    nb.shot("live-collapsed")
    # Opened by a click while it streams: it stays open as more thinking arrives (each arrival redraws the widget).
    live.locator("summary").click(timeout=UI_ACTION * 1000)
    opened = block_state(live)
    assert opened["open"] is True and opened["text"].startswith("The person"), opened
    nb.wait_until(
        lambda: len(block_state(live)["text"]) > len(opened["text"]) + 20, "more thinking drawn after the click", 20
    )
    grown = block_state(live)
    assert grown["open"] is True, "the block the person opened stayed open across redraws"
    assert live.locator("div").is_visible()
    nb.shot("live-opened-and-grown")

    # Final: drawn collapsed; a click opens it; the redacted block says so.
    release.write_text("go", encoding="utf-8")
    nb.wait_cells_done(what="the step to finish once released")
    final = nb.output(STEP_CELL).locator(f".agl-step.agl-finished {THINKING}")
    nb.wait_until(lambda: final.count() == 2, "the two thinking blocks of the final view", UI_ACTION)
    thinking, redacted = final.nth(0), final.nth(1)
    assert thinking.locator("summary").inner_text().strip() == "Thinking"
    assert redacted.locator("summary").inner_text().strip() == "Thinking (redacted)"
    assert block_state(thinking)["open"] is False and block_state(redacted)["open"] is False, "collapsed when saved"
    assert not thinking.locator("div").is_visible() and not redacted.locator("div").is_visible()
    thinking.locator("summary").click(timeout=UI_ACTION * 1000)
    nb.wait_visible(thinking.locator("div"), "the thinking's text after a click", UI_ACTION)
    text = thinking.locator("div").inner_text()
    assert text.startswith("The person asks for six times seven.") and text.endswith("the answer is 42."), text
    redacted.locator("summary").click(timeout=UI_ACTION * 1000)
    nb.wait_visible(redacted.locator("div"), "the redacted block's note", UI_ACTION)
    assert "encrypted" in redacted.locator("div").inner_text()
    page = nb.output(STEP_CELL).inner_html()
    assert "SigOpaque" not in page and "EncryptedOpaque" not in page, "opaque fields are never drawn"

    try:
        for theme in (LIGHT, DARK):
            nb.set_theme(theme)
            suffix = theme.split()[-1].lower()
            check_contrast(nb, suffix)
            nb.command_mode(0)  # the step's cell not selected: no selection bar in the picture
            nb.cell(STEP_CELL).scroll_into_view_if_needed()
            nb.page.mouse.move(2, 2)
            nb.page.wait_for_timeout(300)
            nb.cell(STEP_CELL).screenshot(path=str(nb.artifacts.folder / f"thinking_{suffix}.png"))
    finally:
        nb.set_theme(LIGHT)  # the theme is a user setting shared by every test of this server
    release.unlink(missing_ok=True)
