"""The notebook's map store: a small map's records kept like a step's, a large one's in its sidecar file.

Tested through `NotebookStore.for_map` outside a kernel (a located notebook file, a fresh kernel session each test);
tests/notebook/test_sidecar_kernel.py does the same in a real kernel.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.errors import InputError
from agl_notebook.notebook import frontend as frontend_module
from agl_notebook.notebook import store as store_module
from agl_notebook.notebook.frontend import FrontendLink
from agl_notebook.notebook.nbfile import METADATA_KEY, consolidate, records_in_notebook
from agl_notebook.notebook.store import NotebookMapStore, NotebookStore
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.sidecar import header_text, read_sidecar
from agl_notebook.replay.stores import MapStore, RecordingWarning

KEY = "oracle-map"
SIDECAR = "oracle-map.agl.jsonl"


def record(n: int, result: str = "forty-two") -> StepRecord:
    return StepRecord(
        id=f"item-{n:04d}", parts={}, occurrence=0, role="oracle", backend="scripted:x", input=n, result=result,
        transcript=(),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a new kernel: nothing recorded, nothing told."""
    monkeypatch.setattr(store_module, "_kernel_session", store_module._KernelSession())
    monkeypatch.delenv("AGL_NOTEBOOK_SIDECAR_BYTES", raising=False)


def ids(block: JsonObject) -> list[str]:
    """The ids of the records a block lists."""
    records = block["records"]
    assert isinstance(records, list)
    return [str(r["id"]) for r in records if isinstance(r, dict)]


def naming_of(block: JsonObject) -> JsonObject:
    """The one sidecar a block names."""
    namings = block["sidecars"]
    assert isinstance(namings, list) and len(namings) == 1 and isinstance(namings[0], dict)
    return namings[0]


def notebook(path: Path, *outputs: JsonObject, metadata_block: Any = None) -> Path:
    """A notebook file with one code cell holding ``outputs``."""
    cell = {"cell_type": "code", "id": "c1", "source": "await run.map(...)", "metadata": {}, "outputs": list(outputs)}
    nb: dict[str, Any] = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}
    if metadata_block is not None:
        nb["metadata"][METADATA_KEY] = metadata_block
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def output(block: JsonObject) -> JsonObject:
    return {"output_type": "display_data", "data": {"text/plain": "map"}, "metadata": {METADATA_KEY: block}}


def new_kernel(monkeypatch: pytest.MonkeyPatch, path: Path) -> NotebookStore:
    """The store of a new kernel (a restart) running the notebook at ``path``."""
    monkeypatch.setattr(store_module, "_kernel_session", store_module._KernelSession())
    return NotebookStore(locate=lambda: path)


def run_map(path: Path, count: int, *, limit: int | None, monkeypatch: pytest.MonkeyPatch) -> tuple[MapStore, Path]:
    if limit is not None:
        monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", str(limit))
    items = NotebookStore(locate=lambda: path).for_map(KEY)
    for n in range(count):
        items.put(record(n))
    return items, path.parent / SIDECAR


def test_a_small_maps_records_are_kept_like_a_steps_and_its_block_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, sidecar = run_map(path, 3, limit=None, monkeypatch=monkeypatch)
    assert isinstance(items, NotebookMapStore) and items.limit == 1_000_000
    block = items.saved_block()
    assert ids(block) == ["item-0000", "item-0001", "item-0002"]
    assert "sidecars" not in block and not sidecar.exists()
    assert NotebookStore(locate=lambda: path).get("item-0001") is not None, "in the kernel session, as a step's"


def test_past_the_limit_the_records_move_to_the_sidecar_and_the_block_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, sidecar = run_map(path, 2, limit=500, monkeypatch=monkeypatch)
    assert not sidecar.exists(), "two records are under 500 bytes"
    for n in range(2, 10):
        items.put(record(n))
    read = read_sidecar(sidecar, key=KEY)
    assert list(read.records) == [f"item-{n:04d}" for n in range(10)], "the first ones moved, the rest appended"
    block = items.saved_block()
    assert block["records"] == [] and block["version"] == 1
    naming = naming_of(block)
    assert naming == {**naming, "file": SIDECAR, "key": KEY, "lines": 11, "bytes": sidecar.stat().st_size}
    assert NotebookStore(locate=lambda: path).get("item-0000") is None, "no longer in the kernel session"
    assert items.get("item-0000") is not None and items.get("item-0009") is not None
    assert NotebookStore(locate=lambda: path).for_map(KEY).get("item-0005") is not None, "a later cell finds them"


