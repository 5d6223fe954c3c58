"""Thinking, kept blocks, effort and strict tools through the real ``anthropic`` client against the fake API.

The fake's streams are built from the SDK's own event models (``thinking_delta``, ``signature_delta``, a
``redacted_thinking`` block) plus hand JSON for block types the SDK does not know (tests/support/anthropic_api.py).
What the loop sends back is asserted on the request bodies the fake received, byte for byte: each kept block's JSON,
compact and with its keys in the order the API sent them, is found in the body as the SDK wrote it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
import pytest

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.errors import UpstreamUnexpected
from agl_notebook.events import Event, ReasoningTextDelta, ReplyBlockKept
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import (
    ModelEvent,
    ModelRequest,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
)
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.transcript import Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock, user_text
from tests.support.anthropic_api import (
    MESSAGE_STOP,
    Block,
    Opaque,
    Redacted,
    Thought,
    api,
    assembled,
    block_start,
    block_stop,
    exact,
    fail,
    message_delta,
    message_json,
    message_start,
    opaque,
    redacted,
    reply,
    text,
    thought,
    use,
)
from tests.support.steps import Answer, Query

LOOK_UP = ToolSpec(
    "look_up", "Look a thing up.", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)
REPORT = ToolSpec("report", "Report what you found.", {"type": "object", "properties": {"summary": {"type": "string"}}})

# A block of a type the SDK does not know, its keys in no order the SDK's models would give (its typed parse makes it
# a TextBlock, whose dump puts "text" first), filled by a text delta and streamed tool input.
FROB = opaque(
    {"type": "frob_lookup", "zeta": "z", "text": "", "id": "frob_1", "input": {}, "alpha": {"b": 1, "a": [2, 3]}},
    {"type": "text_delta", "text": "part "},
    {"type": "input_json_delta", "partial_json": '{"q": "re'},
    {"type": "text_delta", "text": "two"},
    {"type": "input_json_delta", "partial_json": 'tries"}'},
    kept={
        "type": "frob_lookup",
        "zeta": "z",
        "text": "part two",
        "id": "frob_1",
        "input": {"q": "retries"},
        "alpha": {"b": 1, "a": [2, 3]},
    },
)

# A server tool's call and result, paused: types the SDK knows but this backend does not read, kept as sent.
SEARCH_CALL = opaque(
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    {"type": "input_json_delta", "partial_json": '{"query": "retry backoff"}'},
    kept={"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "retry backoff"}},
)
SEARCH_RESULT = opaque(
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.test/retries",
                "title": "Retries",
                "encrypted_content": "EqgfCioIARgBIiQ3fake/encrypted+content==",
                "page_age": None,
            }
        ],
    }
)


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (), **settings: Any) -> ModelRequest:
    return ModelRequest(Claude.OPUS, "You are terse.", messages or (user_text("Hello"),), tools, 8192, "", **settings)


async def collect(model: AnthropicModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [e async for e in model.stream(req or request())]


def researcher(**settings: Any) -> Role[Answer]:
    async def look_up(query: Query) -> ToolResult:
        return ToolResult(f"Found 3 notes on {query.text}.")

    return Role(
        name="researcher",
        instructions="Look things up, then report.",
        tools=[
            tool("look_up", "Look a thing up.", Query, look_up),
            reporting_tool("report", "Report what you found.", Answer),
        ],
        model=Claude.SONNET,
        max_tokens=8192,
        **settings,
    )


def kept(blocks: tuple[Block, ...]) -> list[Thought | Redacted | Opaque]:
    return [b for b in blocks if isinstance(b, Thought | Redacted | Opaque)]


def assert_sent_back(body: bytes, sent: list[Any], turn: tuple[Block, ...]) -> None:
    """``sent`` (an assistant message's content as the fake received it) is ``turn`` as the API sent it, and every
    kept block of it is in the request body byte for byte."""
    assert [exact(b) for b in sent] == [exact(b) for b in message_json(*turn)]
    for block in kept(turn):
        assert exact(assembled(block)) in body


# --- What the backend yields ----------------------------------------------------------------------------------------


async def test_thinking_streams_then_each_kept_block_comes_whole_as_sent() -> None:
    think = thought("Retries, grüße — ", "let me ", "look.", signature="EqQBsig/one==")
    fake = api(reply(think, redacted("EmwKsecret/data=="), FROB, text("Looking."), use("toolu_1", "look_up", "{}")))
    events = await collect(AnthropicModel(client=fake.client()), request(thinking=Thinking.adaptive()))
    assert events[:-1] == [
        ThinkingDelta("Retries, grüße — "),
        ThinkingDelta("let me "),
        ThinkingDelta("look."),
        RawBlock({"type": "thinking", "thinking": "Retries, grüße — let me look.", "signature": "EqQBsig/one=="}),
        RawBlock({"type": "redacted_thinking", "data": "EmwKsecret/data=="}),
        RawBlock(assembled(FROB)),
        TextDelta("Looking."),
        ToolCall("toolu_1", "look_up", {}),
    ]
    # Keys in the order the API sent them, not the SDK models' field order.
    raw = [e for e in events if isinstance(e, RawBlock)]
    assert [list(b.data) for b in raw] == [["type", "thinking", "signature"], ["type", "data"], list(FROB.kept or {})]


async def test_omitted_thinking_is_kept_with_its_signature_and_streams_no_text() -> None:
    fake = api(reply(thought(signature="EqQBonly/signature=="), text("Hi.")))
    events = await collect(AnthropicModel(client=fake.client()), request(thinking=Thinking.adaptive(display="omitted")))
    assert events[0] == RawBlock({"type": "thinking", "thinking": "", "signature": "EqQBonly/signature=="})
    assert not any(isinstance(e, ThinkingDelta) for e in events)


async def test_a_delta_of_an_unknown_type_is_not_applied_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    block = opaque(
        {"type": "hologram", "frames": []},
        {"type": "frame_delta", "frame": {"n": 1}},
        {"type": "signature_delta", "signature": "sig=="},
    )
    fake = api(reply(block, text("ok")))
    with caplog.at_level(logging.WARNING, logger="agl_notebook.models.anthropic"):
        events = await collect(AnthropicModel(client=fake.client()))
    assert events[0] == RawBlock({"type": "hologram", "frames": [], "signature": "sig=="})
    assert "'frame_delta' delta for a 'hologram' block" in caplog.text


async def test_a_kept_block_left_open_is_upstream_unexpected_unless_max_tokens_cut_it() -> None:
    open_thinking = [message_start(), block_start(0, thought("a")), message_delta("end_turn"), MESSAGE_STOP]
    with pytest.raises(UpstreamUnexpected, match="'thinking' block still open"):
        await collect(AnthropicModel(client=api(open_thinking).client()))
    cut = [message_start(), block_start(0, thought("a")), message_delta("max_tokens"), MESSAGE_STOP]
    events = await collect(AnthropicModel(client=api(cut).client()))
    assert events == [TurnEnd("max_tokens", Usage(10, 5))], "an unsigned thinking block cannot be sent back"


async def test_a_kept_blocks_streamed_input_that_is_not_json_is_upstream_unexpected() -> None:
    bad = opaque(
        {"type": "server_tool_use", "id": "s", "name": "n", "input": {}},
        {"type": "input_json_delta", "partial_json": "{nope"},
    )
    with pytest.raises(UpstreamUnexpected, match="'server_tool_use' block is not valid JSON"):
        await collect(AnthropicModel(client=api(reply(bad)).client()))


# --- Sent back byte for byte, through Run.step ----------------------------------------------------------------------


async def test_a_three_turn_thinking_tool_loop_sends_every_earlier_block_back_byte_for_byte() -> None:
    turn1 = (
        thought("Retries, grüße — ", "I should look.", signature="EqQBturn1/sig=="),
        redacted("EmwKturn1/redacted=="),
        FROB,
        text("Looking."),
        use("toolu_1", "look_up", '{"text": ', '"retries"}'),
    )
    turn2 = (
        thought("Three notes. ", "Now backoff.", signature="EqQBturn2/sig=="),
        redacted("EmwKturn2/redacted=="),
        use("toolu_2", "look_up", '{"text": "backoff"}'),
    )
    turn3 = (thought("Enough.", signature="EqQBturn3/sig=="), use("toolu_3", "report", '{"summary": "Six notes."}'))
    fake = api(*(reply(*turn, stop_reason="tool_use") for turn in (turn1, turn2, turn3)))
    events: list[Event] = []
    run = Run(model=AnthropicModel(client=fake.client()), on_event=events.append)
    answer = await run.step(researcher(thinking=Thinking.adaptive()), "What do we know about retries?")
    assert answer == Answer("Six notes.")
    second, third = fake.requests[1:]
    bodies = fake.bodies()
    assert [[m["role"] for m in b["messages"]] for b in bodies] == [
        ["user"],
        ["user", "assistant", "user"],
        ["user", "assistant", "user", "assistant", "user"],
    ]
    assert_sent_back(second.content, bodies[1]["messages"][1]["content"], turn1)
    assert_sent_back(third.content, bodies[2]["messages"][1]["content"], turn1)
    assert_sent_back(third.content, bodies[2]["messages"][3]["content"], turn2)
    assert all(b["thinking"] == {"type": "adaptive", "display": "summarized"} for b in bodies)
    # The live view got the thinking as it streamed, and each kept block once.
    assert "".join(e.delta for e in events if isinstance(e, ReasoningTextDelta)) == (
        "Retries, grüße — I should look.Three notes. Now backoff.Enough."
    )
    assert [e.block for e in events if isinstance(e, ReplyBlockKept)] == [
        assembled(b) for b in (*kept(turn1), *kept(turn2), *kept(turn3))
    ]


async def test_after_a_pause_turn_the_paused_reply_is_resent_unchanged() -> None:
    paused = (thought("Searching first.", signature="EqQBpaused/sig=="), SEARCH_CALL, SEARCH_RESULT)
    turn2 = (thought("Found it.", signature="EqQBturn2/sig=="), use("toolu_1", "look_up", '{"text": "backoff"}'))
    turn3 = (redacted("EmwKturn3=="), use("toolu_2", "report", '{"summary": "Backoff doubles."}'))
    fake = api(
        reply(*paused, stop_reason="pause_turn"),
        reply(*turn2, stop_reason="tool_use"),
        reply(*turn3, stop_reason="tool_use"),
    )
    run = Run(model=AnthropicModel(client=fake.client()))
    answer = await run.step(researcher(thinking=Thinking.enabled(2048)), "How do retries back off?")
    assert answer == Answer("Backoff doubles.")
    second, third = fake.requests[1:]
    bodies = fake.bodies()
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant"]
    assert_sent_back(second.content, bodies[1]["messages"][1]["content"], paused)
    # The paused reply holds only kept blocks: the cache mark goes on the last block written here, the prompt.
    assert bodies[1]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert b"cache_control" not in exact(bodies[1]["messages"][1])
    assert_sent_back(third.content, bodies[2]["messages"][1]["content"], paused)
    assert_sent_back(third.content, bodies[2]["messages"][2]["content"], turn2)


# --- The settings sent ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("thinking", "sent"),
    [
        (Thinking.adaptive(), {"type": "adaptive", "display": "summarized"}),
        (Thinking.adaptive(display="omitted"), {"type": "adaptive", "display": "omitted"}),
        (Thinking.enabled(4000), {"type": "enabled", "budget_tokens": 4000, "display": "summarized"}),
        (Thinking.enabled(1024, display="omitted"), {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}),
        (Thinking.between_tools(), {"type": "between_tools"}),
        (Thinking.disabled(), {"type": "disabled"}),
    ],
)
async def test_the_thinking_setting_is_sent_as_the_api_takes_it(thinking: Thinking, sent: dict[str, Any]) -> None:
    fake = api(reply(text("ok")))
    await collect(AnthropicModel(client=fake.client()), request(thinking=thinking))
    body = fake.bodies()[0]
    assert exact(body["thinking"]) == exact(sent)
    assert "output_config" not in body


async def test_thinking_and_effort_of_a_role_reach_the_api() -> None:
    fake = api(reply(thought("Hm."), use("toolu_1", "report", '{"summary": "ok"}'), stop_reason="tool_use"))
    run = Run(model=AnthropicModel(client=fake.client()))
    await run.step(researcher(thinking=Thinking.enabled(2048), effort="xhigh"), "Go.")
    body = fake.bodies()[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}
    assert body["output_config"] == {"effort": "xhigh"}


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
async def test_effort_alone_is_sent_as_output_config(effort: Any) -> None:
    fake = api(reply(text("ok")))
    await collect(AnthropicModel(client=fake.client()), request(effort=effort))
    body = fake.bodies()[0]
    assert body["output_config"] == {"effort": effort}
    assert "thinking" not in body


async def test_a_strict_tool_is_sent_with_strict_true_and_others_without() -> None:
    strict_look_up = ToolSpec(LOOK_UP.name, LOOK_UP.description, LOOK_UP.input_schema, strict=True)
    fake = api(reply(text("ok")))
    await collect(AnthropicModel(client=fake.client()), request(tools=(strict_look_up, REPORT)))
    tools = fake.bodies()[0]["tools"]
    assert exact(tools[0]) == exact(
        {"name": "look_up", "description": "Look a thing up.", "input_schema": LOOK_UP.input_schema, "strict": True}
    )
    assert "strict" not in tools[1]


# The body the backend sent for this request before thinking, effort and strict tools existed (captured from the
# code of the commit before them, bc6a3f7's parent's backend): a request that sets none of them is unchanged.
BEFORE = (
    '{"max_tokens":777,"messages":[{"role":"user","content":[{"type":"text","text":"Look up retries, grüße."}]},'
    '{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":'
    '"look_up","input":{"text":"retries"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",'
    '"content":"Nothing found.","is_error":true,"cache_control":{"type":"ephemeral"}}]}],"model":"claude-opus-5-5",'
    '"stream":true,"system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],"tools":'
    '[{"name":"look_up","description":"Look a thing up.","input_schema":{"type":"object","properties":{"text":'
    '{"type":"string"}},"required":["text"]}},{"name":"report","description":"Report what you found.","input_schema":'
    '{"type":"object","properties":{"summary":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]}'
).encode()


async def test_a_request_without_the_settings_is_the_same_bytes_as_before_them() -> None:
    history = (
        user_text("Look up retries, grüße."),
        Message("assistant", (TextBlock("Looking."), ToolUseBlock("toolu_1", "look_up", {"text": "retries"}))),
        Message("user", (ToolResultBlock("toolu_1", "Nothing found.", is_error=True),)),
    )
    fake = api(reply(text("Done.")))
    req = ModelRequest(Claude.OPUS, "You are terse.", history, (LOOK_UP, REPORT), 777)
    await collect(AnthropicModel(client=fake.client()), req)
    assert fake.requests[0].content == BEFORE


# --- A mode the model refuses, and usage ----------------------------------------------------------------------------


async def test_a_mode_the_model_refuses_is_the_apis_error_and_nothing_is_recorded() -> None:
    said = "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive instead."
    fake = api(fail(400, "invalid_request_error", said))
    store = MemoryStore()
    run = Run(model=AnthropicModel(client=fake.client()), store=store)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await run.step(researcher(thinking=Thinking.enabled(2048)), "Go.")
    assert caught.value.status_code == 400
    assert said in str(caught.value)
    assert len(fake.requests) == 1, "a refusal is not retried"
    assert list(store.records()) == []


async def test_output_tokens_of_a_thinking_reply_are_counted_once() -> None:
    think = thought("A long think " * 40, signature="EqQBsig==")
    fake = api(
        reply(think, use("toolu_1", "report", '{"summary": "ok"}'), stop_reason="tool_use", output_tokens=1234),
    )
    events = await collect(AnthropicModel(client=api(reply(think, text("ok"), output_tokens=1234)).client()))
    assert events[-1] == TurnEnd("end_turn", Usage(10, 1234))
    run = Run(model=AnthropicModel(client=fake.client()))
    await run.step(researcher(thinking=Thinking.adaptive()), "Go.")
    assert run.summary().usage.output_tokens == 1234


def test_the_fakes_thinking_events_are_the_sdks_own() -> None:
    """The fake's thinking stream parses into the SDK's own event types (its format is the SDK's)."""
    from anthropic._models import construct_type
    from anthropic.types import RawMessageStreamEvent, RedactedThinkingBlock, SignatureDelta, ThinkingBlock
    from anthropic.types import ThinkingDelta as SDKThinkingDelta

    parsed = [
        construct_type(type_=RawMessageStreamEvent, value=data) for _, data in reply(thought("a"), redacted())[2:7]
    ]
    assert [type(getattr(e, "content_block", getattr(e, "delta", None))) for e in parsed] == [
        ThinkingBlock,
        SDKThinkingDelta,
        SignatureDelta,
        type(None),
        RedactedThinkingBlock,
    ]
    assert json.loads(json.dumps(reply(thought("a"))[2][1]))["content_block"] == {
        "type": "thinking",
        "thinking": "",
        "signature": "",
    }
    assert block_stop(0)[1] == {"type": "content_block_stop", "index": 0}
