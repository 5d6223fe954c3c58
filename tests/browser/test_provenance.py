"""Provenance in JupyterLab and Notebook 7: whether a step ran live or was replayed, shown where nbval does not look.

A step's final static view is the same live or replayed (nbval compares it). Its output metadata says which it was,
and the extension draws that as a badge on the output. A step that runs live in mode auto because its recording no
longer matches says so in its live view, with what differs, before the model is called.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import nbformat as _nbformat
import pytest

from tests.browser.harness import (
    ARTIFACTS,
    UI,
    Jupyter,
    JupyterServer,
    NotebookPage,
    jupyter_for,
    records_anywhere,
    serving,
)

nbformat: Any = _nbformat  # partly typed: its notebook builders, read and write are not annotated

SETUP = """\
import asyncio
from dataclasses import dataclass
from pathlib import Path
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool, role

INSTRUCTIONS = "Summarise the text."
HOLD = False  # when set, the model waits for a file named "release" before it answers

@dataclass(frozen=True)
class Summary:
    text: str = describe("The summary.")

@role(accepts=(str,))
def summariser() -> Role[Summary]:
    return Role(name="summariser", instructions=INSTRUCTIONS,
                tools=[reporting_tool("report_summary", "Report the summary.", Summary)])

async def script(request):
    while HOLD and not Path("release").exists():
        await asyncio.sleep(0.05)
    return {"calls": [{"name": "report_summary", "args": {"text": "Short."}}]}

MODEL = ScriptedModel(script)"""

CELLS = [
    SETUP,
    "run = Run(model=MODEL)",
    'summary = await run.step(summariser, "A long text.")\nsummary',
    "print(MODEL.calls)",
    'INSTRUCTIONS = "Summarise the text in five words."\nHOLD = True',
]
STEP, CALLS = 2, 3
MISS_LINE = ".agl-miss"
"""The live view's line saying why the step runs live."""
SCREENSHOTS = ARTIFACTS / "provenance-screenshots"
"""Where the badge's screenshots go (copied into docs/screenshots by hand when they change)."""


def step_provenance(nb: dict[str, Any]) -> dict[str, Any]:
    (output,) = nb["cells"][STEP]["outputs"][:1]
    provenance = (output.get("metadata") or {}).get("agl_notebook_provenance")
    assert isinstance(provenance, dict), f"the step output's metadata: {output.get('metadata')}"
    return provenance


def recorded_dates(nb: dict[str, Any]) -> set[str]:
    return {str(r.get("recorded_at", ""))[:10] for r in records_anywhere(nb)}


def shoot_badge(nb: NotebookPage, theme: str, name: str) -> None:
    nb.set_theme(theme)
    nb.output(STEP).scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    nb.cell(STEP).screenshot(path=str(SCREENSHOTS / name))


