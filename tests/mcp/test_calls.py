"""MCP tools in a step, against real servers over stdio and streamable HTTP: listing, calls and their results."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import MCPServer, Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.errors import InputError, MCPServerError
from agl_notebook.mcp.results import MAX_RESULT_CHARS
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.transcript import ToolResultBlock, block_to_json
from tests.support.mcp_servers import PNG_1PX

from .conftest import EXAMPLE_SERVER, FAULT_SERVER, HttpServer, example_server, fault_server, gone, role, start_http


def script(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    turns = [ScriptedTurn(calls=[ScriptedCall(name, args)]) for name, args in calls]
    return ScriptedModel([*turns, ScriptedTurn(calls=[ScriptedCall("report", {"text": "done"})])])


def results(store: MemoryStore) -> list[ToolResultBlock]:
    (record,) = store.records()
    return [b for m in record.transcript for b in m.content if isinstance(b, ToolResultBlock)][:-1]


class Offered:
    """Captures the tools of each request a scripted model is sent."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model, self.tools = model, []  # type: ignore[var-annotated]

    def backend_id(self, model: str) -> str:
        return self.model.backend_id(model)

    def stream(self, request):  # type: ignore[no-untyped-def]
        self.tools.append(request.tools)
        return self.model.stream(request)


async def run_step(server: MCPServer, model: ScriptedModel, store: MemoryStore | None = None) -> MemoryStore:
    store = store if store is not None else MemoryStore()
    await Run(model=model, store=store, mode="auto").step(role(server), "go")
    return store


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_and_an_argument_the_agent_corrects_after_the_schema_says_why(
    transport: str, tag: str, http_example: HttpServer
) -> None:
    server = example_server(tag) if transport == "stdio" else MCPServer.http("units", http_example.url)
    model = script(
        ("convert", {"amount": "three", "source": "km", "target": "mi"}),
        ("convert", {"amount": 3, "source": "km", "target": "mi"}),
    )
    store = await run_step(server, model)
    rejected, answered = results(store)
    assert rejected.is_error
    assert "amount: 'three' is not of type 'number'" in rejected.content
    assert "Fix these and call `convert` again." in rejected.content
    assert not answered.is_error
    assert '"value": 1.8641' in answered.content


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_listing_is_offered_with_names_descriptions_and_schemas(
    transport: str, tag: str, http_example: HttpServer
) -> None:
    options = {"prefix": "u_", "exclude": ["add_note", "clear_notes"]}
    server = (
        example_server(tag, **options) if transport == "stdio" else MCPServer.http("units", http_example.url, **options)  # type: ignore[arg-type]
    )
    model = Offered(script(("u_read_note", {"title": "nothing"})))
    store = MemoryStore()
    await Run(model=model, store=store, mode="auto").step(role(server), "go")
    offered = {t.name: t for t in model.tools[0]}
    assert sorted(offered) == ["report", "u_convert", "u_read_note"]
    assert offered["u_convert"].description.startswith("Convert an amount")
    assert offered["u_convert"].input_schema["required"] == ["amount", "source", "target"]
    (not_found,) = results(store)
    assert not_found.is_error  # an isError result from the server's own ToolError
    assert "no note is titled 'nothing'" in not_found.content
    (record,) = store.records()
    assert {k for k in record.parts if k.startswith("mcp")} == {"mcp", "mcp:u_convert", "mcp:u_read_note"}


async def test_include_offers_only_the_tools_named(tag: str) -> None:
    model = Offered(script(("echo", {"text": "hi"})))
    await Run(model=model, store=MemoryStore()).step(role(fault_server(tag, include=["echo"])), "go")
    assert sorted(t.name for t in model.tools[0]) == ["echo", "report"]


@pytest.mark.parametrize(("include", "said"), [(["ech"], "'ech'"), (["p_echo", "pid"], "'p_echo'")])
async def test_include_naming_a_tool_the_server_does_not_list_fails_naming_it(
    tag: str, include: list[str], said: str
) -> None:
    """A typo (or a name given with the prefix) would otherwise offer nothing of the server, and say nothing."""
    store = MemoryStore()
    with pytest.raises(MCPServerError, match=f"include names {said}, which the server does not list") as caught:
        await Run(model=script(), store=store).step(role(fault_server(tag, include=include, prefix="p_")), "go")
    assert "before the prefix 'p_'" in str(caught.value) and "echo" in str(caught.value)
    assert not store.records()


async def test_exclude_naming_a_tool_the_server_does_not_list_fails_naming_it(tag: str) -> None:
    """exclude=["ech"] (a typo for "echo") would offer the very tool the person meant to keep from the agent."""
    store = MemoryStore()
    with pytest.raises(MCPServerError, match="exclude names 'ech', which the server does not list") as caught:
        await Run(model=script(), store=store).step(role(fault_server(tag, exclude=["ech"])), "go")
    assert "echo" in str(caught.value) and not store.records()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_is_error_output_schema_image_and_audio_results(
    transport: str, tag: str, http_faults: HttpServer
) -> None:
    server = fault_server(tag) if transport == "stdio" else MCPServer.http("faults", http_faults.url)
    model = script(("fails", {}), ("bad_output", {}), ("image", {}), ("audio", {}), ("echo", {"text": "still here"}))
    fails, bad_output, image, audio, echo = results(await run_step(server, model))
    assert (fails.content, fails.is_error) == ("the thing failed", True)
    assert bad_output.is_error
    assert bad_output.content.startswith("The result of `bad_output` does not fit the tool's own output schema")
    assert "RuntimeError" not in bad_output.content
    assert not image.is_error
    # The image is an image inside the tool_result (issue 28), its bytes as the server sent them.
    (sent,) = image.media
    assert image.content == "" and sent.media_type == "image/png"
    assert sent.data == base64.b64decode(PNG_1PX) and block_to_json(image)["content"] == [sent.block()]
    assert audio.is_error
    assert "returned audio (audio/wav), which agl_notebook cannot send to the model" in audio.content
    assert echo.content == "echo: still here"  # the session outlives every bad result


