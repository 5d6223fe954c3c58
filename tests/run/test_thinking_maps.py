"""Thinking everywhere a step goes: a map and a compare whose items think replay with no request and equal outputs;
a budget counts a thinking reply's output tokens once, and estimates a request with its kept blocks' size.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook.models.base import ModelRequest, ThinkingDelta, ToolCall, TurnEnd, Usage
from agl_notebook.models.prices import Rates
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run import _meter
from agl_notebook.transcript import Message, RawBlock, user_text


@dataclass(frozen=True)
class Note:
    text: str = describe("The note.")


@dataclass(frozen=True)
class Label:
    label: str = describe("A label.")


class Thinker:
    """Thinks before it reports a label: a signed thinking block, and a redacted one for even notes."""

    thinking = True
    network = False

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def backend_id(self, model: str) -> str:
        return "thinker:1"

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        n = int(request.messages[0].text.split('"text": "note ')[1].split('"')[0])
        yield ThinkingDelta(f"Note {n} ")
        yield ThinkingDelta("is about labels.")
        yield RawBlock({"type": "thinking", "thinking": f"Note {n} is about labels.", "signature": f"sig{n}=="})
        if n % 2 == 0:
            yield RawBlock({"type": "redacted_thinking", "data": f"ZW5j{n}=="})
        yield ToolCall(f"toolu_{n}", "report_label", {"label": f"L{n}" + ("" if request.effort is None else "e")})
        yield TurnEnd("tool_use", Usage(input_tokens=100, output_tokens=50))


def labeller(**settings: Any) -> Role[Label]:
    return Role(
        "labeller",
        "Label the note.",
        tools=[reporting_tool("report_label", "Hand back the label.", Label)],
        reminders=0,
        **settings,
    )


NOTES = [Note(f"note {i}") for i in range(6)]


def kept(store: MemoryStore) -> list[str]:
    return sorted(json.dumps(b.data) for r in store.records() for m in r.transcript for b in m.raw_blocks)


async def test_a_map_whose_items_think_replays_with_no_request_and_equal_outputs() -> None:
    store = MemoryStore()
    live = Thinker()
    results = await Run(model=live, store=store).map(labeller(thinking="adaptive"), NOTES, name="labels")
    assert [r.label for r in results] == [f"L{i}" for i in range(6)]
    assert len(live.requests) == 6 and all(r.thinking is not None for r in live.requests)
    assert len(kept(store)) == 9, "6 thinking blocks and 3 redacted ones recorded"

    replayer = Thinker()
    again = await Run(model=replayer, store=store, mode="replay").map(
        labeller(thinking="adaptive"), NOTES, name="labels"
    )
    assert replayer.requests == []
    assert list(again) == list(results)
    assert repr(again) == repr(results) and again._repr_html_() == results._repr_html_()
    assert [i.transcript for i in again.items] == [i.transcript for i in results.items]


async def test_a_compare_of_thinking_variants_replays_with_no_request_and_equal_outputs() -> None:
    store = MemoryStore()
    live = Thinker()
    variants = {"adaptive": labeller(thinking="adaptive"), "low": labeller(thinking="adaptive", effort="low")}
    grid = await Run(model=live, store=store).compare(variants, NOTES[:4])
    assert len(live.requests) == 8
    assert list(grid.variants[1].results) == [{"label": f"L{i}e"} for i in range(4)]
    replayer = Thinker()
    again = await Run(model=replayer, store=store, mode="replay").compare(variants, NOTES[:4])
    assert replayer.requests == []
    assert again.render_html() == grid.render_html() and again.render_text() == grid.render_text()


async def test_a_budget_counts_a_thinking_replys_output_tokens_once() -> None:
    rates = Rates(1, 1, 1, 1, 1)  # a dollar per million tokens of every kind
    billed = Thinker()
    billed.network = True  # a model that is billed: its requests pass the Run's account
    run = Run(model=billed, budget_usd=1.0, prices={"thinker:1": rates})
    await run.step(labeller(thinking="adaptive"), NOTES[1])
    # The reply's usage says 50 output tokens, its thinking among them: nothing is added for the thinking.
    assert run.spent_usd == pytest.approx((100 + 50) / 1_000_000)


def test_a_requests_estimate_counts_its_kept_blocks() -> None:
    rates = Rates(1, 1, 1, 1, 1)
    signature = "A" * 40_000  # signatures are long: they count toward the request's size
    thought = RawBlock({"type": "thinking", "thinking": "t" * 20_000, "signature": signature})
    plain = ModelRequest("m", "", (user_text("go"),), (), 1024)
    thinking = ModelRequest("m", "", (user_text("go"), Message("assistant", (thought,)), user_text("more")), (), 1024)
    grown = _meter.estimate(thinking, rates).likely - _meter.estimate(plain, rates).likely
    assert grown * 1_000_000 >= 60_000 / _meter.CHARACTERS_PER_TOKEN


async def test_a_map_item_whose_partial_record_cannot_be_resumed_fails_and_keeps_it() -> None:
    from agl_notebook.replay.records import Waiting

    store = MemoryStore()
    await Run(model=Thinker(), store=store).map(labeller(thinking="adaptive"), NOTES[:2], name="labels")
    finished = list(store.records())
    # The first item's record as the partial record of a step that waited, its thinking scrubbed when kept.
    unresumable = dataclasses.replace(
        finished[0], result=None, partial=Waiting("approval", "toolu_0", "report_label"), scrubbed_blocks=((1, 0),)
    )
    store = MemoryStore([unresumable, finished[1]])
    model = Thinker()
    results = await Run(model=model, store=store).map(labeller(thinking="adaptive"), NOTES[:2], name="labels")
    (failure,) = results.failures
    assert failure.index == 0 and "cannot be resumed" in str(failure.error)
    assert model.requests == [], "nothing sent; the second item replayed"
    assert store.get(unresumable.id) == unresumable, "the partial record is kept, no failure record over it"
