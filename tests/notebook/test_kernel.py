"""The notebook integration in a real kernel: record then replay, questions answered through widget messages, the
synchronous form, and an interrupt while waiting for an answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbclient
import nbformat as _nbformat
import pytest

from tests.support.kernel_harness import WIDGET_MIME, Kernel, started_kernel
from tests.support.planner_notebook import SETUP as PLANNER_SETUP

nbformat: Any = _nbformat  # partly typed: its notebook builders, read and write are not annotated

# The planner role and its scripted model: the same notebook code the browser tests run.
SETUP = PLANNER_SETUP


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    with started_kernel(tmp_path, SETUP) as k:
        yield k


def test_a_question_is_answered_through_the_widgets_in_the_same_cell(kernel: Kernel) -> None:
    msg_id = kernel.execute(
        'run = Run(model=MODEL)\nplan = await run.step(planner, "Plan a meeting")\nprint(plan)', cell_id="cell-1"
    )
    kernel.answer_question("Saturday")
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    assert kernel.stream(msg_id) == "Plan(steps=['Meet on Saturday'])\n"
    final = kernel.step_display(msg_id)
    data = final["data"]
    assert isinstance(data, dict) and WIDGET_MIME not in data
    assert "Which day suits you?" in data["text/html"] and "Saturday" in data["text/html"]
    record = final["metadata"]["agl_notebook"]["records"][0]
    assert record["questions"][0]["answer"] == "Saturday"
    assert record["cell_id"] == "cell-1"
    assert kernel.widgets == {}, "every widget of the step was closed"


def test_step_sync_answers_a_question_from_a_synchronous_cell(kernel: Kernel) -> None:
    msg_id = kernel.execute('run = Run(model=MODEL)\nplan = run.step_sync(planner, "Plan a meeting")\nprint(plan)')
    kernel.answer_question("Monday")
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    assert kernel.stream(msg_id) == "Plan(steps=['Meet on Monday'])\n"
    assert WIDGET_MIME not in kernel.step_display(msg_id)["data"]
    assert kernel.widgets == {}
    # Messages that arrived while the cell was blocked were handed back: the kernel still executes.
    check = kernel.execute("print(len(CALLS))")
    kernel.wait_reply(check)
    assert kernel.stream(check) == "1\n"


@pytest.mark.parametrize("form", ["await", "sync"])
def test_an_interrupt_while_waiting_ends_the_step_cleanly(kernel: Kernel, form: str) -> None:
    call = (
        'await run.step(planner, "Plan a meeting")' if form == "await" else 'run.step_sync(planner, "Plan a meeting")'
    )
    msg_id = kernel.execute(f"run = Run(model=MODEL)\n{call}")
    kernel.wait_for(lambda: bool(kernel.question_forms()))
    kernel.km.interrupt_kernel()
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "error"
    assert reply["ename"] == "StepInterrupted"
    final = kernel.step_display(msg_id)
    assert WIDGET_MIME not in final["data"]
    assert "failed" in final["data"]["text/plain"]
    assert final["metadata"] == {}, "nothing is recorded"
    assert kernel.widgets == {}, "no live widget is left behind"
    check = kernel.execute("print(len(run.store.records()), len(run.outcomes))")
    kernel.wait_reply(check)
    assert kernel.stream(check) == "0 0\n"


def test_a_step_recorded_headlessly_replays_in_a_fresh_kernel(tmp_path: Path) -> None:
    path = tmp_path / "demo.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            SETUP.replace(
                "MODEL = ScriptedModel(script)",
                (
                    'MODEL = ScriptedModel([{"text": "Looking <b>now</b>.", "calls": [{"name": "report_plan", "args": '
                    '{"steps": ["a", "b & c"]}}]}])'
                ),
            )
        ),
        nbformat.v4.new_code_cell('run = Run(model=MODEL)\nplan = await run.step(planner, "Plan <it>")\nplan'),
        nbformat.v4.new_code_cell("print(MODEL.calls, len(CALLS))"),
    ]
    nbformat.write(nb, path)
    recorded = _execute(path)
    assert recorded.cells[2].outputs[0]["text"] == "1 0\n"
    nbformat.write(recorded, path)

    replayed = _execute(path)
    assert replayed.cells[2].outputs[0]["text"] == "0 0\n", "no model call and no tool call"
    live_out, replay_out = recorded.cells[1].outputs, replayed.cells[1].outputs
    assert [o["data"] for o in live_out] == [o["data"] for o in replay_out]
    html = replay_out[0]["data"]["text/html"]
    assert "Looking &lt;b&gt;now&lt;/b&gt;." in html and "b &amp; c" in html and "<b>now</b>" not in html
    record = replay_out[0]["metadata"]["agl_notebook"]["records"][0]
    assert json.loads(json.dumps(record))["result"] == {"steps": ["a", "b & c"]}


def _execute(path: Path) -> _nbformat.NotebookNode:
    nb: _nbformat.NotebookNode = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return nb


def test_where_widgets_cannot_answer_the_question_is_asked_on_stdin(tmp_path: Path) -> None:
    # The fallback for kernels older than ipykernel 7.4, chosen here with the variable that forces it.
    k = Kernel(cwd=tmp_path, env={"AGL_NOTEBOOK_QUESTIONS": "stdin"})
    try:
        k.run(SETUP)
        msg_id = k.execute('run = Run(model=MODEL)\nplan = await run.step(planner, "Plan a meeting")\nprint(plan)')
        assert k.answer_stdin("Friday") == "Answer: "
        assert k.wait_reply(msg_id)["content"]["status"] == "ok"
        assert k.stream(msg_id) == "Which day suits you?\nPlan(steps=['Meet on Friday'])\n"
        assert k.question_forms() == []
    finally:
        k.close()


def test_a_headless_run_fails_a_live_question_naming_it(kernel: Kernel) -> None:
    msg_id = kernel.execute('run = Run(model=MODEL)\nawait run.step(planner, "Plan a meeting")', allow_stdin=False)
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["ename"] == "NoAnswerError"
    assert "Nobody can answer 'Which day suits you?' here" in reply["evalue"]


def test_identical_steps_of_two_runs_in_one_cell_are_numbered_together(kernel: Kernel) -> None:
    kernel.run("""
