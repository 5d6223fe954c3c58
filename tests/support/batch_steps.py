"""A three-turn role for the batch engine's tests and benchmark: two look-ups, then the report.

Its replies (`three_turns`) depend on the conversation, so the same script answers a live run and a batched one;
`run_batched` runs steps under ``asyncio.gather`` each inside a participant of the engine, as run.map will.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.loop import LoopOutcome
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.batches import Batches, Participant
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.stores import MemoryStore
from tests.support.anthropic_api import text, use
from tests.support.anthropic_batches import FakeBatches, Turn
from tests.support.steps import Answer, Query


async def look_up(query: Query) -> ToolResult:
    # Handlers that take a while, some longer than others: a wave must wait for every step still running its tools.
    for _ in range(int(query.text.split()[1]) % 4 * 3):
        await asyncio.sleep(0)
    return ToolResult(f"notes on {query.text}")


RESEARCHER: Role[Answer] = Role(
    name="researcher",
    instructions="Look things up twice, then report.",
    tools=[
        tool("look_up", "Look a thing up.", Query, look_up),
        reporting_tool("report", "Report what you found.", Answer),
    ],
    model=Claude.SONNET,
)


def topic_of(params: dict[str, Any]) -> str:
    first = params["messages"][0]["content"][0]["text"]
    found = re.search(r"topic \d+", first)
    assert found is not None, first
    return found[0]


def three_turns(params: dict[str, Any]) -> Turn:
    """Two look-ups, then the report: three requests per step, the replies depending on the conversation."""
    topic = topic_of(params)
    n = topic.split()[1]
    turn = sum(1 for m in params["messages"] if m["role"] == "assistant")
    usage = {"input_tokens": 100 + turn, "output_tokens": 7, "cache_read": 90 if turn else 0}
    if turn == 0:
        return Turn(
            (text("Looking ", "it up."), use(f"toolu_{n}_1", "look_up", json.dumps({"text": topic}))),
            "tool_use",
            **usage,
        )
    if turn == 1:
        return Turn((use(f"toolu_{n}_2", "look_up", json.dumps({"text": topic + " again"})),), "tool_use", **usage)
    last = params["messages"][-1]["content"][0]["content"]
    return Turn((use(f"toolu_{n}_3", "report", json.dumps({"summary": f"{topic}: {last}"})),), "tool_use", **usage)


def inputs(n: int) -> list[Query]:
    return [Query(f"topic {i}") for i in range(n)]


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def engine_for(fake: FakeBatches, **kwargs: Any) -> Batches:
    kwargs.setdefault("poll_first", 0.0)
    kwargs.setdefault("sleep", no_wait)
    return Batches(client=fake.client(), **kwargs)


async def run_batched(
    engine: Batches, queries: Sequence[Query], store: MemoryStore | None = None, **options: Any
) -> tuple[list[LoopOutcome | BaseException], Run]:
    run = Run(model=engine, store=store, **options)
    participants = [engine.join(f"researcher/{q.text}") for q in queries]  # every one, before any starts

    async def one(participant: Participant, query: Query) -> LoopOutcome:
        with participant:
            return await run.step_outcome(RESEARCHER, query)

    outcomes = await asyncio.gather(
        *(one(p, q) for p, q in zip(participants, queries, strict=True)), return_exceptions=True
    )
    return list(outcomes), run


async def run_live(
    fake: FakeBatches, queries: Sequence[Query], **options: Any
) -> tuple[list[LoopOutcome | BaseException], Run]:
    run = Run(model=AnthropicModel(client=fake.client()), **options)
    outcomes = await asyncio.gather(*(run.step_outcome(RESEARCHER, q) for q in queries), return_exceptions=True)
    return list(outcomes), run


def records(run: Run) -> list[JsonObject]:
    """The run's records as JSON, by id, without the time they were made, the engine that answered and the cost.

    The cost differs on purpose once the model is priced: a batched request is billed at the batch discount
    (tests/core/test_batches.py checks each cost on its own). A record's contents are compared as found (its own or
    another record's, by digest): which record keeps a shared content is the one that finished first.
    """
    return [
        without_run_details(record, run.store.records()) for record in sorted(run.store.records(), key=lambda r: r.id)
    ]


def without_run_details(record: StepRecord, every: Sequence[StepRecord]) -> JsonObject:
    """A record as JSON without its time, engine and cost, its contents resolved (see `records`)."""
    from agl_notebook.replay.versions import CONTENT_PARTS, ContentIndex

    index = ContentIndex(every)
    data = record.to_json()
    data.pop("recorded_at", None)
    data.pop("engine", None)  # what answered: the one part a batched record has that a live one has not
    data.pop("cost", None)
    data["contents"] = {part: index.content(record, part)[1] for part in CONTENT_PARTS}
    return data
