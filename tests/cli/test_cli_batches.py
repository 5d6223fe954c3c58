"""``agl-notebook batches list | cancel NOTEBOOK``: through the real ``anthropic`` client against the fake batch
endpoints (`tests/support/anthropic_batches.py`), the client made by the factory the test gives, never the network."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from agl_notebook import Run
from agl_notebook.cli import main
from agl_notebook.cli.batches import ClientFactory
from agl_notebook.notebook import store as store_module
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.payloads import JsonObject
from agl_notebook.run._map_state import MapResults
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


def ticking() -> dict[str, Any]:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += 25.0
        await asyncio.sleep(0)

    return {"sleep": sleep, "clock": lambda: now[0]}


async def run_again(path: Path, fake: FakeBatches, n: int = 3) -> MapResults:
    store_module._kernel_session = store_module._KernelSession()  # a new kernel
    return await Run(store=NotebookStore(locate=lambda: path)).map(
        RESEARCHER, inputs(n), engine=engine_for(fake, **ticking())
    )


@pytest.mark.parametrize("how", ["deleted", "another_workspace"])
def test_forget_appends_a_reset_line_and_the_map_then_sends_its_items_in_a_new_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    path = a_notebook(tmp_path)
    sidecar = tmp_path / "researcher.agl.jsonl"
    fake = FakeBatches(three_turns, polls=50, workspace="a")
    asyncio.run(interrupted_after_the_first_wave(path, fake))
    (batch,) = fake.creations
    if how == "deleted":
        fake.deleted.add(batch.id)
        other = fake
        other.polls = 0
    else:
        other = FakeBatches(three_turns, polls=0, workspace="b")  # a colleague's key re-running the notebook

    # The map run again fails its items, saying how to go on; nothing is sent, and nothing in the sidecar changes.
    failed = asyncio.run(run_again(path, other))
    assert len(failed.failures) == 3
    assert all("agl-notebook batches forget NOTEBOOK" in str(item.error) for item in failed.failures)
    assert len(other.creations) == (1 if how == "deleted" else 0)
    before = sidecar.read_bytes()

    assert main(["batches", "forget", str(path)]) == 0  # asks nothing of the API: no client, no credentials
    out = capsys.readouterr().out
    assert f"map 'researcher' (researcher.agl.jsonl, not named by the notebook): forgot 1 batch(es) ({batch.id})" in out
    after = sidecar.read_bytes()
    assert after.startswith(before)  # appended: every earlier byte as it was
    (added,) = after[len(before) :].splitlines()
    assert json.loads(added) == {"kind": "batch_state", "state": {"format": 1, "waves": []}, "forgotten": [batch.id]}

    # Forgetting again writes nothing: the latest state holds no batch.
    assert main(["batches", "forget", str(path)]) == 0
    assert "no batch to forget" in capsys.readouterr().out
    assert sidecar.read_bytes() == after

    # Run again: the items go in new batches, one per wave, and finish.
    created = len(other.creations)
    results = asyncio.run(run_again(path, other))
    assert not results.failures
    assert len(other.creations) == created + 3
    assert sidecar.read_bytes().startswith(after)


def test_forget_of_a_map_it_does_not_know_is_an_error_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_notebook(tmp_path)
    asyncio.run(interrupted_after_the_first_wave(path, FakeBatches(three_turns, polls=50)))
    before = (tmp_path / "researcher.agl.jsonl").read_bytes()
    assert main(["batches", "forget", str(path), "--map", "reviewer"]) == 2
    assert "No batch map 'reviewer' of batch.ipynb keeps a batch state beside it" in capsys.readouterr().err
    assert (tmp_path / "researcher.agl.jsonl").read_bytes() == before
    assert main(["batches", "forget", str(path), "--map", "researcher"]) == 0
    assert (tmp_path / "researcher.agl.jsonl").read_bytes().startswith(before)
