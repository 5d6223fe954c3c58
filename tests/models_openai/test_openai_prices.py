"""The prices of models on hosted OpenAI-compatible servers: each row is the genai-prices snapshot of its day."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from agl_notebook.models.base import Usage
from agl_notebook.models.openai import OpenAIModel
from agl_notebook.models.prices import OPENAI_COMPATIBLE_PRICES, PRICES, Rates

PROVIDERS = {"api.openai.com": "openai", "api.deepseek.com": "deepseek"}


def test_every_row_is_the_genai_prices_snapshot_of_its_day() -> None:
    pytest.importorskip("genai_prices")
    from genai_prices.data_snapshot import get_snapshot

    snapshot = get_snapshot()
    day = datetime.datetime.fromisoformat(PRICES.as_of).replace(tzinfo=datetime.UTC)
    for host, models in OPENAI_COMPATIBLE_PRICES.items():
        provider = next(p for p in snapshot.providers if p.id == PROVIDERS[host])
        assert provider.api_pattern is not None and __import__("re").search(provider.api_pattern, f"https://{host}")
        for model, rates in models.items():
            _, info = snapshot.find_provider_model(model, None, PROVIDERS[host], None)
            price = info.get_prices(day)
            assert Decimal(str(rates.input)) == price.input_mtok, (host, model)
            assert Decimal(str(rates.output)) == price.output_mtok, (host, model)
            assert Decimal(str(rates.cache_read)) == price.cache_read_mtok, (host, model)
            assert price.cache_write_mtok is None and rates.cache_write_5m == rates.input  # no writes billed


def test_a_model_is_priced_by_its_server_and_never_guessed() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=1_000_000)
    assert PRICES.cost(OpenAIModel("gpt-4.1").backend_id(""), usage) == pytest.approx(2 + 8 + 0.5)
    deepseek = OpenAIModel("deepseek-chat", base_url="https://api.deepseek.com", api_key_env="DEEPSEEK_API_KEY")
    assert PRICES.cost(deepseek.backend_id(""), usage) == pytest.approx(0.135 + 0.55 + 0.035)
    for unknown in (
        OpenAIModel("gpt-4.1", base_url="http://localhost:8000/v1"),  # a local server serving a model of that name
        OpenAIModel("llama3.2", base_url="http://localhost:11434/v1"),
        OpenAIModel("gpt-99"),
    ):
        backend = unknown.backend_id("")
        assert PRICES.rates_for(backend) is None and PRICES.priced(backend), backend  # billed, price unknown
        assert PRICES.record_cost(backend, usage) is not None
        assert PRICES.record_cost(backend, usage).words() == "price unknown"  # type: ignore[union-attr]
    own = PRICES.with_rates({"openai:llama3.2@http://localhost:11434/v1": Rates(0, 0, 0, 0, 0)})
    assert own.cost("openai:llama3.2@http://localhost:11434/v1", usage) == 0
