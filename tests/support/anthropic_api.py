"""A fake Anthropic Messages API for the real ``anthropic`` client: real-format bodies over an in-process transport.

Streams are server-sent events built block by block (``reply``), failures the API's error JSON (``fail``); a
`FakeAPI` serves them in order through ``httpx2.MockTransport`` and keeps every request, so the SDK's own request
building, SSE decoding, event parsing and retries all run. Retries are made fast with the API's ``retry-after-ms``
header, which the SDK honours, rather than switched off.
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


def block_start(index: int, block: Text | Use) -> Event:
    content: dict[str, Any] = (
        {"type": "text", "text": ""}
        if isinstance(block, Text)
        else {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
    )
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": content}


def block_delta(index: int, block: Text | Use, piece: str) -> Event:
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
    *blocks: Text | Use,
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
