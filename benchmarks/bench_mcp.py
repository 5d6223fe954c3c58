"""An MCP tool call's overhead beyond the server's round trip: agl_notebook beside pydantic-ai's MCP client.

Three clients of the same stdio server (tests/support/mcp_servers.py, ``faults``; each client starts its own copy):

- ``sdk``: the `mcp` SDK's own ``ClientSession.call_tool`` on an initialized session: the round trip itself, the
  baseline;
- ``agl_notebook``: what the tool loop runs for one call of an MCP tool: the arguments checked against the tool's
  schema (``LoopTool.validate``, jsonschema), then ``LoopTool.call`` (this loop's session looked up, the call within
  its timeout and concurrency slot, the result made the text the agent reads), built by `run/_mcp.py` exactly as a
  step builds it;
- ``pydantic-ai``: ``MCPToolset.direct_call_tool`` (pydantic-ai-slim[mcp], on FastMCP's client), connected once.

The calls are interleaved in triples (one call of each client in turn, the order rotating), so drift in the
machine's load falls on all three alike. A client's overhead is the median, over the triples, of its call's time
minus the SDK call's time in the same triple. Reported: each client's median per call, the overheads, and
agl_notebook's overhead as a ratio of pydantic-ai's (goal: at or under 1).

Run: ``.venv/bin/python benchmarks/bench_mcp.py`` (``--rounds 60 --calls 20`` are the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = [str(ROOT / "tests" / "support" / "mcp_servers.py"), "faults"]
ARGS: dict[str, Any] = {"text": "hello"}


async def sdk_client(stack: Any) -> Callable[[], Awaitable[Any]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    read, write = await stack.enter_async_context(
        stdio_client(StdioServerParameters(command=sys.executable, args=SERVER))
    )
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    await session.list_tools()
    return lambda: session.call_tool("echo", ARGS)


async def agl_client(stack: Any) -> Callable[[], Awaitable[Any]]:
    from agl_notebook.mcp import MCPServer, _sessions
    from agl_notebook.run._mcp import StepMCP

    server = MCPServer.stdio("bench", sys.executable, SERVER)
    (tool,) = [t for t in await StepMCP([server], "bench", []).live_tools() if t.spec.name == "echo"]
    stack.push_async_callback(_sessions.close_loop)

    async def call() -> Any:
        arguments, problems = tool.validate(ARGS)  # type: ignore[misc]
        assert not problems
        text, is_error = await tool.call(arguments, "toolu_bench")
        assert (text, is_error) == ("echo: hello", False)
        return text

    return call


async def pydantic_ai_client(stack: Any) -> Callable[[], Awaitable[Any]]:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    toolset = MCPToolset(StdioTransport(command=sys.executable, args=SERVER), init_timeout=120)
    await stack.enter_async_context(toolset)
    await toolset.direct_call_tool("echo", ARGS)
    return lambda: toolset.direct_call_tool("echo", ARGS)


async def main(rounds: int, calls: int) -> None:
    import contextlib

    async with contextlib.AsyncExitStack() as stack:
        clients = {
            "sdk": await sdk_client(stack),
            "agl_notebook": await agl_client(stack),
            "pydantic-ai": await pydantic_ai_client(stack),
        }
        times: dict[str, list[float]] = {name: [] for name in clients}
        for call in clients.values():  # warm every path once
            for _ in range(5):
                await call()
        names = list(clients)
        for r in range(rounds):
            for i in range(calls):  # one call of each client in turn, the order rotating: a triple
                k = (r * calls + i) % 3
                for name in names[k:] + names[:k]:
                    start = time.perf_counter()
                    await clients[name]()
                    times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) * 1e6 for name, values in times.items()}
    # Each call's overhead against the SDK call of its own triple, so the machine's drift cancels; then the median.
    overheads = {
        name: statistics.median(t - s for t, s in zip(times[name], times["sdk"], strict=True)) * 1e6
        for name in ("agl_notebook", "pydantic-ai")
    }
    print(f"{rounds} rounds x {calls} interleaved triples of `echo` calls, stdio, Python {sys.version.split()[0]}")
    for name, value in medians.items():
        extra = "" if name == "sdk" else f"   overhead (median of paired differences) {overheads[name]:8.1f} µs"
        print(f"  {name:13} median {value:8.1f} µs per call{extra}")
    ours, theirs = overheads["agl_notebook"], overheads["pydantic-ai"]
    print(f"  overhead ratio agl_notebook / pydantic-ai: {ours / theirs:.2f}" if theirs > 0 else "  (no overhead)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.calls))
