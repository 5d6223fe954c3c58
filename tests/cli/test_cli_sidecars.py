"""``agl-notebook list | gc | clear | consolidate`` on notebooks that name sidecar files (no kernel needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.records import CellUse, StepRecord, source_digest
from agl_notebook.replay.sidecar import SidecarWriter, line_text, naming_from_json, read_sidecar

SIDECAR = "oracle-map.agl.jsonl"


def record(n: int, cell_id: str | None = "map-cell", result: str = "ok") -> StepRecord:
    """Item ``n`` of a map recorded in the cell ``cell_id``, whose source was ``await run.map()``."""
    return StepRecord(
        id=f"item-{n:04d}", parts={}, occurrence=0, role="oracle", backend="scripted:x", input=n, result=result,
        transcript=(), cell_id=cell_id, cells=(CellUse(cell_id, source_digest("await run.map()")),) if cell_id else (),
    )  # fmt: skip


def with_sidecar(folder: Path, *records: StepRecord, other: list[str] | None = None, source: str = "await run.map()"
) -> tuple[Path, Path]:  # fmt: skip
    """A notebook whose map cell's output names a sidecar holding ``records`` (and ``other`` lines)."""
    sidecar = folder / SIDECAR
    writer = SidecarWriter(sidecar, "oracle-map")
    writer.append([line_text(r) for r in records] + (other or []))
    block = {"version": 1, "records": [], "sidecars": [writer.naming().to_json()]}
    output = {"output_type": "display_data", "data": {"text/plain": "map"}, "metadata": {METADATA_KEY: block}}
    cells = [
        {"cell_type": "code", "id": "setup", "source": "run = Run()", "metadata": {}, "outputs": [],
         "execution_count": None},
        {"cell_type": "code", "id": "map-cell", "source": source, "metadata": {}, "outputs": [output],
         "execution_count": None},
    ]  # fmt: skip
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    path = folder / "nb.ipynb"
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return path, sidecar


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_list_shows_the_sidecar_and_its_records_used_by_the_cell_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = with_sidecar(tmp_path, record(0), record(1), other=['{"kind":"batch","id":"b1"}'])
    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sidecar oracle-map.agl.jsonl: 2 records, 1 other line; checks out (named in cell 2)" in out
    assert out.count("sidecar  used (cell 2)") == 2, out
    assert main(["list", str(path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["sidecars"][0] == {
        **listed["sidecars"][0], "file": SIDECAR, "state": "ok", "records": 2, "lines": 4, "output_cells": [2],
    }  # fmt: skip
    assert [r["sidecar"] for r in listed["recordings"]] == [SIDECAR, SIDECAR]
    assert [r["kept"] for r in listed["recordings"]] == [["sidecar"], ["sidecar"]]


def test_list_of_a_missing_or_changed_sidecar_warns_naming_the_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, sidecar = with_sidecar(tmp_path, record(0), record(1))
    text = sidecar.read_text(encoding="utf-8")
    sidecar.write_text(text.replace('"ok"', '"edited"'), encoding="utf-8")
    assert main(["list", str(path)]) == 0
    captured = capsys.readouterr()
    assert "CHANGED since it was named" in captured.out
    assert f"{sidecar}: its first 3 lines are not those the notebook named" in captured.err
    sidecar.unlink()
    before = path.read_bytes()
    assert main(["list", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"sidecar {SIDECAR}: missing (named in cell 2): {sidecar}: the sidecar file is missing." in captured.out
    assert f"{sidecar}: the sidecar file is missing. Left as it is." in captured.err
    assert main(["gc", str(path), "--unknown-too"]) == 0
    assert path.read_bytes() == before and not sidecar.exists()


def test_gc_removes_unused_sidecar_records_only_when_asked_rewriting_it_atomically_and_naming_it_anew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = "another-notebooks-cell"
    records = [record(0), record(1), record(2, cell_id=elsewhere), record(2, cell_id=elsewhere, result="newer")]
    path, sidecar = with_sidecar(tmp_path, *records, other=['{"kind":"batch","id":"b1"}', "torn{"], source="")
    before = (path.read_bytes(), sidecar.read_bytes())
    assert main(["gc", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove 2 recordings (2 lines from the sidecar oracle-map.agl.jsonl)" in out
    assert "and 1 sidecar line a later line of the same id replaced" in out
    assert (path.read_bytes(), sidecar.read_bytes()) == before, "a dry run writes nothing"

    assert main(["gc", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rewrote the sidecar oracle-map.agl.jsonl (atomically)" in out
    read = read_sidecar(sidecar, key="oracle-map")
    assert list(read.records) == ["item-0002"], "the unknown one (another notebook's cell) is kept"
    assert read.records["item-0002"].result == "newer" and len(read.lines) == 3
    assert [line.text for line in read.lines][1:] == [b'{"kind":"batch","id":"b1"}', b"torn{"], "other lines kept"
    (naming,) = load(path)["cells"][1]["outputs"][0]["metadata"][METADATA_KEY]["sidecars"]
    assert read_sidecar(sidecar, naming=naming_from_json(naming, where="n")).unchanged, "named anew, and it checks out"


def test_clear_all_removes_a_sidecar_left_empty_and_its_naming(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, sidecar = with_sidecar(tmp_path, record(0), record(1))
    assert main(["clear", str(path), "--all"]) == 0
    assert "removed the sidecar oracle-map.agl.jsonl: nothing was left in it" in capsys.readouterr().out
    assert not sidecar.exists()
    assert METADATA_KEY not in load(path)["cells"][1]["outputs"][0]["metadata"]


def test_consolidate_moves_the_naming_into_the_notebook_metadata_and_list_still_finds_the_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = with_sidecar(tmp_path, record(0))
    assert main(["consolidate", str(path)]) == 0
    assert "moved 0 records and the naming of 1 sidecar file into the notebook metadata" in capsys.readouterr().out
    nb = load(path)
    assert nb["metadata"][METADATA_KEY]["sidecars"][0]["file"] == SIDECAR
    assert METADATA_KEY not in nb["cells"][1]["outputs"][0]["metadata"]
    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out
    assert "named in the notebook metadata" in out and "sidecar  used (cell 2)" in out
