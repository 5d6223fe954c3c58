"""Forking a step at a turn (issue 32): the first turns from a record, no request and no handler for them, then
live, through the real ``anthropic`` client against the local fake; every refusal before any request; maps forked.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import pytest

from agl_notebook import Role, Run, ToolResult, describe, reporting_tool, tool
from agl_notebook.errors import InputError
from agl_notebook.events import Event, ModelSpent, OutputTextDelta, StepForked, StepReplayed
from agl_notebook.events import StepFinished as StepFinishedEvent
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import Thinking
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.roles import Claude
from tests.support.anthropic_api import BASE_URL, KEY, reply, stream_response, text, use

TURNS = 5


@dataclass
class Lookup:
    n: int = describe("Which page to look up.")


@dataclass
class Answer:
    text: str = describe("The answer.")


class Pager:
    """The fake Messages API: turn t (t replies so far in the request) looks page t up; turn 5 reports.

    It answers from the request alone, so a fork's requests get the replies a live run's would. Every request body
    is kept, and the instructions it was sent with, so a test sees exactly what reached the API.
    """

    def __init__(self, turns: int = TURNS) -> None:
        self.turns = turns
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        turn = done + 1
        if turn < self.turns:
            blocks: list[Any] = [text(f"Turn {turn}."), use(f"toolu_{turn}", "lookup", json.dumps({"n": turn}))]
        else:
            blocks = [use(f"toolu_{turn}", "answer", json.dumps({"text": f"done after {done} pages"}))]
        return stream_response(reply(*blocks, stop_reason="tool_use"))

    def model(self) -> AnthropicModel:
        client = anthropic.AsyncAnthropic(
            api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        )
        return AnthropicModel(client=client, model=Claude.OPUS)


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as sent, without the prompt-cache marks (the backend puts one on the last block of a request)."""
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]} for m in messages
    ]


class Handlers:
    """Counts the handler's calls, by page."""

    def __init__(self) -> None:
        self.pages: list[int] = []

    async def lookup(self, payload: Lookup) -> ToolResult:
        self.pages.append(payload.n)
        return ToolResult(f"page {payload.n} says {payload.n * 11}")


def pager_role(handlers: Handlers, instructions: str = "Read the pages, then answer.", **extra: Any) -> Role[Answer]:
    tools: list[Any] = [tool("lookup", "Look a page up.", Lookup, handlers.lookup)]
    tools += extra.pop("more_tools", [])
    return Role(
        name="reader",
        instructions=instructions,
        tools=[*tools, reporting_tool("answer", "Answer.", Answer)],
        **extra,
    )


async def recorded(pager: Pager, handlers: Handlers, store: MemoryStore) -> str:
    """Run the 5-turn step live once; the id of its record."""
    run = Run(model=pager.model(), store=store)
    assert await run.step(pager_role(handlers), "Question?") == Answer("done after 4 pages")
    assert len(pager.bodies) == TURNS and handlers.pages == [1, 2, 3, 4]
    (record,) = store.records()
    return record.id