async def test_a_role_refuses_what_is_not_a_server() -> None:
    with pytest.raises(InputError, match="is not an MCP server"):
        role("not a server")  # type: ignore[arg-type]
    twice = MCPServer.stdio("same", sys.executable, [str(EXAMPLE_SERVER)])
    with pytest.raises(InputError, match="two MCP servers are named 'same'"):
        role(twice, twice)
    with pytest.raises(InputError, match="MCPServer name"):
        MCPServer.stdio("has space", sys.executable)
    with pytest.raises(InputError, match="http:// or https://"):
        MCPServer.http("web", "ftp://example.invalid")


async def test_a_server_that_cannot_start_fails_the_step_naming_it_and_recording_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = MCPServer.stdio("missing", str(tmp_path / "no-such-program"), start_timeout=20)
    store = MemoryStore()
    with pytest.raises(MCPServerError, match="The MCP server 'missing'") as caught:
        await run_step(server, script(("anything", {})), store)
    assert "no-such-program" in caught.value.stderr
    assert not store.records()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_that_says_its_tools_changed_is_listed_again_by_the_next_step(transport: str, tag: str) -> None:
    from agl_notebook.mcp import _sessions

    http = start_http(FAULT_SERVER, "changing") if transport == "http" else None
    server = fault_server(tag, "changing", name="changing") if http is None else MCPServer.http("changing", http.url)
    try:
        await grow_then_use(server)
    finally:
        await _sessions.close_loop()
        if http is not None:
            http.process.kill()
            http.process.wait()
    assert await gone(tag) == []


async def grow_then_use(server: MCPServer) -> None:
    import asyncio
    import time

    from agl_notebook.mcp import _sessions

    store = MemoryStore()
    await Run(model=script(("grow", {})), store=store, mode="refresh").step(role(server), "grow a tool")
    # Over stdio the notice comes before the call's result; over HTTP on the server's own stream, a moment after it.
    connection = _sessions.running(server)
    assert connection is not None
    deadline = time.monotonic() + 10
    while connection._listed_again and time.monotonic() < deadline:  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.01)
    # The same session (no restart): the server's notice makes the next step list the tools again.
    await Run(model=script(("grown_1", {})), store=store, mode="refresh").step(role(server), "use the new tool")
    assert _sessions.running(server) is connection, "the session was not started again"
    first, second = store.records()
    offered = [[t["name"] for t in r.engine["mcp"]["changing"]["tools"]] for r in (first, second)]  # type: ignore[index, union-attr, call-overload]
    assert offered == [["grow"], ["grow", "grown_1"]], offered
    said = [
        b.content for r in (first, second) for m in r.transcript for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert said[0] == "added grown_1" and said[2] == "grown_1 ran", said


@pytest.mark.parametrize("case", range(5))
async def test_a_result_holding_a_secret_of_the_kernel_or_of_the_server_env_is_scrubbed(
    tag: str, case: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Whole, escaped, across two text blocks, or across the cut at `MAX_RESULT_CHARS`: no piece is recorded."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    kernels, servers = planted_secret(), planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", kernels)
    (tmp_path / "planted").write_text(kernels, encoding="utf-8")
    # A credential given to the server, and a secret of the kernel's the server came to know.
    server = fault_server(tag, env={"AGL_TEST_PLANTED": servers, "AGL_TEST_PLANTED_FILE": str(tmp_path / "planted")})
    calls = [("pieces", {"case": case, "which": which, "limit": MAX_RESULT_CHARS}) for which in ("file", "env")]
    store = MemoryStore()
    await Run(model=script(*calls), store=store, mode="auto").step(role(server), "go")
    texts = [json.dumps(r.to_json()) for r in store.records()]
    assert "it is" in texts[0] or "after the cut" not in texts[0]
    assert not leaked(texts, kernels), leaked(texts, kernels)
    assert not leaked(texts, servers), leaked(texts, servers)


@pytest.mark.parametrize("option", ["call_timeout", "start_timeout", "concurrency"])
def test_a_bool_is_no_number_of_seconds_or_calls(option: str) -> None:
    with pytest.raises(InputError, match=f"{option} must be"):
        MCPServer.stdio("units", sys.executable, [str(EXAMPLE_SERVER)], **{option: True})  # type: ignore[arg-type]


def test_blocks_holding_the_joining_character_are_scrubbed_one_by_one_and_kept_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agl_notebook.mcp.results import _scrubbed
    from tests.notebook.test_saved_views import planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    half = len(secret) // 2
    parts = ["a\x00b", f"it is {secret[:half]}", f"{secret[half:]} and \x00 more", secret]
    assert _scrubbed(parts, ()) == ["a\x00b", "it is [REDACTED]", " and \x00 more", "[REDACTED]"]
    assert _scrubbed(["one", f"x{secret[:half]}", f"{secret[half:]}y"], ()) == ["one", "x[REDACTED]", "y"]
