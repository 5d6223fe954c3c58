"""`run.map(..., engine=Batches(...))`: a map's items answered in waves, through the real ``anthropic`` client.

The batch endpoints (and the live Messages API, from the same script) are `tests/support/anthropic_batches.py`'s,
over ``httpx2.MockTransport``: the SDK's own request building and JSON-lines decoding run.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import anthropic
import httpx2
import pytest

from agl_notebook import Claude, Run, ToolResult
from agl_notebook._scope import Decision
from agl_notebook.approvals import ApprovalRequest, Approve, decide
from agl_notebook.errors import BudgetExceededError, InputError
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.batch_state import custom_id
from agl_notebook.models.batches import Batches
from agl_notebook.models.prices import Rates
from agl_notebook.notebook import store as store_module
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.sidecar import header_text, read_sidecar
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run._map import ENGINE_STATE
from agl_notebook.run._map_state import MapResults
from agl_notebook.terminals import Terminal
from agl_notebook.tools import Tool
from tests.support.anthropic_api import BASE_URL, KEY
from tests.support.anthropic_batches import FakeBatches
from tests.support.batch_steps import RESEARCHER, engine_for, inputs, no_wait, three_turns, without_run_details
from tests.support.steps import Answer, Query


def map_records(run: Run) -> list[JsonObject]:
    """The run's records as JSON, by id, without the time they were made, the engine that answered and the cost
    (a batched request is billed at the batch discount once the model is priced)."""
    every = run.store.records()
    return [without_run_details(record, every) for record in sorted(every, key=lambda r: r.id)]


PRICES: dict[str, Rates] = {Claude.SONNET: Rates(3.0, 15.0, 3.75, 6.0, 0.30)}  # batch_discount: 0.5 unless given


async def live_map(n: int, prices: Any = None, **options: Any) -> tuple[MapResults, Run, FakeBatches]:
    fake = FakeBatches(three_turns)
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore(), prices=prices)
    return await run.map(RESEARCHER, inputs(n), **options), run, fake


async def test_a_three_turn_role_over_2000_inputs_makes_three_batch_creations_and_equals_a_live_map() -> None:
    fake = FakeBatches(three_turns, polls=1)
    engine = engine_for(fake)
    run = Run(store=MemoryStore())
    results = await run.map(RESEARCHER, inputs(2000), engine=engine, concurrency=4)

    # Every item joined before any started, and all ran at once (past the map's concurrency of 4): one wave per turn.
    assert [len(b.requests) for b in fake.creations] == [2000, 2000, 2000]
    assert engine.creations == 3 and fake.live == []
    live, live_run, live_fake = await live_map(2000)
    assert len(live_fake.live) == 6000
    assert list(results) == list(live)
    assert results[7] == Answer("topic 7: notes on topic 7 again")
    assert not results.failures
    assert map_records(run) == map_records(live_run)
    assert {r["backend"] for r in map_records(run)} == {f"anthropic:{Claude.SONNET}"}
    answered = {"engine": "batches", "answered_by": [b.id for b in fake.creations]}
    assert all(r.engine == answered for r in run.store.records())
    # Each request's custom_id derives from its item's record key (its record id) and its number in the step.
    keys = {r.id for r in run.store.records()}
    assert {a[0] for a in fake.creations[0].answers} == {custom_id(k, 1) for k in keys}


async def test_a_batch_map_replays_with_no_batch_and_a_failed_item_runs_again() -> None:
    fake = FakeBatches(three_turns, polls=0)
    run = Run(store=MemoryStore())
    first = await run.map(RESEARCHER, inputs(5), engine=engine_for(fake))
    assert len(fake.creations) == 3
    again = await Run(store=run.store).map(RESEARCHER, inputs(6), engine=engine_for(fake))
    # The five recorded items replayed and left at once; only the sixth made requests.
    assert [len(b.requests) for b in fake.creations[3:]] == [1, 1, 1]
    assert list(again)[:5] == list(first)
    assert [item.replayed for item in again.items] == [True] * 5 + [False]


async def test_a_batch_map_is_recorded_at_the_batch_price_of_the_live_maps_transcripts() -> None:
    fake = FakeBatches(three_turns, polls=0)
    run = Run(store=MemoryStore(), prices=PRICES)
    results = await run.map(RESEARCHER, inputs(3), engine=engine_for(fake))
    live, live_run, _ = await live_map(3, PRICES)
    assert run.meter.requests == live_run.meter.requests == 9
    for batched, lv in zip(results.items, live.items, strict=True):
        assert batched.cost is not None and lv.cost is not None and lv.cost.usd is not None
        assert batched.cost.usd == pytest.approx(lv.cost.usd / 2)
    assert run.meter.spent_usd == pytest.approx(live_run.meter.spent_usd / 2)


async def test_an_engine_that_is_not_batches_is_an_input_error() -> None:
    fake = FakeBatches(three_turns)
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore())
    with pytest.raises(InputError, match=r"run.map\(engine=...\) takes a Batches engine"):
        await run.map(RESEARCHER, inputs(2), engine=json)  # type: ignore[arg-type]
    assert fake.requests == []


# --- The sidecar: re-attaching after a restart ---------------------------------------------------------------------


@pytest.fixture
def fresh_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a new kernel: nothing recorded, nothing told."""
    monkeypatch.setattr(store_module, "_kernel_session", store_module._KernelSession())
    monkeypatch.delenv("AGL_NOTEBOOK_SIDECAR_BYTES", raising=False)


