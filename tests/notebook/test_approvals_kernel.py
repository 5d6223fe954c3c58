"""Approvals in real kernels: headless runs (nbclient through ``agl-notebook execute``) with and without
AGL_NOTEBOOK_APPROVALS, a recorded run replayed under nbval with no prompt and no handler, and the approval form
driven through the widget messages a browser sends.

The handler writes ``sent.txt`` beside the notebook: whether it ran is read from outside the kernel.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.cli import main
from tests.support.kernel_harness import Kernel
from tests.support.nbval import nbval

v4: Any = _nbformat.v4

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Mail:
    to: str = describe("Who receives it.")
    subject: str = describe("The subject line.")
    copies: int = describe("How many copies, 1 to 3.", default=1)

    def __post_init__(self):
        if not 1 <= self.copies <= 3:
            raise ValueError("copies: must be from 1 to 3.")

@dataclass(frozen=True)
class Sent:
    report: str = describe("What happened.")

async def send_mail(mail: Mail) -> ToolResult:
    with open("sent.txt", "a", encoding="utf-8") as f:
        f.write(f"{mail.to} x{mail.copies}: {mail.subject}\\n")
    return ToolResult(f"Sent to {mail.to}.")

def script(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "send_mail", "args": {"to": "ada@example.com", "subject": "Minutes"}}]}
    return {"calls": [{"name": "report", "args": {"report": request.messages[-1].content[0].content}}]}

mailer = Role(name="mailer", instructions="Send the minutes.",
              tools=[tool("send_mail", "Send an email.", Mail, send_mail, approval="ask"),
                     reporting_tool("report", "Report what happened.", Sent)])"""

STEP = '(await run.step(mailer, "Send the minutes")).report'
ARGUMENTS = {"to": "ada@example.com", "subject": "Minutes", "copies": 1}


def notebook(folder: Path) -> Path:
    path = folder / "mailer.ipynb"
    cells = [SETUP, "run = Run(model=ScriptedModel(script))", STEP]
    _nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), path)  # type: ignore[no-untyped-call]
    return path


def saved(path: Path) -> Any:
    """The notebook as saved, its multi-line texts joined."""
    return _nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def report(path: Path) -> str:
    (result,) = [o for o in saved(path).cells[2].outputs if o["output_type"] == "execute_result"]
    return str(result["data"]["text/plain"])


