"""A fake of Anthropic's Message Batches API (and of the Messages API, from the same script) for the real client.

`FakeBatches` routes requests the real ``anthropic`` client sends through ``httpx2.MockTransport``:

- ``POST /v1/messages/batches``: creates a batch (the API's checks: 1 to ``max_requests`` requests, at most
  ``max_bytes`` of body, unique ``custom_id``s of 1 to 64 characters of ``[a-zA-Z0-9_-]``); answers the
  ``MessageBatch`` object, ``processing_status`` ``in_progress``;
- ``GET /v1/messages/batches/{id}``: the batch; it ends after ``polls`` retrieves (``request_counts`` then tally the
  outcomes, ``results_url`` and ``ended_at`` are set); with ``not_found_first`` the first retrieve of each batch is
  the API's 404, as just after creation;
- ``GET {results_url}``: the results as JSON lines, in reverse request order (the API keeps no order), each
  ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} | {"type": "expired"}
  | {"type": "canceled"}}``;
- ``POST /v1/messages/batches/{id}/cancel``, ``GET /v1/messages/batches`` (newest first, ``limit``, ``after_id``);
- ``POST /v1/messages``: a live, streamed reply (server-sent events) from the same script.

Each request is answered by ``script(params)``, a `Turn` (the blocks of `tests.support.anthropic_api`, a stop
reason, usage), unless ``outcome(custom_id, params)`` says it errored, expired or was canceled; both are asked once
per request, when its batch is created (a batch canceled before it ends answers every request ``canceled``). Formats
follow the installed SDK's types (``anthropic.types.messages.MessageBatch``, ``MessageBatchIndividualResponse``).
"""

from __future__ import annotations

import datetime
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import anthropic
import httpx2

from tests.support.anthropic_api import (
    BASE_URL,
    KEY,
    Block,
    Text,
    Use,
    assembled,
    error_response,
    reply,
    stream_response,
)

Outcome = Literal["succeeded", "errored", "expired", "canceled", "invalid"]
"""What becomes of one batch request: ``invalid`` is errored with an ``invalid_request_error``."""

_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Turn:
    """One reply of the script: the same blocks, stop reason and usage whether streamed live or in a batch."""

    blocks: tuple[Block, ...]
    stop_reason: str = "end_turn"
    input_tokens: int = 10
    output_tokens: int = 5
    cache_creation: int = 0
    cache_read: int = 0

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The streamed reply (server-sent events)."""
        return reply(
            *self.blocks,
            stop_reason=self.stop_reason,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_creation=self.cache_creation,
            cache_read=self.cache_read,
        )

    def message(self, model: str, id: str) -> dict[str, Any]:
        """The reply as a whole ``Message``, as a batch's result carries it."""
        content: list[dict[str, Any]] = []
        for block in self.blocks:
            if isinstance(block, Text):
                content.append({"type": "text", "text": "".join(block.pieces), "citations": None})
            elif not isinstance(block, Use):  # thinking, redacted thinking, another type: whole, as the API sends it
                content.append(assembled(block))
            else:
                content.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": json.loads("".join(block.pieces))}
                )
        return {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cache_creation_input_tokens": self.cache_creation,
                "cache_read_input_tokens": self.cache_read,
            },
        }


Script = Callable[[dict[str, Any]], Turn]
"""The reply to a request's Messages API parameters."""


@dataclass
class FakeBatch:
    """One batch as the fake keeps it."""

    id: str
    requests: list[dict[str, Any]]  # as created (none with ``forget``)
    answers: list[tuple[str, Outcome, bytes]]  # each request's custom_id, outcome and results line, made at creation
    created_at: datetime.datetime
    size: int
    retrieves: int = 0
    canceling: bool = False
    counts: dict[str, int] | None = None  # the tallies of its results, set when it ends

    @property
    def ended(self) -> bool:
        return self.counts is not None


