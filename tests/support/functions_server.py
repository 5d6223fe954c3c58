"""A real HTTP server on 127.0.0.1 for the ``api`` command's tests: orders, errors, slow and echoing routes; and the
scripted model of the support agent (the functions tests' agent that looks orders up).
"""

from __future__ import annotations

import contextlib
import html
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agl_notebook import ScriptedCall, ScriptedModel, ScriptedTurn

ORDERS = {"ORD-1": {"status": "shipped", "total": 12.5}, "ORD-2": {"status": "packed", "total": 30}}


@dataclass
class Received:
    """A request the server got."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: str


@dataclass
class OrdersServer:
    """The server's address and what it received."""

    base_url: str
    received: list[Received] = field(default_factory=list)
    server: Any = None

    def stop(self) -> None:
        """Stop serving: a request after this cannot connect."""
        self.server.shutdown()
        self.server.server_close()


def _handler(state: OrdersServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
            pass

        def _send(
            self, status: int, body: bytes, content_type: str = "application/json", extra: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: Any) -> None:
            self._send(status, json.dumps(data).encode())

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            state.received.append(
                Received(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
            )
            path = parts.path
            if path.startswith("/api/orders/"):
                order = ORDERS.get(path.rsplit("/", 1)[1])
                if order is None:
                    self._json(404, {"detail": "no such order"})
                else:
                    self._json(200, order)
            elif path == "/api/boom":
                self._send(500, b"internal trouble", "text/plain")
            elif path == "/api/slow":
                time.sleep(1.5)
                self._json(200, {"late": True})
            elif path == "/api/echo":
                self._json(
                    200,
                    {
                        "method": self.command,
                        "url": self.path,
                        "query": parse_qs(parts.query),
                        "headers": dict(self.headers.items()),
                        "body": body,
                    },
                )
            elif path == "/api/echo-escaped":  # as PHP's json_encode writes JSON by default: every '/' as '\/'
                echoed = {"method": self.command, "url": self.path, "headers": dict(self.headers.items())}
                self._send(200, json.dumps(echoed).replace("/", "\\/").encode())
            elif path.startswith("/api/echo-spelled/"):  # the Authorization header echoed, spelled as a server might
                self._send(200, *_spelled(path.rsplit("/", 1)[1], self.headers.get("Authorization", "")))
            elif path == "/api/redirect":
                self._send(302, b"", "text/plain", {"Location": "http://127.0.0.1:9/elsewhere"})
            elif path == "/api/big":
                self._send(200, b"x" * 50_000, "text/plain")
            elif path == "/api/text":
                self._send(200, "plain text ✓".encode(), "text/plain; charset=utf-8")
            elif path == "/api/badjson":
                self._send(200, b"{not json", "application/json")
            else:
                self._json(404, {"detail": f"no route {path}"})

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    return Handler


def _every_char_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _mixed(text: str) -> str:
    """Every third character \\u-escaped, every '/' as '\\/', the rest as written."""
    out = []
    for i, c in enumerate(text):
        out.append("\\/" if c == "/" else f"\\u{ord(c):04X}" if i % 3 == 0 else json.dumps(c)[1:-1])
    return "".join(out)


def _spelled(form: str, secret: str) -> tuple[bytes, str]:
    """A body echoing ``secret`` in one of the spellings a server may use, and its content type; none parses."""
    as_json = json.dumps({"auth": secret})
    bodies = {
        # JSON behind a byte-order mark: json.loads refuses it
        "bom": ("\ufeff" + as_json.replace("/", "\\/"), "text/plain; charset=utf-8"),
        # JSON followed by a notice
        "notice": (as_json.replace("/", "\\/") + "\n<!-- served by test -->", "text/plain"),
        "unicode": ('{"auth": "' + _every_char_escaped(secret) + '"} trailing', "text/plain"),
        "mixed": ('{"auth": "' + _mixed(secret) + '"', "text/plain"),  # cut short
        "html": ("<p>" + html.escape(secret) + "</p>", "text/html"),
        "nested": (json.dumps({"inner": as_json.replace("/", "\\/")}) + "!", "text/plain"),
    }
    text, content_type = bodies[form]
    return text.encode("utf-8"), content_type


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (a timeout test) breaks the pipe; that is the point, not an error


def serve() -> Iterator[OrdersServer]:
    """Serve on a free port of 127.0.0.1 until the generator is closed."""
    state = OrdersServer("")
    server = _Server(("127.0.0.1", 0), _handler(state))
    state.server = server
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/api"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="orders-server", daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        with contextlib.suppress(OSError):
            state.stop()
        thread.join(timeout=5)


def support_model() -> ScriptedModel:
    """The support agent's model: its ``llm`` command looks ORD-1 up with the ``lookupOrder`` tool, then reports."""
    return ScriptedModel(
        [
            ScriptedTurn("Looking it up.", [ScriptedCall("lookupOrder", {"orderId": "ORD-1"})]),
            {"calls": [{"name": "report_result", "args": {"answer": "ORD-1 has shipped."}}]},
        ]
    )
