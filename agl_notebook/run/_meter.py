"""What a Run spends on model requests, and its budget: each request reserved before it is sent, settled after.

`Meter` is the Run's account: what settled requests cost (``spent``) and what requests in flight may cost
(``reserved``). `MeteredModel` wraps the model of every live step, so every request of the Run, from any step,
a map's items or steps started by tools, passes the same account; replays never reach it (they reply from the
record), so they cost nothing. An engine that sends requests another way (the Message Batches API) reserves and
settles through `Meter.reserve` itself, with `Rates.batched`.

The budget (docs/cost.md): a request is reserved at its estimate (input tokens estimated from the conversation so
far, output at ``max_tokens``) and settled with its real usage. When spent plus reserved plus the estimate would pass
the budget, the request is not made: `BudgetExceededError`. An estimate can be low (a tokenizer counts some text
as more tokens than its characters suggest), so a request is let through at once only when even the worst case of
every request in flight and of this one (one token per byte of the request, plus what the API adds) stays within
the budget; otherwise it waits until nothing else is in flight. So at most one request whose estimate may be low
is ever out, and what the Run spends never passes the budget by more than one request's cost.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _tally
from .._fieldwise import Fieldwise
from .._scope import current_scope
from ..errors import BudgetExceededError, InputError, PriceUnknownError
from ..events import ModelSpent
from ..models.base import (
    NO_USAGE,
    UNKNOWN_USAGE,
    Model,
    ModelEvent,
    ModelRequest,
    ModelWrapper,
    TurnEnd,
    Usage,
    model_batched,
    model_engine_record,
    model_network,
)
from ..payloads import JsonValue
from ..server_tools import search_max_uses
from ..transcript import MediaBlock, Message, ToolResultBlock, messages_to_json

if TYPE_CHECKING:
    # The price table loads with the first priced request, or the first Run given prices: never for a Run that
    # only replays or runs a scripted model.
    from ..models.prices import PriceTable, Rates

CHARACTERS_PER_TOKEN = 4
"""How many characters of the request an estimated input token stands for."""
API_OVERHEAD_TOKENS = 4096
"""Input tokens the API adds to a request beyond its text (the tool-use system prompt), in the worst case."""
_POLL = 0.02  # seconds between looks at the account while a request waits for the ones in flight


@dataclass(frozen=True, eq=False, repr=False)
class Estimate(Fieldwise):
    """What one request may cost, before it is sent, in dollars."""

    likely: float
    """Input tokens estimated from the conversation (characters / 4) at the 5-minute cache-write rate (the
    dearest a prompt of the Anthropic backend is billed at), output at ``max_tokens``, in the tier of that prompt
    length (a model priced by prompt length)."""
    worst: float
    """One input token per byte of the request plus `API_OVERHEAD_TOKENS`, at the dearest input rate of any tier,
    output at ``max_tokens`` at the dearest tier's output rate."""


def estimate(request: ModelRequest, rates: Rates) -> Estimate:
    """What ``request`` may cost at ``rates``.

    An image or a document counts as what it costs, not as its base64 text: an image by Anthropic's formula
    (width * height / 750 after the API's scaling), a PDF by its pages (`agl_notebook.media`); the text around it
    sees only a reference to it, so no request's estimate encodes the bytes again.
    """
    media = media_tokens(request.messages)
    text = request.system + json.dumps(
        [
            messages_to_json(request.messages, _NoBlobs() if media else None),
            [[t.name, t.description, t.input_schema] for t in request.tools],
        ],
        ensure_ascii=False,
    )
    tokens = math.ceil(len(text) / CHARACTERS_PER_TOKEN) + media
    tier = rates.for_prompt(tokens)  # a model priced by prompt length: the tier the estimated prompt falls in
    likely = tokens * max(tier.input, tier.cache_write_5m) + request.max_tokens * tier.output
    worst = (len(text.encode("utf-8")) + API_OVERHEAD_TOKENS + media) * rates.highest_input
    # Every search the request may make is reserved (a role with search and a budget must say max_uses).
    searches = search_max_uses(request.server_tools)[1] * rates.web_search / 1000
    return Estimate(
        likely / 1_000_000 + searches, (worst + request.max_tokens * rates.dearest.output) / 1_000_000 + searches
    )


