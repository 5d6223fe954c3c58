"""What model requests cost: Anthropic's prices per million tokens for the Claude model ids the library knows.

`PRICES` is the table, dated (`PriceTable.as_of`): every row is the `genai-prices` package's snapshot (version
`GENAI_PRICES_VERSION`, a dated release on PyPI) checked against Anthropic's pricing page and the models' own
overview pages; docs/cost.md lists the same figures and says where each came from, and tests/core/test_prices.py
checks every row against the installed snapshot. No price is fetched at run time (the table ships with the library,
so a record's cost and its date mean the same on every machine). A model the table does not hold has no price: its
cost is None, shown as "price unknown", never a guess; a Run with a budget refuses it (`PriceUnknownError`, naming
``Run(prices=...)``). ``Run(prices=...)`` overrides the table, and so does the file named by
``AGL_NOTEBOOK_PRICES`` (`prices_from_json` reads it).

A cost is worked out per request from its `Usage`: input tokens at the input rate, cache writes at the 5-minute or
1-hour write rate, cache reads at the read rate, output tokens at the output rate. A model priced by prompt length
(`Rates.long_prompt`) bills every token of a request whose prompt passes the threshold at its higher rates. The batch
discount is kept for an engine that sends requests through the Message Batches API (`Rates.batched`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._families import InputError
from .._fieldwise import Fieldwise
from ..payloads import JsonObject
from .base import Usage

__all__ = ["PRICES", "PriceTable", "Rates", "RecordedCost", "current_prices", "prices_from_json"]

GENAI_PRICES_VERSION = "0.2.3"
"""The `genai-prices` release whose snapshot `PRICES` was taken from and checked against."""

PRICING_PAGE = "https://platform.claude.com/docs/en/about-claude/pricing"
"""Anthropic's pricing page, the source of `PRICES` (each model's overview page under /docs/en/models/ repeats its
rates)."""


WEB_SEARCH_PER_THOUSAND = 10.0
"""Anthropic's price of web search, in dollars per 1,000 searches (the pricing page's "Web search tool"), on every
model. Web fetch costs nothing beyond the tokens a page adds; code execution is billed by container time, which no
usage reports, so a step that ran code shows "code execution not priced"."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Rates(Fieldwise):
    """One model's prices, in US dollars per million tokens."""

    input: float
    """Base input tokens (not read from or written to the cache)."""
    output: float
    """Output tokens."""
    cache_write_5m: float
    """Input tokens written to the cache with the default 5-minute lifetime."""
    cache_write_1h: float
    """Input tokens written to the cache with a 1-hour lifetime."""
    cache_read: float
    """Input tokens read from the cache (hits and refreshes)."""
    batch_discount: float = 0.5
    """The share taken off every rate for a request sent through the Message Batches API (0.5: half price)."""
    long_prompt: Rates | None = None
    """For a model priced by prompt length: the rates of a request whose prompt (input, cache writes and cache reads)
    is longer than `long_prompt_over` tokens. Every token of such a request, output included, is billed at them."""
    long_prompt_over: int = 0
    """The prompt length, in tokens, past which `long_prompt` applies."""
    web_search: float = WEB_SEARCH_PER_THOUSAND
    """Dollars per 1,000 web searches Anthropic runs (``usage.server_tool_use.web_search_requests``); the batch
    discount does not apply to it."""

    def __post_init__(self) -> None:
        for name in (
            "input",
            "output",
            "cache_write_5m",
            "cache_write_1h",
            "cache_read",
            "batch_discount",
            "web_search",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InputError(f"Rates.{name} takes a number of dollars >= 0, not {value!r}.")
        if self.batch_discount > 1:
            raise InputError(f"Rates.batch_discount is a share from 0 to 1, not {self.batch_discount!r}.")
        if self.long_prompt is not None:
            over = self.long_prompt_over
            if not isinstance(self.long_prompt, Rates) or self.long_prompt.long_prompt is not None:
                raise InputError("Rates.long_prompt takes the Rates of a long prompt (with no tier of their own).")
            if isinstance(over, bool) or not isinstance(over, int) or over <= 0:
                raise InputError(f"Rates.long_prompt_over takes a number of tokens > 0, not {over!r}.")

    def for_prompt(self, prompt_tokens: int) -> Rates:
        """The rates a request whose prompt is ``prompt_tokens`` long is billed at (these, or `long_prompt`)."""
        if self.long_prompt is not None and prompt_tokens > self.long_prompt_over:
            return self.long_prompt
        return self

    @property
    def dearest(self) -> Rates:
        """The tier of these rates with the dearest tokens (`long_prompt` when there is one): a worst case's."""
        return self.long_prompt if self.long_prompt is not None else self

    def cost(self, usage: Usage) -> float:
        """What one request's ``usage`` costs at these rates, in dollars (at `long_prompt` for a long prompt).

        ``usage`` is one request's: a model priced by prompt length bills by each request's prompt, so the usage of
        several requests added up is priced request by request (`PriceTable.record_cost`).
        """
        prompt = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        tier = self.for_prompt(prompt)
        return tier._flat_cost(usage)

    def _flat_cost(self, usage: Usage) -> float:
        one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
        five_minutes = usage.cache_creation_input_tokens - one_hour
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + five_minutes * self.cache_write_5m
            + one_hour * self.cache_write_1h
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000 + usage.web_search_requests * self.web_search / 1000

    def to_json(self) -> JsonObject:
        """The rates as a price table file and a record's ``declared_rates`` give them (defaults left out)."""
        data: JsonObject = {
            "input": self.input,
            "output": self.output,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "cache_read": self.cache_read,
        }
        if self.batch_discount != 0.5:
            data["batch_discount"] = self.batch_discount
        if self.long_prompt is not None:
            data["long_prompt"] = self.long_prompt.to_json()
            data["long_prompt_over"] = self.long_prompt_over
        return data

    def batched(self) -> Rates:
        """These rates with the batch discount taken off (for a request sent through the Message Batches API)."""
        keep = 1 - self.batch_discount
        return Rates(
            self.input * keep,
            self.output * keep,
            self.cache_write_5m * keep,
            self.cache_write_1h * keep,
            self.cache_read * keep,
            0.0,
            self.long_prompt.batched() if self.long_prompt is not None else None,
            self.long_prompt_over,
            self.web_search,
        )

    @property
    def highest_input(self) -> float:
        """The dearest rate an input token can be billed at, in any tier (what a worst case prices one at)."""
        top = self.dearest
        return max(top.input, top.cache_write_5m, top.cache_write_1h, top.cache_read)


@dataclass(frozen=True, eq=False, repr=False)
class PriceTable(Fieldwise):
    """Rates by model id, with the date they were taken and the page they were taken from."""

    rates: Mapping[str, Rates]
    """Each model id's rates."""
    as_of: str
    """The day the rates were taken (ISO 8601), kept in every record priced with them."""
    source: str = PRICING_PAGE
    """Where they were taken from."""
    _by_id: dict[str, Rates] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.as_of, str) or not self.as_of.strip():
            raise InputError("PriceTable(as_of=...) takes the day the rates were taken, such as '2026-12-01'.")
        for model_id, rates in self.rates.items():
            if not isinstance(model_id, str) or not model_id or not isinstance(rates, Rates):
                raise InputError(f"PriceTable(rates=...) maps model ids to Rates, not {model_id!r}: {rates!r}.")
        object.__setattr__(self, "_by_id", dict(self.rates))

    def rates_for(self, backend: str) -> Rates | None:
        """The rates of ``backend``, or None: no price is known.

        ``backend`` is ``anthropic:<model id>``, a bare model id, or a backend id the table names whole. An
        OpenAI-compatible backend (``openai:<model>@<server>``) is priced by its whole id in the table, else as its
        `OpenAIModel` was told (``free=True``, ``rates=``), else by its server's provider in the genai-prices
        snapshot (`OPENAI_COMPATIBLE_PRICES`), else not at all.
        """
        found = self._by_id.get(backend)
        if found is not None:
            return found
        if backend.startswith("openai:"):
            return _openai_compatible_rates(backend)
        if not backend.startswith("anthropic:"):
            return None
        return self._by_id.get(backend.removeprefix("anthropic:"))

    def cost(self, backend: str, usage: Usage) -> float | None:
        """What ``usage`` on ``backend`` costs, in dollars, or None when the backend has no price."""
        rates = self.rates_for(backend)
        return rates.cost(usage) if rates is not None else None

    def priced(self, backend: str) -> bool:
        """Whether ``backend`` is billed, its price known or not: an Anthropic model, or one the table names.

        A scripted backend is not (it costs nothing, and its steps show no dollars).
        """
        return backend.startswith(("anthropic:", "openai:")) or backend in self._by_id

    def with_rates(
        self, rates: Mapping[str, Rates], *, as_of: str | None = None, source: str | None = None
    ) -> PriceTable:
        """A copy of the table with ``rates`` added or replacing its own (and, if given, another date and source)."""
        return PriceTable(
            {**self._by_id, **rates}, as_of=as_of or self.as_of, source=self.source if source is None else source
        )

    def record_cost(
        self, backend: str, usage: Usage, *, batched: Usage | None = None, requests: Sequence[Usage] = ()
    ) -> RecordedCost | None:
        """The cost a record keeps for ``usage`` on ``backend``: None for a backend that is never billed.

        ``batched`` is the part of ``usage`` spent through the Message Batches API, priced with the discount.
        ``requests``, each request's own usage (adding up to ``usage``), prices a model billed by prompt length
        request by request, as it is billed.
        """
        if not self.priced(backend):
            return None
        rates = self.rates_for(backend)
        if rates is None:
            usd: float | None = None
        elif rates.long_prompt is not None and requests and batched is None:
            usd = sum(rates.cost(each) for each in requests)
        elif batched is None:
            usd = rates.cost(usage)
        else:
            usd = rates.batched().cost(batched) + rates.cost(_minus(usage, batched))
        # Rounded to a hundred-millionth of a dollar, so the record holds no float noise.
        return RecordedCost(round(usd, 8) if usd is not None else None, self.as_of)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RecordedCost(Fieldwise):
    """What a recorded step cost when it was recorded, kept in its record so a view never prices it again."""

    usd: float | None
    """Dollars, or None: the model had no price then ("price unknown"), or its server said no usage."""
    rates_as_of: str
    """The day the rates used were taken."""
    usage_unknown: bool = False
    """A server answered some request of the step without saying its usage, so what it cost is not known."""

    def words(self) -> str:
        """``$0.0123``, ``price unknown`` or ``usage unknown``, as views show it."""
        if self.usage_unknown:
            return "usage unknown"
        return "price unknown" if self.usd is None else dollars(self.usd)


