"""Reliability, bad recordings: ``agl-notebook gc`` never removes a recording that a cell still replays.

Each notebook is recorded for real (``agl-notebook execute --record``: nbclient, a real kernel, a scripted model),
then changed the way people change notebooks (a cell deleted, outputs cleared, the notebook rebuilt from its
jupytext script), collected with ``gc``, and run again in mode ``replay``, where a step without its recording fails
the run: the model serves no request (its call count, printed by the last cell, stays 0).

Found while writing this (and fixed): two cells running the same step share one record, which the later cell's
output claimed for itself, so deleting that cell made the record "unused" and ``gc`` removed what the earlier cell
replayed; a map and a later comparison over the same rows lost the map's records that way; after ``execute
--record`` a large map's sidecar records were "unknown"; and a notebook rebuilt by jupytext (new cell ids) had every
record "unused". A record now keeps every cell that recorded or replayed it, with a digest of its source.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY, records_in_notebook
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay.sidecar import header_text, read_sidecar
from agl_notebook.replay.stores import RecordingWarning
from tests.support.oracle_notebook import SETUP, STEP, nbformat, v4
from tests.support.records import tiny_record

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

AREA = "Bad recordings"

SECOND_ROLE = """
second = Role(
    name="second", instructions="Answer briefly.", tools=[reporting_tool("answer", "Give the answer.", Answer)]
)
ROWS = [f"What is {n} times seven?" for n in range(30)]"""

AGAIN = 'again = await run.step(role, "What is six times seven?")\nagain'
MAP = 'mapped = await run.map(role, ROWS, name="rows")\nlen(mapped)'
COMPARE = 'compared = await run.compare({"oracle": role, "second": second}, ROWS, name="versus")'
CALLS = "print(MODEL.calls)"


def notebook(path: Path, *cells: tuple[str, str]) -> Path:
    """The oracle's setup and a Run, then ``cells`` (id, source), then a cell printing the model's call count."""
    made = [v4.new_code_cell(SETUP + SECOND_ROLE), v4.new_code_cell("run = Run(model=MODEL)")]
    made += [v4.new_code_cell(source) for _, source in cells] + [v4.new_code_cell(CALLS)]
    for cell, cell_id in zip(made, ["setup", "run", *(i for i, _ in cells), "calls"], strict=True):
        cell["id"] = cell_id
    nbformat.write(v4.new_notebook(cells=made), path)
    return path


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def save(path: Path, nb: dict[str, Any]) -> None:
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")


def calls(nb: dict[str, Any]) -> str:
    """What the last cell printed: the requests the scripted model served."""
    (stream,) = nb["cells"][-1]["outputs"]
    return "".join(stream["text"]).strip()


def delete_cell(path: Path, cell_id: str) -> None:
    nb = load(path)
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != cell_id]
    save(path, nb)


def clear_outputs(path: Path) -> None:
    """Every output gone (JupyterLab's Clear All Outputs): no output names a record any more."""
    nb = load(path)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    save(path, nb)


def statuses(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert main(["list", str(path), "--json"]) == 0
    return {r["id"]: r["status"] for r in json.loads(capsys.readouterr().out)["recordings"]}


def gc(path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> str:
    capsys.readouterr()
    assert main(["gc", str(path), *options]) == 0
    return capsys.readouterr().out


def replays_with_requests_refused(path: Path) -> None:
    """Every step of the notebook replays: run in mode replay (a miss fails the run), the model serves nothing."""
    replayed = path.with_name("replayed.ipynb")
    assert main(["execute", str(path), "--mode", "replay", "--output", str(replayed)]) == 0, "a step did not replay"
    assert calls(load(replayed)) == "0"


def test_gc_keeps_a_record_two_cells_share_after_the_later_one_is_deleted(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], reliability: Any
) -> None:
    path = notebook(tmp_path / "twice.ipynb", ("first", STEP), ("again", AGAIN))
    assert main(["execute", str(path), "--record"]) == 0
    assert calls(load(path)) == "1", "the second cell replayed the first one's record"
    (record_id,) = records_in_notebook(load(path)).records

    delete_cell(path, "again")
    assert statuses(path, capsys) == {record_id: "used"}
    assert "nothing to remove" in gc(path, capsys)
    replays_with_requests_refused(path)

    clear_outputs(path)  # no output names it now: only the cells it keeps tell
    assert statuses(path, capsys) == {record_id: "used"}
    assert "nothing to remove" in gc(path, capsys, "--unknown-too")
    replays_with_requests_refused(path)

    # The first cell deleted instead: the second one replays it, and keeps it.
    path = notebook(tmp_path / "other.ipynb", ("first", STEP), ("again", AGAIN))
    assert main(["execute", str(path), "--record"]) == 0
    delete_cell(path, "first")
    clear_outputs(path)
    assert "nothing to remove" in gc(path, capsys)
    replays_with_requests_refused(path)

    # Both deleted: provably unused, and gc removes it.
    delete_cell(path, "again")
    assert statuses(path, capsys) == {record_id: "unused"}
    assert "removed 1 recording" in gc(path, capsys)
    reliability.note(
        AREA,
        "two cells run the same step (one record); either cell deleted, outputs cleared, then gc",
        "the record is 'used' by the cell left and kept; that cell replays in mode replay with no model request; "
        "with both cells deleted it is 'unused' and gc removes it",
        records_lost=0,
    )


def test_gc_keeps_a_maps_records_after_the_comparison_over_the_same_rows_is_deleted(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], reliability: Any
) -> None:
    path = notebook(tmp_path / "versus.ipynb", ("map", MAP), ("compare", COMPARE))
    assert main(["execute", str(path), "--record"]) == 0
    assert calls(load(path)) == "60", "the comparison's first variant replayed the map's 30 records"
    before = statuses(path, capsys)
    assert len(before) == 60 and set(before.values()) == {"used"}

    delete_cell(path, "compare")
    clear_outputs(path)
    after = statuses(path, capsys)
    assert sorted(after.values()).count("used") == 30 and sorted(after.values()).count("unused") == 30
    out = gc(path, capsys)
    assert "removed 30 recordings" in out and out.count("role 'second'") == 30, out
    assert sorted(statuses(path, capsys).values()) == ["used"] * 30
    replays_with_requests_refused(path)
    reliability.note(
        AREA,
        "a map and a later run.compare over the same 30 rows; the compare cell deleted, outputs cleared, then gc",
        "gc removes the 30 records of the deleted comparison's other variant only; the map's 30 are 'used' and "
        "replay in mode replay with no model request",
        records_lost=0,
    )


def test_a_maps_sidecar_records_recorded_headlessly_are_used_and_survive_gc_unknown_too(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", "0")  # every record in the sidecar file
    path = notebook(tmp_path / "big.ipynb", ("map", MAP))
    assert main(["execute", str(path), "--record"]) == 0
    sidecar = tmp_path / "rows.agl.jsonl"
    assert len(read_sidecar(sidecar, key="rows").records) == 30
    clear_outputs(path)  # the naming is in the notebook metadata now; no output names the file
    assert set(statuses(path, capsys).values()) == {"used"}
    assert "nothing to remove" in gc(path, capsys, "--unknown-too")
    assert len(read_sidecar(sidecar, key="rows").records) == 30
    replays_with_requests_refused(path)


def test_a_notebook_rebuilt_by_jupytext_keeps_its_records_used(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], reliability: Any
) -> None:
    import jupytext  # type: ignore[import-untyped]  # no type information

    path = notebook(tmp_path / "paired.ipynb", ("first", STEP), ("again", AGAIN), ("map", MAP))
    assert main(["execute", str(path), "--record"]) == 0
    recorded = records_in_notebook(load(path)).records
    assert len(recorded) == 31

    # Paired with a script that keeps the notebook metadata, and rebuilt from it: new cell ids, no outputs.
    nb = jupytext.read(path)
    nb.metadata["jupytext"] = {"notebook_metadata_filter": "all"}
    script = jupytext.writes(nb, fmt="py:percent")
    rebuilt = jupytext.reads(script, fmt="py:percent")
    jupytext.write(rebuilt, path, fmt="ipynb")
    cells = load(path)["cells"]
    assert not {"first", "again", "map"} & {c["id"] for c in cells} and all(not c.get("outputs") for c in cells)
    assert records_in_notebook(load(path)).records.keys() == recorded.keys()

    assert set(statuses(path, capsys).values()) == {"used"}
    assert "nothing to remove" in gc(path, capsys)
    replays_with_requests_refused(path)
    reliability.note(
        AREA,
        "a recorded notebook rebuilt from its jupytext script (py:percent, metadata kept): every cell id new, "
        "no outputs",
        "its 31 records are 'used' (the cells are recognised by their sources); gc removes none; the notebook "
        "replays in mode replay with no model request",
        records_lost=0,
    )


def test_an_old_record_naming_a_deleted_cell_is_unknown_never_unused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kept before records named every cell using them: its cell_id alone (a later cell, perhaps) proves nothing.
    old = tiny_record("old-record", {"text": "x"}).to_json() | {"cell_id": "deleted-cell"}
    path = notebook(tmp_path / "old.ipynb", ("first", STEP))
    nb = load(path)
    nb["metadata"][METADATA_KEY] = {"version": 1, "records": [old]}
    save(path, nb)
    assert statuses(path, capsys) == {"old-record": "unknown"}
    assert "nothing to remove" in gc(path, capsys)


# Links -------------------------------------------------------------------------------------------------------------


def map_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", "0")
    return NotebookStore(locate=lambda: path).for_map("rows")


def within(seconds: float, work: Any) -> Any:
    """``work()``'s result, failing the test if it has not returned within ``seconds`` (a hang, not a slow run)."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(work()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"still running after {seconds} s"
    return done[0]


LINKS = {
    "dangling": "to a file that does not exist",
    "outside": "to a sidecar outside the notebook's folder",
    "loop": "to itself",
}


@pytest.mark.parametrize("link", list(LINKS))
def test_a_symlinked_sidecar_is_refused_never_followed_nor_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], link: str, reliability: Any
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    path = notebook(folder / "nb.ipynb", ("map", MAP))
    outside = tmp_path / "elsewhere.agl.jsonl"
    sidecar = folder / "rows.agl.jsonl"
    if link == "outside":  # a real sidecar of the map, outside the notebook's folder
        outside.write_text(header_text("rows") + "\n", encoding="utf-8")
        sidecar.symlink_to(outside)
    elif link == "dangling":
        sidecar.symlink_to(tmp_path / "gone.agl.jsonl")
    else:
        sidecar.symlink_to(sidecar)  # a link to itself
    before = outside.read_bytes() if outside.exists() else None
    items = map_store(path, monkeypatch)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = within(10, lambda: items.put(tiny_record("item-1", {"text": "a"})))
        block = within(10, items.saved_block)

    said = [str(w.message) for w in caught if issubclass(w.category, RecordingWarning)]
    assert any(f"{sidecar}: a symbolic link, not a sidecar file" in m for m in said), said
    assert kept.id == "item-1" and [r["id"] for r in block["records"]] == ["item-1"], "kept in the notebook"
    assert (outside.read_bytes() if outside.exists() else None) == before, "nothing written through the link"
    assert not (tmp_path / "gone.agl.jsonl").exists()
    assert sidecar.is_symlink()

    # The command line refuses it too, naming it, and writes nothing through it.
    nb = load(path)
    nb["metadata"][METADATA_KEY] = {
        "version": 1,
        "records": [],
        "sidecars": [{"file": "rows.agl.jsonl", "key": "rows", "lines": 1, "bytes": 1, "sha256": "0" * 64}],
    }
    save(path, nb)
    capsys.readouterr()
    assert within(20, lambda: main(["list", str(path)])) == 0
    assert f"{sidecar}: a symbolic link, not a sidecar file" in capsys.readouterr().out
    assert within(20, lambda: main(["gc", str(path), "--unknown-too"])) == 0
    assert (outside.read_bytes() if outside.exists() else None) == before
    reliability.note(
        "Untrusted notebooks",
        f"the map's sidecar file is a symbolic link ({link}: {LINKS[link]})",
        "a RecordingWarning names the link; the map's records stay in the notebook; nothing is written through "
        "it and nothing hangs; list names it, gc leaves it",
        records_lost=0,
    )


def test_a_hard_linked_sidecar_is_refused_never_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], reliability: Any
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    path = notebook(folder / "nb.ipynb", ("map", MAP))
    outside = tmp_path / "elsewhere.agl.jsonl"  # a file outside the folder, with a second name inside it
    outside.write_text(header_text("rows") + "\n", encoding="utf-8")
    sidecar = folder / "rows.agl.jsonl"
    os.link(outside, sidecar)
    before = outside.read_bytes()
    items = map_store(path, monkeypatch)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = within(10, lambda: items.put(tiny_record("item-1", {"text": "a"})))
        block = within(10, items.saved_block)

    said = [str(w.message) for w in caught if issubclass(w.category, RecordingWarning)]
    assert any(f"{sidecar}: a file with 2 hard links, not a plain sidecar file" in m for m in said), said
    assert kept.id == "item-1" and [r["id"] for r in block["records"]] == ["item-1"], "kept in the notebook"
    assert outside.read_bytes() == before, "nothing appended through the second name"

    # A sidecar this library makes is linked into place from a temporary file: never refused for it.
    made = NotebookStore(locate=lambda: path).for_map("made")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordingWarning)
        within(10, lambda: made.put(tiny_record("item-2", {"text": "b"})))
    assert (folder / "made.agl.jsonl").stat().st_nlink == 1
    assert "item-2" in (folder / "made.agl.jsonl").read_text(encoding="utf-8")
    reliability.note(
        "Untrusted notebooks",
        "the map's sidecar file is a hard link to a file outside the notebook's folder",
        "a RecordingWarning names it; the map's records stay in the notebook; nothing is appended to the file",
        records_lost=0,
    )
