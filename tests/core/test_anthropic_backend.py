"""The Anthropic backend, exercised through the real anthropic SDK over an in-process HTTP transport.

Every response is a real-format body (server-sent events for streams, the API's error JSON for failures), served by
``httpx2.MockTransport`` (the fake API of ``tests/support/anthropic_api.py``), so the SDK's own request building, SSE
decoding, event parsing and retries all run.
"""

from __future__ import annotations

import asyncio
import json
import typing
from typing import Any

import anthropic
import httpx2
import pytest

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.errors import (
    InputError,
    MissingCredentialsError,
    ModelOutputTruncatedError,
    UpstreamUnexpected,
)
from agl_notebook.models import resolve_model
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd, Usage
from agl_notebook.transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock, messages_to_json, user_text
from tests.support.anthropic_api import (
    KEY,
    MESSAGE_STOP,
    Responder,
    api,
    block_delta,
    block_start,
    block_stop,
    fail,
    message_delta,
    message_start,
    reply,
    sse,
    text,
    use,
)
from tests.support.steps import Answer, Query


def request(
    *messages: Message, tools: tuple[ToolSpec, ...] = (), system: str = "You are terse.", max_tokens: int = 1024
) -> ModelRequest:
    return ModelRequest(Claude.OPUS, system, messages or (user_text("Hello"),), tools, max_tokens)


async def collect(model: AnthropicModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [e async for e in model.stream(req or request())]


LOOK_UP = ToolSpec(
    "look_up", "Look a thing up.", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)

REPORT = ToolSpec("report", "Report what you found.", {"type": "object", "properties": {"summary": {"type": "string"}}})

# --- Streaming ------------------------------------------------------------------------------------------------------


async def test_text_deltas_stream_in_order() -> None:
    fake = api(reply(text("Hel", "lo, ", "wörld", "!")))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events[:-1] == [TextDelta("Hel"), TextDelta("lo, "), TextDelta("wörld"), TextDelta("!")]
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].stop_reason == "end_turn"


async def test_tool_input_split_across_deltas_is_assembled() -> None:
    pieces = ("", '{"te', 'xt": "re', 'tries", "n', '": [1, 2]}')
    fake = api(reply(text("Let me look."), use("toolu_1", "look_up", *pieces), stop_reason="tool_use"))
    events = await collect(AnthropicModel(client=fake.client()), request(tools=(LOOK_UP,)))
    assert events == [
        TextDelta("Let me look."),
        ToolCall("toolu_1", "look_up", {"text": "retries", "n": [1, 2]}),
        TurnEnd("tool_use", Usage(10, 5)),
    ]


async def test_tool_call_without_input_deltas_has_empty_args() -> None:
    fake = api(reply(use("toolu_1", "report"), stop_reason="tool_use"))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events[0] == ToolCall("toolu_1", "report", {})


async def test_several_tool_calls_in_one_reply() -> None:
    fake = api(
        reply(
            text("Two lookups."),
            use("toolu_a", "look_up", '{"text": ', '"a"}'),
            use("toolu_b", "look_up", '{"text"', ': "b"}'),
            use("toolu_c", "report", '{"summary": "c"}'),
            stop_reason="tool_use",
        )
    )
    events = await collect(AnthropicModel(client=fake.client()))
    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall("toolu_a", "look_up", {"text": "a"}),
        ToolCall("toolu_b", "look_up", {"text": "b"}),
        ToolCall("toolu_c", "report", {"summary": "c"}),
    ]


