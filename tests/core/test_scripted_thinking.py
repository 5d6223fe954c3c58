"""The scripted model scripts thinking, redacted thinking and kept blocks; a script without them keeps its digest."""

from __future__ import annotations

from typing import Any

import pytest

from agl_notebook import (
    InputError,
    Role,
    Run,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
    Thinking,
    ToolResult,
    reporting_tool,
    tool,
)
from agl_notebook.events import Event, ReasoningTextDelta, ReplyBlockKept
from agl_notebook.models.base import ModelRequest, ThinkingDelta, TurnEnd, Usage
from agl_notebook.transcript import RawBlock, message_to_json, user_text
from tests.support.steps import Query, Review, look, report

# Scripts and their digests as computed at c303204, before a turn could think. Every recorded notebook keys its
# records on ``scripted:<digest>``: these must never change.
DIGESTS_BEFORE = [
    (["hello"], "94cfed56c3962c32"),
    (
        [
            ScriptedTurn("Let me look.", [ScriptedCall("look_up", {"text": "retries"})]),
            {"calls": [{"name": "report_review", "args": {"issues": []}}]},
        ],
        "5431009fb8ce6673",
    ),
    (
        {
            "planner": ["a", {"text": "b", "stop_reason": "max_tokens"}],
            "coder": [ScriptedTurn("x", [ScriptedCall("t", {"n": 1}, "toolu_9")], "tool_use", Usage(3, 4))],
        },
        "2f71152ac590bf15",
    ),
    ([], "4f53cda18c2baa0c"),
    ([{"text": "Let me look.", "calls": [look("retries")]}, {"calls": [report(["x"])]}], "d70335b1852c05cc"),
]


@pytest.mark.parametrize(("script", "expected"), DIGESTS_BEFORE)
def test_a_script_that_does_not_think_keeps_the_digest_it_had_before(script: Any, expected: str) -> None:
    assert ScriptedModel(script).digest == expected


@pytest.mark.parametrize(
    "extra",
    [{"thinking": "Hmm."}, {"redacted": True}, {"blocks": [{"type": "future_block", "x": 1}]}],
)
def test_a_script_that_thinks_has_another_digest(extra: dict[str, Any]) -> None:
    before = ScriptedModel([{"text": "hello"}]).digest
    assert ScriptedModel([{"text": "hello", **extra}]).digest != before
    assert ScriptedModel([ScriptedTurn("hello", **extra)]).digest == ScriptedModel([{"text": "hello", **extra}]).digest


def request(thinking: Thinking | None = None, role: str = "") -> ModelRequest:
    return ModelRequest("m", "system", (user_text("go"),), (), 4096, role, thinking)


async def events_of(model: ScriptedModel, req: ModelRequest) -> list[Any]:
    return [e async for e in model.stream(req)]


async def test_a_thinking_turn_streams_its_thinking_then_the_kept_blocks_then_its_text() -> None:
    turn = ScriptedTurn(
        "I will look.",
        [ScriptedCall("look_up", {"text": "x"})],
        thinking="First the docs, then the code.",
        redacted=True,
        blocks=[{"type": "future_block", "payload": {"nested": [1, 2]}}],
    )
    events = await events_of(ScriptedModel([turn]), request(Thinking.adaptive()))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ThinkingDelta"] * 6 + ["RawBlock"] * 3 + ["TextDelta"] * 3 + ["ToolCall", "TurnEnd"]
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "First the docs, then the code."
    thought, redacted, future = (e for e in events if isinstance(e, RawBlock))
    assert thought.data["thinking"] == "First the docs, then the code."
    assert isinstance(thought.data["signature"], str) and thought.data["signature"].startswith("scripted-signature-")
    assert redacted.type == "redacted_thinking" and str(redacted.data["data"]).startswith("scripted-redacted-")
    assert future.data == {"type": "future_block", "payload": {"nested": [1, 2]}}
    again = await events_of(ScriptedModel([turn]), request(Thinking.adaptive()))
    assert [e.data for e in again if isinstance(e, RawBlock)] == [thought.data, redacted.data, future.data]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.stop_reason == "tool_use"
    plain = await events_of(ScriptedModel([ScriptedTurn("I will look.", turn.calls)]), request())
    # output tokens count the thinking (as the API's do): nothing is added to them elsewhere
    assert end.usage.output_tokens == plain[-1].usage.output_tokens + len(turn.thinking) // 4 + 10