def new_kernel(monkeypatch: pytest.MonkeyPatch, path: Path) -> NotebookStore:
    """The store of a new kernel (a restart) running the notebook at ``path``."""
    monkeypatch.setattr(store_module, "_kernel_session", store_module._KernelSession())
    return NotebookStore(locate=lambda: path)


def sidecar_states(path: Path) -> list[Any]:
    read = read_sidecar(path, key="researcher")
    return [json.loads(line.text)["state"] for line in read.lines if line.kind == ENGINE_STATE]


async def test_a_restarted_kernel_re_attaches_to_the_wave_in_flight_from_the_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_session: None
) -> None:
    notebook = tmp_path / "batch.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}))
    sidecar = tmp_path / "researcher.agl.jsonl"
    fake = FakeBatches(three_turns, polls=3)
    wave_two = asyncio.Event()

    def created(state: JsonObject) -> None:
        if len(fake.creations) == 2:
            wave_two.set()

    # The kernel dies while wave 2 is in flight: its batch was created, and the sidecar holds it already.
    run = Run(store=new_kernel(monkeypatch, notebook))
    task = asyncio.ensure_future(run.map(RESEARCHER, inputs(6), engine=engine_for(fake, on_state=created)))
    await wave_two.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not fake.calls("POST", r".*/cancel")  # the batches go on
    states = sidecar_states(sidecar)
    assert [len(s["waves"]) for s in states][-1] == 2
    assert fake.calls("POST", "/v1/messages/batches") == 2

    # The cell run again in a new kernel, with a new engine: waves 1 and 2 from their batches, wave 3 created once.
    engine = engine_for(fake)
    results = await Run(store=new_kernel(monkeypatch, notebook)).map(RESEARCHER, inputs(6), engine=engine)
    assert fake.calls("POST", "/v1/messages/batches") == 3 and engine.creations == 1
    live, _, _ = await live_map(6)
    assert list(results) == list(live)
    assert [len(s["waves"]) for s in sidecar_states(sidecar)][-1] == 3
    assert len(read_sidecar(sidecar, key="researcher").records) == 6  # a batch map's records follow its state

    # Once more in a new kernel: every item replays from the sidecar, no batch is created or polled.
    before = len(fake.requests)
    again = await Run(store=new_kernel(monkeypatch, notebook)).map(RESEARCHER, inputs(6), engine=engine_for(fake))
    assert list(again) == list(live) and all(item.replayed for item in again.items)
    assert len(fake.requests) == before


