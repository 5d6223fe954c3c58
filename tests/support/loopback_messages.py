"""A fake Anthropic Messages API on the loopback interface, for kernels in other processes: it counts requests.

A kernel a runner starts (nbconvert, ``jupyter execute``, papermill, nbval) is another process, out of reach of the
suite's network guard and of in-process transports. Pointed here with ``ANTHROPIC_BASE_URL`` (and a planted,
obviously fake key), the real anthropic client in that kernel reaches this server, which answers every
``POST /v1/messages`` with a call to the reporting tool ``answer`` and counts it, so a test can show that a run made
no model request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.anthropic_api import reply, sse, use

CLAUDE_SETUP = """from dataclasses import dataclass
from agl_notebook import Claude, Role, Run, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

role = Role("oracle", "Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)], model=Claude.OPUS,
            max_tokens=256)
run = Run()"""
"""A notebook's setup cell whose role runs on Claude: with a key, its steps reach the server named by the URL."""

CLAUDE_STEP = "result = await run.step(role, 'What is six times seven?')\nprint(result.text)"


def fake_key() -> str:
    """A key-like value, built at run time so no key-shaped literal sits in the code."""
    return "-".join(["sk", "ant", "test", "not", "a", "real", "key"])


@dataclass
class Served:
    """The server's address and how many model requests it has answered."""

    url: str
    requests: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    """Each request's JSON body."""


def _forty_two(_request: dict[str, Any]) -> bytes:
    return sse(reply(use("toolu_1", "answer", json.dumps({"text": "forty-two"})), stop_reason="tool_use"))


@contextmanager
def messages_server(answer: Callable[[dict[str, Any]], bytes] = _forty_two) -> Iterator[Served]:
    """A counting fake Messages API on 127.0.0.1, for the length of the block.

    Each request is answered by ``answer`` (SSE bytes; by default a call to the reporting tool ``answer`` saying
    "forty-two").
    """
    served = Served("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            served.requests += 1
            served.bodies.append(request)
            body = answer(request)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
