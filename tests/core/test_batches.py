"""The Message Batches engine, through the real ``anthropic`` client against a fake of the batch endpoints.

`tests/support/anthropic_batches.py` serves the batch endpoints (and the live Messages API, from the same script) in
the API's formats over ``httpx2.MockTransport``, so the SDK's own requests, retries, errors and result streaming run
(the engine posts the create body it encoded, and reads the results lines as JSON). Steps run under
``asyncio.gather``, each inside a participant of the engine, as run.map will run them.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest

from agl_notebook import Claude, Role, Run
from agl_notebook.errors import (
    BatchRequestError,
    BudgetExceededError,
    InputError,
    MissingCredentialsError,
    UpstreamUnexpected,
)
from agl_notebook.loop import LoopOutcome
from agl_notebook.models.base import Usage
from agl_notebook.models.batch_replies import batch_statuses, cancel_batches
from agl_notebook.models.batch_state import BatchState, custom_id
from agl_notebook.models.batches import Batches, BatchStatus
from agl_notebook.models.prices import Rates
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.records import record_from_json
from agl_notebook.replay.stores import MemoryStore
from tests.support.anthropic_api import error_response, text
from tests.support.anthropic_batches import FakeBatches, Outcome, Turn
from tests.support.batch_steps import (
    RESEARCHER,
    engine_for,
    inputs,
    no_wait,
    records,
    run_batched,
    run_live,
    three_turns,
    topic_of,
)
from tests.support.steps import Answer, Query


def batches_per_wave(state: JsonObject) -> list[int]:
    waves: Any = state["waves"]
    return [len(w["batches"]) for w in waves]


# --- Waves -----------------------------------------------------------------------------------------------------------


async def test_a_three_turn_role_over_200_inputs_makes_three_batches_and_equals_a_live_run() -> None:
    fake = FakeBatches(three_turns, polls=2)
    statuses: list[BatchStatus] = []
    engine = engine_for(fake, on_status=statuses.append)
    batched, batch_run = await run_batched(engine, inputs(200))

    assert [len(b.requests) for b in fake.creations] == [200, 200, 200]
    assert engine.creations == 3 and fake.live == []
    live_fake = FakeBatches(three_turns)
    live, live_run = await run_live(live_fake, inputs(200))
    assert len(live_fake.live) == 600 and live_fake.creations == []
    for b, lv in zip(batched, live, strict=True):
        assert isinstance(b, LoopOutcome) and isinstance(lv, LoopOutcome)
        assert (b.result, b.transcript, b.usage, b.requests) == (lv.result, lv.transcript, lv.usage, lv.requests)
    assert batched[7].result == Answer("topic 7: notes on topic 7 again")  # type: ignore[union-attr]
    assert records(batch_run) == records(live_run)
    # The backend recorded (and fingerprinted) is the live one's; the engine is recorded beside it.
    assert {r["backend"] for r in records(batch_run)} == {f"anthropic:{Claude.SONNET}"}
    answered = {"engine": "batches", "answered_by": [b.id for b in fake.creations]}
    assert all(r.engine == answered for r in batch_run.store.records())
    assert all(r.engine is None and "engine" not in r.to_json() for r in live_run.store.records())
    assert all(record_from_json(r.to_json()) == r for r in batch_run.store.records())
    # Each batch was polled until it ended, and every poll was told.
    ended = [s for s in statuses if s.processing_status == "ended"]
    assert [s.wave for s in ended] == [1, 2, 3]
    assert ended[0].request_counts == {"processing": 0, "succeeded": 200, "errored": 0, "canceled": 0, "expired": 0}
    assert any(s.processing_status == "in_progress" and s.request_counts["processing"] == 200 for s in statuses)


async def test_each_request_carries_the_live_request_and_its_prompt_caching() -> None:
    fake = FakeBatches(three_turns, polls=0)
    await run_batched(engine_for(fake), inputs(2))
    live_fake = FakeBatches(three_turns)
    await run_live(live_fake, inputs(2))
    batched = [r["params"] for b in fake.creations for r in b.requests]
    live = [{k: v for k, v in p.items() if k != "stream"} for p in live_fake.live]
    key = lambda p: (topic_of(p), len(p["messages"]))  # noqa: E731
    assert sorted(batched, key=key) == sorted(live, key=key)
    assert batched[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert batched[0]["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    ids = [r["custom_id"] for r in fake.creations[0].requests]
    assert ids == [custom_id("researcher/topic 0", 1), custom_id("researcher/topic 1", 1)]
    assert all(
        re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for b in fake.creations for i in (r["custom_id"] for r in b.requests)
    )


async def test_a_wave_past_the_limits_is_split_into_several_batches() -> None:
    fake = FakeBatches(three_turns, polls=1, max_requests=7)
    engine = engine_for(fake, max_requests=7)
    outcomes, _ = await run_batched(engine, inputs(20))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert [len(b.requests) for b in fake.creations] == [7, 7, 6] * 3

    by_bytes = FakeBatches(three_turns, polls=1)
    size = len(json.dumps({"requests": [fake.creations[0].requests[0]] * 3}, separators=(",", ":")))
    outcomes, _ = await run_batched(engine_for(by_bytes, max_bytes=size + 200), inputs(10))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    first_wave = [len(b.requests) for b in by_bytes.creations[:4]]
    assert first_wave == [3, 3, 3, 1]


async def test_a_participant_that_leaves_no_longer_holds_the_wave_back() -> None:
    fake = FakeBatches(three_turns, polls=0)
    engine = engine_for(fake)
    run = Run(model=engine)
    stays, leaves = engine.join("a"), engine.join("b")

    async def other() -> None:
        with leaves:
            await asyncio.sleep(0.01)  # a step that replays, or fails before asking anything

    async def one() -> Answer:
        with stays:
            return await run.step(RESEARCHER, Query("topic 1"))

    result, _ = await asyncio.gather(one(), other())
    assert result == Answer("topic 1: notes on topic 1 again")
    assert [len(b.requests) for b in fake.creations] == [1, 1, 1]
    assert stays.engine_record() == {"engine": "batches", "answered_by": [b.id for b in fake.creations]}


async def test_a_request_outside_a_participant_is_an_input_error() -> None:
    engine = engine_for(FakeBatches(three_turns))
    with pytest.raises(InputError, match=r"engine\.join\(key\)"):
        await Run(model=engine).step(RESEARCHER, Query("topic 1"))
    engine.join("a")
    with pytest.raises(InputError, match="already running"):
        engine.join("a")


# --- Failures, per request -------------------------------------------------------------------------------------------


def failing(kind: Outcome, topics: set[str], times: int = 1) -> Callable[[str, dict[str, Any]], Outcome]:
    """The first ``times`` attempts of the first request of each topic come back ``kind``."""
    seen: dict[str, int] = {}

    def outcome(cid: str, params: dict[str, Any]) -> Outcome:
        if topic_of(params) in topics and len(params["messages"]) == 1:
            seen[cid] = seen.get(cid, 0) + 1
            if seen[cid] <= times:
                return kind
        return "succeeded"

    return outcome


@pytest.mark.parametrize("kind", ["errored", "expired", "canceled"])
async def test_a_failed_request_goes_into_the_next_wave(kind: Outcome) -> None:
    fake = FakeBatches(three_turns, polls=0, outcome=failing(kind, {"topic 1", "topic 3"}))
    outcomes, _ = await run_batched(engine_for(fake), inputs(5))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    # Wave 2 carries the two retries with the three second requests; the retried steps are a wave behind after.
    assert [len(b.requests) for b in fake.creations] == [5, 5, 5, 2]
    assert sum(1 for b in fake.creations[1:2] for r in b.requests if len(r["params"]["messages"]) == 1) == 2


async def test_a_request_failing_past_its_retries_fails_its_step_alone() -> None:
    fake = FakeBatches(three_turns, polls=0, outcome=failing("expired", {"topic 2"}, times=9))
    outcomes, run = await run_batched(engine_for(fake, retries=1), inputs(4))
    error = outcomes[2]
    assert isinstance(error, BatchRequestError) and error.result == "expired"
    assert error.custom_id == custom_id("researcher/topic 2", 1)
    assert "after 2 attempt(s)" in str(error)
    assert [isinstance(o, LoopOutcome) for o in outcomes] == [True, True, False, True]
    assert len(run.store.records()) == 3  # the failed step recorded nothing


async def test_an_invalid_request_fails_its_step_at_once_with_the_api_message() -> None:
    fake = FakeBatches(three_turns, polls=0, outcome=failing("invalid", {"topic 0"}))
    outcomes, _ = await run_batched(engine_for(fake), inputs(3))
    error = outcomes[0]
    assert isinstance(error, BatchRequestError)
    assert error.error_type == "invalid_request_error"
    assert error.api_message == "messages.0.content: Input should be a valid list"
    assert "Input should be a valid list" in str(error)
    assert [len(b.requests) for b in fake.creations] == [3, 2, 2]  # not retried
    assert all(isinstance(o, LoopOutcome) for o in outcomes[1:])


async def test_expired_requests_run_live_when_asked() -> None:
    fake = FakeBatches(three_turns, polls=0, outcome=failing("expired", {"topic 1"}, times=9))
    engine = engine_for(fake, on_expired="live")
    outcomes, batch_run = await run_batched(engine, inputs(3))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert len(fake.live) == 1 and topic_of(fake.live[0]) == "topic 1"
    assert [len(b.requests) for b in fake.creations] == [3, 3, 3]
    _, live_run = await run_live(FakeBatches(three_turns), inputs(3))
    assert records(batch_run) == records(live_run)
    engines = {r.input["text"]: r.engine for r in batch_run.store.records()}  # type: ignore[call-overload, index]
    assert engines["topic 1"] == {
        "engine": "batches",
        "answered_by": ["live", fake.creations[1].id, fake.creations[2].id],
        "live_usage": {
            "input_tokens": 100,
            "output_tokens": 7,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_1h_input_tokens": 0,
        },
    }
    assert "live_usage" not in engines["topic 0"]  # type: ignore[operator]


async def test_a_404_just_after_creation_is_polled_again() -> None:
    fake = FakeBatches(three_turns, polls=1, not_found_first=True)
    outcomes, _ = await run_batched(engine_for(fake), inputs(3))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert len(fake.creations) == 3
    assert all(b.retrieves >= 3 for b in fake.creations)  # the 404, in progress, ended (and the SDK's, for results)


async def test_a_404_past_the_grace_fails_the_steps_of_that_batch() -> None:
    now = [0.0]

    async def slow(seconds: float) -> None:
        now[0] += 100.0
        await asyncio.sleep(0)

    fake = FakeBatches(three_turns, polls=1, not_found_first=True)
    engine = engine_for(fake, sleep=slow, clock=lambda: now[0], not_found_grace=30.0)
    outcomes, _ = await run_batched(engine, inputs(2))
    assert all(isinstance(o, UpstreamUnexpected) and "is still not found" in str(o) for o in outcomes)
    assert len(fake.creations) == 1


# --- Re-attaching ----------------------------------------------------------------------------------------------------


async def test_a_restarted_engine_re_attaches_to_the_batches_in_flight() -> None:
    fake = FakeBatches(three_turns, polls=3)
    saved: list[JsonObject] = []
    wave_two = asyncio.Event()

    def persist(state: JsonObject) -> None:
        saved.append(state)
        if len(fake.creations) == 2:
            wave_two.set()

    engine = engine_for(fake, on_state=persist)
    # The kernel dies while wave 2 is in flight: its batch was created (and the state persisted), nothing ended.
    task = asyncio.ensure_future(run_batched(engine, inputs(6)))
    await wave_two.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [c.method for c in fake.requests if c.url.path.endswith("/cancel")] == []  # the batches go on
    polls = len(fake.requests)
    await asyncio.sleep(0.01)
    assert len(fake.requests) == polls  # the interrupt stopped the polling
    state = saved[-1]
    assert batches_per_wave(state) == [1, 1]

    # A new engine and a new Run from the persisted state: wave 1 and 2 are answered from their batches.
    restarted = engine_for(fake, state=json.loads(json.dumps(state)), on_state=saved.append)
    outcomes, run = await run_batched(restarted, inputs(6))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert len(fake.creations) == 3 and restarted.creations == 1
    assert [len(b.requests) for b in fake.creations] == [6, 6, 6]
    _, live_run = await run_live(FakeBatches(three_turns), inputs(6))
    assert records(run) == records(live_run)
    assert batches_per_wave(saved[-1]) == [1, 1, 1]
    # Answered by the first session's two batches and the one this session created.
    assert {json.dumps(r.engine) for r in run.store.records()} == {
        json.dumps({"engine": "batches", "answered_by": [b.id for b in fake.creations]})
    }


async def test_a_request_that_changed_since_is_sent_again() -> None:
    fake = FakeBatches(three_turns, polls=0)
    saved: list[JsonObject] = []
    await run_batched(engine_for(fake, on_state=saved.append), inputs(2))
    assert len(fake.creations) == 3
    other: Role[Answer] = Role(
        name="researcher", instructions="Other instructions.", tools=RESEARCHER.tools, model=Claude.SONNET
    )
    engine = engine_for(fake, state=saved[-1])
    run = Run(model=engine)
    with engine.join("researcher/topic 0"):
        await run.step(other, Query("topic 0"))
    assert len(fake.creations) == 6  # same custom_ids, other parameters: new requests


def test_a_broken_state_is_an_input_error_naming_where() -> None:
    with pytest.raises(InputError, match=r"Batches\(state=...\)\.waves\[0\]\.batches\[0\]\.requests"):
        Batches(state={"format": 1, "waves": [{"wave": 1, "batches": [{"id": "msgbatch_1", "requests": [1]}]}]})
    with pytest.raises(InputError, match="format"):
        Batches(state={"format": 9, "waves": []})
    state = BatchState.from_json({"format": 1, "waves": []})
    assert state.to_json() == {"format": 1, "waves": []}


def test_custom_ids_are_short_safe_and_distinct() -> None:
    long_key = "review/" + "é" * 100 + "/x"
    ids = {custom_id(k, n) for k in ("a/b", "a_b", long_key, "") for n in (1, 2, 99999)}
    assert len(ids) == 12
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids)
    assert custom_id("review 3", 2).startswith("review_3-")
    assert custom_id("review 3", 2) == custom_id("review 3", 2)


def test_settings_out_of_range_are_input_errors() -> None:
    for kwargs in ({"retries": -1}, {"max_requests": 0}, {"poll_factor": 0.5}, {"on_expired": "later"}):
        with pytest.raises(InputError, match="Batches"):
            Batches(**kwargs)


async def test_the_fake_lists_and_cancels_batches_through_the_client() -> None:
    fake = FakeBatches(lambda params: Turn((text("Hi."),)), polls=5)
    client = fake.client()
    message = {"role": "user", "content": "Hello"}
    request: Any = {"custom_id": "a", "params": {"model": Claude.SONNET, "max_tokens": 10, "messages": [message]}}
    first = await client.messages.batches.create(requests=[request])
    second = await client.messages.batches.create(requests=[request])
    page = await client.messages.batches.list(limit=1)
    assert [b.id for b in page.data] == [second.id] and page.has_more
    assert [b.id async for b in client.messages.batches.list(limit=1)] == [second.id, first.id]
    canceling = await client.messages.batches.cancel(first.id)
    assert canceling.processing_status == "canceling"
    ended = await client.messages.batches.retrieve(first.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
    results = [r async for r in await client.messages.batches.results(first.id)]
    assert [(r.custom_id, r.result.type) for r in results] == [("a", "canceled")]


async def test_a_step_cancelled_as_its_batch_ends_leaves_the_others_their_replies() -> None:
    fake = FakeBatches(three_turns, polls=1)
    tasks: list[asyncio.Task[Answer]] = []

    def on_status(status: BatchStatus) -> None:
        if status.processing_status == "ended" and status.wave == 1:
            tasks[1].cancel()  # before the results are read: its reply arrives (first) for a step no longer waiting

    engine = engine_for(fake, on_status=on_status)
    run = Run(model=engine)
    participants = [engine.join(f"k{i}") for i in range(2)]

    async def one(i: int) -> Answer:
        with participants[i]:
            return await run.step(RESEARCHER, Query(f"topic {i}"))

    tasks.extend(asyncio.ensure_future(one(i)) for i in range(2))
    first, second = await asyncio.gather(*tasks, return_exceptions=True)
    assert first == Answer("topic 0: notes on topic 0 again")
    assert isinstance(second, asyncio.CancelledError)
    assert [len(b.requests) for b in fake.creations] == [2, 1, 1]


async def test_recorded_steps_replay_and_leave_without_a_batch() -> None:
    fake = FakeBatches(three_turns, polls=0)
    store = MemoryStore()
    first, _ = await run_batched(engine_for(fake), inputs(4), store)
    again, _ = await run_batched(engine_for(fake), inputs(4), store)
    assert len(fake.creations) == 3  # the second map replayed every step from its record
    assert [o.result for o in again if isinstance(o, LoopOutcome)] == [
        o.result for o in first if isinstance(o, LoopOutcome)
    ]


async def test_without_credentials_each_step_fails_saying_how_to_get_them() -> None:
    outcomes, _ = await run_batched(Batches(poll_first=0.0, sleep=no_wait), inputs(2))
    assert all(isinstance(o, MissingCredentialsError) and "ANTHROPIC_API_KEY" in str(o) for o in outcomes)


async def test_a_refused_create_fails_the_steps_it_carried_with_the_sdk_error() -> None:
    fake = FakeBatches(three_turns, polls=0)
    handle = fake.handle
    refused = [0]

    def refuse_second_wave(request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and request.url.path == "/v1/messages/batches" and len(fake.creations) == 1:
            refused[0] += 1
            return error_response(500, "api_error", "Internal server error")
        return handle(request)

    fake.handle = refuse_second_wave  # type: ignore[method-assign]
    engine = Batches(client=fake.client(max_retries=1), poll_first=0.0, sleep=no_wait)
    outcomes, run = await run_batched(engine, inputs(3))
    assert refused == [2]  # the SDK's own retry, then the error
    assert all(isinstance(o, anthropic.InternalServerError) and "Internal server error" in str(o) for o in outcomes)
    assert list(run.store.records()) == []
    assert len(fake.creations) == 1


async def test_a_restart_between_the_batches_of_a_split_wave_submits_each_request_once() -> None:
    fake = FakeBatches(three_turns, polls=2, max_requests=4)
    saved: list[JsonObject] = []
    third = asyncio.Event()

    def persist(state: JsonObject) -> None:
        saved.append(state)
        if len(fake.creations) == 3:  # wave 2's first batch: its second is not created yet
            third.set()

    task = asyncio.ensure_future(run_batched(engine_for(fake, max_requests=4, on_state=persist), inputs(7)))
    await third.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)  # a creation under way when the interrupt came completes (shielded) and is kept
    before = len(fake.creations)
    assert batches_per_wave(saved[-1])[0] == 2 and sum(batches_per_wave(saved[-1])) == before

    restarted = engine_for(fake, max_requests=4, state=saved[-1])
    outcomes, run = await run_batched(restarted, inputs(7))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert len(fake.creations) == before + restarted.creations
    sent = [(r["custom_id"], json.dumps(r["params"], sort_keys=True)) for b in fake.creations for r in b.requests]
    assert len(sent) == len(set(sent)) == 7 * 3  # every request once, none twice
    _, live_run = await run_live(FakeBatches(three_turns), inputs(7))
    assert records(run) == records(live_run)


async def test_the_batches_of_a_saved_state_are_told_and_canceled() -> None:
    fake = FakeBatches(three_turns, polls=3)
    saved: list[JsonObject] = []
    wave_two = asyncio.Event()

    def persist(state: JsonObject) -> None:
        saved.append(state)
        if len(fake.creations) == 2:
            wave_two.set()

    task = asyncio.ensure_future(run_batched(engine_for(fake, on_state=persist), inputs(4)))
    await wave_two.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    client = fake.client()
    statuses = await batch_statuses(client, saved[-1])
    assert [(s.batch_id, s.wave, s.processing_status) for s in statuses] == [
        (fake.creations[0].id, 1, "ended"),
        (fake.creations[1].id, 2, "in_progress"),
    ]
    canceled = await cancel_batches(client, saved[-1])
    assert [(s.batch_id, s.processing_status) for s in canceled] == [(fake.creations[1].id, "canceling")]
    assert fake.calls("POST", r"/v1/messages/batches/[^/]+/cancel") == 1

    # Re-attached, the canceled wave's requests come back canceled and go into a new batch.
    outcomes, run = await run_batched(engine_for(fake, state=saved[-1]), inputs(4))
    assert all(isinstance(o, LoopOutcome) for o in outcomes)
    assert [len(b.requests) for b in fake.creations] == [4, 4, 4, 4]
    _, live_run = await run_live(FakeBatches(three_turns), inputs(4))
    assert records(run) == records(live_run)


async def test_a_batched_step_is_recorded_and_spent_at_the_batch_price() -> None:
    fake = FakeBatches(three_turns, polls=0, outcome=failing("expired", {"topic 1"}, times=9))
    prices = {Claude.SONNET: Rates(3.0, 15.0, 3.75, 6.0, 0.30)}  # batch_discount: 0.5 unless given
    _, batch_run = await run_batched(engine_for(fake, on_expired="live"), inputs(3), prices=prices)
    _, live_run = await run_live(FakeBatches(three_turns), inputs(3), prices=prices)
    rates = batch_run.meter.prices.rates_for(f"anthropic:{Claude.SONNET}")
    assert rates is not None and rates.batch_discount == 0.5
    by_topic = {r.input["text"]: r for r in batch_run.store.records()}  # type: ignore[call-overload, index]
    live = {r.input["text"]: r for r in live_run.store.records()}  # type: ignore[call-overload, index]
    for topic in ("topic 0", "topic 2"):
        batched, alive = by_topic[topic], live[topic]
        assert batched.usage == alive.usage
        assert alive.cost is not None and alive.cost.usd == round(rates.cost(alive.usage), 8)
        assert batched.cost is not None and batched.cost.usd == round(rates.batched().cost(batched.usage), 8)
        assert batched.cost.usd == pytest.approx(alive.cost.usd / 2)
    # Its first request expired and was answered live: that one at the live price, the other two at the batch price.
    mixed = by_topic["topic 1"]
    first = Usage(input_tokens=100, output_tokens=7)
    rest = Usage(input_tokens=203, output_tokens=14, cache_read_input_tokens=180)
    assert mixed.usage == first + rest
    assert mixed.cost is not None and mixed.cost.usd == round(rates.cost(first) + rates.batched().cost(rest), 8)
    # The Run's account reserved and settled every request through the engine at the batch price.
    total = sum((r.usage for r in batch_run.store.records()), Usage())
    assert batch_run.meter.spent_usd == pytest.approx(rates.batched().cost(total))
    assert live_run.meter.spent_usd == pytest.approx(rates.cost(total))


async def test_a_tight_budget_on_a_batch_refuses_the_requests_that_may_not_fit_and_never_hangs() -> None:
    # Requests in a batch settle only when the wave they join is sent, so one that waited for them would wait for
    # ever (it did: no creation, the steps waiting on one another). Now a request whose worst case does not fit is
    # refused, and what was sent cannot pass the budget.
    fake = FakeBatches(three_turns)
    engine = engine_for(fake, model=Claude.OPUS)
    outcomes, run = await asyncio.wait_for(run_batched(engine, inputs(4), budget_usd=0.2), timeout=20)
    refused = [o for o in outcomes if isinstance(o, BudgetExceededError)]
    assert refused, outcomes  # the budget is too small for every step's worst case
    assert all(isinstance(o, LoopOutcome | BudgetExceededError) for o in outcomes), outcomes
    assert run.spent_usd <= 0.2
    assert "cannot wait for the others to settle" in str(refused[0])


# --- Results lines read as JSON ---------------------------------------------------------------------------------------


SPOILED: dict[str, tuple[Callable[[dict[str, Any]], bytes], str, bool]] = {
    # how the line of "topic 1"'s first request is spoiled, what its step's error says, whether the others finish
    "not JSON": (lambda line: b'{"custom_id": "researcher_topic_1\n', "is not JSON", False),
    "no custom_id": (lambda line: json.dumps({"result": line["result"]}).encode() + b"\n", "names no custom_id", False),
    "untyped result": (lambda line: json.dumps({**line, "result": {}}).encode() + b"\n", "no result type", False),
    "tool input a list": (
        lambda line: _with_message(
            line, content=[{"type": "tool_use", "id": "toolu_1", "name": "look_up", "input": [1]}]
        ),
        "input that is not an object",
        True,
    ),
    "tool call with no name": (
        lambda line: _with_message(line, content=[{"type": "tool_use", "id": "toolu_1", "input": {}}]),
        "no id or name",
        True,
    ),
    "text block with no text": (lambda line: _with_message(line, content=[{"type": "text"}]), "no text", True),
    "untyped block": (lambda line: _with_message(line, content=[{"text": "hi"}]), "no type", True),
    "content not a list": (lambda line: _with_message(line, content={"type": "text"}), "no list of content", True),
    "unknown stop reason": (lambda line: _with_message(line, stop_reason="sideways"), "unknown stop reason", True),
    "message not an object": (
        lambda line: json.dumps({**line, "result": {"type": "succeeded", "message": "hi"}}).encode() + b"\n",
        "not an object",
        True,
    ),
}


def _with_message(line: dict[str, Any], **changes: Any) -> bytes:
    message = {**line["result"]["message"], **changes}
    return json.dumps({**line, "result": {"type": "succeeded", "message": message}}).encode() + b"\n"


@pytest.mark.parametrize("how", list(SPOILED))
async def test_a_malformed_results_line_fails_its_step_with_an_error_naming_it(how: str) -> None:
    spoil, says, others_finish = SPOILED[how]
    fake = FakeBatches(three_turns, polls=1)
    answer = fake._answer

    def spoiling(cid: str, params: dict[str, Any]) -> tuple[str, Outcome, bytes]:
        cid, outcome, line = answer(cid, params)
        if cid.startswith("researcher_topic_1-") and cid.endswith("-1"):
            line = spoil(json.loads(line))
        return cid, outcome, line

    fake._answer = spoiling  # type: ignore[method-assign,assignment]
    outcomes, _ = await asyncio.wait_for(run_batched(engine_for(fake), inputs(4)), 60)  # before: two hung for ever
    spoiled = outcomes[1]
    assert isinstance(spoiled, UpstreamUnexpected) and says in str(spoiled), spoiled
    failed = [o for o in outcomes if not isinstance(o, LoopOutcome)]
    assert all(isinstance(o, UpstreamUnexpected) for o in failed), failed  # never a raw KeyError or ValueError
    if others_finish:
        assert failed == [spoiled]
    if not others_finish:  # a line the engine cannot read: the error names its batch
        assert fake.creations[0].id in str(spoiled)


async def test_a_result_whose_reading_raises_fails_its_step_and_leaves_none_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agl_notebook.models import batch_replies, batches

    real = batch_replies.message_events

    def breaking(message: Any) -> Any:
        if "topic 2" in json.dumps(message):
            raise KeyError("an unforeseen shape")
        return real(message)

    monkeypatch.setattr(batches, "message_events", breaking)
    fake = FakeBatches(three_turns, polls=1)
    outcomes, _ = await asyncio.wait_for(run_batched(engine_for(fake), inputs(5)), 60)
    assert isinstance(outcomes[2], KeyError)
    assert [isinstance(o, LoopOutcome) for o in outcomes] == [True, True, False, True, True]


def test_a_results_line_is_read_with_its_usage_and_its_one_hour_cache_writes() -> None:
    from agl_notebook.models.base import TextDelta, ThinkingDelta, ToolCall, TurnEnd
    from agl_notebook.models.batch_replies import message_events
    from agl_notebook.transcript import RawBlock

    usage: JsonObject = {
        "input_tokens": 7,
        "output_tokens": 3,
        "cache_read_input_tokens": 11,
        "cache_creation_input_tokens": 5,
    }
    message: JsonObject = {
        "id": "msg_1",
        "content": [
            {"type": "thinking", "thinking": "...", "signature": "c2ln"},  # kept whole, after its text is drawn
            {"type": "text", "text": ""},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "look_up", "input": {"text": "x"}},
        ],
        "stop_reason": "tool_use",
        "usage": {**usage, "cache_creation": {"ephemeral_1h_input_tokens": 2, "ephemeral_5m_input_tokens": 3}},
    }
    assert message_events(message) == [
        ThinkingDelta("..."),
        RawBlock({"type": "thinking", "thinking": "...", "signature": "c2ln"}),
        TextDelta("Looking."),
        ToolCall("toolu_1", "look_up", {"text": "x"}),
        TurnEnd("tool_use", Usage(7, 3, 5, 11, 2)),
    ]
    bare: JsonObject = {
        "id": "msg_2",
        "content": [],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": None, "output_tokens": True},
    }
    assert message_events(bare) == [TurnEnd("end_turn", Usage(0, 0, 0, 0, 0))]


# --- The client an engine makes --------------------------------------------------------------------------------------

SEVERAL_RUNS = """\
import asyncio
from agl_notebook.models.batches import Batches
from agl_notebook.loop import LoopOutcome
from tests.support.batch_steps import inputs, no_wait, run_batched

