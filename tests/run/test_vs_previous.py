"""A map against its previous run, through the real ``anthropic`` client over the local fake API.

A 50-item map runs, its role's instructions are edited, and it runs again: the fake answers 10 known items
differently the second time (5 now right that were wrong, 5 now wrong that were right) and fails 2 others
outright. The summary counts exactly those, ``vs_previous()`` has 50 pairs, and a replay draws the same.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx2
import pytest

from agl_notebook import Claude, Role, Run, describe, reporting_tool
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run._map_state import render_map_html, render_map_text
from tests.support.anthropic_api import fail, reply, stream_response, use

V1 = "Say whether the number is even.\nAnswer with the tool."
V2 = "Say whether the number is even.\nThink before you answer.\nAnswer with the tool."
IMPROVED = {1, 3, 5, 7, 9}  # wrong in the first run, right in the second
REGRESSED = {20, 22, 24, 26, 28}  # right in the first run, wrong in the second
FAILING = {40, 41}  # right in the first run, a server error (then no retry left) in the second


@dataclass
class Parity:
    even: bool = describe("whether the number is even")


def checker(instructions: str) -> Role[Parity]:
    return Role("parity", instructions, [reporting_tool("answer", "Hand back the answer.", Parity)])


class FakeParityAPI:
    """Answers by the instructions it is sent: v1 wrong on IMPROVED, v2 wrong on REGRESSED and failing on FAILING."""

    def __init__(self) -> None:
        self.requests = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        body = json.loads(request.content)
        system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
        n = int(body["messages"][0]["content"][0]["text"].split()[-1])
        second = "Think before" in system
        if second and n in FAILING:
            return fail(400, "invalid_request_error", "the fake refuses this item")()
        right = n % 2 == 0
        wrong = (n in IMPROVED) if not second else (n in REGRESSED)
        answer = right != wrong
        events = reply(use(f"toolu_{self.requests}", "answer", json.dumps({"even": answer})), stop_reason="tool_use")
        return stream_response(events)

    def model(self) -> AnthropicModel:
        import anthropic

        client = anthropic.AsyncAnthropic(
            api_key="test-key-not-real",
            base_url="http://anthropic.test",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )
        return AnthropicModel(client=client, model=Claude.SONNET)


def right(number: str, result: Parity) -> bool:
    return result.even == (int(number.split()[-1]) % 2 == 0)


INPUTS = [f"number {n}" for n in range(50)]


async def test_a_map_run_again_after_an_edit_counts_exactly_the_items_the_fake_answered_differently() -> None:
    fake = FakeParityAPI()
    store = MemoryStore()
    first = await Run(model=fake.model(), store=store).map(checker(V1), INPUTS, score=right, on_error="keep")
    assert fake.requests == 50 and first.compared is None, "a first run has no previous run"
    second = await Run(model=fake.model(), store=store).map(checker(V2), INPUTS, score=right, on_error="keep")
    assert fake.requests == 100
    compared = second.compared
    assert compared is not None and compared.paired == 50
    assert compared.counts == {
        "improved": 5,
        "regressed": 5,
        "unchanged": 38,
        "changed": 0,
        "newly failing": 2,
        "newly passing": 0,
        "still failing": 0,
    }
    assert compared.before is not None and compared.after is not None and compared.difference is not None
    assert compared.before.mean == pytest.approx(43 / 48) and compared.before.n == 48  # the 2 failing have no score now
    assert compared.after.mean == pytest.approx(43 / 48)
    assert compared.difference.interval.n == 48
    frame = second.vs_previous()
    assert len(frame) == 50
    outcomes = dict(zip(frame["index"], frame["outcome"], strict=True))
    assert {i for i, o in outcomes.items() if o == "improved"} == IMPROVED
    assert {i for i, o in outcomes.items() if o == "regressed"} == REGRESSED
    assert {i for i, o in outcomes.items() if o == "newly failing"} == FAILING
    assert frame.set_index("index").loc[1, "previous_result"] == {"even": True}
    text = render_map_text(second._state, ())
    assert "against the previous run (50 items paired): 5 improved, 5 regressed, 38 unchanged, 2 newly failing" in text
    assert "mean score before 0.90 (95% CI" in text and "after 0.90 (95% CI" in text
    assert "No difference between the previous run and this run can be told apart from noise at n = 48" in text
    lines = text.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("# | input")))
    shown_first = [int(line.split(" | ")[0]) for line in lines[header + 1 : header + 13]]
    assert set(shown_first) == IMPROVED | REGRESSED | FAILING, "the changed items are listed first"
    assert "previous" in lines[header] and "previous score" in lines[header]

    # A replay (mode replay, no model): the same table, the same comparison, no request.
    replayed = await Run(model=fake.model(), store=store, mode="replay").map(
        checker(V2), INPUTS, score=right, on_error="keep"
    )
    assert fake.requests == 100
    assert render_map_text(replayed._state, ()) == text
    assert render_map_html(replayed._state, ()) == render_map_html(second._state, ())
    assert len(replayed.vs_previous()) == 50


async def test_an_unedited_map_that_replays_has_no_previous_run_to_compare() -> None:
    fake = FakeParityAPI()
    store = MemoryStore()
    await Run(model=fake.model(), store=store).map(checker(V1), INPUTS[:5], score=right)
    again = await Run(model=fake.model(), store=store).map(checker(V1), INPUTS[:5], score=right)
    assert fake.requests == 5 and again.compared is None
    assert "previous" not in render_map_text(again._state, ())


def test_pairing_10000_items_with_their_previous_versions_takes_under_a_second() -> None:
    from agl_notebook.replay.records import StepRecord
    from agl_notebook.replay.versions import VersionIndex

    records = [
        StepRecord(
            id=f"{i:032x}",
            parts={"input": f"in{i}"},
            occurrence=0,
            role="r",
            backend="b",
            input=i,
            result=i,
            transcript=(),
        )
        for i in range(10_000)
    ]
    started = time.perf_counter()
    index = VersionIndex(records)
    found = [index.previous("r", f"in{i}", 0, "new") for i in range(10_000)]
    took = time.perf_counter() - started
    assert all(f is not None and f.result == i for i, f in enumerate(found))
    assert took < 1.0, took


@pytest.mark.parametrize("huge", [float("inf"), 1e308, 10**400])
async def test_a_previous_result_scored_infinite_or_too_large_gets_no_previous_score(huge: object) -> None:
    """As a score of this run's results is refused when no mean could sum it, so is the previous run's."""
    from agl_notebook import ScriptedModel

    def model(even: bool) -> ScriptedModel:
        return ScriptedModel(lambda request: {"calls": [{"name": "answer", "args": {"even": even}}]})

    def score(n: str, result: Parity) -> object:
        return huge if not result.even else 1

    store = MemoryStore()
    await Run(model=model(False), store=store).map(checker(V1), ["1", "2", "3"])
    results = await Run(model=model(True), store=store).map(checker(V2), ["1", "2", "3"], score=score)
    assert [item.previous.score for item in results.items if item.previous is not None] == [None] * 3
    assert "against the previous run (3 items paired)" in render_map_text(results._state)
