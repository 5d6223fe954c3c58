"""Images and documents in a step's view in JupyterLab, light and dark (issue 28): the input's image as a thumbnail
(the original bytes as a data URI, decoded by the browser, scaled by CSS), the PDF as a chip, a tool's image over
the view cap as a placeholder with its size and digest; live in the widget while the step waits, then in the final
view. Screenshots go to ``build/browser-artifacts/<test>/`` as ``images_light.png`` and ``images_dark.png`` (copied
into docs/screenshots by hand when they change).
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
from agl_notebook import Document, Image, Role, Run, ToolResult, describe, reporting_tool, tool
from agl_notebook.models.base import TextDelta, ToolCall, TurnEnd
from tests.support.media import pdf, png

@dataclass(frozen=True)
class Inspection:
    photo: Image = describe("The photo of the part.")
    sheet: Document = describe("The inspection sheet.")

@dataclass(frozen=True)
class Query:
    topic: str = describe("What to chart.")

@dataclass(frozen=True)
class Finding:
    text: str = describe("What was found.")

async def chart(query: Query) -> ToolResult:
    return ToolResult("The chart.", images=[Image(png(160, 160, noisy=True))])  # over the 64 KB view cap

class Inspector:
    network = False

    def backend_id(self, model):
        return "inspector:1"

    async def stream(self, request):
        if len(request.messages) == 1:
            yield TextDelta("Let me chart it.")
            yield ToolCall("toolu_1", "chart", {"topic": "wear"})
        else:
            while not Path("release").exists():  # the live view is looked at meanwhile
                await asyncio.sleep(0.05)
            yield ToolCall("toolu_2", "report", {"text": "A crack near the bolt."})
        yield TurnEnd("tool_use")

inspector = Role(name="inspector", instructions="Inspect.",
                 tools=[tool("chart", "Draw a chart.", Query, chart), reporting_tool("report", "Report.", Finding)])"""

STEP = (
    "run = Run(model=Inspector())\n"
    "found = await run.step(inspector, Inspection(Image(png(48, 32, shade=80)), Document(pdf(3), title='Sheet 7')))\n"
    "found.text"
)
CELLS = [SETUP, STEP]
STEP_CELL = 1

_JS_THUMB = """(img) => ({width: img.naturalWidth, height: img.naturalHeight, shown: img.getBoundingClientRect().width,
  src: img.getAttribute('src').slice(0, 22)})"""


def thumb_state(img: Any) -> dict[str, Any]:
    state: dict[str, Any] = img.evaluate(_JS_THUMB)
    return state


def check_view(nb: NotebookPage, scope: str, stage: str) -> None:
    view = nb.output(STEP_CELL).locator(scope)
    thumb = view.locator(".agl-thumb img").first
    nb.wait_visible(thumb, f"the input's thumbnail ({stage})", RUN_CELLS)
    nb.wait_until(lambda: thumb_state(thumb)["width"] == 48, f"the thumbnail decoded ({stage})", UI_ACTION)
    state = thumb_state(thumb)
    assert state["height"] == 32 and state["src"] == "data:image/png;base64,", state  # the original PNG's bytes
    chip = view.locator(".agl-doc").first
    assert "Sheet 7: PDF, 3 pages" in chip.inner_text()
    placeholder = view.locator(".agl-image-placeholder").first
    nb.wait_visible(placeholder, f"the tool image's placeholder ({stage})", RUN_CELLS)
    words = placeholder.inner_text()
    assert "image/png, 160x160 px" in words and "sha256:" in words and "over the 64 KB view cap" in words, words
    assert view.locator(".agl-media img").count() == 1, "the image over the cap is not drawn"


def test_thumbnail_chip_and_placeholder_live_and_final_in_light_and_dark(jupyter: Jupyter) -> None:
    name = "images.ipynb"
    release = jupyter.server.root / "release"
    release.unlink(missing_ok=True)
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name)
    nb.run_all()

    check_view(nb, ".agl-step", "live")  # the widget, while the model waits
    nb.shot("live")
    release.write_text("go", encoding="utf-8")
    nb.wait_cells_done(what="the step to finish once released")
    check_view(nb, ".agl-step.agl-finished", "final")

    try:
        for theme in (LIGHT, DARK):
            nb.set_theme(theme)
            suffix = theme.split()[-1].lower()
            found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-step")
            nb.artifacts.write(f"contrast-{suffix}.json", json.dumps(found, indent=1))
            poor = [f for f in found if f["ratio"] < WCAG_AA]
            assert not poor, f"{suffix}: texts under {WCAG_AA}:1 in the step's view: {poor}"
            nb.command_mode(0)
            nb.cell(STEP_CELL).scroll_into_view_if_needed()
            nb.page.mouse.move(2, 2)
            nb.page.wait_for_timeout(300)
            nb.cell(STEP_CELL).screenshot(path=str(nb.artifacts.folder / f"images_{suffix}.png"))
    finally:
        nb.set_theme(LIGHT)
    release.unlink(missing_ok=True)