async def test_a_fork_at_turn_3_asks_only_turns_4_on_each_carrying_turns_1_to_3_as_recorded() -> None:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    source = await recorded(pager, handlers, store)
    original = list(pager.bodies)
    pager.bodies.clear()
    handlers.pages.clear()
    events: list[Event] = []
    run = Run(model=pager.model(), store=store, on_event=events.append)
    changed = pager_role(handlers, "Read the pages carefully, then answer.")

    outcome = await run.step_outcome(changed, "Question?", fork_from=source, at_turn=3)

    assert outcome.result == Answer("done after 4 pages")
    assert len(pager.bodies) == 2  # turns 4 and 5, nothing of turns 1-3
    for body in pager.bodies:
        # Turns 1-3 (the input, three replies, three results: 7 messages) exactly as the live run sent them.
        # (The request's last message carries the prompt-cache mark, wherever the request ends.)
        assert plain(body["messages"][:7]) == plain(original[3]["messages"][:7])
        assert body["system"] != original[3]["system"]  # the role as it is now
    assert len(pager.bodies[0]["messages"]) == 7
    assert handlers.pages == [4]  # no handler of turns 1-3 ran; turn 4's did, live
    forked = [e for e in events if isinstance(e, StepForked)]
    assert forked == [StepForked("reader", source, 3)]
    assert outcome.usage.input_tokens == 20  # two live requests of 10 input tokens: the replayed ones cost nothing

    # The fork is a record of its own, beside the one it forked, and says what it forked.
    fork = next(r for r in store.records() if r.id != source)
    assert fork.engine == {"fork": {"from": source, "at_turn": 3}}
    assert "fork" in fork.parts and "fork" not in store.get(source).parts  # type: ignore[union-attr]
    assert fork.transcript[:7] == store.get(source).transcript[:7]  # type: ignore[union-attr]

    # Run again: it replays, no request, no handler, and the same point is told.
    pager.bodies.clear()
    replayed: list[Event] = []
    again = Run(model=pager.model(), store=store, on_event=replayed.append)
    assert await again.step(changed, "Question?", fork_from=source, at_turn=3) == Answer("done after 4 pages")
    assert pager.bodies == [] and handlers.pages == [4]
    assert next(e for e in replayed if isinstance(e, StepReplayed)).record_id == fork.id
    live_only = (StepReplayed, ModelSpent, OutputTextDelta)  # deltas are coalesced in a replay; nothing is spent
    assert [e for e in replayed if not isinstance(e, live_only)] == [e for e in events if not isinstance(e, live_only)]


async def test_the_input_may_be_left_out_and_a_record_handed_over() -> None:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    source = await recorded(pager, handlers, store)
    pager.bodies.clear()
    record = store.get(source)
    assert record is not None
    run = Run(model=pager.model(), store=MemoryStore())  # another store: the record comes whole
    assert await run.step(pager_role(handlers), fork_from=record, at_turn=4) == Answer("done after 4 pages")
    assert len(pager.bodies) == 1
    run = Run(model=pager.model(), store=store)
    assert await run.step(pager_role(handlers), fork_from=source, at_turn=0) == Answer("done after 4 pages")


async def test_questions_and_decisions_of_replayed_turns_are_kept_as_recorded() -> None:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    approved = pager_role(handlers)
    approved = dataclasses.replace(
        approved,
        tools=[tool("lookup", "Look a page up.", Lookup, handlers.lookup, approval="ask"), approved.tools[1]],
    )
    run = Run(model=pager.model(), store=store, approvals="approve")
    await run.step(approved, "Question?")
    (record,) = store.records()
    assert len(record.decisions) == 4
    pager.bodies.clear()
    handlers.pages.clear()
    asked: list[str] = []

    def decide(request: Any) -> str:
        asked.append(request.tool_call_id)
        return "approve"

    run = Run(model=pager.model(), store=store, approvals=decide)
    await run.step(approved, "Question?", fork_from=record.id, at_turn=2)
    assert handlers.pages == [3, 4] and len(pager.bodies) == 3
    assert asked == ["toolu_3", "toolu_4"]  # turns 1-2 were decided as recorded, nobody asked
    fork = next(r for r in store.records() if r.id != record.id)
    assert [d.tool_call_id for d in fork.decisions] == ["toolu_1", "toolu_2", "toolu_3", "toolu_4"]


# The refusals: each before any request -----------------------------------------------------------------------------


async def refused(role: Role[Any], store: MemoryStore, pager: Pager, **fork: Any) -> str:
    pager.bodies.clear()
    run = Run(model=pager.model(), store=store)
    with pytest.raises(InputError) as raised:
        await run.step(role, "Question?", **fork)
    assert pager.bodies == []  # nothing was sent
    return str(raised.value)


@pytest.fixture
async def forkable() -> tuple[Pager, Handlers, MemoryStore, str]:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    return pager, handlers, store, await recorded(pager, handlers, store)


