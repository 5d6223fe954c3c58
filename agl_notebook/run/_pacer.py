"""`MapPacer`: how many of a map's items and requests run at once, halved under 429 and 529, grown back on success.

Additive increase, multiplicative decrease, as TCP does: a throttled attempt (429 or 529) halves the limit, once
per generation: only an attempt sent since the last halving halves again, so the burst of 429s answering requests
sent together counts once. Each answered request adds one, up to the map's ``concurrency``. The limit bounds both
the items started and the requests in flight, so a lower limit sends fewer requests at the next attempt, not only
when running items end (docs/map.md, "Rate limits and retries").
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from .._map_scope import THROTTLED

MIN_CONCURRENCY = 1
MAX_CONCURRENCY = 64
"""The bounds of a map's concurrency."""


@dataclass
class MapPacer:
    """The limit shared by a map's items (started while fewer are running) and requests (sent while fewer are out)."""

    ceiling: int
    """The map's ``concurrency``: the limit it starts at and grows back to."""
    retries: int
    """How many times a request that failed transiently is retried."""
    max_wait: float
    """The longest wait before a retry, in seconds."""
    limit: int = 0
    """The limit now."""
    running: int = 0
    """Items running now."""
    in_flight: int = 0
    """Requests out now."""
    trace: list[tuple[float, int]] = field(default_factory=list)
    """Every change of the limit: (seconds since the map started, the new limit)."""
    throttled: int = 0
    """How many attempts were throttled (429, 529)."""
    _started: float = field(default_factory=time.monotonic)
    _generation: int = 0  # halvings so far: a request's ticket is the generation it was sent in
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.limit = self.ceiling
        self.trace.append((0.0, self.limit))

    async def start_item(self) -> None:
        """Wait until fewer items run than the limit, then count one more."""
        while self.running >= self.limit:
            await self._changed()
        self.running += 1

    def end_item(self) -> None:
        """An item ended."""
        self.running -= 1
        self._wake()

    async def acquire(self) -> int:
        """Wait until fewer requests are out than the limit, then count one more; its ticket."""
        while self.in_flight >= self.limit:
            await self._changed()
        self.in_flight += 1
        return self._generation

    def release(self, ticket: int, status: int | None) -> None:
        """A request ended: grow the limit on an answer, halve it when throttled (once per generation)."""
        self.in_flight -= 1
        if status is None:
            if self.limit < self.ceiling:
                self._set(self.limit + 1)
        elif status in THROTTLED:
            self.throttled += 1
            if ticket == self._generation and self.limit > MIN_CONCURRENCY:
                self._generation += 1
                self._set(max(MIN_CONCURRENCY, self.limit // 2))
        self._wake()

    def _set(self, limit: int) -> None:
        self.limit = limit
        self.trace.append((round(time.monotonic() - self._started, 3), limit))

    async def _changed(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def _wake(self) -> None:
        """Let every waiter look again (each checks its own condition)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
