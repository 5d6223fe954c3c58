"""The notebook store's partial records, without a kernel: a partial copy in the saved file that the frontend's
model no longer holds is not resumed, and a discarded one is forgotten wherever this kernel session saw it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_notebook.notebook import frontend, store
from agl_notebook.notebook.store import NotebookStore, _KernelSession
from agl_notebook.replay.records import StepRecord, Waiting, block_to_json


def record(record_id: str, *, partial: bool) -> StepRecord:
    return StepRecord(
        id=record_id,
        parts={"role": "r"},
        occurrence=0,
        role="mailer",
        backend="scripted:0",
        input="Send",
        result=None if partial else {"results": []},
        transcript=(),
        partial=Waiting("approval", "toolu_00_0", "send_mail") if partial else None,
    )


WAITING, DONE = record("waiting", partial=True), record("done", partial=False)


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[NotebookStore, frontend.FrontendLink]:
    path = tmp_path / "n.ipynb"
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"agl_notebook": block_to_json([WAITING, DONE])}}
    path.write_text(json.dumps(nb))
    link = frontend.FrontendLink()
    monkeypatch.setattr(frontend, "_link", link)
    monkeypatch.setattr(store, "_kernel_session", _KernelSession())
    return NotebookStore(locate=lambda: path), link


def test_the_saved_files_partial_record_is_resumed_until_the_frontend_says_it_no_longer_holds_it(
    saved: tuple[NotebookStore, frontend.FrontendLink],
) -> None:
    notebook, link = saved
    assert notebook.get("waiting") == WAITING, "no frontend answer (VS Code, nbclient): the file's copy stands"
    link.answered, link.unsaved = True, {"done": DONE}  # the model was saved with it, then finished or discarded it
    assert notebook.get("waiting") is None
    assert notebook.get("done") == DONE, "finished records in the file are read as ever"
    link.unsaved = {"done": DONE, "waiting": WAITING}
    assert notebook.get("waiting") == WAITING, "the model holds it: resumed"


def test_a_discarded_partial_record_is_forgotten_here_and_in_what_the_frontend_handed_over(
    saved: tuple[NotebookStore, frontend.FrontendLink],
) -> None:
    notebook, link = saved
    link.answered, link.unsaved = True, {"waiting": WAITING, "done": DONE}
    notebook.discard_partial("waiting")
    assert link.unsaved == {"done": DONE}
    link.answered, link.unsaved = False, {}
    assert notebook.get("waiting") is None, "nor is the file's copy resumed in this session"
    notebook.discard_partial("done")
    assert notebook.get("done") == DONE, "a finished record is never discarded"