class _NoBlobs(dict[str, JsonValue]):
    """Blobs that are never kept: a request's estimate reads each attachment's reference, never its bytes."""

    def __contains__(self, key: object) -> bool:
        return True


def media_tokens(messages: Sequence[Message]) -> int:
    """The input tokens the images and documents of a conversation are estimated to cost."""
    total = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, MediaBlock):
                total += block.media.estimated_tokens
            elif isinstance(block, ToolResultBlock) and block.media:
                total += sum(m.estimated_tokens for m in block.media)
    return total


class Reservation:
    """One request's place in the account, from before it is sent until it is settled or released."""

    def __init__(self, meter: Meter, rates: Rates | None, cost: Estimate | None, request: ModelRequest) -> None:
        self._meter, self.rates, self.estimate = meter, rates, cost
        self._request = request
        self._open = True

    def settle(self, usage: Usage, *, batched: bool = False) -> float | None:
        """The request ended with ``usage``: what it cost (None: no price), now spent; the reservation ends.

        ``batched``: it was answered through the Message Batches API, at the batch discount.
        """
        rates = self.rates.batched() if self.rates is not None and batched else self.rates
        cost = rates.cost(usage) if rates is not None else None
        self._close(cost, usage)
        return cost

    def settle_at_estimate(self) -> float | None:
        """The request was billed for a usage nobody said: spend its estimate, and return it (None: no price).

        Its reply broke off after it began, or its server sent no usage.
        """
        if not self._open:  # settled already, as every whole reply is: no estimate to make (it encodes the request)
            return None
        cost = self.estimate or (estimate(self._request, self.rates) if self.rates is not None else None)
        usd = cost.likely if cost is not None else None
        self._close(usd, Usage())
        return usd

    def release(self) -> None:
        """The request failed before any reply (nothing was billed): the reservation ends, nothing is spent."""
        self._close(None, None)

    def _close(self, cost: float | None, usage: Usage | None) -> None:
        if self._open:
            self._open = False
            self._meter._close(self, cost, usage)


