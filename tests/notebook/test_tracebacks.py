"""What a person sees when a step fails, is interrupted or warns (in a real kernel, and in plain Python): the frames
and lines of their own code, not the library's, and one line for an interrupt."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool
from agl_notebook.replay import JsonFileStore, MemoryStore, RecordingWarning
from tests.support.kernel_harness import Kernel, started_kernel
from tests.support.planner_notebook import SETUP as PLANNER_SETUP

# A tool whose handler calls a helper that raises KeyError: two frames of the person's code below the step.
FAILING = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Lookup:
    key: str = describe("What to look up.")

def lookup(key):
    table = {}
    return table[key]

async def look(args: Lookup) -> ToolResult:
    return ToolResult(text=lookup(args.key))

looker = Role(name="looker", instructions="Look it up.", tools=[tool("look", "Look it up.", Lookup, look)])
LOOKING = ScriptedModel(lambda request: {"calls": [{"name": "look", "args": {"key": "missing"}}]})
"""
FRAME = re.compile(r"^(Cell In\[\d+\], line \d+(, in .+)?|File \S+:\d+, in .+)$")
INTERRUPTED = "StepInterrupted: The step of 'planner' was interrupted; nothing was recorded."


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with started_kernel(tmp_path_factory.mktemp("tracebacks"), PLANNER_SETUP, FAILING, "import asyncio") as k:
        yield k


def error_lines(k: Kernel, msg_id: str) -> list[str]:
    """The cell's error output as a person reads it (colours dropped), line by line."""
    (error,) = k.messages(msg_id, "error")
    text = "\n".join(error["content"]["traceback"])
    return re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()


def frames(lines: list[str]) -> list[str]:
    """The header line of every frame IPython printed."""
    return [line for line in lines if FRAME.match(line)]


@pytest.mark.parametrize("call", ['await run.step(looker, "go")', 'run.step_sync(looker, "go")'])
def test_a_failing_handler_shows_the_persons_frames_and_none_of_the_librarys(kernel: Kernel, call: str) -> None:
    msg_id = kernel.execute(f"run = Run(model=LOOKING)\n{call}")
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["ename"] == "KeyError"
    shown = frames(error_lines(kernel, msg_id))
    library = [f for f in shown if "agl_notebook" in f or "asyncio" in f or "threading" in f]
    assert library == [], f"library frames shown: {library}"
    assert [re.sub(r"Cell In\[\d+\]", "Cell", f) for f in shown] == [
        "Cell, line 2",
        "Cell, line 13, in look(args)",
        "Cell, line 10, in lookup(key)",
    ]
    assert error_lines(kernel, msg_id)[-1] == "KeyError: 'missing'"


@pytest.mark.parametrize(
    "call",
    [
        'await run.step(planner, "Plan a meeting")',
        'run.step_sync(planner, "Plan a meeting")',
        'await asyncio.gather(run.step(planner, "Plan a meeting"), run.step(planner, "Plan another"))',
    ],
    ids=["await", "sync", "gather"],
)
def test_an_interrupted_step_ends_the_cell_with_one_line(kernel: Kernel, call: str) -> None:
    msg_id = kernel.execute(f"run = Run(model=MODEL)\n{call}")
    kernel.wait_for(lambda: bool(kernel.question_forms()))
    kernel.km.interrupt_kernel()
    reply: dict[str, Any] = kernel.wait_reply(msg_id)["content"]
    assert (reply["ename"], reply["evalue"]) == ("StepInterrupted", INTERRUPTED.removeprefix("StepInterrupted: "))
    assert error_lines(kernel, msg_id) == [INTERRUPTED]
    kernel.wait_for(lambda: kernel.widgets == {})
    check = kernel.execute("print(len(run.store.records()), len(run.outcomes))")
    kernel.wait_reply(check)
    assert kernel.stream(check) == "0 0\n", "nothing was recorded, and the kernel lives"


def test_an_interrupt_is_still_a_cancellation_for_the_persons_code(kernel: Kernel) -> None:
    msg_id = kernel.execute(
        'run = Run(model=MODEL)\ntry:\n    await run.step(planner, "Plan a meeting")\n'
        'except asyncio.CancelledError as e:\n    print("cancelled:", type(e).__name__)'
    )
    kernel.wait_for(lambda: bool(kernel.question_forms()))
    kernel.km.interrupt_kernel()
    kernel.wait_reply(msg_id)
    assert kernel.stream(msg_id) == "cancelled: StepInterrupted\n"


def test_importing_agl_notebook_does_not_load_asyncio(tmp_path: Path) -> None:
    # StepInterrupted is an asyncio.CancelledError: its module loads asyncio, which `import agl_notebook` must not.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import sys, agl_notebook; print('asyncio' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    assert done.stdout == "False\n"


# Every way the person's code is called from a step: the library frames between are all hidden from IPython.


def person_fails(*args: object, **kwargs: object) -> Any:
    raise KeyError("the person's code")


async def person_fails_later(*args: object) -> Any:
    person_fails()


@dataclass(frozen=True)
class Key:
    key: str = describe("A key.")


def calling(name: str, handler: Any) -> Role[None]:
    return Role(name=name, instructions="Call it.", tools=[tool(name, "Call it.", Key, handler)])


def calls(name: str) -> ScriptedModel:
    return ScriptedModel([{"calls": [{"name": name, "args": {"key": "k"}}]}])


