"""Approvals of MCP tools: the role's policies by name or pattern, the server's hints adding approvals and never
removing one, decisions recorded and told again on replay with the server absent (examples/mcp_server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Deny, Edit, MCPServer, Role, Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import InputError
from agl_notebook.events import ApprovalDecided, ApprovalRequested, Event
from agl_notebook.mcp import _sessions
from agl_notebook.mcp.listing import OfferedTool
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.replay.stores import JsonFileStore, MemoryStore
from agl_notebook.transcript import ToolResultBlock

from .conftest import REPORT, Answer, example_server, gone, processes

CALLS = [
    ScriptedCall("units_convert", {"amount": 5, "source": "km", "target": "mi"}),
    ScriptedCall("units_add_note", {"title": "trip", "text": "5 km"}),
]


def script() -> ScriptedModel:
    return ScriptedModel(
        [ScriptedTurn(calls=[call]) for call in CALLS] + [ScriptedTurn(calls=[ScriptedCall("report", {"text": "ok"})])]
    )


def units_role(server: MCPServer, **approvals: Any) -> Role[Answer]:
    return Role("mcp-user", "Use the tools, then report.", tools=[REPORT], mcp=[server], **approvals)


def asked(events: list[Event]) -> list[str]:
    return [e.name for e in events if isinstance(e, ApprovalRequested)]


def decided(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.name, e.decision, e.by) for e in events if isinstance(e, ApprovalDecided)]


def results(record: StepRecord) -> list[tuple[str, bool]]:
    return [(b.content, b.is_error) for m in record.transcript for b in m.content if isinstance(b, ToolResultBlock)]


async def step(server: MCPServer, approvals: object, **policies: Any) -> tuple[StepRecord, list[Event]]:
    """One live step calling convert then add_note, decided by ``approvals``; its record (through JSON) and events."""
    store, events = MemoryStore(), list[Event]()
    run = Run(model=script(), store=store, mode="auto", approvals=approvals, on_event=events.append)  # type: ignore[arg-type]
    await run.step(units_role(server, **policies), "convert 5 km and note it")
    (record,) = store.records()
    return record_from_json(json.loads(json.dumps(record.to_json()))), events


async def test_a_pattern_policy_gates_the_matching_tools_and_a_replay_tells_it_with_the_server_absent(
    tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = example_server(tag, prefix="units_")
    record, events = await step(server, [Deny("No notes today.")], mcp_approvals={"units_add_*": "ask"})
    assert asked(events) == ["units_add_note"]  # convert matches no pattern: it runs
    assert decided(events) == [("units_add_note", "deny", "person")]
    (convert, add_note) = results(record)[:2]  # then the report's
    assert json.loads(convert[0]) == {"value": 3.1069, "unit": "mi"} and not convert[1]
    assert add_note == ("The person denied this call: No notes today.", True)
    assert [(d.tool, d.decision, d.message) for d in record.decisions] == [
        ("units_add_note", "deny", "No notes today.")
    ]
    await _sessions.close_loop()
    assert await gone(tag) == []

    # Replayed with the server's command missing: nobody is asked, no session opens, the decision is told again.
    opened: list[str] = []
    monkeypatch.setattr(_sessions.Connection, "__init__", lambda self, *a: opened.append("x"))
    absent = MCPServer.stdio("units", "/nonexistent/agl-notebook-example", prefix="units_")
    again: list[Event] = []
    replay = Run(model=script(), store=MemoryStore([record]), mode="replay", on_event=again.append)
    result = await replay.step(units_role(absent, mcp_approvals={"units_add_*": "ask"}), "convert 5 km and note it")
    assert result.text == "ok"
    assert asked(again) == ["units_add_note"] and decided(again) == [("units_add_note", "deny", "person")]
    assert opened == [] and processes(tag) == []


async def test_hints_add_approvals_and_never_remove_one(tag: str) -> None:
    server = example_server(tag, prefix="units_")
    # convert says it is read-only; a stated "ask" holds all the same.
    _, events = await step(server, "approve", mcp_approvals={"units_*": "ask"})
    assert asked(events) == ["units_convert", "units_add_note"]

    # ask_destructive: add_note has no hints (the protocol's default is destructive), convert is read-only.
    record, events = await step(
        server, [Edit({"title": "trip", "text": "five km"})], ask_destructive=True, mcp_approvals={}
    )
    assert asked(events) == ["units_add_note"]
    (decision,) = record.decisions
    assert (decision.decision, decision.arguments) == ("edit", {"title": "trip", "text": "five km"})
    assert results(record)[1][0].endswith("Kept the note 'trip'.") and "changed: text" in results(record)[1][0]

    # A policy approving add_note still leaves it to a person when it may destroy; the exact name beats a pattern.
    seen: list[str] = []

    def lenient(payload: Any, request: Any) -> str:
        seen.append(request.tool)
        return "approve"

    _, events = await step(
        server,
        ["approve"],
        ask_destructive=True,
        mcp_approvals={"units_add_note": lenient, "units_*": lambda p, r: "deny"},
    )
    assert seen == ["units_add_note"]
    assert asked(events) == ["units_add_note"]
    assert decided(events) == [("units_convert", "deny", "policy"), ("units_add_note", "approve", "person")]

    # A policy's denial of a destructive tool stands without asking anyone.
    _, events = await step(server, [], ask_destructive=True, mcp_approvals={"units_add_note": lambda p, r: "deny"})
    assert asked(events) == [] and decided(events) == [("units_add_note", "deny", "policy")]
    await _sessions.close_loop()
    assert await gone(tag) == []


def offered(annotations: dict[str, Any] | None) -> OfferedTool:
    return OfferedTool("t", "t", "", {"type": "object"}, None, annotations)


@pytest.mark.parametrize(
    ("annotations", "destructive"),
    [
        (None, True),
        ({}, True),
        ({"readOnlyHint": True}, False),
        ({"readOnlyHint": True, "destructiveHint": True}, False),  # destructiveHint means nothing when read-only
        ({"readOnlyHint": False}, True),
        ({"destructiveHint": False}, False),
        ({"destructiveHint": True}, True),
        ({"readOnlyHint": "yes"}, True),  # an untrusted hint that is not true is no hint
        ({"destructiveHint": 0}, True),
    ],
)
def test_which_tools_count_destructive(annotations: dict[str, Any] | None, destructive: bool) -> None:
    assert offered(annotations).destructive is destructive


def test_a_role_refuses_mcp_approvals_it_cannot_use() -> None:
    server = MCPServer.stdio("units", "/nonexistent/server")
    with pytest.raises(InputError, match="has no MCP servers"):
        Role("r", "Do it.", tools=[REPORT], mcp_approvals={"x_*": "ask"})
    with pytest.raises(InputError, match=r"mcp_approvals\['x_\*'\]"):
        Role("r", "Do it.", tools=[REPORT], mcp=[server], mcp_approvals={"x_*": "sometimes"})  # type: ignore[dict-item]
    with pytest.raises(InputError, match="maps tool names or patterns"):
        Role("r", "Do it.", tools=[REPORT], mcp=[server], mcp_approvals=["x_*"])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="ask_destructive takes True or False"):
        Role("r", "Do it.", tools=[REPORT], mcp=[server], ask_destructive="yes")  # type: ignore[arg-type]


async def test_a_restart_with_an_mcp_approval_pending_asks_only_that_one_again(tag: str, tmp_path: Path) -> None:
    from tests.run.test_resume import Person, saved, wait_then_crash

    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    server = example_server(tag, prefix="units_")
    gated = units_role(server, mcp_approvals={"units_*": "ask"})
    first = Person(approve=1)  # approves convert, then walks away from add_note
    await wait_then_crash(Run(model=script(), terminal=first, store=JsonFileStore(file)), gated, first, file, crashed)
    assert first.asked == ["approve units_convert", "approve units_add_note"]
    (partial,) = saved(crashed)
    assert partial.partial is not None and partial.partial.tool == "units_add_note"

    again = Person(approve=1)
    result = await Run(model=script(), terminal=again, store=JsonFileStore(crashed)).step(gated, "Go")
    assert result.text == "ok"
    assert again.asked == ["approve units_add_note"], "the finished call's decision is told, not asked again"
    (record,) = saved(crashed)
    assert record.partial is None
    assert [(d.tool, d.decision) for d in record.decisions] == [
        ("units_convert", "approve"),
        ("units_add_note", "approve"),
    ]
    assert results(record)[1] == ("Kept the note 'trip'.", False)
    await _sessions.close_loop()
    assert await gone(tag) == []
