"""Partial records and resume without a notebook: a step waiting for a person keeps its progress in a JSON file;
the process dies (the file copied as it was while the step waited); a new Run on that file resumes the step with no
model request and no handler call for the calls that finished, shows the pending approval or question again, and
goes on live. A Ctrl-C while waiting keeps nothing; scripted answers keep no partial record.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import (
    Approve,
    Edit,
    Role,
    Run,
    Screen,
    ScriptedModel,
    TextInput,
    ToolResult,
    describe,
    reporting_tool,
    tool,
)
from agl_notebook._scope import Decision
from agl_notebook.approvals import ApprovalRequest, decide
from agl_notebook.errors import ReplayMissError
from agl_notebook.replay.records import StepRecord, Waiting, block_from_json, record_from_json
from agl_notebook.replay.stores import JsonFileStore, MemoryStore
from agl_notebook.terminals import Terminal
from tests.support.approvals import ASKED, Forecast, Summary, Weather


class Counted:
    """A scripted model that counts its requests."""

    def __init__(self, *turns: list[dict[str, Any]]) -> None:
        self.turns = turns
        self.requests = 0
        self.model = ScriptedModel(self.reply)

    def reply(self, request: Any) -> dict[str, Any]:
        self.requests += 1
        turn = (len(request.messages) - 1) // 2
        if turn < len(self.turns):
            return {"calls": self.turns[turn]}
        return {"calls": [{"name": "report", "args": {"text": request.messages[-1].content[0].content}}]}


class Person(Terminal):
    """Answers and approves as scripted, then waits for ever (a person who walked away), noting what was asked."""

    def __init__(
        self, answers: tuple[str, ...] = (), approve: int = 0, *, counts: Callable[[], tuple[int, int]] | None = None
    ) -> None:
        super().__init__()
        self.answers = list(answers)
        self.approvals_left = approve
        self.asked: list[str] = []
        self.waiting = asyncio.Event()
        self.counts = counts  # (model requests, handler calls) so far, read whenever something is asked
        self.at_ask: list[tuple[int, int]] = []

    def _note(self, what: str) -> None:
        self.asked.append(what)
        if self.counts is not None:
            self.at_ask.append(self.counts())

    async def ask(self, screen: Screen[Any]) -> Any:
        self._note(screen.text)
        if self.answers:
            return screen.validate([self.answers.pop(0)])
        self.waiting.set()
        await asyncio.Future()  # never answered
        raise AssertionError("unreachable")

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        self._note(f"approve {request.tool}")
        if self.approvals_left:
            self.approvals_left -= 1
            return decide(request, Approve())
        self.waiting.set()
        await asyncio.Future()
        raise AssertionError("unreachable")


async def wait_then_crash(run: Run, role: Role[Any], person: Person, file: Path, copy: Path) -> None:
    """Run the step until it waits for the person; copy the file as it is then (the crash); end the step."""
    task = asyncio.ensure_future(run.step(role, "Go"))
    await asyncio.wait_for(person.waiting.wait(), 10)
    shutil.copy(file, copy)
    task.cancel()  # the Ctrl-C of a person at a console: a deliberate interrupt
    with pytest.raises(asyncio.CancelledError):
        await task


def saved(path: Path) -> list[StepRecord]:
    return list(block_from_json(json.loads(path.read_text()), where=str(path)).records)


# An approval pending -------------------------------------------------------------------------------------------

OSLO, BERGEN = ASKED, {"place": {"city": "Bergen"}, "days": 2}


def weather_role(handler: Any) -> Role[Summary]:
    return Role(
        name="forecaster",
        instructions="Forecast.",
        tools=[
            tool("weather", "Get the forecast.", Forecast, handler, approval="ask"),
            reporting_tool("report", "Report.", Summary),
        ],
    )


async def test_a_restart_with_an_approval_pending_resumes_with_no_model_request_and_no_handler_call(
    tmp_path: Path,
) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    model = Counted([{"name": "weather", "args": OSLO}], [{"name": "weather", "args": BERGEN}])
    handler = Weather()
    first = Person(approve=1)
    run = Run(model=model.model, terminal=first, store=JsonFileStore(file))
    await wait_then_crash(run, weather_role(handler), first, file, crashed)
    assert first.asked == ["approve weather", "approve weather"]
    assert (model.requests, len(handler.calls)) == (2, 1)
    assert saved(file) == [], "the Ctrl-C kept nothing"
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("approval", "toolu_01_0", "weather")
    assert partial.result is None
    assert [d.decision for d in partial.decisions] == ["approve"]
    assert [m.role for m in partial.transcript] == ["user", "assistant", "user", "assistant"]

    # The new process: the same step on the file as the crash left it.
    model.requests, handler.calls = 0, []
    again = Person(approve=1, counts=lambda: (model.requests, len(handler.calls)))
    run = Run(model=model.model, terminal=again, store=JsonFileStore(crashed))
    events: list[str] = []
    run.add_sink(lambda e: events.append(e.type))
    result = await run.step(weather_role(handler), "Go")
    assert again.asked == ["approve weather"], "only the pending approval is shown again"
    assert again.at_ask == [(0, 0)], "before it: model requests 0, handler calls 0"
    assert len(handler.calls) == 1 and handler.calls[0].place.city == "Bergen", "one handler call after approving"
    assert model.requests == 1, "then live: the report"
    assert result == Summary("Bergen: sunny for 2 days")
    assert events.count("approval.requested") == 2 and events.count("approval.decided") == 2
    (record,) = saved(crashed)
    assert record.partial is None, "the finished record replaced the partial one"
    assert [d.tool_call_id for d in record.decisions] == ["toolu_00_0", "toolu_01_0"]
    assert "partial" not in record.to_json()

    # And now it replays as any finished step: nobody asked, no model, no handler.
    handler.calls = []
    replay = Run(model=model.model, terminal=Person(), store=JsonFileStore(crashed), mode="replay")
    replayed = await replay.step(weather_role(handler), "Go")
    assert replayed == result and handler.calls == []


# A question pending --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trip:
    city: str = describe("Where to.")


def trip_role(run_box: list[Run], lookups: list[str], entered: list[str]) -> Role[Summary]:
    async def lookup(trip: Trip) -> ToolResult:
        lookups.append(trip.city)
        return ToolResult(f"{trip.city}: 3 hotels")

    async def plan(trip: Trip) -> ToolResult:
        entered.append(trip.city)  # work before the questions runs again on resume
        run = run_box[0]
        when: str = await run.terminal.show(lambda: Screen("When do you leave?", [TextInput("Date")]))
        budget: str = await run.terminal.show(lambda: Screen("What is your budget?", [TextInput("Budget")]))
        return ToolResult(f"{trip.city} on {when} for {budget}")

    return Role(
        name="planner",
        instructions="Plan.",
        tools=[
            tool("lookup", "Find hotels.", Trip, lookup),
            tool("plan", "Plan the trip.", Trip, plan),
            reporting_tool("report", "Report.", Summary),
        ],
    )


async def test_a_restart_with_a_question_pending_enters_the_handler_again_and_asks_only_the_pending_question(
    tmp_path: Path,
) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    model = Counted([{"name": "lookup", "args": {"city": "Rome"}}], [{"name": "plan", "args": {"city": "Rome"}}])
    lookups: list[str] = []
    entered: list[str] = []
    box: list[Run] = []
    first = Person(answers=("May 3",))
    box.append(Run(model=model.model, terminal=first, store=JsonFileStore(file)))
    await wait_then_crash(box[0], trip_role(box, lookups, entered), first, file, crashed)
    assert first.asked == ["When do you leave?", "What is your budget?"]
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("question", "toolu_01_0", "plan")
    assert [(q.tool_call_id, q.text, q.answer) for q in partial.questions] == [
        ("toolu_01_0", "When do you leave?", "May 3")
    ]

    model.requests, lookups[:], entered[:] = 0, [], []
    again = Person(answers=("800 EUR",), counts=lambda: (model.requests, len(lookups)))
    box[0] = Run(model=model.model, terminal=again, store=JsonFileStore(crashed))
    result = await box[0].step(trip_role(box, lookups, entered), "Go")
    assert again.asked == ["What is your budget?"], "the earlier answer is not asked again"
    assert again.at_ask == [(0, 0)], "model requests 0 and no handler call of the finished call before it"
    assert lookups == [], "the finished call's handler did not run"
    assert entered == ["Rome"], "the asking handler was entered once more"
    assert result == Summary("Rome on May 3 for 800 EUR")
    (record,) = saved(crashed)
    assert record.partial is None
    assert [(q.text, q.answer) for q in record.questions] == [
        ("When do you leave?", "May 3"),
        ("What is your budget?", "800 EUR"),
    ]


# What is kept, and when ----------------------------------------------------------------------------------------


class Spy(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.partials: list[StepRecord] = []

    def put_partial(self, record: StepRecord) -> None:
        self.partials.append(record)
        super().put_partial(record)


async def test_scripted_answers_keep_no_partial_record() -> None:
    store = Spy()
    model = Counted([{"name": "weather", "args": OSLO}])
    await Run(model=model.model, approvals="approve", store=store).step(weather_role(Weather()), "Go")
    assert store.partials == []
    assert [r.partial for r in store.records()] == [None]


async def test_a_partial_record_is_never_replayed_as_finished(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    model = Counted([{"name": "weather", "args": OSLO}])
    person = Person()
    await wait_then_crash(
        Run(model=model.model, terminal=person, store=JsonFileStore(file)),
        weather_role(Weather()),
        person,
        file,
        crashed,
    )
    handler = Weather()
    replay = Run(model=model.model, terminal=Person(), store=JsonFileStore(crashed), mode="replay")
    with pytest.raises(ReplayMissError, match=r"is partial: the step was waiting for a decision on its call to 'w"):
        await replay.step(weather_role(handler), "Go")
    assert handler.calls == []
    (partial,) = saved(crashed)
    assert partial.partial is not None, "left as it was"


async def test_a_step_failing_after_it_waited_discards_its_partial_record() -> None:
    store = Spy()

    async def broken(forecast: Any) -> ToolResult:
        raise RuntimeError("the service is down")

    run = Run(model=Counted([{"name": "weather", "args": OSLO}]).model, terminal=Person(approve=1), store=store)
    with pytest.raises(RuntimeError):
        await run.step(weather_role(broken), "Go")
    assert len(store.partials) == 1, "kept while it waited"
    assert store.records() == (), "discarded when it failed"


def test_a_partial_record_reads_back_as_written() -> None:
    record = StepRecord(
        id="r1",
        parts={"role": "x"},
        occurrence=0,
        role="r",
        backend="scripted:0",
        input="Go",
        result=None,
        transcript=(),
        partial=Waiting("question", "toolu_00_0", "plan"),
    )
    data = record.to_json()
    assert data["partial"] == {"waiting": "question", "tool_call_id": "toolu_00_0", "tool": "plan"}
    assert data["kind"] == "step" and data["format"] == 1, "a version 1 record, as old readers expect"
    assert record_from_json(data) == record
    with pytest.raises(Exception, match=r"record.partial.waiting: expected 'approval' or 'question', got 'lunch'"):
        record_from_json({**data, "partial": {"waiting": "lunch", "tool_call_id": "t", "tool": "plan"}})


# An edited call whose handler then asks: resumed, the edit holds and nobody is asked to approve again --------------


class Editor(Person):
    """Edits the call (to Bergen, 2 days), then answers like a `Person`."""

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        self._note(f"approve {request.tool}")
        return decide(request, Edit({"place": {"city": "Bergen"}, "days": 2}))


async def test_a_call_edited_before_its_handler_asked_runs_edited_again_without_asking_to_approve(
    tmp_path: Path,
) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    got: list[Forecast] = []
    box: list[Run] = []

    async def forecast(payload: Forecast) -> ToolResult:
        got.append(payload)
        units: str = await box[0].terminal.show(lambda: Screen("Which units?", [TextInput("Units")]))
        return ToolResult(f"{payload.place.city} in {units}")

    model = Counted([{"name": "weather", "args": OSLO}])
    first = Editor()
    box.append(Run(model=model.model, terminal=first, store=JsonFileStore(file)))
    await wait_then_crash(box[0], weather_role(forecast), first, file, crashed)
    assert first.asked == ["approve weather", "Which units?"]
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("question", "toolu_00_0", "weather")
    assert [d.decision for d in partial.decisions] == ["edit"]

    got.clear()
    again = Person(answers=("metric",))
    box[0] = Run(model=model.model, terminal=again, store=JsonFileStore(crashed))
    result = await box[0].step(weather_role(forecast), "Go")
    assert again.asked == ["Which units?"], "the edit holds: nobody is asked to approve the call again"
    assert [g.place.city for g in got] == ["Bergen"], "the handler got the edited payload again"
    assert result is not None and result.text.startswith("The person edited your arguments before the call ran")
    assert result.text.endswith("Bergen in metric")
    (record,) = saved(crashed)
    assert record.partial is None and [d.decision for d in record.decisions] == ["edit"]


def test_recorded_answers_are_given_in_order_and_end_at_another_question() -> None:
    from agl_notebook._scope import Question, StepScope

    scope = StepScope("r", lambda e: None)
    scope.resumed = {"c1": [Question("A?", ("a",), 1), Question("B?", ("b",), 2), Question("C?", ("c",), 3)]}
    assert scope.resumed_answer("c1", "A?", ("a",)) == Question("A?", ("a",), 1)
    assert scope.resumed_answer("c2", "B?", ("b",)) is None, "another call's answers are its own"
    assert scope.resumed_answer("c1", "Changed?", ("b",)) is None, "a different question is asked"
    assert scope.resumed_answer("c1", "C?", ("c",)) is None, "and every later one too"


# The Anthropic backend, through the real client over the fake API ------------------------------------------------


async def test_a_resumed_step_on_the_anthropic_backend_sends_its_first_live_request_with_the_whole_transcript(
    tmp_path: Path,
) -> None:
    from agl_notebook.models.anthropic import AnthropicModel
    from tests.support.anthropic_api import api, reply, use

    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    oslo, bergen = json.dumps(OSLO), json.dumps(BERGEN)
    first_api = api(
        reply(use("toolu_a", "weather", oslo[:9], oslo[9:]), stop_reason="tool_use"),
        reply(use("toolu_b", "weather", bergen), stop_reason="tool_use"),
    )
    handler = Weather()
    person = Person(approve=1)
    run = Run(
        model=AnthropicModel(model="claude-test", client=first_api.client()), terminal=person, store=JsonFileStore(file)
    )
    await wait_then_crash(run, weather_role(handler), person, file, crashed)
    assert len(first_api.requests) == 2

    report = json.dumps({"text": "Bergen: sunny for 2 days"})
    second_api = api(reply(use("toolu_c", "report", report), stop_reason="tool_use"))
    handler.calls = []
    again = Person(approve=1, counts=lambda: (len(second_api.requests), len(handler.calls)))
    run = Run(
        model=AnthropicModel(model="claude-test", client=second_api.client()),
        terminal=again,
        store=JsonFileStore(crashed),
    )
    result = await run.step(weather_role(handler), "Go")
    assert again.at_ask == [(0, 0)], "no request and no handler call before the approval showed again"
    assert result == Summary("Bergen: sunny for 2 days") and len(handler.calls) == 1
    (body,) = second_api.bodies()
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["id"] for m in messages[1::2] for b in m["content"] if b["type"] == "tool_use"] == ["toolu_a", "toolu_b"]
    assert [b["tool_use_id"] for m in messages[2::2] for b in m["content"] if b["type"] == "tool_result"] == [
        "toolu_a",
        "toolu_b",
    ]
    (record,) = saved(crashed)
    assert record.partial is None and record.usage.input_tokens == 30, "the tokens of both runs"


async def test_steps_waiting_together_each_keep_their_partial_record(tmp_path: Path) -> None:
    # One prompt at a time: the second step waits for the first one's to be answered, which is waiting too.
    file = tmp_path / "records.json"
    person = Person()
    run = Run(model=Counted([{"name": "weather", "args": OSLO}]).model, terminal=person, store=JsonFileStore(file))
    tasks = [asyncio.ensure_future(run.step(weather_role(Weather()), label)) for label in ("Go", "Again")]
    await asyncio.wait_for(person.waiting.wait(), 10)
    await asyncio.sleep(0.05)
    assert sorted(str(r.input) for r in saved(file) if r.partial is not None) == ["Again", "Go"]
    assert person.asked == ["approve weather"], "the second step's prompt is not shown yet"
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# Partial records beside other records ----------------------------------------------------------------------------


async def test_discarding_a_partial_record_keeps_what_another_writer_put_in_the_file_meanwhile(tmp_path: Path) -> None:
    file = tmp_path / "records.json"
    person = Person()
    waiting = Run(model=Counted([{"name": "weather", "args": OSLO}]).model, terminal=person, store=JsonFileStore(file))
    task = asyncio.ensure_future(waiting.step(weather_role(Weather()), "Go"))
    await asyncio.wait_for(person.waiting.wait(), 10)
    await asyncio.sleep(0.02)  # a later mtime for the other writer's rewrite
    other = Run(
        model=Counted([{"name": "weather", "args": OSLO}]).model, terminal=Person(approve=1), store=JsonFileStore(file)
    )
    await other.step(weather_role(Weather()), "Other input")
    assert sorted((str(r.input), r.partial is not None) for r in saved(file)) == [("Go", True), ("Other input", False)]
    task.cancel()  # the person's Ctrl-C: the partial record is discarded
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [(str(r.input), r.partial) for r in saved(file)] == [("Other input", None)], "the other record is kept"


def _broken_after_approval() -> Callable[[Any], Any]:
    async def broken(forecast: Any) -> ToolResult:
        raise RuntimeError("the service is down")

    return broken


async def test_a_refresh_that_waits_then_is_interrupted_keeps_the_finished_record_in_the_file(tmp_path: Path) -> None:
    file = tmp_path / "records.json"
    model = Counted([{"name": "weather", "args": OSLO}])
    await Run(model=model.model, terminal=Person(approve=1), store=JsonFileStore(file)).step(
        weather_role(Weather()), "Go"
    )
    (finished,) = saved(file)
    person = Person()
    store = JsonFileStore(file)
    task = asyncio.ensure_future(
        Run(model=model.model, terminal=person, store=store, mode="refresh").step(weather_role(Weather()), "Go")
    )
    await asyncio.wait_for(person.waiting.wait(), 10)
    assert saved(file) == [finished], "the partial record never replaces the finished one in the file"
    assert store.get(finished.id) == finished, "a lookup finds the finished record (mode auto replays it)"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert saved(file) == [finished], "discarding the partial record leaves the finished one"
    assert JsonFileStore(file).get(finished.id) == finished


async def test_a_refresh_that_waits_then_fails_keeps_the_finished_record_in_memory() -> None:
    store = Spy()
    model = Counted([{"name": "weather", "args": OSLO}])
    await Run(model=model.model, terminal=Person(approve=1), store=store).step(weather_role(Weather()), "Go")
    (finished,) = store.records()
    run = Run(model=model.model, terminal=Person(approve=1), store=store, mode="refresh")
    with pytest.raises(RuntimeError):
        await run.step(weather_role(_broken_after_approval()), "Go")
    assert len(store.partials) == 2, "each run waited, and kept a partial record"
    assert store.records() == (finished,) and store.get(finished.id) == finished


def test_a_memory_store_keeps_a_partial_record_beside_a_finished_one_and_resumes_one_alone() -> None:
    def record(record_id: str, waiting: bool) -> StepRecord:
        return StepRecord(
            id=record_id,
            parts={},
            occurrence=0,
            role="r",
            backend="scripted:0",
            input="Go",
            result=None,
            transcript=(),
            partial=Waiting("approval", "toolu_00_0", "weather") if waiting else None,
        )

    store = MemoryStore([record("done", False)])
    store.put_partial(record("done", True))
    store.put_partial(record("alone", True))
    assert store.get("done") == record("done", False), "the finished record is found, not the partial one"
    assert store.get("alone") == record("alone", True), "a partial record alone is found: mode auto resumes it"
    assert [r.id for r in store.records()] == ["done", "alone"]
    store.discard_partial("done")
    store.discard_partial("alone")
    assert store.records() == (record("done", False),)
    store.put_partial(record("alone", True))
    store.put(record("alone", False))
    store.discard_partial("alone")
    assert store.get("alone") == record("alone", False), "the finished record replaced the partial one"
