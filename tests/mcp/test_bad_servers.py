"""Bad input from MCP servers: each gets a limit and a clear agl_notebook error naming the server and the tool."""

from __future__ import annotations

import pytest

from agl_notebook import Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import MCPServerError
from agl_notebook.mcp import listing
from agl_notebook.mcp.servers import MCPServer
from agl_notebook.replay.stores import MemoryStore
from tests.support.reliability_report import ReliabilityNotes

from .conftest import fault_server, gone, role

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