async def test_a_fork_past_the_records_turns_is_refused_saying_how_many(forkable: Any) -> None:
    pager, handlers, store, source = forkable
    message = await refused(pager_role(handlers), store, pager, fork_from=source, at_turn=5)
    assert "it has 5 model turns" in message and "0 to 4" in message
    assert handlers.pages == [1, 2, 3, 4]


async def test_a_fork_on_another_backend_is_refused(forkable: Any) -> None:
    pager, handlers, store, source = forkable
    other = AnthropicModel(client=pager.model()._client, model=Claude.SONNET)
    run = Run(model=other, store=store)
    pager.bodies.clear()
    with pytest.raises(InputError, match=r"recorded with anthropic:claude-opus.*runs on anthropic:claude-sonnet"):
        await run.step(pager_role(handlers), "Question?", fork_from=source, at_turn=2)
    assert pager.bodies == []


async def test_a_fork_under_other_thinking_settings_is_refused(forkable: Any) -> None:
    pager, handlers, store, source = forkable
    thinking = pager_role(handlers, thinking=Thinking.adaptive())
    message = await refused(thinking, store, pager, fork_from=source, at_turn=2)
    assert "recorded without thinking" in message and "thinks (adaptive)" in message


async def test_a_fork_whose_role_lost_a_replayed_tool_is_refused(forkable: Any) -> None:
    pager, handlers, store, source = forkable
    without: Role[Answer] = Role(
        name="reader", instructions="Answer.", tools=[reporting_tool("answer", "Answer.", Answer)]
    )
    message = await refused(without, store, pager, fork_from=source, at_turn=2)
    assert "called 'lookup', which role 'reader' no longer has" in message
    # At turn 0 nothing is replayed, so nothing called it yet: the fork runs live (the guard answers the calls).
    run = Run(model=pager.model(), store=store)
    pager.bodies.clear()
    await run.step(without, "Question?", fork_from=source, at_turn=0)
    assert len(pager.bodies) == TURNS and handlers.pages == [1, 2, 3, 4]


async def test_a_fork_of_an_unknown_record_is_refused(forkable: Any) -> None:
    pager, handlers, store, _ = forkable
    message = await refused(pager_role(handlers), store, pager, fork_from="0" * 32, at_turn=1)
    assert "no record '00000000000000000000000000000000'" in message


async def test_a_fork_of_a_partial_or_failure_record_is_refused(forkable: Any) -> None:
    from agl_notebook.replay.records import RecordedFailure, Waiting

    pager, handlers, store, source = forkable
    record = store.get(source)
    assert record is not None
    partial = dataclasses.replace(record, id="p" * 32, result=None, partial=Waiting("approval", "toolu_2", "lookup"))
    failed = dataclasses.replace(
        record, id="f" * 32, transcript=(), failure=RecordedFailure("failed", "BudgetExceededError", "over")
    )
    for held in (partial, failed):
        run = Run(model=pager.model(), store=MemoryStore())
        pager.bodies.clear()
        with pytest.raises(InputError, match=r"partial|failure record"):
            await run.step(pager_role(handlers), "Question?", fork_from=held, at_turn=1)
        assert pager.bodies == []


async def test_a_fork_with_another_input_or_bad_options_is_refused(forkable: Any) -> None:
    pager, handlers, store, source = forkable
    run = Run(model=pager.model(), store=store)
    with pytest.raises(InputError, match="answered another input"):
        await run.step(pager_role(handlers), "Another question?", fork_from=source, at_turn=1)
    bad: Any
    for bad in (-1, 1.5, True, None):
        with pytest.raises(InputError, match="at_turn"):
            await run.step(pager_role(handlers), "Question?", fork_from=source, at_turn=bad)
    with pytest.raises(InputError, match="fork_from"):
        await run.step(pager_role(handlers), "Question?", at_turn=1)
    with pytest.raises(InputError, match="fork_from takes"):
        await run.step(pager_role(handlers), "Question?", fork_from=3, at_turn=1)  # type: ignore[call-overload]
    with pytest.raises(InputError, match=r"fork_from takes a record id .*, not an empty string"):
        await run.step(pager_role(handlers), "Question?", fork_from="  ", at_turn=1)
    with pytest.raises(InputError, match="takes the step's input"):
        await run.step(pager_role(handlers))
    assert pager.bodies[TURNS:] == []


