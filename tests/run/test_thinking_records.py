"""Thinking and other kept blocks in records: scrubbed without touching their opaque fields, resumed byte for byte,
refused when scrubbing changed the thinking, replayed with no request (issue 27, items 1, 4 and 5).

The model here is a backend of one's own that thinks (as tests/core/test_loop.py's ThinkingModel): each turn a
thinking block with a signature, on the first a redacted block and a block of a type this version does not read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.errors import InputError
from agl_notebook.models.base import ModelRequest, TextDelta, ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.replay.records import KEPT_BLOCKS_FORMAT, StepRecord, block_from_json, record_from_json
from agl_notebook.replay.stores import JsonFileStore, MemoryStore, scrub_kept_block, scrubbed
from agl_notebook.transcript import Message, RawBlock, TextBlock, block_to_json, user_text
from tests.run.test_resume import BERGEN, OSLO, Person, wait_then_crash
from tests.support.approvals import Summary, Weather, weather_role

SIGNATURE = "EqQBCkgIARABGAIiQL0Lr+/0sig=="
# A secret planted at run time, as the other secret tests do (never a real one).
PLANTED = "planted-" + "9f3c2a7e" * 3


# Planted key-shaped values, built at run time so no key-like text is written in the repository.
KEY_SHAPED = "sk-ant-" + "api03-" + "abcdefghijkl"
PLANTED_SIGNATURE = "sk-ant-" + "api03-" + "z" * 10


class Thinker:
    """Thinks each turn (a signed thinking block), asks for the weather twice, then reports."""

    thinking = True
    network = False

    def __init__(self, thought: str = "I should look at the forecast.") -> None:
        self.thought = thought
        self.requests: list[ModelRequest] = []
        self.sent: list[list[dict[str, Any]]] = []  # the kept blocks each reply gave, as JSON text would carry them

    def backend_id(self, model: str) -> str:
        return "thinker:1"

    def blocks(self, turn: int) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": f"Turn {turn}: {self.thought}", "signature": f"{SIGNATURE}{turn}"}
        ]
        if turn == 0:
            blocks.append({"type": "redacted_thinking", "data": "RWNyeXB0ZWQ=/+" + PLANTED})
            blocks.append({"type": "future_block", "encrypted_content": "Zm9v" + PLANTED, "note": "kept"})
        return blocks

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        kept = self.blocks(turn)
        self.sent.append(kept)
        for block in kept:
            if block["type"] == "thinking":
                yield ThinkingDelta(block["thinking"])
            yield RawBlock(json.loads(json.dumps(block)))  # a fresh object, as a backend parsing JSON gives
        if turn == 0:
            yield TextDelta("Looking.")
            yield ToolCall("toolu_a", "weather", OSLO)
        elif turn == 1:
            yield ToolCall("toolu_b", "weather", json.loads(json.dumps(BERGEN)))
        else:
            yield ToolCall("toolu_c", "report", {"text": "Bergen: sunny for 2 days"})
        yield TurnEnd("tool_use")


def saved(path: Path) -> list[StepRecord]:
    return list(block_from_json(json.loads(path.read_text()), where=str(path)).records)


def kept_json(messages: Any) -> list[str]:
    """Every kept block of the assistant messages, as the JSON text a request body carries."""
    return [
        json.dumps(block_to_json(b))
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if isinstance(b, RawBlock)
    ]


async def test_a_resume_sends_every_earlier_block_back_unchanged_the_waiting_turns_thinking_included(
    tmp_path: Path,
) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    model = Thinker()
    person = Person(approve=1)
    await wait_then_crash(
        Run(model=model, terminal=person, store=JsonFileStore(file)), weather_role(Weather()), person, file, crashed
    )
    (partial,) = saved(crashed)
    assert partial.partial is not None and partial.format == KEPT_BLOCKS_FORMAT
    assert partial.scrubbed_blocks == (), "nothing readable had a secret in it"

    resumed = Thinker()
    again = Person(approve=1)
    result = await Run(model=resumed, terminal=again, store=JsonFileStore(crashed)).step(weather_role(Weather()), "Go")
    assert result == Summary("Bergen: sunny for 2 days")
    (live,) = resumed.requests  # the replies the partial record holds were not asked for
    # The waiting turn's thinking (turn 1) and every earlier block, byte for byte as the model sent them.
    assert kept_json(live.messages) == [json.dumps(b) for b in model.sent[0] + model.sent[1]]
    (record,) = saved(crashed)
    assert record.partial is None and record.format == KEPT_BLOCKS_FORMAT
    assert kept_json(record.transcript) == [json.dumps(b) for b in model.sent[0] + model.sent[1] + resumed.sent[0]]

    # The finished record replays: no request, the same result, the thinking told to the view again.
    replayer = Thinker()
    events: list[Any] = []
    run = Run(model=replayer, terminal=Person(), store=JsonFileStore(crashed), mode="replay", on_event=events.append)
    assert await run.step(weather_role(Weather()), "Go") == result
    assert replayer.requests == []
    kept = [e.block for e in events if e.type == "response.content_block.kept"]
    assert [json.dumps(b) for b in kept] == [json.dumps(b) for b in model.sent[0] + model.sent[1] + resumed.sent[0]]


async def test_a_partial_record_whose_thinking_was_scrubbed_is_refused_on_resume_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T3_SERVICE_TOKEN", PLANTED)
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    model = Thinker(thought=f"the token is {PLANTED}, keep it out.")
    person = Person(approve=1)
    await wait_then_crash(
        Run(model=model, terminal=person, store=JsonFileStore(file)), weather_role(Weather()), person, file, crashed
    )
    text = crashed.read_text()
    (partial,) = saved(crashed)
    thinking = [b for m in partial.transcript for b in m.content if isinstance(b, RawBlock) and b.type == "thinking"]
    assert [b.thinking for b in thinking] == [f"Turn {t}: the token is [REDACTED], keep it out." for t in (0, 1)]
    assert [b.data["signature"] for b in thinking] == [f"{SIGNATURE}0", f"{SIGNATURE}1"], "signatures untouched"
    # Opaque fields are never scrubbed: the planted value inside them stays (they are sent back as received).
    redacted = partial.transcript[1].content[1]
    assert isinstance(redacted, RawBlock) and redacted.data == model.sent[0][1]
    assert partial.scrubbed_blocks == ((1, 0), (3, 0))
    assert json.loads(text)["records"][0]["scrubbed_blocks"] == [[1, 0], [3, 0]]

    resumed = Thinker()
    again = Person(approve=1)
    with pytest.raises(
        InputError,
        match=r"cannot be resumed: a secret was scrubbed out of the model's thinking.*"
        r"message 1 block 0, message 3 block 0.*mode 'refresh'",
    ):
        await Run(model=resumed, terminal=again, store=JsonFileStore(crashed)).step(weather_role(Weather()), "Go")
    assert resumed.requests == [] and again.asked == [], "no request was sent, nobody asked"
    assert crashed.read_text() == text, "the partial record is kept as it was"

    # Mode refresh runs the step again from the start; its finished record replaces the partial one.
    fresh = Thinker()
    run = Run(model=fresh, terminal=Person(approve=2), store=JsonFileStore(crashed), mode="refresh")
    assert await run.step(weather_role(Weather()), "Go") == Summary("Bergen: sunny for 2 days")
    assert len(fresh.requests) == 3
    (record,) = saved(crashed)
    assert record.partial is None


async def test_a_finished_record_whose_thinking_was_scrubbed_still_replays_with_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("T3_SERVICE_TOKEN", PLANTED)
    store = MemoryStore()
    model = Thinker(thought=f"the token is {PLANTED}.")
    result = await Run(model=model, approvals="approve", store=store).step(weather_role(Weather()), "Go")
    (record,) = store.records()
    assert record.scrubbed_blocks == ((1, 0), (3, 0), (5, 0))
    assert PLANTED not in json.dumps([b.thinking for m in record.transcript for b in m.raw_blocks])
    replayer = Thinker()
    assert await Run(model=replayer, store=store, mode="replay").step(weather_role(Weather()), "Go") == result
    assert replayer.requests == []


def record_with(*blocks: dict[str, Any], tape: tuple[Any, ...] = ()) -> StepRecord:
    return StepRecord(
        id="r1",
        parts={"role": "x"},
        occurrence=0,
        role="r",
        backend="thinker:1",
        input="Go",
        result=None,
        transcript=(user_text("Go"), Message("assistant", (*map(RawBlock, blocks), TextBlock("done")))),
        tape=tape,
    )


@pytest.mark.parametrize(
    ("block", "after"),
    [
        # thinking: its text is readable, its signature opaque
        (
            {
                "type": "thinking",
                "thinking": f"key {KEY_SHAPED} here",
                "signature": PLANTED_SIGNATURE,
            },
            {"type": "thinking", "thinking": "key [REDACTED] here", "signature": PLANTED_SIGNATURE},
        ),
        # redacted thinking: nothing readable
        ({"type": "redacted_thinking", "data": "x-api-key: abcdefgh123"}, None),
        # an unknown type: its strings are readable except under opaque keys, at any depth; its type and keys stay
        (
            {
                "type": "server_tool_result",
                "content": [
                    {"title": "Bearer abcdefghijklmnopqrstu", "encrypted_index": "Bearer abcdefghijklmnopqrstu"}
                ],
                "data": {"deep": KEY_SHAPED},
            },
            {
                "type": "server_tool_result",
                "content": [{"title": "Bearer [REDACTED]", "encrypted_index": "Bearer abcdefghijklmnopqrstu"}],
                "data": {"deep": KEY_SHAPED},
            },
        ),
    ],
)
def test_scrubbing_a_kept_block_changes_its_readable_text_only(block: dict[str, Any], after: Any) -> None:
    assert scrub_kept_block(block, ()) == (after if after is not None else block)
    kept = scrubbed(record_with(block))
    (raw,) = kept.transcript[1].raw_blocks
    assert raw.data == (after if after is not None else block)
    assert kept.scrubbed_blocks == (((1, 0),) if after is not None else ())
    assert record_from_json(json.loads(json.dumps(kept.to_json()))) == kept, "read back as kept"


def test_a_tapes_kept_blocks_keep_their_opaque_fields_and_its_thinking_is_scrubbed() -> None:
    signature = KEY_SHAPED + "=="
    tape = (
        {
            "kind": "model",
            "key": "k",
            "events": [
                {"thinking": KEY_SHAPED},
                {"block": {"type": "thinking", "thinking": KEY_SHAPED, "signature": signature}},
                {"text": KEY_SHAPED},
            ],
        },
    )
    kept = scrubbed(record_with(tape=tape))
    assert kept.format == KEPT_BLOCKS_FORMAT, "a tape holding a kept block is a record of the new format"
    entry = kept.tape[0]
    assert isinstance(entry, dict)
    assert entry["events"] == [
        {"thinking": "[REDACTED]"},
        {"block": {"type": "thinking", "thinking": "[REDACTED]", "signature": signature}},
        {"text": "[REDACTED]"},
    ]


def test_a_record_with_no_secret_is_kept_as_it_is() -> None:
    record = record_with({"type": "thinking", "thinking": "plain", "signature": SIGNATURE})
    assert scrubbed(record) is record


def test_a_record_without_kept_blocks_stays_format_1_and_one_with_them_is_format_2() -> None:
    plain = StepRecord(
        id="r1", parts={}, occurrence=0, role="r", backend="b", input="x", result=None, transcript=(user_text("x"),)
    )
    assert plain.to_json()["format"] == 1
    kept = record_with({"type": "thinking", "thinking": "t", "signature": SIGNATURE})
    assert kept.to_json()["format"] == 2
    assert record_from_json(kept.to_json()) == kept
    with pytest.raises(InputError, match=r"\.scrubbed_blocks\[0\]: expected \[message index, block index\]"):
        record_from_json({**kept.to_json(), "scrubbed_blocks": [[1]]})
    with pytest.raises(InputError, match=r"\.format: this version reads formats 1 and 2, the record has 3"):
        record_from_json({**kept.to_json(), "format": 3})


async def test_a_step_of_a_thinking_model_waits_while_its_partial_is_kept(tmp_path: Path) -> None:
    """The waiting turn's blocks are in the partial record the moment the step waits (not only at the end)."""
    file = tmp_path / "records.json"
    model = Thinker()
    person = Person(approve=1)
    task = asyncio.ensure_future(
        Run(model=model, terminal=person, store=JsonFileStore(file)).step(weather_role(Weather()), "Go")
    )
    await asyncio.wait_for(person.waiting.wait(), 10)
    copy = tmp_path / "copy.json"
    shutil.copy(file, copy)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (partial,) = saved(copy)
    assert kept_json(partial.transcript) == [json.dumps(b) for b in model.sent[0] + model.sent[1]]


