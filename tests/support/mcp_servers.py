"""MCP servers for the tests of agl_notebook.mcp, built with the `mcp` package's own low-level `Server` class.

Run as ``python -m tests.support.mcp_servers KIND [--http PORT] [--tag TAG] [--version N]``; it imports nothing of
agl_notebook. KIND chooses what it does:

- ``faults``: well-behaved tools (``echo``, ``pid``, ``slow``, ``pieces``) and misbehaving ones: ``crash`` (the
  process exits mid-call after a line on stderr), ``hang`` (never answers), ``bad_output`` (structured content
  breaking its own output schema), ``fails`` (an ``isError`` result), ``image``, ``audio``; ``--version``
  changes ``echo``'s description (a tool that changed since a recording).
- ``huge``: 5,000 tools. ``refcycle``: a schema whose references loop. ``badname``: a tool the Messages API would
  refuse. ``bigschema``: a 100 KB schema. ``remote_ref``: a $ref to a URL.
- ``garbage``: answers its first message with a line that is not JSON-RPC.
- ``flood``: one tool, ``flood``, which writes 100 MB to stdout with no newline, then waits.
- ``changing``: the tool ``grow`` adds a tool (``grown_1``, ``grown_2``...) and says so
  (notifications/tools/list_changed).
- ``stubborn``: the ``faults`` tools, but it ignores SIGTERM and stays after its stdin closes (only SIGKILL ends it).

``--tag`` is ignored: it marks the process's command line, so a test can count the processes it started.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _tool(name: str, description: str, properties: dict[str, Any] | None = None, **extra: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}, "required": sorted(properties or {})}
    return types.Tool(name=name, description=description, input_schema=schema, **extra)


def fault_tools(version: int) -> list[types.Tool]:
    text = {"text": {"type": "string", "minLength": 1}}
    return [
        _tool("echo", "Echo the text back." + (f" (version {version})" if version else ""), text),
        _tool("pid", "The server's process id.", {}),
        _tool("slow", "Echo after a short wait.", text),
        _tool("crash", "Exit mid-call.", {}),
        _tool("hang", "Never answer.", {}),
        _tool(
            "bad_output",
            "Return structured content that breaks its output schema.",
            {},
            output_schema={"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
        ),
        _tool("fails", "Always fail.", {}),
        _tool("image", "Return a one-pixel image.", {}),
        _tool("audio", "Return a sound.", {}),
        _tool("ask", "Ask the person for a booking (MCP elicitation) and say what came back.", {}),
        _tool("ask_url", "Ask the person in URL mode (never offered).", {}),
        _tool("ask_array", "Ask for a multi-select (not shown as a form).", {}),
        _tool("ask_slow", "Ask the person, then take longer than the call timeout would allow without a pause.", {}),
        _tool(
            "pieces",
            "Say a secret the server knows in one of the ways of `secret_pieces`.",
            {"case": {"type": "integer"}, "which": {"type": "string"}, "limit": {"type": "integer"}},
        ),
    ]


BOOKING = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "title": "Email", "description": "Where to send it."},
        "nights": {"type": "integer", "minimum": 1, "maximum": 14, "title": "Nights"},
        "room": {"type": "string", "enum": ["single", "double"], "enumNames": ["Single room", "Double room"]},
        "breakfast": {"type": "boolean", "title": "Breakfast"},
        "note": {"type": "string", "title": "Note", "maxLength": 40},
    },
    "required": ["email", "nights", "room", "breakfast"],
}
"""What the ``ask`` tool requests: a string with a format, an integer with bounds, a titled enum, a boolean, an
optional string."""


FLOOD_BYTES = 100 * 1024 * 1024
_WIRE: list[int] = []
"""A copy of the stdout the client reads (``flood``): the SDK's stdio server points fd 1 at stderr while it runs."""
_GROWN: list[str] = []
"""The tools ``grow`` added (``changing``)."""


def listing(kind: str, version: int) -> list[types.Tool]:
    if kind == "flood":
        return [_tool("flood", "Write one endless line.", {})]
    if kind == "changing":
        grown = [_tool(name, "A tool added while the server ran.", {}) for name in _GROWN]
        return [_tool("grow", "Add a tool, and say the tools changed.", {}), *grown]
    if kind == "huge":
        return [_tool(f"tool_{i}", f"Tool number {i}.") for i in range(5000)]
    if kind == "refcycle":
        schema = {
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        }
        return [types.Tool(name="loops", description="Its schema loops.", input_schema=schema)]
    if kind == "remote_ref":
        schema = {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}}
        return [types.Tool(name="remote", description="Its schema points away.", input_schema=schema)]
    if kind == "badname":
        return [_tool("has space", "A name the Messages API refuses.")]
    if kind == "bigschema":
        properties = {f"field_{i}": {"type": "string", "description": "x" * 100} for i in range(1000)}
        return [_tool("big", "A big schema.", properties)]
    return fault_tools(version)


def secret_pieces(secret: str, limit: int) -> list[list[str]]:
    """The text blocks of a result saying ``secret``: whole, escaped (JSON, HTML), split across two text blocks (as
    written, and JSON-escaped), and across the cut at ``limit`` characters."""
    half = len(secret) // 2
    escaped = json.dumps(secret)[1:-1]
    return [
        [f"it is {secret}."],
        [f"it is {escaped}.", f"or {html.escape(secret)}"],
        [f"it is {secret[:half]}", f"{secret[half:]} (two blocks)"],
        [f"it is {escaped[:half]}", f"{escaped[half:]} (two blocks, escaped)"],
        ["x" * (limit - half) + secret + " after the cut"],
    ]


