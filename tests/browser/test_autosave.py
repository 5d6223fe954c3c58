"""A save while a question waits (what JupyterLab's autosave does), in JupyterLab and Notebook 7.

The step's live display holds the widget view plus a static placeholder. A saved file must not refer to the widget:
reopened without its kernel, JupyterLab would show "Error displaying widget: model not found" instead of the
placeholder. The extension saves the placeholder alone, without touching the live widget on the page: the typed,
not yet submitted answer stays in its field, and the question can still be answered.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.browser.harness import UI, Jupyter
from tests.support.kernel_harness import WIDGET_MIME
from tests.support.planner_notebook import CELLS, FINAL_TABLE, STEP_CELL

PLACEHOLDER = "was running when the notebook was saved; run the cell again"


def widget_outputs(nb: dict[str, Any]) -> list[tuple[int, int]]:
    """(cell, output) of every saved output that refers to a widget."""
    return [
        (i, j)
        for i, cell in enumerate(nb.get("cells", []))
        for j, output in enumerate(cell.get("outputs", []))
        if WIDGET_MIME in (output.get("data") or {})
    ]


def plain_text(output: dict[str, Any]) -> str:
    text = (output.get("data") or {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else str(text)


@pytest.mark.needs_labextension
@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_a_save_while_a_question_waits_keeps_the_placeholder_not_the_widget(jupyter: Jupyter, ui: UI) -> None:
    name = f"autosave_{ui}.ipynb"
    path = jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui=ui)
    nb.run_all()
    nb.type_answer("Sat", cell=STEP_CELL)  # typed, not submitted: a re-drawn widget would lose it
    nb.shot("question-waiting")

    saved = nb.autosave()
    nb.shot("saved-while-waiting")
    assert widget_outputs(saved) == [], f"saved outputs refer to a widget: {widget_outputs(saved)}"
    (step_output,) = saved["cells"][STEP_CELL]["outputs"]
    assert PLACEHOLDER in plain_text(step_output), f"the saved placeholder: {plain_text(step_output)!r}"
    assert PLACEHOLDER in "".join(step_output["data"].get("text/html", "")), step_output["data"]
    assert nb.question_field_value(STEP_CELL) == "Sat", "the live widget was left alone by the save"

    copy = f"autosave_{ui}_reopened.ipynb"
    shutil.copyfile(path, jupyter.server.root / copy)  # the file as saved while the question waited

    # The question is still answered in the page, and the finished step saves as its static view.
    nb.output(STEP_CELL).locator(".agl-form input[type=text]").press_sequentially("urday", delay=25)  # still focused
    nb.output(STEP_CELL).get_by_role("button", name="Submit").click()
    nb.wait_cells_done(what="Run All after the answer was submitted")
    nb.wait_visible(
        nb.output(STEP_CELL).locator(FINAL_TABLE).filter(has_text="Meet on Saturday"),
        "the final view's table with 'Meet on Saturday'",
        30,
    )
    saved = nb.save()
    assert widget_outputs(saved) == []
    assert PLACEHOLDER not in plain_text(saved["cells"][STEP_CELL]["outputs"][0])
    assert "Meet on Saturday" in plain_text(saved["cells"][STEP_CELL]["outputs"][0])

    # The file saved while the question waited, reopened in a fresh page and kernel: the placeholder, no widget error.
    reopened = jupyter.open(copy, ui=ui)
    reopened.output(STEP_CELL).scroll_into_view_if_needed()
    reopened.shot("reopened")
    reopened.wait_visible(
        reopened.output(STEP_CELL).get_by_text(PLACEHOLDER, exact=False), "the placeholder in the reopened notebook", 30
    )
    assert reopened.error_texts() == [], f"widget errors shown after reopening: {reopened.error_texts()}"
