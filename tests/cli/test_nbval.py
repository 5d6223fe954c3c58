"""``pytest --nbval`` on notebooks recorded by ``agl-notebook execute --record``: offline, zero model calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agl_notebook import pytest_plugin
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
