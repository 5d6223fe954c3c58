"""What a Run spends and its budget, through the real anthropic client over a fake Messages API that reports usage.

The fake counts one input token per byte of what it is sent (the worst a byte-level tokenizer can do), so text in
a script of three bytes a character is counted about ten times what the Run estimates from its characters: the
budget has to hold when its estimate is low.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest

from agl_notebook import Claude, Role, Run, describe, reporting_tool
from agl_notebook.errors import BudgetExceededError, InputError, PriceUnknownError, UpstreamUnexpected
from agl_notebook.events import Event, ModelSpent
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.prices import PRICES, Rates
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run import _meter
from tests.support.anthropic_api import CountingAPI, api, fail, reply, text


@dataclass(frozen=True)
class Note:
    text: str = describe("The note.")


@dataclass(frozen=True)
class Summary:
    title: str = describe("A title.")


def summarizer(max_tokens: int = 256) -> Role[Summary]:
    return Role(
        "summarizer",
        "Summarize the note.",
        tools=[reporting_tool("report_summary", "Hand back the summary.", Summary)],
        model=Claude.OPUS,
        max_tokens=max_tokens,
    )


WIDE = "要約してください。" * 250  # 2,250 characters, 6,750 bytes: the estimate counts a tenth of the fake's tokens


async def run_many(run: Run, notes: list[str], *, in_flight: int = 16) -> list[BaseException | Summary]:
    gate = asyncio.Semaphore(in_flight)

    async def one(text: str) -> Summary:
        async with gate:
            return await run.step(summarizer(), Note(text))

    return await asyncio.gather(*(one(t) for t in notes), return_exceptions=True)


@pytest.mark.parametrize("text", [WIDE, "Summarize the plain-text note. " * 200], ids=["undercounted", "plain"])
async def test_a_budget_that_runs_out_midway_is_passed_by_at_most_one_request(text: str) -> None:
    fake = CountingAPI()
    store = MemoryStore()
    run = Run(model=fake.model(), budget_usd=0.40, store=store)
    notes = [f"{i}: {text}" for i in range(40)]
    outcomes = await run_many(run, notes)

    done = [o for o in outcomes if isinstance(o, Summary)]
    refused = [o for o in outcomes if isinstance(o, BudgetExceededError)]
    assert done and refused and len(done) + len(refused) == 40, "the budget ran out midway"
    assert sum(fake.costs) <= 0.40 + max(fake.costs), (sum(fake.costs), max(fake.costs))
    assert fake.most_in_flight > 1, "requests really overlapped"
    assert len(fake.costs) == len(done), "a refused request never reached the API"
    assert run.spent_usd == pytest.approx(sum(fake.costs))
    assert len(store.records()) == len(done), "a refused step recorded nothing"
    error = refused[0]
    assert "$0.40" in str(error) and "spent $" in str(error)
    assert error.budget_usd == 0.40 and error.spent_usd <= run.spent_usd


async def test_with_the_worst_case_guard_off_an_undercounting_estimate_overshoots() -> None:
    # The acceptance check above can fail: admitting each request on its (low) estimate alone, 16 steps in flight
    # pass the budget by far more than one request.
    fake = CountingAPI()
    run = Run(model=fake.model(), budget_usd=0.40)
    original = _meter.estimate

    def trusting(request: Any, rates: Rates) -> _meter.Estimate:
        likely = original(request, rates).likely
        return _meter.Estimate(likely, likely)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_meter, "estimate", trusting)
        await run_many(run, [f"{i}: {WIDE}" for i in range(40)])
    assert sum(fake.costs) > 0.40 + max(fake.costs)


async def test_sixteen_steps_in_flight_share_one_budget_and_the_estimate_waits_rather_than_fails() -> None:
    fake = CountingAPI(delay=0.01)
    run = Run(model=fake.model(), budget_usd=10.0)  # room for all 16: none is refused
    outcomes = await run_many(run, [f"{i}: short note" for i in range(16)])
    assert all(isinstance(o, Summary) for o in outcomes)
    assert fake.most_in_flight == 16, "far from the budget nothing waits"
    assert run.spent_usd == pytest.approx(sum(fake.costs))
    assert run.meter.reserved_usd == 0


async def test_each_record_keeps_its_cost_and_a_replay_costs_nothing() -> None:
    fake = CountingAPI()
    store = MemoryStore()
    events: list[Event] = []
    first = Run(model=fake.model(), store=store, on_event=events.append)
    await first.step(summarizer(), Note("a note"))
    (record,) = store.records()
    assert record.cost is not None and record.cost.rates_as_of == PRICES.as_of
    assert record.cost.usd == pytest.approx(fake.costs[0])
    (spent,) = [e for e in events if isinstance(e, ModelSpent)]
    assert spent.usd == pytest.approx(fake.costs[0]) and spent.run_spent_usd == first.spent_usd
    assert "1 live request(s)" in str(first.summary())

    again = Run(model=fake.model(), store=store, budget_usd=0.0)  # no budget at all, and it still replays
    assert await again.step(summarizer(), Note("a note")) == Summary("done")
    assert again.spent_usd == 0 and len(fake.costs) == 1
    assert str(again.summary()).startswith("0 live request(s), 0 tokens, $0.0000 spent of a budget of $0.0000")


async def test_a_budget_on_a_model_with_no_price_fails_before_any_request() -> None:
    fake = CountingAPI()
    unpriced = fake.model("claude-mythos-preview")
    with pytest.raises(PriceUnknownError, match="claude-mythos-preview has no price"):
        await Run(model=unpriced, budget_usd=1.0).step(summarizer(), Note("x"))
    assert fake.costs == []
    assert isinstance(PriceUnknownError("x"), InputError)


async def test_prices_given_to_the_run_price_its_records() -> None:
    fake = CountingAPI()
    store = MemoryStore()
    run = Run(model=fake.model(), store=store, prices={Claude.OPUS: Rates(1, 1, 1, 1, 1)})
    await run.step(summarizer(), Note("a note"))
    (record,) = store.records()
    assert record.cost is not None and record.cost.usd is not None
    assert record.cost.usd < fake.costs[0], "priced at the Run's rates, not the library's"


def test_a_budget_must_be_a_number_of_dollars() -> None:
    for bad in (-1, float("nan"), "5", True):
        with pytest.raises(InputError, match="budget_usd"):
            Run(budget_usd=bad)  # type: ignore[arg-type]


async def test_a_refused_request_spends_nothing_and_one_cut_off_mid_reply_spends_its_estimate() -> None:
    refused = api(fail(400, "invalid_request_error", "Bad request."))
    run = Run(model=AnthropicModel(client=refused.client(), model=Claude.OPUS), budget_usd=1.0)
    with pytest.raises(anthropic.BadRequestError):
        await run.step(summarizer(), Note("x"))
    assert (run.spent_usd, run.meter.reserved_usd, run.meter.requests) == (0, 0, 0)

    cut = api(reply(text("Half a rep"), message_stop=False))
    run = Run(model=AnthropicModel(client=cut.client(), model=Claude.OPUS), budget_usd=1.0)
    with pytest.raises(UpstreamUnexpected, match="ended before message_stop"):
        await run.step(summarizer(), Note("x"))
    assert 0 < run.spent_usd < 1.0, "billed, its usage unknown: counted at its estimate"
    assert run.meter.reserved_usd == 0


@pytest.mark.parametrize(("budget", "estimates"), [(None, 0), (10.0, 1)])
async def test_a_whole_reply_is_estimated_only_to_reserve_it(
    monkeypatch: pytest.MonkeyPatch, budget: float | None, estimates: int
) -> None:
    """An estimate encodes the whole conversation: a request settled with its usage makes none after its reply.

    A batch map of 2,000 items made 6,000 of them, each thrown away (its reservation was settled already).
    """
    made: list[object] = []

    def counted(request: Any, rates: Rates) -> _meter.Estimate:
        made.append(request)
        return real(request, rates)

    real = _meter.estimate
    monkeypatch.setattr(_meter, "estimate", counted)
    fake = CountingAPI()
    run = Run(model=fake.model(), budget_usd=budget)
    outcomes = await run_many(run, [f"{i}: a note" for i in range(5)])
    assert all(isinstance(o, Summary) for o in outcomes)
    assert len(made) == estimates * len(fake.costs) and len(fake.costs) >= 5
    assert run.spent_usd == pytest.approx(sum(fake.costs))


async def test_a_batch_engine_reserves_and_settles_at_the_batch_discount() -> None:
    from agl_notebook.models.base import ModelRequest, Usage
    from agl_notebook.transcript import user_text

    run = Run(budget_usd=1.0)
    request = ModelRequest(Claude.OPUS, "Summarize.", (user_text("a note"),), (), 256)
    reservation = await run.meter.reserve("anthropic:" + Claude.OPUS, request, batched=True)
    assert run.meter.reserved_usd > 0
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    assert reservation.settle(usage) == pytest.approx((4 + 2) / 2)
    assert run.spent_usd == pytest.approx(3.0) and run.meter.reserved_usd == 0
    with pytest.raises(BudgetExceededError, match=r"spent \$3\.00"):
        await run.meter.reserve("anthropic:" + Claude.OPUS, request, batched=True)


async def test_a_json_function_s_llm_requests_count_against_the_budget() -> None:
    from agl_notebook.functions import FunctionCallError, load_agent

    agent = load_agent(
        {"model": Claude.OPUS.value, "functions": {"chat": {"commands": {"llm": "Say hello.", "return": "{ result }"}}}}
    )
    fake = CountingAPI()
    with pytest.raises(FunctionCallError, match=r"llm: BudgetExceededError: .* would pass this Run's budget"):
        await agent.call("chat", {}, run=Run(model=fake.model(), budget_usd=0.0))
    assert fake.costs == [], "the request was not made"


async def test_a_map_s_items_share_the_budget_and_its_table_shows_their_recorded_dollars() -> None:
    from agl_notebook.run import MapItemError

    fake = CountingAPI()
    run = Run(model=fake.model(), budget_usd=0.40)
    results = await run.map(summarizer(), [Note(f"{i}: {WIDE}") for i in range(40)], concurrency=16)
    refused = [r for r in results if isinstance(r, MapItemError)]
    assert refused and len(refused) < 40
    assert all("BudgetExceededError" in str(r) for r in refused)
    assert sum(fake.costs) <= 0.40 + max(fake.costs)
    recorded = sum(item.cost.usd or 0 for item in results.items if item.cost is not None)
    assert recorded == pytest.approx(sum(fake.costs), abs=1e-6)
    assert f"${recorded:.4f}" in repr(results)


class BatchAnswered:
    """A model whose replies say they came through a batch (as the Batches engine's record does), or live."""

    def __init__(self, answered_by: list[str], live: dict[str, int] | None = None) -> None:
        self.answered_by, self.live = answered_by, live

    def backend_id(self, model: str) -> str:
        return "anthropic:" + Claude.OPUS

    def engine_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"engine": "batches", "answered_by": self.answered_by}
        if self.live is not None:
            record["live_usage"] = self.live
        return record

    async def stream(self, request: Any) -> Any:
        from agl_notebook.models.base import ToolCall, TurnEnd, Usage

        yield ToolCall("toolu_1", "report_summary", {"title": "done"})
        yield TurnEnd("tool_use", Usage(input_tokens=1_000_000, output_tokens=100_000))


@pytest.mark.parametrize(
    ("answered_by", "live", "usd"),
    [
        (["msgbatch_1"], None, (4 + 2) / 2),  # half price in a batch
        (["live"], {"input_tokens": 1_000_000, "output_tokens": 100_000}, 4 + 2),  # expired, answered live
    ],
)
async def test_a_step_answered_in_a_batch_is_priced_at_the_batch_discount(
    answered_by: list[str], live: dict[str, int] | None, usd: float
) -> None:
    store = MemoryStore()
    run = Run(model=BatchAnswered(answered_by, live), store=store)
    await run.step(summarizer(), Note("x"))
    (record,) = store.records()
    assert record.cost is not None and record.cost.usd == pytest.approx(usd)
    assert run.spent_usd == pytest.approx(usd)
