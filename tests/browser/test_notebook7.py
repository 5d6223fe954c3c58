"""Smoke test in Notebook 7 (``/notebooks/...`` on the same server): a question answered in the running cell, and
the step replayed without a question after a kernel restart."""

from __future__ import annotations

from tests.browser.harness import Jupyter, records_anywhere
from tests.support.planner_notebook import CALLS_CELL, CELLS, FINAL_TABLE, LIVE_CALLS, STEP_CELL

NAME = "notebook7_smoke.ipynb"


def test_a_question_answered_in_notebook7_is_replayed_after_a_restart(jupyter: Jupyter) -> None:
    jupyter.server.write_notebook(NAME, CELLS)
    nb = jupyter.open(NAME, ui="notebook")
    nb.shot("opened")

    nb.run_all()
    nb.answer("Saturday", cell=STEP_CELL)
    nb.wait_cells_done(what="Run All after the answer was submitted")
    nb.output(STEP_CELL).scroll_into_view_if_needed()
    nb.shot("answered")
    table = nb.output(STEP_CELL).locator(FINAL_TABLE).filter(has_text="Meet on Saturday")
    nb.wait_visible(table, "the final view's table with 'Meet on Saturday'", 30)
    assert nb.output_text(CALLS_CELL).strip() == LIVE_CALLS

    saved = nb.save()  # the restarted kernel reads the recording from the saved file
    nb.shot("saved")
    assert any(q.get("answer") == "Saturday" for r in records_anywhere(saved) for q in r.get("questions", [])), (
        "the saved notebook carries the recording"
    )

    nb.restart_kernel()
    nb.shot("restarted")
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay)")
    nb.output(STEP_CELL).scroll_into_view_if_needed()
    nb.shot("replayed")
    assert nb.prompts() == ["[1]:", "[2]:", "[3]:", "[4]:"], f"a fresh kernel ran every cell: {nb.prompts()}"
    nb.wait_visible(table, "the replayed final view's table with 'Meet on Saturday'", 30)
    assert nb.output_text(CALLS_CELL).strip() == "0", "no model call on replay"

    nb.run_cell(CALLS_CELL)  # Shift+Enter on one cell
    nb.wait_cells_done([CALLS_CELL], what="the last cell run alone")
    assert nb.prompts()[CALLS_CELL] == "[5]:" and nb.output_text(CALLS_CELL).strip() == "0"
    nb.shot("cell-rerun")
