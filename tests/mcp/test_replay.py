"""Replay of steps that called MCP tools: from the record's snapshot, with no server started or reached."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from agl_notebook import MCPServer, Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import ReplayMissError
from agl_notebook.mcp import _sessions
from agl_notebook.replay.explain import recent_misses
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.replay.stores import MemoryStore

from .conftest import fault_server, gone, processes, role


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("echo", {"text": 7})]),  # rejected by the schema, corrected next
            ScriptedTurn(calls=[ScriptedCall("echo", {"text": "seven"})]),
            ScriptedTurn(calls=[ScriptedCall("report", {"text": "done"})]),
        ]
    )


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the servers a session was opened with (started or connected to) during the test."""
    opened: list[str] = []
    original = _sessions.Connection.__init__

    def counting(self: _sessions.Connection, server: MCPServer, loop: object) -> None:
        opened.append(server.name)
        original(self, server, loop)  # type: ignore[arg-type]

    monkeypatch.setattr(_sessions.Connection, "__init__", counting)
    monkeypatch.setattr(_sessions, "_probe_failures", {})  # what earlier tests found down
    return opened


async def record_one(tag: str) -> StepRecord:
    store = MemoryStore()
    await Run(model=script(), store=store, mode="auto").step(role(fault_server(tag)), "echo seven")
    await _sessions.close_loop()
    assert await gone(tag) == []
    (record,) = store.records()
    # Through JSON, as a notebook keeps it.
    return record_from_json(json.loads(json.dumps(record.to_json())))


def absent(name: str = "faults") -> MCPServer:
    return MCPServer.stdio(name, "/nonexistent/agl-notebook-test-server", ["--secret-arg"], env={"TOKEN": "x" * 12})


@pytest.mark.parametrize("mode", ["replay", "auto"])
async def test_a_recorded_step_replays_with_the_server_absent(mode: str, tag: str, started: list[str]) -> None:
    record = await record_one(tag)
    started.clear()
    store = MemoryStore([record])
    result = await Run(model=script(), store=store, mode=mode).step(role(absent()), "echo seven")  # type: ignore[arg-type]
    assert result.text == "done"
    # Mode replay never starts or reaches the server; mode auto tries (the command is missing) and replays.
    assert started == ([] if mode == "replay" else ["faults"])
    assert processes(tag) == []


async def test_a_map_in_mode_auto_tries_a_server_that_is_down_once(tag: str, started: list[str]) -> None:
    record = await record_one(tag)
    store = MemoryStore([record])
    started.clear()
    first = await Run(model=script(), store=store, mode="auto").step(role(absent()), "echo seven")
    second = await Run(model=script(), store=store, mode="auto").step(role(absent()), "echo seven")
    assert first == second
    assert started == ["faults"]  # the second step did not wait for it again


async def test_a_replay_reaches_no_http_server(tag: str, started: list[str]) -> None:
    record = await record_one(tag)
    started.clear()
    down = MCPServer.http("faults", "http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer not-a-real-token"})
    await Run(model=script(), store=MemoryStore([record]), mode="replay").step(role(down), "echo seven")
    assert started == []


async def test_the_snapshot_keeps_sorted_tools_with_digests_and_nothing_of_how_the_server_is_reached(
    tag: str,
) -> None:
    record = await record_one(tag)
    assert record.engine is not None
    snapshot: Any = record.engine["mcp"]["faults"]  # type: ignore[index,call-overload]
    names = [t["name"] for t in snapshot["tools"]]
    assert names == sorted(names)
    assert all(len(t["digest"]) == 16 for t in snapshot["tools"])
    assert {f"mcp:{n}" for n in names} == {k for k in record.parts if k.startswith("mcp:")}
    text = str(record.to_json())
    assert tag not in text and sys.executable not in text and "mcp_servers.py" not in text


async def test_a_changed_tool_makes_the_step_miss_and_the_explanation_names_it(tag: str) -> None:
    record = await record_one(tag)
    store = MemoryStore([record])
    changed = fault_server(tag, version=2)  # echo's description changed
    await Run(model=script(), store=store, mode="auto").step(role(changed), "echo seven")
    explained = recent_misses()[-1].explain()
    assert "differs in: mcp:echo." in explained
    (rerecorded,) = store.records()  # recorded again under the same id, with the new tool
    assert rerecorded.parts["mcp:echo"] != record.parts["mcp:echo"]
    # Unchanged, the step replays in mode auto (the server is listed, not called).
    again = MemoryStore([rerecorded])
    model = script()
    await Run(model=model, store=again, mode="auto").step(role(changed), "echo seven")
    assert model.calls == 0


async def test_mode_replay_with_a_different_server_choice_misses_naming_the_mcp_part(tag: str) -> None:
    record = await record_one(tag)
    renamed = MCPServer.stdio("faults", "/nonexistent", prefix="f_")
    with pytest.raises(ReplayMissError, match="differs in: mcp"):
        await Run(model=script(), store=MemoryStore([record]), mode="replay").step(role(renamed), "echo seven")