import asyncio, itertools
from agl_notebook import Role
counter = itertools.count()
SAMPLER = ScriptedModel(lambda request: {"calls": [
    {"name": "report_plan", "args": {"steps": [f"sample {next(counter)}"]}}]})
sampler = Role(name="sampler", instructions="Sample.", tools=[reporting_tool("report_plan", "Report.", Plan)])
""")
    cell = (
        "first, second = Run(model=SAMPLER), Run(model=SAMPLER)\n"
        "results = await asyncio.gather(first.step(sampler, 'go'), second.step(sampler, 'go'))\n"
        "print([r.steps[0] for r in results], SAMPLER.calls)"
    )
    live = kernel.execute(cell)
    kernel.wait_reply(live)
    printed = kernel.stream(live)
    assert printed in ("['sample 0', 'sample 1'] 2\n", "['sample 1', 'sample 0'] 2\n")
    again = kernel.execute(cell)  # a new execution of the cell: both replay, each its own recording, in place
    kernel.wait_reply(again)
    assert kernel.stream(again) == printed


def test_a_headless_run_takes_the_answers_it_was_given(tmp_path: Path) -> None:
    k = Kernel(cwd=tmp_path, env={"AGL_NOTEBOOK_ANSWERS": '["Tuesday"]'})
    try:
        k.run(SETUP)
        msg_id = k.execute(
            'run = Run(model=MODEL)\nprint(await run.step(planner, "Plan a meeting"))', allow_stdin=False
        )
        assert k.wait_reply(msg_id)["content"]["status"] == "ok"
        assert k.stream(msg_id) == "Plan(steps=['Meet on Tuesday'])\n"
        record = k.step_display(msg_id)["metadata"]["agl_notebook"]["records"][0]
        assert record["questions"][0]["answer"] == "Tuesday"
    finally:
        k.close()
