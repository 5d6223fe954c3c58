"""``agl-notebook batches list | cancel NOTEBOOK``: through the real ``anthropic`` client against the fake batch
endpoints (`tests/support/anthropic_batches.py`), the client made by the factory the test gives, never the network."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import pytest

from agl_notebook import Run
from agl_notebook.cli import main
from agl_notebook.cli.batches import ClientFactory
from agl_notebook.notebook import store as store_module
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.payloads import JsonObject
from tests.support.anthropic_batches import FakeBatches
from tests.support.batch_steps import RESEARCHER, engine_for, inputs, three_turns


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_kernel_session", store_module._KernelSession())
    monkeypatch.delenv("AGL_NOTEBOOK_SIDECAR_BYTES", raising=False)


def a_notebook(folder: Path) -> Path:
    path = folder / "batch.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}), encoding="utf-8")
    return path


async def interrupted_after_the_first_wave(path: Path, fake: FakeBatches) -> None:
    """A batch map whose kernel stopped once its first batch was created: the sidecar holds that batch."""
    created = asyncio.Event()

    def on_state(state: JsonObject) -> None:
        created.set()

    run = Run(store=NotebookStore(locate=lambda: path))
    task = asyncio.ensure_future(run.map(RESEARCHER, inputs(3), engine=engine_for(fake, on_state=on_state)))
    await created.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def factory(fake: FakeBatches) -> ClientFactory:
    async def make() -> anthropic.AsyncAnthropic:
        return fake.client()

    return make


def test_list_tells_each_batch_and_cancel_cancels_those_in_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_notebook(tmp_path)
    fake = FakeBatches(three_turns, polls=50)
    asyncio.run(interrupted_after_the_first_wave(path, fake))
    (batch,) = fake.creations
    before = path.read_bytes(), (tmp_path / "researcher.agl.jsonl").read_bytes()

    assert main(["batches", "list", str(path)], batch_client=factory(fake)) == 0
    out = capsys.readouterr().out
    assert "map 'researcher' (researcher.agl.jsonl, not named by the notebook): 1 batch(es)" in out
    assert f"wave 1: {batch.id} in_progress: 3 processing, 0 succeeded, 0 errored, 0 canceled, 0 expired" in out

    assert main(["batches", "cancel", str(path)], batch_client=factory(fake)) == 0
    assert "1 batch(es) canceled" in capsys.readouterr().out
    assert fake.calls("POST", rf"/v1/messages/batches/{batch.id}/cancel") == 1
    assert main(["batches", "cancel", str(path)], batch_client=factory(fake)) == 0
    assert "0 batch(es) canceled (none in progress)" in capsys.readouterr().out
    assert fake.calls("POST", rf"/v1/messages/batches/{batch.id}/cancel") == 1
    assert (path.read_bytes(), (tmp_path / "researcher.agl.jsonl").read_bytes()) == before  # nothing written


def test_without_credentials_it_is_a_clear_error_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_notebook(tmp_path)
    asyncio.run(interrupted_after_the_first_wave(path, FakeBatches(three_turns, polls=50)))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert main(["batches", "list", str(path)]) == 2
    err = capsys.readouterr().err
    assert "agl-notebook: error: batches list asks the Message Batches API:" in err


def test_a_notebook_with_no_batch_map_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = a_notebook(tmp_path)
    assert main(["batches", "list", str(path)], batch_client=factory(FakeBatches(three_turns))) == 0
    assert "No batch map of batch.ipynb keeps a batch state beside it" in capsys.readouterr().out


def test_a_batch_the_api_does_not_know_fails_that_map_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_notebook(tmp_path)
    asyncio.run(interrupted_after_the_first_wave(path, FakeBatches(three_turns, polls=50)))
    assert main(["batches", "list", str(path)], batch_client=factory(FakeBatches(three_turns))) == 1
    assert (
        "map 'researcher' (researcher.agl.jsonl, not named by the notebook): the API refused:"
        in capsys.readouterr().out
    )
