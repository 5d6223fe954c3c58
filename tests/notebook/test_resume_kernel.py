"""Partial records and resume in real kernels, the frontend extension played by the test (tests/support).

A step waits for a person (an approval, a question); its partial record reaches "the notebook metadata" over the
comm at once; the kernel restarts as JupyterLab restarts it (jupyter_client interrupts it, then asks it to shut down);
the cell runs again and the step resumes from the record the extension hands back. Model requests and handler calls
are counted in files beside the notebook, outside the kernel, so they survive the restart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.notebook.frontend import DISCARD_SECONDS
from tests.support.fake_extension import FakeExtension
from tests.support.kernel_harness import Kernel
from tests.support.resume_notebook import ROLES

v4: Any = _nbformat.v4

SETUP = 'import agl_notebook.notebook.store\nNOTES_PREFIX = ""\n' + ROLES

MAIL_STEP = 'run = Run(model=MAILS)\nprint(*(await run.step(mailer, "Send")).results, sep=" | ")'
TRIP_STEP = 'run = Run(model=TRIPS)\nprint(*(await run.step(planner, "Plan")).results, sep=" | ")'


def lines(folder: Path, name: str) -> list[str]:
    path = folder / name
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "resume.ipynb"
    cells = [SETUP, MAIL_STEP, TRIP_STEP]
    nb = v4.new_notebook(cells=[v4.new_code_cell(c, id=f"c{i}") for i, c in enumerate(cells)])
    _nbformat.write(nb, path)  # type: ignore[no-untyped-call]
    return path


@pytest.fixture
def kernel(notebook: Path) -> Iterator[Kernel]:
    k = Kernel(cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        yield k
    finally:
        k.close()


def restart_as_jupyterlab_does(k: Kernel, step: str) -> None:
    """What JupyterLab's Kernel > Restart asks of jupyter_client: an interrupt, then a shutdown request, then a start.

    The worst case: the interrupt has ended the waiting step (its cell replied) before the shutdown request comes.
    """
    k.km.interrupt_kernel()
    k.wait_for(lambda: step in k.replies)
    k.km.restart_kernel(now=False)
    k.kc.wait_for_ready(timeout=60)
    k.pump(0.2)
    k.widgets.clear()


def start(k: Kernel, extension: FakeExtension, code: str) -> str:
    setup = k.execute(SETUP, cell_id="c0")
    extension.wait_for(lambda: setup in k.replies)
    assert k.replies[setup]["content"]["status"] == "ok", k.stream(setup)
    return k.execute(code, cell_id="c1" if "mailer" in code else "c2")


def approval_form(k: Kernel, extension: FakeExtension, subject: str) -> str:
    def shown() -> list[str]:
        return [c for c in k.widget_ids("AnyModel") if k.widgets[c].get("arguments") == {"subject": subject}]

    extension.wait_for(lambda: shown())
    (form,) = shown()
    return form


def question_form(k: Kernel, extension: FakeExtension, label: str) -> str:
    def shown() -> list[str]:
        return [
            c for c in k.widget_ids("AnyModel") if [f.get("label") for f in k.widgets[c].get("fields", [])] == [label]
        ]

    extension.wait_for(lambda: shown())
    (form,) = shown()
    return form


def partials(extension: FakeExtension) -> list[dict[str, Any]]:
    return [r for r in extension.records() if "partial" in r]


def finish(k: Kernel, extension: FakeExtension, msg_id: str) -> str:
    extension.wait_for(lambda: msg_id in k.replies)
    k.pump(0.3)
    extension.serve()
    reply = k.replies[msg_id]["content"]
    assert reply["status"] == "ok", f"{reply.get('ename')}: {reply.get('evalue')}"
    return k.stream(msg_id)


def test_a_restart_with_an_approval_pending_shows_it_again_with_no_model_request_and_no_handler_call(
    kernel: Kernel, notebook: Path
) -> None:
    folder, extension = notebook.parent, FakeExtension(kernel, notebook.name)
    step = start(kernel, extension, MAIL_STEP)
    kernel.comm_msg(approval_form(kernel, extension, "Minutes"), {"method": "custom", "content": {"kind": "approve"}})
    approval_form(kernel, extension, "Budget")
    extension.wait_for(lambda: partials(extension))
    (partial,) = partials(extension)
    assert partial["partial"] == {"waiting": "approval", "tool_call_id": "toolu_01_0", "tool": "send_mail"}
    assert partial["result"] is None and partial["cell_id"] == "c1"
    assert [d["decision"] for d in partial["decisions"]] == ["approve"]
    assert (lines(folder, "requests.txt"), lines(folder, "handler.txt")) == (["1", "3"], ["send_mail Minutes"])

    restart_as_jupyterlab_does(kernel, step)
    time.sleep(DISCARD_SECONDS + 0.5)  # a discard sent on the restart's interrupt would have arrived by now
    extension.serve()
    # One partial record per wait (the first approval's, then the second's, in its place); no discard.
    assert [m["op"] for m in extension.received] == ["record", "record"], "the restart's interrupt discarded nothing"
    assert partials(extension) == [partial], "the partial record survived the restart"

    step = start(kernel, extension, MAIL_STEP)
    form = approval_form(kernel, extension, "Budget")
    assert len(lines(folder, "requests.txt")) == 2, "model requests 0 before the approval showed again"
    assert lines(folder, "handler.txt") == ["send_mail Minutes"], "handler calls 0 before the approval showed again"
    assert [c for c in kernel.widget_ids("AnyModel") if "decided" in kernel.widgets[c]] == [form], "only that one"
    kernel.comm_msg(form, {"method": "custom", "content": {"kind": "approve"}})
    assert finish(kernel, extension, step) == "Sent Minutes. | Sent Budget.\n"
    assert lines(folder, "handler.txt") == ["send_mail Minutes", "send_mail Budget"], "exactly one handler call"
    assert lines(folder, "requests.txt") == ["1", "3", "5"], "then live: one request, for the report"
    (record,) = extension.records()
    assert "partial" not in record, "the finished record replaced the partial one"
    assert record["id"] == partial["id"]
    assert [d["tool_call_id"] for d in record["decisions"]] == ["toolu_00_0", "toolu_01_0"]


def test_a_restart_with_a_question_pending_enters_the_handler_again_and_asks_only_that_question(
    kernel: Kernel, notebook: Path
) -> None:
    folder, extension = notebook.parent, FakeExtension(kernel, notebook.name)
    step = start(kernel, extension, TRIP_STEP)
    kernel.submit_form(question_form(kernel, extension, "Date"), ["May 3"])
    question_form(kernel, extension, "Budget")
    extension.wait_for(lambda: partials(extension))
    (partial,) = partials(extension)
    assert partial["partial"] == {"waiting": "question", "tool_call_id": "toolu_01_0", "tool": "plan"}
    assert partial["questions"] == [
        {"tool_call_id": "toolu_01_0", "text": "When do you leave?", "inputs": ["Date"], "answer": "May 3"}
    ]
    before = lines(folder, "handler.txt")
    assert before == ["lookup Rome", "plan entered Rome"]

    restart_as_jupyterlab_does(kernel, step)
    step = start(kernel, extension, TRIP_STEP)
    form = question_form(kernel, extension, "Budget")
    assert len(lines(folder, "requests.txt")) == 2, "model requests 0"
    assert lines(folder, "handler.txt") == [*before, "plan entered Rome"], (
        "the finished call's handler ran 0 times; the asking handler was entered once more"
    )
    kernel.submit_form(form, ["800 EUR"])
    assert finish(kernel, extension, step) == "Rome: 3 hotels | Rome on May 3 for 800 EUR\n"
    asked = [m for m in kernel.iopub if m["header"]["msg_type"] == "comm_open" and "fields" in str(m["content"])]
    labels = [f["label"] for m in asked for f in m["content"]["data"]["state"].get("fields", [])]
    assert labels == ["Date", "Budget", "Budget"], "the earlier question was not asked again"
    (record,) = extension.records()
    assert "partial" not in record
    assert [q["answer"] for q in record["questions"]] == ["May 3", "800 EUR"]


@pytest.mark.parametrize("form", ["await", "sync"])
def test_an_interrupt_while_waiting_keeps_nothing(kernel: Kernel, notebook: Path, form: str) -> None:
    folder, extension = notebook.parent, FakeExtension(kernel, notebook.name)
    code = MAIL_STEP if form == "await" else MAIL_STEP.replace("await run.step(", "run.step_sync(")
    step = start(kernel, extension, code)
    approval_form(kernel, extension, "Minutes")
    extension.wait_for(lambda: partials(extension))
    kernel.km.interrupt_kernel()
    extension.wait_for(lambda: step in kernel.replies)
    reply = kernel.replies[step]["content"]
    assert (reply["status"], reply["ename"]) == ("error", "StepInterrupted")
    extension.wait_for(lambda: not partials(extension), timeout=DISCARD_SECONDS + 10)
    assert [m["op"] for m in extension.received] == ["record", "discard"]
    assert extension.records() == [], "nothing is kept in the notebook metadata"

    # The same kernel, and a restarted one (the extension's block is empty): the step starts afresh.
    again = kernel.execute(code, cell_id="c1")
    approval_form(kernel, extension, "Minutes")
    assert lines(folder, "requests.txt") == ["1", "1"], "asked the model again: nothing was resumed"
    assert lines(folder, "handler.txt") == []
    kernel.km.interrupt_kernel()
    extension.wait_for(lambda: again in kernel.replies)


def test_a_headless_run_keeps_no_partial_record(kernel: Kernel, notebook: Path) -> None:
    extension = FakeExtension(kernel, notebook.name)
    kernel.run(SETUP, allow_stdin=False)
    kernel.run(
        "import os\nos.environ['AGL_NOTEBOOK_ANSWERS'] = '[\"May 3\", \"800 EUR\"]'\n" + TRIP_STEP, allow_stdin=False
    )
    extension.serve()
    assert extension.received == [], "no comm message at all: headless runs talk to no extension"
    kernel.run(
        "from agl_notebook.notebook.store import _kernel_session\nassert not any(_kernel_session.partials.values())",
        allow_stdin=False,
    )
    assert "AGL_NOTEBOOK_ANSWERS" not in os.environ


def test_a_notebook_saved_while_a_step_waited_resumes_headless_under_a_policy(kernel: Kernel, notebook: Path) -> None:
    from agl_notebook.cli import main

    folder, extension = notebook.parent, FakeExtension(kernel, notebook.name)
    start(kernel, extension, MAIL_STEP)
    kernel.comm_msg(approval_form(kernel, extension, "Minutes"), {"method": "custom", "content": {"kind": "approve"}})
    approval_form(kernel, extension, "Budget")
    extension.wait_for(lambda: partials(extension))
    kernel.close()  # the laptop closed after the person saved: the file holds the partial record, the kernel is gone
    nb = _nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    nb.metadata["agl_notebook"] = extension.block
    nb.cells = nb.cells[:2]
    _nbformat.write(nb, notebook)  # type: ignore[no-untyped-call]

    assert main(["execute", str(notebook), "--approvals", "approve", "--record"]) == 0
    assert lines(folder, "requests.txt") == ["1", "3", "5"], "resumed: one request, for the report"
    assert lines(folder, "handler.txt") == ["send_mail Minutes", "send_mail Budget"], "the finished call not again"
    saved = _nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    (record,) = saved.metadata["agl_notebook"]["records"]
    assert "partial" not in record, "the finished record replaced the partial one"
    assert [(d["decision"], d.get("by", "person")) for d in record["decisions"]] == [
        ("approve", "person"),
        ("approve", "setting"),
    ]
