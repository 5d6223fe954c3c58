"""``%load_ext agl_notebook`` and the ``%agl`` magic, in a real kernel."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook import Run
from agl_notebook.notebook.magics import USAGE
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay import MemoryStore, block_to_json
from tests.support.kernel_harness import Kernel, started_kernel

nbformat: Any = _nbformat  # partly typed: its notebook builders, read and write are not annotated

SETUP = """
%load_ext agl_notebook
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

MODEL = ScriptedModel([{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}])
oracle = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])
"""
STEP = 'await Run(model=MODEL).step(oracle, "What is six times seven?")\nprint(MODEL.calls)'


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    with started_kernel(tmp_path, SETUP) as k:
        yield k


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
        shown = [
            (m["header"]["msg_type"], m["content"].get("name"), m["content"].get("text"))
            for m in kernel.messages(msg_id, "stream", "error", "display_data", "execute_result")
        ]
        assert shown == [("stream", "stderr", f"UsageError: {problem} {USAGE}\n")], line


def test_list_explain_and_forget(kernel: Kernel) -> None:
    assert output(kernel, "%agl list").startswith("No recordings in this kernel session")
    assert output(kernel, "%agl explain").startswith("Every step so far replayed")
    assert output(kernel, STEP) == "1\n"
    listed = output(kernel, "%agl list")
    assert listed.startswith("1 recording(s) in this kernel session")
    assert "role 'oracle'  scripted:" in listed
    assert output(kernel, "%agl explain") == (
        "- No recording of a step of role 'oracle' exists in this kernel session (the notebook file was not found).\n"
    )
    assert output(kernel, STEP) == "1\n", "the second run replays: no new model call"
    assert output(kernel, "%agl forget oracle").startswith("Forgot 1 recording(s)")
    assert output(kernel, STEP) == "2\n", "a forgotten recording is not replayed"
    assert output(kernel, STEP) == "2\n", "and the new recording replays"
    assert output(kernel, "%agl forget nobody").startswith("No recording matches 'nobody'")


EDITED = 'oracle = Role(name="oracle", instructions="Answer briefly.", tools=oracle.tools)'


def test_list_says_which_recording_is_stale_and_how_it_differs(kernel: Kernel) -> None:
    def run_cell(code: str, cell_id: str) -> None:
        assert kernel.wait_reply(kernel.execute(code, cell_id=cell_id))["content"]["status"] == "ok"

    # A cell's step, recorded; then the role's instructions edited and the cell run again: a second recording.
    run_cell(STEP, "cell-a")
    kernel.run(EDITED)
    run_cell(STEP, "cell-a")
    # Two identical steps in a cell (occurrences 1 and 2); then the cell edited to run one.
    run_cell(f"{STEP}\n{STEP}", "cell-b")
    run_cell(STEP, "cell-b")
    listed = output(kernel, "%agl list").splitlines()
    older_a, newer_a, second_b = (listed[i].split()[0] for i in (1, 3, 4))
    backend = listed[1].split()[3]
    assert listed == [
        "3 recording(s) in this kernel session (the notebook file was not found):",
        f"  {older_a}  role 'oracle'  {backend}  46 tokens  cell id cell-a  occurrence 1",
        f"      stale: its cell's latest run here used {newer_a} instead, which differs in: instructions",
        f"  {newer_a}  role 'oracle'  {backend}  48 tokens  cell id cell-a  occurrence 1",
        f"  {second_b}  role 'oracle'  {backend}  48 tokens  cell id cell-b  occurrence 2",
        f"      stale: its cell's latest run here ran this step fewer times (it used {newer_a}, occurrence 1)",
        "2 stale: `%agl forget ID` forgets one, so it is neither replayed nor saved again.",
    ]


def test_list_numbers_cells_and_calls_a_recording_of_a_cell_the_saved_notebook_lacks_stale(tmp_path: Path) -> None:
    # A recording made in a cell since deleted, saved in the notebook's metadata.
    setup: dict[str, Any] = {}
    exec(SETUP.replace("%load_ext agl_notebook", ""), setup)
    store = MemoryStore()
    Run(model=setup["MODEL"], store=store).step_sync(setup["oracle"], "Who was here before?")
    (gone,) = store.records()
    path = tmp_path / "demo.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(SETUP, id="c-setup"), nbformat.v4.new_code_cell(STEP, id="c-step")]
    )
    nb.metadata[METADATA_KEY] = block_to_json([dataclasses.replace(gone, cell_id="c-deleted")])
    nbformat.write(nb, path)
    k = Kernel(cwd=tmp_path, env={"JPY_SESSION_NAME": str(path)})
    try:
        k.run(SETUP, cell_id="c-setup")
        k.run(STEP, cell_id="c-step")
        listed = output(k, "%agl list").splitlines()
    finally:
        k.close()
    assert listed[0] == "2 recording(s) in the notebook demo.ipynb:"
    assert listed[1].startswith(f"  {gone.id[:12]}  role 'oracle'  ")
    assert listed[1].endswith("  cell id c-deleted  occurrence 1")
    assert listed[2] == "      stale: no cell of the saved notebook has its cell id (deleted, or not saved yet)"
    assert listed[3].endswith("  cell 2  occurrence 1"), "the cell that ran it, by its number in the notebook"
    assert listed[4:] == ["1 stale: `%agl forget ID` forgets one, so it is neither replayed nor saved again."]


def test_list_and_history_print_at_most_their_bound_and_say_how_many_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10,000-item map printed a line an item into the saved notebook; the magics print at most MAGIC_LINES."""
    from agl_notebook.notebook import magics
    from agl_notebook.replay.records import StepRecord

    records = [
        StepRecord(
            id=f"{i:032x}",
            parts={"input": f"in{i}"},
            occurrence=0,
            role="labeller",
            backend="scripted:x",
            input=f"review {i}",
            result={"label": "ok"},
            transcript=(),
            recorded_at="2026-12-02T10:00:00+00:00",
        )
        for i in range(300)
    ]

    class Notebook(MemoryStore):
        path = None

    monkeypatch.setattr(magics, "NotebookStore", lambda: Notebook(records))
    listed = magics._list().splitlines()
    assert len(listed) == magics.MAGIC_LINES + 1
    assert listed[-1] == "... and 101 more lines: `agl-notebook list NOTEBOOK` in a terminal shows them all."
    history = magics._history(None).splitlines()
    assert len(history) == magics.MAGIC_LINES + 1 and "`agl-notebook history NOTEBOOK`" in history[-1]
    monkeypatch.setattr(magics, "NotebookStore", lambda: Notebook(records[:10]))
    assert len(magics._list().splitlines()) == 11 and "more lines" not in magics._list()