def batched_usage(usage: Usage, engine: JsonObject | None) -> Usage | None:
    """The part of a step's ``usage`` its engine record says was spent in batches (None: no batch answered it).

    The Message Batches engine records ``{"engine": "batches", "answered_by": [...], "live_usage"?: {...}}``: every
    request not answered ``live`` went through a batch.
    """
    if engine is None or engine.get("engine") != "batches":
        return None
    answered = engine.get("answered_by")
    if not isinstance(answered, list) or all(by == "live" for by in answered):
        return None
    live = engine.get("live_usage")
    counts = {k: v for k, v in live.items() if isinstance(v, int)} if isinstance(live, dict) else {}
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation_1h_input_tokens",
        "web_search_requests",
        "web_fetch_requests",
    )
    return _minus(usage, Usage(**{k: counts.get(k, 0) for k in fields}))


def _minus(usage: Usage, part: Usage) -> Usage:
    return Usage(
        max(0, usage.input_tokens - part.input_tokens),
        max(0, usage.output_tokens - part.output_tokens),
        max(0, usage.cache_creation_input_tokens - part.cache_creation_input_tokens),
        max(0, usage.cache_read_input_tokens - part.cache_read_input_tokens),
        max(0, usage.cache_creation_1h_input_tokens - part.cache_creation_1h_input_tokens),
        max(0, usage.web_search_requests - part.web_search_requests),
        max(0, usage.web_fetch_requests - part.web_fetch_requests),
    )


