"""``agl-notebook clear`` and ``gc`` keep a shared content: removing the record that keeps a long system text copies
it into the records that still use it (docs/iterating.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat as _nbformat

from agl_notebook import Run
from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.records import block_from_json, block_to_json
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.replay.versions import ContentIndex
from tests.replay.test_versions import model, role

v4: Any = _nbformat.v4
nbformat: Any = _nbformat  # partly typed; its write is not annotated


async def test_clearing_the_record_that_keeps_a_shared_system_text_copies_it_into_the_others(tmp_path: Path) -> None:
    long = "Follow the house style. " * 900
    store = MemoryStore()
    for question in ("one", "two", "three"):
        await Run(model=model("ok"), store=store).step(role(long), question)
    holder, *others = store.records()
    assert "instructions" in holder.contents and all("instructions" not in r.contents for r in others)
    path = tmp_path / "shared.ipynb"
    nb = v4.new_notebook(cells=[v4.new_code_cell("pass")])
    nb.metadata[METADATA_KEY] = block_to_json(store.records())
    nbformat.write(nb, path)

    assert main(["clear", str(path), holder.id[:12]]) == 0
    left = block_from_json(json.loads(path.read_text(encoding="utf-8"))["metadata"][METADATA_KEY], where="b").records
    assert [r.id for r in left] == [r.id for r in others]
    index = ContentIndex(left)
    assert all(index.content(r, "instructions") == (True, holder.contents["instructions"]) for r in left)
    assert sum("instructions" in r.contents for r in left) == 1, "copied once, into one of them"
