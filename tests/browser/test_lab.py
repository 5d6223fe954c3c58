"""The acceptance test in JupyterLab: a question answered in the running cell, recorded in the notebook metadata,
replayed after a kernel restart, left static when reopened, and passing ``pytest --nbval``.

The parts that need the agl_notebook labextension (the record moved from the output metadata into the notebook
metadata) are checked without stopping the walk-through; the test fails at the end, listing them, while the
extension is missing. Every other part fails at once.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.harness import Jupyter, NotebookPage, records_anywhere, run_nbval, saved_output_records
from tests.support.planner_notebook import CALLS_CELL, CELLS, FINAL_TABLE, LIVE_CALLS, STEP_CELL

NAME = "lab_acceptance.ipynb"


class ExtensionChecks:
    """Assertions that hold only with the labextension: collected, then reported together at the end."""

    def __init__(self, console: list[str]) -> None:
        self.failed: list[str] = []
        self.extensions: list[str] = []
        self.console = console

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.failed.append(message)

    def report(self) -> None:
        if self.failed:
            loaded = [e for e in self.extensions if "agl" in e.lower()]
            state = (
                f"loaded as {loaded}" if loaded else f"NOT loaded; the page's prebuilt extensions: {self.extensions}"
            )
            listed = "\n".join(f"- {m}" for m in self.failed)
            errors = "\n".join(line for line in self.console if ": error:" in line or "pageerror" in line)
            pytest.fail(
                f"What the agl_notebook labextension must do failed (extension {state}):\n{listed}"
                + (f"\nErrors in the browser console:\n{errors}" if errors else ""),
                pytrace=False,
            )


def check_saved(nb: dict[str, object], stage: str, ext: ExtensionChecks) -> None:
    records = records_anywhere(nb)
    assert len({r.get("id") for r in records}) == 1, f"{stage}: one recorded step in the saved file: {records}"
    answers = [q.get("answer") for r in records for q in r.get("questions", [])]
    assert "Saturday" in answers, f"{stage}: the record keeps the typed answer: {answers}"
    metadata = nb.get("metadata") or {}
    block = metadata.get("agl_notebook") if isinstance(metadata, dict) else None
    in_metadata = block.get("records", []) if isinstance(block, dict) else []
    answered = any(q.get("answer") == "Saturday" for r in in_metadata for q in r.get("questions", []))
    ext.expect(
        len(in_metadata) == 1 and answered,
        f"{stage}: the record is in the notebook metadata under 'agl_notebook' (found: {block!r:.200})",
    )
    where = saved_output_records(nb)
    ext.expect(not where, f"{stage}: no output metadata carries the record (found in (cell, output): {where})")


def check_final_view(nb: NotebookPage, stage: str) -> None:
    table = nb.output(STEP_CELL).locator(FINAL_TABLE)
    nb.wait_visible(
        table.filter(has_text="Meet on Saturday"), f"{stage}: the final view's table with 'Meet on Saturday'", 30
    )
    assert nb.output(STEP_CELL).locator(".jupyter-widgets, .widget-text").count() == 0, (
        f"{stage}: no widget is left in the step's output"
    )


@pytest.mark.needs_labextension
def test_a_question_answered_in_lab_is_recorded_replayed_and_reopened_static(jupyter: Jupyter) -> None:
    ext = ExtensionChecks(jupyter.console)
    path = jupyter.server.write_notebook(NAME, CELLS)

    nb = jupyter.open(NAME)
    ext.extensions = nb.extensions()
    nb.shot("opened")

    # Live: Run All, answer the question typed into the widget, see the reported plan drawn.
    nb.run_all()
    nb.answer("Saturday", cell=STEP_CELL)
    nb.wait_cells_done(what="Run All after the answer was submitted")
    nb.output(STEP_CELL).scroll_into_view_if_needed()
    nb.shot("answered")
    check_final_view(nb, "live")
    out = nb.output_text(STEP_CELL)
    assert "Which day suits you?" in out and "Answer: Saturday" in out, out  # the answer as text, not JSON
    assert "Plan(steps=['Meet on Saturday'])" in out, out
    assert nb.output_text(CALLS_CELL).strip() == LIVE_CALLS, nb.output_text(CALLS_CELL)

    saved = nb.save()
    nb.shot("saved")
    check_saved(saved, "first save", ext)
    with_outputs = saved["cells"][STEP_CELL]["outputs"]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in with_outputs), (
        "the saved step output refers to no widget"
    )

    # Replay: restart the kernel, Run All: no question, no model call.
    nb.restart_kernel()
    nb.shot("restarted")
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay)")
    nb.shot("replayed")
    assert nb.prompts() == ["[1]:", "[2]:", "[3]:", "[4]:"], f"a fresh kernel ran every cell: {nb.prompts()}"
    check_final_view(nb, "replay")
    assert nb.output_text(CALLS_CELL).strip() == "0", f"no model call on replay: {nb.output_text(CALLS_CELL)!r}"
    saved = nb.save()
    nb.shot("saved-after-replay")
    check_saved(saved, "save after the replay", ext)
    printed = saved["cells"][CALLS_CELL]["outputs"][0]["text"]
    assert "".join(printed) == "0\n", f"the saved notebook keeps the replay's count: {printed!r}"

    # Reopen with no kernel state: the static final view, no widget error.
    nb.close_and_shut_down()
    nb.shot("closed")
    reopened = jupyter.open(NAME)  # a fresh browser context and a new kernel
    reopened.output(STEP_CELL).scroll_into_view_if_needed()
    reopened.shot("reopened")
    check_final_view(reopened, "reopened")
    assert reopened.error_texts() == [], f"widget errors shown after reopening: {reopened.error_texts()}"

    # The saved notebook passes nbval offline (replayed, model calls blocked).
    result = run_nbval(path)
    jupyter.artifacts.write("nbval.txt", result.stdout + result.stderr)
    assert result.returncode == 0, f"pytest --nbval failed:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    assert "4 passed" in result.stdout, result.stdout[-2000:]

    ext.report()


@pytest.mark.needs_labextension
def test_unsaved_recordings_reach_a_restarted_kernel_through_the_extension(jupyter: Jupyter) -> None:
    # The extension -> kernel reply path: the step is answered and recorded, the notebook is NOT saved,
    # the kernel restarts; the file on disk holds no recording, so a replay can only come from the extension.
    name = "unsaved_handover.ipynb"
    path = jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name)
    nb.run_all()
    nb.answer("Sunday", cell=STEP_CELL)
    nb.wait_cells_done(what="Run All after the answer was submitted")
    nb.shot("answered-not-saved")
    assert records_anywhere(json.loads(path.read_text(encoding="utf-8"))) == [], "nothing was saved yet"

    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart, before any save (a replay)")
    nb.shot("replayed-from-unsaved")
    assert "Meet on Sunday" in nb.output_text(STEP_CELL)
    assert nb.output_text(CALLS_CELL).strip() == "0", "no model call: replayed from the unsaved recording"
