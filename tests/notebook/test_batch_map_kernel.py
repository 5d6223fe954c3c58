"""A batch map in a real kernel, killed once a wave was created: a new kernel re-attaches from the map's sidecar.

The fake batch endpoints (`tests/support/anthropic_batches.py`) are served to the kernels' real ``anthropic`` client
by a real HTTP server on the loopback interface in the test process, so they outlive the kernel that is killed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import nbformat
import pytest

from agl_notebook.replay.sidecar import read_sidecar
from tests.support import anthropic_batches
from tests.support.anthropic_batches import FakeBatches
from tests.support.batch_steps import three_turns
from tests.support.kernel_harness import Kernel

MAP_CELL = """\
import anthropic
from agl_notebook import Run
from agl_notebook.models.batches import Batches
from tests.support.anthropic_api import KEY
from tests.support.batch_steps import RESEARCHER, inputs

engine = Batches(client=anthropic.AsyncAnthropic(api_key=KEY, base_url={url!r}, max_retries=0),
                 poll_first=0.05, poll_factor=1.0, poll_most=0.05)
results = await Run().map(RESEARCHER, inputs(4), engine=engine)
replayed = sum(item.replayed for item in results.items)
print("failures", len(results.failures), "created", engine.creations, "replayed", replayed)
"""


def _hold_the_second_wave(fake: FakeBatches, request: httpx2.Request) -> None:
    if len(fake.creations) == 2 and request.method == "POST" and fake.polls == 1:
        fake.polls = 10**9  # wave 2 stays in flight until the kernel is killed


@pytest.fixture
def served() -> Iterator[tuple[FakeBatches, str]]:
    """The fake, behind a loopback HTTP server; its second batch holds (in progress) until the test lets it end."""
    fake = FakeBatches(three_turns, polls=1)
    with anthropic_batches.served(fake, after=_hold_the_second_wave) as url:
        yield fake, url


def test_a_kernel_killed_after_a_wave_was_created_re_attaches_and_creates_the_next_wave_once(
    tmp_path: Path, served: tuple[FakeBatches, str]
) -> None:
    fake, url = served
    path = tmp_path / "batch.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(path))  # type: ignore[no-untyped-call]
    env = {"AGL_NOTEBOOK_PATH": str(path)}
    cell = MAP_CELL.format(url=url)

    first = Kernel(cwd=tmp_path, env=env)
    try:
        first.execute(cell)
        deadline = time.monotonic() + 60
        while len(fake.creations) < 2:
            assert time.monotonic() < deadline, "wave 2 was never created"
            time.sleep(0.05)
        time.sleep(0.3)  # it is polled a few times, in progress
    finally:
        first.close()  # shutdown_kernel(now=True): the kernel is killed, mid-wave
    assert [b.ended for b in fake.creations] == [True, False]
    states = [json.loads(line.text) for line in read_sidecar(tmp_path / "researcher.agl.jsonl").lines]
    assert [len(s["state"]["waves"]) for s in states if s["kind"] == "batch_state"][-1] == 2

    fake.polls = 1  # wave 2's batch ends now
    assert run_in_a_new_kernel(tmp_path, env, cell) == "failures 0 created 1 replayed 0"
    assert len(fake.creations) == 3, "wave 2 was not created again; wave 3 was created once"
    assert [len(b.requests) for b in fake.creations] == [4, 4, 4]
    read = read_sidecar(tmp_path / "researcher.agl.jsonl")
    assert len(read.records) == 4 and not read.problems

    # Once more: every item replays from the sidecar; nothing is asked of the API.
    asked = len(fake.requests)
    assert run_in_a_new_kernel(tmp_path, env, cell) == "failures 0 created 0 replayed 4"
    assert len(fake.requests) == asked


def run_in_a_new_kernel(folder: Path, env: dict[str, str], cell: str) -> str:
    kernel = Kernel(cwd=folder, env=env)
    try:
        msg_id = kernel.execute(cell)
        reply = kernel.wait_reply(msg_id, 120)["content"]
        assert reply["status"] == "ok", f"{reply.get('ename')}: {reply.get('evalue')}"
        return kernel.stream(msg_id).strip()
    finally:
        kernel.close()
