"""Reliability, load: 200 concurrent steps on one Run, and a 2,000-step recording replayed from a file.

Each step's input names it; the model looks the input up with a tool and reports a payload built from the input and
the tool's result, so any cross-talk between concurrent steps shows as a result that names another step. The
figures (peak memory growth, seconds) are printed (visible with ``pytest -s``) and kept with `record_property`.

Found while writing this: recording 2,000 steps straight into a `JsonFileStore` took about 270 s (a 3.3 MB file),
because `JsonFileStore.put` re-serialised every record after each new one. It now keeps each record's text once
written, and the 2,000-step test records straight into the file, then replays from a new store reading it.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool
from agl_notebook.models.base import ModelRequest
from agl_notebook.replay import JsonFileStore, block_to_json
from agl_notebook.transcript import ToolResultBlock
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Query

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

CONCURRENT = 200
LONG = 2_000
MEMORY_LIMIT = 300 * 1024 * 1024
REPLAY_SECONDS = 60.0
RECORD_SECONDS = 60.0  # about 270 s before JsonFileStore kept each record's text


@dataclass(frozen=True)
class Answer:
    summary: str = describe("What was found.")
    count: int = describe("The step's number.")


def number_of(text: str) -> int:
    return int(text.rsplit("-", 1)[1])


def step_input(n: int) -> str:
    return f"item-{n:04d}"


def expected(n: int) -> Answer:
    return Answer(f"{step_input(n)} => looked up {step_input(n)}", n)


async def reply(request: ModelRequest) -> dict[str, Any]:
    """Look the step's input up, then report it with the tool's result; yields to the loop to interleave steps."""
    asked = request.messages[0].text
    n = number_of(asked)
    await asyncio.sleep(0.001 * (n % 5))
    results = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    if not results:
        return {"calls": [{"name": "look_up", "args": {"text": asked}}]}
    return {"calls": [{"name": "report_answer", "args": {"summary": f"{asked} => {results[0].content}", "count": n}}]}


def worker(handled: list[str]) -> Role[Answer]:
    async def look_up(query: Query) -> ToolResult:
        handled.append(query.text)
        await asyncio.sleep(0.001 * (number_of(query.text) % 3))
        return ToolResult(f"looked up {query.text}")

    return Role(
        "worker",
        "Look each item up and report it.",
        [
            tool("look_up", "Look an item up.", Query, look_up),
            reporting_tool("report_answer", "Report the item.", Answer),
        ],
    )


def figure(record_property: Callable[[str, object], None], name: str, value: object) -> None:
    print(f"\n[reliability] {name} = {value}")
    record_property(name, value)


async def test_200_concurrent_steps_have_no_cross_talk_record_once_and_replay_without_the_model(
    record_property: Callable[[str, object], None],
    reliability: ReliabilityNotes,
) -> None:
    handled: list[str] = []
    role = worker(handled)
    model = ScriptedModel(reply)
    run = Run(model=model)

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        baseline, _ = tracemalloc.get_traced_memory()
        started = time.perf_counter()
        results = await asyncio.gather(*(run.step(role, step_input(n)) for n in range(CONCURRENT)))
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    growth = peak - baseline
    figure(record_property, "concurrent_steps", CONCURRENT)
    figure(record_property, "concurrent_peak_memory_growth_mb", round(growth / 2**20, 2))
    figure(record_property, "concurrent_seconds", round(seconds, 3))
    assert growth < MEMORY_LIMIT

    # No cross-talk: every step got its own answer, its tool saw its own input, the model was asked twice per step.
    assert results == [expected(n) for n in range(CONCURRENT)]
    assert sorted(handled) == [step_input(n) for n in range(CONCURRENT)]
    assert model.calls == 2 * CONCURRENT

    # Every record written exactly once, each holding its own step.
    records = run.store.records()
    assert len(records) == CONCURRENT
    assert len({r.id for r in records}) == CONCURRENT
    by_input = {r.input: r for r in records if isinstance(r.input, str)}  # the sort below sees every input
    assert sorted(by_input) == [step_input(n) for n in range(CONCURRENT)]
    for name, record in by_input.items():
        n = number_of(str(name))
        assert record.result == {"summary": expected(n).summary, "count": n}
        assert record.occurrence == 0

    # Replay all 200 from a new Run sharing the store: no model call, no tool call, nothing new recorded.
    again = Run(model=model, store=run.store, mode="replay")
    replayed = await asyncio.gather(*(again.step(role, step_input(n)) for n in range(CONCURRENT)))
    assert replayed == results
    assert model.calls == 2 * CONCURRENT
    assert len(handled) == CONCURRENT
    assert len(run.store.records()) == CONCURRENT
    reliability.note(
        "Load",
        f"{CONCURRENT} concurrent steps on one Run (scripted model, a tool call each)",
        "no cross-talk (each result and tool call names its own input), every record written once, "
        "all replayed with no model or tool call",
        records_lost=0,
        measured={
            f"Peak memory growth, {CONCURRENT} concurrent steps": (
                f"{growth / 2**20:.1f} MB (limit {MEMORY_LIMIT // 2**20} MB)"
            ),
            f"{CONCURRENT} concurrent steps, wall time": f"{seconds:.2f} s",
        },
        how="scripted model, no kernel (asyncio.gather in the test process); memory is tracemalloc's "
        "peak above its baseline (Python allocations only), time by perf_counter; one run",
    )


async def test_a_2000_step_recording_replays_from_a_file_without_the_model(
    tmp_path: Path,
    record_property: Callable[[str, object], None],
    reliability: ReliabilityNotes,
) -> None:
    handled: list[str] = []
    role = worker(handled)
    model = ScriptedModel(reply)
    path = tmp_path / "recordings.json"
    live = Run(model=model, store=JsonFileStore(path))  # every record rewrites the file (atomically)

    started = time.perf_counter()
    for first in range(0, LONG, CONCURRENT):  # batches of concurrent steps
        await asyncio.gather(*(live.step(role, step_input(n)) for n in range(first, first + CONCURRENT)))
    record_seconds = time.perf_counter() - started
    assert model.calls == 2 * LONG
    assert len(live.store.records()) == LONG
    # The file is exactly what serialising the whole block at once writes (the store joins kept texts).
    assert (
        path.read_text(encoding="utf-8")
        == json.dumps(block_to_json(live.store.records()), ensure_ascii=False, indent=1) + "\n"
    )
    assert record_seconds < RECORD_SECONDS
    figure(record_property, "long_recording_steps", LONG)
    figure(record_property, "long_recording_seconds", round(record_seconds, 2))
    figure(record_property, "long_recording_file_mb", round(path.stat().st_size / 2**20, 2))

    store = JsonFileStore(path)  # read back from the file
    assert len(store.records()) == LONG
    assert len({r.id for r in store.records()}) == LONG

    replay = Run(model=model, store=store, mode="replay")
    started = time.perf_counter()
    results = [await replay.step(role, step_input(n)) for n in range(LONG)]
    replay_seconds = time.perf_counter() - started
    figure(record_property, "long_replay_seconds", round(replay_seconds, 2))
    assert replay_seconds < REPLAY_SECONDS
    assert results == [expected(n) for n in range(LONG)]
    assert model.calls == 2 * LONG  # the replay made none
    assert len(handled) == LONG
    assert len(store.records()) == LONG
    size = path.stat().st_size / 2**20
    reliability.note(
        "Load",
        f"a {LONG:,}-step recording: recorded into a JSON file, then replayed from it",
        "every record in the file once; the replay makes no model call and returns every result",
        records_lost=0,
        measured={
            f"{LONG:,} steps recorded into a JSON file ({size:.1f} MB)": f"{record_seconds:.1f} s",
            f"{LONG:,}-step replay from that file": f"{replay_seconds:.2f} s",
        },
        how="scripted model, no kernel, a JsonFileStore rewritten atomically after each record; perf_counter; one run",
    )