async def test_with_display_omitted_the_thinking_block_keeps_its_signature_and_no_text() -> None:
    model = ScriptedModel([ScriptedTurn("Done.", thinking="Secret plan.")])
    shown = [e for e in await events_of(model, request(Thinking.adaptive())) if isinstance(e, RawBlock)]
    omitted = await events_of(model, request(Thinking.adaptive(display="omitted")))
    assert not any(isinstance(e, ThinkingDelta) for e in omitted)
    [block] = [e for e in omitted if isinstance(e, RawBlock)]
    assert block.data == {**shown[0].data, "thinking": ""}


async def test_the_dict_form_scripts_thinking_redacted_and_blocks_and_a_function_script_too() -> None:
    data = {"text": "ok", "thinking": "Think.", "redacted": True, "blocks": [{"type": "x_block"}]}
    as_dict = await events_of(ScriptedModel([data]), request())
    as_turn = await events_of(
        ScriptedModel([ScriptedTurn("ok", thinking="Think.", redacted=True, blocks=[{"type": "x_block"}])]),
        request(),
    )
    assert [repr(e) for e in as_dict] == [repr(e) for e in as_turn]
    from_function = await events_of(ScriptedModel(lambda r: data), request())
    assert [type(e) for e in from_function] == [type(e) for e in as_dict]


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ({"thinking": 3}, r"script\[0\]: thinking is the thinking's text, not 3"),
        ({"redacted": "yes"}, r"script\[0\]: redacted takes True or False, not 'yes'"),
        ({"blocks": "abc"}, r"script\[0\]: blocks is a list of blocks"),
        ({"blocks": [{"x": 1}]}, r"script\[0\]\.blocks\[0\]: a block is a dict with a 'type'"),
        ({"blocks": ["thinking"]}, r"script\[0\]\.blocks\[0\]: a block is a dict with a 'type'"),
        ({"blocks": [{"type": "text", "text": "hi"}]}, r"a 'text' block is written as the turn's text or calls"),
        ({"blocks": [{"type": "tool_use"}]}, r"a 'tool_use' block is written as the turn's text or calls"),
        ({"blocks": [{"type": "x", "v": {1, 2}}]}, r"script\[0\]\.blocks\[0\]: a kept block must be JSON"),
        ({"thought": "typo"}, r"unknown keys \['thought'\]"),
        (ScriptedTurn(thinking=None), r"script\[0\]: thinking is the thinking's text, not None"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_thinking_script_is_an_input_error_naming_where(turn: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ScriptedModel([turn])


# ---------------------------------------------------------------------------------------------------------------
# Through a Run: thinking across a tool loop, recorded, then replayed with no model call


async def look_up(query: Query) -> ToolResult:
    return ToolResult(f"found {query.text}")


def thinking_role() -> Role[Review]:
    tools: list[Any] = [
        tool("look_up", "Search the project's docs.", Query, look_up),
        reporting_tool("report_review", "Report what you found.", Review),
    ]
    return Role("reviewer", "Review the request.", tools, thinking=Thinking.enabled(2048), effort="high")


SCRIPT: list[Any] = [
    {"text": "Let me look.", "thinking": "The docs first.", "redacted": True, "calls": [look("retries")]},
    {"thinking": "Found it; report.", "calls": [report(["retries are unbounded"])]},
]


def test_thinking_across_a_tool_loop_is_sent_back_unchanged_recorded_and_replayed() -> None:
    model = ScriptedModel(SCRIPT)
    live_events: list[Event] = []
    run = Run(model=model, on_event=live_events.append)
    assert run.run_sync(lambda: run.step(thinking_role(), "go")) == Review(["retries are unbounded"])
    first_reply = model.requests[1].messages[1]
    content: Any = message_to_json(first_reply)["content"]
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert content[0]["thinking"] == "The docs first."
    assert model.requests[1].thinking == Thinking.enabled(2048) and model.requests[1].effort == "high"

    replayed_events: list[Event] = []
    again = Run(model=model, store=run.store, mode="replay", on_event=replayed_events.append)
    assert again.run_sync(lambda: again.step(thinking_role(), "go")) == Review(["retries are unbounded"])
    assert model.calls == 2, "the replay made no model call"

    def kept(events: list[Event]) -> list[str]:
        return [repr(e) for e in events if isinstance(e, ReplyBlockKept)]

    def thought(events: list[Event]) -> str:
        return "".join(e.delta for e in events if isinstance(e, ReasoningTextDelta))

    assert thought(live_events) == thought(replayed_events) == "The docs first.Found it; report."
    assert len(kept(live_events)) == 3 and kept(replayed_events) == kept(live_events)
