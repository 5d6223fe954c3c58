"""A fake OpenAI Chat Completions API for the real ``openai`` client: real-format SSE over an in-process transport.

Every chunk is one of the SDK's own ``ChatCompletionChunk`` models, validated from its fields and serialized as the
SDK serializes it (``model_dump_json(exclude_unset=True)``, so a server's extra fields such as
``reasoning_content`` stay), sent as ``data:`` lines ending with ``data: [DONE]``, in odd-sized byte pieces (so a
chunk and a UTF-8 character are split across reads, as on a real connection). `FakeChat` serves queued responses
through ``httpx2.MockTransport`` and keeps every request, so the client's own request building, SSE decoding, chunk
parsing and error mapping all run. `chat_server` serves the same bodies on the loopback interface, for kernels and
benchmarks in other processes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletionChunk

from agl_notebook.models.openai import OpenAIModel

BASE_URL = "http://chat.test/v1"
MODEL = "gpt-4.1"


def fake_key() -> str:
    """A key-like value, built at run time so no key-shaped literal sits in the code."""
    return "-".join(["sk", "openai", "test", "not", "a", "real", "key"])


# --- Building real-format chunks ------------------------------------------------------------------------------------


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    no_choices: bool = False,
) -> str:
    """One chunk as the SDK's model serializes it (JSON text)."""
    data: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [] if no_choices else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        data["usage"] = usage
    return ChatCompletionChunk.model_validate(data).model_dump_json(exclude_unset=True)


def usage_json(prompt: int = 10, completion: int = 5, cached: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


@dataclass(frozen=True)
class Call:
    """A tool call streamed as these argument pieces, at ``index``."""

    index: int
    id: str
    name: str
    pieces: tuple[str, ...]


def call(index: int, id: str, name: str, *pieces: str) -> Call:
    return Call(index, id, name, pieces)


def call_pieces(c: Call) -> list[dict[str, Any]]:
    """The deltas of one call: its id and name with the first piece (or none), then one delta per piece."""
    first = {"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
    return [{"tool_calls": [first]}] + [
        {"tool_calls": [{"index": c.index, "function": {"arguments": p}}]} for p in c.pieces
    ]


def reply(
    *texts: str,
    calls: tuple[Call, ...] = (),
    interleave: bool = False,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    send_usage: bool = True,
    reasoning: tuple[str, ...] = (),
    reasoning_field: str = "reasoning_content",
) -> list[str]:
    """The chunks of one streamed reply: reasoning, text pieces, then tool calls (interleaved when asked), the finish
    chunk and, unless ``send_usage`` is False, the usage chunk (``include_usage``'s: no choices)."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({reasoning_field: r}) for r in reasoning]
    chunks += [chunk({"content": t}) for t in texts]
    per_call = [call_pieces(c) for c in calls]
    if interleave:
        while any(per_call):
            for pieces in per_call:
                if pieces:
                    chunks.append(chunk(pieces.pop(0)))
    else:
        chunks += [chunk(d) for pieces in per_call for d in pieces]
    chunks.append(chunk(finish_reason=finish or ("tool_calls" if calls else "stop")))
    if send_usage:
        chunks.append(chunk(no_choices=True, usage=usage or usage_json()))
    return chunks


def sse(chunks: list[str]) -> bytes:
    return "".join(f"data: {c}\n\n" for c in [*chunks, "[DONE]"]).encode()


async def _pieces(body: bytes, size: int = 37) -> AsyncIterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


def stream_response(chunks: list[str]) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_pieces(sse(chunks)))


def error_response(status: int, message: str, *, retry_after: str | None = "0.001") -> httpx2.Response:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return httpx2.Response(status, headers=headers, json=body)


# --- The fake API ---------------------------------------------------------------------------------------------------

Responder = Callable[[httpx2.Request], httpx2.Response]


@dataclass
class FakeChat:
    """Serves queued responses (a fresh Response per request) and keeps every request it was sent."""

    responses: list[Responder]
    requests: list[httpx2.Request] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        assert self.responses, f"unexpected request #{len(self.requests)}: {request.method} {request.url}"
        return self.responses.pop(0)(request)

    def client(self, base_url: str = BASE_URL, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=fake_key(),
            base_url=base_url,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            **kwargs,
        )

    def model(self, model: str = MODEL, **kwargs: Any) -> OpenAIModel:
        return OpenAIModel(model, client=self.client(), **kwargs)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def chat(*responses: list[str] | Responder) -> FakeChat:
    """A fake API answering with these replies (chunk lists) or responders, in order."""
    return FakeChat([_streamer(r) if isinstance(r, list) else r for r in responses])


def _streamer(chunks: list[str]) -> Responder:
    return lambda _request: stream_response(chunks)


def fail(status: int, message: str, *, retry_after: str | None = "0.001") -> Responder:
    return lambda _request: error_response(status, message, retry_after=retry_after)


# --- On the loopback interface ----------------------------------------------------------------------------------------


@dataclass
class Served:
    """The server's address and how many requests it has answered."""

    url: str
    requests: int = 0
    authorizations: list[str] = field(default_factory=list)
    """Each request's ``Authorization`` header: what key it was sent with."""


@contextmanager
def chat_server(answer: Callable[[dict[str, Any]], list[str]]) -> Iterator[Served]:
    """A fake Chat Completions server on 127.0.0.1 (``url`` ends in ``/v1``), each request answered by ``answer``."""
    served = Served("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real server

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            served.requests += 1
            served.authorizations.append(self.headers.get("authorization", ""))
            data = sse(answer(body))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