async def test_a_broken_state_in_the_sidecar_is_an_input_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_session: None
) -> None:
    notebook = tmp_path / "batch.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}))
    sidecar = tmp_path / "researcher.agl.jsonl"
    sidecar.write_text(
        header_text("researcher") + "\n" + json.dumps({"kind": ENGINE_STATE, "state": {"format": 9}}) + "\n"
    )
    fake = FakeBatches(three_turns)
    with pytest.raises(InputError, match=r"the map's sidecar line 'batch_state'.*format"):
        await Run(store=new_kernel(monkeypatch, notebook)).map(RESEARCHER, inputs(2), engine=engine_for(fake))
    assert fake.requests == []
    assert sidecar.read_text().count("\n") == 2  # nothing written


# --- The budget ----------------------------------------------------------------------------------------------------


async def test_a_first_wave_past_the_budget_creates_no_batch() -> None:
    fake = FakeBatches(three_turns, polls=0)
    run = Run(store=MemoryStore(), prices=PRICES, budget_usd=0.01)  # each first request's estimate: about $0.03
    with pytest.raises(BudgetExceededError, match=r"first wave of this batch map \(4 requests, estimated at \$"):
        await run.map(RESEARCHER, inputs(4), engine=engine_for(fake))
    assert fake.requests == [] and run.store.records() == ()


async def test_a_batch_map_near_its_budget_refuses_what_may_not_fit_and_never_hangs() -> None:
    # A budget the first wave fits by its estimate but not by its worst case: a live request would wait for the
    # ones in flight, which in a batch wait for it; the items whose worst case does not fit fail instead.
    fake = FakeBatches(three_turns, polls=0)
    run = Run(store=MemoryStore(), prices=PRICES, budget_usd=0.15)  # four first requests: $0.124 likely, $0.18 worst
    results = await asyncio.wait_for(run.map(RESEARCHER, inputs(4), engine=engine_for(fake)), 20)
    refused = [f for f in results.failures if isinstance(f.error, BudgetExceededError)]
    assert refused and len(refused) == len(results.failures) < 4
    assert run.meter.spent_usd <= 0.15


