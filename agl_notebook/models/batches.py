"""`Batches`: Anthropic's Message Batches API as a model backend, answering many steps' requests in waves.

A live backend sends one request now; this one gathers the next request of every running participant into a **wave**
and sends the wave as one batch (or several, past one batch's limits), at half the price. A participant is one step
(a map's item): the caller joins every participant (`Batches.join`) before any starts, and runs each step inside its
participant (``with participant:``), which leaves when the step ends. A wave goes out once every participant still
running waits on a request, and at most one wave is in flight at a time; the replies come back per ``custom_id`` and
are turned into the model events a live reply gives, so the loop, the records and the fingerprint are those of a live
run (`Batches.backend_id` is the live backend's). docs/batches.md describes the whole of it.

Errors, per request: an errored, expired or canceled request goes into the next wave, up to ``retries`` times
(expired and canceled ones run live at once with ``on_expired="live"``), then fails its step with a
`BatchRequestError`; a request the API found invalid fails its step at once, with the API's message. Errors of the
batch endpoints themselves are the SDK's (after its own retries), raised to the steps whose requests they carried; a
404 just after a batch was created is waited out (``not_found_grace``).

The state (`agl_notebook.models.batch_state`) is handed to ``on_state`` as soon as a batch is created and when it
ends; an engine made with ``state=`` re-attaches: a request already in a batch is answered from that batch, never
submitted again. An interrupt (the steps cancelled) stops the polling; the batches go on, and a re-run re-attaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from .._secret_logs import scrub_logs
from ..errors import BatchRequestError, InputError, UpstreamUnexpected
from ..payloads import JsonObject, JsonValue
from .anthropic import AnthropicModel, _client_from_environment, request_params
from .base import ModelEvent, ModelRequest, TurnEnd
from .batch_participant import Participant, current_participant
from .batch_replies import BatchStatus, message_events, status_of
from .batch_state import BatchState, KnownBatch, custom_id, request_digest

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types.messages import MessageBatch

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_REQUESTS", "BatchStatus", "Batches", "Participant"]

MAX_BATCH_REQUESTS = 100_000
"""The most requests the API takes in one batch."""
MAX_BATCH_BYTES = 256_000_000
"""The largest create body the API takes (256 MB)."""
_BODY_FRAME = len(b'{"requests":[]}')
_LIVE_AT_ONCE = 8  # expired requests run live this many at a time, so a large expiry does not burst the rate limit

# A request to send: its encoded size, its digest, and its encoded line when kept (else made again at its creation).
_Sized = tuple["_Request", int, str, bytes | None]


class _UnknownBatch(Exception):
    """A batch of an earlier session the API no longer knows (its retrieve or its results are a 404)."""

    def __init__(self, batch_id: str, what: str) -> None:
        super().__init__(batch_id, what)
        self.batch_id = batch_id
        self.what = what


@dataclass(eq=False)
class _Request:
    """One request of one participant, until it is answered (across the waves a retry takes)."""

    participant: Participant
    number: int
    custom_id: str
    request: ModelRequest
    model: str
    future: asyncio.Future[list[ModelEvent]]
    failures: int = 0
    in_wave: bool = False  # carried by the wave in flight, not yet answered or sent on
    settled: bool = False
    abandoned: bool = False


class Batches:
    """Claude through the Message Batches API: the next request of every running step, in one batch.

    Args:
        client: A configured ``anthropic.AsyncAnthropic``; without one, each wave makes a client from the
            environment (as `AnthropicModel` does) and closes it when the wave ends.
        model: A model id that overrides the one each request names.
        retries: How many times an errored, expired or canceled request goes into a later wave before its step
            fails with `BatchRequestError`.
        on_expired: ``"retry"``: expired and canceled requests go into the next wave like errored ones; ``"live"``:
            they are sent at once to the live Messages API instead.
        on_unknown_batch: What becomes of the requests of a batch from an earlier session (a saved state) that the
            API no longer knows (deleted, created with another workspace's key, its results past the 29 days the API
            keeps them): ``"fail"`` fails their steps with a `BatchRequestError` (``result`` ``"unknown"``) saying
            how to send them again, so nothing is paid twice without asking; ``"send_again"`` sends them in the
            next wave, in a new batch, and the state notes the batch gone.
        max_requests: The most requests in one batch (the API's limit by default); a wave past it is split.
        max_bytes: The largest create body in bytes (the API's 256 MB by default); a wave past it is split.
        poll_first: Seconds before the first poll of a batch just created.
        poll_factor: How much longer each later wait is than the one before.
        poll_most: The longest wait between polls, in seconds.
        not_found_grace: How long, in seconds after its creation, a batch the API does not find yet is polled
            again (the API may not know a batch for a moment after creating it); past it, a 404 is an error.
        on_status: Called with a `BatchStatus` after every poll of every batch.
        on_state: Called with the state (plain JSON) as soon as a batch is created and when one ends: persist it
            to re-attach after a restart.
        state: A state an earlier engine handed to ``on_state``: its batches are attached to, not created again.
        sleep: What waits between polls (``asyncio.sleep``; tests pass one that does not wait).
        clock: What tells the time for ``not_found_grace`` (``time.monotonic``).

    Raises:
        InputError: A setting is out of range, or ``state`` is not an engine's state (the message names where).
    """

    network = True
    """Replies come from the API."""
    batched = True
    """Requests are billed at the batch price (a Run's account reserves and settles them so; docs/cost.md)."""
    thinking = True
    """Requests carry a role's thinking, effort and strict tools as a live request would (`request_params`), and a
    reply's thinking and other kept blocks come back whole (`message_events`)."""

    def __init__(
        self,
        *,
        client: AsyncAnthropic | None = None,
        model: str | None = None,
        retries: int = 2,
        on_expired: Literal["retry", "live"] = "retry",
        on_unknown_batch: Literal["fail", "send_again"] = "fail",
        max_requests: int = MAX_BATCH_REQUESTS,
        max_bytes: int = MAX_BATCH_BYTES,
        poll_first: float = 10.0,
        poll_factor: float = 1.5,
        poll_most: float = 60.0,
        not_found_grace: float = 60.0,
        on_status: Callable[[BatchStatus], object] | None = None,
        on_state: Callable[[JsonObject], object] | None = None,
        state: JsonValue | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_int("retries", retries, 0)
        _check_int("max_requests", max_requests, 1)
        _check_int("max_bytes", max_bytes, _BODY_FRAME + 1)
        for name, value, least in (
            ("poll_first", poll_first, 0.0),
            ("poll_factor", poll_factor, 1.0),
            ("poll_most", poll_most, 0.0),
            ("not_found_grace", not_found_grace, 0.0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not (least <= value < float("inf")):
                raise InputError(f"Batches({name}=...) takes a number >= {least:g}, not {value!r}.")
        if on_expired not in ("retry", "live"):
            raise InputError(f"Batches(on_expired=...) takes 'retry' or 'live', not {on_expired!r}.")
        if on_unknown_batch not in ("fail", "send_again"):
            raise InputError(f"Batches(on_unknown_batch=...) takes 'fail' or 'send_again', not {on_unknown_batch!r}.")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise InputError(f"Batches(model=...) takes a model id such as Claude.OPUS, not {model!r}.")
        self.model = model
        """The model id every request is sent to, or None to use each request's own."""
        self.retries = retries
        self.on_expired = on_expired
        self.on_unknown_batch = on_unknown_batch
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._poll = (float(poll_first), float(poll_factor), float(poll_most))
        self._grace = float(not_found_grace)
        self._on_status = on_status
        self._on_state = on_state
        self._sleep = sleep
        self._clock = clock
        self._client = client
        self._state = BatchState.from_json(state, where="Batches(state=...)") if state is not None else BatchState()
        self.statuses: dict[str, BatchStatus] = {}
        """The latest status of every batch polled in this session, by batch id."""
        self.creations = 0
        """How many batches this engine created (not those it re-attached to)."""
        self._participants: dict[str, Participant] = {}
        self._idle = 0  # participants joined and not left that wait on no request
        self._queue: list[_Request] = []
        self._wave = 0
        self._wave_task: asyncio.Task[None] | None = None
        self._wave_open = 0  # requests of the wave in flight still awaited by their steps
        self._scheduled = False
        self._hold_last = False  # the wave in flight made its own client: its last answer waits for the close
        self._held: tuple[_Request, list[ModelEvent] | BaseException, str] | None = None
        self._created_at: dict[str, float] = {}
        self._missing_since: dict[str, float] = {}  # an earlier session's batch: when the API first did not know it
        self._creating: set[asyncio.Future[str | None]] = set()  # creations in flight (shielded)
        self._watchers: list[tuple[Callable[[JsonObject], object] | None, Callable[[BatchStatus], object] | None]] = []

    # --- the Model interface ---------------------------------------------------------------------------------------

    def backend_id(self, model: str) -> str:
        """``anthropic:<model id>``, the live backend's: a step answered by a batch is fingerprinted as a live one."""
        return f"anthropic:{self.model or model}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Join the current wave with ``request`` and, once its batch ended, yield the reply's events.

        Raises:
            InputError: Called outside a participant of this engine (``with engine.join(key): ...``).
            BatchRequestError: The request came back errored, expired or canceled after the retries, or invalid.
            UpstreamUnexpected: The reply cannot be read, or a batch vanished.
        """
        participant = current_participant.get()
        if participant is None or participant._engine is not self or participant.left:
            raise InputError(
                "A request through Batches must come from a step run inside one of its participants: "
                "`with engine.join(key): await run.step(...)` (run.map does this for each item)."
            )
        model = self.model or request.model
        if not model:
            raise InputError(
                "Batches was given no model id: name one with @role(model=Claude.OPUS) or Batches(model=...)."
            )
        if participant._parked:  # back from a person's answer: the next wave waits for it again
            participant._parked = False
            self._wait(participant, -1)
        participant._free_slot()  # its tools are done: another step's may run
        participant._asked += 1
        number = participant._asked
        loop = asyncio.get_running_loop()
        pending = _Request(
            participant, number, custom_id(participant.key, number), request, model, loop.create_future()
        )
        self._enqueue(pending)
        try:
            events = await pending.future
        except asyncio.CancelledError:
            self._abandon(pending)
            raise
        # The whole wave's replies arrive at once: the step runs the reply's tool calls once it holds a slot of its
        # participant's limit (a map's concurrency), which it gives back when it asks again or ends.
        await participant._take_slot()
        for event in events:
            yield event

    # --- participants ------------------------------------------------------------------------------------------------

    def join(self, key: str, *, limit: asyncio.Semaphore | None = None) -> Participant:
        """Register a participant keyed ``key``; join every participant of a map before any of them starts.

        ``limit``, shared by several participants, bounds how many of their steps run the tool calls of a reply at
        once (run.map passes one of its ``concurrency``): a step holds a slot from its reply until it asks again or
        ends (while it waits for a person too, as a live map's item holds its place).

        Raises:
            InputError: ``key`` is empty or another participant that has not left has it.
        """
        if not isinstance(key, str) or not key:
            raise InputError(f"Batches.join takes a non-empty key (an item's record key), not {key!r}.")
        if key in self._participants:
            raise InputError(f"Batches.join: a participant keyed {key!r} is already running.")
        participant = self._participants[key] = Participant(self, key, limit)
        self._idle += 1
        return participant

    def engine_record(self) -> JsonObject | None:
        """What answered the running step, for its record: its participant's batches (None outside one)."""
        participant = current_participant.get()
        return participant.engine_record() if participant is not None and participant._engine is self else None

    @property
    def state(self) -> JsonObject:
        """The engine's state as plain JSON (what ``on_state`` is given)."""
        return self._state.to_json()

    def attach(
        self,
        saved: JsonValue | None,
        *,
        on_state: Callable[[JsonObject], object] | None = None,
        on_status: Callable[[BatchStatus], object] | None = None,
        where: str = "state",
    ) -> Callable[[], None]:
        """Take up a saved state's batches; tell these callbacks too, until the function returned is called.

        run.map's: the state from its sidecar (``where`` names it in an error), its sidecar and its view told.

        Raises:
            InputError: ``saved`` is not an engine's state.
        """
        if saved is not None:
            self._state.merge(BatchState.from_json(saved, where=where))
        watcher = (on_state, on_status)
        self._watchers.append(watcher)

        def remove(_: object = None) -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        def detach() -> None:
            # A creation shielded from an interrupt still ends: its batch is told to this watcher before it goes.
            creating = [f for f in self._creating if not f.done()]
            if creating:
                asyncio.gather(*creating, return_exceptions=True).add_done_callback(remove)
            else:
                remove()

        return detach

    def _leave(self, participant: Participant) -> None:
        if self._participants.get(participant.key) is participant:
            del self._participants[participant.key]
            if participant._waiting == 0:
                self._idle -= 1
        self._changed()

    def _enqueue(self, pending: _Request) -> None:
        self._wait(pending.participant, +1)
        self._queue.append(pending)
        self._changed()

    def _wait(self, participant: Participant, change: int) -> None:
        before = participant._waiting
        participant._waiting += change
        if participant.key in self._participants and (before == 0) != (participant._waiting == 0):
            self._idle += -1 if before == 0 else 1

    def _settle(self, pending: _Request, events: list[ModelEvent] | BaseException, by: str = "") -> None:
        """Answer a request (events or an error), once; its participant no longer waits on it."""
        if pending.settled or pending.abandoned:
            return
        if pending.future.cancelled():  # its step was cancelled and has not resumed yet to say so
            self._abandon(pending)
            return
        if self._hold_last and pending.in_wave and self._wave_open == 1 and self._held is None:
            self._held = (pending, events, by)  # the wave's last answer: handed out once its client is closed
            return
        pending.settled = True
        self._out_of_wave(pending)
        self._wait(pending.participant, -1)
        if isinstance(events, BaseException):
            pending.future.set_exception(events)
        else:
            pending.participant.answered_by.append(by)
            usage = next(e.usage for e in events if isinstance(e, TurnEnd))
            if by == "live":
                pending.participant.live_usage += usage
            pending.future.set_result(events)
        self._changed()

    def _abandon(self, pending: _Request) -> None:
        """The step waiting on ``pending`` was cancelled: drop it; the last one gone stops the polling."""
        if pending.settled or pending.abandoned:
            return
        pending.abandoned = True
        self._wait(pending.participant, -1)
        if pending.in_wave:
            self._out_of_wave(pending)
            if self._wave_open <= 0 and self._wave_task is not None:
                self._wave_task.cancel()  # an interrupt stops the polling, never the batch
        self._changed()

    def _out_of_wave(self, pending: _Request) -> None:
        if pending.in_wave:
            pending.in_wave = False
            self._wave_open -= 1

    def _changed(self) -> None:
        if not self._scheduled and self._ready():
            self._scheduled = True
            # In a context of its own: the wave is no step's (a retry's live line must not go to one step's view).
            asyncio.get_running_loop().call_soon(self._start_wave, context=contextvars.Context())

    def _ready(self) -> bool:
        return self._wave_task is None and bool(self._queue) and self._idle == 0

    def _start_wave(self) -> None:
        self._scheduled = False
        if not self._ready():
            return
        requests = [p for p in self._queue if not (p.settled or p.abandoned)]
        self._queue = []
        if not requests:
            return
        self._wave += 1
        for pending in requests:
            pending.in_wave = True
        self._wave_open = len(requests)
        task = asyncio.get_running_loop().create_task(self._run_wave(self._wave, requests))
        self._wave_task = task

        def ended(_: asyncio.Task[None]) -> None:
            self._wave_task = None
            self._changed()

        task.add_done_callback(ended)

    # --- one wave ----------------------------------------------------------------------------------------------------

    async def _run_wave(self, wave: int, requests: list[_Request]) -> None:
        try:
            await self._send_and_collect(wave, requests)
        except Exception as e:  # no step may wait for ever on a wave that broke
            for pending in requests:
                self._settle(pending, e)

    async def _send_and_collect(self, wave: int, requests: list[_Request]) -> None:
        if self._client is not None:
            await self._wave_with(self._client, wave, requests)
            return
        # A client made from the environment is the wave's own, closed as the wave ends: its connections belong to
        # this event loop, and a script running several `asyncio.run`s must not leave them to a closed one.
        # Its last answer is held back until the client is closed: once the last step has its answer, a script's
        # `asyncio.run` may end and cancel every task left, a close under way too (anyio's shields do not stop
        # asyncio's cancel), leaving the connections it had not closed yet to a closed loop.
        client = await _client_from_environment(None)
        self._hold_last = True
        try:
            await self._wave_with(client, wave, requests)
        finally:
            try:
                await _close_whole(client)
            finally:
                self._hold_last = False
                held, self._held = self._held, None
                if held is not None:
                    self._settle(*held)

    async def _wave_with(self, client: AsyncAnthropic, wave: int, requests: list[_Request]) -> None:
        attached: dict[str, list[_Request]] = {}
        new: list[_Sized] = []
        kept = 0  # the bytes of the encoded requests kept for their creation: at most one batch's worth
        for pending in requests:
            body = _encoded(pending)
            digest = request_digest(body)
            known = self._state.holding(pending.custom_id, digest)
            if known is not None:
                attached.setdefault(known.id, []).append(pending)
                continue
            keep = kept + len(body) <= self.max_bytes
            kept += len(body) if keep else 0
            new.append((pending, len(body), digest, body if keep else None))
        chunks = self._split(new)
        del new
        while chunks:
            chunk = chunks.pop(0)
            # Shielded: a batch the API created is in the state before an interrupt can land.
            creating = asyncio.ensure_future(self._create(client, wave, chunk))
            self._creating.add(creating)
            creating.add_done_callback(self._creating.discard)
            created = await asyncio.shield(creating)
            if created is not None:
                attached[created] = [pending for pending, *_ in chunk]
            del chunk  # its encoded requests are the API's now: polling holds none of them
        await asyncio.gather(*(self._collect(client, wave, bid, group) for bid, group in attached.items()))

    def _split(self, new: list[_Sized]) -> list[list[_Sized]]:
        chunks: list[list[_Sized]] = []
        chunk: list[_Sized] = []
        size = _BODY_FRAME
        for item in new:
            pending, length, *_ = item
            if _BODY_FRAME + length > self.max_bytes:
                self._settle(
                    pending,
                    BatchRequestError(
                        f"The request {pending.custom_id} of {pending.participant.key!r} is {length} bytes, more than "
                        f"one batch takes ({self.max_bytes}); shorten the conversation (tool results) or run it live.",
                        custom_id=pending.custom_id,
                        batch_id="",
                        result="errored",
                        error_type="request_too_large",
                    ),
                )
                continue
            if chunk and (len(chunk) >= self.max_requests or size + 1 + length > self.max_bytes):
                chunks.append(chunk)
                chunk, size = [], _BODY_FRAME
            chunk.append(item)
            size += length + (1 if len(chunk) > 1 else 0)
        if chunk:
            chunks.append(chunk)
        return chunks

    async def _create(self, client: AsyncAnthropic, wave: int, chunk: list[_Sized]) -> str | None:
        """Create one batch and keep it in the state (told to ``on_state``); None when the API refused it."""
        from anthropic.types.messages import MessageBatch

        scrub_logs("anthropic", "anthropic._base_client", "httpx2")  # the SDK logs request bodies at DEBUG
        # The body is the requests as encoded for their digests, joined: what is sent is what the state's digests
        # name, and the SDK neither copies the wave's parameters (as `batches.create` does) nor encodes them again.
        body = b'{"requests":[' + b",".join(line or _encoded(p) for p, _, _, line in chunk) + b"]}"
        try:
            batch = await client.post("/v1/messages/batches", cast_to=MessageBatch, content=body)
        except Exception as e:
            for pending, *_ in chunk:
                self._settle(pending, e)
            return None
        self.creations += 1
        self._created_at[batch.id] = self._clock()
        self._state.add(KnownBatch(batch.id, wave, {p.custom_id: digest for p, _, digest, _ in chunk}))
        self._persist()
        self._tell(wave, batch)
        return batch.id

    async def _collect(self, client: AsyncAnthropic, wave: int, batch_id: str, group: list[_Request]) -> None:
        """Poll one batch to its end, then answer its requests from its results (retry, live or fail the rest)."""
        waiting = {p.custom_id: p for p in group}
        types: dict[str, str] = {}
        live: list[_Request] = []
        try:
            await self._until_ended(client, wave, batch_id)
            # Read to its end or not, the results' connection goes back to the client's pool as this block ends.
            async with self._results(client, batch_id) as results:
                async for custom_id, result, kind in results:
                    types[custom_id] = kind
                    pending = waiting.pop(custom_id, None)
                    if pending is not None and not pending.abandoned:
                        try:
                            self._answer(pending, batch_id, result, kind, live)
                        except Exception as e:  # an answer that broke fails its own step: none is left waiting
                            self._settle(pending, e)
        except asyncio.CancelledError:
            raise
        except _UnknownBatch as e:
            self._unknown(e, wave, [p for p in waiting.values() if not p.abandoned])
            return
        except Exception as e:
            for pending in [*waiting.values(), *live]:
                self._settle(pending, e)
            return
        self._state.ended(batch_id, types)
        self._persist()
        for pending in waiting.values():
            self._settle(
                pending,
                UpstreamUnexpected(f"The results of batch {batch_id} hold no result for {pending.custom_id}."),
            )
        if live:
            limit = asyncio.Semaphore(_LIVE_AT_ONCE)
            await asyncio.gather(*(self._live(client, p, limit) for p in live))

    @contextlib.asynccontextmanager
    async def _results(
        self, client: AsyncAnthropic, batch_id: str
    ) -> AsyncIterator[AsyncIterator[tuple[str, JsonObject, str]]]:
        """The results of an ended batch, line by line, read as JSON (`_result_lines`), not as the SDK's models.

        Raises `_UnknownBatch` when an earlier session's batch has none any more.
        """
        import anthropic

        opened = False
        try:
            async with client.messages.batches.with_streaming_response.results(batch_id) as response:
                opened = True
                yield _result_lines(response.iter_lines(), batch_id)
        except anthropic.NotFoundError:
            if opened or batch_id in self._created_at:
                raise
            raise _UnknownBatch(batch_id, "has no results any more") from None
        except anthropic.APIError:
            raise
        except anthropic.AnthropicError as e:  # the SDK's own: an ended batch with no results_url
            if opened or batch_id in self._created_at or "results_url" not in str(e):
                raise
            raise _UnknownBatch(batch_id, "has no results any more") from None

    def _unknown(self, unknown: _UnknownBatch, wave: int, requests: list[_Request]) -> None:
        """An earlier session's batch the API no longer knows: send its requests again, or fail them saying how."""
        batch_id = unknown.batch_id
        if self.on_unknown_batch == "send_again":
            self._state.gone(batch_id)
            self._persist()
            for pending in requests:
                self._out_of_wave(pending)
                self._queue.append(pending)  # the next wave carries it, in a new batch
            return
        for pending in requests:
            self._settle(
                pending,
                BatchRequestError(
                    f"The request {pending.custom_id} of {pending.participant.key!r} is in batch {batch_id} (wave "
                    f"{wave}, from the saved state), which the API no longer knows: it {unknown.what} (deleted, "
                    "created with another workspace's key, or its results are past the 29 days the API keeps "
                    "them). It was not sent again, so nothing is paid twice without asking. To send it again in a "
                    "new batch: for a batch map, `agl-notebook batches forget NOTEBOOK` (then run the cell again), "
                    'or pass Batches(on_unknown_batch="send_again").',
                    custom_id=pending.custom_id,
                    batch_id=batch_id,
                    result="unknown",
                    error_type="not_found_error",
                ),
            )

    async def _until_ended(self, client: AsyncAnthropic, wave: int, batch_id: str) -> None:
        import anthropic

        first, factor, most = self._poll
        delay = first
        created = self._created_at.get(batch_id)
        if created is not None:
            await self._sleep(delay)
        while True:
            try:
                batch = await client.messages.batches.retrieve(batch_id)
            except anthropic.NotFoundError:
                if created is None:
                    # An earlier session's batch: believed gone once it stays unknown for the grace too (one just
                    # created before a restart may not be visible yet, and sending again is paying twice).
                    missing = self._missing_since.setdefault(batch_id, self._clock())
                    if self._clock() - missing > self._grace:
                        raise _UnknownBatch(batch_id, "is not found") from None
                elif self._clock() - created > self._grace:
                    raise UpstreamUnexpected(
                        f"The batch {batch_id} created in this session is still not found {self._grace:g} s after "
                        "its creation (deleted, or not visible to this client's key); its steps fail. Running again "
                        "tells how to send its requests again (Batches(on_unknown_batch=...))."
                    ) from None
            else:
                self._tell(wave, batch)
                if batch.processing_status == "ended":
                    return
            delay = min(delay * factor, most) if delay else min(1.0, most)
            await self._sleep(delay)

    def _answer(self, pending: _Request, batch_id: str, result: JsonObject, kind: str, live: list[_Request]) -> None:
        """Answer one request from its batch result (of type ``kind``), or send it on: into the next wave, or live."""
        if kind == "succeeded":
            try:
                events = message_events(result.get("message"))
            except UpstreamUnexpected as e:
                self._settle(pending, e)
            else:
                self._settle(pending, events, batch_id)
            return
        error_type = api_message = ""
        if kind == "errored":
            error_type, api_message = _api_error(result)
            if error_type == "invalid_request_error":
                self._settle(pending, self._failure(pending, batch_id, kind, error_type, api_message))
                return
        elif self.on_expired == "live":
            live.append(pending)
            return
        if pending.failures < self.retries:
            pending.failures += 1
            self._out_of_wave(pending)
            self._queue.append(pending)  # the step still waits: the next wave carries it again
            return
        self._settle(pending, self._failure(pending, batch_id, kind, error_type, api_message))

    def _failure(self, pending: _Request, batch_id: str, result: str, error_type: str, message: str) -> Exception:
        said = f" ({error_type}: {message})" if error_type else ""
        tries = f" after {pending.failures + 1} attempt(s)" if error_type != "invalid_request_error" else ""
        return BatchRequestError(
            f"The request {pending.custom_id} of {pending.participant.key!r} came back {result} from batch "
            f"{batch_id}{tries}{said}.",
            custom_id=pending.custom_id,
            batch_id=batch_id,
            result=result,
            error_type=error_type,
            api_message=message,
        )

    async def _live(self, client: AsyncAnthropic, pending: _Request, limit: asyncio.Semaphore) -> None:
        async with limit:
            try:
                live = AnthropicModel(client=client, model=pending.model)
                events = [e async for e in live.stream(pending.request)]
            except Exception as e:
                self._settle(pending, e)
            else:
                self._settle(pending, events, "live")

    # --- the client, the state, the status -----------------------------------------------------------------------

    def _persist(self) -> None:
        state = self._state.to_json()
        for on_state in (self._on_state, *(w[0] for w in self._watchers)):
            if on_state is not None:
                on_state(state)

    def _tell(self, wave: int, batch: MessageBatch) -> None:
        status = status_of(batch, wave)
        self.statuses[batch.id] = status
        for on_status in (self._on_status, *(w[1] for w in self._watchers)):
            if on_status is not None:
                on_status(status)

    def __repr__(self) -> str:
        return f"Batches(model={self.model!r}, participants={len(self._participants)}, waves={self._wave})"


async def _result_lines(lines: AsyncIterator[str], batch_id: str) -> AsyncIterator[tuple[str, JsonObject, str]]:
    """Each results line of ``batch_id`` as its custom_id, its result and the result's type.

    Raises:
        UpstreamUnexpected: A line is not JSON, or names no custom_id or no typed result.
    """
    number = 0
    async for text in lines:
        if not text.strip():
            continue
        number += 1
        try:
            line = json.loads(text)
        except ValueError:
            raise UpstreamUnexpected(f"Line {number} of the results of batch {batch_id} is not JSON.") from None
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        result = line.get("result") if isinstance(line, dict) else None
        kind = result.get("type") if isinstance(result, dict) else None
        if not isinstance(custom_id, str) or not isinstance(kind, str):
            raise UpstreamUnexpected(
                f"Line {number} of the results of batch {batch_id} names no custom_id or no result type."
            )
        yield custom_id, cast(JsonObject, result), kind


def _api_error(result: JsonObject) -> tuple[str, str]:
    """An errored result's error type and message (empty where the result does not say)."""
    response = result.get("error")
    error = response.get("error") if isinstance(response, dict) else None
    if not isinstance(error, dict):
        return "", ""
    kind, message = error.get("type"), error.get("message")
    return (kind if isinstance(kind, str) else "", message if isinstance(message, str) else "")


def _encoded(pending: _Request) -> bytes:
    """One request of a create body, as JSON (the request built as a live one: `request_params`)."""
    params = request_params(pending.request, pending.model)
    line = {"custom_id": pending.custom_id, "params": params}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()  # as the SDK encodes


async def _close_whole(client: AsyncAnthropic) -> None:
    """Close a client, to the end even when cancelled meanwhile (then cancelled after).

    The last wave's task is still closing its client when the steps it answered end; `asyncio.run` then cancels it
    and closes the loop once it finished: the close must finish first, or its connections are left to a closed loop.
    """
    closing = asyncio.ensure_future(client.close())
    cancelled = False
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    closing.result()


def _check_int(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"Batches({name}=...) takes an int >= {least}, not {value!r}.")