engine = Batches(poll_first=0.0, sleep=no_wait{settings})  # no client: one made from the environment
for n in (2, 3, 1, 4):
    outcomes, _ = asyncio.run(run_batched(engine, inputs(n)))
    assert all(isinstance(o, LoopOutcome) for o in outcomes), outcomes
    fresh = Batches(poll_first=0.0, sleep=no_wait{settings})
    outcomes, _ = asyncio.run(run_batched(fresh, inputs(n)))
    assert all(isinstance(o, LoopOutcome) for o in outcomes), outcomes
import gc
gc.collect()
print("ok", engine.creations)
"""


@pytest.mark.parametrize(
    ("settings", "creations"),
    [
        ("", 9),  # the engine's later runs re-attach to its batches for the items it saw: 9 batches in 12 waves
        (", max_requests=1", 12),  # a batch per request: a wave polls as many batches, over as many connections
    ],
)
def test_an_engine_without_a_client_leaks_none_across_several_asyncio_runs(settings: str, creations: int) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.anthropic_api import KEY
    from tests.support.anthropic_batches import served

    root = Path(__file__).resolve().parents[2]
    with served(FakeBatches(three_turns, polls=1)) as url:
        env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url, "PYTHONPATH": str(root)}
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        done = subprocess.run(
            [sys.executable, "-W", "always::ResourceWarning", "-c", SEVERAL_RUNS.format(settings=settings)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=root,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok {creations}"
    # Each wave closes the client it made, and hands out its last answer only once it is closed: otherwise the last
    # run's `asyncio.run` cancelled the close under way (anyio's shields do not stop asyncio's cancel) and a
    # connection it had not reached yet was left open ("ResourceWarning: unclosed" socket and transport).
    for symptom in ("unclosed", "Task exception was never retrieved", "Event loop is closed", "Traceback"):
        assert symptom not in done.stderr, done.stderr
    assert done.stderr == ""


# --- A batch the API no longer knows --------------------------------------------------------------------------------


async def interrupted_in_wave_two(fake: FakeBatches) -> JsonObject:
    """Six steps whose kernel died once wave 2 was created (wave 1 ended, its results read): the state it left."""
    saved: list[JsonObject] = []
    wave_two = asyncio.Event()

    def persist(state: JsonObject) -> None:
        saved.append(state)
        if len(fake.creations) == 2:
            wave_two.set()

    task = asyncio.ensure_future(run_batched(engine_for(fake, on_state=persist), inputs(6)))
    await wave_two.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert batches_per_wave(saved[-1]) == [1, 1]
    state: JsonObject = json.loads(json.dumps(saved[-1]))
    return state


def ticking() -> dict[str, Any]:
    """A clock that each poll's wait moves on by 25 s (the grace of 60 s passes on the third wait)."""
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += 25.0
        await asyncio.sleep(0)

    return {"sleep": sleep, "clock": lambda: now[0]}


