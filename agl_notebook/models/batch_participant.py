"""`Participant`: one step whose requests go through a `agl_notebook.models.batches.Batches` engine's waves.

The engine counts its participants: a wave goes out once every participant joined and not left waits on a request
(or is parked, waiting for a person). A participant routes the requests of the step running inside its ``with``
block to the engine (a context variable, so steps under ``asyncio.gather`` stay apart). Participants may share a
limit (a semaphore, a map's concurrency): a step holds one of its slots from the reply it got until it asks again or
ends, so the tool calls of a wave's replies run at most that many at once. docs/batches.md.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar, Token
from typing import Protocol

from ..errors import InputError
from ..payloads import JsonObject
from .base import Usage


class Engine(Protocol):
    """What a participant tells its engine (`Batches`): it left, it waits on one more (or one fewer), look again."""

    def _leave(self, participant: Participant) -> None: ...
    def _wait(self, participant: Participant, change: int) -> None: ...
    def _changed(self) -> None: ...


current_participant: ContextVar[Participant | None] = ContextVar("agl_notebook_batch_participant", default=None)
"""The participant whose step runs here (set inside its ``with`` block)."""


class Participant:
    """One step whose requests go through a `Batches` engine; made by `Batches.join`.

    Run the step inside it (``with participant: await run.step(...)``): its requests join the engine's waves, and
    it leaves when the block ends, so waves no longer wait for it. Every participant's step runs on the event loop
    the engine serves (not in `Run.step_sync`, which gives a step a loop of its own).
    """

    def __init__(self, engine: Engine, key: str, limit: asyncio.Semaphore | None = None) -> None:
        self.key = key
        """The caller's key for this step (a map item's record key); its requests' ``custom_id`` derive from it."""
        self.answered_by: list[str] = []
        """For each of its requests answered so far, in order: the batch id, or ``live``."""
        self.live_usage = Usage()
        """The tokens of its requests answered live (``on_expired="live"``), priced at the live rate."""
        self._engine = engine
        self._asked = 0
        self._waiting = 0
        self._left = False
        self._parked = False
        self._tokens: list[Token[Participant | None]] = []
        self._limit = limit
        self._holding = False  # holds one of the limit's slots: its step runs its tools

    async def _take_slot(self) -> None:
        """Its step got a reply: wait for a slot of the limit before it runs the reply's tool calls."""
        if self._limit is not None and not self._holding:
            await self._limit.acquire()
            self._holding = True

    def _free_slot(self) -> None:
        """Its step asks again, or ends: its tools are done, another step's may run."""
        if self._holding:
            self._holding = False
            assert self._limit is not None
            self._limit.release()

    @property
    def left(self) -> bool:
        """The participant has left: its step ended (or it never will ask again)."""
        return self._left

    def engine_record(self) -> JsonObject:
        """What answered this step, for its record (recorded, never fingerprinted).

        ``{"engine": "batches", "answered_by": [...]}``, and ``live_usage`` (token counts) when some requests were
        answered live: the rest of the step's usage was spent in batches.
        """
        record: JsonObject = {"engine": "batches", "answered_by": list(self.answered_by)}
        if "live" in self.answered_by:
            usage = self.live_usage
            record["live_usage"] = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "cache_creation_1h_input_tokens": usage.cache_creation_1h_input_tokens,
            }
        return record

    def park(self) -> None:
        """Its step waits for a person (a question, an approval): the waves go on without it until it asks again."""
        if not self._left and not self._parked:
            self._parked = True
            self._engine._wait(self, +1)  # counted as waiting: no wave waits for it
            self._engine._changed()

    def leave(self) -> None:
        """Leave the engine's waves (done when the ``with`` block ends; leaving twice is nothing)."""
        self._free_slot()
        if not self._left:
            self._left = True
            self._engine._leave(self)

    def __enter__(self) -> Participant:
        if self._left:
            raise InputError(f"The batch participant {self.key!r} has left; join the engine again for a new step.")
        self._tokens.append(current_participant.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        current_participant.reset(self._tokens.pop())
        self.leave()

    def __repr__(self) -> str:
        return f"Participant({self.key!r}, asked={self._asked}, left={self._left})"
