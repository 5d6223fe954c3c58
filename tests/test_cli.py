"""The ``agl-notebook`` command on real notebook files, executed by nbclient in a real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.locate import PATH_VARIABLE
from agl_notebook.notebook.nbfile import METADATA_KEY, records_in_notebook
from agl_notebook.replay.modes import BLOCK_VARIABLE, ENV_VAR, NBVAL_VARIABLE

SETUP = '''from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

MODEL = ScriptedModel([{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}])
role = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])'''

nbformat: Any = _nbformat  # partly typed; its notebook builders are not
v4: Any = _nbformat.v4

STEP = 'result = await run.step(role, "What is six times seven?")\nresult'


def make_notebook(path: Path, *extra: str) -> Path:
    """A markdown cell, then the scripted role, a Run, one step, the model's call count, and ``extra`` cells."""
    cells = [v4.new_markdown_cell("# The oracle"), v4.new_code_cell(SETUP), v4.new_code_cell("run = Run(model=MODEL)"),
             v4.new_code_cell(STEP), v4.new_code_cell("print(MODEL.calls)"), *map(v4.new_code_cell, extra)]
    nbformat.write(v4.new_notebook(cells=cells), path)
    return path


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def output_records(nb: dict[str, Any]) -> list[Any]:
    return [o["metadata"][METADATA_KEY] for c in nb["cells"] for o in c.get("outputs", [])
            if METADATA_KEY in o.get("metadata", {})]


def printed_calls(nb: dict[str, Any]) -> str:
    (stream,) = nb["cells"][4]["outputs"]
    assert stream["output_type"] == "stream"
    return "".join(stream["text"]).strip()


def step_result(nb: dict[str, Any]) -> str:
    results = [o for o in nb["cells"][3]["outputs"] if o["output_type"] == "execute_result"]
    return "".join(results[0]["data"]["text/plain"])


SETTINGS = (ENV_VAR, PATH_VARIABLE, NBVAL_VARIABLE, BLOCK_VARIABLE)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mode, notebook path or nbval setting inherited from the person's environment."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


def assert_settings_restored() -> None:
    assert [name for name in SETTINGS if name in os.environ] == []


# With a kernel -----------------------------------------------------------------------------------------------------