@pytest.mark.needs_labextension
@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_the_badge_tells_live_from_replayed_and_a_miss_says_what_differs(jupyter: Jupyter, ui: UI) -> None:
    name = f"provenance_{ui}.ipynb"
    release = jupyter.server.root / "release"
    release.unlink(missing_ok=True)
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui=ui)

    # Live: the badge says so, and how many model requests the step made now.
    nb.run_all()
    nb.wait_cells_done(what="Run All (the step runs live)")
    badge = nb.wait_badge(STEP, r"^live\b", "the live badge on the step's output")
    assert "1 model request" in badge, badge
    assert nb.output_text(CALLS).strip() == "1"
    saved = nb.save()
    assert step_provenance(saved)["source"] == "live"
    final_text = "".join(saved["cells"][STEP]["outputs"][0]["data"]["text/plain"])

    # Replayed after a restart: the badge names the record's date and says no model was called.
    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay)")
    assert nb.output_text(CALLS).strip() == "0", "no model call on replay"
    (date,) = recorded_dates(saved)
    badge = nb.wait_badge(STEP, r"^replayed\b", "the replayed badge on the step's output")
    assert f"recorded on {date}" in badge and "no model call" in badge, badge
    saved = nb.save()
    assert step_provenance(saved)["source"] == "replayed"
    assert "".join(saved["cells"][STEP]["outputs"][0]["data"]["text/plain"]) == final_text, (
        "the saved static view is the same live or replayed"
    )
    if ui == "lab":
        shoot_badge(nb, "JupyterLab Light", "provenance_light.png")
        shoot_badge(nb, "JupyterLab Dark", "provenance_dark.png")
        nb.set_theme("JupyterLab Light")

    # Run All's last cell changed the instructions and holds the model: the miss is explained before the call.
    nb.run_cell(STEP)
    line = nb.output(STEP).locator(MISS_LINE)
    nb.wait_visible(line, "the live view's line saying why the step runs live", 30)
    text = line.inner_text()
    assert "differs in: instructions" in text and "summariser" in text, text
    assert nb.prompts()[STEP] == "[*]:", "the model has not answered yet"
    nb.shot("miss-explained-before-the-call")
    release.write_text("go", encoding="utf-8")
    nb.wait_cells_done([STEP], what="the step to finish once the model answers")
    badge = nb.wait_badge(STEP, r"^live\b", "the live badge after the miss")
    assert "1 model request" in badge and "did not match" in badge, badge
    nb.output(STEP).scroll_into_view_if_needed()
    nb.shot("live-after-the-miss")
    assert nb.output(STEP).locator(MISS_LINE).count() == 0, "the final view does not keep the live line"
    title = nb.badge(STEP).get_attribute("title") or ""
    assert "differs in: instructions" in title, title
    saved = nb.save()
    provenance = step_provenance(saved)
    assert provenance["source"] == "live" and provenance["differing"] == ["instructions"], provenance
    assert "differs in" not in "".join(saved["cells"][STEP]["outputs"][0]["data"]["text/plain"])

    # After a restart the new recording replays (the model would wait forever: no release file now).
    release.unlink()
    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the second restart")
    nb.run_cell(STEP)  # now with the changed instructions
    nb.wait_cells_done([STEP], what="the step with the changed instructions to replay")
    badge = nb.wait_badge(STEP, r"^replayed\b", "the replayed badge for the new recording")
    assert "no model call" in badge and re.search(r"recorded on \d{4}-\d{2}-\d{2}", badge), badge
    nb.run_cell(CALLS)
    nb.wait_cells_done([CALLS], what="the count of model calls")
    assert nb.output_text(CALLS).strip() == "0", "the new recording replayed with no model call"
    nb.shot("replayed-new-recording")

    # Opened again from the saved file: the badge is drawn from the output's metadata.
    nb.save()
    reloaded = jupyter.open(name, ui=ui)
    reloaded.wait_badge(
        STEP,
        r"^replayed · recorded on \d{4}-\d{2}-\d{2} · no model call$",
        "the badge drawn again when the saved notebook is opened",
        timeout=30,
    )


TRACKER = "@jupyterlab/notebook-extension/tracker.jupyterlab-settings"


@pytest.fixture(scope="module")
def server_with_lazy_cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """A server whose notebooks render cells lazily, as JupyterLab does by default (the other tests turn it off)."""
    server = JupyterServer(
        tmp_path_factory.mktemp("jupyter-lazy"),
        ARTIFACTS / "jupyter-server-lazy.log",
        settings={TRACKER: {"windowingMode": "contentVisibility"}},
    )
    yield from serving(server)


@pytest.fixture
def jupyter_with_lazy_cells(
    request: pytest.FixtureRequest, browser: Any, server_with_lazy_cells: JupyterServer
) -> Iterator[Jupyter]:
    yield from jupyter_for(request, browser, server_with_lazy_cells)


@pytest.mark.needs_labextension
def test_badges_are_drawn_on_opening_a_saved_notebook_whose_cells_render_lazily(
    jupyter_with_lazy_cells: Jupyter,
) -> None:
    jupyter = jupyter_with_lazy_cells
    name = "lazy_badges.ipynb"
    provenance = {
        "version": 1,
        "source": "replayed",
        "model_requests": 0,
        "recorded_at": "2026-11-30T10:00:00+00:00",
        "record_id": "r",
        "backend": "scripted:x",
    }
    cells = []
    for i in range(40):  # more than a screen: most cells render after the notebook is shown
        output = nbformat.v4.new_output(
            "display_data", data={"text/plain": f"step {i}"}, metadata={"agl_notebook_provenance": provenance}
        )
        cells.append(nbformat.v4.new_code_cell(f"# cell {i}", outputs=[output], execution_count=i + 1))
    nb = nbformat.v4.new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3 (ipykernel)"}},
    )
    nbformat.write(nb, jupyter.server.root / name)
    page = jupyter.open(name)
    page.wait_badge(0, r"^replayed · recorded on 2026-11-30 · no model call$", "the first cell's badge", timeout=30)
    last = page.cell(39)
    last.scroll_into_view_if_needed()
    page.wait_badge(39, r"^replayed · recorded on 2026-11-30 · no model call$", "the last cell's badge", timeout=30)
    page.shot("last-cell")