async def test_a_fork_whose_tool_now_refuses_a_replayed_call_is_refused_before_the_request(forkable: Any) -> None:
    @dataclass
    class Strict:
        page: int = describe("Which page.")  # the recorded calls gave "n"

    pager, _, store, source = forkable

    async def strict(payload: Strict) -> ToolResult:
        raise AssertionError("a replayed call ran")

    role: Role[Answer] = Role(
        name="reader",
        instructions="Read.",
        tools=[tool("lookup", "Look a page up.", Strict, strict), reporting_tool("answer", "Answer.", Answer)],
    )
    message = await refused(role, store, pager, fork_from=source, at_turn=2)
    assert "no longer gives what was recorded at message 2" in message


# Maps -------------------------------------------------------------------------------------------------------------


async def test_a_100_item_map_forked_at_turn_2_asks_only_turns_3_on_and_runs_no_handler_of_turns_1_and_2() -> None:
    pager, handlers, store = Pager(turns=4), Handlers(), MemoryStore()
    inputs = [f"Question {i}?" for i in range(100)]
    run = Run(model=pager.model(), store=store)
    first = await run.map(pager_role(handlers), inputs, concurrency=16)
    assert list(first) == [Answer("done after 3 pages")] * 100
    assert len(pager.bodies) == 400 and sorted(handlers.pages) == sorted([1, 2, 3] * 100)
    pager.bodies.clear()
    handlers.pages.clear()

    run = Run(model=pager.model(), store=store)
    changed = pager_role(handlers, "Read the pages carefully, then answer.")
    forked = await run.map(changed, inputs, fork_from=first, at_turn=2, concurrency=16)

    assert list(forked) == [Answer("done after 3 pages")] * 100
    assert forked.key == f"{first.key}-at-turn-2"
    assert len(pager.bodies) == 200  # turns 3 and 4 of each item
    assert all(sum(m["role"] == "assistant" for m in b["messages"]) >= 2 for b in pager.bodies)
    assert handlers.pages == [3] * 100  # no handler of turns 1-2 ran
    # Each item forked its own input's record: the input each request carries is its item's.
    asked = sorted(b["messages"][0]["content"][0]["text"] for b in pager.bodies)
    assert asked == sorted(inputs * 2)

    # By name too, and replayed with no request at all.
    pager.bodies.clear()
    again = await Run(model=pager.model(), store=store).map(changed, inputs, fork_from=first.key, at_turn=2)
    assert list(again) == list(forked) and pager.bodies == [] and handlers.pages == [3] * 100


async def test_a_map_fork_of_a_map_never_run_fails_each_item_saying_so() -> None:
    pager, handlers = Pager(turns=4), Handlers()
    run = Run(model=pager.model(), store=MemoryStore())
    results = await run.map(pager_role(handlers), ["a", "b"], fork_from="nothing", at_turn=1)
    assert [type(r).__name__ for r in results] == ["MapItemError", "MapItemError"]
    assert "the map 'nothing' has no record" in str(results[0].error)
    assert pager.bodies == []
    with pytest.raises(InputError, match="at_turn"):
        await run.map(pager_role(handlers), ["a"], fork_from="nothing")


async def test_a_fork_from_a_steps_outcome_forks_its_record() -> None:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    run = Run(model=pager.model(), store=store)
    first = await run.step_outcome(pager_role(handlers), "Question?")
    pager.bodies.clear()
    await run.step(pager_role(handlers, "Again."), fork_from=first, at_turn=4)
    assert len(pager.bodies) == 1
    off = await Run(model=pager.model(), store=MemoryStore(), mode="off").step_outcome(pager_role(handlers), "Q?")
    with pytest.raises(InputError, match="keeps no record of that outcome"):
        await Run(model=pager.model(), store=MemoryStore()).step(pager_role(handlers), fork_from=off, at_turn=1)