class Meter:
    """A Run's account of what its model requests cost, and its budget (None: no budget, only the account)."""

    def __init__(self, prices: PriceTable | Mapping[str, Rates] | None, budget_usd: float | None = None) -> None:
        if budget_usd is not None and (
            isinstance(budget_usd, bool)
            or not isinstance(budget_usd, int | float)
            or not math.isfinite(budget_usd)
            or budget_usd < 0
        ):
            raise InputError(f"Run(budget_usd=...) takes a number of dollars >= 0, not {budget_usd!r}.")
        self._given = prices
        self._prices: PriceTable | None = None if prices is None else price_table(prices)
        self.budget_usd = float(budget_usd) if budget_usd is not None else None
        """The most the Run may spend, in dollars, or None."""
        self._lock = threading.Lock()  # steps of one Run may run on several threads (`Run.step_sync`)
        self._spent = 0.0
        self._reserved = 0.0
        self._worst = 0.0
        self._in_flight = 0
        self.requests = 0
        """How many requests were settled (live, paid for)."""
        self.usage = NO_USAGE
        """The tokens of every settled request."""
        self.unpriced = 0
        """How many settled requests were on a model with no price (their cost is not in `spent_usd`)."""

    @property
    def prices(self) -> PriceTable:
        """The rates requests are priced at.

        Worked out when first needed: a Run that only replays, or runs a scripted model, never reads the table or
        its setting.
        """
        if self._prices is None:
            self._prices = price_table(self._given)
        return self._prices

    @property
    def spent_usd(self) -> float:
        """What settled requests cost, in dollars (zero for a Run that only replayed)."""
        return self._spent

    @property
    def reserved_usd(self) -> float:
        """What requests in flight are reserved at, in dollars."""
        return self._reserved

    async def reserve(self, backend: str, request: ModelRequest, *, batched: bool = False) -> Reservation:
        """Reserve ``request`` on ``backend`` before it is sent; wait while the worst case does not fit.

        ``batched``: the request goes through the Message Batches API, so it is priced with the batch discount, and
        it never waits: its worst case fits beside what is in flight, or it is refused.

        Raises:
            BudgetExceededError: Spent plus reserved plus this request's estimate would pass the budget.
            PriceUnknownError: There is a budget and ``backend`` has no price.
        """
        from ..models.prices import dollars

        rates = self.prices.rates_for(backend)
        if rates is not None and batched:
            rates = rates.batched()
        if self.budget_usd is None:
            with self._lock:
                self._in_flight += 1
            return Reservation(self, rates, None, request)  # estimated only if its reply breaks off
        if rates is None:
            raise PriceUnknownError(
                f"This Run has a budget of {dollars(self.budget_usd)}, but {backend} has no price in its table "
                f"(rates of {self.prices.as_of}), so its requests cannot be counted against it. Give its rates with "
                "Run(prices={model id: Rates(...)}) (from agl_notebook import Rates; docs/cost.md)."
            )
        searches, max_uses = search_max_uses(request.server_tools)
        if searches and not max_uses:
            raise InputError(
                f"This Run has a budget of {dollars(self.budget_usd)}, and the step offers WebSearch without max_uses: "
                "each search is billed apart from tokens and Anthropic runs as many as the model asks for within a "
                "request, so a search cannot be reserved. Give WebSearch(max_uses=...) (each use is reserved at "
                f"{dollars(rates.web_search / 1000)}). Nothing was sent."
            )
        cost = estimate(request, rates)
        budget = self.budget_usd
        while True:
            with self._lock:
                fits_worst = self._spent + self._worst + cost.worst <= budget
                if not fits_worst and self._spent + self._reserved + cost.likely > budget:
                    raise BudgetExceededError(
                        f"The next model request ({backend}, estimated at {dollars(cost.likely)}) would pass this "
                        f"Run's budget: spent {dollars(self._spent)} and {dollars(self._reserved)} reserved for "
                        f"requests in flight, of a budget of {dollars(budget)}. It was not made; nothing of the step "
                        "was recorded.",
                        spent_usd=self._spent,
                        budget_usd=budget,
                        needed_usd=cost.likely,
                    )
                if fits_worst or self._in_flight == 0:
                    self._reserved += cost.likely
                    self._worst += cost.worst
                    self._in_flight += 1
                    return Reservation(self, rates, cost, request)
                if batched:
                    # A batched request cannot wait for the others in flight to settle: they settle only once the
                    # wave it would join is sent, so waiting would never end. Only a worst case that fits goes.
                    raise BudgetExceededError(
                        f"The next model request ({backend}, at most {dollars(cost.worst)} at batch prices) might "
                        f"pass this Run's budget: spent {dollars(self._spent)}, and the requests of the batch in "
                        f"flight may cost up to {dollars(self._worst)} more, of a budget of {dollars(budget)}. A "
                        "request sent in a batch cannot wait for the others to settle, so it was not made; nothing "
                        "of the step was recorded.",
                        spent_usd=self._spent,
                        budget_usd=budget,
                        needed_usd=cost.worst,
                    )
            import asyncio  # loaded already: a request is being made on a running loop

            await asyncio.sleep(_POLL)

    def wrap(self, model: Model) -> Model:
        """``model``, each request of it passing this account (a model that never reaches the network is free)."""
        return MeteredModel(model, self) if model_network(model) else model

    def _close(self, reservation: Reservation, cost: float | None, usage: Usage | None) -> None:
        with self._lock:
            self._in_flight -= 1
            if reservation.estimate is not None and self.budget_usd is not None:
                self._reserved -= reservation.estimate.likely
                self._worst -= reservation.estimate.worst
            if usage is not None:
                self.requests += 1
                self.usage += usage
                if cost is None:
                    self.unpriced += 1
                else:
                    self._spent += cost
            if self._in_flight == 0:  # no drift from adding and taking away floats
                self._reserved = self._worst = 0.0


