"""A store's `RecordIndex` follows it put by put: the same previous version and contents as a pass over its records.

The memory store's and the notebook store's (its file, this kernel session, records forgotten)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agl_notebook.notebook import frontend, nbfile
from agl_notebook.notebook import store as notebook_store
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay import MemoryStore
from agl_notebook.replay.records import StepRecord, Waiting, block_to_json
from agl_notebook.replay.stores import Store
from agl_notebook.replay.versions import ContentIndex, previous_version


def _record(record_id: str, *, at: str, text: str | None = None, partial: bool = False, role: str = "r") -> StepRecord:
    return StepRecord(
        id=record_id,
        parts={"input": "in", "instructions": f"d-{text}"},
        occurrence=0,
        role=role,
        backend="scripted:x",
        input="hello",
        result=None if partial else {"n": record_id},
        transcript=(),
        recorded_at=at,
        contents={"instructions": text} if text is not None else {},
        partial=Waiting(on="question", tool_call_id="t1", tool="ask") if partial else None,
    )


def _agrees(store: Store, not_id: str) -> None:
    index = store.version_index()  # type: ignore[attr-defined]
    records = store.records()
    found = index.previous(cell_id=None, role="r", input_digest="in", occurrence=0, not_id=not_id)
    scanned = previous_version(records, cell_id=None, role="r", input_digest="in", occurrence=0, not_id=not_id)
    assert found is scanned
    fresh = ContentIndex(records)
    for text in ("one", "two", "three"):
        assert index.contents.holds("instructions", f"d-{text}") == fresh.holds("instructions", f"d-{text}")


def test_a_stores_index_follows_puts_replacements_partials_and_discards() -> None:
    store = MemoryStore([_record("a", at="1", text="one")])
    _agrees(store, "new")  # made now, from the store's records
    store.put(_record("b", at="1", text="two"))  # a tie in time: the later in the store's order wins
    _agrees(store, "new")
    store.put(_record("a", at="1"))  # replaced in its place, without its content: "one" is kept by no record now
    _agrees(store, "new")
    assert not store.version_index().contents.holds("instructions", "d-one")
    store.put(_record("c", at="2", text="three", partial=True))  # a partial record is never a previous version
    _agrees(store, "new")
    store.discard_partial("c")
    _agrees(store, "new")
    assert not store.version_index().contents.holds("instructions", "d-three")
    store.put(_record("d", at="1", partial=True))
    store.put(_record("d", at="1", text="three"))  # finished in place of its partial record: last in the order
    _agrees(store, "new")
    _agrees(store, "d")
    assert store.version_index().previous(
        cell_id=None, role="r", input_digest="in", occurrence=0, not_id="new"
    ) is store.get("d")


def test_the_notebook_stores_index_follows_this_session_the_file_and_forgotten_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "n.ipynb"
    saved = [_record("a", at="1", text="one"), _record("b", at="1", text="two")]
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"agl_notebook": block_to_json(saved)}}
    path.write_text(json.dumps(nb))
    monkeypatch.setattr(frontend, "_link", frontend.FrontendLink())
    monkeypatch.setattr(notebook_store, "_kernel_session", notebook_store._KernelSession())
    store = NotebookStore(locate=lambda: path)
    _agrees(store, "new")  # made from the file's records
    store.put(_record("a", at="1"))  # replaced in its place by this session's record, without its content
    _agrees(store, "new")
    assert not store.version_index().contents.holds("instructions", "d-one")
    store.put(_record("c", at="1", text="three"))  # a tie in time: the latest in the store's order
    _agrees(store, "new")
    notebook_store.forget(["c"])  # %agl forget
    _agrees(store, "new")
    store.put(_record("b", at="1", text="one"))
    _agrees(store, "new")
    nb["metadata"] = {"agl_notebook": block_to_json([_record("d", at="2", text="three")])}
    path.write_text(json.dumps(nb))  # saved again elsewhere: the file's records changed
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    _agrees(store, "new")
    assert store.version_index().previous(
        cell_id=None, role="r", input_digest="in", occurrence=0, not_id="new"
    ) is store.get("d")


def test_a_new_notebook_store_in_a_later_cell_reads_the_unchanged_file_and_its_index_once_per_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook makes a new `Run` (a new store) in each cell: the file is parsed, and its index made, once."""
    path = tmp_path / "n.ipynb"
    block = block_to_json([_record("a", at="1")])
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"agl_notebook": block}}
    path.write_text(json.dumps(nb))
    monkeypatch.setattr(frontend, "_link", frontend.FrontendLink())
    monkeypatch.setattr(notebook_store, "_kernel_session", notebook_store._KernelSession())
    reads: list[Path] = []
    real_read = nbfile.read_notebook_json

    def counted(where: Path) -> dict[str, object]:
        reads.append(where)
        return real_read(where)

    monkeypatch.setattr("agl_notebook.notebook.store.read_notebook_json", counted)
    first = NotebookStore(locate=lambda: path)
    index = first.version_index()
    first.put(_record("b", at="1"))  # this cell's step: the index follows it
    later = NotebookStore(locate=lambda: path)  # the next cell's Run
    assert later.version_index() is index, "the next cell's store made the index again"
    assert [r.id for r in later.records()] == ["a", "b"]
    assert reads == [path], "the next cell's store parsed the unchanged notebook again"
    nb["metadata"] = {"agl_notebook": block_to_json([_record("a", at="1"), _record("c", at="2", text="three")])}
    path.write_text(json.dumps(nb))  # saved: the file changed (its size, here)
    changed = NotebookStore(locate=lambda: path)
    assert [r.id for r in changed.records()] == ["a", "c", "b"]
    assert changed.version_index() is not index
    assert reads == [path, path]
    _agrees(changed, "new")