# The Anthropic backend, through the real client over the fake API ------------------------------------------------


async def test_a_resume_on_the_anthropic_backend_sends_every_earlier_block_back_byte_for_byte(tmp_path: Path) -> None:
    from agl_notebook.models.anthropic import AnthropicModel
    from tests.support.anthropic_api import (
        Opaque,
        Redacted,
        Thought,
        api,
        assembled,
        exact,
        opaque,
        redacted,
        reply,
        text,
        thought,
        use,
    )

    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    turn0: list[Thought | Redacted | Opaque] = [
        thought("The user wants ", "a forecast.", signature="EqQBCkgIARAB/turn0+sig=="),
        redacted("EmwKAhgBEgy3va3pzix/turn0=="),
        opaque({"type": "future_block", "z": 0, "a": {"nested": [1, "two", None]}}),
    ]
    turn1: list[Thought | Redacted | Opaque] = [thought("Now Bergen.", signature="EqQBCkgIARAB/turn1+sig==")]
    turn2: list[Thought | Redacted | Opaque] = [thought("Both done: report.", signature="EqQBCkgIARAB/turn2+sig==")]
    oslo, bergen = json.dumps(OSLO), json.dumps(BERGEN)
    first_api = api(
        reply(turn0[0], turn0[1], text("Looking."), turn0[2], use("toolu_a", "weather", oslo), stop_reason="tool_use"),
        reply(*turn1, use("toolu_b", "weather", bergen), stop_reason="tool_use"),
    )
    role = dataclasses.replace(weather_role(Weather()), thinking="adaptive")
    person = Person(approve=1)
    model = AnthropicModel(model="claude-test", client=first_api.client())
    await wait_then_crash(Run(model=model, terminal=person, store=JsonFileStore(file)), role, person, file, crashed)
    first_bodies = first_api.bodies()
    assert len(first_bodies) == 2
    assert sent_kept(first_bodies[1]) == [exact(assembled(b)) for b in turn0]
    assert all(exact(assembled(b)) in bytes(first_api.requests[1].content) for b in turn0), "byte for byte in the body"

    report = json.dumps({"text": "Bergen: sunny for 2 days"})
    second_api = api(reply(*turn2, use("toolu_c", "report", report), stop_reason="tool_use"))
    again = Person(approve=1)
    model = AnthropicModel(model="claude-test", client=second_api.client())
    result = await Run(model=model, terminal=again, store=JsonFileStore(crashed)).step(role, "Go")
    assert result == Summary("Bergen: sunny for 2 days")
    (body,) = second_api.bodies()
    # The resumed request: every earlier block, the waiting turn's thinking included, byte for byte as received.
    assert sent_kept(body) == [exact(assembled(b)) for b in turn0 + turn1]
    assert all(exact(assembled(b)) in bytes(second_api.requests[0].content) for b in turn0 + turn1)
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    (record,) = saved(crashed)
    assert [exact(b.data) for m in record.transcript for b in m.raw_blocks] == [
        exact(assembled(b)) for b in turn0 + turn1 + turn2
    ]


def sent_kept(body: dict[str, Any]) -> list[bytes]:
    """The blocks of a request body's assistant messages that are neither text nor a tool call, as exact JSON."""
    from tests.support.anthropic_api import exact

    return [
        exact(b)
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] not in ("text", "tool_use")
    ]
