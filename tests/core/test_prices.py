"""The price table: Anthropic's rates per million tokens, what a request's usage costs, and what has no price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_notebook import Claude
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
    for unknown in (Claude.SONNET, Claude.HAIKU, "claude-fable-5-2", "claude-opus-9", "scripted:abc"):
        assert PRICES.rates_for(unknown) is None
        assert PRICES.cost(unknown, Usage(10, 10)) is None
    assert PRICES.as_of == "2026-12-01" and PRICES.source.startswith("https://platform.claude.com/")
    assert PRICES.record_cost("scripted:abc", Usage(10, 10)) is None, "a scripted model is never billed"
    assert PRICES.record_cost("anthropic:claude-haiku-5-5", Usage(10, 10)) == RecordedCost(None, "2026-12-01")
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
