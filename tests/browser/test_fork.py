"""Forking from the finished view in JupyterLab (issue 32): each turn's "Fork here" button inserts a new cell below
the step's cell holding the code that forks the step there, and never runs it; run, that code forks the step.
Screenshots in the light and the dark theme.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.harness import ARTIFACTS, Jupyter

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Page:
    n: int = describe("Which page.")

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

PAGES_READ = []

async def read_page(page: Page) -> ToolResult:
    PAGES_READ.append(page.n)
    return ToolResult(f"page {page.n}")

def reading(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < 2:
        return {"text": f"Reading page {turn + 1}.", "calls": [{"name": "read_page", "args": {"n": turn + 1}}]}
    return {"calls": [{"name": "answer", "args": {"text": "Done."}}]}

reader = Role(name="reader", instructions="Read, then answer.", accepts=(str,),
              tools=[tool("read_page", "Read a page.", Page, read_page), reporting_tool("answer", "Answer.", Answer)])
run = Run(model=ScriptedModel(reading))"""

CELLS = [SETUP, 'await run.step(reader, "What does the manual say?")', "PAGES_READ"]
STEP, READ = 1, 2
SCREENSHOTS = ARTIFACTS / "fork-screenshots"


def sources(saved: dict[str, Any]) -> list[str]:
    return ["".join(c["source"]) for c in saved["cells"]]


@pytest.mark.needs_labextension
def test_fork_here_inserts_a_cell_below_with_the_code_and_never_runs_it(jupyter: Jupyter) -> None:
    name = "fork_here.ipynb"
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui="lab")
    nb.run_all()
    nb.wait_cells_done(what="Run All (the step runs live: three turns)")
    saved = nb.save()
    (record,) = [r for r in saved["metadata"]["agl_notebook"]["records"] if r["role"] == "reader"]

    fork = nb.output(STEP).locator("details.agl-fork")
    fork.locator("summary").click()
    buttons = fork.locator("button.agl-fork-button")
    nb.wait_visible(buttons.nth(1), "the 'Fork here' button of turn 2", 30)
    assert buttons.count() == 2, "a button per turn but the last (3 turns)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for theme, shot in (("JupyterLab Light", "fork_here_light.png"), ("JupyterLab Dark", "fork_here_dark.png")):
        nb.set_theme(theme)
        nb.output(STEP).scroll_into_view_if_needed()
        nb.cell(STEP).screenshot(path=str(SCREENSHOTS / shot))
    nb.set_theme("JupyterLab Light")

    prompts_before = nb.prompts()
    buttons.nth(1).click()
    expected = f'await run.step(reader, fork_from="{record["id"]}", at_turn=2)'
    nb.wait_until(lambda: len(nb.prompts()) == len(prompts_before) + 1, "a new cell after the click", 30)
    assert nb.prompts()[STEP + 1] == "[ ]:", "the inserted cell was not run"
    assert nb.cell(STEP + 1).locator(".jp-OutputArea-output").count() == 0
    nb.cell(STEP + 1).scroll_into_view_if_needed()
    nb.cell(STEP + 1).screenshot(path=str(SCREENSHOTS / "fork_here_inserted.png"))
    saved = nb.save()
    assert sources(saved)[STEP + 1] == expected
    assert sources(saved)[: STEP + 1] == CELLS[: STEP + 1] and sources(saved)[STEP + 2] == CELLS[READ]

    # The inserted code, run, forks the step: turns 1-2 replayed (no handler), turn 3 live.
    nb.run_cell(STEP + 1)
    nb.wait_cells_done([STEP + 1], what="the inserted fork")
    text = nb.output_text(STEP + 1)
    assert f"forked from record {record['id']} at turn 2" in text, text
    nb.run_cell(READ + 1)
    nb.wait_cells_done([READ + 1], what="PAGES_READ after the fork")
    assert nb.output_text(READ + 1).strip().splitlines()[-1] == "[1, 2]", "no handler of the replayed turns ran"
    nb.shot("fork-run")

    # Save, restart, Run All: the step and its fork replay, no handler runs, and the fork's view is the same.
    saved = nb.save()
    fork_view = "".join(saved["cells"][STEP + 1]["outputs"][0]["data"]["text/plain"])
    assert len(saved["metadata"]["agl_notebook"]["records"]) == 2
    nb.restart_kernel()
    nb.run_all()
    # (Shift+Enter on the last cell added an empty one below it, which never shows a count.)
    nb.wait_cells_done(range(READ + 2), what="Run All after the restart (replays)")
    assert nb.output_text(READ + 1).strip().splitlines()[-1] == "[]", "nothing ran: both steps replayed"
    nb.wait_badge(STEP + 1, r"^replayed\b", "the replayed badge on the fork's output")
    saved = nb.save()
    assert "".join(saved["cells"][STEP + 1]["outputs"][0]["data"]["text/plain"]) == fork_view