def dollars(usd: float) -> str:
    """A sum of dollars as views and the command line show it: 4 decimals under $1, 2 above."""
    return f"${usd:,.4f}" if abs(usd) < 1 else f"${usd:,.2f}"


def _same(
    input: float, output: float, write_5m: float, write_1h: float, read: float, *, long_prompt: Rates | None = None
) -> Rates:
    over = LONG_PROMPT_TOKENS if long_prompt is not None else 0
    return Rates(input, output, write_5m, write_1h, read, 0.5, long_prompt, over)


LONG_PROMPT_TOKENS = 100_000
"""Claude Haiku 5.5's threshold: a request whose prompt is longer is billed at its higher rates on every token."""

_OPUS_45 = _same(5, 25, 6.25, 10, 0.50)
_FABLE_5 = _same(10, 50, 12.50, 20, 1)
_FABLE_51 = _same(10, 50, 12.50, 20, 0.25)
_FABLE_52 = _same(8, 40, 10, 16, 0.20)
_SONNET_46 = _same(3, 15, 3.75, 6, 0.30)
_HAIKU_45 = _same(1, 5, 1.25, 2, 0.10)

PRICES = PriceTable(
    {
        # Every row: the genai-prices 0.2.3 snapshot, checked against Anthropic's pricing page ("Model pricing",
        # "Long context pricing", "Batch processing": half price on every rate) and each model's overview page.
        "claude-fable-5-2": _FABLE_52,
        "claude-mythos-5-2": _FABLE_52,
        "claude-fable-5-1": _FABLE_51,
        "claude-mythos-5-1": _FABLE_51,  # the pricing page's row (genai-prices skips limited-availability models)
        "claude-fable-5": _FABLE_5,
        "claude-mythos-5": _FABLE_5,  # the pricing page's row, as for Mythos 5.1
        "claude-opus-5-5": _same(4, 20, 5, 8, 0.20),
        "claude-opus-5": _OPUS_45,
        "claude-opus-4-8": _OPUS_45,
        "claude-opus-4-7": _OPUS_45,
        "claude-opus-4-6": _OPUS_45,
        "claude-opus-4-5": _OPUS_45,
        "claude-opus-4-5-20251101": _OPUS_45,
        # Sonnet 5.5's cache reads were cut to 0.05x input ($0.10) on 2026-10-07.
        "claude-sonnet-5-5": _same(2, 10, 2.50, 4, 0.10),
        "claude-sonnet-5": _same(2, 10, 2.50, 4, 0.20),
        "claude-sonnet-4-6": _SONNET_46,
        # Haiku 5.5 is priced by prompt length: over 100,000 tokens, every token of the request at 5x.
        "claude-haiku-5-5": _same(0.10, 0.50, 0.125, 0.20, 0.01, long_prompt=_same(0.50, 2.50, 0.625, 1, 0.05)),
        "claude-haiku-4-5": _HAIKU_45,
        "claude-haiku-4-5-20251001": _HAIKU_45,
        # Not priced, on purpose: claude-mythos-preview (no row on Anthropic's pages or in genai-prices). A Run
        # with a budget refuses it with PriceUnknownError, naming Run(prices=...).
    },
    as_of="2026-12-01",
)
"""The prices the library knows (see docs/cost.md for each figure's source)."""


