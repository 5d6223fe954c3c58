"""The batch engine with thinking: through the real ``anthropic`` client against the fake Message Batches API, a
three-turn tool loop whose replies hold thinking, redacted thinking and a block of a type not read here sends every
earlier block back byte for byte in each later wave; the records replay with no request (issue 27, item 5).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from agl_notebook import Role, Run
from agl_notebook.models.base import TextDelta, ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.models.batch_replies import message_events
from agl_notebook.transcript import RawBlock
from tests.support.anthropic_api import Block, Text, Use, assembled, exact, opaque, redacted, text, thought, use
from tests.support.anthropic_batches import FakeBatches, Turn
from tests.support.batch_steps import RESEARCHER, engine_for, inputs, topic_of

THINKER: Role[Any] = dataclasses.replace(RESEARCHER, thinking="adaptive", effort="high")


def kept_of(topic: str, turn: int) -> list[Block]:
    """The blocks a turn's reply keeps whole, different per topic and turn."""
    blocks: list[Block] = [thought(f"{topic}, turn {turn}: ", "let me think.", signature=f"sig/{topic}/{turn}+==")]
    if turn == 0:
        blocks.append(redacted(f"RWNyeXB0ZWQ/{topic}=="))
        # keys in an order of their own, a nested value: sent back exactly so
        blocks.append(opaque({"type": "future_block", "z": 1, "a": {"nested": [topic, None, 1.5]}}))
    return blocks


def thinking_turns(params: dict[str, Any]) -> Turn:
    topic = topic_of(params)
    n = topic.split()[1]
    turn = sum(1 for m in params["messages"] if m["role"] == "assistant")
    kept = kept_of(topic, turn)
    if turn == 0:
        return Turn(
            (kept[0], kept[1], text("Looking."), kept[2], use(f"toolu_{n}_1", "look_up", json.dumps({"text": topic}))),
            "tool_use",
        )
    if turn == 1:
        return Turn((*kept, use(f"toolu_{n}_2", "look_up", json.dumps({"text": topic + " again"}))), "tool_use")
    last = params["messages"][-1]["content"][0]["content"]
    return Turn((*kept, use(f"toolu_{n}_3", "report", json.dumps({"summary": f"{topic}: {last}"}))), "tool_use")


def sent_back(params: dict[str, Any]) -> list[bytes]:
    """Every block of the request's assistant messages that is neither text nor a tool call, as exact JSON."""
    return [
        exact(b)
        for m in params["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] not in ("text", "tool_use")
    ]


async def test_a_batched_thinking_loop_sends_every_earlier_block_back_byte_for_byte_and_replays() -> None:
    fake = FakeBatches(thinking_turns)
    queries = inputs(3)
    engine = engine_for(fake)
    run = Run(model=engine)
    participants = [engine.join(f"researcher/{q.text}") for q in queries]  # every one, before any starts

    async def one(participant: Any, query: Any) -> Any:
        with participant:
            return await run.step_outcome(THINKER, query)

    outcomes = await asyncio.gather(*(one(p, q) for p, q in zip(participants, queries, strict=True)))
    assert len(fake.creations) == 3, "one wave per turn"
    for wave, batch in enumerate(fake.creations):
        for request in batch.requests:
            params = request["params"]
            topic = topic_of(params)
            expected = [
                exact(assembled(b)) for t in range(wave) for b in kept_of(topic, t) if not isinstance(b, Text | Use)
            ]
            assert sent_back(params) == expected, (wave, topic)
            assert params.get("thinking") == {"type": "adaptive", "display": "summarized"}
            assert params.get("output_config") == {"effort": "high"}
    # Byte for byte in the create bodies as the real client sent them.
    bodies = [bytes(r.content) for r in fake.requests if r.method == "POST" and r.url.path == "/v1/messages/batches"]
    assert len(bodies) == 3
    for wave, body in enumerate(bodies):
        for query in queries:
            earlier = [b for t in range(wave) for b in kept_of(query.text, t)]
            assert all(exact(assembled(b)) in body for b in earlier if not isinstance(b, Text | Use))
    # The records keep the blocks as the batch replies held them, and replay with no request.
    before = len(fake.requests)
    replayed = Run(model=engine_for(fake), store=run.store, mode="replay")
    for query, outcome in zip(queries, outcomes, strict=True):
        again = await replayed.step_outcome(THINKER, query)
        assert again.result_json == outcome.result_json
        assert again.transcript == outcome.transcript
    assert len(fake.requests) == before, "no request"


def test_a_batch_replys_kept_blocks_are_read_whole_in_place_after_their_thinking_text() -> None:
    content = [
        {"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"},
        {"type": "redacted_thinking", "data": "ZW5j"},
        {"type": "text", "text": "Hi", "citations": None},
        {"type": "server_tool_use", "input": {"q": 1}, "id": "srvtoolu_1", "name": "web_search"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    ]
    message = {"id": "msg_1", "content": content, "stop_reason": "tool_use", "usage": {"output_tokens": 9}}
    events = message_events(json.loads(json.dumps(message)))
    assert [type(e).__name__ for e in events] == [
        "ThinkingDelta",
        "RawBlock",
        "RawBlock",
        "TextDelta",
        "RawBlock",
        "ToolCall",
        "TurnEnd",
    ]
    assert events[0] == ThinkingDelta("Hmm.") and events[3] == TextDelta("Hi")
    kept = [e for e in events if isinstance(e, RawBlock)]
    assert [exact(k.data) for k in kept] == [exact(content[0]), exact(content[1]), exact(content[3])]
    assert isinstance(events[5], ToolCall) and isinstance(events[6], TurnEnd)
    assert events[6].usage.output_tokens == 9, "thinking tokens are in output_tokens: nothing is added"
