"""The price table: Anthropic's rates per million tokens, what a request's usage costs, and what has no price."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agl_notebook import Claude, describe
from agl_notebook.errors import InputError
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import ModelRequest, TurnEnd, Usage
from agl_notebook.models.prices import (
    PRICES,
    PriceTable,
    Rates,
    RecordedCost,
    batched_usage,
    dollars,
    prices_from_json,
)
from agl_notebook.payloads import JsonObject, JsonValue
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.transcript import user_text
from tests.support.anthropic_api import api, reply, text


def test_each_rate_prices_its_own_tokens() -> None:
    rates = Rates(input=4, output=20, cache_write_5m=5, cache_write_1h=8, cache_read=0.2)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=2_000_000,
        cache_creation_input_tokens=3_000_000,
        cache_read_input_tokens=4_000_000,
        cache_creation_1h_input_tokens=1_000_000,  # of the 3 million written, 1 million for an hour
    )
    assert rates.cost(usage) == pytest.approx(4 + 40 + 2 * 5 + 1 * 8 + 4 * 0.2)
    assert rates.batched().cost(usage) == pytest.approx(rates.cost(usage) / 2)
    assert rates.highest_input == 8


def test_the_table_knows_the_library_s_claude_models_and_guesses_none() -> None:
    opus = PRICES.rates_for("anthropic:" + Claude.OPUS)
    assert opus == Rates(4, 20, 5, 8, 0.20, batch_discount=0.5)
    assert PRICES.rates_for("claude-opus-4-8") == Rates(5, 25, 6.25, 10, 0.50)
    assert PRICES.rates_for("claude-fable-5-1") == Rates(10, 50, 12.50, 20, 0.25)
    for unknown in ("claude-mythos-preview", "claude-opus-9", "scripted:abc"):
        assert PRICES.rates_for(unknown) is None
        assert PRICES.cost(unknown, Usage(10, 10)) is None
    assert PRICES.as_of == "2026-12-01" and PRICES.source.startswith("https://platform.claude.com/")
    assert PRICES.record_cost("scripted:abc", Usage(10, 10)) is None, "a scripted model is never billed"
    assert PRICES.record_cost("anthropic:claude-mythos-preview", Usage(10, 10)) == RecordedCost(None, "2026-12-01")
    assert RecordedCost(None, "x").words() == "price unknown"
    own = PRICES.with_rates({"bedrock:my-claude": Rates(1, 1, 1, 1, 1)})
    assert own.rates_for("bedrock:my-claude") == Rates(1, 1, 1, 1, 1) and own.priced("bedrock:my-claude")
    assert not own.priced("scripted:abc") and own.rates_for("bedrock:claude-opus-5-5") is None
    assert (dollars(0.012345), dollars(12.5)) == ("$0.0123", "$12.50")


def test_the_table_s_models_are_ids_the_installed_sdk_knows() -> None:
    from typing import get_args

    from anthropic.types.model_param import ModelParam

    known = set(get_args(get_args(ModelParam)[0]))
    assert set(PRICES.rates) <= known
    assert {c.value for c in Claude} <= known


def test_bad_rates_and_tables_are_refused() -> None:
    with pytest.raises(InputError, match=r"Rates.input takes a number of dollars >= 0"):
        Rates(-1, 0, 0, 0, 0)
    with pytest.raises(InputError, match="batch_discount"):
        Rates(1, 1, 1, 1, 1, batch_discount=2)
    with pytest.raises(InputError, match="as_of"):
        PriceTable({}, as_of="")


def test_a_price_file_adds_to_the_table_and_names_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    rates = {"input": 1, "output": 2, "cache_write_5m": 1.25, "cache_write_1h": 2, "cache_read": 0.1}
    path.write_text(json.dumps({"as_of": "2027-01-01", "rates": {"claude-haiku-5-5": rates}}), encoding="utf-8")
    table = prices_from_json(path)
    assert table.rates_for("claude-haiku-5-5") == Rates(1, 2, 1.25, 2, 0.1)
    assert table.rates_for(Claude.OPUS) == PRICES.rates_for(Claude.OPUS) and table.as_of == "2027-01-01"
    for content, message in [
        ("{", "is not JSON"),
        ("[]", 'must be an object with "as_of"'),
        ('{"as_of": "x", "rates": {"m": {"input": 1}}}', r"rates\['m'\]"),
        (
            '{"as_of": "x", "rates": {"m": {"input": "1", "output": 1, "cache_write_5m": 1, "cache_write_1h": 1, '
            '"cache_read": 1}}}',
            r"rates\['m'\]: Rates.input takes a number",
        ),
        ('{"rates": {}}', '"as_of" must be'),
    ]:
        path.write_text(content, encoding="utf-8")
        with pytest.raises(InputError, match=message):
            prices_from_json(path)
    with pytest.raises(InputError, match="cannot be read"):
        prices_from_json(tmp_path / "missing.json")


async def test_the_anthropic_backend_reports_what_was_written_to_the_cache_for_an_hour() -> None:
    events = reply(text("hi"), input_tokens=10, output_tokens=3, cache_creation=300)
    start = events[0][1]["message"]["usage"]
    start["cache_creation"] = {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}
    model = AnthropicModel(client=api(events).client(), model=Claude.OPUS)
    request = ModelRequest(Claude.OPUS, "", (user_text("hi"),), (), 64)
    (*_, end) = [e async for e in model.stream(request)]
    assert isinstance(end, TurnEnd)
    assert end.usage == Usage(10, 3, cache_creation_input_tokens=300, cache_creation_1h_input_tokens=200)
    opus = PRICES.rates_for(Claude.OPUS)
    assert opus is not None
    assert opus.cost(end.usage) == pytest.approx((10 * 4 + 3 * 20 + 100 * 5 + 200 * 8) / 1_000_000)


def record(cost: RecordedCost | None) -> StepRecord:
    return StepRecord(
        id="r1",
        parts={"role": "x"},
        occurrence=0,
        role="x",
        backend="anthropic:claude-opus-5-5",
        input="q",
        result=None,
        transcript=(),
        usage=Usage(10, 5, cache_creation_input_tokens=4, cache_creation_1h_input_tokens=4),
        cost=cost,
    )


def test_a_record_keeps_its_cost_and_an_old_record_reads_without_one() -> None:
    kept = record(RecordedCost(0.0123, "2026-12-01")).to_json()
    assert kept["cost"] == {"usd": 0.0123, "rates": "2026-12-01"}
    assert kept["format"] == 1
    assert record_from_json(kept) == record(RecordedCost(0.0123, "2026-12-01"))
    unknown = record(RecordedCost(None, "2026-12-01"))
    assert record_from_json(unknown.to_json()) == unknown
    old = record(None).to_json()
    assert "cost" not in old
    assert record_from_json(old).cost is None
    bad_costs: list[JsonValue] = [
        {"usd": -1, "rates": "d"},
        {"usd": "1", "rates": "d"},
        {"usd": 1},
        [1],
        {"usd": True, "rates": "d"},
    ]
    for bad in bad_costs:
        with pytest.raises(InputError, match=r"record\.cost: expected"):
            record_from_json({**kept, "cost": bad})


def test_a_batched_steps_live_part_keeps_its_one_hour_cache_writes_at_the_live_rate() -> None:
    # The engine record's live_usage names the 1-hour cache writes too, so they are not priced at the batch rate.
    usage = Usage(input_tokens=100, output_tokens=10, cache_creation_input_tokens=50, cache_creation_1h_input_tokens=50)
    live: JsonObject = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 50,
        "cache_read_input_tokens": 0,
        "cache_creation_1h_input_tokens": 50,
    }
    batched = batched_usage(usage, {"engine": "batches", "answered_by": ["b1", "live"], "live_usage": live})
    assert batched == Usage(input_tokens=100, output_tokens=10)


# Every model the library names is priced, or refused with a way out; Haiku 5.5 by prompt length -------------------


@dataclass(frozen=True)
class Said:
    text: str = describe("What was said.")


def sdk_model_ids() -> list[str]:
    """Every model id the installed anthropic SDK names (its `ModelParam` literals)."""
    from typing import get_args

    from anthropic.types.model_param import ModelParam

    return sorted(get_args(get_args(ModelParam)[0]))


def test_every_claude_the_library_names_is_priced() -> None:
    for model in Claude:
        rates = PRICES.rates_for("anthropic:" + model)
        assert rates is not None, f"Claude.{model.name} ({model.value}) has no price"
        assert rates.cost(Usage(1000, 1000)) > 0


@pytest.mark.parametrize("model", sdk_model_ids())
async def test_a_budgeted_step_on_any_sdk_model_is_priced_or_refused_naming_run_prices(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agl_notebook import Rates as Exported
    from agl_notebook import Role, Run, reporting_tool
    from agl_notebook.errors import BudgetExceededError, PriceUnknownError

    assert Exported is Rates, "Rates is importable from agl_notebook, as docs/cost.md tells"
    role: Role[Said] = Role(
        name="r", instructions="Report.", model=model, tools=[reporting_tool("report", "Report.", Said)]
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "planted-" + "not-a-key")  # the request never leaves: refused first
    run = Run(model=AnthropicModel(client=api(reply(text("no"))).client()), budget_usd=0)
    with pytest.raises((PriceUnknownError, BudgetExceededError)) as raised:
        await run.step(role, "go")
    if PRICES.rates_for(model) is None:
        assert isinstance(raised.value, PriceUnknownError)
        assert "Run(prices={model id: Rates(...)})" in str(raised.value)
        assert "from agl_notebook import Rates" in str(raised.value)
    else:
        assert isinstance(raised.value, BudgetExceededError), raised.value


def test_every_row_is_the_genai_prices_snapshot_of_its_day() -> None:
    """Each row against the genai-prices package's snapshot at the table's date (rows it has; tiers included)."""
    import datetime
    from decimal import Decimal

    genai_prices = pytest.importorskip("genai_prices")
    from genai_prices.data_snapshot import get_snapshot

    from agl_notebook.models.prices import GENAI_PRICES_VERSION, LONG_PROMPT_TOKENS

    snapshot = get_snapshot()
    day = datetime.datetime.fromisoformat(PRICES.as_of).replace(tzinfo=datetime.UTC)
    checked = []
    for model_id, rates in PRICES.rates.items():
        try:
            _, info = snapshot.find_provider_model(model_id, None, "anthropic", None)
        except LookupError:
            continue  # Mythos 5 and 5.1: limited availability, which genai-prices leaves out (docs/cost.md)
        price = info.get_prices(day)
        fields = {
            "input": price.input_mtok,
            "output": price.output_mtok,
            "cache_write_5m": price.cache_write_mtok,
            "cache_write_1h": price.cache_write_1h_mtok,
            "cache_read": price.cache_read_mtok,
        }
        for name, value in fields.items():
            tiers = getattr(value, "tiers", None)
            base = getattr(value, "base", value)
            assert Decimal(str(getattr(rates, name))) == base, (model_id, name)
            if tiers:
                (tier,) = tiers
                assert rates.long_prompt is not None and rates.long_prompt_over == tier.start == LONG_PROMPT_TOKENS
                assert Decimal(str(getattr(rates.long_prompt, name))) == tier.price, (model_id, name)
            else:
                assert rates.long_prompt is None, model_id
        checked.append(model_id)
    assert {Claude.OPUS.value, Claude.SONNET.value, Claude.HAIKU.value} <= set(checked)
    assert genai_prices.__version__ >= GENAI_PRICES_VERSION


def test_a_long_prompt_bills_every_token_of_its_request_at_the_higher_rates() -> None:
    haiku = PRICES.rates_for(Claude.HAIKU)
    assert haiku is not None and haiku.long_prompt is not None
    at_the_line = Usage(60_000, 1_000, cache_creation_input_tokens=20_000, cache_read_input_tokens=20_000)
    assert haiku.cost(at_the_line) == pytest.approx(
        (60_000 * 0.10 + 1_000 * 0.50 + 20_000 * 0.125 + 20_000 * 0.01) / 1e6
    )
    past = Usage(60_001, 1_000, cache_creation_input_tokens=20_000, cache_read_input_tokens=20_000)
    assert haiku.cost(past) == pytest.approx((60_001 * 0.50 + 1_000 * 2.50 + 20_000 * 0.625 + 20_000 * 0.05) / 1e6)
    assert haiku.batched().cost(past) == pytest.approx(haiku.cost(past) / 2)
    assert haiku.highest_input == 1.0, "the worst case prices an input token at the long prompt's 1-hour write"
    # A step of two requests of 60,000 prompt tokens each is billed request by request: both below the line.
    two = [Usage(60_000, 500), Usage(60_000, 500)]
    cost = PRICES.record_cost("anthropic:" + Claude.HAIKU, two[0] + two[1], requests=two)
    assert cost is not None and cost.usd == pytest.approx(2 * (60_000 * 0.10 + 500 * 0.50) / 1e6)
    with pytest.raises(InputError, match="long_prompt_over"):
        Rates(1, 1, 1, 1, 1, long_prompt=Rates(2, 2, 2, 2, 2))


def test_a_price_file_can_give_a_long_prompt_tier(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    five = {"input": 1, "output": 2, "cache_write_5m": 1.25, "cache_write_1h": 2, "cache_read": 0.1}
    long = {k: v * 2 for k, v in five.items()}
    rates = {**five, "long_prompt": long, "long_prompt_over": 1000}
    path.write_text(json.dumps({"as_of": "2027-01-01", "rates": {"claude-x": rates}}), encoding="utf-8")
    table = prices_from_json(path)
    assert table.rates_for("claude-x") == Rates(1, 2, 1.25, 2, 0.1, 0.5, Rates(2, 4, 2.5, 4, 0.2), 1000)