def _flat(input: float, output: float, read: float) -> Rates:
    # Chat Completions servers bill no cache writes (caching is automatic): a written token costs an input token's.
    return Rates(input, output, input, input, read, 0.5)


OPENAI_COMPATIBLE_PRICES: Mapping[str, Mapping[str, Rates]] = {
    # Every row: the genai-prices 0.2.3 snapshot as of PRICES.as_of (input, output, cached input per million
    # tokens), by the host its provider's api_pattern names; tests/models_openai/test_openai_prices.py checks each
    # against it.
    "api.openai.com": {
        "gpt-5.2": _flat(1.75, 14, 0.175),
        "gpt-5.1": _flat(1.25, 10, 0.125),
        "gpt-5": _flat(1.25, 10, 0.125),
        "gpt-5-mini": _flat(0.25, 2, 0.025),
        "gpt-5-nano": _flat(0.05, 0.4, 0.005),
        "gpt-4.1": _flat(2, 8, 0.5),
        "gpt-4.1-mini": _flat(0.4, 1.6, 0.1),
        "gpt-4.1-nano": _flat(0.1, 0.4, 0.025),
        "gpt-4o": _flat(2.5, 10, 1.25),
        "gpt-4o-mini": _flat(0.15, 0.6, 0.075),
        "o3": _flat(2, 8, 0.5),
        "o4-mini": _flat(1.1, 4.4, 0.275),
    },
    "api.deepseek.com": {
        "deepseek-chat": _flat(0.135, 0.55, 0.035),
        "deepseek-reasoner": _flat(0.135, 0.55, 0.035),
        "deepseek-v4-flash": _flat(0.15, 0.6, 0.003),
        "deepseek-v4-pro": _flat(0.66, 1.98, 0.022),
    },
}
"""Prices of models on hosted OpenAI-compatible servers, by host and model (docs/models.md)."""