def test_the_fork_line_and_the_fork_code_are_scrubbed_of_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from agl_notebook.notebook.render import StepTrace, render_html, render_text

    planted = "sk_ant_" + "forkplanted" * 3  # an identifier-shaped secret, built at run time
    trace = StepTrace(planted)
    trace.apply(StepForked(planted, "a" * 32, 2))
    trace.apply(StepFinishedEvent(planted, None, 3, False))
    trace.take_fork_points("b" * 32, 3)
    secrets = (planted,)
    for drawn in (render_html(trace, secrets), render_text(trace, secrets)):
        assert planted not in drawn and planted[:20] not in drawn
    html = render_html(trace, secrets)
    assert html.count('class="agl-fork-code"') == 2 and "at_turn=2)" in html


# Thinking and budgets ----------------------------------------------------------------------------------------------


async def test_a_fork_of_a_thinking_record_sends_its_kept_blocks_back_unchanged_and_other_settings_are_refused() -> (
    None
):
    from tests.run.test_thinking_records import Thinker, kept_json
    from tests.support.approvals import Summary, Weather, weather_role

    store = MemoryStore()
    first = Thinker()
    await Run(model=first, store=store, approvals="approve").step(weather_role(Weather(), approval=None), "Go")
    (record,) = store.records()
    assert len(first.requests) == 3

    fork = Thinker()
    result = await Run(model=fork, store=store).step(
        weather_role(Weather(), approval=None), fork_from=record.id, at_turn=1
    )
    assert result == Summary("Bergen: sunny for 2 days")
    assert len(fork.requests) == 2  # turns 2 and 3
    assert kept_json(fork.requests[0].messages) == [json.dumps(b) for b in first.sent[0]]  # byte for byte

    # The record's replies hold thinking: other settings (here the token limit) are refused, nothing sent.
    other = dataclasses.replace(weather_role(Weather(), approval=None), max_tokens=2048)
    refused_model = Thinker()
    with pytest.raises(InputError, match="recorded with thinking under other settings"):
        await Run(model=refused_model, store=store).step(other, fork_from=record.id, at_turn=1)
    assert refused_model.requests == []


async def test_a_forks_replayed_turns_cost_nothing_against_the_budget() -> None:
    pager, handlers, store = Pager(), Handlers(), MemoryStore()
    source = await recorded(pager, handlers, store)
    run = Run(model=pager.model(), store=store, budget_usd=1.0)
    await run.step(pager_role(handlers, "Again."), fork_from=source, at_turn=3)
    summary = run.summary()
    assert summary.requests == 2  # only the live turns passed the Run's account
    live = store.get(source)
    assert live is not None and live.cost is not None and live.cost.usd is not None
    fork = next(r for r in store.records() if r.id != source)
    assert fork.cost is not None and fork.cost.usd is not None
    assert fork.usage.input_tokens == 20 and fork.cost.usd < live.cost.usd
    assert run.spent_usd == pytest.approx(fork.cost.usd)