async def test_interleaved_tool_blocks_are_assembled_by_index() -> None:
    a, b = use("toolu_a", "look_up"), use("toolu_b", "look_up")
    events = [
        message_start(),
        block_start(0, a),
        block_start(1, b),
        block_delta(1, b, '{"text": '),
        block_delta(0, a, '{"text": '),
        block_delta(0, a, '"A"}'),
        block_delta(1, b, '"B"}'),
        block_stop(1),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    out = await collect(AnthropicModel(client=api(events).client()))
    assert out[:2] == [ToolCall("toolu_b", "look_up", {"text": "B"}), ToolCall("toolu_a", "look_up", {"text": "A"})]


@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence", "max_tokens", "pause_turn", "refusal"])
async def test_stop_reasons_pass_through(stop_reason: str) -> None:
    fake = api(reply(text("Some text"), stop_reason=stop_reason))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events == [TextDelta("Some text"), TurnEnd(stop_reason, Usage(10, 5))]  # type: ignore[arg-type]


async def test_tool_use_stop_reason_after_tool_call() -> None:
    fake = api(reply(use("toolu_1", "look_up", '{"text": "x"}'), stop_reason="tool_use"))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events[-1] == TurnEnd("tool_use", Usage(10, 5))


async def test_max_tokens_inside_open_tool_block_names_the_tool() -> None:
    fake = api(
        reply(
            text("Writing it up."),
            use("toolu_1", "report", '{"summary": "the fi', close=False),
            stop_reason="max_tokens",
        )
    )
    with pytest.raises(ModelOutputTruncatedError, match=r"max_tokens=1024.*'report'"):
        await collect(AnthropicModel(client=fake.client()))


async def test_max_tokens_with_incomplete_tool_json_at_block_stop_names_the_tool() -> None:
    fake = api(reply(use("toolu_1", "report", '{"summary": "the fi'), stop_reason="max_tokens"))
    with pytest.raises(ModelOutputTruncatedError, match="'report'"):
        await collect(AnthropicModel(client=fake.client()))


async def test_max_tokens_after_a_complete_tool_call_is_a_plain_stop() -> None:
    fake = api(reply(use("toolu_1", "look_up", '{"text": "x"}'), text("And then"), stop_reason="max_tokens"))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events == [
        ToolCall("toolu_1", "look_up", {"text": "x"}),
        TextDelta("And then"),
        TurnEnd("max_tokens", Usage(10, 5)),
    ]


async def test_invalid_tool_json_is_upstream_unexpected() -> None:
    fake = api(
        reply(use("toolu_1", "look_up", '{"text": "x",, }'), use("toolu_2", "look_up", "{}"), stop_reason="tool_use")
    )
    with pytest.raises(UpstreamUnexpected, match="'look_up' could not be read: its input is not valid JSON") as e:
        await collect(AnthropicModel(client=fake.client()))
    assert not isinstance(e.value, ModelOutputTruncatedError)


async def test_tool_input_that_is_not_an_object_is_upstream_unexpected() -> None:
    fake = api(reply(use("toolu_1", "look_up", "[1, 2]"), stop_reason="tool_use"))
    with pytest.raises(UpstreamUnexpected, match="not an object"):
        await collect(AnthropicModel(client=fake.client()))


async def test_stream_without_message_stop_is_upstream_unexpected() -> None:
    fake = api(reply(text("Hi"), message_stop=False))
    with pytest.raises(UpstreamUnexpected, match="message_stop"):
        await collect(AnthropicModel(client=fake.client()))


async def test_tool_block_never_closed_without_max_tokens_is_upstream_unexpected() -> None:
    fake = api(reply(use("toolu_1", "look_up", '{"text": "x"}', close=False), stop_reason="tool_use"))
    with pytest.raises(UpstreamUnexpected, match="'look_up' still open"):
        await collect(AnthropicModel(client=fake.client()))


async def test_error_event_mid_stream_raises_the_sdk_error() -> None:
    events = [
        *reply(text("Hi"))[:4],
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        await collect(AnthropicModel(client=api(events).client()))


async def test_usage_combines_message_start_and_message_delta() -> None:
    fake = api(reply(text("ok"), input_tokens=120, output_tokens=42, cache_creation=1000, cache_read=300))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events[-1] == TurnEnd(
        "end_turn",
        Usage(input_tokens=120, output_tokens=42, cache_creation_input_tokens=1000, cache_read_input_tokens=300),
    )


# --- The request ----------------------------------------------------------------------------------------------------


async def test_request_body_has_whole_history_system_and_tools_with_cache_marks() -> None:
    history = (
        user_text("Look up retries."),
        Message("assistant", (TextBlock("Looking."), ToolUseBlock("toolu_1", "look_up", {"text": "retries"}))),
        Message("user", (ToolResultBlock("toolu_1", "Nothing found.", is_error=True),)),
    )
    fake = api(reply(text("Done.")))
    await collect(AnthropicModel(client=fake.client()), request(*history, tools=(LOOK_UP, REPORT), max_tokens=777))
    (sent,) = fake.requests
    assert sent.method == "POST"
    assert sent.url.path == "/v1/messages"
    body = json.loads(sent.content)
    sent_before: list[object] = [*messages_to_json(history[:2])]  # the first two messages, as the backend sends them
    assert body == {
        "model": "claude-opus-5-5",
        "max_tokens": 777,
        "stream": True,
        "messages": [
            *sent_before,
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "Nothing found.",
                        "is_error": True,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {"name": "look_up", "description": "Look a thing up.", "input_schema": LOOK_UP.input_schema},
            {
                "name": "report",
                "description": "Report what you found.",
                "input_schema": REPORT.input_schema,
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }
    assert body["messages"][2]["content"][0]["is_error"] is True


async def test_empty_system_and_no_tools_are_left_out() -> None:
    fake = api(reply(text("Hi")))
    await collect(AnthropicModel(client=fake.client()), request(system=""))
    body = fake.bodies()[0]
    assert "system" not in body
    assert "tools" not in body


async def test_fixed_model_overrides_the_requests_and_names_the_backend() -> None:
    fake = api(reply(text("Hi")))
    model = AnthropicModel(client=fake.client(), model=Claude.HAIKU)
    await collect(model)
    assert fake.bodies()[0]["model"] == "claude-haiku-5-5"
    assert model.backend_id(Claude.OPUS) == "anthropic:claude-haiku-5-5"
    assert AnthropicModel().backend_id("claude-sonnet-5-5") == "anthropic:claude-sonnet-5-5"
    assert resolve_model(Claude.OPUS).backend_id(Claude.OPUS) == "anthropic:claude-opus-5-5"


async def test_no_model_id_at_all_is_an_input_error() -> None:
    req = ModelRequest("", "sys", (user_text("Hi"),), (), 100)
    with pytest.raises(InputError, match="no model id"):
        await collect(AnthropicModel(client=api().client()), req)


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(InputError):
        AnthropicModel(model="  ")
    with pytest.raises(InputError):
        AnthropicModel(max_retries=-1)
    with pytest.raises(TypeError):
        AnthropicModel(None)  # type: ignore[call-arg]  # keyword-only


# --- Retries and errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error"), (500, "api_error")])
async def test_retryable_status_is_retried_by_the_sdk(status: int, kind: str) -> None:
    fake = api(fail(status, kind, "Try again later."), reply(text("Made it.")))
    events = await collect(AnthropicModel(client=fake.client()))
    assert events[0] == TextDelta("Made it.")
    assert len(fake.requests) == 2
    assert [r.headers.get("x-stainless-retry-count") for r in fake.requests] == ["0", "1"]
    assert fake.bodies()[0] == fake.bodies()[1]


async def test_sdk_default_retries_are_kept_then_the_error_surfaces() -> None:
    fake = api(*[fail(529, "overloaded_error", "Overloaded")] * 3)
    with pytest.raises(anthropic.OverloadedError, match="Overloaded"):
        await collect(AnthropicModel(client=fake.client()))
    assert len(fake.requests) == 1 + anthropic.DEFAULT_MAX_RETRIES


async def test_max_retries_is_passed_to_the_sdk() -> None:
    fake = api(fail(429, "rate_limit_error", "Slow down."), reply(text("never sent")))
    with pytest.raises(anthropic.RateLimitError, match="Slow down"):
        await collect(AnthropicModel(client=fake.client(), max_retries=0))
    assert len(fake.requests) == 1


async def test_bad_request_surfaces_with_the_apis_message_and_is_not_retried() -> None:
    message = "messages.0.content.0.text: text content blocks must be non-empty"
    fake = api(fail(400, "invalid_request_error", message))
    with pytest.raises(anthropic.BadRequestError) as e:
        await collect(AnthropicModel(client=fake.client()))
    assert message in str(e.value)
    assert e.value.api_message == message
    assert e.value.status_code == 400
    assert len(fake.requests) == 1
    assert KEY not in str(e.value)


# --- Credentials and configuration ----------------------------------------------------------------------------------


async def test_missing_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no SDK credentials profile on disk either
    for model in (AnthropicModel.for_model(Claude.OPUS), resolve_model("claude-sonnet-5-5"), AnthropicModel()):
        with pytest.raises(MissingCredentialsError) as e:
            await collect(model)  # type: ignore[arg-type]
        text = str(e.value)
        assert "ANTHROPIC_API_KEY" in text
        assert "ScriptedModel" in text
        assert "recording" in text
        assert isinstance(e.value, UpstreamUnexpected)


async def _serve_once(body: bytes, seen: list[bytes]) -> tuple[asyncio.Server, int, asyncio.Event]:
    """A one-shot HTTP/1.1 server on 127.0.0.1 answering with an SSE ``body`` (for the environment-configured path).

    The event is set once the answer's connection is closed: awaited before the test's event loop ends, so no socket
    is left for the garbage collector to warn about during a later test.
    """
    answered = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        seen.append(head + await reader.readexactly(length))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        answered.set()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], answered


async def test_configured_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []
    server, port, answered = await _serve_once(sse(reply(text("From the env."))), seen)
    async with server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
        events = await collect(AnthropicModel.for_model(Claude.SONNET))
        await asyncio.wait_for(answered.wait(), 5)
    assert events[0] == TextDelta("From the env.")
    (raw,) = seen
    assert raw.startswith(b"POST /v1/messages ")
    assert KEY.encode() in raw
    assert b'"model":"claude-sonnet-5-5"' in raw.replace(b" ", b"")


def test_importing_the_backend_does_not_import_the_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agl_notebook.models.anthropic as m; m.AnthropicModel(model='x').backend_id('x'); "
        "print('anthropic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"


# --- Model names ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(Claude))
def test_claude_names_are_known_to_the_installed_sdk(model: Claude) -> None:
    from anthropic.types.model_param import ModelParam

    literal = next(a for a in typing.get_args(ModelParam) if typing.get_origin(a) is typing.Literal)
    assert model.value in typing.get_args(literal)


# --- End to end through Run.step ------------------------------------------------------------------------------------


async def test_run_step_end_to_end_over_the_sdk() -> None:
    looked_up: list[str] = []

    async def look_up(query: Query) -> ToolResult:
        looked_up.append(query.text)
        return ToolResult(f"Found 3 notes on {query.text}.")

    researcher: Role[Answer] = Role(
        name="researcher",
        instructions="Look things up, then report.",
        tools=[
            tool("look_up", "Look a thing up.", Query, look_up),
            reporting_tool("report", "Report what you found.", Answer),
        ],
        model=Claude.SONNET,
    )
    fake = api(
        reply(text("Let me check."), use("toolu_1", "look_up", '{"text": ', '"retries"}'), stop_reason="tool_use"),
        reply(use("toolu_2", "report", '{"summary": "Three notes', ' on retries."}'), stop_reason="tool_use"),
    )
    run = Run(model=AnthropicModel(client=fake.client()))
    answer = await run.step(researcher, "What do we know about retries?")
    assert answer == Answer("Three notes on retries.")
    assert looked_up == ["retries"]
    assert len(fake.requests) == 2
    first, second = fake.bodies()
    assert first["model"] == second["model"] == "claude-sonnet-5-5"
    assert [t["name"] for t in second["tools"]] == ["look_up", "report"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "look_up", "input": {"text": "retries"}},
    ]
    assert second["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "Found 3 notes on retries.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    # The history is sent whole each turn; the cache mark moves to the newest block.
    assert second["messages"][0]["content"] == [{"type": "text", "text": "What do we know about retries?"}]
    assert first["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


# --- A server asking for a long wait ------------------------------------------------------------------------------


def asking_to_wait(status: int, headers: dict[str, str]) -> Responder:
    return lambda: httpx2.Response(
        status,
        headers={"request-id": "req_wait", **headers},
        json={"type": "error", "error": {"type": "rate_limit_error", "message": "Wait."}},
    )


async def collect_in_a_step(model: AnthropicModel) -> tuple[list[ModelEvent], list[object]]:
    """The model's events, and what it told the running step's views."""
    from agl_notebook._scope import StepScope, current_scope

    told: list[object] = []
    token = current_scope.set(StepScope(role="oracle", emit=told.append))
    try:
        return await asyncio.wait_for(collect(model), timeout=20), told
    finally:
        current_scope.reset(token)


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "86400"}, {"retry-after-ms": "86400000"}, {"retry-after": "Fri, 31 Dec 2100 23:59:59 GMT"}],
    ids=["seconds", "milliseconds", "a date"],
)
async def test_a_long_retry_after_is_capped_at_60_seconds_and_said_live(
    headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agl_notebook.events import ModelRetryWaiting, OutputTextDelta, StepFinished
    from agl_notebook.models import anthropic as backend
    from agl_notebook.notebook.render import StepTrace, render_html
    from agl_notebook.notebook.view import final_bundle

    waited: list[float] = []

    async def no_real_wait(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(backend, "_sleep", no_real_wait, raising=False)  # without it, the SDK would wait a day
    fake = api(asking_to_wait(429, headers), reply(text("Made it.")))

    events, told = await collect_in_a_step(AnthropicModel(client=fake.client()))

    assert events[0] == TextDelta("Made it.")
    assert waited == [60.0]
    assert [r.headers.get("x-stainless-retry-count") for r in fake.requests] == ["0", "1"]
    (waiting,) = told
    assert isinstance(waiting, ModelRetryWaiting)
    assert (waiting.seconds, waiting.reason, waiting.retry, waiting.max_retries) == (60.0, "HTTP 429", 1, 2)
    assert waiting.asked is not None and waiting.asked > 86000

    trace = StepTrace(role="oracle")
    trace.apply(waiting)
    live = render_html(trace, ())
    if "retry-after" in headers and headers["retry-after"] == "86400":
        assert "waiting 60 s before retrying (HTTP 429; the server asked for 86400 s; retry 1 of 2)" in live
    else:
        assert "waiting 60 s before retrying (HTTP 429; the server asked for" in live
    trace.apply(OutputTextDelta("Made it."))
    assert "waiting" not in render_html(trace, ())  # the line goes once the request answers
    trace.apply(waiting)
    trace.apply(StepFinished("oracle", None, 2, False))
    bundle = final_bundle(trace, ())
    assert "waiting" not in bundle["text/html"] and "waiting" not in bundle["text/plain"]


async def test_the_cap_is_a_parameter_and_the_wait_is_real() -> None:
    import time

    fake = api(asking_to_wait(529, {"retry-after": "86400"}), reply(text("Made it.")))
    started = time.monotonic()

    events, told = await collect_in_a_step(AnthropicModel(client=fake.client(), max_retry_wait=0.2))

    assert 0.15 < time.monotonic() - started < 10
    assert events[0] == TextDelta("Made it.")
    assert [(w.seconds, w.reason) for w in told] == [(0.2, "HTTP 529")]  # type: ignore[attr-defined]


async def test_a_short_retry_after_is_honoured_and_the_servers_no_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from agl_notebook.models import anthropic as backend

    waited: list[float] = []

    async def no_real_wait(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(backend, "_sleep", no_real_wait)
    fake = api(asking_to_wait(429, {"retry-after": "3"}), reply(text("Made it.")))
    events, told = await collect_in_a_step(AnthropicModel(client=fake.client()))
    assert events[0] == TextDelta("Made it.")
    assert waited == [3.0]
    assert getattr(told[0], "asked", "missing") is None  # not capped: nothing more to say

    fake = api(asking_to_wait(429, {"retry-after": "1", "x-should-retry": "false"}))
    with pytest.raises(anthropic.RateLimitError):
        await collect_in_a_step(AnthropicModel(client=fake.client()))
    assert len(fake.requests) == 1


@pytest.mark.parametrize("wait", [-1, float("inf"), float("nan"), "60", True])
def test_max_retry_wait_is_checked(wait: Any) -> None:
    with pytest.raises(InputError, match="max_retry_wait"):
        AnthropicModel(max_retry_wait=wait)
