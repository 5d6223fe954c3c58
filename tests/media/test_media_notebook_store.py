"""A notebook's store keeps a large image in a blob file beside the notebook, never outside its folder, never through
a link (issue 28, item 4), without a kernel (as tests/notebook/test_partial_store.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from agl_notebook import Image
from agl_notebook.notebook import frontend, store
from agl_notebook.notebook.store import NotebookStore, _KernelSession
from agl_notebook.replay.records import StepRecord, block_to_json
from agl_notebook.replay.stores import RecordingWarning
from agl_notebook.transcript import MediaBlock, Message, TextBlock
from tests.support.media import png


def record_with(image: Image) -> StepRecord:
    return StepRecord(
        id="r1",
        parts={"role": "r"},
        occurrence=0,
        role="looker",
        backend="scripted:0",
        input={"photo": image.reference()},
        result={"text": "seen"},
        transcript=(Message("user", (TextBlock("[image 1]:"), MediaBlock(image))),),
    )


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NotebookStore:
    path = tmp_path / "book" / "n.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {}}))
    monkeypatch.setattr(frontend, "_link", frontend.FrontendLink())
    monkeypatch.setattr(store, "_kernel_session", _KernelSession())
    return NotebookStore(locate=lambda: path)


def test_a_large_image_goes_to_a_blob_file_beside_the_notebook_and_the_record_names_it(
    notebook: NotebookStore, tmp_path: Path
) -> None:
    data = png(120, 120, noisy=True)
    kept = notebook.put(record_with(Image(data)))
    digest = hashlib.sha256(data).hexdigest()
    blob = tmp_path / "book" / "agl_blobs" / f"{digest}.png"
    assert blob.read_bytes() == data
    saved = json.dumps(block_to_json([kept]))  # what the extension writes into the notebook metadata
    assert f'"file": "agl_blobs/{digest}.png"' in saved and len(saved) < 2_000
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [f"{digest}.png", "n.ipynb"]


def test_a_link_in_the_blob_folders_place_is_refused(notebook: NotebookStore, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, tmp_path / "book" / "agl_blobs")
    record = record_with(Image(png(120, 120, noisy=True)))
    with pytest.warns(RecordingWarning, match="a symbolic link; blob files are written only into the notebook's own"):
        kept = notebook.put(record)
    assert list(outside.iterdir()) == [], "nothing is written through the link"
    assert [r.id for r in notebook.records()] == [kept.id], "the record (a paid answer) is kept all the same"