async def test_a_fork_waiting_for_a_person_keeps_a_partial_record_and_resumes_as_a_fork(tmp_path: Any) -> None:
    import asyncio
    import shutil

    from agl_notebook.replay.stores import JsonFileStore
    from tests.run.test_resume import Person

    pager, handlers = Pager(), Handlers()
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    base = pager_role(handlers)
    asking = dataclasses.replace(
        base, tools=[tool("lookup", "Look a page up.", Lookup, handlers.lookup, approval="ask"), base.tools[1]]
    )
    await Run(model=pager.model(), store=JsonFileStore(file), approvals="approve").step(asking, "Question?")
    (source,) = JsonFileStore(file).records()
    pager.bodies.clear()
    handlers.pages.clear()

    person = Person(approve=0)
    task = asyncio.ensure_future(
        Run(model=pager.model(), store=JsonFileStore(file), terminal=person).step(
            asking, fork_from=source.id, at_turn=2
        )
    )
    await asyncio.wait_for(person.waiting.wait(), 10)  # turn 3's call waits for approval
    shutil.copy(file, crashed)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial = next(r for r in JsonFileStore(crashed).records() if r.partial is not None)
    assert partial.engine == {"fork": {"from": source.id, "at_turn": 2}} and "fork" in partial.parts
    assert len(pager.bodies) == 1 and handlers.pages == []

    events: list[Event] = []
    run = Run(model=pager.model(), store=JsonFileStore(crashed), terminal=Person(approve=2), on_event=events.append)
    assert await run.step(asking, fork_from=source.id, at_turn=2) == Answer("done after 4 pages")
    assert len(pager.bodies) == 3 and handlers.pages == [3, 4]  # turn 3's reply came from the partial record
    assert [e for e in events if isinstance(e, StepForked)] == [StepForked("reader", source.id, 2)]


async def test_the_questions_of_replayed_turns_are_told_with_their_recorded_answers_never_asked() -> None:
    from agl_notebook import Screen, TextInput

    pager, store = Pager(), MemoryStore()
    runs: list[Run] = []
    pages: list[int] = []

    async def asking(payload: Lookup) -> ToolResult:
        pages.append(payload.n)
        note: str = await runs[-1].terminal.show(lambda: Screen(f"Why page {payload.n}?", [TextInput("Why")]))
        return ToolResult(f"page {payload.n}: {note}")

    def role(instructions: str) -> Role[Answer]:
        return Role(
            name="reader",
            instructions=instructions,
            tools=[tool("lookup", "Look a page up.", Lookup, asking), reporting_tool("answer", "Answer.", Answer)],
        )

    runs.append(Run(model=pager.model(), store=store, answers=["one", "two", "three", "four"]))
    await runs[-1].step(role("Read."), "Question?")
    (source,) = store.records()
    pager.bodies.clear()
    pages.clear()
    events: list[Event] = []
    runs.append(Run(model=pager.model(), store=store, answers=["live three", "live four"], on_event=events.append))
    await runs[-1].step(role("Read again."), fork_from=source.id, at_turn=2)
    assert pages == [3, 4]  # the handlers of turns 1-2 never ran, so never asked
    answered = [e.answer for e in events if e.type == "question.answered"]
    assert answered == ["one", "two", "live three", "live four"]  # turns 1-2's told as recorded
    fork = next(r for r in store.records() if r.id != source.id)
    assert [q.answer for q in fork.questions] == ["one", "two", "live three", "live four"]
    assert [b["messages"][4]["content"][0]["content"] for b in pager.bodies[:1]] == ["page 2: two"]


def test_a_fork_at_turn_0_draws_no_box_of_replayed_turns() -> None:
    from agl_notebook.notebook.render import StepTrace, render_html

    for at_turn, boxes in ((0, 0), (2, 1)):
        trace = StepTrace("reader")
        trace.apply(StepForked("reader", "a" * 32, at_turn))
        drawn = render_html(trace, ())
        assert drawn.count('class="agl-replayed"') == boxes
        assert drawn.count("<div") == drawn.count("</div>")  # the box, when drawn, is closed where the fork began


@pytest.mark.parametrize("name", ["class", "None", "await", "reader-v2", "2nd", "reader"])
def test_the_fork_code_is_python_whatever_the_role_is_called(name: str) -> None:
    """The snippet names the role by its name when that is a variable name; a keyword is not one."""
    import ast

    from agl_notebook.notebook.render import fork_code

    code = fork_code(name, "a" * 32, 2)
    called = ast.parse(code).body[0].value.value  # type: ignore[attr-defined]
    assert isinstance(called.args[0], ast.Name)
    assert called.args[0].id == (name if name == "reader" else "role")