def saved_records(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    found = list(data["metadata"].get("agl_notebook", {}).get("records", []))
    for cell in data["cells"]:
        for output in cell.get("outputs", []):
            found += output.get("metadata", {}).get("agl_notebook", {}).get("records", [])
    return found


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGL_NOTEBOOK_"):
            monkeypatch.delenv(name)


def test_a_headless_run_without_a_policy_fails_before_the_handler_naming_the_tool_and_the_setting(
    tmp_path: Path, clean: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = notebook(tmp_path)
    before = path.read_bytes()
    assert main(["execute", str(path)]) == 1
    err = capsys.readouterr().err
    assert "NoDecisionError" in err
    assert "Nobody can approve the call to tool 'send_mail' here: `agl-notebook execute` runs this notebook" in err
    assert "pass --approvals VALUE (it sets AGL_NOTEBOOK_APPROVALS for the kernel)" in err
    assert "approve, deny or a JSON file of decisions" in err
    assert not (tmp_path / "sent.txt").exists(), "the handler did not run"
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("approvals", "sent", "said"),
    [
        ("approve", "ada@example.com x1: Minutes\n", "'Sent to ada@example.com.'"),
        ("deny", None, "'This call was denied.'"),
    ],
)
def test_a_headless_run_approves_or_denies_every_call_as_set(
    tmp_path: Path, clean: None, approvals: str, sent: str | None, said: str
) -> None:
    path = notebook(tmp_path)
    assert main(["execute", str(path), "--approvals", approvals]) == 0
    assert "AGL_NOTEBOOK_APPROVALS" not in os.environ, "set for the kernel only"
    written = tmp_path / "sent.txt"
    assert (written.read_text() if written.exists() else None) == sent
    assert report(path) == said
    (record,) = saved_records(path)
    decision = "approve" if approvals == "approve" else "deny"
    assert record["decisions"] == [
        {"tool_call_id": "toolu_00_0", "tool": "send_mail", "decision": decision, "always": False, "by": "setting"}
    ]


def test_a_decisions_file_edits_the_call_and_the_recording_replays_under_nbval_with_no_prompt(
    tmp_path: Path, clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path)
    decisions = tmp_path / "decisions.json"
    edited = {"to": "grace@example.com", "subject": "Minutes", "copies": 2}
    decisions.write_text(
        json.dumps([{"tool": "send_mail", "arguments": ARGUMENTS, "decision": "edit", "edited": edited}])
    )
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", str(decisions))  # the variable itself, as papermill would pass it
    assert main(["execute", str(path), "--record"]) == 0
    assert (tmp_path / "sent.txt").read_text() == "grace@example.com x2: Minutes\n"
    assert report(path).endswith("\\n\\nSent to grace@example.com.'"), "the agent read the note, then the result"
    html = "".join(o["data"]["text/html"] for o in saved(path).cells[2].outputs if "text/html" in o.get("data", {}))
    assert "edited by AGL_NOTEBOOK_APPROVALS: changed to, copies" in html
    (record,) = saved_records(path)
    assert record["decisions"][0]["arguments"] == edited
    tool_result = record["transcript"][2]["content"][0]["content"]
    assert tool_result.startswith("Your arguments were edited before the call ran (changed: to, copies)")

    (tmp_path / "sent.txt").unlink()
    result = nbval(path)  # no AGL_NOTEBOOK_ variable: nobody could decide, and nobody is asked
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert not (tmp_path / "sent.txt").exists(), "no handler ran on replay"


# Driven as a browser would: the approval form's messages -------------------------------------------------------


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(cwd=tmp_path)
    try:
        k.run(SETUP)
        yield k
    finally:
        k.close()


def approval_form(k: Kernel) -> str:
    k.wait_for(lambda: any("decided" in k.widgets[c] for c in k.widget_ids("AnyModel")))
    (form_id,) = [c for c in k.widget_ids("AnyModel") if "decided" in k.widgets[c]]
    return form_id


def test_an_edit_is_checked_in_the_kernel_and_the_corrected_one_runs(kernel: Kernel, tmp_path: Path) -> None:
    msg_id = kernel.execute(f"run = Run(model=ScriptedModel(script))\n{STEP}", cell_id="cell-1")
    form = approval_form(kernel)
    assert kernel.widgets[form]["arguments"] == ARGUMENTS
    bad = {"to": "grace@example.com", "subject": "Minutes", "copies": 7}
    kernel.comm_msg(form, {"method": "custom", "content": {"kind": "edit", "attempt": 1, "arguments": bad}})
    kernel.wait_for(lambda: kernel.widgets[form].get("checked") == 1)
    assert kernel.widgets[form]["errors"] == [{"path": "arguments", "text": "arguments: copies: must be from 1 to 3."}]
    assert not (tmp_path / "sent.txt").exists()
    good = {**bad, "copies": 2}
    kernel.comm_msg(form, {"method": "custom", "content": {"kind": "edit", "attempt": 2, "arguments": good}})
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    assert (tmp_path / "sent.txt").read_text() == "grace@example.com x2: Minutes\n"
    outputs = kernel.final_outputs(msg_id)
    (result,) = [o for o in outputs if o.get("type") == "execute_result"]
    assert result["data"]["text/plain"] == (
        "'The person edited your arguments before the call ran (changed: to, copies); it ran with "
        '{"to": "grace@example.com", "subject": "Minutes", "copies": 2}.\\n\\nSent to grace@example.com.\''
    )
    (step,) = [o for o in outputs if "agl_notebook" in o.get("metadata", {})]
    assert "edited by a person: changed to, copies" in step["data"]["text/plain"]
    record = step["metadata"]["agl_notebook"]["records"][0]
    assert record["decisions"] == [
        {"tool_call_id": "toolu_00_0", "tool": "send_mail", "decision": "edit", "always": False, "arguments": good}
    ]
    assert kernel.widgets == {}, "every widget of the step was closed"


def test_step_sync_is_approved_from_a_synchronous_cell(kernel: Kernel, tmp_path: Path) -> None:
    msg_id = kernel.execute('run = Run(model=ScriptedModel(script))\nprint(run.step_sync(mailer, "Send it").report)')
    kernel.comm_msg(approval_form(kernel), {"method": "custom", "content": {"kind": "always"}})
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    assert kernel.stream(msg_id) == "Sent to ada@example.com.\n"
    assert (tmp_path / "sent.txt").read_text() == "ada@example.com x1: Minutes\n"
    check = kernel.execute("print(sorted(run.always_approved))")
    kernel.wait_reply(check)
    assert kernel.stream(check) == "['send_mail']\n"


@pytest.mark.parametrize("form", ["await", "sync"])
def test_an_interrupt_while_waiting_for_approval_ends_the_step_cleanly(
    kernel: Kernel, tmp_path: Path, form: str
) -> None:
    call = STEP if form == "await" else 'run.step_sync(mailer, "Send the minutes")'
    msg_id = kernel.execute(f"run = Run(model=ScriptedModel(script))\n{call}")
    approval_form(kernel)
    kernel.km.interrupt_kernel()
    reply = kernel.wait_reply(msg_id)["content"]
    assert (reply["status"], reply["ename"]) == ("error", "StepInterrupted")
    (final,) = [o for o in kernel.final_outputs(msg_id) if "text/plain" in o.get("data", {})]
    assert "tool send_mail: not run" in final["data"]["text/plain"]
    assert final["metadata"] == {}, "nothing is recorded"
    assert kernel.widgets == {}, "no live widget is left behind"
    assert not (tmp_path / "sent.txt").exists()