def test_execute_leaves_records_in_output_metadata_and_consolidate_moves_them(
        tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")

    assert main(["execute", str(notebook)]) == 0

    err = capsys.readouterr().err
    assert "[1/4] cell 2 ..." in err
    assert "[4/4] cell 5 ..." in err
    assert_settings_restored()  # the kernel's settings were restored
    nb = load(notebook)
    assert METADATA_KEY not in nb["metadata"]
    assert len(output_records(nb)) == 1
    assert step_result(nb) == "Answer(text='forty-two')"
    assert printed_calls(nb) == "1"
    record_id = next(iter(records_in_notebook(nb).in_outputs))

    assert main(["consolidate", str(notebook)]) == 0

    assert "moved 1 record into the notebook metadata" in capsys.readouterr().out
    nb = load(notebook)
    assert output_records(nb) == []
    found = records_in_notebook(nb)
    assert found.in_metadata == {record_id}
    assert found.problems == []
    assert printed_calls(nb) == "1"  # the outputs themselves are kept

    before = notebook.read_bytes()
    assert main(["consolidate", str(notebook)]) == 0
    assert "nothing to move" in capsys.readouterr().out
    assert notebook.read_bytes() == before


def test_execute_record_then_replay(tmp_path: Path, clean_environment: None,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")

    assert main(["execute", str(notebook), "--record"]) == 0

    assert "1 record moved into the notebook metadata" in capsys.readouterr().err
    nb = load(notebook)
    assert output_records(nb) == []
    assert len(nb["metadata"][METADATA_KEY]["records"]) == 1
    assert printed_calls(nb) == "1"
    nbformat.validate(nbformat.reads(notebook.read_text(encoding="utf-8"), as_version=4))  # raises if invalid
    recorded = notebook.read_bytes()

    # Replay only: no model call, the same result; written elsewhere, so the recorded notebook is untouched.
    replayed = tmp_path / "replayed.ipynb"
    assert main(["execute", str(notebook), "--mode", "replay", "--output", str(replayed)]) == 0

    assert notebook.read_bytes() == recorded
    nb = load(replayed)
    assert printed_calls(nb) == "0"
    assert step_result(nb) == "Answer(text='forty-two')"
    assert records_in_notebook(nb).records.keys() == records_in_notebook(load(notebook)).records.keys()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oracle.ipynb", "replayed.ipynb"]  # no temporary files


def test_a_failing_cell_gives_exit_code_1_and_writes_nothing(
        tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb", "1 / 0", "print('never')")
    before = notebook.read_bytes()

    assert main(["execute", str(notebook), "--record"]) == 1

    err = capsys.readouterr().err
    assert "cell 6 raised ZeroDivisionError: division by zero" in err
    assert "[5/6] cell 6 ... error" in err
    assert "[6/6]" not in err
    assert notebook.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["oracle.ipynb"]
    assert_settings_restored()


# Without a kernel: what is refused -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["execute", "consolidate"])
def test_a_missing_file(tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.ipynb"
    assert main([command, str(missing)]) == 2
    assert f"{missing}: no such file." in capsys.readouterr().err
    assert not missing.exists()


@pytest.mark.parametrize("command", ["execute", "consolidate"])
@pytest.mark.parametrize(("content", "message"), [
    ("[1, 2, 3]\n", "not a notebook (no 'cells' list"),
    ("just some text\n", "not a notebook: invalid JSON at line 1, column 1"),
    ('{"cells": "no"}', "not a notebook (no 'cells' list"),
])
def test_a_file_that_is_not_a_notebook(tmp_path: Path, command: str, content: str, message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.ipynb"
    path.write_text(content, encoding="utf-8")
    assert main([command, str(path)]) == 2
    assert message in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == content


def test_a_folder_is_not_a_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["consolidate", str(tmp_path)]) == 2
    assert "not a file" in capsys.readouterr().err


def notebook_with_blocks(path: Path, metadata_block: Any, output_block: Any) -> Path:
    """A notebook (never executed) with the given records block in its metadata and in one output."""
    cell = v4.new_code_cell("1", outputs=[v4.new_output("display_data", data={"text/plain": "step"},
                                                       metadata={METADATA_KEY: output_block})])
    nb = v4.new_notebook(cells=[cell], metadata={METADATA_KEY: metadata_block})
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(("block", "message"), [
    ({"version": 99, "records": []}, "reads version 1, found 99"),
    ({"version": 1, "records": "lost"}, "records: expected a list"),
    (["not", "a", "block"], "expected an object with 'version' and 'records'"),
])
@pytest.mark.parametrize("command", [["consolidate"], ["execute", "--record"]])
def test_a_corrupt_records_block_is_never_overwritten(tmp_path: Path, block: Any, message: str, command: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = notebook_with_blocks(tmp_path / "broken.ipynb", block, {"version": 1, "records": []})
    before = path.read_bytes()

    assert main([*command, str(path)]) == 2  # refused before any kernel starts

    err = capsys.readouterr().err
    assert message in err
    assert "The recordings block is corrupt" in err
    assert path.read_bytes() == before


def test_consolidate_keeps_an_unreadable_output_block_where_it_is(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = notebook_with_blocks(tmp_path / "old.ipynb", {"version": 1, "records": []}, {"version": 7})
    before = path.read_bytes()

    assert main(["consolidate", str(path)]) == 0

    captured = capsys.readouterr()
    assert "nothing to move" in captured.out
    assert "found 7. Left where it is." in captured.err
    assert path.read_bytes() == before


def test_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    before = notebook.read_bytes()
    assert main(["execute", str(notebook), "--mode", "sometimes"]) == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err
    assert main(["execute", str(notebook), "--timeout", "0"]) == 2
    assert "above 0" in capsys.readouterr().err
    assert main(["execute", str(notebook), "--output", str(tmp_path / "no" / "such" / "out.ipynb")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([]) == 2
    assert notebook.read_bytes() == before


def test_the_installed_script() -> None:
    script = Path(sys.executable).parent / "agl-notebook"
    if not script.exists():
        pytest.skip("the package is not installed with its scripts (pip install -e .)")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0
    assert "consolidate" in done.stdout


def test_execute_never_overwrites_a_notebook_saved_while_it_ran(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb",
                             "import json, pathlib\n"
                             "p = pathlib.Path('oracle.ipynb')\n"
                             "nb = json.loads(p.read_text())\n"
                             "nb['metadata']['edited'] = 'by a person'\n"
                             "p.write_text(json.dumps(nb))")
    assert main(["execute", str(notebook)]) == 1
    assert load(notebook)["metadata"]["edited"] == "by a person"