_DECLARED: dict[str, Rates] = {}  # what an OpenAIModel was told its model costs (free=True, rates=...)

DECLARED_RATES = "declared_rates"
"""The key of a record's ``engine`` that keeps the rates a person gave the model (``free=True``, ``rates=``), so a
program in another process (``agl-notebook list``, a new kernel) prices the step as the person said."""


def declared_rates(engine: JsonObject | None) -> Rates | None:
    """The rates a record's ``engine`` says the person gave its model, or None (none given, or not readable)."""
    fields = engine.get(DECLARED_RATES) if engine is not None else None
    if not isinstance(fields, dict):
        return None
    try:
        return _rates_from_fields(fields)
    except (TypeError, InputError):
        return None  # a record from a newer version, or edited: priced as if nothing was declared


def _rates_from_fields(fields: Mapping[str, Any]) -> Rates:
    tier = fields.get("long_prompt")
    if isinstance(tier, dict):  # {"long_prompt": {...the five rates...}, "long_prompt_over": tokens}
        fields = {**fields, "long_prompt": Rates(**tier)}
    return Rates(**fields)


def declare_rates(backend: str, rates: Rates) -> None:
    """Price ``backend`` (an ``openai:`` backend id) at ``rates`` in this process: the person said so."""
    if not isinstance(rates, Rates):
        raise InputError(f"OpenAIModel(rates=...) takes Rates(input, output, ...), not {rates!r}.")
    _DECLARED[backend] = rates


def _openai_compatible_rates(backend: str) -> Rates | None:
    declared = _DECLARED.get(backend)
    if declared is not None:
        return declared
    model, _, server = backend.removeprefix("openai:").rpartition("@")
    host = server.partition("://")[2].rpartition(":")[0]
    return OPENAI_COMPATIBLE_PRICES.get(host, {}).get(model)


def prices_from_json(path: str | Path) -> PriceTable:
    """Read a price table from a JSON file: ``{"as_of": day, "source"?: page, "rates": {model id: {...}}}``.

    Each model's rates name ``input``, ``output``, ``cache_write_5m``, ``cache_write_1h``, ``cache_read`` (dollars
    per million tokens) and optionally ``batch_discount``, and for a model priced by prompt length ``long_prompt``
    (the same five rates) and ``long_prompt_over`` (tokens); the models it names replace or add to `PRICES`.

    Raises:
        InputError: The file cannot be read, is not JSON, or a field is missing or not a number (the message names
            the file and the field).
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"The price table {where} cannot be read: {e.strerror or e}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"The price table {where} is not JSON: {e}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("rates"), dict):
        raise InputError(f'The price table {where} must be an object with "as_of" and "rates": {{model id: rates}}.')
    rates: dict[str, Rates] = {}
    for model_id, fields in data["rates"].items():
        if not isinstance(fields, dict):
            raise InputError(f"{where}: rates[{model_id!r}] must be an object of dollars per million tokens.")
        try:
            rates[model_id] = _rates_from_fields(fields)
        except TypeError as e:
            raise InputError(f"{where}: rates[{model_id!r}]: {e}.") from None
        except InputError as e:
            raise InputError(f"{where}: rates[{model_id!r}]: {e}") from None
    as_of, source = data.get("as_of"), data.get("source")
    if not isinstance(as_of, str) or (source is not None and not isinstance(source, str)):
        raise InputError(f'{where}: "as_of" must be the day the rates were taken, and "source" a page, as strings.')
    return PRICES.with_rates(rates, as_of=as_of, source=source)


def current_prices() -> PriceTable:
    """Today's rates: the file ``AGL_NOTEBOOK_PRICES`` names (over `PRICES`), or `PRICES`."""
    from .._settings import PRICES_FILE

    path = PRICES_FILE.text()
    return prices_from_json(path) if path else PRICES