def _time(t: datetime.datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t is not None else None


@dataclass
class FakeBatches:
    """The Message Batches and Messages endpoints over one script; every request is kept in ``requests``."""

    script: Script
    polls: int = 1
    """Retrieves answered ``in_progress`` before a batch ends (0: it has ended by the first retrieve)."""
    not_found_first: bool = False
    """Answer the first retrieve of each batch with the API's 404 (a batch not yet visible just after creation)."""
    outcome: Callable[[str, dict[str, Any]], Outcome] = lambda custom_id, params: "succeeded"
    """What becomes of each batch request (by its custom_id and parameters)."""
    max_requests: int = 100_000
    """The most requests one batch may hold."""
    max_bytes: int = 256_000_000
    """The largest body a create may send."""
    forget: bool = False
    """Keep no request, and drop a batch's requests and results once its results were served (so a benchmark's
    memory is the framework's, not the fake's)."""
    workspace: str = ""
    """Put in each batch id: two fakes of different workspaces never make the same id (another workspace's batch is
    one this fake does not know)."""
    deleted: set[str] = field(default_factory=set)
    """Batch ids answered with the API's 404 from now on (a batch deleted since)."""
    results_gone: set[str] = field(default_factory=set)
    """Batch ids whose results answer the API's 404 (past the 29 days the API keeps them); retrieving still works."""
    batches: dict[str, FakeBatch] = field(default_factory=dict)
    requests: list[httpx2.Request] = field(default_factory=list)
    live: list[dict[str, Any]] = field(default_factory=list)
    """The parameters of every live (``POST /v1/messages``) request."""

    # --- what tests look at ----------------------------------------------------------------------------------------

    @property
    def creations(self) -> list[FakeBatch]:
        """The batches created, in order."""
        return list(self.batches.values())

    def calls(self, method: str, pattern: str) -> int:
        """How many requests of ``method`` had a path matching ``pattern`` (a regular expression)."""
        return sum(1 for r in self.requests if r.method == method and re.fullmatch(pattern, r.url.path))

    def client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        """A real client whose requests this fake answers."""
        return anthropic.AsyncAnthropic(
            api_key=KEY,
            base_url=BASE_URL,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            **kwargs,
        )

    # --- routing ---------------------------------------------------------------------------------------------------

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if not self.forget:
            self.requests.append(request)
        path, method = request.url.path, request.method
        if path == "/v1/messages" and method == "POST":
            params = json.loads(request.content)
            self.live.append(params)
            return stream_response(self.script(params).events())
        if path == "/v1/messages/batches" and method == "POST":
            return self._create(request.content)
        if path == "/v1/messages/batches" and method == "GET":
            return self._list(request.url.params)
        found = re.fullmatch(r"/v1/messages/batches/([^/]+)(/cancel|/results)?", path)
        if found is None or found[1] not in self.batches or found[1] in self.deleted:
            return error_response(404, "not_found_error", f"Not found: {method} {path}")
        batch = self.batches[found[1]]
        if found[2] == "/cancel" and method == "POST":
            batch.canceling = not batch.ended
            return _json(self._batch_json(batch))
        if found[2] == "/results" and method == "GET":
            if batch.id in self.results_gone:
                return error_response(404, "not_found_error", f"The results of {batch.id} are no longer available.")
            if not batch.ended:
                return error_response(404, "not_found_error", f"Batch {batch.id} has no results yet.")
            lines = b"".join(
                _line(cid, {"type": "canceled"}) if batch.canceling else line
                for cid, _, line in reversed(batch.answers)
            )
            if self.forget:
                batch.answers = []
            return httpx2.Response(200, headers={"content-type": "application/binary"}, content=lines)
        if found[2] is None and method == "GET":
            return self._retrieve(batch)
        return error_response(405, "invalid_request_error", f"{method} {path} is not allowed.")

    def _create(self, body: bytes) -> httpx2.Response:
        if len(body) > self.max_bytes:
            return error_response(413, "request_too_large", f"Request exceeds the maximum size of {self.max_bytes}.")
        requests = json.loads(body).get("requests")
        if not isinstance(requests, list) or not requests:
            return error_response(400, "invalid_request_error", "requests: at least one request is required.")
        if len(requests) > self.max_requests:
            return error_response(
                400, "invalid_request_error", f"requests: at most {self.max_requests} requests, got {len(requests)}."
            )
        seen: set[str] = set()
        for i, r in enumerate(requests):
            custom_id = r.get("custom_id")
            if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                return error_response(
                    400, "invalid_request_error", f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$."
                )
            if custom_id in seen:
                return error_response(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate {custom_id}.")
            seen.add(custom_id)
            params = r.get("params")
            if not isinstance(params, dict) or not {"model", "max_tokens", "messages"} <= params.keys():
                return error_response(
                    400, "invalid_request_error", f"requests.{i}.params: model, max_tokens and messages are required."
                )
        batch_id = f"msgbatch_{self.workspace}{len(self.batches) + 1:024d}"
        # Each request's fate and results line are made now, so an in-flight batch holds little (see ``forget``).
        answers = [self._answer(r["custom_id"], r["params"]) for r in requests]
        created_at = _EPOCH + datetime.timedelta(minutes=len(self.batches))
        batch = FakeBatch(batch_id, [] if self.forget else requests, answers, created_at, len(requests))
        self.batches[batch_id] = batch
        return _json(self._batch_json(batch))

    def _retrieve(self, batch: FakeBatch) -> httpx2.Response:
        batch.retrieves += 1
        if self.not_found_first and batch.retrieves == 1:
            return error_response(404, "not_found_error", f"Message batch {batch.id} not found.")
        answered = batch.retrieves - (1 if self.not_found_first else 0)
        if not batch.ended and (answered > self.polls or batch.canceling):
            batch.counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
            for _, outcome, _ in batch.answers:
                batch.counts["canceled" if batch.canceling else "errored" if outcome == "invalid" else outcome] += 1
        return _json(self._batch_json(batch))

    def _answer(self, custom_id: str, params: dict[str, Any]) -> tuple[str, Outcome, bytes]:
        outcome = self.outcome(custom_id, params)
        result: dict[str, Any]
        if outcome == "succeeded":
            message = self.script(params).message(params["model"], f"msg_{custom_id}")
            result = {"type": "succeeded", "message": message}
        elif outcome in ("errored", "invalid"):
            kind, text = (
                ("invalid_request_error", "messages.0.content: Input should be a valid list")
                if outcome == "invalid"
                else ("api_error", "Internal server error")
            )
            result = {
                "type": "errored",
                "error": {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_batch"},
            }
        else:
            result = {"type": outcome}
        return custom_id, outcome, _line(custom_id, result)

    def _batch_json(self, batch: FakeBatch) -> dict[str, Any]:
        counts = batch.counts or {"processing": batch.size, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        ended_at = batch.created_at + datetime.timedelta(minutes=30) if batch.ended else None
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if batch.ended else "canceling" if batch.canceling else "in_progress",
            "request_counts": counts,
            "created_at": _time(batch.created_at),
            "expires_at": _time(batch.created_at + datetime.timedelta(hours=24)),
            "ended_at": _time(ended_at),
            "cancel_initiated_at": _time(batch.created_at) if batch.canceling else None,
            "archived_at": None,
            "results_url": f"{BASE_URL}/v1/messages/batches/{batch.id}/results" if batch.ended else None,
        }

    def _list(self, query: Any) -> httpx2.Response:
        newest = list(reversed(self.batches.values()))
        after = query.get("after_id")
        if after is not None:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1 :] if after in ids else []
        limit = int(query.get("limit", 20))
        page = newest[:limit]
        return _json(
            {
                "data": [self._batch_json(b) for b in page],
                "has_more": len(newest) > limit,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )


def _line(custom_id: str, result: dict[str, Any]) -> bytes:
    return (json.dumps({"custom_id": custom_id, "result": result}) + "\n").encode()


def _json(data: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, headers={"request-id": "req_batches"}, json=data)


@contextmanager
def served(fake: FakeBatches, after: Callable[[FakeBatches, httpx2.Request], None] | None = None) -> Iterator[str]:
    """The fake behind a real HTTP server on the loopback interface (for a real client in another process); its URL.

    The results URLs it answers point back at this server. ``after``, when given, is called with each request once
    the fake has answered it, under the same lock (a test's way to change the fake as a wave goes on).
    """
    lock = threading.Lock()
    url = ""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # connections kept open, as the API's are: a client's pool holds them

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            request = httpx2.Request(self.command, url + self.path, headers=dict(self.headers), content=body)
            with lock:
                response = fake.handle(request)
                if after is not None:
                    after(fake, request)
            content = response.read().replace(BASE_URL.encode(), url.encode())
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "content-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a connection a client keeps open does not hold the server's end
    server.block_on_close = False
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