class MeteredModel(ModelWrapper):
    """A model whose every request is reserved on, and settled with, a `Meter` (same backend, same capabilities)."""

    def __init__(self, model: Model, meter: Meter) -> None:
        super().__init__(model)
        self.meter = meter
        """The account every request passes."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The wrapped model's reply, reserved before it is sent and settled with its usage at its end."""
        # A model that answers through the Message Batches API is reserved and settled at the batch price.
        reservation = await self.meter.reserve(
            self.model.backend_id(request.model), request, batched=model_batched(self.model)
        )
        if model_network(self.model):
            _tally.model_request()  # what the nbval summary reports as model calls
        began = False
        try:
            async for event in self.model.stream(request):
                if isinstance(event, TurnEnd):
                    scope = current_scope.get()
                    if event.usage is UNKNOWN_USAGE:  # the server said no usage: billed, by how much unknown
                        cost = reservation.settle_at_estimate()
                        if scope is not None:
                            scope.usage_unknown = True
                    else:
                        cost = reservation.settle(event.usage, batched=_answered_in_a_batch(self.model))
                    if scope is not None:
                        scope.emit(ModelSpent(cost, self.meter.spent_usd))
                began = True
                yield event
        finally:
            if began:
                reservation.settle_at_estimate()  # a no-op once settled
            else:
                reservation.release()

    def __repr__(self) -> str:
        return repr(self.model)


def _answered_in_a_batch(model: Model) -> bool:
    """Whether the request that just ended went through a batch (the engine record's last answer is a batch's)."""
    engine = model_engine_record(model)
    answered = engine.get("answered_by") if engine is not None and engine.get("engine") == "batches" else None
    return isinstance(answered, list) and bool(answered) and answered[-1] != "live"


@dataclass(frozen=True, eq=False, repr=False)
class RunSummary(Fieldwise):
    """What a Run did live: its requests, their tokens and cost, and its budget (`Run.summary`)."""

    requests: int
    """Live model requests settled."""
    usage: Usage
    """Their tokens."""
    spent_usd: float
    """What they cost, in dollars (requests on models with no price left out)."""
    budget_usd: float | None
    """The Run's budget, or None."""
    unpriced: int
    """Requests on models with no price."""
    rates_as_of: str
    """The day the rates were taken."""

    def __str__(self) -> str:
        from ..models.prices import dollars

        text = f"{self.requests} live request(s), {self.usage.tokens:,} tokens, {dollars(self.spent_usd)} spent"
        if self.budget_usd is not None:
            text += f" of a budget of {dollars(self.budget_usd)}"
        if self.unpriced:
            text += f"; {self.unpriced} request(s) on models with no price (not counted)"
        return f"{text} (rates of {self.rates_as_of})"

    def __repr__(self) -> str:
        return f"<RunSummary: {self}>"


def price_table(prices: PriceTable | Mapping[str, Rates] | None) -> PriceTable:
    """The Run's table: the one given, the library's with the given rows, or the library's (or the setting's)."""
    from ..models.prices import PriceTable, Rates, current_prices

    if isinstance(prices, PriceTable):
        return prices
    base = current_prices()
    if prices is None:
        return base
    if not isinstance(prices, Mapping) or not all(isinstance(r, Rates) for r in prices.values()):
        raise InputError(f"Run(prices=...) takes a PriceTable or {{model id: Rates(...)}}, not {prices!r}.")
    return base.with_rates(prices)