async def ask(args: Key) -> ToolResult:
    return ToolResult(text=await CURRENT_RUN[0].terminal.show(lambda: Screen("Which?", [TextInput("Key", str)])))


CURRENT_RUN: list[Run] = []
FAILURES: dict[str, Callable[[], tuple[Run, Role[Any]]]] = {
    "a tool's handler": lambda: (Run(model=calls("look")), calling("look", person_fails_later)),
    "a script function": lambda: (Run(model=ScriptedModel(person_fails)), ORACLE),
    "an async script function": lambda: (Run(model=ScriptedModel(person_fails_later)), ORACLE),
    "an event sink": lambda: (Run(model=ScriptedModel([{"text": "Hello."}]), on_event=person_fails), ORACLE),
    "an answers function": lambda: (Run(model=calls("ask"), answers=person_fails), calling("ask", ask)),
}


def visible_library_frames(error: BaseException) -> list[str]:
    """The frames of agl_notebook IPython would show: not hidden, and not the last (where the error was raised)."""
    shown, tb = [], error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if (
            "/agl_notebook/" in frame.f_code.co_filename
            and not frame.f_locals.get("__tracebackhide__")
            and tb.tb_next is not None
        ):
            shown.append(f"{frame.f_code.co_filename}:{tb.tb_lineno} in {frame.f_code.co_name}")
        tb = tb.tb_next
    return shown


@pytest.mark.parametrize("form", ["await", "sync"])
@pytest.mark.parametrize("where", list(FAILURES))
def test_between_the_persons_call_and_their_failing_code_every_library_frame_is_hidden(where: str, form: str) -> None:
    run, role = FAILURES[where]()
    CURRENT_RUN[:] = [run]

    def step() -> object:
        return asyncio.run(run.step(role, "go")) if form == "await" else run.step_sync(role, "go")

    with pytest.raises(KeyError) as raised:
        step()
    assert visible_library_frames(raised.value) == []


# Warnings point at the person's line ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")


ORACLE: Role[Answer] = Role(
    name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)]
)


def answering() -> ScriptedModel:
    return ScriptedModel(lambda request: {"calls": [{"name": "answer", "args": {"text": "forty-two"}}]})


def next_line() -> int:
    """The number of the line after the caller's."""
    caller = inspect.currentframe()
    assert caller is not None and caller.f_back is not None
    return caller.f_back.f_lineno + 1


@contextmanager
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        yield given


def broken_store(tmp_path: Path) -> JsonFileStore:
    path = tmp_path / "records.json"
    path.write_text("{", encoding="utf-8")
    return JsonFileStore(path)


async def test_a_stores_warnings_point_at_the_line_that_ran_the_step(tmp_path: Path) -> None:
    run = Run(model=answering(), store=broken_store(tmp_path))
    with caught() as given:
        line = next_line()
        await run.step(ORACLE, "q")
    shown = [(w.category, w.filename, w.lineno) for w in given]
    assert shown == [(RecordingWarning, __file__, line)] * 2  # "Recordings not read", then "Not saved"


def test_a_stores_warnings_point_at_the_line_that_ran_a_synchronous_step(tmp_path: Path) -> None:
    run = Run(model=answering(), store=broken_store(tmp_path))
    with caught() as given:
        line = next_line()
        run.step_sync(ORACLE, "q")
    assert [(w.category, w.filename, w.lineno) for w in given] == [(RecordingWarning, __file__, line)] * 2


def test_a_recording_that_no_longer_fits_is_warned_of_at_the_line_that_ran_the_step() -> None:
    store = MemoryStore()
    Run(model=answering(), store=store).step_sync(ORACLE, "q")
    (record,) = store.records()
    run = Run(model=answering(), store=MemoryStore([dataclasses.replace(record, result={"text": 42})]))
    with caught() as given:
        line = next_line()
        run.step_sync(ORACLE, "q")
    assert [(w.category, w.filename, w.lineno) for w in given] == [(RecordingWarning, __file__, line)]
    assert "no longer fits" in str(given[0].message)


# A step of a role with no reporting tool, on a model that calls no tool: it finishes at once, warned of twice.
WARNING_CELL = """\
run = Run(model=ScriptedModel([{{"text": "Nothing to look up."}}]), store=JsonFileStore("broken.json"))
{call}
"""
CELL_LINE_2 = re.compile(r"^\S+/ipykernel_\d+/\d+\.py:2: RecordingWarning: ")  # IPython's file for a cell


@pytest.mark.parametrize(
    "call",
    [
        'await run.step(looker, "go")',
        'run.step_sync(looker, "go")',
        'await asyncio.gather(run.step(looker, "go"), run.step(looker, "again"))',
    ],
    ids=["await", "sync", "gather"],
)
def test_a_warning_in_a_cell_points_at_the_cells_line(kernel: Kernel, call: str) -> None:
    kernel.run('from agl_notebook.replay import JsonFileStore\nopen("broken.json", "w").write("{")')
    msg_id = kernel.execute(WARNING_CELL.format(call=call))
    assert kernel.wait_reply(msg_id)["content"]["status"] == "ok"
    lines = kernel.stream(msg_id).splitlines()
    assert len(lines) == 4, lines  # two warnings (the same one twice is shown once), each with the line it points at
    for warning, source in (lines[0:2], lines[2:4]):
        assert CELL_LINE_2.match(warning), warning
        assert source == f"  {call}"
    assert "Recordings not read" in lines[0] and "Not saved" in lines[2]