def unknown_failures(outcomes: list[Any], batch_ids: set[str]) -> None:
    assert outcomes and all(isinstance(o, BatchRequestError) for o in outcomes), outcomes
    for o in outcomes:
        assert o.result == "unknown" and o.batch_id in batch_ids
        assert "agl-notebook batches forget NOTEBOOK" in str(o) and 'on_unknown_batch="send_again"' in str(o)


@pytest.mark.parametrize("how", ["deleted", "results_gone", "another_workspace"])
async def test_a_batch_the_api_no_longer_knows_fails_its_steps_saying_how_and_sends_nothing(how: str) -> None:
    fake = FakeBatches(three_turns, polls=3, workspace="a")
    state = await interrupted_in_wave_two(fake)
    first, second = (b.id for b in fake.creations)
    if how == "deleted":
        fake.deleted.update({first, second})
    elif how == "results_gone":
        fake.results_gone.add(first)  # wave 1 ended long ago: the API keeps its results 29 days
    other = FakeBatches(three_turns, polls=0, workspace="b") if how == "another_workspace" else fake
    before = len(other.creations)
    engine = engine_for(other, state=state, **ticking())
    outcomes, run = await run_batched(engine, inputs(6))
    # Every step's first request is in the batch the API no longer knows: each fails, and nothing is sent again.
    unknown_failures(outcomes, {first})
    assert len(other.creations) == before and engine.creations == 0
    assert not run.store.records()
    # Run again: the same, until the person chooses (nothing paid twice without asking).
    again, _ = await run_batched(engine_for(other, state=state, **ticking()), inputs(6))
    unknown_failures(again, {first})
    assert len(other.creations) == before


