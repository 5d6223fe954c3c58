"""Bad input from MCP servers: each gets a limit and a clear agl_notebook error naming the server and the tool."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agl_notebook import Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import MCPServerError
from agl_notebook.mcp import listing
from agl_notebook.mcp.servers import MCPServer
from agl_notebook.replay.stores import MemoryStore
from tests.support.reliability_report import ReliabilityNotes

from .conftest import fault_server, gone, role, wait_until_gone

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

REPORT = ScriptedTurn(calls=[ScriptedCall("report", {"text": "done"})])
NOTHING = ScriptedModel([REPORT])


async def fails(*servers: MCPServer) -> MCPServerError:
    store = MemoryStore()
    with pytest.raises(MCPServerError) as caught:
        await Run(model=NOTHING, store=store, mode="auto").step(role(*servers), "go")
    assert not store.records()
    return caught.value


@pytest.mark.parametrize(
    ("kind", "message", "tool"),
    [
        ("huge", "lists 5000 tools, more than the 256 agl_notebook accepts from one server", None),
        ("refcycle", "references loop without consuming input (#/$defs/a -> #/$defs/b -> #/$defs/a)", "loops"),
        ("remote_ref", "$ref 'http://127.0.0.1:9/schema.json' outside the schema", "remote"),
        ("badname", "the name 'has space' cannot be offered to the model", "has space"),
        ("bigschema", "its input schema takes", "big"),
    ],
)
async def test_a_listing_that_cannot_be_offered_fails_the_step_naming_server_and_tool(
    kind: str, message: str, tool: str | None, tag: str, reliability: ReliabilityNotes
) -> None:
    error = await fails(fault_server(tag, kind, name="bad"))
    assert error.server == "bad"
    assert error.tool == tool
    assert message in str(error)
    assert str(error).startswith("The MCP server 'bad'")
    assert await gone(tag) == []  # the session that listed it was closed
    reliability.note(
        "Model faults",
        f"an MCP server listing {kind}",
        "the step fails with MCPServerError naming the server and the tool; nothing recorded; no process left",
        records_lost=0,
    )


async def test_tools_colliding_after_the_prefix_or_with_the_role_own(tag: str, reliability: ReliabilityNotes) -> None:
    one, two = fault_server(tag, name="one"), fault_server(tag, name="two")
    error = await fails(one, two)
    assert "has the name of one of the MCP server 'one''s tools; give the server a prefix" in str(error)
    # The same prefix on both collides too, named as offered; distinct prefixes do not.
    error = await fails(fault_server(tag, name="one", prefix="a_"), fault_server(tag, name="two", prefix="a_"))
    assert "the tool 'a_ask' of the MCP server 'two'" in str(error)  # the first name of both, sorted
    store = MemoryStore()
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("b_echo", {"text": "x"})]), REPORT])
    both = role(fault_server(tag, name="one", prefix="a_"), fault_server(tag, name="two", prefix="b_"))
    await Run(model=model, store=store).step(both, "go")
    assert len(store.records()) == 1
    reliability.note(
        "Model faults",
        "two MCP servers offering the same tool names",
        "the step fails naming the tool and asking for a prefix",
        records_lost=0,
    )


def test_the_role_own_tool_names_are_taken() -> None:
    tools = listing.ServerTools("srv", (listing.OfferedTool("report", "report", "x", {"type": "object"}),))
    with pytest.raises(MCPServerError, match="has the name of one of the role's own tools"):
        listing.check_unique([tools], ["report"], "r")


async def test_a_server_answering_garbage_on_stdio(tag: str, reliability: ReliabilityNotes) -> None:
    server = fault_server(tag, "garbage", name="noise", start_timeout=20)
    error = await fails(server)
    assert error.server == "noise"
    assert "The MCP server 'noise'" in str(error)
    assert "not MCP JSON-RPC" in str(error) or "ended" in str(error)
    assert await gone(tag) == []
    reliability.note(
        "Model faults",
        "an MCP server writing garbage to stdout",
        "the step fails with MCPServerError naming the server; nothing recorded; no process left",
        records_lost=0,
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}, "points nowhere"),
        ({"type": "string"}, "must describe an object"),
        ({"type": "object", "properties": {"x": {"type": 5}}}, "not a valid JSON Schema"),
        ({"$ref": "#"}, "loop without consuming input (# -> #)"),
        ({"type": "object", "anyOf": [{"$ref": "#/anyOf/0"}]}, "loop without consuming input"),
    ],
)
def test_schemas_refused_before_anything_walks_them(schema: dict[str, object], message: str) -> None:
    server = MCPServer.stdio("s", "x")
    with pytest.raises(MCPServerError, match="tool 't'") as caught:
        listing.offered_tools(server, [{"name": "t", "description": "d", "inputSchema": schema}])
    assert message in str(caught.value)


def test_a_deep_schema_is_refused_without_recursion() -> None:
    deep: dict[str, object] = {"type": "object"}
    node = deep
    for _ in range(100_000):
        child: dict[str, object] = {"type": "object"}
        node["properties"] = {"x": child}
        node = child
    with pytest.raises(MCPServerError, match="nests deeper than 48 levels"):
        listing.offered_tools(MCPServer.stdio("s", "x"), [{"name": "t", "description": "d", "inputSchema": deep}])


def test_a_recursive_schema_that_consumes_input_is_accepted() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
    }
    (offered,) = listing.offered_tools(
        MCPServer.stdio("s", "x"), [{"name": "t", "description": "d", "inputSchema": tree}]
    ).tools
    assert offered.input_schema is tree


# A server writing one endless line, measured in a worker process capped in memory: before the bound, the SDK kept the
# unended line whole (and copied it at every chunk), so 100 MB cost several times that and ended in a MemoryError.
FLOOD_WORKER = """
import asyncio, json, resource, sys, time
from agl_notebook import Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.mcp import _sessions
from agl_notebook.replay.stores import MemoryStore
from tests.mcp.conftest import fault_server, role

def kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

async def main(tag, cap_mb):
    store = MemoryStore()
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("flood", {})]),
                           ScriptedTurn(calls=[ScriptedCall("report", {"text": "done"})])])
    run = Run(model=model, store=store, mode="refresh")
    server = fault_server(tag, "flood", name="flooder")
    await _sessions.connect(server)  # started and listed before the measure
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    start = kb("VmRSS")
    cap = kb("VmSize") * 1024 + cap_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    began, error = time.monotonic(), None
    try:
        await run.step(role(server), "go")
    except BaseException as e:
        error = e
    seconds = time.monotonic() - began
    growth = (max(kb("VmHWM"), start) - start) / 1024
    await _sessions.close_loop()
    print(json.dumps({"error": type(error).__name__, "message": str(error), "server": getattr(error, "server", None),
                      "tool": getattr(error, "tool", None), "growth_mb": round(growth, 1),
                      "seconds": round(seconds, 2), "records": len(store.records())}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def test_a_line_without_end_is_cut_at_the_bound_with_memory_bounded(tag: str, reliability: ReliabilityNotes) -> None:
    import json
    import subprocess
    import sys

    from agl_notebook.mcp._sessions import MAX_LINE_BYTES
    from tests.support.paths import ROOT

    cap_mb = 256  # the 100 MB line, kept whole and copied as the SDK reads it, would need several times this
    done = subprocess.run(
        [sys.executable, "-c", FLOOD_WORKER, tag, str(cap_mb)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["error"] == "MCPServerError", found
    assert (found["server"], found["tool"], found["records"]) == ("flooder", "flood", 0), found
    assert found["message"].startswith(
        "The MCP server 'flooder' (calling its tool 'flood') wrote a line of over 16 MiB on stdout without ending it"
    ), found
    assert found["growth_mb"] < 4 * MAX_LINE_BYTES / 2**20, found  # the SDK's string of the line and its copies
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # nothing logged by the SDK's reader
    assert wait_until_gone(tag) == []
    reliability.note(
        "Model faults",
        "an MCP server writing a 100 MB line with no newline on stdout",
        f"cut at {MAX_LINE_BYTES // 2**20} MiB: the step fails with MCPServerError naming the server and the tool; "
        f"{found['growth_mb']} MB grown in a memory-capped worker; nothing recorded; no process left",
        records_lost=0,
    )


async def test_the_line_bound_counts_the_bytes_since_the_last_newline() -> None:
    """The counter the real test above goes through: long lines that end pass; one a byte over the bound ends."""
    import anyio

    from agl_notebook.mcp._sessions import MAX_LINE_BYTES, _BoundedLines

    half = MAX_LINE_BYTES // 2
    chunks = [b"a" * half + b"\n" + b"b" * half, b"c" * (half - 1) + b"\n", b"d" * MAX_LINE_BYTES, b"\n"]

    class Chunks:
        async def receive(self, max_bytes: int = 65536) -> bytes:
            return chunks.pop(0)

    told: list[str] = []
    stream = _BoundedLines(Chunks(), lambda: told.append("too long"))
    for _ in range(4):  # a whole line of exactly MAX_LINE_BYTES (the "d"s) is allowed
        await stream.receive()
    assert told == []
    chunks[:] = [b"f" * MAX_LINE_BYTES, b"g"]
    await stream.receive()
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()  # the "f"s, then "g": a byte over
    assert told == ["too long"]
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()  # and it stays ended


async def test_garbage_holding_a_secret_reaches_no_log_line_or_error(
    tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs the line it could not parse, with a traceback whose text cuts it: no piece of a secret is said."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    (tmp_path / "planted").write_text(secret, encoding="utf-8")
    server = fault_server(tag, "garbage", name="noise", env={"AGL_TEST_PLANTED_FILE": str(tmp_path / "planted")})
    with caplog.at_level(logging.DEBUG):
        error = await fails(server)
    assert caplog.records, "the SDK logged the line it could not parse"
    said = [str(error), caplog.text, *(r.getMessage() for r in caplog.records)]
    assert not leaked(said, secret), leaked(said, secret)
