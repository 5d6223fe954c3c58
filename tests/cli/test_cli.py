"""The ``agl-notebook`` command on real notebook files, executed by nbclient in a real kernel."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from agl_notebook.cli.execute import _Progress
from agl_notebook.cli.explain import _explain_failure
from agl_notebook.cli.report import age
from agl_notebook.models.base import Usage
from agl_notebook.models.prices import PRICES, RecordedCost
from agl_notebook.notebook.nbfile import METADATA_KEY, records_in_notebook
from agl_notebook.notebook.terminal import ANSWERS_VARIABLE
from agl_notebook.replay.records import CellUse, StepRecord, source_digest
from tests.support.oracle_notebook import (
    NOTEBOOK_SETTINGS,
    STEP,
    load,
    make_notebook,
    nbformat,
    output_records,
    printed_calls,
    step_result,
    v4,
)


def assert_settings_restored() -> None:
    assert [name for name in NOTEBOOK_SETTINGS if name in os.environ] == []


# With a kernel -----------------------------------------------------------------------------------------------------


def test_execute_leaves_records_in_output_metadata_and_consolidate_moves_them(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_execute_record_then_replay(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
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
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
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


# Every command, NB standing for the notebook's path.
COMMANDS = [
    ["execute", "NB"],
    ["consolidate", "NB"],
    ["list", "NB"],
    ["list", "NB", "--json"],
    ["explain", "NB", "2"],
    ["clear", "NB", "--all"],
    ["gc", "NB"],
]
WRITING_COMMANDS = [
    ["consolidate", "NB"],
    ["execute", "NB", "--record"],
    ["clear", "NB", "--all"],
    ["clear", "NB", "--all", "--dry-run"],
    ["gc", "NB", "--unknown-too"],
]


def argv(command: list[str], path: Path) -> list[str]:
    return [str(path) if word == "NB" else word for word in command]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_file(tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.ipynb"
    assert main(argv(command, missing)) == 2
    assert f"{missing}: no such file." in capsys.readouterr().err
    assert not missing.exists()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2, 3]\n", "not a notebook (no 'cells' list"),
        ("just some text\n", "not a notebook: invalid JSON at line 1, column 1"),
        ('{"cells": "no"}', "not a notebook (no 'cells' list"),
    ],
)
def test_a_file_that_is_not_a_notebook(
    tmp_path: Path, command: list[str], content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.ipynb"
    path.write_text(content, encoding="utf-8")
    assert main(argv(command, path)) == 2
    assert message in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == content
    assert [p.name for p in tmp_path.iterdir()] == ["notes.ipynb"]


def test_a_folder_is_not_a_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["consolidate", str(tmp_path)]) == 2
    assert "not a file" in capsys.readouterr().err


def notebook_with_blocks(path: Path, metadata_block: Any, output_block: Any) -> Path:
    """A notebook (never executed) with the given records block in its metadata and in one output."""
    cell = v4.new_code_cell(
        "1", outputs=[v4.new_output("display_data", data={"text/plain": "step"}, metadata={METADATA_KEY: output_block})]
    )
    nb = v4.new_notebook(cells=[cell], metadata={METADATA_KEY: metadata_block})
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"version": 99, "records": []}, "reads version 1, found 99"),
        ({"version": 1, "records": "lost"}, "records: expected a list"),
        (["not", "a", "block"], "expected an object with 'version' and 'records'"),
    ],
)
@pytest.mark.parametrize("command", [*WRITING_COMMANDS, ["list", "NB"], ["explain", "NB", "1"]], ids=" ".join)
def test_a_corrupt_records_block_is_never_overwritten(
    tmp_path: Path, block: Any, message: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = notebook_with_blocks(tmp_path / "broken.ipynb", block, {"version": 1, "records": []})
    before = path.read_bytes()

    assert main(argv(command, path)) == 2  # refused before any kernel starts

    captured = capsys.readouterr()
    assert message in captured.err
    assert "The recordings block is corrupt" in captured.err
    assert captured.out == ""
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["broken.ipynb"]


def test_consolidate_keeps_an_unreadable_output_block_where_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
    notebook = make_notebook(
        tmp_path / "oracle.ipynb",
        "import json, pathlib\n"
        "p = pathlib.Path('oracle.ipynb')\n"
        "nb = json.loads(p.read_text())\n"
        "nb['metadata']['edited'] = 'by a person'\n"
        "p.write_text(json.dumps(nb))",
    )
    assert main(["execute", str(notebook)]) == 1
    assert load(notebook)["metadata"]["edited"] == "by a person"


# Recordings: list, clear, gc (no kernel) ------------------------------------------------------------------------------

NOW = datetime.datetime.now(datetime.UTC)


def record_json(
    n: int,
    *,
    cell_id: str | None = None,
    days_ago: float | None = 3.0,
    usage: Usage | None = None,
    cells_kept: bool = True,
) -> dict[str, Any]:
    """A readable step record, number ``n`` (its id is made from n), recorded in the cell ``cell_id``.

    With ``cells_kept`` it names that cell among its ``cells`` (with the source it had, which no cell has now), as
    every record kept in a cell is; without, it is a record kept before cells were.
    """
    recorded_at = (
        (NOW - datetime.timedelta(days=days_ago)).isoformat(timespec="seconds") if days_ago is not None else ""
    )
    record = StepRecord(
        id=hashlib.sha256(str(n).encode()).hexdigest()[:32],
        parts={"role": "x", "input": str(n)},
        occurrence=0,
        role="oracle",
        backend="scripted:0123456789abcdef",
        input=f"question {n}",
        result={"text": f"answer {n}"},
        transcript=(),
        usage=usage or Usage(30, 12),
        cell_id=cell_id,
        recorded_at=recorded_at,
        cells=(CellUse(cell_id, source_digest(f"# cell {cell_id} then")),) if cell_id and cells_kept else (),
    )
    data = record.to_json()
    data["transcript"] = [{"role": "user", "content": f"question {n}"}]
    return data


def record_id(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()[:32]


UNREADABLE = {"kind": "step", "format": 9, "id": "from-a-newer-version"}


def notebook_with_records(path: Path, metadata: list[Any], in_output: list[Any]) -> Path:
    """Cells: 1 markdown ``intro``; 2 code ``setup``; 3 code ``ask``, whose output keeps ``in_output``; 4 an emptied
    code cell ``emptied``; 5 a markdown cell ``was-code``. The notebook metadata keeps ``metadata``."""
    cells = [
        v4.new_markdown_cell("# Recordings"),
        v4.new_code_cell("run = Run(model=MODEL)"),
        v4.new_code_cell(
            STEP,
            outputs=[
                v4.new_output(
                    "display_data",
                    data={"text/plain": "the step"},
                    metadata={METADATA_KEY: {"version": 1, "records": in_output}},
                )
            ],
        ),
        v4.new_code_cell(""),
        v4.new_markdown_cell("was code once"),
    ]
    for cell, cell_id in zip(cells, ["intro", "setup", "ask", "emptied", "was-code"], strict=True):
        cell["id"] = cell_id
    nbformat.write(v4.new_notebook(cells=cells, metadata={METADATA_KEY: {"version": 1, "records": metadata}}), path)
    return path


def rules_notebook(path: Path) -> Path:
    """One recording per case of the "used" rule (numbers 1 to 6), and a record this version cannot read."""
    return notebook_with_records(
        path,
        [
            record_json(1, cell_id="ask"),  # used: its cell is there
            record_json(2, cell_id="deleted", days_ago=40),  # unused: its cell is gone
            record_json(3, cell_id="emptied", days_ago=1 / 24),  # unused: its cell has no code
            record_json(4, cell_id="was-code", days_ago=400),  # unused: its cell is markdown now
            record_json(5, days_ago=None),  # unknown: no cell id
            UNREADABLE,
        ],
        [record_json(6)],
    )  # used: kept in cell 3's output


def listed(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["list", str(path), "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def statuses(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    return {r["id"]: r["status"] for r in listed(path, capsys)["recordings"]}


def test_list_shows_each_recording_and_whether_a_cell_uses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rules_notebook(tmp_path / "rules.ipynb")
    before = path.read_bytes()

    assert main(["list", str(path)]) == 0

    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"{path}: 6 recordings"
    assert lines[1].split() == ["ID", "ROLE", "BACKEND", "TOKENS", "DOLLARS", "AGE", "KEPT", "USED"]
    rows = {line.split()[0]: line for line in lines[2:8]}
    assert set(rows) == {record_id(n)[:12] for n in range(1, 7)}
    assert rows[record_id(1)[:12]].split() == [
        record_id(1)[:12],
        "oracle",
        "scripted:0123456789abcdef",
        "42",
        "-",
        "3",
        "days",
        "ago",
        "metadata",
        "used",
        "(cell",
        "3)",
    ]
    assert rows[record_id(2)[:12]].endswith("5 weeks ago  metadata  unused (cell deleted)")
    assert rows[record_id(3)[:12]].endswith("1 hour ago   metadata  unused (cell empty)")
    assert rows[record_id(4)[:12]].endswith("1 year ago   metadata  unused (not code)")
    assert rows[record_id(5)[:12]].endswith("unknown      metadata  unknown (no cell id)")
    assert rows[record_id(6)[:12]].endswith("3 days ago   output    used (cell 3)")
    assert lines[8] == "2 used, 3 unused, 1 unknown."
    assert "gc` removes these" in lines[9] and "--unknown-too" in lines[10]
    assert "format: this version reads formats 1 and 2" in captured.err  # the unreadable record is reported, not listed
    assert path.read_bytes() == before

    data = listed(path, capsys)
    assert data["counts"] == {"used": 2, "unused": 3, "unknown": 1}
    assert data["unreadable"] == 1
    by_id = {r["id"]: r for r in data["recordings"]}
    first = by_id[record_id(1)]
    assert first | {"recorded_at": None} == {
        "id": record_id(1),
        "short_id": record_id(1)[:12],
        "role": "oracle",
        "backend": "scripted:0123456789abcdef",
        "input_tokens": 30,
        "output_tokens": 12,
        "tokens": 42,
        "cost_usd": None,
        "cost_rates": None,
        "recorded_at": None,
        "age": "3 days ago",
        "kept": ["metadata"],
        "output_cells": [],
        "cell_id": "ask",
        "cell": 3,
        "occurrence": 0,
        "status": "used",
        "reason": "used by cell 3 (id ask)",
        "cells": [{"id": "ask", "source": source_digest("# cell ask then")}],
    }
    assert by_id[record_id(5)]["recorded_at"] is None and by_id[record_id(5)]["age"] == "unknown"
    assert by_id[record_id(6)]["kept"] == ["output"] and by_id[record_id(6)]["output_cells"] == [3]
    assert by_id[record_id(2)]["reason"] == "its cell (id deleted) is no longer in the notebook, nor its source"


def costed_record(n: int, backend: str, usage: Usage, cost: RecordedCost | None) -> dict[str, Any]:
    data = record_json(n, cell_id="ask", usage=usage)
    data["backend"] = backend
    if cost is not None:
        data["cost"] = {"usd": cost.usd, "rates": cost.rates_as_of}
    return data


def test_list_shows_recorded_dollars_and_what_re_recording_would_cost_today(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    opus = "anthropic:claude-opus-5-5"
    million = Usage(input_tokens=1_000_000)
    path = notebook_with_records(
        tmp_path / "costs.ipynb",
        [
            costed_record(1, opus, million, RecordedCost(3.5, "2026-06-01")),  # priced then, at older rates
            costed_record(2, "anthropic:claude-mythos-preview", million, RecordedCost(None, "2026-12-01")),
            costed_record(3, opus, million, None),  # recorded before costs were kept
            record_json(4, cell_id="ask"),  # scripted: never billed
        ],
        [],
    )
    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in out[2:6]}
    assert [rows[record_id(n)[:12]][4] for n in (1, 3, 4)] == ["$3.50", "-", "-"]
    assert rows[record_id(2)[:12]][4:6] == ["price", "unknown"]
    assert out[-2] == "recorded cost: $3.50, and 1 with price unknown, and 1 recorded before costs were kept."
    # Today's rates price every billed recording's tokens again: Opus 5.5 input is $4 per million.
    assert out[-1] == (
        f"re-recording every step today: $8.00 at the rates of {PRICES.as_of} (1 on models with no price left out)."
    )
    assert listed(path, capsys)["cost"] == {
        "recorded_usd": 3.5,
        "recorded_unknown": 1,
        "recorded_missing": 1,
        "today_usd": 8.0,
        "today_unknown": 1,
        "today_rates": PRICES.as_of,
    }

    # Today's rates are the setting's when it names a price table.
    table = tmp_path / "prices.json"
    rates = {"input": 1, "output": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1}
    table.write_text(json.dumps({"as_of": "2027-01-01", "rates": {"claude-mythos-preview": rates}}), encoding="utf-8")
    monkeypatch.setenv("AGL_NOTEBOOK_PRICES", str(table))
    assert listed(path, capsys)["cost"]["today_usd"] == 9.0  # two Opus at $4, one Haiku at $1
    table.write_text("{not json", encoding="utf-8")
    assert main(["list", str(path)]) != 0
    assert "prices.json is not JSON" in capsys.readouterr().err


def test_used_when_kept_in_a_cells_output_even_if_it_names_another_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A cell copied in JupyterLab gets a new id but keeps its outputs: the copy displays the step, so it uses it.
    path = notebook_with_records(
        tmp_path / "copied.ipynb", [record_json(1, cell_id="deleted")], [record_json(1, cell_id="deleted")]
    )
    (recording,) = listed(path, capsys)["recordings"]
    assert (recording["status"], recording["kept"], recording["cell"]) == ("used", ["metadata", "output"], 3)


def test_without_cell_ids_or_code_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # nbformat 4.4: no cell carries an id, so a record naming its cell cannot be judged.
    old = v4.new_notebook(
        cells=[v4.new_code_cell("print(1)")],
        metadata={METADATA_KEY: {"version": 1, "records": [record_json(1, cell_id="abc"), record_json(2)]}},
    )
    old.nbformat_minor = 4
    del old.cells[0]["id"]
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(old), encoding="utf-8")
    assert statuses(path, capsys) == {record_id(1): "unknown", record_id(2): "unknown"}

    # No code cell could run a step at all: every recording is unused.
    prose = v4.new_notebook(
        cells=[v4.new_markdown_cell("Only prose now."), v4.new_code_cell("  \n")],
        metadata={METADATA_KEY: {"version": 1, "records": [record_json(2)]}},
    )
    path = tmp_path / "prose.ipynb"
    nbformat.write(prose, path)
    assert statuses(path, capsys) == {record_id(2): "unused"}
    assert main(["gc", str(path)]) == 0
    assert METADATA_KEY not in load(path)["metadata"]  # the emptied block goes too


def test_list_of_a_notebook_without_recordings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_notebook(tmp_path / "oracle.ipynb")
    assert main(["list", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: no recordings.\n"
    assert listed(path, capsys)["recordings"] == []


def test_gc_drops_the_unused_and_keeps_the_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rules_notebook(tmp_path / "rules.ipynb")
    before = path.read_bytes()

    assert main(["gc", str(path), "--dry-run"]) == 0

    out = capsys.readouterr().out
    assert out.count("would remove ") == 4  # three rows and the summary
    assert f"would remove  {record_id(2)[:12]}  role 'oracle'" in out
    assert "unused: its cell (id deleted) is no longer in the notebook" in out
    assert "would remove 3 recordings (3 from the notebook metadata); 3 left in" in out
    assert "Nothing was written (--dry-run)." in out
    assert path.read_bytes() == before

    assert main(["gc", str(path)]) == 0

    assert "removed 3 recordings (3 from the notebook metadata); 3 left in" in capsys.readouterr().out
    assert statuses(path, capsys) == {record_id(1): "used", record_id(5): "unknown", record_id(6): "used"}
    nb = load(path)
    assert UNREADABLE in nb["metadata"][METADATA_KEY]["records"]  # what cannot be read is never collected
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rules.ipynb"]

    after_gc = path.read_bytes()
    assert main(["gc", str(path)]) == 0
    out = capsys.readouterr().out
    assert "every recording is used or may be (2 used, 1 unknown)" in out
    assert "(--unknown-too removes the unknown ones); nothing to remove." in out
    assert path.read_bytes() == after_gc

    assert main(["gc", str(path), "--unknown-too"]) == 0
    assert "removed 1 recording (1 from the notebook metadata); 2 left" in capsys.readouterr().out
    assert statuses(path, capsys) == {record_id(1): "used", record_id(6): "used"}


def test_a_partial_record_is_listed_as_partial_costs_nothing_and_gc_keeps_it_unless_unknown_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = {
        **record_json(7, cell_id="ask"),
        "backend": "anthropic:claude-opus-4-1",
        "result": None,
        "partial": {"waiting": "approval", "tool_call_id": "toolu_01_0", "tool": "send_mail"},
    }
    gone = {**record_json(8, cell_id="deleted"), "result": None, "partial": waiting["partial"]}
    path = notebook_with_records(tmp_path / "waiting.ipynb", [waiting, gone, record_json(2, cell_id="deleted")], [])

    data = listed(path, capsys)
    by_id = {r["id"]: r for r in data["recordings"]}
    assert by_id[record_id(7)]["status"] == "partial" and by_id[record_id(8)]["status"] == "partial"
    assert by_id[record_id(7)]["partial"] == waiting["partial"]
    assert by_id[record_id(7)]["cell"] == 3
    assert "waiting for an approval of its call to 'send_mail'" in by_id[record_id(7)]["reason"]
    assert "partial" not in by_id[record_id(2)]
    assert data["counts"] == {"used": 0, "unused": 1, "unknown": 0, "partial": 2}
    assert data["cost"]["recorded_missing"] == 0, "not a recording made before costs were kept"
    assert data["cost"]["today_usd"] == 0

    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{record_id(7)[:12]}  oracle" in out and "partial (waiting, cell 3)" in out
    assert "0 used, 1 unused, 0 unknown, 2 partial." in out
    assert "recorded before costs were kept" not in out

    assert main(["gc", str(path)]) == 0
    assert "removed 1 recording (1 from the notebook metadata); 2 left" in capsys.readouterr().out
    assert main(["gc", str(path)]) == 0
    assert "(0 used, 0 unknown, 2 partial) (--unknown-too removes the partial ones)" in capsys.readouterr().out
    assert set(statuses(path, capsys).values()) == {"partial"}, "a waiting step's progress is kept"
    assert main(["gc", str(path), "--unknown-too"]) == 0
    assert "removed 2 recordings" in capsys.readouterr().out


def test_clear_given_recordings_everywhere_they_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rules_notebook(tmp_path / "rules.ipynb")
    nb = load(path)
    nb["cells"][2]["outputs"][0]["metadata"][METADATA_KEY]["records"].append(record_json(1, cell_id="ask"))
    path.write_text(json.dumps(nb), encoding="utf-8")

    # A full id and a prefix; recording 1 is kept in the metadata and in an output: both copies go.
    assert main(["clear", str(path), record_id(1), record_id(6)[:8]]) == 0

    out = capsys.readouterr().out
    assert "removed 2 recordings (1 from the notebook metadata, 2 from outputs' metadata); 4 left in" in out
    nb = load(path)
    assert set(statuses(path, capsys)) == {record_id(n) for n in (2, 3, 4, 5)}
    assert METADATA_KEY not in nb["cells"][2]["outputs"][0]["metadata"]  # its emptied block is removed
    assert "".join(nb["cells"][2]["outputs"][0]["data"]["text/plain"]) == "the step"  # the output itself is kept


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([], "give the ids of the recordings to remove"),
        (["--all", "abcdef12"], "or --all, not both"),
        (["abc"], "'abc' is too short to name a recording"),
        (["ffffffffff"], "no recording has an id starting with 'ffffffffff'"),
    ],
)
def test_clear_refuses_what_names_no_single_recording(
    tmp_path: Path, ids: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rules_notebook(tmp_path / "rules.ipynb")
    before = path.read_bytes()
    assert main(["clear", str(path), *ids]) == 2
    assert message in capsys.readouterr().err
    assert path.read_bytes() == before


def test_clear_refuses_an_ambiguous_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [record_json(n) for n in range(3)]
    for r in records[:2]:  # two ids sharing their first 6 characters
        r["id"] = "abcdef" + r["id"][6:]
    path = notebook_with_records(tmp_path / "many.ipynb", records, [])
    before = path.read_bytes()
    assert main(["clear", str(path), "abcdef"]) == 2
    assert "'abcdef' starts the ids of 2 recordings (abcdef" in capsys.readouterr().err
    assert path.read_bytes() == before
    assert main(["clear", str(path), "--dry-run", records[0]["id"]]) == 0  # an id after an option
    assert "would remove 1 recording" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_clear_all_takes_every_recording_even_unreadable_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rules_notebook(tmp_path / "rules.ipynb")
    nb = load(path)
    nb["cells"][1]["outputs"] = [
        {"output_type": "display_data", "data": {"text/plain": "old"}, "metadata": {METADATA_KEY: {"version": 7}}}
    ]
    path.write_text(json.dumps(nb), encoding="utf-8")

    assert main(["clear", str(path), "--all"]) == 0

    out = capsys.readouterr().out
    assert (
        "removed 6 recordings (5 from the notebook metadata, 1 from outputs' metadata) and 2 this version "
        "cannot read; 0 left in"
    ) in out
    nb = load(path)
    assert METADATA_KEY not in nb["metadata"]
    assert output_records(nb) == []
    assert len(nb["cells"][2]["outputs"]) == 1
    assert listed(path, capsys)["recordings"] == []

    before = path.read_bytes()
    assert main(["clear", str(path), "--all"]) == 0
    assert "no recordings; nothing to remove" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_500_recordings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """list, gc and clear on a notebook with 500 recordings: correct, and quick (timed, printed, not asserted)."""
    metadata = (
        [record_json(n, cell_id="ask") for n in range(200)]
        + [record_json(n, cell_id=f"gone-{n}") for n in range(200, 350)]
        + [record_json(n) for n in range(350, 450)]
    )
    path = notebook_with_records(tmp_path / "big.ipynb", metadata, [record_json(n) for n in range(450, 500)])
    assert path.stat().st_size > 200_000
    timings: dict[str, float] = {}

    def timed(name: str, *args: str) -> str:
        started = time.perf_counter()
        assert main([args[0], str(path), *args[1:]]) == 0
        timings[name] = time.perf_counter() - started
        return capsys.readouterr().out

    out = timed("list", "list")
    assert out.splitlines()[0] == f"{path}: 500 recordings"
    assert "250 used, 150 unused, 100 unknown." in out
    assert len(out.splitlines()) == 1 + 1 + 500 + 3
    data = json.loads(timed("list --json", "list", "--json"))
    assert data["counts"] == {"used": 250, "unused": 150, "unknown": 100}

    out = timed("gc", "gc")
    assert "removed 150 recordings (150 from the notebook metadata); 350 left" in out
    data = listed(path, capsys)
    assert data["counts"] == {"used": 250, "unused": 0, "unknown": 100}
    assert {r["id"] for r in data["recordings"]} == {record_id(n) for n in (*range(200), *range(350, 500))}

    chosen = [record_id(n)[:10] for n in (*range(0, 200, 20), *range(450, 500, 10))]
    out = timed("clear 15", "clear", *chosen)
    assert "removed 15 recordings (10 from the notebook metadata, 5 from outputs' metadata); 335 left" in out
    assert len(listed(path, capsys)["recordings"]) == 335

    out = timed("clear --all", "clear", "--all")
    assert "removed 335 recordings" in out
    assert METADATA_KEY not in load(path)["metadata"] and output_records(load(path)) == []
    print("timings (s):", {name: round(seconds, 3) for name, seconds in timings.items()})


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (0, "just now"),
        (2 / 1440, "2 minutes ago"),
        (1 / 24, "1 hour ago"),
        (1, "1 day ago"),
        (3, "3 days ago"),
        (15, "2 weeks ago"),
        (59, "8 weeks ago"),
        (75, "2 months ago"),
        (800, "2 years ago"),
        (-1, "in the future"),
    ],
)
def test_age(days: float, expected: str) -> None:
    now = datetime.datetime(2025, 6, 1, 12, tzinfo=datetime.UTC)
    assert age((now - datetime.timedelta(days=days)).isoformat(), now) == expected


def test_age_unknown_or_without_a_zone() -> None:
    now = datetime.datetime(2025, 6, 1, 12, tzinfo=datetime.UTC)
    assert age("", now) == "unknown"
    assert age("yesterday", now) == "unknown"
    assert age("2025-05-29T12:00:00", now) == "3 days ago"  # read as UTC
    assert age("2025-05-29T12:00:00Z", now) == "3 days ago"


# Progress and explain without a kernel -----------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_updating_bar_on_a_terminal() -> None:
    nb = v4.new_notebook(
        cells=[v4.new_markdown_cell("x"), *(v4.new_code_cell(f"{n}") for n in range(4)), v4.new_code_cell("")]
    )
    stream = _Terminal()
    progress = _Progress(nb, stream)
    for index in range(1, 5):
        progress.start(None, index)
        progress.done(None, index, {"content": {"status": "ok"}})
    progress.close()
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert "\r[....................] 0/4 cells  cell 2 ..." in text
    assert "\r[##########..........] 2/4 cells" in text
    assert "\r[####################] 4/4 cells" in text
    assert "[1/4]" not in text

    stream = _Terminal()
    progress = _Progress(nb, stream)
    progress.start(None, 1)
    progress.done(None, 1, {"content": {"status": "ok"}})
    progress.start(None, 2)
    progress.done(None, 2, {"content": {"status": "error"}})
    progress.end_line("error")
    progress.close()
    assert stream.getvalue().endswith("\r[#####...............] 1/4 cells  cell 3 error\x1b[K\n")


class _CellError:
    def __init__(self, ename: str, evalue: str) -> None:
        self.ename, self.evalue, self.traceback = ename, evalue, ""


def test_explain_reports_a_miss_in_an_earlier_cell(capsys: pytest.CaptureFixture[str]) -> None:
    miss = _CellError("ReplayMissError", "No recording matches this step of role 'oracle'.")
    assert _explain_failure(4, 2, miss, {"nearest": "0123456789abcdef", "differing": ["input"]}) == 1
    assert capsys.readouterr().out.splitlines() == [
        "cell 3, before cell 5, would not replay: No recording matches this step of role 'oracle'.",
        "nearest recording: 0123456789ab; differs in: input",
        "cell 5 was not reached.",
    ]
    blocked = _CellError("ModelCallBlockedError", "A step of role 'oracle' would call a model.")
    assert _explain_failure(4, 4, blocked, {}) == 1
    assert capsys.readouterr().out == "cell 5 would call a model: A step of role 'oracle' would call a model.\n"


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("1", "cell 1 is a markdown cell, not a code cell"),
        ("7", "no cell '7': give a cell number from 1 to 6, or a cell id"),
        ("0", "no cell '0'"),
        ("nope", "no cell 'nope'"),
        ("6", "cell 6 is not executed headlessly"),
    ],
)
def test_explain_refuses_a_cell_without_a_step(
    tmp_path: Path, cell: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_notebook(tmp_path / "oracle.ipynb", "   ")
    before = path.read_bytes()
    assert main(["explain", str(path), cell]) == 2
    assert message in capsys.readouterr().err
    assert path.read_bytes() == before


def test_explain_help_says_what_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "runs code cells 1 to CELL headlessly" in text
    assert "mode 'replay' with model calls blocked" in text
    assert "the notebook file is not written" in text


# Explain with a kernel ---------------------------------------------------------------------------------------------


def test_explain_says_what_replays_and_why_a_step_would_not(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    assert main(["execute", str(notebook), "--record"]) == 0
    (recorded,) = load(notebook)["metadata"][METADATA_KEY]["records"]
    capsys.readouterr()
    (recording,) = listed(notebook, capsys)["recordings"]  # nbclient sends no cell id
    assert (recording["status"], recording["kept"], recording["tokens"]) == ("used", ["metadata"], 46)
    before = notebook.read_bytes()

    assert main(["explain", str(notebook), "4"]) == 0

    captured = capsys.readouterr()
    assert captured.out == (
        f"cell 4: a step of role 'oracle' (scripted:{recorded['backend'].split(':')[1]}) "
        f"replays from recording {recorded['id'][:12]}.\n"
    )
    assert "[3/3] cell 4 ... ok" in captured.err  # cells 1 to 4 only
    assert notebook.read_bytes() == before
    assert_settings_restored()

    # The question changes: the step would not replay, and the nearest recording differs in its input.
    nb = load(notebook)
    nb["cells"][3]["source"] = STEP.replace("six times seven", "seven times six")
    notebook.write_text(json.dumps(nb), encoding="utf-8")
    before = notebook.read_bytes()

    assert main(["explain", str(notebook), nb["cells"][3]["id"]]) == 1

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "cell 4 would not replay: No recording matches this step of role 'oracle' in the notebook oracle.ipynb."
    )
    assert "differs in: input." in out[0]
    assert out[1] == f"nearest recording: {recorded['id'][:12]}; differs in: input"
    assert notebook.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oracle.ipynb"]


# Untrusted text never reaches a terminal raw -------------------------------------------------------------------

RETITLE = "\x1b]0;you have been pwned\x07"
CLEAR_SCREEN = "\x1b[2J\x1b[H"
HOSTILE = (RETITLE, CLEAR_SCREEN, "\x9b2J", "abc\u202edcba", "a\rb\x08", "line\nbreak")


def hostile_record(n: int, role: str, backend: str, *, cell_id: str | None = None) -> dict[str, Any]:
    data = record_json(n, cell_id=cell_id)
    data["role"], data["backend"] = role, backend
    return data


def assert_inert(text: str) -> None:
    """No control or format character but line breaks and tabs (ours) in what was printed."""
    import unicodedata

    bad = [ch for ch in text if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
    assert bad == [], f"raw control characters printed: {bad!r} in {text!r}"


def test_records_holding_terminal_escapes_are_printed_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [
        hostile_record(n, role, backend, cell_id="deleted" if n % 2 else None)
        for n, (role, backend) in enumerate(zip(HOSTILE, reversed(HOSTILE), strict=True), start=1)
    ]
    path = notebook_with_records(tmp_path / "hostile.ipynb", records, [hostile_record(9, RETITLE, CLEAR_SCREEN)])

    for command in (
        ["list", str(path)],
        ["gc", str(path), "--unknown-too", "--dry-run"],
        ["clear", str(path), "--all", "--dry-run"],
        ["clear", str(path), record_id(1)],
    ):
        assert main(command) == 0, command
        captured = capsys.readouterr()
        assert_inert(captured.out + captured.err)
        assert "\\x1b]0;you have been pwned\\x07" in captured.out  # shown, escaped

    assert main(["list", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)  # C1 controls and bidirectional overrides too, which json.dumps leaves raw
    assert {r["role"] for r in json.loads(out)["recordings"]} == set(HOSTILE)


def test_a_notebook_file_name_and_errors_are_printed_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"x{CLEAR_SCREEN}.ipynb"
    path.write_text("{not json")
    assert main(["list", str(path)]) == 2
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    assert "x\\x1b[2J\\x1b[H.ipynb" in captured.err


def test_explain_prints_what_the_kernel_sent_inert(capsys: pytest.CaptureFixture[str]) -> None:
    from agl_notebook.cli.explain import _explain_success

    assert (
        _explain_failure(
            4,
            4,
            _CellError("ReplayMissError", f"role {RETITLE!s} missed{CLEAR_SCREEN}"),
            {"nearest": f"0123{RETITLE}", "differing": [CLEAR_SCREEN]},
        )
        == 1
    )
    assert _explain_failure(4, 4, _CellError("ModelCallBlockedError", RETITLE), {}) == 1
    cell = v4.new_code_cell(
        STEP,
        outputs=[
            v4.new_output(
                "display_data",
                data={"text/plain": "the step"},
                metadata={METADATA_KEY: {"version": 1, "records": [hostile_record(1, RETITLE, CLEAR_SCREEN)]}},
            )
        ],
    )
    assert _explain_success(4, cell, {record_id(1)}) == 0
    assert _explain_success(4, cell, set()) == 0
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    assert captured.out.count("\\x1b]0;you have been pwned\\x07") == 4


# Answers for a headless run -------------------------------------------------------------------------------------


def question_notebook(path: Path) -> Path:
    from tests.support.planner_notebook import SETUP as PLANNER_SETUP

    cells = [
        v4.new_code_cell(PLANNER_SETUP),
        v4.new_code_cell('run = Run(model=MODEL)\nprint(await run.step(planner, "Plan a meeting"))'),
    ]
    nbformat.write(v4.new_notebook(cells=cells), path)
    return path


def test_execute_answers_live_questions(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = question_notebook(tmp_path / "planner.ipynb")
    before = notebook.read_bytes()

    assert main(["execute", str(notebook)]) == 1  # nobody can answer
    assert "NoAnswerError" in capsys.readouterr().err
    assert notebook.read_bytes() == before

    assert main(["execute", str(notebook), "--answers", '["Tuesday"]']) == 0

    assert_settings_restored()
    assert ANSWERS_VARIABLE not in os.environ
    nb = load(notebook)
    (printed,) = [o for o in nb["cells"][1]["outputs"] if o["output_type"] == "stream"]
    assert "".join(printed["text"]) == "Plan(steps=['Meet on Tuesday'])\n"
    (record,) = output_records(nb)
    assert record["records"][0]["questions"][0]["answer"] == "Tuesday"


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ('"Tuesday"', "expected a JSON list of answers, not a JSON string"),
        ("{}", "not a JSON object"),
        ('{"triager": 3}', "keyed by map, item and question"),
        ('{"triager": {"first": {"Which?": "a"}}}', "'first' must be an item index"),
        ("[Tuesday]", "expected a JSON list of answers: Expecting value at column 2"),
    ],
)
def test_execute_refuses_answers_that_are_not_a_json_list_or_map_answers(
    tmp_path: Path, answers: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = question_notebook(tmp_path / "planner.ipynb")
    assert main(["execute", str(notebook), "--answers", answers]) == 2
    assert message in capsys.readouterr().err


def test_execute_passes_map_items_answers_keyed_by_map_item_and_question_on_as_given() -> None:
    from agl_notebook.cli import _answers

    keyed = '{"triager": {"3": {"Which day?": "Monday"}, "10": {"Which room?": ["Birch", true]}}}'
    assert _answers(keyed) == keyed


def test_plain_execute_runs_a_notebook_whose_block_is_corrupt_and_writes_the_block_back_as_it_was(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    nb = load(notebook)
    nb["metadata"][METADATA_KEY] = {"version": 99, "records": ["from a newer release"]}
    notebook.write_text(json.dumps(nb), encoding="utf-8")

    assert main(["execute", str(notebook)]) == 0

    err = capsys.readouterr().err
    assert "reads version 1, found 99" in err
    assert "its steps run live, and it is written back as it is" in err
    executed = load(notebook)
    assert executed["metadata"][METADATA_KEY] == {"version": 99, "records": ["from a newer release"]}
    assert printed_calls(executed) == "1"
