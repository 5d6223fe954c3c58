"""The notebook store's partial records, without a kernel: a partial copy in the saved file that the frontend's
model no longer holds is not resumed, and a discarded one is forgotten wherever this kernel session saw it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.notebook import _kernel, frontend, store
from agl_notebook.notebook.store import NotebookMapStore, NotebookStore, _KernelSession
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


class Comm:
    """The kernel's end of the comm, noting what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, message: dict[str, Any]) -> None:
        record = message.get("record")
        self.sent.append((message["op"], message.get("id") or (record["id"] if isinstance(record, dict) else "")))


def test_a_discard_pending_when_the_step_waits_again_is_never_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontend, "DISCARD_SECONDS", 0.2)
    monkeypatch.setattr(_kernel, "shutting_down", lambda: False)
    link = frontend.FrontendLink()
    comm = link._comm = Comm()
    link.discard_partial("waiting")  # the person interrupted the waiting step...
    link.send_record(WAITING, None)  # ...and ran its cell again at once: it waits again
    link.discard_partial("done")
    time.sleep(0.6)
    assert comm.sent == [("record", "waiting"), ("discard", "done")], "the newer partial record is not dropped"
    timer = link.discard_partial("waiting")
    assert timer is not None
    timer.join(2)
    assert comm.sent[-1] == ("discard", "waiting"), "a discard with no newer record is sent"


def test_a_partial_record_of_this_session_is_never_found_over_a_finished_one(
    saved: tuple[NotebookStore, frontend.FrontendLink],
) -> None:
    notebook, _ = saved
    notebook_partial = record("done", partial=True)
    store._kernel_session.partials[store._key(notebook.path)] = {"done": notebook_partial}  # a refresh waiting
    assert notebook.get("done") == DONE, "the saved finished record"
    notebook.discard_partial("done")
    assert notebook.get("done") == DONE


def test_a_maps_saved_block_never_carries_a_partial_record_it_found(
    saved: tuple[NotebookStore, frontend.FrontendLink],
) -> None:
    notebook, link = saved
    link.answered, link.unsaved = True, {"waiting": WAITING}  # the restarted kernel got it back from the extension
    items = NotebookMapStore(notebook, "k")
    assert items.get("waiting") == WAITING, "found, to be resumed"
    items.discard_partial("waiting")  # the resumed item failed
    assert items.saved_block()["records"] == []
    other = NotebookMapStore(notebook, "j")
    assert other.get("done") == DONE
    assert other.saved_block()["records"] == [DONE.to_json()], "a finished record it found is saved"


def test_a_frontends_partial_record_never_replaces_a_finished_one_another_frontend_handed_over() -> None:
    link = frontend.FrontendLink()
    for block in (block_to_json([DONE]), block_to_json([record("done", partial=True), WAITING])):
        link._on_msg({"content": {"data": {"op": "records", "path": "n.ipynb", "block": block}}})
    assert link.unsaved == {"done": DONE, "waiting": WAITING}
