"""A finished step leaves nothing for the garbage collector: its plan, scope and Run are freed when it ends.

A step whose store keeps partial records hooks its scope's ``on_waiting`` with a function that holds the step's plan,
whose scope holds the hook; left in place, that cycle kept every recorded step's plan (and a Run made for one step,
with its store and records) alive until a collection found it: CPU for the collector on every recorded step, and
memory held in between (issue 35).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from agl_notebook import (
    Role,
    Run,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
    ToolResult,
    describe,
    reporting_tool,
    tool,
)
from agl_notebook.replay.modes import Mode
from agl_notebook.replay.stores import MemoryStore


@dataclass(frozen=True)
class Topic:
    name: str = describe("What to look up.")


@dataclass(frozen=True)
class Found:
    count: int = describe("How many were found.")


async def _look_up(topic: Topic) -> ToolResult:
    return ToolResult(f"{topic.name}: 3")


ROLE: Role[Found] = Role(
    "finder",
    "Look it up, then report.",
    tools=[tool("look_up", "Look a topic up.", Topic, _look_up), reporting_tool("report_found", "Report.", Found)],
)


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("look_up", {"name": "retries"})]),
            ScriptedTurn(calls=[ScriptedCall("report_found", {"count": 3})]),
        ]
    )


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("mode", ["auto", "refresh", "off", "replay"])
@pytest.mark.parametrize("fresh_run", [True, False], ids=["a Run per step", "one Run"])
async def test_a_finished_step_leaves_no_cycle(mode: Mode, fresh_run: bool, collector_off: None) -> None:
    model, store = _model(), MemoryStore()
    recording = Run(model=model, store=store)
    for _ in range(3):  # recorded (three occurrences, for one Run), so mode replay replays them
        await recording.step(ROLE, "widgets")
    gc.collect()  # what the first steps loaded (modules, caches) is not the steps' own
    run = Run(model=model, store=store, mode=mode)
    for _ in range(3):
        step_run = Run(model=model, store=store, mode=mode) if fresh_run else run
        assert await step_run.step(ROLE, "widgets") == Found(3)
    assert gc.collect() == 0


async def test_recorded_steps_of_many_inputs_leave_no_cycle(collector_off: None) -> None:
    # A MemoryStore: a JsonFileStore's own indented json.dumps leaves the pure-Python encoder's closures behind.
    store = MemoryStore()
    model = _model()
    await Run(model=model, store=store).step(ROLE, "warm-up")
    gc.collect()  # what the first step loaded (modules, caches) and the fixtures made are not the steps' own
    for i in range(4):
        assert await Run(model=model, store=store).step(ROLE, f"widgets {i}") == Found(3)
    assert len(store.records()) == 5
    assert gc.collect() == 0
