"""A fake Anthropic Messages API for the real ``anthropic`` client: real-format bodies over an in-process transport.

Streams are server-sent events built block by block (``reply``), failures the API's error JSON (``fail``); a
`FakeAPI` serves them in order through ``httpx2.MockTransport`` and keeps every request, so the SDK's own request
building, SSE decoding, event parsing and retries all run. Retries are made fast with the API's ``retry-after-ms``
header, which the SDK honours, rather than switched off.

Thinking stream builders: ``thought`` (a thinking block: ``thinking_delta`` pieces, then one ``signature_delta``),
``redacted`` (a ``redacted_thinking`` block) and ``opaque`` (a block of a type the SDK does not know, hand JSON, with
hand deltas) go into ``reply`` like ``text`` and ``use``. Thinking events are built from the SDK's own event models
(``anthropic.types``), their keys put in the API's order (``type`` first), so the format is the SDK's. ``assembled``
is the JSON a block must be sent back as on later turns, byte for byte (compare with ``exact``, which keeps key
order); ``message_json`` is a whole reply as a message (what a batch result holds).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import Usage
from agl_notebook.models.prices import PRICES, Rates
from agl_notebook.roles import Claude

BASE_URL = "http://anthropic.test"
KEY = "test-key-not-real"

# --- Building real-format SSE bodies ------------------------------------------------------------------------------

Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Text:
    """A text block, streamed as these pieces."""

    pieces: tuple[str, ...]


@dataclass(frozen=True)
class Use:
    """A tool_use block whose input streams as these partial-JSON pieces; ``close=False`` leaves it open."""

    id: str
    name: str
    pieces: tuple[str, ...]
    close: bool = True


def text(*pieces: str) -> Text:
    return Text(pieces)


def use(id: str, name: str, *pieces: str, close: bool = True) -> Use:
    return Use(id, name, pieces, close)


@dataclass(frozen=True)
class Thought:
    """A thinking block: its text streams as ``thinking_delta`` pieces, then one ``signature_delta``."""

    pieces: tuple[str, ...]
    signature: str


@dataclass(frozen=True)
class Redacted:
    """A ``redacted_thinking`` block: its encrypted ``data`` comes whole in content_block_start, no deltas."""

    data: str

    @property
    def pieces(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class Opaque:
    """A block sent as this hand JSON (any type, keys in any order), then these hand-JSON deltas.

    ``kept`` is what the block must be sent back as: the start JSON with its deltas applied (the test says it, since
    only the test knows what its deltas mean); the start JSON itself when not given.
    """

    start: dict[str, Any]
    deltas: tuple[dict[str, Any], ...] = ()
    kept: dict[str, Any] | None = None

    @property
    def pieces(self) -> tuple[dict[str, Any], ...]:
        return self.deltas


Block = Text | Use | Thought | Redacted | Opaque


def thought(*pieces: str, signature: str = "EqQBCkgIARABGAIiQL2fake+signature/not-real==") -> Thought:
    """A thinking block streaming ``pieces`` (``thinking_delta``s), then ``signature`` (one ``signature_delta``)."""
    return Thought(pieces, signature)


def redacted(data: str = "EmwKAhgBEgy3va3pzix/fake+encrypted/not-real==") -> Redacted:
    """A ``redacted_thinking`` block holding ``data``."""
    return Redacted(data)


def opaque(start: dict[str, Any], *deltas: dict[str, Any], kept: dict[str, Any] | None = None) -> Opaque:
    """A block the SDK does not know: ``start`` as its content_block_start JSON, ``deltas`` as its deltas' JSON."""
    return Opaque(start, deltas, kept)


def assembled(block: Thought | Redacted | Opaque) -> dict[str, Any]:
    """The JSON a kept block must be sent back as, keys in the order the API sent them."""
    if isinstance(block, Thought):
        return {"type": "thinking", "thinking": "".join(block.pieces), "signature": block.signature}
    if isinstance(block, Redacted):
        return {"type": "redacted_thinking", "data": block.data}
    copy: dict[str, Any] = json.loads(json.dumps(block.kept if block.kept is not None else block.start))
    return copy


