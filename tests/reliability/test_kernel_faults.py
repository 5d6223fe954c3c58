"""Reliability, kernel faults, in real kernels: interrupts during a model call, during a tool and while
waiting for an answer; kernel restarts with unsaved recordings; the frontend extension missing or disabled; two
notebooks on one kernel path. Nothing corrupts the notebook; a record is either fully there or absent.

The kernel never writes the notebook file: a record reaches it in the step's final display (output metadata, "path
2") when the frontend saves, or through the frontend extension's comm. So "not corrupted" is checked byte for byte on
the file, and "fully there or absent" on the outputs a frontend would save and on what the kernel replays.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.notebook.nbfile import METADATA_KEY, read_notebook_json, records_in_notebook
from agl_notebook.notebook.store import HELLO_SECONDS
from tests.support.kernel_harness import WIDGET_MIME, Kernel
from tests.support.planner_notebook import SETUP as PLANNER_SETUP
from tests.support.reliability_report import ReliabilityNotes

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

v4: Any = _nbformat.v4  # partly typed
nbformat: Any = _nbformat

AREA = "Kernel faults"
LONG = 60  # seconds a slow model or tool would take: an interrupt that does not land times the test out
KERNEL_TIMING = (
    "scripted model (its slow reply is an asyncio.sleep, with no HTTP client to unwind: not the real "
    "anthropic client's timing), in a real ipykernel driven through jupyter_client; from "
    "interrupt_kernel() to the cell's reply, one run"
)
"""How the interrupt figures are measured (the reliability page shows it beside each)."""

# An oracle whose model and tool can be made slow from the notebook (SLOW), and whose tool registers undo work.
SETUP = '''\
import asyncio, time
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

@dataclass(frozen=True)
class Wait:
    seconds: float = describe("How long to wait.")

SLOW = {"model": 0, "tool": None}
UNDONE = []
SCRATCH = []

async def oracle_script(request):
    if SLOW["model"]:
        print("model called", flush=True)
        await asyncio.sleep(SLOW["model"])
    if len(request.messages) == 1 and SLOW["tool"]:
        return {"calls": [{"name": "wait", "args": {"seconds": 1}}]}
    return {"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}

def waiting(run):
    async def wait(args: Wait) -> ToolResult:
        run.current_step.on_undo(lambda: UNDONE.append("undone"))
        SCRATCH.append(run.current_step.scratch_dir())
        print("tool running", flush=True)
        if SLOW["tool"] == "blocking":
            time.sleep(BLOCKING_SECONDS)
        else:
            await asyncio.sleep(LONG_SECONDS)
        return ToolResult(text="waited")
    return tool("wait", "Wait.", Wait, wait)

ORACLE_MODEL = ScriptedModel(oracle_script)

def oracle(run):
    return Role(name="oracle", instructions="Answer.",
                tools=[waiting(run), reporting_tool("answer", "Give the answer.", Answer)])

def state(run):
    """What the kernel holds: records, outcomes, undo work run, scratch folders left, model requests."""
    import os
    return (len(run.store.records()), len(run.outcomes), len(UNDONE), sum(os.path.exists(s) for s in SCRATCH),
            ORACLE_MODEL.calls)
'''.replace("BLOCKING_SECONDS", "2").replace("LONG_SECONDS", str(LONG))

FAST_HELLO = "import agl_notebook.notebook.store\nagl_notebook.notebook.store.HELLO_SECONDS = 0.05"
"""For the tests not about the frontend extension: no second wasted waiting for its hello in each new kernel."""

STEP = 'r = await run.step(oracle(run), "What is six times seven?")\nprint(r)'
"""The step cell of the notebooks below (a new Run is made in the cell before)."""

PRINTED = "Answer(text='forty-two')\n"


# --- helpers ----------------------------------------------------------------------------------------------------


def done(k: Kernel, msg_id: str, timeout: float = 60) -> dict[str, Any]:
    """The execution's reply, once the kernel is idle again after it (so every output of it has arrived)."""

    def idle() -> bool:
        return msg_id in k.replies and any(
            m["header"]["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
            for m in k.messages(msg_id)
        )

    k.wait_for(idle, timeout)
    return k.replies[msg_id]


def run_ok(k: Kernel, code: str, **kwargs: Any) -> None:
    msg_id = k.execute(code, **kwargs)
    reply = done(k, msg_id)["content"]
    assert reply["status"] == "ok", f"{reply.get('ename')}: {reply.get('evalue')}\n{k.stream(msg_id)}"


def printed(k: Kernel, code: str) -> str:
    msg_id = k.execute(code)
    reply = done(k, msg_id)["content"]
    assert reply["status"] == "ok", reply
    return k.stream(msg_id)


def records_of(output: dict[str, Any]) -> list[dict[str, Any]]:
    block = output.get("metadata", {}).get(METADATA_KEY)
    return list(block["records"]) if block else []


def wait_running(k: Kernel, msg_id: str, marker: str) -> None:
    k.wait_for(lambda: marker in k.stream(msg_id), timeout=30)


def interrupt(k: Kernel, msg_id: str, *, within: float) -> tuple[dict[str, Any], float]:
    """Interrupt; the cell ends as interrupted within ``within`` seconds. The reply, and the seconds it took."""
    started = time.monotonic()
    k.km.interrupt_kernel()
    reply: dict[str, Any] = done(k, msg_id, timeout=LONG / 2)["content"]
    took = time.monotonic() - started
    assert took < within, f"the interrupt took {took:.1f} s to end the step"
    assert reply["status"] == "error"
    assert reply["ename"] == "StepInterrupted", reply
    return reply, took


def assert_failed_unrecorded(k: Kernel, msg_id: str, steps: int) -> None:
    """The cell drew ``steps`` static views, each failed and carrying no record."""
    views = [o for o in k.final_outputs(msg_id) if "data" in o and "text/html" in o["data"]]
    assert len(views) == steps, views
    for view in views:
        assert WIDGET_MIME not in view["data"]
        assert "failed" in view["data"]["text/plain"]
        assert view["metadata"] == {}, "an interrupted step records nothing"


def interrupted(k: Kernel, msg_id: str, *, within: float = 3) -> tuple[dict[str, Any], float]:
    """Interrupt; the cell's reply comes within ``within`` seconds (long before LONG), and the step left nothing.

    Returns the reply and the seconds from the interrupt to the reply.
    """
    reply, took = interrupt(k, msg_id, within=within)
    final = k.step_display(msg_id)
    assert WIDGET_MIME not in final["data"], "the live widget was replaced by the static view"
    assert "failed" in final["data"]["text/plain"]
    assert "the step was interrupted; nothing was recorded" in final["data"]["text/plain"]
    assert "the step was interrupted; nothing was recorded" in final["data"]["text/html"]
    assert final["metadata"] == {}, "an interrupted step records nothing"
    assert k.widgets == {}, "no live widget is left behind"
    return reply, took


def step_cell(k: Kernel, code: str = STEP, cell_id: str = "step") -> str:
    msg_id = k.execute(code, cell_id=cell_id)
    reply = done(k, msg_id)["content"]
    assert reply["status"] == "ok", f"{reply}\n{k.stream(msg_id)}"
    return msg_id


def notebook(path: Path, *cells: str) -> bytes:
    nb = v4.new_notebook(cells=[v4.new_code_cell(c, id=f"c{i}") for i, c in enumerate(cells)])
    nbformat.write(nb, path)
    return path.read_bytes()


def saved_outputs(k: Kernel, msg_id: str) -> list[Any]:
    """The cell's outputs as a frontend saves them (update_display_data applied)."""
    outputs = []
    for o in k.final_outputs(msg_id):
        kind = o.get("type", "display_data")
        if kind == "stream":
            outputs.append(v4.new_output("stream", name="stdout", text=o["text"]))
        elif kind in ("display_data", "update_display_data", "execute_result"):
            outputs.append(v4.new_output("display_data", data=o["data"], metadata=o["metadata"]))
    return outputs


def save(path: Path, cell: int, outputs: list[Any]) -> None:
    """What a person's save does: the cell's outputs, as the frontend holds them, written into the file."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[cell].outputs = outputs
    nbformat.write(nb, path)


def file_record_ids(path: Path) -> set[str]:
    found = records_in_notebook(read_notebook_json(path), where=path.name)
    assert not found.problems, found.problems
    return set(found.records)


def restart(k: Kernel) -> None:
    k.km.restart_kernel(now=True)
    k.kc.wait_for_ready(timeout=60)
    k.pump(0.2)
    k.widgets.clear()


# --- interrupts ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """One interactive kernel (stdin allowed) for the interrupt tests; each test makes its own Run."""
    k = Kernel(cwd=tmp_path_factory.mktemp("interrupts"))
    try:
        run_ok(k, SETUP)
        run_ok(k, PLANNER_SETUP)
        run_ok(k, "from agl_notebook.notebook.store import forget")
        run_ok(k, "run = Run(model=ORACLE_MODEL)\nawait run.step(oracle(run), 'warm up')")  # the one hello wait
        yield k
    finally:
        k.close()


@pytest.fixture
def kernel(shared: Kernel) -> Kernel:
    # Each test starts live: the session's records so far are forgotten (%agl forget all).
    run_ok(
        shared,
        "SLOW.update(model=0, tool=None); UNDONE.clear(); SCRATCH.clear(); run = Run(model=ORACLE_MODEL)\n"
        "ORACLE_MODEL.calls = 0\nforget([r.id for r in run.store.records()])",
    )
    return shared


def the_next_step_runs(k: Kernel) -> None:
    """The kernel is usable after the interrupt: the same step runs live to the end and is recorded once."""
    run_ok(k, "SLOW.update(model=0, tool=None)")
    msg_id = step_cell(k)
    assert k.stream(msg_id) == PRINTED
    assert len(records_of(k.step_display(msg_id))) == 1


@pytest.mark.parametrize("form", ["await", "sync"])
def test_an_interrupt_during_a_model_call_ends_the_step_and_keeps_nothing(
    kernel: Kernel, form: str, reliability: ReliabilityNotes
) -> None:
    run_ok(kernel, f"SLOW['model'] = {LONG}")
    call = STEP if form == "await" else STEP.replace("await run.step(", "run.step_sync(")
    msg_id = kernel.execute(call)
    wait_running(kernel, msg_id, "model called")
    reply, took = interrupted(kernel, msg_id)
    assert printed(kernel, "print(state(run))") == "(0, 0, 0, 0, 1)\n", "no record, no outcome"
    the_next_step_runs(kernel)
    reliability.note(
        AREA,
        f"an interrupt during a model call ({form} form; the model awaits a 60 s reply)",
        f"the cell ends with {reply['ename']} within 3 s; the view is static and says the step was "
        "interrupted; nothing is recorded (no output metadata, no session record); the next step in the "
        "kernel runs and records",
        records_lost=0,
        notebooks_corrupted=0,
        measured={f"Interrupt during a model call ({form}): time to end the cell": f"{took:.2f} s"},
        how=KERNEL_TIMING,
    )


@pytest.mark.parametrize("how", ["awaiting tool", "blocking tool", "awaiting tool, sync form"])
def test_an_interrupt_during_a_tool_wipes_the_step_and_keeps_nothing(
    kernel: Kernel, how: str, reliability: ReliabilityNotes
) -> None:
    run_ok(kernel, f"SLOW['tool'] = {'blocking' if how == 'blocking tool' else 'awaiting'!r}")
    call = STEP if "sync" not in how else STEP.replace("await run.step(", "run.step_sync(")
    msg_id = kernel.execute(call)
    wait_running(kernel, msg_id, "tool running")
    reply, took = interrupted(kernel, msg_id, within=2 + 3 if how == "blocking tool" else 3)
    # One undo run, the scratch folder removed, no record, no outcome.
    calls = 2 if how == "blocking tool" else 1  # the blocking tool returns, and the model is asked once more
    assert printed(kernel, "print(state(run))") == f"(0, 0, 1, 0, {calls})\n"
    the_next_step_runs(kernel)
    outcome = (
        f"the cell ends with {reply['ename']} when the blocking call returns (2 s), not recording the step"
        if how == "blocking tool"
        else f"the cell ends with {reply['ename']} within 3 s"
    )
    reliability.note(
        AREA,
        f"an interrupt during a tool ({how})",
        f"{outcome}; the step's undo work ran and its scratch folder is gone; nothing is recorded; the "
        "next step runs and records",
        records_lost=0,
        notebooks_corrupted=0,
        measured={f"Interrupt during a tool ({how}): time to end the cell": f"{took:.2f} s"},
        how=KERNEL_TIMING
        + ("; the tool blocks in time.sleep, which no interrupt shortens" if how == "blocking tool" else ""),
    )


REAL_CLIENT = f"""\
import anthropic, httpx2
from agl_notebook.models.anthropic import AnthropicModel

async def slow_api(request):
    print("model called", flush=True)
    await asyncio.sleep({LONG})
    return httpx2.Response(500)

real_run = Run(model=AnthropicModel(model="claude-sonnet-5-5", client=anthropic.AsyncAnthropic(
    api_key="test-key-not-real", base_url="http://anthropic.test", max_retries=0,
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(slow_api)))))
"""
"""A Run on the real anthropic client, whose request waits on an in-process transport that answers after LONG s."""


def test_an_interrupt_during_a_real_client_request_ends_the_step_and_keeps_nothing(
    kernel: Kernel, reliability: ReliabilityNotes
) -> None:
    run_ok(kernel, REAL_CLIENT)
    held = "print(len(real_run.store.records()), len(real_run.outcomes))"
    before = printed(kernel, held)
    msg_id = kernel.execute('r = await real_run.step(oracle(real_run), "What is six times seven?")')
    wait_running(kernel, msg_id, "model called")
    reply, took = interrupted(kernel, msg_id, within=10)
    assert printed(kernel, held) == before, "no record, no outcome"
    the_next_step_runs(kernel)
    reliability.note(
        AREA,
        "an interrupt during a model call through the real anthropic client (its request awaits a 60 s answer)",
        f"the cell ends with {reply['ename']} within 10 s; the view is static and says the step was "
        "interrupted; nothing is recorded; the next step in the kernel runs and records",
        records_lost=0,
        notebooks_corrupted=0,
        measured={"Interrupt during a real client's request: time to end the cell": f"{took:.2f} s"},
        how="the real anthropic client and its HTTP stack, its request awaiting an in-process "
        "transport (httpx2.MockTransport) that answers after 60 s, in a real ipykernel driven "
        "through jupyter_client; from interrupt_kernel() to the cell's reply, one run",
    )


def test_an_interrupt_during_gathered_steps_cancels_them_and_the_kernel_lives(
    kernel: Kernel, reliability: ReliabilityNotes
) -> None:
    # Each gathered step is a task of its own: an interrupt noticed inside one must not escape the event loop.
    run_ok(kernel, "SLOW['tool'] = 'blocking'")
    msg_id = kernel.execute("r = await asyncio.gather(run.step(oracle(run), 'a'), run.step(oracle(run), 'b'))")
    wait_running(kernel, msg_id, "tool running")
    reply, took = interrupt(kernel, msg_id, within=2 * 2 + 3)
    assert kernel.km.is_alive(), "the kernel died"
    assert_failed_unrecorded(kernel, msg_id, steps=2)
    assert printed(kernel, "print(state(run)[:2])") == "(0, 0)\n", "no record, no outcome"
    the_next_step_runs(kernel)
    reliability.note(
        AREA,
        "an interrupt during two steps run with asyncio.gather (each a task of its own), one in a blocking tool",
        f"the cell ends with {reply['ename']}; the kernel lives; neither step is "
        "recorded; the next step runs and records",
        records_lost=0,
        notebooks_corrupted=0,
        measured={"Interrupt during gathered steps: time to end the cell": f"{took:.2f} s"},
        how=KERNEL_TIMING + "; one step's tool blocks in time.sleep",
    )


def test_a_step_left_running_by_an_earlier_cell_does_not_hide_later_interrupts(
    kernel: Kernel, reliability: ReliabilityNotes
) -> None:
    # A step started as a task outlives its cell; ipykernel puts its own SIGINT handler back when that cell ends.
    run_ok(
        kernel,
        f"SLOW['model'] = {LONG}\nbg = asyncio.ensure_future(run.step(oracle(run), 'background'))\n"
        "await asyncio.sleep(0.3)",
    )
    try:
        run_ok(kernel, "SLOW.update(model=0, tool='blocking')")
        msg_id = kernel.execute(STEP)
        wait_running(kernel, msg_id, "tool running")
        reply, _ = interrupt(kernel, msg_id, within=2 + 3)
        assert_failed_unrecorded(kernel, msg_id, steps=1)
        assert printed(kernel, "print(state(run)[:2])") == "(0, 0)\n", "the interrupted step was not recorded"
    finally:
        run_ok(kernel, "bg.cancel()")
    the_next_step_runs(kernel)
    reliability.note(
        AREA,
        "an interrupt during a blocking tool while a step of an earlier cell still runs",
        f"the cell ends with {reply['ename']}; the interrupted step is not recorded",
        records_lost=0,
        notebooks_corrupted=0,
    )


@pytest.mark.parametrize("form", ["await", "sync"])
def test_an_interrupt_while_waiting_for_an_answer_keeps_nothing(
    kernel: Kernel, form: str, reliability: ReliabilityNotes
) -> None:
    call = (
        'await run.step(planner, "Plan a meeting")' if form == "await" else 'run.step_sync(planner, "Plan a meeting")'
    )
    run_ok(kernel, "run = Run(model=MODEL); CALLS.clear()")
    msg_id = kernel.execute(call)
    kernel.wait_for(lambda: bool(kernel.question_forms()))
    reply, took = interrupted(kernel, msg_id)
    assert printed(kernel, "print(len(run.store.records()), len(run.outcomes), len(CALLS))") == "0 0 1\n"
    # The same question, asked again, is answered and recorded.
    again = kernel.execute(f"print({call})")
    kernel.answer_question("Friday")
    assert done(kernel, again)["content"]["status"] == "ok"
    assert kernel.stream(again) == "Plan(steps=['Meet on Friday'])\n"
    (record,) = records_of(kernel.step_display(again))
    assert record["questions"][0]["answer"] == "Friday"
    reliability.note(
        AREA,
        f"an interrupt while waiting for a person's answer ({form} form)",
        f"the cell ends with {reply['ename']} within 3 s; the question's widgets are closed; nothing is "
        "recorded; asked again, the question is answered and the step recorded with the answer",
        records_lost=0,
        notebooks_corrupted=0,
        measured={f"Interrupt while waiting for an answer ({form}): time to end the cell": f"{took:.2f} s"},
        how=KERNEL_TIMING,
    )


# --- kernel restarts -------------------------------------------------------------------------------------------


def test_a_restart_loses_only_unsaved_records_and_never_touches_the_file(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    path = tmp_path / "demo.ipynb"
    cells = (SETUP, "run = Run(model=ORACLE_MODEL)", STEP, "print(state(run))")
    original = notebook(path, *cells)
    k = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(path)})  # how JupyterLab tells the kernel its notebook
    try:

        def run_cells() -> str:
            run_ok(k, FAST_HELLO)
            run_ok(k, SETUP, cell_id="c0")
            run_ok(k, cells[1], cell_id="c1")
            return step_cell(k, cell_id="c2")

        live = run_cells()
        (record,) = records_of(k.step_display(live))
        assert printed(k, "print(run.store.path.name, state(run))") == "demo.ipynb (1, 1, 0, 0, 1)\n"
        # Unsaved, the record replays in this kernel session.
        assert printed(k, f"run = Run(model=ORACLE_MODEL)\n{STEP}\nprint(state(run))") == f"{PRINTED}(1, 1, 0, 0, 1)\n"

        restart(k)  # without saving: the session's record is gone, the file is as it was
        assert path.read_bytes() == original
        again = run_cells()
        assert printed(k, "print(state(run))") == "(1, 1, 0, 0, 1)\n", "the step ran live again"
        (fresh,) = records_of(k.step_display(again))
        assert fresh["id"] == record["id"] and fresh["result"] == record["result"]

        # A restart in the middle of a step (a step not recorded yet): the step is simply gone.
        run_ok(k, "SLOW['model'] = 60")
        midway = k.execute(STEP.replace("six times seven", "the answer"), cell_id="c2")
        wait_running(k, midway, "model called")
        restart(k)
        assert path.read_bytes() == original, "a kernel dying mid-step does not touch the file"

        # Saved with its output, the record is fully there after a restart: the step replays.
        save(path, 2, saved_outputs(k, again))
        assert file_record_ids(path) == {record["id"]}
        restart(k)
        replayed = run_cells()
        assert printed(k, "print(state(run))") == "(1, 1, 0, 0, 0)\n", "replayed: no model request"
        assert k.stream(replayed) == PRINTED
        assert records_of(k.step_display(replayed)) == [fresh]
        nbformat.validate(nbformat.read(path, as_version=4))
    finally:
        k.close()
    reliability.note(
        AREA,
        "a kernel restart with an unsaved recording, and a restart in the middle of a step",
        "the file is byte-identical after both; the unsaved step runs live again and is recorded whole "
        "(same id and result); once saved with its output, it replays after a restart",
        records_lost=0,
        notebooks_corrupted=0,
    )


class FakeExtension:
    """The frontend extension's side of the comm (labextension/src/link.ts), played by the test.

    It keeps the records the kernel sends in "the notebook model's metadata" and hands them to a restarted kernel
    when it says hello: recordings that were never saved.
    """

    def __init__(self, k: Kernel, path: str) -> None:
        self.k, self.path = k, path
        self.seen = 0
        self.answered: set[str] = set()
        self.block: dict[str, Any] | None = None

    def serve(self) -> None:
        """Answer every hello and store every record that arrived since the last call."""
        for msg in self.k.iopub[self.seen :]:
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "comm_open" and content.get("target_name") == "agl_notebook":
                if content["comm_id"] not in self.answered:
                    self.answered.add(content["comm_id"])
                    self.k.comm_msg(content["comm_id"], {"op": "records", "path": self.path, "block": self.block})
            elif kind == "comm_msg" and content["data"].get("op") == "record":
                record = content["data"]["record"]
                kept = [r for r in (self.block or {"records": []})["records"] if r["id"] != record["id"]]
                self.block = {"version": 1, "records": [*kept, record]}
                self.k.comm_msg(content["comm_id"], {"op": "stored", "id": record["id"]})
        self.seen = len(self.k.iopub)

    def run_step(self, step: str = STEP, cell_id: str = "c2") -> tuple[str, float]:
        started = time.monotonic()
        msg_id = self.k.execute(f"run = Run(model=ORACLE_MODEL)\n{step}\nprint(state(run))", cell_id=cell_id)

        def replied() -> bool:
            self.serve()
            return msg_id in self.k.replies

        self.k.wait_for(replied, timeout=30)
        elapsed = time.monotonic() - started
        done(self.k, msg_id)
        self.serve()
        assert self.k.replies[msg_id]["content"]["status"] == "ok"
        return msg_id, elapsed


def test_a_restart_gets_unsaved_records_back_from_the_frontend_extension(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    path = tmp_path / "demo.ipynb"
    original = notebook(path, SETUP, STEP)
    k = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(path)})
    try:
        extension = FakeExtension(k, path.name)
        run_ok(k, SETUP)
        live, elapsed = extension.run_step()
        assert k.stream(live).endswith("(1, 1, 0, 0, 1)\n")
        assert elapsed < HELLO_SECONDS, "the extension answered: no hello wait"
        assert extension.block is not None
        (record,) = extension.block["records"]
        assert records_of(k.step_display(live)) == [record]
        assert (
            printed(k, "from agl_notebook.notebook.frontend import link\nprint(sorted(link().stored))")
            == f"[{record['id']!r}]\n"
        )

        restart(k)  # the model still holds the record in its metadata; the file was never saved
        assert path.read_bytes() == original
        run_ok(k, SETUP)
        replayed, _ = extension.run_step()
        assert k.stream(replayed) == f"{PRINTED}(1, 1, 0, 0, 0)\n", "replayed from the unsaved record"
        assert records_of(k.step_display(replayed)) == [record]
        assert extension.block["records"] == [record], "stored again in place, not duplicated"
    finally:
        k.close()
    reliability.note(
        AREA,
        "a kernel restart with a recording the frontend extension holds but nobody saved",
        "the restarted kernel gets the record in the extension's hello answer and the step replays "
        "(no model request); the file is byte-identical; the record is whole, stored once",
        records_lost=0,
        notebooks_corrupted=0,
    )


# --- the frontend extension missing or disabled -----------------------------------------------------------------


def agl_comms(k: Kernel) -> set[str]:
    """The ids of the comms the kernel opened to the frontend extension."""
    return {
        m["content"]["comm_id"]
        for m in k.iopub
        if m["header"]["msg_type"] == "comm_open" and m["content"].get("target_name") == "agl_notebook"
    }


@pytest.mark.parametrize("extension", ["missing", "disabled"])
def test_without_the_extension_a_step_waits_once_and_its_record_travels_in_the_output(
    tmp_path: Path, extension: str, reliability: ReliabilityNotes
) -> None:
    path = tmp_path / "demo.ipynb"
    original = notebook(path, SETUP, STEP)
    k = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(path)})
    try:
        run_ok(k, SETUP)
        closed: set[str] = set()
        timings: list[float] = []
        msg_ids: list[str] = []
        for _ in range(2):
            started = time.monotonic()
            msg_id = k.execute(f"run = Run(model=ORACLE_MODEL)\n{STEP}\nprint(state(run))", cell_id="c1")
            while msg_id not in k.replies:
                k.pump(0.01)
                if extension == "disabled":  # JupyterLab closes a comm whose target nobody registered
                    for comm_id in agl_comms(k) - closed:
                        closed.add(comm_id)
                        k.kc.shell_channel.send(k.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))
                assert time.monotonic() - started < 30
            timings.append(time.monotonic() - started)
            assert done(k, msg_id)["content"]["status"] == "ok"
            msg_ids.append(msg_id)
        first, second = timings
        assert k.stream(msg_ids[0]).endswith("(1, 1, 0, 0, 1)\n")
        assert k.stream(msg_ids[1]).endswith("(1, 1, 0, 0, 1)\n"), "the second replays the session's record"
        if extension == "missing":
            assert HELLO_SECONDS * 0.9 <= first - second <= HELLO_SECONDS + 1.5, timings
        else:  # the frontend's close ends the wait at once
            assert first - second < HELLO_SECONDS * 0.8, timings  # "missing" waits the whole second
        assert second < HELLO_SECONDS, "only the first step of the kernel waits"
        (record,) = records_of(k.step_display(msg_ids[0]))
        if extension == "missing":
            assert len(agl_comms(k)) == 1, "the kernel greeted the frontend once"
        else:  # a closed comm is opened again to send the next record (an extension enabled since would answer)
            assert closed == agl_comms(k)
            assert 1 <= len(closed) <= 3, closed
        assert path.read_bytes() == original
        save(path, 1, saved_outputs(k, msg_ids[0]))  # the person saves: path 2 carries the record into the file
        assert file_record_ids(path) == {record["id"]}
        restart(k)
        run_ok(k, FAST_HELLO)
        run_ok(k, SETUP)
        replay = k.execute(f"run = Run(model=ORACLE_MODEL)\n{STEP}\nprint(state(run))", cell_id="c1")
        done(k, replay)
        assert k.stream(replay) == f"{PRINTED}(1, 1, 0, 0, 0)\n", "replayed from the saved output"
    finally:
        k.close()
    reliability.note(
        AREA,
        f"the frontend extension {extension} (interactive kernel; "
        f"{'nobody answers the comm' if extension == 'missing' else 'the frontend closes the comm'})",
        f"the first step takes {first - second:.1f} s longer than the next (it waits up to "
        f"{HELLO_SECONDS:.0f} s for the extension's answer"
        f"{'' if extension == 'missing' else ', a wait the closed comm ends at once'}); later steps do "
        "not wait; the record is in the step's output "
        "metadata, so saving keeps it and a restarted kernel replays it",
        records_lost=0,
        notebooks_corrupted=0,
        measured={f"Extension {extension}: extra wait on the first step": f"{first - second:.2f} s"},
        how="scripted model, in a real ipykernel driven through jupyter_client as an interactive "
        "frontend; the first step's wall time less the second's, one run",
    )


# --- two notebooks on one kernel path ---------------------------------------------------------------------------


def test_two_notebooks_in_one_folder_each_keep_only_their_own_records(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    steps = {"a": STEP, "b": STEP.replace("six times seven", "seven times six")}
    paths = {name: tmp_path / f"{name}.ipynb" for name in steps}
    originals = {name: notebook(paths[name], SETUP, "run = Run(model=ORACLE_MODEL)", steps[name]) for name in steps}
    kernels: dict[str, Kernel] = {}
    try:  # started inside the try: a kernel that fails to start leaves none running
        for name in steps:
            kernels[name] = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(paths[name])})
        for k in kernels.values():
            run_ok(k, FAST_HELLO)
            run_ok(k, SETUP)
            run_ok(k, "run = Run(model=ORACLE_MODEL)\nSLOW['model'] = 0.5")  # slow enough for the steps to overlap
        running = {name: k.execute(steps[name], cell_id="c2") for name, k in kernels.items()}  # concurrently
        ids: dict[str, str] = {}
        for name, k in kernels.items():
            assert done(k, running[name])["content"]["status"] == "ok"
            (record,) = records_of(k.step_display(running[name]))
            assert record["input"] == steps[name].split('"')[1]
            ids[name] = record["id"]
            assert (
                printed(k, "print(run.store.path.name, [r.input for r in run.store.records()])")
                == f"{name}.ipynb [{record['input']!r}]\n"
            )
        assert ids["a"] != ids["b"]
        assert {name: p.read_bytes() for name, p in paths.items()} == originals
        for name, k in kernels.items():
            save(paths[name], 2, saved_outputs(k, running[name]))
            assert file_record_ids(paths[name]) == {ids[name]}
        for name, k in kernels.items():  # each restarted kernel reads only its own notebook's records
            restart(k)
            run_ok(k, FAST_HELLO)
            run_ok(k, SETUP)
            assert (
                printed(k, "run = Run(model=ORACLE_MODEL)\nprint([r.id for r in run.store.records()])")
                == f"[{ids[name]!r}]\n"
            )
    finally:
        for k in kernels.values():
            k.close()
    reliability.note(
        AREA,
        "two notebooks in one folder, each with its kernel (same working directory), running "
        "their steps at the same time",
        "each step's record is in its own cell's output only, each kernel's store holds only its own "
        "notebook's record, before and after saving and restarting; neither file is touched by a kernel",
        records_lost=0,
        notebooks_corrupted=0,
    )


def test_one_notebook_open_in_two_kernels_gets_one_whole_record(tmp_path: Path, reliability: ReliabilityNotes) -> None:
    path = tmp_path / "demo.ipynb"
    original = notebook(path, SETUP, "run = Run(model=ORACLE_MODEL)", STEP)
    kernels: list[Kernel] = []
    try:  # started inside the try: a kernel that fails to start leaves none running
        for _ in range(2):
            kernels.append(Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(path)}))
        for k in kernels:
            run_ok(k, FAST_HELLO)
            run_ok(k, SETUP)
            run_ok(k, "run = Run(model=ORACLE_MODEL)\nSLOW['model'] = 0.5")
        running = [k.execute(STEP, cell_id="c2") for k in kernels]
        records = []
        for k, msg_id in zip(kernels, running, strict=True):
            assert done(k, msg_id)["content"]["status"] == "ok"
            (record,) = records_of(k.step_display(msg_id))
            records.append(record)
        assert records[0]["id"] == records[1]["id"] and records[0]["result"] == records[1]["result"]
        assert path.read_bytes() == original
        # Whichever tab saves last wins, with a whole record either way: the other kernel replays it.
        save(path, 2, saved_outputs(kernels[1], running[1]))
        save(path, 2, saved_outputs(kernels[0], running[0]))
        assert file_record_ids(path) == {records[0]["id"]}
        restart(kernels[1])
        run_ok(kernels[1], FAST_HELLO)
        run_ok(kernels[1], SETUP)
        assert (
            printed(kernels[1], f"run = Run(model=ORACLE_MODEL)\n{STEP}\nprint(state(run))")
            == f"{PRINTED}(1, 1, 0, 0, 0)\n"
        )
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert len([o for c in nb["cells"] for o in c.get("outputs", []) if METADATA_KEY in o.get("metadata", {})]) == 1
    finally:
        for k in kernels:
            k.close()
    reliability.note(
        AREA,
        "one notebook open in two kernels at once, the same step run in both",
        "both records are whole and identical (same id and result); the file is untouched until saved; "
        "the last save leaves exactly one copy, which the other kernel replays after a restart",
        records_lost=0,
        notebooks_corrupted=0,
    )


def test_two_notebooks_sharing_one_kernel_keep_their_records_apart(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    # JupyterLab's "use the kernel of another notebook": b.ipynb runs in the kernel started for a.ipynb.
    steps = {"a": STEP, "b": STEP.replace("six times seven", "seven times six")}
    paths = {name: tmp_path / f"{name}.ipynb" for name in steps}
    originals = {name: notebook(paths[name], SETUP, steps[name]) for name in steps}
    k = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(paths["a"])})
    try:
        run_ok(k, FAST_HELLO)
        run_ok(k, SETUP)
        collector = FakeExtension(k, "a.ipynb")
        records: dict[str, dict[str, Any]] = {}
        for name in steps:
            msg_id, _ = collector.run_step(steps[name], cell_id=f"{name}-step")
            (records[name],) = records_of(k.step_display(msg_id))  # each cell's output: its own record only
            assert records[name]["cell_id"] == f"{name}-step"
        sent = [
            (m["content"]["data"]["cell_id"], m["content"]["data"]["record"]["id"])
            for m in k.iopub
            if m["header"]["msg_type"] == "comm_msg" and m["content"]["data"].get("op") == "record"
        ]
        assert sent == [(f"{name}-step", records[name]["id"]) for name in steps], "each record names its cell"

        restart(k)  # neither notebook saved; each frontend's model holds its own record
        assert {name: p.read_bytes() for name, p in paths.items()} == originals
        extensions = []
        for name in steps:  # both frontends answer the hello, b.ipynb's answer last
            extension = FakeExtension(k, f"{name}.ipynb")
            extension.block, extension.seen = {"version": 1, "records": [records[name]]}, len(k.iopub)
            extensions.append(extension)
        run_ok(k, SETUP)
        opened = k.execute("run = Run(model=ORACLE_MODEL)")
        k.wait_for(lambda: bool(k.messages(opened, "comm_open")))
        for extension in extensions:
            extension.serve()
        done(k, opened)
        k.wait_for(
            lambda: printed(k, "from agl_notebook.notebook.frontend import link\nprint(link().path)") == "b.ipynb\n"
        )  # both answers arrived
        for name in steps:
            assert (
                printed(k, f"run = Run(model=ORACLE_MODEL)\n{steps[name]}\nprint(ORACLE_MODEL.calls)")
                == f"{PRINTED}0\n"
            ), f"{name}.ipynb's unsaved record replayed"
    finally:
        k.close()
    reliability.note(
        AREA,
        "two notebooks sharing one kernel (JupyterLab: use the kernel of another notebook), "
        "neither saved, then a restart",
        "each cell's output carries only its own record, and the record sent to the frontends names its "
        "cell; after the restart both frontends answer the hello and each notebook's unsaved record "
        "replays (neither answer hides the other's); neither file is touched",
        records_lost=0,
        notebooks_corrupted=0,
    )
