"""The code execution container across a partial record, a resume and a fork (issue 29's leftover).

A reply that ran code names its container; the loop sends it on every later request of the step. A step that waits
for a person after that keeps the container in its partial record, so the step resumed by a new Run (the process
died meanwhile) sends it again on its live requests; the finished record keeps it too, so a fork past the reply that
named it carries it. Everything goes through the real ``anthropic`` client against the fake API (tests/support), and
the container is asserted on the request bodies the fake received.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, Run, Screen, TextInput, ToolResult, reporting_tool, tool
from agl_notebook.errors import InputError
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.batches import Batches
from agl_notebook.replay.records import StepRecord, Waiting, record_from_json
from agl_notebook.replay.stores import JsonFileStore
from agl_notebook.server_tools import CodeExecution
from agl_notebook.tools import Tool
from tests.run.test_resume import Person, Trip, saved, wait_then_crash
from tests.run.test_server_tools_runs import ServerTurn
from tests.support.anthropic_api import api, text, use
from tests.support.anthropic_batches import FakeBatches, Turn
from tests.support.approvals import ASKED, Summary, Weather, weather_role
from tests.support.batch_steps import RESEARCHER, engine_for, topic_of
from tests.support.server_tools_api import bash_result, server_call, server_reply
from tests.support.steps import Answer, Query

CONTAINER = "container_011CQx7aHfZpW"
CODE = server_call("srvtoolu_c1", "bash_code_execution", {"command": "python -c 'print(6*7)'"})
OUTPUT = bash_result("srvtoolu_c1", "42\n")
OSLO, BERGEN = json.dumps(ASKED), json.dumps({"place": {"city": "Bergen"}, "days": 2})


def coder(handler: Weather) -> Role[Summary]:
    """The forecaster of tests/run/test_resume.py (its weather tool asks for approval), able to run code."""
    return dataclasses.replace(weather_role(handler), server_tools=[CodeExecution()])


def claude(fake: Any) -> AnthropicModel:
    return AnthropicModel(model="claude-test", client=fake.client())


def report(summary: str) -> list[Any]:
    return server_reply(use("toolu_r", "report", json.dumps({"text": summary})), stop_reason="tool_use")


def raw_records(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(path.read_text())["records"]
    return records


async def test_a_step_resumed_at_an_approval_sends_the_container_an_earlier_reply_named(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    first_api = api(
        # Turn 1 runs code (its container named) and calls the weather tool, approved; turn 2 calls it again and
        # names no container: the step waits for the second approval when the process dies.
        server_reply(CODE, OUTPUT, use("toolu_a", "weather", OSLO), stop_reason="tool_use", container=CONTAINER),
        server_reply(use("toolu_b", "weather", BERGEN), stop_reason="tool_use"),
    )
    handler = Weather()
    person = Person(approve=1)
    await wait_then_crash(
        Run(model=claude(first_api), terminal=person, store=JsonFileStore(file)), coder(handler), person, file, crashed
    )
    assert [b.get("container") for b in first_api.bodies()] == [None, CONTAINER], "the live loop sends it back"
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("approval", "toolu_b", "weather")
    assert partial.containers == ((1, CONTAINER),), "named by the reply to the request of 1 message"
    assert raw_records(crashed)[0]["containers"] == [[1, CONTAINER]]

    second_api = api(report("Bergen: sunny for 2 days"))
    again = Person(approve=1, counts=lambda: (len(second_api.requests), len(handler.calls)))
    run = Run(model=claude(second_api), terminal=again, store=JsonFileStore(crashed))  # mode "auto"
    assert await run.step(coder(handler), "Go") == Summary("Bergen: sunny for 2 days")
    assert again.at_ask == [(0, 1)], "the recorded replies were not asked again"
    (body,) = second_api.bodies()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert body["container"] == CONTAINER, "the resumed step's live request carries the container from before"
    (record,) = saved(crashed)
    assert record.partial is None and record.containers == ((1, CONTAINER),)

    # A replay of the finished record sends nothing, to any API.
    silent = api()
    replayed = Run(model=claude(silent), store=JsonFileStore(crashed), mode="replay")
    assert await replayed.step(coder(handler), "Go") == Summary("Bergen: sunny for 2 days")
    assert silent.requests == []


def trip_coder(run_box: list[Run]) -> Role[Summary]:
    """A planner whose tool asks the person a question, able to run code."""

    async def plan(trip: Trip) -> ToolResult:
        when: str = await run_box[0].terminal.show(lambda: Screen("When do you leave?", [TextInput("Date")]))
        return ToolResult(f"{trip.city} on {when}")

    return Role(
        name="planner",
        instructions="Plan, computing what needs computing.",
        tools=[tool("plan", "Plan the trip.", Trip, plan), reporting_tool("report", "Report.", Summary)],
        server_tools=[CodeExecution()],
    )


async def test_a_step_resumed_at_a_question_sends_the_container_its_only_reply_named(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    rome = json.dumps({"city": "Rome"})
    first_api = api(
        server_reply(CODE, OUTPUT, use("toolu_p", "plan", rome), stop_reason="tool_use", container=CONTAINER)
    )
    box: list[Run] = []
    person = Person()
    box.append(Run(model=claude(first_api), terminal=person, store=JsonFileStore(file)))
    await wait_then_crash(box[0], trip_coder(box), person, file, crashed)
    (partial,) = saved(crashed)
    assert partial.partial == Waiting("question", "toolu_p", "plan")
    assert partial.containers == ((1, CONTAINER),)

    second_api = api(report("Rome on May 3"))
    box[0] = Run(model=claude(second_api), terminal=Person(answers=("May 3",)), store=JsonFileStore(crashed))
    assert await box[0].step(trip_coder(box), "Go") == Summary("Rome on May 3")
    (body,) = second_api.bodies()
    assert len(body["messages"]) == 3 and body["container"] == CONTAINER


async def test_a_step_that_never_ran_code_keeps_no_container_and_its_resume_sends_none(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    first_api = api(server_reply(text("Checking. "), use("toolu_a", "weather", OSLO), stop_reason="tool_use"))
    person = Person()
    await wait_then_crash(
        Run(model=claude(first_api), terminal=person, store=JsonFileStore(file)),
        coder(Weather()),
        person,
        file,
        crashed,
    )
    (partial,) = saved(crashed)
    assert partial.containers == () and "containers" not in raw_records(crashed)[0]
    second_api = api(report("Oslo: sunny"))
    run = Run(model=claude(second_api), terminal=Person(approve=1), store=JsonFileStore(crashed))
    await run.step(coder(Weather()), "Go")
    (body,) = second_api.bodies()
    assert "container" not in body


# --- A fork ---------------------------------------------------------------------------------------------------------


async def recorded_three_turns(tmp_path: Path) -> tuple[StepRecord, Path]:
    """A finished step: turn 1 calls the weather tool, turn 2 runs code (its container named) and calls it again,
    turn 3 reports. Nothing asks for approval."""
    file = tmp_path / "records.json"
    fake = api(
        server_reply(use("toolu_a", "weather", OSLO), stop_reason="tool_use"),
        server_reply(CODE, OUTPUT, use("toolu_b", "weather", BERGEN), stop_reason="tool_use", container=CONTAINER),
        report("Oslo and Bergen: sunny"),
    )
    role = dataclasses.replace(weather_role(Weather(), approval=None), server_tools=[CodeExecution()])
    outcome = await Run(model=claude(fake), store=JsonFileStore(file)).step_outcome(role, "Go")
    assert [b.get("container") for b in fake.bodies()] == [None, None, CONTAINER]
    (record,) = saved(file)
    assert record.containers == ((3, CONTAINER),)
    assert outcome.result == Summary("Oslo and Bergen: sunny")
    return record, file


@pytest.mark.parametrize(("at_turn", "container"), [(1, None), (2, CONTAINER)])
async def test_a_fork_carries_the_container_only_past_the_turn_that_named_it(
    tmp_path: Path, at_turn: int, container: str | None
) -> None:
    record, file = await recorded_three_turns(tmp_path)
    live = api(report("Forked"))
    role = dataclasses.replace(weather_role(Weather(), approval=None), server_tools=[CodeExecution()])
    run = Run(model=claude(live), store=JsonFileStore(file))
    assert await run.step(role, fork_from=record, at_turn=at_turn) == Summary("Forked")
    (body,) = live.bodies()
    assert len(body["messages"]) == 2 * at_turn + 1
    assert body.get("container") == container
    forked = next(r for r in saved(file) if r.id != record.id)
    assert forked.containers == (((3, CONTAINER),) if container else ())


# --- The record's field ---------------------------------------------------------------------------------------------


def test_a_record_without_containers_reads_as_before_and_bad_ones_are_input_errors_naming_where() -> None:
    base: dict[str, Any] = {
        "kind": "step",
        "format": 1,
        "id": "r1",
        "parts": {},
        "occurrence": 0,
        "role": "coder",
        "backend": "anthropic:claude-test",
        "input": "Go",
        "result": None,
        "transcript": [],
    }
    old = record_from_json(base)
    assert old.containers == () and "containers" not in old.to_json()
    kept = record_from_json({**base, "containers": [[1, "c_a"], [5, "c_b"]]})
    assert kept.containers == ((1, "c_a"), (5, "c_b")) and kept.to_json()["containers"] == [[1, "c_a"], [5, "c_b"]]
    bad_ones: list[Any] = ["c_a", [[0, "c_a"]], [[1, ""]], [[True, "c_a"]], [["1", "c_a"]], [[1, "c_a", 2]]]
    for bad in bad_ones:
        with pytest.raises(InputError, match=r"^record\.containers"):
            record_from_json({**base, "containers": bad})


# --- The Message Batches engine ---------------------------------------------------------------------------------------


def batch_coder() -> Role[Answer]:
    """The batch tests' researcher, its look-up asking for approval, able to run code."""
    tools = [dataclasses.replace(t, approval="ask") if isinstance(t, Tool) else t for t in RESEARCHER.tools]
    return dataclasses.replace(RESEARCHER, tools=tools, server_tools=[CodeExecution()])