def message_json(*blocks: Block) -> list[dict[str, Any]]:
    """The content of a whole reply made of ``blocks``, as a non-streamed message (or a batch result) holds it."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, Text):
            content.append({"type": "text", "text": "".join(block.pieces)})
        elif isinstance(block, Use):
            args = "".join(block.pieces)
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": json.loads(args or "{}")})
        else:
            content.append(assembled(block))
    return content


def exact(value: Any) -> bytes:
    """``value`` as the SDK writes it into a request body (compact, UTF-8, keys in their order): a block sent back
    byte for byte is found as ``exact(assembled(block)) in request.content``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _api_order(data: dict[str, Any], *first: str) -> dict[str, Any]:
    """``data`` (an SDK model's ``to_dict``, whose keys come in the SDK's field order) with ``type`` first, then
    ``first``, then the rest: the order the API sends them in."""
    keys = ["type", *first]
    return {**{k: data[k] for k in keys if k in data}, **{k: v for k, v in data.items() if k not in keys}}


def _sdk_start(index: int, block: Thought | Redacted) -> Event:
    from anthropic.types import RawContentBlockStartEvent, RedactedThinkingBlock, ThinkingBlock

    if isinstance(block, Thought):
        content: Any = ThinkingBlock(type="thinking", thinking="", signature="")
        order: tuple[str, ...] = ("thinking", "signature")
    else:
        content, order = RedactedThinkingBlock(type="redacted_thinking", data=block.data), ("data",)
    event = RawContentBlockStartEvent(type="content_block_start", index=index, content_block=content)
    data = _api_order(event.to_dict(mode="json"), "index")
    data["content_block"] = _api_order(data["content_block"], *order)
    return "content_block_start", data


def _sdk_delta(index: int, delta: Any, *order: str) -> Event:
    from anthropic.types import RawContentBlockDeltaEvent

    event = RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=delta)
    data = _api_order(event.to_dict(mode="json"), "index")
    data["delta"] = _api_order(data["delta"], *order)
    return "content_block_delta", data


def thinking_delta(index: int, piece: str) -> Event:
    """A ``thinking_delta`` event, built from the SDK's ``ThinkingDelta``."""
    from anthropic.types import ThinkingDelta

    return _sdk_delta(index, ThinkingDelta(type="thinking_delta", thinking=piece), "thinking")


def signature_delta(index: int, signature: str) -> Event:
    """A ``signature_delta`` event, built from the SDK's ``SignatureDelta``."""
    from anthropic.types import SignatureDelta

    return _sdk_delta(index, SignatureDelta(type="signature_delta", signature=signature), "signature")


def message_start(input_tokens: int = 10, cache_creation: int = 0, cache_read: int = 0) -> Event:
    return "message_start", {
        "type": "message_start",
        "message": {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_creation_input_tokens": cache_creation,
                "cache_read_input_tokens": cache_read,
            },
        },
    }


def block_start(index: int, block: Block) -> Event:
    if isinstance(block, Thought | Redacted):
        return _sdk_start(index, block)
    if isinstance(block, Opaque):
        return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block.start}
    content: dict[str, Any] = (
        {"type": "text", "text": ""}
        if isinstance(block, Text)
        else {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
    )
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": content}


def block_delta(index: int, block: Block, piece: Any) -> Event:
    if isinstance(block, Thought):
        return thinking_delta(index, piece)
    if isinstance(block, Opaque):
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": piece}
    delta = (
        {"type": "text_delta", "text": piece}
        if isinstance(block, Text)
        else {"type": "input_json_delta", "partial_json": piece}
    )
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> Event:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str | None, output_tokens: int = 5) -> Event:
    return "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


MESSAGE_STOP: Event = ("message_stop", {"type": "message_stop"})


