"""An agl_notebook error in a real kernel shows the person's frames only, and its message once.

IPython hides frames marked ``__tracebackhide__`` but always shows the last one, which for the library's own errors
is where the library raised (`run/_engine.py`, `terminals.py`, `roles.py`, ...). The error families render their own
traceback (`agl_notebook._families`); these tests raise every kind a notebook meets, each from the library's depths,
and read what the cell shows.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import agl_notebook
from agl_notebook._families import InputError, UpstreamUnexpected
from tests.support.kernel_harness import Kernel, started_kernel

SETUP = """\
import os
from dataclasses import dataclass
from agl_notebook import Claude, Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, role, tool
from agl_notebook.screens import Screen, TextInput
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("ANTHROPIC_AUTH_TOKEN", None)

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

oracle = Role(name="oracle", instructions="Answer.", model=Claude.OPUS,
              tools=[reporting_tool("answer", "Give the answer.", Answer)])
unpriced = Role(name="unpriced", instructions="Answer.", model="claude-mythos-preview",
                tools=[reporting_tool("answer", "Give the answer.", Answer)])

async def ask(args: Answer) -> ToolResult:
    return ToolResult(text=str(await run.terminal.show(lambda: Screen("Which day?", [TextInput("Day", str)]))))

asker = Role(name="asker", instructions="Ask.", tools=[tool("ask", "Ask the person.", Answer, ask)])
ASKING = [{"calls": [{"name": "ask", "args": {"text": "day"}}]}]
"""

# Each a cell whose step fails with a library error raised deep in the library, and the error's name.
FAILING = {
    "no credentials": ("run = Run()\nSTEP(oracle, 'go')", "MissingCredentialsError"),
    "a replay miss": (
        "run = Run(model=ScriptedModel([{'text': 'x'}]), mode='replay')\nSTEP(oracle, 'go')",
        "ReplayMissError",
    ),
    "no answer": ("run = Run(model=ScriptedModel(ASKING), answers=[])\nSTEP(asker, 'go')", "NoAnswerError"),
    "a script run out": ("run = Run(model=ScriptedModel([]))\nSTEP(oracle, 'go')", "ScriptExhaustedError"),
    "no report": (
        "run = Run(model=ScriptedModel([{'text': 'no'}] * 3))\nSTEP(oracle, 'go')",
        "RoleIncompleteError",
    ),
    "model calls blocked": (
        "os.environ['AGL_NOTEBOOK_BLOCK_MODELS'] = '1'\ntry:\n    run = Run()\n    STEP(oracle, 'go')\n"
        "finally:\n    del os.environ['AGL_NOTEBOOK_BLOCK_MODELS']",
        "ModelCallBlockedError",
    ),
    "a budget with no price": (
        "os.environ['ANTHROPIC_API_KEY'] = 'planted-' + 'not-a-key'\ntry:\n    run = Run(budget_usd=1)\n"
        "    STEP(unpriced, 'go')\nfinally:\n    del os.environ['ANTHROPIC_API_KEY']",
        "PriceUnknownError",
    ),
    "a budget too small": (
        "os.environ['ANTHROPIC_API_KEY'] = 'planted-' + 'not-a-key'\ntry:\n    run = Run(budget_usd=0)\n"
        "    STEP(oracle, 'go')\nfinally:\n    del os.environ['ANTHROPIC_API_KEY']",
        "BudgetExceededError",
    ),
    "a bad role": ("Role(name='', instructions='Answer.')", "InputError"),
    "a bad input": ("run = Run(model=ScriptedModel([]))\nSTEP(oracle, object())", "InputError"),
}
FORMS = ("await", "sync")
LIBRARY_FILE = re.compile(r"agl_notebook/[\w/]+\.py")
"""A file of the library, as a traceback's frame or source line names it (a message may name docs/cost.md)."""
FRAME = re.compile(r"^(Cell In\[\d+\], line \d+.*|File .+:\d+, in .+)$")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with started_kernel(tmp_path_factory.mktemp("error-tracebacks"), SETUP) as k:
        yield k


def shown(k: Kernel, msg_id: str) -> list[str]:
    (error,) = k.messages(msg_id, "error")
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error["content"]["traceback"])).splitlines()


def cell(code: str, form: str) -> str:
    """The cell, its step awaited or run through `Run.step_sync` (the form for a synchronous cell)."""
    return code.replace("STEP(", "await run.step(" if form == "await" else "run.step_sync(")


# A case raised before any step is the same in both forms: it runs once.
CASES = [(case, form) for case, (code, _) in FAILING.items() for form in FORMS if form == "await" or "STEP(" in code]


@pytest.mark.parametrize(("case", "form"), CASES)
def test_a_library_error_shows_only_the_cells_frames(kernel: Kernel, case: str, form: str) -> None:
    code, name = FAILING[case]
    msg_id = kernel.execute(cell(code, form))
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["ename"] == name, reply
    lines = shown(kernel, msg_id)
    frames = [line for line in lines if FRAME.match(line)]
    assert frames and all(f.startswith("Cell In[") for f in frames), f"frames outside the cell: {frames}"
    assert not [line for line in lines if LIBRARY_FILE.search(line)], lines
    assert not [line for line in lines if "skipping hidden" in line], lines
    assert any(line.startswith(f"{name}: ") for line in lines)


@pytest.mark.parametrize("form", FORMS)
def test_a_first_run_with_no_key_prints_its_long_message_once(kernel: Kernel, form: str) -> None:
    msg_id = kernel.execute(cell(FAILING["no credentials"][0], form))
    kernel.wait_reply(msg_id)
    outputs = kernel.final_outputs(msg_id)
    (view,) = [o for o in outputs if "data" in o and "text/html" in o["data"]]
    error = "\n".join(shown(kernel, msg_id))
    advice = "create a key at"
    assert error.count(advice) == 1
    assert advice not in view["data"]["text/plain"] and advice not in view["data"]["text/html"]
    assert "error: MissingCredentialsError: This step is not recorded" in view["data"]["text/plain"]
    assert "(the rest is in the error's message)" in view["data"]["text/plain"]


def test_a_library_error_caught_by_the_persons_code_keeps_its_whole_traceback(kernel: Kernel) -> None:
    # Rendering is IPython's alone: the exception's own traceback, which the person's code may read, is untouched.
    msg_id = kernel.execute(
        "import traceback\nrun = Run(model=ScriptedModel([]))\ntry:\n    await run.step(oracle, 'go')\n"
        "except Exception as e:\n"
        "    print(any('agl_notebook' in f.filename for f in traceback.extract_tb(e.__traceback__)))"
    )
    kernel.wait_reply(msg_id)
    assert kernel.stream(msg_id) == "True\n"


def every_module() -> Iterator[str]:
    for info in pkgutil.walk_packages(agl_notebook.__path__, "agl_notebook."):
        if ".labextension" not in info.name:
            yield info.name


def subclasses(root: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in root.__subclasses__():
        yield sub
        yield from subclasses(sub)


def test_every_library_error_class_renders_the_persons_traceback() -> None:
    for name in every_module():
        importlib.import_module(name)
    classes = {
        c
        for root in (InputError, UpstreamUnexpected)
        for c in subclasses(root)
        if c.__module__.startswith("agl_notebook")
    }
    assert len(classes) > 20
    own = [c.__qualname__ for c in classes if "_render_traceback_" in vars(c)]
    assert own == [], f"error classes that draw their traceback another way: {own}"
    assert Path(agl_notebook.__file__).parent.name == "agl_notebook"
