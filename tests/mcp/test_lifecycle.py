"""The life of an MCP session: shared, bounded, restarted after a crash or a hang, closed with its event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import MCPServerError
from agl_notebook.mcp import _sessions
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.transcript import ToolResultBlock

from .conftest import fault_server, gone, processes, role, wait_until_gone


def script(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    turns = [ScriptedTurn(calls=[ScriptedCall(name, args)]) for name, args in calls]
    return ScriptedModel([*turns, ScriptedTurn(calls=[ScriptedCall("report", {"text": "done"})])])


def pid_in(store: MemoryStore) -> set[int]:
    return {
        int(b.content)
        for r in store.records()
        for m in r.transcript
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.content.isdigit()
    }


async def test_a_crash_mid_call_fails_the_step_with_the_stderr_tail_and_the_next_use_starts_it_again(tag: str) -> None:
    server = fault_server(tag)
    store = MemoryStore()
    run = Run(model=script(("pid", {}), ("crash", {})), store=store, mode="auto")
    with pytest.raises(MCPServerError) as caught:
        await run.step(role(server), "crash it")
    error = caught.value
    assert (error.server, error.tool) == ("faults", "crash")
    assert "The MCP server 'faults' (calling its tool 'crash')" in str(error)
    assert "the server is about to crash on purpose" in str(error)  # the tail of its stderr
    assert "agl_notebook-mcp-pid" not in error.stderr
    assert not store.records()  # nothing recorded
    assert await gone(tag) == []
    # The next use starts a new server.
    await Run(model=script(("pid", {})), store=store, mode="auto").step(role(server), "again")
    assert len(pid_in(store)) == 1
    assert processes(tag) == list(pid_in(store))


async def test_the_stderr_tail_of_an_error_is_scrubbed_of_the_server_environment(tag: str) -> None:
    planted = "planted-" + "7" * 24  # built at run time: not a real secret
    server = fault_server(tag, env={"AGL_TEST_PLANTED": planted})
    with pytest.raises(MCPServerError) as caught:
        await Run(model=script(("crash", {})), store=MemoryStore(), mode="auto").step(role(server), "crash it")
    assert "my token is [REDACTED]" in str(caught.value)
    assert planted not in str(caught.value)
    assert planted not in caught.value.stderr
    assert planted not in repr(server)


async def test_a_hang_past_the_call_timeout_fails_the_step_and_stops_the_server(tag: str) -> None:
    server = fault_server(tag, call_timeout=1.0)
    store = MemoryStore()
    with pytest.raises(MCPServerError, match=r"did not answer within 1 s \(call_timeout\)") as caught:
        await Run(model=script(("hang", {})), store=store, mode="auto").step(role(server), "hang")
    assert caught.value.tool == "hang"
    assert not store.records()
    assert await gone(tag) == []  # the hung server was stopped, not left behind
    await Run(model=script(("echo", {"text": "back"})), store=store, mode="auto").step(role(server), "again")
    assert len(store.records()) == 1


async def test_a_fifty_item_map_shares_one_server_with_bounded_concurrency(tag: str) -> None:
    server = fault_server(tag, concurrency=3)
    store = MemoryStore()
    most = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal most
        while not done.is_set():
            for connection in _sessions._connections.get(asyncio.get_running_loop(), {}).values():
                most = max(most, len(connection.in_flight))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    run = Run(model=script(("slow", {"text": "x"}), ("pid", {})), store=store, mode="auto")
    results = await run.map(role(server), [f"item {i}" for i in range(50)], concurrency=50)
    done.set()
    await watcher
    assert len(list(results)) == 50
    assert len(pid_in(store)) == 1  # every item's call reached the one server
    assert len(processes(tag)) == 1
    assert most == 3  # never more calls at once than the session's concurrency


def test_step_sync_runs_its_own_session_on_its_own_loop_and_closes_it(tag: str) -> None:
    server = fault_server(tag)
    store = MemoryStore()
    run = Run(model=script(("pid", {})), store=store, mode="auto")
    run.step_sync(role(server), "sync")
    (pid,) = pid_in(store)
    assert wait_until_gone(tag, 10) == []
    # Closed by its session before the step's loop closed (on Linux the parent-death signal would also end it when
    # the worker thread ends; the session forgets a server only once it has stopped it).
    assert pid not in _sessions._started


async def test_step_sync_beside_a_session_on_the_running_loop(tag: str) -> None:
    server = fault_server(tag)
    store = MemoryStore()
    await Run(model=script(("pid", {})), store=store, mode="auto").step(role(server), "async")
    (outer,) = pid_in(store)
    sync_store = MemoryStore()
    run = Run(model=script(("pid", {})), store=sync_store, mode="auto")
    await asyncio.to_thread(run.step_sync, role(server), "sync")
    (inner,) = pid_in(sync_store)
    assert inner != outer  # another loop, another session
    assert processes(tag) == [outer]  # the step_sync's server is gone; this loop's stays open
    await _sessions.close_loop()
    assert await gone(tag) == []


@pytest.mark.parametrize("pad", [0, 1990, 1992, 1994])
async def test_the_stderr_tail_is_scrubbed_of_the_kernel_s_secrets_whole_or_at_the_tail_s_start(
    tag: str, pad: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret the server came to know (not one of its ``env``): said whole, or where the tail's window begins
    (after it, ``pad`` four-byte characters: the window is read in bytes, shown in characters)."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)  # the kernel knows it as a secret
    (tmp_path / "planted").write_text(secret, encoding="utf-8")
    server = fault_server(tag, env={"AGL_TEST_PLANTED_FILE": str(tmp_path / "planted"), "AGL_TEST_PAD": str(pad)})
    with pytest.raises(MCPServerError) as caught:
        await Run(model=script(("crash", {})), store=MemoryStore(), mode="auto").step(role(server), "crash it")
    said = [str(caught.value), caught.value.stderr, repr(caught.value)]
    assert not leaked(said, secret), leaked(said, secret)
    if not pad:
        assert "I know [REDACTED]" in str(caught.value)


async def test_an_error_s_one_line_is_scrubbed_before_it_is_cut(tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception that ended the session is said in one line cut at 300 characters: a secret across the cut goes."""
    from agl_notebook import MCPServer
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret().replace("/", "")
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    for pad in range(222, 244, 3):  # the path starts 51 characters into the line: the cut falls in the secret
        server = MCPServer.stdio("faults", "python3", ["-c", "pass", tag], cwd=f"/nonexistent/{'x' * pad}{secret}")
        with pytest.raises(MCPServerError) as caught:
            await Run(model=script(), store=MemoryStore(), mode="auto").step(role(server), "go")
        assert "No such file or directory" in str(caught.value)
        assert not leaked([str(caught.value)], secret), (pad, leaked([str(caught.value)], secret))
