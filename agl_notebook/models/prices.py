"""What model requests cost: Anthropic's prices per million tokens for the Claude model ids the library knows.

`PRICES` is the table, taken from Anthropic's pricing page on the date it carries (`PriceTable.as_of`); docs/cost.md
lists the same figures and says where each came from. A model the table does not hold has no price: its cost is
None, shown as "price unknown", never a guess. ``Run(prices=...)`` overrides the table, and so does the file named by
``AGL_NOTEBOOK_PRICES`` (`prices_from_json` reads it).

A cost is worked out per request from its `Usage`: input tokens at the input rate, cache writes at the 5-minute or
1-hour write rate, cache reads at the read rate, output tokens at the output rate. The batch discount is kept for an
engine that sends requests through the Message Batches API (`Rates.batched`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._families import InputError
from .._fieldwise import Fieldwise
from ..payloads import JsonObject
from .base import Usage

__all__ = ["PRICES", "PriceTable", "Rates", "RecordedCost", "current_prices", "prices_from_json"]

PRICING_PAGE = "https://platform.claude.com/docs/en/about-claude/pricing"
"""Anthropic's pricing page, the source of `PRICES` (each model's overview page under /docs/en/models/ repeats its
rates)."""


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

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read", "batch_discount"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InputError(f"Rates.{name} takes a number of dollars >= 0, not {value!r}.")
        if self.batch_discount > 1:
            raise InputError(f"Rates.batch_discount is a share from 0 to 1, not {self.batch_discount!r}.")

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at these rates, in dollars."""
        one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
        five_minutes = usage.cache_creation_input_tokens - one_hour
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + five_minutes * self.cache_write_5m
            + one_hour * self.cache_write_1h
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000

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
        )

    @property
    def highest_input(self) -> float:
        """The dearest rate an input token can be billed at (what a reservation prices an input token at)."""
        return max(self.input, self.cache_write_5m, self.cache_write_1h, self.cache_read)


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

        ``backend`` is ``anthropic:<model id>``, a bare model id, or a backend id the table names whole.
        """
        found = self._by_id.get(backend)
        if found is not None or not backend.startswith("anthropic:"):
            return found
        return self._by_id.get(backend.removeprefix("anthropic:"))

    def cost(self, backend: str, usage: Usage) -> float | None:
        """What ``usage`` on ``backend`` costs, in dollars, or None when the backend has no price."""
        rates = self.rates_for(backend)
        return rates.cost(usage) if rates is not None else None

    def priced(self, backend: str) -> bool:
        """Whether ``backend`` is billed, its price known or not: an Anthropic model, or one the table names.

        A scripted backend is not (it costs nothing, and its steps show no dollars).
        """
        return backend.startswith("anthropic:") or backend in self._by_id

    def with_rates(
        self, rates: Mapping[str, Rates], *, as_of: str | None = None, source: str | None = None
    ) -> PriceTable:
        """A copy of the table with ``rates`` added or replacing its own (and, if given, another date and source)."""
        return PriceTable(
            {**self._by_id, **rates}, as_of=as_of or self.as_of, source=self.source if source is None else source
        )

    def record_cost(self, backend: str, usage: Usage, *, batched: Usage | None = None) -> RecordedCost | None:
        """The cost a record keeps for ``usage`` on ``backend``: None for a backend that is never billed.

        ``batched`` is the part of ``usage`` spent through the Message Batches API, priced with the discount.
        """
        if not self.priced(backend):
            return None
        rates = self.rates_for(backend)
        if rates is None:
            usd: float | None = None
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
    """Dollars, or None: the model had no price then ("price unknown")."""
    rates_as_of: str
    """The day the rates used were taken."""

    def words(self) -> str:
        """``$0.0123`` or ``price unknown``, as views show it."""
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
    )
    return _minus(usage, Usage(**{k: counts.get(k, 0) for k in fields}))


def _minus(usage: Usage, part: Usage) -> Usage:
    return Usage(
        max(0, usage.input_tokens - part.input_tokens),
        max(0, usage.output_tokens - part.output_tokens),
        max(0, usage.cache_creation_input_tokens - part.cache_creation_input_tokens),
        max(0, usage.cache_read_input_tokens - part.cache_read_input_tokens),
        max(0, usage.cache_creation_1h_input_tokens - part.cache_creation_1h_input_tokens),
    )


def dollars(usd: float) -> str:
    """A sum of dollars as views and the command line show it: 4 decimals under $1, 2 above."""
    return f"${usd:,.4f}" if abs(usd) < 1 else f"${usd:,.2f}"


def _same(input: float, output: float, write_5m: float, write_1h: float, read: float) -> Rates:
    return Rates(input, output, write_5m, write_1h, read, batch_discount=0.5)


_OPUS_45 = _same(5, 25, 6.25, 10, 0.50)
_FABLE_5 = _same(10, 50, 12.50, 20, 1)
_FABLE_51 = _same(10, 50, 12.50, 20, 0.25)

PRICES = PriceTable(
    {
        # Anthropic's pricing page, "Model pricing" (and "Batch processing": half price on input and output).
        "claude-fable-5-1": _FABLE_51,
        "claude-mythos-5-1": _FABLE_51,
        "claude-fable-5": _FABLE_5,
        "claude-mythos-5": _FABLE_5,
        "claude-opus-5": _OPUS_45,
        "claude-opus-4-8": _OPUS_45,
        "claude-opus-4-7": _OPUS_45,
        "claude-opus-4-6": _OPUS_45,
        "claude-opus-4-5": _OPUS_45,
        "claude-opus-4-5-20251101": _OPUS_45,
        # The models' own overview pages (platform.claude.com/docs/en/models/<model>/overview), "Pricing".
        "claude-opus-5-5": _same(4, 20, 5, 8, 0.20),
        "claude-sonnet-5": _same(2, 10, 2.50, 4, 0.20),
        # Not priced, on purpose (docs/cost.md says why): claude-sonnet-5-5 (reports disagree on its cache-read
        # rate), claude-haiku-5-5 (priced by prompt length), claude-fable-5-2 and claude-mythos-5-2 (no cache rates
        # found on Anthropic's pages), claude-mythos-preview, claude-sonnet-4-6, claude-haiku-4-5(-20251001).
    },
    as_of="2026-12-01",
)
"""The prices the library knows (see docs/cost.md for each figure's page)."""


def prices_from_json(path: str | Path) -> PriceTable:
    """Read a price table from a JSON file: ``{"as_of": day, "source"?: page, "rates": {model id: {...}}}``.

    Each model's rates name ``input``, ``output``, ``cache_write_5m``, ``cache_write_1h``, ``cache_read`` (dollars
    per million tokens) and optionally ``batch_discount``; the models it names replace or add to `PRICES`.

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
            rates[model_id] = Rates(**fields)
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