async def call(name: str, arguments: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
    def text(value: str, *, error: bool = False) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=error)

    if name == "echo":
        return text(f"echo: {arguments.get('text')}")
    if name == "pieces":  # a secret of its environment's, or of the kernel's it came to know (a file)
        known = (
            os.environ["AGL_TEST_PLANTED"]
            if arguments["which"] == "env"
            else Path(os.environ["AGL_TEST_PLANTED_FILE"]).read_text(encoding="utf-8")  # noqa: ASYNC240
        )
        said = secret_pieces(known, arguments["limit"])[arguments["case"]]
        return types.CallToolResult(content=[types.TextContent(type="text", text=piece) for piece in said])
    if name == "pid":
        return text(str(os.getpid()))
    if name == "slow":
        await asyncio.sleep(0.05)
        return text(f"slow: {arguments.get('text')}")
    if name == "crash":
        print("the server is about to crash on purpose", file=sys.stderr, flush=True)
        if os.environ.get("AGL_TEST_PLANTED"):  # a secret given in its environment, said on its stderr
            print(f"my token is {os.environ['AGL_TEST_PLANTED']}", file=sys.stderr, flush=True)
        if os.environ.get("AGL_TEST_PLANTED_FILE"):  # a secret of the kernel's that the server came to know
            known = Path(os.environ["AGL_TEST_PLANTED_FILE"]).read_text(encoding="utf-8")  # noqa: ASYNC240
            print(f"I know {known}", file=sys.stderr, flush=True)
            print("\N{GRINNING FACE}" * int(os.environ.get("AGL_TEST_PAD", "0")), file=sys.stderr, flush=True)
        os._exit(3)
    if name == "hang":
        await asyncio.sleep(3600)
    if name == "bad_output":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="{}")], structured_content={"value": "x"}
        )
    if name == "fails":
        return text("the thing failed", error=True)
    if name == "image":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG_1PX, mime_type="image/png")])
    if name in ("ask", "ask_slow", "ask_array"):
        schema: dict[str, Any] = BOOKING
        if name == "ask_array":
            items = {"type": "string", "enum": ["a", "b"]}
            schema = {"type": "object", "properties": {"many": {"type": "array", "items": items}}}
        try:
            # A server given a credential may say it back in its question (AGL_TEST_PLANTED: its env).
            planted = os.environ.get("AGL_TEST_PLANTED")
            question = f"Book a room? {planted}" if planted else "Book a room?"
            answer = await ctx.session.elicit_form(question, schema, related_request_id=ctx.request_id)
        except Exception as e:  # the client refused the request: the tool says so
            return text(f"elicitation failed: {e}", error=True)
        if name == "ask_slow":
            await asyncio.sleep(0.5)
        said = answer.model_dump(mode="json", exclude_none=True)
        return text(f"{answer.action}: {json.dumps(said.get('content'), sort_keys=True)}")
    if name == "ask_url":
        try:
            answer = await ctx.session.elicit_url("Sign in", "https://example.invalid/x", "e1", ctx.request_id)
        except Exception as e:
            return text(f"elicitation failed: {e}", error=True)
        return text(answer.action)
    if name == "flood":
        block = b"x" * (1024 * 1024)
        for _ in range(FLOOD_BYTES // len(block)):
            os.write(_WIRE[0], block)  # a blocking write: the pipe fills until the client reads (or stops reading)
        await asyncio.sleep(3600)
    if name == "grow":
        _GROWN.append(f"grown_{len(_GROWN) + 1}")
        await ctx.session.send_tool_list_changed()
        return text(f"added {_GROWN[-1]}")
    if name.startswith("grown_"):
        return text(f"{name} ran")
    if name == "audio":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")])
    return text(f"no tool {name}", error=True)


def build(kind: str, version: int) -> Server[Any]:
    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing(kind, version))

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call(params.name, params.arguments or {}, ctx)

    return Server("test-" + kind, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind")
    parser.add_argument("--http", type=int)
    parser.add_argument("--tag")
    parser.add_argument("--version", type=int, default=0)
    options = parser.parse_args()
    if options.kind == "garbage":
        sys.stdin.readline()
        planted = os.environ.get("AGL_TEST_PLANTED_FILE")  # a secret of the kernel's, in the garbage
        known = Path(planted).read_text(encoding="utf-8") if planted else ""
        print(f"this is not JSON-RPC {known} {json.dumps(known)} {known}", flush=True)
        sys.stdin.read()
        return
    if options.kind == "stubborn":  # ignores SIGTERM and outlives its stdin: only SIGKILL ends it
        import signal
        import time

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        import contextlib

        with contextlib.suppress(BaseException):  # its stdin's end, a broken pipe: it stays all the same
            asyncio.run(serve_stdio(build("faults", options.version)))
        while True:
            time.sleep(3600)
    server = build(options.kind, options.version)
    _WIRE.append(os.dup(1))
    if options.http:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=options.http, log_level="warning")
    else:
        asyncio.run(serve_stdio(server))


if __name__ == "__main__":
    main()
