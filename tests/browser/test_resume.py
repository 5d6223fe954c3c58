"""A step waiting for a person survives Kernel > Restart, in JupyterLab and Notebook 7.

The step waits (for its second approval, or for the second question its handler asks); its partial record reaches
the notebook model's metadata at once, nobody saves; the kernel restarts; Run All runs the step again and it
resumes from the record the extension hands back: the same approval (or the pending question) shows again with no
model request and no handler call for what had finished, then the step goes on live. Model requests and handler
calls are counted in files beside the notebook, outside the kernel, so the counts survive the restart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import QUESTION, UI_ACTION, Jupyter, NotebookPage, records_anywhere
from tests.support.resume_notebook import ROLES

SETUP = 'NOTES_PREFIX = "STEM."\n' + ROLES

STEPS = {
    "approval": 'run = Run(model=MAILS)\nprint(*(await run.step(mailer, "Send")).results, sep=" | ")',
    "question": 'run = Run(model=TRIPS)\nprint(*(await run.step(planner, "Plan")).results, sep=" | ")',
}
STEP_CELL = 1

# The partial records the notebook model holds now (saved or not): what the extension hands a restarted kernel.
_JS_PARTIALS = """() => {
  const block = window.jupyterapp.shell.currentWidget.context.model.getMetadata('agl_notebook');
  return (block?.records ?? []).filter(r => r.partial).map(r => r.partial);
}"""


def lines(nb: NotebookPage, name: str) -> list[str]:
    """The lines of a count file the notebook's kernel wrote (in the server's root, named after the notebook)."""
    path = nb.path.parent / f"{nb.path.stem}.{name}"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def setup(name: str) -> str:
    return SETUP.replace("STEM", Path(name).stem)


def approval(nb: NotebookPage, subject: str) -> Any:
    form = nb.output(STEP_CELL).locator(".agl-approval").filter(has=nb.page.locator("td", has_text=subject))
    nb.wait_visible(form, f"the approval form of the call with {subject!r}", QUESTION)
    form.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    return form


def approve(form: Any) -> None:
    form.get_by_role("button", name=re.compile("^Approve")).click(timeout=UI_ACTION * 1000)


def question(nb: NotebookPage, label: str) -> Any:
    field = nb.form_field(STEP_CELL, label)
    nb.wait_visible(field, f"the question with the field {label!r}", QUESTION)
    return field


def wait_partial(nb: NotebookPage, waiting: str, tool: str) -> list[dict[str, Any]]:
    """Wait until the notebook model holds the step's partial record (the comm brought it; nobody saved)."""
    nb.wait_until(
        lambda: [(p["waiting"], p["tool"]) for p in nb.page.evaluate(_JS_PARTIALS)] == [(waiting, tool)],
        f"the partial record of the step waiting for {waiting} in the notebook model's metadata",
        QUESTION,
    )
    found: list[dict[str, Any]] = nb.page.evaluate(_JS_PARTIALS)
    return found


def unsaved_before_restart(nb: NotebookPage, original: bytes) -> None:
    assert nb.path.read_bytes() == original, "nobody saved: the restarted kernel gets it from the extension"


@pytest.mark.needs_labextension
@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_a_restart_with_an_approval_pending_shows_the_same_approval_again(jupyter: Jupyter, ui: str) -> None:
    name = f"resume_approval_{ui}.ipynb"
    path: Path = jupyter.server.write_notebook(name, [setup(name), STEPS["approval"]])
    original = path.read_bytes()
    nb = jupyter.open(name, ui="lab" if ui == "lab" else "notebook")
    nb.run_all()
    approve(approval(nb, "Minutes"))
    approval(nb, "Budget")
    wait_partial(nb, "approval", "send_mail")
    nb.shot("waiting")
    assert (lines(nb, "requests.txt"), lines(nb, "handler.txt")) == (["1", "3"], ["send_mail Minutes"])
    unsaved_before_restart(nb, original)

    nb.restart_kernel()
    nb.shot("restarted")
    nb.run_all()
    form = approval(nb, "Budget")
    nb.shot("asked-again")
    assert len(lines(nb, "requests.txt")) == 2, "model requests 0 before the approval showed again"
    assert lines(nb, "handler.txt") == ["send_mail Minutes"], "handler calls 0 before the approval showed again"
    assert nb.output(STEP_CELL).locator(".agl-approval").count() == 1, "only the pending approval is shown"
    approve(form)
    nb.wait_cells_done(what="Run All after the pending call was approved")
    nb.shot("finished")
    assert nb.output_text(STEP_CELL).strip().endswith("Sent Minutes. | Sent Budget.")
    assert lines(nb, "handler.txt") == ["send_mail Minutes", "send_mail Budget"], "exactly one handler call"
    assert lines(nb, "requests.txt") == ["1", "3", "5"], "then live: one request, for the report"
    assert nb.page.evaluate(_JS_PARTIALS) == [], "the finished record replaced the partial one"

    saved = nb.save()
    (record,) = [r for r in records_anywhere(saved) if r.get("role") == "mailer"]
    assert "partial" not in record
    assert [(d["tool_call_id"], d["decision"]) for d in record["decisions"]] == [
        ("toolu_00_0", "approve"),
        ("toolu_01_0", "approve"),
    ], json.dumps(record["decisions"])


@pytest.mark.needs_labextension
@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_a_restart_with_a_question_pending_asks_only_the_pending_question(jupyter: Jupyter, ui: str) -> None:
    name = f"resume_question_{ui}.ipynb"
    path: Path = jupyter.server.write_notebook(name, [setup(name), STEPS["question"]])
    original = path.read_bytes()
    nb = jupyter.open(name, ui="lab" if ui == "lab" else "notebook")
    nb.run_all()
    question(nb, "Date").fill("May 3")
    nb.submit_form(STEP_CELL)
    question(nb, "Budget")
    wait_partial(nb, "question", "plan")
    nb.shot("waiting")
    before = lines(nb, "handler.txt")
    assert before == ["lookup Rome", "plan entered Rome"]
    unsaved_before_restart(nb, original)

    nb.restart_kernel()
    nb.run_all()
    budget = question(nb, "Budget")
    nb.shot("asked-again")
    assert nb.form_field(STEP_CELL, "Date").count() == 0, "the earlier question is not asked again"
    assert len(lines(nb, "requests.txt")) == 2, "model requests 0"
    assert lines(nb, "handler.txt") == [*before, "plan entered Rome"], (
        "the finished call's handler ran 0 times; the asking handler was entered once more"
    )
    budget.fill("800 EUR")
    nb.submit_form(STEP_CELL)
    nb.wait_cells_done(what="Run All after the pending question was answered")
    nb.shot("finished")
    assert nb.output_text(STEP_CELL).strip().endswith("Rome: 3 hotels | Rome on May 3 for 800 EUR")
    assert nb.page.evaluate(_JS_PARTIALS) == []
    saved = nb.save()
    (record,) = [r for r in records_anywhere(saved) if r.get("role") == "planner"]
    assert [q["answer"] for q in record["questions"]] == ["May 3", "800 EUR"]
