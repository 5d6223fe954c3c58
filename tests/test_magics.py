"""``%load_ext agl_notebook`` and the ``%agl`` magic, in a real kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agl_notebook.notebook.magics import USAGE
from tests.kernel_harness import Kernel

SETUP = '''
%load_ext agl_notebook
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

MODEL = ScriptedModel([{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}])
oracle = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])
'''
STEP = 'await Run(model=MODEL).step(oracle, "What is six times seven?")\nprint(MODEL.calls)'


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(cwd=tmp_path)
    try:
        k.run(SETUP)
        yield k
    finally:
        k.close()


def output(k: Kernel, code: str) -> str:
    msg_id = k.execute(code)
    reply = k.wait_reply(msg_id)["content"]
    if reply["status"] != "ok" and reply["ename"] != "UsageError":
        return f"{reply['ename']}: {reply['evalue']}"
    return k.stream(msg_id)


def test_mode_is_shown_set_and_dropped(kernel: Kernel) -> None:
    assert output(kernel, "%agl") == "mode auto (the default; a Run's or a step's own mode wins)\n"
    assert output(kernel, "%agl mode replay") == "mode replay (set by %agl mode; a Run's or a step's own mode wins)\n"
    miss = output(kernel, STEP)
    assert miss.startswith("ReplayMissError: No recording of a step of role 'oracle' exists in this kernel session")
    assert output(kernel, "%agl mode default") == "mode auto (the default; a Run's or a step's own mode wins)\n"
    assert output(kernel, "%agl mode sideways").startswith("UsageError: %agl mode: unknown mode 'sideways'")
    assert output(kernel, "%agl") == "mode auto (the default; a Run's or a step's own mode wins)\n", "unchanged"


USAGE_ERRORS = {
    "%agl mode sometimes": "%agl mode: unknown mode 'sometimes'; the modes are auto, replay, refresh, off, and default "
                           "drops the one set here.",
    "%agl mode auto off": "%agl mode takes one mode, not 2: 'auto off'.",
    "%agl frobnicate": "%agl has no command 'frobnicate'.",
    "%agl list everything": "%agl list takes nothing after it, not 'everything'.",
    "%agl explain why": "%agl explain takes nothing after it, not 'why'.",
    "%agl forget": "%agl forget takes one id, role or all.",
    "%agl forget oracle all": "%agl forget takes one id, role or all, not 2: 'oracle all'.",
    '%agl forget "oracle': '%agl forget "oracle: No closing quotation.',
}


def test_every_usage_error_is_one_line_with_no_traceback(kernel: Kernel) -> None:
    for line, problem in USAGE_ERRORS.items():
        msg_id = kernel.execute(line)
        kernel.wait_reply(msg_id)
        shown = [(m["header"]["msg_type"], m["content"].get("name"), m["content"].get("text"))
                 for m in kernel.messages(msg_id, "stream", "error", "display_data", "execute_result")]
        assert shown == [("stream", "stderr", f"UsageError: {problem} {USAGE}\n")], line


def test_list_explain_and_forget(kernel: Kernel) -> None:
    assert output(kernel, "%agl list").startswith("No recordings in this kernel session")
    assert output(kernel, "%agl explain").startswith("Every step so far replayed")
    assert output(kernel, STEP) == "1\n"
    listed = output(kernel, "%agl list")
    assert listed.startswith("1 recording(s) in this kernel session")
    assert "role 'oracle'  scripted:" in listed
    assert output(kernel, "%agl explain") == (
        "- No recording of a step of role 'oracle' exists in this kernel session (the notebook file was not "
        "found).\n")
    assert output(kernel, STEP) == "1\n", "the second run replays: no new model call"
    assert output(kernel, "%agl forget oracle").startswith("Forgot 1 recording(s)")
    assert output(kernel, STEP) == "2\n", "a forgotten recording is not replayed"
    assert output(kernel, STEP) == "2\n", "and the new recording replays"
    assert output(kernel, "%agl forget nobody").startswith("No recording matches 'nobody'")
