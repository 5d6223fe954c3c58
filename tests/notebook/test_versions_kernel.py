"""A step's previous version in real notebooks run by ``agl-notebook execute`` (nbclient, a real kernel) and nbval.

Edit the instructions and run again: the finished view names ``instructions`` and shows the line diff. Run the
notebook again in a new kernel (a restart, then run all): the same outputs, replayed with no model call; nbval passes.
The same with ``mode="refresh"``. ``agl-notebook history`` lists the cell's versions newest first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY, PROVENANCE_KEY
from tests.support.nbval import nbval

nbformat: Any = _nbformat  # partly typed; its notebook builders are not
v4: Any = _nbformat.v4

SETUP = """from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass
class Answer:
    text: str = describe("The answer.")

def reply(request):
    # The scripted agent answers by its instructions, so an edit changes the result too.
    words = "short and plain" if "very brief" in request.system else "a longer answer in plain words"
    return {"calls": [{"name": "answer", "args": {"text": words}}]}

def writer(instructions):
    return Role("writer", instructions, [reporting_tool("answer", "Hand back the answer.", Answer)])

run = Run(model=ScriptedModel(reply))"""

V1 = 'instructions = """Be brief.\nUse plain words.\nName one example."""'
V2 = 'instructions = """Be very brief.\nUse plain words.\nName one example."""'


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def step_output(nb: dict[str, Any]) -> dict[str, Any]:
    views: list[dict[str, Any]] = [o for o in nb["cells"][2]["outputs"] if "data" in o and "text/html" in o["data"]]
    (view,) = views
    return view


def write(path: Path, instructions: str, step: str) -> None:
    if path.exists():
        nb = nbformat.read(path, as_version=4)
        nb.cells[1].source = instructions
        nbformat.write(nb, path)
    else:
        nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in (SETUP, instructions, step)]), path)


@pytest.mark.parametrize("mode", ["auto", "refresh"])
def test_an_edit_shows_its_diff_and_a_new_kernel_draws_the_same(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "iterate.ipynb"
    step = (
        'await run.step(writer(instructions), "Explain retries")'
        if mode == "auto"
        else ('await run.step(writer(instructions), "Explain retries", mode="refresh")')
    )
    write(path, V1, step)
    assert cli("execute", "--record", path) == 0
    first = step_output(json.loads(path.read_text(encoding="utf-8")))
    assert "changed since the previous version" not in "".join(first["data"]["text/plain"]), "no previous: nothing"

    write(path, V2, step)
    assert cli("execute", "--record", path) == 0
    nb = json.loads(path.read_text(encoding="utf-8"))
    view = step_output(nb)
    plain, page = "".join(view["data"]["text/plain"]), "".join(view["data"]["text/html"])
    assert "changed since the previous version: instructions, result" in plain
    assert '<details class="agl-change"><summary' in page, "the static view keeps it collapsed"
    assert "Changed since the previous version: instructions, result" in page
    assert "-Be brief." in page and "+Be very brief." in page and " Use plain words." in page
    assert "a longer answer in plain words" in page and "short and plain" in page  # the result, before and after
    assert view["metadata"][PROVENANCE_KEY]["source"] == "live"

    # A restart and run all: the same outputs; in mode auto replayed with no model call.
    assert cli("execute", "--record", path) == 0
    again = json.loads(path.read_text(encoding="utf-8"))
    assert step_output(again)["data"] == view["data"]
    if mode == "auto":
        assert step_output(again)["metadata"][PROVENANCE_KEY]["source"] == "replayed"
    checked = nbval(path)
    assert checked.returncode == 0, checked.stdout[-3000:]

    # The notebook keeps both versions (auto: two records; refresh: the second record replaced none of its own).
    records = nb["metadata"][METADATA_KEY]["records"] if METADATA_KEY in nb["metadata"] else []
    records += [
        r
        for cell in nb["cells"]
        for o in cell.get("outputs", [])
        for r in o.get("metadata", {}).get(METADATA_KEY, {}).get("records", [])
    ]
    assert {json.dumps(r.get("result")) for r in records} >= {
        json.dumps({"text": "short and plain"}),
        json.dumps({"text": "a longer answer in plain words"}),
    }


def test_history_lists_the_cells_versions_newest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "iterate.ipynb"
    step = 'await run.step(writer(instructions), "Explain retries")'
    write(path, V1, step)
    assert cli("execute", "--record", path) == 0
    write(path, V2, step)
    assert cli("execute", "--record", path) == 0
    capsys.readouterr()
    assert cli("history", path) == 0
    out = capsys.readouterr().out.splitlines()
    assert "role 'writer' on 'Explain retries' (occurrence 1), 2 version(s)" in out[0]
    assert "changed: instructions, result" in out[1] and "short and plain" in out[1]
    assert "(no previous version)" in out[2] and "a longer answer" in out[2]
