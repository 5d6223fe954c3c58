"""``pytest --nbval`` on notebooks recorded by ``agl-notebook execute --record``: offline, zero model calls."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from agl_notebook import pytest_plugin
from agl_notebook._settings import RUNNER
from agl_notebook.cli import main
from agl_notebook.notebook.locate import PATH_VARIABLE
from agl_notebook.replay.modes import BLOCK_VARIABLE, NBVAL_VARIABLE
from tests.support.nbval import nbval
from tests.support.oracle_notebook import load, make_notebook, output_records

# Under nbval a model call fails loudly (the plugin blocks them), and this cell checks none was made; it prints
# nothing, so its recorded output equals its replayed one.
NO_CALLS = 'import os\nif os.environ.get("AGL_NOTEBOOK_UNDER_NBVAL") == "1":\n    assert MODEL.calls == 0, MODEL.calls'


def test_a_recorded_notebook_passes_nbval_offline_with_no_model_call(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb", NO_CALLS)
    data = load(notebook)
    data["cells"][4]["source"] = "# NBVAL_IGNORE_OUTPUT\nprint(MODEL.calls)"  # 1 when recorded, 0 on replay
    notebook.write_text(json.dumps(data), encoding="utf-8")
    assert main(["execute", str(notebook), "--record"]) == 0
    assert output_records(load(notebook)) == []  # the record lives in the notebook metadata only
    result = nbval(notebook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


def test_an_unrecorded_step_fails_under_nbval_naming_the_miss(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    assert main(["execute", str(notebook)]) == 0  # outputs saved, then the recording is removed by hand
    data = load(notebook)
    for cell in data["cells"]:
        for output in cell.get("outputs", []):
            output.get("metadata", {}).pop("agl_notebook", None)
    notebook.write_text(json.dumps(data), encoding="utf-8")
    result = nbval(notebook)
    assert result.returncode != 0
    assert "ReplayMissError" in result.stdout
    assert "No recording of a step of role 'oracle'" in result.stdout


def test_the_plugin_spells_the_variables_as_the_package_reads_them() -> None:
    assert pytest_plugin.NBVAL_VARIABLE == NBVAL_VARIABLE
    assert pytest_plugin.BLOCK_VARIABLE == BLOCK_VARIABLE
    assert pytest_plugin.PATH_VARIABLE == PATH_VARIABLE
    assert RUNNER.name == pytest_plugin.RUNNER_VARIABLE


GATHERED_SETUP = """import asyncio, hashlib
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

async def reply(request):
    # Each question waits its own, fixed time: the steps end in an order unlike the one they started in.
    question = request.messages[0].text
    await asyncio.sleep(hashlib.sha256(question.encode()).digest()[0] / 2000)
    return {"calls": [{"name": "answer", "args": {"text": question.upper()}}]}

MODEL = ScriptedModel(reply)
role = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])
run = Run(model=MODEL)"""

GATHERED = "results = await asyncio.gather(*(run.step(role, f'question {i}') for i in range(50)))"


def test_fifty_steps_gathered_and_recorded_headlessly_pass_nbval(tmp_path: Path) -> None:
    import nbformat

    notebook = tmp_path / "gathered.ipynb"
    v4: Any = nbformat.v4
    nbformat.write(  # type: ignore[no-untyped-call]  # unannotated in nbformat
        v4.new_notebook(
            cells=[v4.new_code_cell(GATHERED_SETUP), v4.new_code_cell(GATHERED), v4.new_code_cell(NO_CALLS)]
        ),
        notebook,
    )
    assert main(["execute", str(notebook), "--record"]) == 0
    outputs = load(notebook)["cells"][1]["outputs"]
    shown = ["".join(o["data"]["text/plain"]) for o in outputs if o["output_type"] == "display_data"]
    # The views stand in the order the steps started, whatever order they ended in.
    assert [text.split("'")[3] for text in shown] == [f"question {i}" for i in range(50)]
    result = nbval(notebook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


# The plugin names each notebook to its kernel: copies beside it, another working folder, a subfolder --------------


def recorded(path: Path) -> Path:
    """The oracle notebook at ``path``, recorded into its metadata with `agl-notebook execute --record`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    make_notebook(path, NO_CALLS)
    data = load(path)
    data["cells"][4]["source"] = "# NBVAL_IGNORE_OUTPUT\nprint(MODEL.calls)"  # 1 when recorded, 0 on replay
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["execute", str(path), "--record"]) == 0
    return path


def test_nbval_passes_on_a_notebook_with_copies_beside_it_run_from_another_folder(tmp_path: Path) -> None:
    notebook = recorded(tmp_path / "nbs" / "oracle.ipynb")
    for copy in ("oracle-Copy1.ipynb", ".~oracle.ipynb", "oracle.bak.ipynb"):  # a Duplicate and two backups
        (notebook.parent / copy).write_bytes(notebook.read_bytes())
    (tmp_path / "elsewhere").mkdir()

    result = nbval(notebook, cwd=tmp_path / "elsewhere")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


def test_nbval_on_a_folder_names_each_notebook_beside_a_jupyter_execute_copy(tmp_path: Path) -> None:
    notebook = recorded(tmp_path / "nbs" / "oracle.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "execute", "oracle.ipynb", "--output", "oracle-run"],
        cwd=notebook.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The copy differs from the notebook: its recordings are cleared, so its step can only fail, and only there.
    copy = notebook.parent / "oracle-run.ipynb"
    assert main(["clear", str(copy), "--all"]) == 0

    result = nbval(notebook.parent, cwd=tmp_path)

    assert result.returncode != 0
    assert "9 passed" in result.stdout and "1 failed" in result.stdout, result.stdout
    (failed,) = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert "oracle-run.ipynb" in failed, failed
    assert "No recording of a step of role 'oracle' exists in the notebook oracle-run.ipynb" in result.stdout


def test_the_plugin_gives_other_tests_the_persons_notebook_path_back(tmp_path: Path) -> None:
    import nbformat

    v4: Any = nbformat.v4
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell("x = 1")]), tmp_path / "a.ipynb")  # type: ignore[no-untyped-call]
    (tmp_path / "test_z.py").write_text(
        "import os\n\ndef test_path():\n    assert os.environ.get('AGL_NOTEBOOK_PATH') == '/persons/own.ipynb'\n",
        encoding="utf-8",
    )

    result = nbval(tmp_path, {PATH_VARIABLE: "/persons/own.ipynb"})

    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_a_live_question_under_nbval_names_nbval_and_how_to_record_it_with_answers(tmp_path: Path) -> None:
    import nbformat

    from tests.support.planner_notebook import CELLS

    v4: Any = nbformat.v4
    notebook = tmp_path / "meeting.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in CELLS]), notebook)  # type: ignore[no-untyped-call]

    result = nbval(notebook, {"AGL_NOTEBOOK_MODE": "auto"})  # mode auto: the scripted step runs live, and asks

    said = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", result.stdout)  # a traceback's colours
    assert result.returncode != 0
    assert "NoAnswerError" in said
    assert "Nobody can answer 'Which day suits you?' here: nbval runs this notebook headless, and this step" in said
    assert "this step runs live." in said
    assert "(`agl-notebook execute meeting.ipynb --answers VALUE --record`)" in said
    assert "set AGL_NOTEBOOK_ANSWERS=VALUE in pytest's environment (nbval's kernels inherit it)" in said