@pytest.mark.parametrize("how", ["deleted", "results_gone", "another_workspace"])
async def test_a_batch_the_api_no_longer_knows_is_sent_again_in_a_new_batch_when_asked(how: str) -> None:
    fake = FakeBatches(three_turns, polls=3, workspace="a")
    state = await interrupted_in_wave_two(fake)
    first, second = (b.id for b in fake.creations)
    if how == "deleted":
        fake.deleted.update({first, second})
    elif how == "results_gone":
        fake.results_gone.add(first)
    other = FakeBatches(three_turns, polls=0, workspace="b") if how == "another_workspace" else fake
    before = len(other.creations)
    saved: list[JsonObject] = []
    engine = engine_for(other, state=state, on_unknown_batch="send_again", on_state=saved.append, **ticking())
    outcomes, run = await run_batched(engine, inputs(6))
    assert all(isinstance(o, LoopOutcome) for o in outcomes), outcomes
    _, live_run = await run_live(FakeBatches(three_turns), inputs(6))
    assert records(run) == records(live_run)
    # Only what the API no longer has is sent again: wave 2's batch still answers when only wave 1's results are gone.
    sent_again = 2 if how == "results_gone" else 3
    assert len(other.creations) == before + sent_again and engine.creations == sent_again
    assert all(len(b.requests) == 6 for b in other.creations[before:])
    # The state notes the batches gone: an engine taking it up asks nothing of them again.
    waves: Any = saved[-1]["waves"]
    gone = {b["id"] for w in waves for b in w["batches"] if b.get("gone")}
    assert gone == ({first} if how == "results_gone" else {first, second})
    polls = len(other.requests)
    store: Any = run.store
    replayed, _ = await run_batched(engine_for(other, state=saved[-1]), inputs(6), store=store)
    assert all(isinstance(o, LoopOutcome) for o in replayed)
    assert len(other.requests) == polls  # every step replays from its record


async def test_an_earlier_sessions_batch_not_found_for_a_moment_is_polled_again() -> None:
    fake = FakeBatches(three_turns, polls=3)
    state = await interrupted_in_wave_two(fake)
    second = fake.creations[1]
    fake.not_found_first = True
    second.retrieves = 0  # its next retrieve is the API's 404, as for a batch just created
    outcomes, _ = await run_batched(engine_for(fake, state=state, **ticking()), inputs(6))
    assert all(isinstance(o, LoopOutcome) for o in outcomes), outcomes
    assert len(fake.creations) == 3
