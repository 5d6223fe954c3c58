"""What the MCP tests share: real servers (tests/support/mcp_servers.py, examples/mcp_server.py) and process counts."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agl_notebook import MCPServer, Role, reporting_tool
from tests.support.paths import ROOT

FAULT_SERVER = ROOT / "tests" / "support" / "mcp_servers.py"
EXAMPLE_SERVER = ROOT / "examples" / "mcp_server.py"


@dataclass
class Answer:
    text: str


REPORT = reporting_tool("report", "Hand back the answer.", Answer)


def role(*servers: MCPServer, name: str = "mcp-user") -> Role[Answer]:
    return Role(name, "Use the tools, then report.", tools=[REPORT], mcp=list(servers))


def new_tag() -> str:
    return f"agl-test-{uuid.uuid4().hex[:12]}"


def processes(tag: str) -> list[int]:
    """The live (not zombie) processes whose command line holds ``tag``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().split(b") ", 1)[-1][:1]
        except OSError:
            continue
        if tag.encode() in cmdline and state != b"Z" and b"/bin/sh" not in cmdline.split(b"\0")[0]:
            found.append(int(entry))
    return found


def wait_until_gone(tag: str, seconds: float = 15.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def fault_server(
    tag: str, kind: str = "faults", *, name: str = "faults", version: int = 0, **options: object
) -> MCPServer:
    args = [str(FAULT_SERVER), kind, "--tag", tag, "--version", str(version)]
    return MCPServer.stdio(name, sys.executable, args, **options)  # type: ignore[arg-type]


def example_server(tag: str, **options: object) -> MCPServer:
    return MCPServer.stdio("units", sys.executable, [str(EXAMPLE_SERVER), "--tag", tag], **options)  # type: ignore[arg-type]


@pytest.fixture
def tag() -> Iterator[str]:
    value = new_tag()
    yield value
    left = wait_until_gone(value, 0.5)
    for pid in left:  # a test that failed midway: its servers must not outlive it
        with contextlib.suppress(OSError):
            os.kill(pid, 9)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]


def start_http(script: Path, *args: str) -> HttpServer:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(script), *args, "--http", str(port)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the HTTP server exited: {process.stderr.read().decode() if process.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return HttpServer(f"http://127.0.0.1:{port}/mcp", process)
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("the HTTP server did not listen within 30 s")


@pytest.fixture(scope="module")
def http_faults() -> Iterator[HttpServer]:
    server = start_http(FAULT_SERVER, "faults")
    yield server
    server.process.kill()
    server.process.wait()


@pytest.fixture(scope="module")
def http_example() -> Iterator[HttpServer]:
    server = start_http(EXAMPLE_SERVER)
    yield server
    server.process.kill()
    server.process.wait()


async def gone(tag: str, seconds: float = 15.0) -> list[int]:
    """`wait_until_gone` for async tests: the event loop runs meanwhile (a session stops its server on it)."""
    import asyncio

    deadline = time.monotonic() + seconds
    while (left := processes(tag)) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling /proc, no event
        await asyncio.sleep(0.05)
    return left