def test_a_map_whose_sidecar_is_there_appends_to_it_from_its_first_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    run_map(path, 5, limit=0, monkeypatch=monkeypatch)
    monkeypatch.delenv("AGL_NOTEBOOK_SIDECAR_BYTES")
    items = new_kernel(monkeypatch, path).for_map(KEY)
    assert items.get("item-0003") is not None, "a restarted kernel finds the map's records by its key"
    items.put(record(7, "refreshed"))
    assert read_sidecar(path.parent / SIDECAR, key=KEY).records["item-0007"].result == "refreshed"
    assert items.saved_block()["records"] == []


def test_the_saved_notebook_and_a_copy_beside_it_replay_from_the_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, _ = run_map(path, 4, limit=0, monkeypatch=monkeypatch)
    notebook(path, output(items.saved_block()))  # what the map's final display leaves in the saved file
    for name in ("nb.ipynb", "nb.nbconvert.ipynb", "output.ipynb"):
        if name != path.name:
            shutil.copy(path, tmp_path / name)
        store = new_kernel(monkeypatch, tmp_path / name)
        assert store.get("item-0002") is not None, name
        assert {r.id for r in store.records()} >= {"item-0000", "item-0003"}, name


def test_a_missing_sidecar_is_a_warning_naming_the_file_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, sidecar = run_map(path, 2, limit=0, monkeypatch=monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = notebook(elsewhere / "nb.ipynb", output(items.saved_block()))
    with pytest.warns(RecordingWarning) as told:
        assert new_kernel(monkeypatch, copy).get("item-0000") is None
    assert [str(w.message) for w in told] == [
        f"Recordings not read: {elsewhere / SIDECAR}: the sidecar file is missing. The steps it holds run live where "
        "they can; nothing in it is changed."
    ]
    assert not (elsewhere / SIDECAR).exists() and sidecar.exists()


def test_a_sidecar_changed_since_it_was_named_is_a_warning_and_its_records_still_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, sidecar = run_map(path, 3, limit=0, monkeypatch=monkeypatch)
    notebook(path, output(items.saved_block()))
    lines = sidecar.read_text(encoding="utf-8").split("\n")
    sidecar.write_text("\n".join([lines[0], lines[2], lines[3], "{torn"]), encoding="utf-8")  # cut and torn
    before = sidecar.read_bytes()
    store = new_kernel(monkeypatch, path)
    with pytest.warns(RecordingWarning) as told:
        found = store.get("item-0001")
    assert found is not None and store.get("item-0000") is None
    messages = [str(w.message) for w in told]
    assert len(messages) == 2 and all(str(sidecar) in m for m in messages), messages
    assert "not those the notebook named" in messages[0] and "cut short" in messages[1]
    assert sidecar.read_bytes() == before


def test_a_file_that_is_not_the_maps_sidecar_is_left_alone_and_the_records_stay_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    (tmp_path / SIDECAR).write_text(header_text("another-map") + "\n", encoding="utf-8")
    before = (tmp_path / SIDECAR).read_bytes()
    monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", "0")
    items = NotebookStore(locate=lambda: path).for_map(KEY)
    with pytest.warns(RecordingWarning, match=f"stay in the notebook: {tmp_path / SIDECAR}: the sidecar of map"):
        items.put(record(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        items.put(record(1))  # said once
    assert ids(items.saved_block()) == ["item-0000", "item-0001"]
    assert (tmp_path / SIDECAR).read_bytes() == before


def test_a_record_in_a_sidecar_is_scrubbed_of_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sidecar-" + "secret-value-1"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    path = notebook(tmp_path / "nb.ipynb")
    items, sidecar = run_map(path, 1, limit=0, monkeypatch=monkeypatch)
    items.put(record(1, f"the token is {secret}"))
    text = sidecar.read_text(encoding="utf-8")
    assert secret not in text and "the token is" in text
    assert secret not in json.dumps(items.saved_block())


def test_a_bad_limit_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", "1 MB")
    with pytest.raises(InputError, match="AGL_NOTEBOOK_SIDECAR_BYTES='1 MB': expected a whole number of bytes"):
        NotebookStore(locate=lambda: tmp_path / "nb.ipynb").for_map(KEY)


def test_consolidate_moves_the_naming_into_the_notebook_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, _ = run_map(path, 2, limit=0, monkeypatch=monkeypatch)
    naming = naming_of(items.saved_block())
    nb = json.loads(
        notebook(path, output(items.saved_block()), metadata_block={"version": 1, "records": []}).read_text()
    )
    assert consolidate(nb) == 1
    assert nb["metadata"][METADATA_KEY] == {"version": 1, "records": [], "sidecars": [naming]}
    assert METADATA_KEY not in nb["cells"][0]["outputs"][0]["metadata"]
    found = records_in_notebook(nb)
    assert SIDECAR in found.sidecars_in_metadata and not found.sidecar_cells
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert new_kernel(monkeypatch, path).get("item-0001") is not None


def test_a_map_replayed_from_its_sidecar_names_it_and_keeping_a_replayed_record_does_not_grow_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    run_map(path, 3, limit=0, monkeypatch=monkeypatch)
    monkeypatch.delenv("AGL_NOTEBOOK_SIDECAR_BYTES")
    sidecar = tmp_path / SIDECAR
    before = sidecar.read_bytes()
    items = new_kernel(monkeypatch, path).for_map(KEY)
    replayed = [items.get(f"item-{n:04d}") for n in range(3)]
    for found in replayed:
        assert found is not None
        items.put(found)
    assert sidecar.read_bytes() == before
    assert naming_of(items.saved_block())["lines"] == 4, "the replayed map's display names the file it replayed from"


def test_a_naming_the_extension_hands_over_unsaved_is_read_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, _ = run_map(path, 2, limit=0, monkeypatch=monkeypatch)
    unsaved = {"version": 1, "records": [], "sidecars": [naming_of(items.saved_block())]}
    frontend = FrontendLink()
    monkeypatch.setattr(frontend_module, "_link", frontend)
    store = new_kernel(monkeypatch, path)  # the saved file names no sidecar: the notebook was not saved
    assert store.get("item-0001") is None
    frontend._on_msg({"content": {"data": {"op": "records", "path": "nb.ipynb", "block": unsaved}}})
    assert list(frontend.unsaved_sidecars) == [SIDECAR]
    assert store.get("item-0001") is not None


def test_consolidate_refuses_to_replace_a_sidecars_entry_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, _ = run_map(path, 1, limit=0, monkeypatch=monkeypatch)
    damaged = {"version": 1, "records": [], "sidecars": "oracle-map.agl.jsonl"}
    nb = json.loads(notebook(path, output(items.saved_block()), metadata_block=damaged).read_text())
    with pytest.raises(InputError, match="'sidecars' that is not a list"):
        consolidate(nb)
    assert nb["metadata"][METADATA_KEY] == damaged


def test_a_replayed_maps_block_saves_every_record_it_found_inline_or_beside_the_naming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = notebook(tmp_path / "nb.ipynb")
    items, _ = run_map(path, 2, limit=None, monkeypatch=monkeypatch)
    notebook(path, output(items.saved_block()))  # a small map, saved inline
    again = new_kernel(monkeypatch, path).for_map(KEY)
    assert again.get("item-0000") is not None and again.get("item-0001") is not None
    assert ids(again.saved_block()) == ["item-0000", "item-0001"], "as a replayed step's display saves its record"

    monkeypatch.setenv("AGL_NOTEBOOK_SIDECAR_BYTES", "0")
    grown = new_kernel(monkeypatch, path).for_map(KEY)
    assert grown.get("item-0000") is not None
    grown.put(record(5))  # past the limit: what it kept and found moves to the sidecar
    assert grown.get("item-0001") is not None  # found in the notebook after the move: listed beside the naming
    block = grown.saved_block()
    assert ids(block) == ["item-0001"] and naming_of(block)["file"] == SIDECAR
    assert list(read_sidecar(tmp_path / SIDECAR, key=KEY).records) == ["item-0000", "item-0005"]