def batch_script(params: dict[str, Any]) -> Turn:
    """Turn 1 runs code in a container and looks up; turn 2 reports."""
    topic = topic_of(params)
    if len(params["messages"]) == 1:
        blocks = (CODE, OUTPUT, use("toolu_1", "look_up", json.dumps({"text": topic})))
        return ServerTurn(blocks, "tool_use", container=CONTAINER)
    return ServerTurn((use("toolu_2", "report", json.dumps({"summary": f"{topic}: 42"})),), "tool_use")


async def batched_step(engine: Batches, run: Run) -> Answer:
    """The step of topic 0, run inside a participant of ``engine`` as a batch map runs each item."""
    with engine.join("researcher/topic 0"):
        answer: Answer = await run.step(batch_coder(), Query("topic 0"))
    return answer


async def test_a_batched_step_resumed_from_its_partial_record_sends_the_container_in_its_wave(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    fake = FakeBatches(batch_script, polls=0)
    engine = engine_for(fake)
    person = Person()
    task = asyncio.ensure_future(batched_step(engine, Run(model=engine, store=JsonFileStore(file), terminal=person)))
    await asyncio.wait_for(person.waiting.wait(), 10)
    shutil.copy(file, crashed)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fake.creations) == 1
    (partial,) = saved(crashed)
    assert partial.partial is not None and partial.containers == ((1, CONTAINER),)

    again = FakeBatches(batch_script, polls=0)
    engine = engine_for(again)
    run = Run(model=engine, store=JsonFileStore(crashed), terminal=Person(approve=1))
    assert await batched_step(engine, run) == Answer("topic 0: 42")
    (creation,) = again.creations
    (request,) = creation.requests
    assert len(request["params"]["messages"]) == 3, "the first reply came from the partial record"
    assert request["params"]["container"] == CONTAINER, "the resumed step's wave carries the container"