def reply(
    *blocks: Block,
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_creation: int = 0,
    cache_read: int = 0,
    message_stop: bool = True,
) -> list[Event]:
    """The events of one streamed reply made of ``blocks``, in the order the API sends them (with a ping)."""
    events = [message_start(input_tokens, cache_creation, cache_read), ("ping", {"type": "ping"})]
    for i, block in enumerate(blocks):
        events.append(block_start(i, block))
        events.extend(block_delta(i, block, p) for p in block.pieces)
        if isinstance(block, Thought):
            events.append(signature_delta(i, block.signature))
        if not isinstance(block, Use) or block.close:
            events.append(block_stop(i))
    events.append(message_delta(stop_reason, output_tokens))
    if message_stop:
        events.append(MESSAGE_STOP)
    return events


def sse(events: list[Event]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


async def _chunks(body: bytes, size: int = 37) -> AsyncIterator[bytes]:
    # Odd-sized chunks, so events and UTF-8 characters are split across reads as on a real connection.
    for i in range(0, len(body), size):
        yield body[i : i + size]


def stream_response(events: list[Event]) -> httpx2.Response:
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream", "request-id": "req_test"}, content=_chunks(sse(events))
    )


def error_response(status: int, kind: str, message: str) -> httpx2.Response:
    return httpx2.Response(
        status,
        headers={"retry-after-ms": "1", "request-id": "req_error"},
        json={"type": "error", "error": {"type": kind, "message": message}},
    )


# --- The fake API ---------------------------------------------------------------------------------------------------

Responder = Callable[[], httpx2.Response]


@dataclass
class FakeAPI:
    """Serves queued responses (a fresh Response per request) and keeps every request it was sent."""

    responses: list[Responder]
    requests: list[httpx2.Request] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        assert self.responses, f"unexpected request #{len(self.requests)}: {request.method} {request.url}"
        return self.responses.pop(0)()

    def client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=KEY,
            base_url=BASE_URL,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            **kwargs,
        )

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def api(*responses: list[Event] | Responder) -> FakeAPI:
    """A fake API answering with these replies (event lists) or responders, in order."""
    return FakeAPI([_streamer(r) if isinstance(r, list) else r for r in responses])


def _streamer(events: list[Event]) -> Responder:
    return lambda: stream_response(events)


def fail(status: int, kind: str, message: str) -> Responder:
    return lambda: error_response(status, kind, message)


# --- A fake that counts what it is sent -------------------------------------------------------------------------


def _rates(model_id: str) -> Rates:
    rates = PRICES.rates_for(model_id)
    assert rates is not None
    return rates


@dataclass
class CountingAPI:
    """Answers every request with a report, its usage one input token per byte sent; keeps what each cost."""

    rates: Rates = field(default_factory=lambda: _rates(Claude.OPUS))
    """What the requests are priced at (the fake's own bookkeeping, to check the Run's against)."""
    output_tokens: int = 40
    delay: float = 0.005
    costs: list[float] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent = json.dumps([body.get("system"), body["messages"], body.get("tools")], ensure_ascii=False)
        tokens = len(sent.encode("utf-8"))
        self.costs.append(self.rates.cost(Usage(input_tokens=tokens, output_tokens=self.output_tokens)))
        events = reply(
            use(f"toolu_{len(self.costs)}", "report_summary", json.dumps({"title": "done"})),
            stop_reason="tool_use",
            input_tokens=tokens,
            output_tokens=self.output_tokens,
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=self._slow(sse(events)))

    async def _slow(self, body: bytes) -> AsyncIterator[bytes]:
        # The reply takes a while to stream, so requests of concurrent steps are really in flight together.
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for i in range(0, len(body), 200):
                await asyncio.sleep(self.delay)
                yield body[i : i + 200]
        finally:
            self.in_flight -= 1

    def client(self) -> anthropic.AsyncAnthropic:
        transport = httpx2.MockTransport(self.handle)
        return anthropic.AsyncAnthropic(
            api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=transport)
        )

    def model(self, model_id: str = Claude.OPUS) -> AnthropicModel:
        return AnthropicModel(client=self.client(), model=model_id)
