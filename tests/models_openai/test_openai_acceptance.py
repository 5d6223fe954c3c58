"""Issue 34's clauses not shown elsewhere, through the real ``openai`` client against the fake Chat Completions.

A step with cached tokens and one with no usage replayed with no request; ``length`` inside a call recording nothing;
a budget refusing before any request; an approval and a question pending kept as partial records and resumed;
reasoning text drawn in the step's view as Claude's thinking is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.errors import BudgetExceededError, ModelOutputTruncatedError, PriceUnknownError
from agl_notebook.models.base import Usage
from agl_notebook.models.openai import OPENAI_BASE_URL, OpenAIModel
from agl_notebook.notebook.view import NotebookView
from agl_notebook.replay.records import Waiting
from agl_notebook.replay.stores import JsonFileStore, MemoryStore
from tests.models_openai.test_openai_backend import record_then_replay, researcher
from tests.notebook.test_view_thinking import final_bundle, thinking_blocks
from tests.run.test_resume import Person, saved, wait_then_crash
from tests.support.approvals import ASKED, Summary, Weather, weather_role
from tests.support.openai_api import call, chat, reply, usage_json
from tests.support.steps import Answer
from tests.support.widgets import FakeDisplay


def report(summary: str, *, send_usage: bool = True, usage: dict[str, Any] | None = None) -> list[str]:
    return reply(calls=(call(0, "c", "report", json.dumps({"summary": summary})),), send_usage=send_usage, usage=usage)


async def test_a_step_with_cached_tokens_records_them_apart_and_replays_with_no_request() -> None:
    fake = chat(report("cached", usage=usage_json(1_000, 40, cached=600)))
    live, store = await record_then_replay(fake, researcher(), "x")
    assert live == Answer("cached")
    (record,) = list(store.records())
    assert record.usage == Usage(input_tokens=400, output_tokens=40, cache_read_input_tokens=600)


async def test_a_step_whose_server_sends_no_usage_replays_with_no_request_and_still_says_usage_unknown() -> None:
    fake = chat(report("silent", send_usage=False))
    live, store = await record_then_replay(fake, researcher(), "x")
    assert live == Answer("silent")
    (record,) = list(store.records())
    assert record.cost is not None and record.cost.words() == "usage unknown"


async def test_length_inside_a_call_fails_the_step_and_records_nothing() -> None:
    fake = chat(reply(calls=(call(0, "c", "report", '{"summary": "cut sh'),), finish="length"))
    store = MemoryStore()
    with pytest.raises(ModelOutputTruncatedError, match="'report'"):
        await Run(model=fake.model(), store=store).step(researcher(), "x")
    assert not list(store.records()) and len(fake.requests) == 1


async def test_a_budget_refuses_before_any_request_an_unpriced_model_and_one_it_cannot_afford() -> None:
    unpriced = chat()  # nothing queued: a request would fail the test
    store = MemoryStore()
    local = OpenAIModel("llama3", client=unpriced.client(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(PriceUnknownError, match=re.escape("openai:llama3@http://127.0.0.1:9/v1")):
        await Run(model=local, store=store, budget_usd=1.0).step(researcher(), "x")
    hosted = chat()
    # gpt-4.1 on OpenAI's host is priced ($8 per million output tokens): 4,096 of them do not fit in $0.001.
    priced = OpenAIModel("gpt-4.1", client=hosted.client(base_url=OPENAI_BASE_URL))
    with pytest.raises(BudgetExceededError):
        await Run(model=priced, store=store, budget_usd=0.001).step(researcher(), "x")
    assert not unpriced.requests and not hosted.requests and not list(store.records())


async def test_an_approval_pending_is_kept_as_a_partial_record_and_resumes_with_no_request_until_answered(
    tmp_path: Path,
) -> None:
    bergen = {"place": {"city": "Bergen"}, "days": 2}
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    fake = chat(
        reply(calls=(call(0, "w1", "weather", json.dumps(ASKED)),)),
        reply(calls=(call(0, "w2", "weather", json.dumps(bergen)),)),
    )
    handler = Weather()
    first = Person(approve=1)
    run = Run(model=fake.model(), terminal=first, store=JsonFileStore(file))
    await wait_then_crash(run, weather_role(handler), first, file, crashed)
    assert first.asked == ["approve weather", "approve weather"] and len(fake.requests) == 2
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("approval", "w2", "weather")
    assert partial.backend == "openai:gpt-4.1@http://chat.test:80/v1"

    # A new process: only the pending approval is asked again, before any request; then one request, live.
    handler.calls = []
    after = chat(reply(calls=(call(0, "r", "report", '{"text": "Bergen: sunny for 2 days"}'),)))
    again = Person(approve=1, counts=lambda: (len(after.requests), len(handler.calls)))
    resumed = await Run(model=after.model(), terminal=again, store=JsonFileStore(crashed)).step(
        weather_role(handler), "Go"
    )
    assert again.asked == ["approve weather"] and again.at_ask == [(0, 0)]
    assert resumed == Summary("Bergen: sunny for 2 days") and len(after.requests) == 1
    (record,) = saved(crashed)
    assert record.partial is None
    nothing = chat()
    replay = Run(model=nothing.model(), terminal=Person(), store=JsonFileStore(crashed), mode="replay")
    assert await replay.step(weather_role(handler), "Go") == resumed and not nothing.requests


@pytest.mark.usefixtures("sent")  # widgets over recording comms (tests/conftest.py)
async def test_reasoning_text_is_drawn_as_thinking_in_the_step_s_view_live_and_replayed_alike() -> None:
    fake = chat(reply(calls=(call(0, "c", "report", '{"summary": "s"}'),), reasoning=("Weigh <both> ", "sides.")))
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    run = Run(model=fake.model(), view=lambda role: NotebookView(role, display=live_display))
    assert await run.step(researcher(), "x") == Answer("s")
    nothing = chat()
    replay = Run(
        model=nothing.model(),
        store=run.store,
        mode="replay",
        view=lambda role: NotebookView(role, display=replay_display, live=False),
    )
    assert await replay.step(researcher(), "x") == Answer("s") and not nothing.requests
    live, replayed = final_bundle(live_display), final_bundle(replay_display)
    (block,) = thinking_blocks(live["text/html"])
    assert "<summary>Thinking</summary>" in block and " open" not in block  # collapsed, as Claude's thinking
    assert "Weigh &lt;both&gt; sides." in block
    assert "Weigh" not in live["text/plain"]
    assert replayed == live


async def test_a_question_pending_is_kept_as_a_partial_record_and_only_it_is_asked_again(tmp_path: Path) -> None:
    """A tool's question pending on this backend: kept as a partial record; a new process resumes with no request
    until it is answered, asks only the pending question, and runs the asking handler again (as on Claude's)."""
    from tests.run.test_resume import trip_role

    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    rome = json.dumps({"city": "Rome"})
    fake = chat(reply(calls=(call(0, "c1", "lookup", rome),)), reply(calls=(call(0, "c2", "plan", rome),)))
    lookups: list[str] = []
    entered: list[str] = []
    box: list[Run] = []
    first = Person(answers=("May 3",))
    box.append(Run(model=fake.model(), terminal=first, store=JsonFileStore(file)))
    await wait_then_crash(box[0], trip_role(box, lookups, entered), first, file, crashed)
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("question", "c2", "plan")
    assert partial.backend == "openai:gpt-4.1@http://chat.test:80/v1"

    lookups[:], entered[:] = [], []
    after = chat(reply(calls=(call(0, "r", "report", json.dumps({"text": "Rome on May 3 for 800 EUR"})),)))
    again = Person(answers=("800 EUR",), counts=lambda: (len(after.requests), len(lookups)))
    box[0] = Run(model=after.model(), terminal=again, store=JsonFileStore(crashed))
    result = await box[0].step(trip_role(box, lookups, entered), "Go")
    assert again.asked == ["What is your budget?"] and again.at_ask == [(0, 0)]
    assert lookups == [] and entered == ["Rome"] and len(after.requests) == 1
    assert result == Summary("Rome on May 3 for 800 EUR")
    (record,) = saved(crashed)
    assert record.partial is None and [q.answer for q in record.questions] == ["May 3", "800 EUR"]
