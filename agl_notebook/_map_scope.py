"""What the code running inside a ``run.map`` item can see of its map: which item it is, and the map's pacer.

`current_map_item` tells a terminal which item asks (headless answers for map items are keyed by map, item and
question, never taken in order: docs/map.md, "Questions and approvals").

Request pacing: a backend that takes part (`agl_notebook.models.anthropic.AnthropicModel`) looks for a pacer in
`current_pacer` before each request. Without one it retries as configured. With one it retries as many times as
the pacer says, waits at most the pacer's ``max_wait`` before a retry, asks the pacer for a slot before every
attempt and tells it how the attempt went, so the pacer can send fewer requests at once while the API says 429 or
529 and more again once requests succeed (docs/map.md, "Rate limits and retries").
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from ._fieldwise import Fieldwise
from .payloads import JsonValue

THROTTLED = (429, 529)
"""The statuses that mean "too many requests now": a pacer halves its concurrency on them."""


class RequestPacer(Protocol):
    """What a backend asks before each attempt of a request, and tells after it."""

    @property
    def retries(self) -> int:
        """How many times a request that failed transiently is retried (not the SDK's own setting)."""
        ...

    @property
    def max_wait(self) -> float:
        """The longest wait before a retry, in seconds, whatever ``retry-after`` asks."""
        ...

    async def acquire(self) -> int:
        """Wait for a slot to send one attempt (fewer are free while the API is throttling); a ticket for it."""
        ...

    def release(self, ticket: int, status: int | None) -> None:
        """The attempt of ``ticket`` ended: None when it was answered, else its HTTP status (0: no response)."""


current_pacer: ContextVar[RequestPacer | None] = ContextVar("agl_notebook_pacer", default=None)
"""The pacer of the map item running in this context, if any."""


@dataclass(frozen=True, eq=False, repr=False)
class MapItemContext(Fieldwise):
    """Which map item runs: the map's key, the item's place in the inputs, and its input as JSON."""

    map_key: str
    """The map's key (docs/map.md, "The map's key")."""
    index: int
    """The item's place in the inputs, from 0."""
    input: JsonValue
    """The item's input as JSON."""
    repeat: int = 0
    """Which repeat of its input this is, from 0 (``run.map(..., epochs=k)`` runs each input k times): a scripted
    model's function can read it to answer the repeats of one input differently."""


current_map_item: ContextVar[MapItemContext | None] = ContextVar("agl_notebook_map_item", default=None)
"""The map item running in this context, if any."""


class ScoringSteps(Protocol):
    """How a step started inside a map item's score runs (`agl_notebook.run._judge.Scoring`)."""

    async def step(self, role: Any, value: object, mode: Any) -> Any:
        """Run or replay one step of ``role`` on ``value``, numbered by (map, item, repeat), in the map's store."""
        ...


current_scoring: ContextVar[ScoringSteps | None] = ContextVar("agl_notebook_scoring", default=None)
"""The map item whose score is being computed in this context, if any: a step started there is a judge's."""