async def test_a_batch_created_as_the_map_is_interrupted_is_still_written_to_the_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_session: None
) -> None:
    notebook = tmp_path / "batch.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}))
    fake = FakeBatches(three_turns, polls=0)
    asked, answer = asyncio.Event(), asyncio.Event()

    async def slow_create(request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and request.url.path == "/v1/messages/batches":
            asked.set()
            await answer.wait()  # the API accepts the batch only after the interrupt
        return fake.handle(request)

    client = anthropic.AsyncAnthropic(
        api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(slow_create))
    )
    engine = Batches(client=client, poll_first=0.0, sleep=no_wait)
    run = Run(store=new_kernel(monkeypatch, notebook))
    task = asyncio.ensure_future(run.map(RESEARCHER, inputs(3), engine=engine))
    await asyncio.wait_for(asked.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answer.set()
    sidecar = tmp_path / "researcher.agl.jsonl"
    for _ in range(100):  # the creation goes on after the interrupt: until it was told
        if sidecar.exists() and sidecar_states(sidecar):
            break
        await asyncio.sleep(0.01)
    (batch,) = fake.creations
    (state,) = sidecar_states(sidecar)
    assert [b["id"] for w in state["waves"] for b in w["batches"]] == [batch.id]

    # Run again: the batch is attached to, not created again.
    results = await Run(store=new_kernel(monkeypatch, notebook)).map(RESEARCHER, inputs(3), engine=engine_for(fake))
    assert not results.failures and len(fake.creations) == 3
    assert len(fake.creations[0].answers) == 3


async def test_a_map_interrupted_before_its_items_began_leaves_the_engine_free() -> None:
    fake = FakeBatches(three_turns, polls=0)
    engine = engine_for(fake)
    run = Run(store=MemoryStore())
    task = asyncio.ensure_future(run.map(RESEARCHER, inputs(3), engine=engine))
    await asyncio.sleep(0)  # the map joined its items and started their tasks, none of which ran yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The same engine serves the next map: no participant of the first one holds its waves back.
    results = await asyncio.wait_for(run.map(RESEARCHER, inputs(2), engine=engine, name="again"), 10)
    assert not results.failures and len(fake.creations) == 3


# --- A person's answer inside a batch map ----------------------------------------------------------------------------


class HeldApprovals(Terminal):
    """A person who takes a while: each approval waits until the test lets it through."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        self.asked.set()
        await self.answer.wait()
        return decide(request, Approve())


async def test_an_item_waiting_for_a_person_is_parked_and_the_waves_go_on_without_it() -> None:
    fake = FakeBatches(three_turns, polls=0)

    def first_look_up_of_topic_0(query: Query, request: ApprovalRequest) -> Literal["ask", "approve"]:
        return "ask" if query.text == "topic 0" else "approve"

    tools = [
        replace(t, approval=first_look_up_of_topic_0) if isinstance(t, Tool) and t.name == "look_up" else t
        for t in RESEARCHER.tools
    ]
    role = replace(RESEARCHER, tools=tools)
    person = HeldApprovals()
    run = Run(store=MemoryStore(), terminal=person)
    task = asyncio.ensure_future(run.map(role, inputs(4), engine=engine_for(fake)))
    await asyncio.wait_for(person.asked.wait(), 10)
    # While topic 0 waits for the person, the three others run their waves to the end.
    for _ in range(200):
        if len(run.store.records()) == 3:
            break
        await asyncio.sleep(0.01)
    assert len(run.store.records()) == 3 and not task.done()
    assert [len(b.requests) for b in fake.creations] == [4, 3, 3]
    person.answer.set()
    results = await asyncio.wait_for(task, 10)
    assert not results.failures
    # Approved, topic 0 asks again: its second and third requests go in waves of their own.
    assert [len(b.requests) for b in fake.creations] == [4, 3, 3, 1, 1]
    live, _, _ = await live_map(4)
    assert list(results) == list(live)


# --- Tool calls of a wave's replies, bounded by the map's concurrency ------------------------------------------------


@pytest.mark.parametrize(("items", "concurrency"), [(30, 1), (30, 3), (25, 7), (5, 8)])
async def test_the_tool_calls_of_a_waves_replies_run_at_most_concurrency_at_once(items: int, concurrency: int) -> None:
    running = [0]
    most = [0]
    calls = [0]

    async def slow_look_up(query: Query) -> ToolResult:
        running[0] += 1
        calls[0] += 1
        most[0] = max(most[0], running[0])
        try:
            for _ in range(5):  # a handler that takes a while: the others' replies arrive meanwhile
                await asyncio.sleep(0)
        finally:
            running[0] -= 1
        return ToolResult(f"notes on {query.text}")

    tools = [
        replace(t, handler=slow_look_up) if isinstance(t, Tool) and t.name == "look_up" else t for t in RESEARCHER.tools
    ]
    fake = FakeBatches(three_turns, polls=0)
    run = Run(store=MemoryStore())
    results = await run.map(
        replace(RESEARCHER, tools=tools), inputs(items), engine=engine_for(fake), concurrency=concurrency
    )
    assert not results.failures
    assert [len(b.requests) for b in fake.creations] == [items] * 3  # still one wave per turn
    assert calls[0] == 2 * items  # two waves of tool calls
    # Bounded by the map's concurrency as a live map's items are, and reached: the handlers are not run one by one.
    assert most[0] == min(concurrency, items)
