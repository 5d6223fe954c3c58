"""Approvals without a notebook: a tool call approved, edited, denied or always approved, by a scripted person, a
callable policy or AGL_NOTEBOOK_APPROVALS; recorded like answers, replayed with no prompt and no handler."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import (
    Approve,
    Deny,
    Edit,
    InputError,
    Role,
    Run,
    Screen,
    ScriptedModel,
    TextInput,
    ToolResult,
    reporting_tool,
    tool,
)
from agl_notebook import approvals as approvals_module
from agl_notebook._scope import Decision, current_scope
from agl_notebook.approvals import ApprovalRequest, changed_paths, setting_verdict
from agl_notebook.client_tools import Runner
from agl_notebook.client_tools import ToolResult as ClientResult
from agl_notebook.errors import NoDecisionError
from agl_notebook.events import ApprovalDecided, ApprovalRequested, Event
from agl_notebook.payloads import JsonObject, JsonValue, payload_spec
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.terminals import ConsoleTerminal, ScriptedTerminal, Terminal
from agl_notebook.transcript import ToolResultBlock
from tests.support.approvals import ASKED, Address, Forecast, Summary, Weather, weather_role


def script(*calls: dict[str, Any]) -> ScriptedModel:
    """One turn per call of the weather tool, then a report of the last tool result."""

    def reply(request: Any) -> dict[str, Any]:
        turn = (len(request.messages) - 1) // 2
        if turn < len(calls):
            return {"calls": [{"name": "weather", "args": calls[turn]}]}
        return {"calls": [{"name": "report", "args": {"text": request.messages[-1].content[0].content}}]}

    return ScriptedModel(reply)


def approval_events(events: list[Event]) -> list[ApprovalRequested | ApprovalDecided]:
    return [e for e in events if isinstance(e, ApprovalRequested | ApprovalDecided)]


def as_object(value: JsonValue) -> JsonObject:
    assert isinstance(value, dict), value
    return value


def as_list(value: JsonValue) -> list[JsonValue]:
    assert isinstance(value, list), value
    return value


def recorded_decisions(run: Run) -> list[JsonObject]:
    """The decisions of the Run's first record, as saved."""
    return [as_object(d) for d in as_list(run.store.records()[0].to_json()["decisions"])]


def results(run: Run) -> list[tuple[str, bool]]:
    return [
        (b.content, b.is_error)
        for m in run.outcomes[-1].transcript
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


class Nobody(Terminal):
    """A terminal that fails the test if anyone is asked anything."""

    async def ask(self, screen: Any) -> Any:
        raise AssertionError(f"asked {screen.text!r}")

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        raise AssertionError(f"asked to approve {request.tool} {request.arguments}")


# ----------------------------------------------------------------------------------------------------------------
# A person (scripted): approve, edit, deny, always


async def test_an_approved_call_runs_and_its_decision_is_recorded() -> None:
    handler = Weather()
    events: list[Event] = []
    run = Run(model=script(ASKED), approvals=["approve"], on_event=events.append)
    summary = await run.step(weather_role(handler), "Weather?")
    assert summary.text == "Oslo: sunny for 3 days"
    assert handler.calls == [Forecast(Address("Oslo"), 3)]
    # validated: defaults filled in
    arguments: JsonObject = {"place": {"city": "Oslo", "zip": ""}, "days": 3, "units": []}
    assert approval_events(events) == [
        ApprovalRequested("weather", "toolu_00_0", arguments),
        ApprovalDecided("weather", "toolu_00_0", "approve"),
    ]
    executing = [e.type for e in events if e.type.startswith(("approval", "client.tool.executing"))]
    assert executing == ["approval.requested", "approval.decided", "client.tool.executing"], "decided, then run"
    (record,) = run.store.records()
    assert record.to_json()["decisions"] == [
        {"tool_call_id": "toolu_00_0", "tool": "weather", "decision": "approve", "always": False}
    ]


async def test_an_edited_call_runs_with_the_edit_and_the_agent_is_told_what_changed() -> None:
    handler = Weather()
    edited: JsonObject = {"place": {"city": "Bergen", "zip": "5003"}, "days": 2, "units": []}
    run = Run(model=script(ASKED), approvals=[Edit(edited)])
    await run.step(weather_role(handler), "Weather?")
    assert handler.calls == [Forecast(Address("Bergen", "5003"), 2)], "the handler got the edited payload"
    ((text, is_error), _) = results(run)
    assert not is_error
    assert text == (
        "The person edited your arguments before the call ran (changed: place.city, place.zip, days); it ran with "
        '{"place": {"city": "Bergen", "zip": "5003"}, "days": 2, "units": []}.\n\nBergen: sunny for 2 days'
    )
    (record,) = run.store.records()
    assert record.to_json()["decisions"] == [
        {"tool_call_id": "toolu_00_0", "tool": "weather", "decision": "edit", "always": False, "arguments": edited}
    ]


async def test_an_edit_that_does_not_fit_is_refused_with_the_agents_messages_and_nothing_runs() -> None:
    handler = Weather()
    run = Run(model=script(ASKED), approvals=[Edit({"place": {"city": 5}, "days": 9, "colour": "red"})])
    with pytest.raises(InputError) as e:
        await run.step(weather_role(handler), "Weather?")
    assert str(e.value) == (
        "The edited arguments of the call to 'weather' do not fit its payload:\n"
        "- place.city: expected a string, got a number (5).\n"
        "- colour: unknown field; the fields are: place, days, units."
    )
    assert handler.calls == [] and not run.store.records()
    with pytest.raises(InputError, match=r"- arguments: days: must be from 1 to 7\."):  # the payload's own check
        await Run(model=script(ASKED), approvals=[Edit({"place": {"city": "Oslo"}, "days": 9})]).step(
            weather_role(handler), "Weather?"
        )


async def test_an_edit_that_changes_nothing_is_an_approval() -> None:
    run = Run(model=script(ASKED), approvals=[Edit({"days": 3, "place": {"city": "Oslo", "zip": ""}})])
    await run.step(weather_role(Weather()), "Weather?")
    assert run.store.records()[0].decisions[0].decision == "approve"
    assert not results(run)[0][0].startswith("The person edited")


@pytest.mark.parametrize(
    ("said", "text"),
    [
        (Deny("Not Oslo, ask me first."), "The person denied this call: Not Oslo, ask me first."),
        ("deny", "The person denied this call."),
    ],
)
async def test_a_denied_call_does_not_run_and_the_agent_gets_an_error_with_the_message(said: Any, text: str) -> None:
    handler = Weather()
    events: list[Event] = []
    run = Run(model=script(ASKED), approvals=[said], on_event=events.append)
    summary = await run.step(weather_role(handler), "Weather?")
    assert handler.calls == []
    assert results(run)[0] == (text, True)
    assert summary.text == text
    assert "client.tool.executing" not in [e.type for e in events]
    decision = recorded_decisions(run)[0]
    assert decision["decision"] == "deny" and decision.get("message", "") == getattr(said, "message", "")


async def test_always_approves_the_tool_for_the_rest_of_the_run_and_only_that_tool() -> None:
    handler = Weather()
    events: list[Event] = []
    run = Run(model=script(ASKED, {**ASKED, "days": 4}), approvals=["always"], on_event=events.append)
    await run.step(weather_role(handler), "Weather?")
    assert [c.days for c in handler.calls] == [3, 4], "the second call was not asked about"
    assert run.always_approved == {"weather"}
    assert [e.type for e in approval_events(events)] == ["approval.requested", "approval.decided"]
    assert recorded_decisions(run)[0]["always"] is True
    # Another step of the same Run: still approved; the scripted list is used up, so asking would fail.
    await run.step(weather_role(handler), "Weather again?", mode="off")
    assert len(handler.calls) == 4
    run.always_approved.discard("weather")
    with pytest.raises(NoDecisionError, match="No scripted decision left for the call to tool 'weather'"):
        await run.step(weather_role(handler), "And again?", mode="off")


async def test_a_tool_without_approval_is_never_asked_about() -> None:
    handler = Weather()
    run = Run(model=script(ASKED), terminal=Nobody())
    await run.step(weather_role(handler, approval=None), "Weather?")
    assert len(handler.calls) == 1 and run.store.records()[0].decisions == ()
    assert "decisions" not in run.store.records()[0].to_json()


# ----------------------------------------------------------------------------------------------------------------
# A callable policy


def by_days(payload: Forecast, request: ApprovalRequest) -> Any:
    assert request.tool == "weather" and request.arguments["days"] == payload.days
    if payload.days > 5:
        return Deny("Too far ahead.")
    return "ask" if payload.place.city == "Oslo" else "approve"


async def test_a_callable_policy_approves_denies_or_asks_per_call() -> None:
    handler = Weather()
    events: list[Event] = []
    calls = ({"place": {"city": "Bergen"}, "days": 2}, {"place": {"city": "Bergen"}, "days": 6}, ASKED)
    run = Run(model=script(*calls), approvals=["deny"], on_event=events.append)
    await run.step(weather_role(handler, approval=by_days), "Weather?")
    assert [c.place.city for c in handler.calls] == ["Bergen"], "approved by the policy; the others did not run"
    assert [text for text, _ in results(run)][:3] == [
        "Bergen: sunny for 2 days",
        "This call was denied by its approval policy: Too far ahead.",
        "The person denied this call.",
    ]
    assert [(type(e).__name__, e.tool_call_id) for e in approval_events(events)] == [
        ("ApprovalDecided", "toolu_01_0"),  # a policy decides without showing the call to anyone
        ("ApprovalRequested", "toolu_02_0"),
        ("ApprovalDecided", "toolu_02_0"),
    ]
    decisions = recorded_decisions(run)
    assert [(d["tool_call_id"], d["decision"], d.get("by", "person")) for d in decisions] == [
        ("toolu_01_0", "deny", "policy"),
        ("toolu_02_0", "deny", "person"),
    ]


async def test_an_async_policy_is_awaited_and_a_policy_answering_nonsense_is_an_input_error() -> None:
    async def later(payload: Forecast, request: ApprovalRequest) -> str:
        return "approve"

    handler = Weather()
    await Run(model=script(ASKED), terminal=Nobody()).step(weather_role(handler, approval=later), "Weather?")
    assert len(handler.calls) == 1
    for said in ("yes", Edit({}), Approve(always=True), None):
        policy: Any = lambda payload, request, said=said: said  # noqa: E731
        run = Run(model=script(ASKED), terminal=Nobody())
        with pytest.raises(InputError, match=r"The approval policy of tool 'weather' returned .*; it returns"):
            await run.step(weather_role(handler, approval=policy), "W?")
    assert len(handler.calls) == 1


def test_tool_refuses_an_approval_that_is_no_policy() -> None:
    with pytest.raises(InputError, match=r"tool 'weather': approval must be None .*not 'always'"):
        tool("weather", "Get the forecast.", Forecast, Weather(), approval="always")  # type: ignore[arg-type]


async def test_the_approval_policy_is_not_part_of_the_fingerprint() -> None:
    store = MemoryStore()
    await Run(model=script(ASKED), store=store).step(weather_role(Weather(), approval=None), "Weather?")
    await Run(model=script(ASKED), store=store, approvals=["approve"]).step(weather_role(Weather()), "Weather?")
    ids = [r.id for r in store.records()]
    assert len(ids) == 1, "the gated step replayed the ungated one's record: same fingerprint"


# ----------------------------------------------------------------------------------------------------------------
# Recorded, and replayed with no prompt and no handler


async def test_a_replay_asks_nobody_runs_no_handler_and_tells_the_same_decisions() -> None:
    handler = Weather()
    live_events: list[Event] = []
    calls = (ASKED, {**ASKED, "days": 5}, {**ASKED, "days": 6})
    edited: JsonObject = {"place": {"city": "Tromsø"}, "days": 5}
    run = Run(model=script(*calls), approvals=[Edit(edited), Deny("No."), "always"], on_event=live_events.append)
    live = await run.step(weather_role(handler), "Weather?")
    assert len(handler.calls) == 2

    replay_events: list[Event] = []
    again = Run(model=script(*calls), store=run.store, terminal=Nobody(), on_event=replay_events.append, mode="replay")
    replayed = await again.step(weather_role(handler), "Weather?")
    assert replayed == live and len(handler.calls) == 2, "no handler ran"
    assert approval_events(replay_events) == approval_events(live_events)
    (edit,) = [e for e in approval_events(live_events) if isinstance(e, ApprovalDecided) and e.decision == "edit"]
    assert edit.changed == ("place.city", "days")
    assert edit.arguments == {"place": {"city": "Tromsø", "zip": ""}, "days": 5, "units": []}
    assert results(again) == results(run)
    assert again.always_approved == {"weather"}, "a replayed 'always' holds for the rest of the Run again"


async def test_a_replay_tells_recorded_decisions_even_when_the_policy_changed_since() -> None:
    run = Run(model=script(ASKED), approvals=["deny"])
    await run.step(weather_role(Weather()), "Weather?")
    events: list[Event] = []
    again = Run(model=script(ASKED), store=run.store, terminal=Nobody(), on_event=events.append)
    await again.step(weather_role(Weather(), approval=None), "Weather?")
    assert [e.type for e in approval_events(events)] == ["approval.requested", "approval.decided"]


def test_decisions_round_trip_through_the_record_and_old_records_read_as_before() -> None:
    decisions = (
        Decision("c1", "weather", "approve", always=True),
        Decision("c2", "weather", "edit", arguments={"days": 2}, changed=("days",)),
        Decision("c3", "weather", "deny", message="No.", by="policy"),
        Decision("c4", "weather", "deny", by="setting"),
    )
    record = StepRecord("id", {}, 0, "forecaster", "scripted:x", "go", None, (), decisions=decisions)
    data = json.loads(json.dumps(record.to_json()))
    assert data["decisions"] == [
        {"tool_call_id": "c1", "tool": "weather", "decision": "approve", "always": True},
        {"tool_call_id": "c2", "tool": "weather", "decision": "edit", "always": False, "arguments": {"days": 2}},
        {
            "tool_call_id": "c3",
            "tool": "weather",
            "decision": "deny",
            "always": False,
            "message": "No.",
            "by": "policy",
        },
        {"tool_call_id": "c4", "tool": "weather", "decision": "deny", "always": False, "by": "setting"},
    ]
    back = record_from_json(data)
    # What an edit changed is not kept: a replay works it out again from the call and the edit.
    assert back.decisions == tuple(dataclasses.replace(d, changed=()) for d in decisions)
    del data["decisions"]
    assert record_from_json(data).decisions == ()


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ("not a list", "record.decisions: expected a list."),
        (["x"], "record.decisions[0]: expected an object."),
        ([{"tool_call_id": "c", "tool": "t", "decision": "maybe"}], "record.decisions[0].decision: expected one of"),
        ([{"tool_call_id": "c", "tool": "t", "decision": "edit"}], "record.decisions[0].arguments: an edit keeps"),
        ([{"tool_call_id": "c", "tool": "t", "decision": "deny", "always": "no"}], "record.decisions[0].always"),
        ([{"tool": "t", "decision": "deny"}], "record.decisions[0].tool_call_id: expected a non-empty string."),
    ],
)
def test_a_malformed_decision_is_named_where_it_is(decision: Any, message: str) -> None:
    record = StepRecord("id", {}, 0, "forecaster", "scripted:x", "go", None, ()).to_json()
    record["decisions"] = decision
    with pytest.raises(InputError) as e:
        record_from_json(record)
    assert str(e.value).startswith(message), str(e.value)


async def test_a_failed_step_wipes_its_decisions_and_records_nothing() -> None:
    run = Run(model=script(ASKED), approvals=["approve"])
    held: list[list[Decision]] = []

    async def boom(forecast: Forecast) -> ToolResult:
        held.append(run.current_step.decisions)
        assert len(run.current_step.decisions) == 1, "decided before the handler runs"
        raise KeyError("down")

    role: Role[Summary] = Role(
        name="forecaster",
        instructions="Forecast.",
        tools=[
            tool("weather", "Get the forecast.", Forecast, boom, approval="ask"),
            reporting_tool("r", "R.", Summary),
        ],
    )
    with pytest.raises(KeyError):
        await run.step(role, "Weather?")
    assert held == [[]], "the failed step's decisions were wiped"
    assert not run.store.records()


# ----------------------------------------------------------------------------------------------------------------
# Waiting for a person: the hook a partial record hangs on


async def test_the_step_is_told_right_before_it_waits_for_a_person() -> None:
    order: list[str] = []

    class Watching(ScriptedTerminal):
        async def ask_approval(self, request: ApprovalRequest) -> Decision:
            order.append("asked to approve")
            return await super().ask_approval(request)

        async def ask(self, screen: Screen[Any]) -> Any:
            order.append("asked a question")
            return await super().ask(screen)

    def on_event(event: Event) -> None:
        if isinstance(event, ApprovalRequested):  # told before the step waits: the hook is in place by then
            scope = current_scope.get()
            assert scope is not None
            scope.on_waiting = lambda: order.append("waiting")

    run = Run(model=script(ASKED), terminal=Watching(["Yes"], approvals=["approve"]), on_event=on_event)

    async def handler(forecast: Forecast) -> ToolResult:
        return ToolResult(await run.terminal.show(lambda: Screen("Sure?", [TextInput("Answer")])))

    role: Role[Summary] = Role(
        name="forecaster",
        instructions="Forecast.",
        tools=[tool("weather", "W.", Forecast, handler, approval="ask"), reporting_tool("report", "R.", Summary)],
    )
    await run.step(role, "Weather?")
    assert order == ["waiting", "asked to approve", "waiting", "asked a question"]


async def test_on_waiting_is_called_by_begin_waiting() -> None:
    from agl_notebook._scope import StepScope

    calls: list[str] = []
    scope = StepScope("r", lambda e: None)
    scope.begin_waiting()  # no hook: nothing happens
    scope.on_waiting = lambda: calls.append("partial record")
    scope.begin_waiting()
    assert calls == ["partial record"]


# ----------------------------------------------------------------------------------------------------------------
# Headless: AGL_NOTEBOOK_APPROVALS


def request(arguments: dict[str, Any], tool_name: str = "weather") -> ApprovalRequest:
    spec = payload_spec(Forecast)
    payload, problems = spec.validate(arguments)
    assert not problems
    from agl_notebook.payloads import dump

    dumped = dump(payload)
    assert isinstance(dumped, dict)
    return ApprovalRequest(tool_name, "c1", payload, dumped, spec)


def test_the_setting_approves_or_denies_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGL_NOTEBOOK_APPROVALS", raising=False)
    assert setting_verdict(request(ASKED)) is None
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", " Approve ")
    assert setting_verdict(request(ASKED)) == Approve()
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", "deny")
    assert setting_verdict(request(ASKED)) == Deny()


def test_a_decisions_file_is_keyed_by_tool_and_arguments_not_by_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "decisions.json"
    path.write_text(
        json.dumps(
            [
                {"tool": "weather", "decision": "deny", "message": "Only Oslo."},
                {
                    "tool": "weather",
                    "arguments": {"units": [], "days": 3, "place": {"zip": "", "city": "Oslo"}},
                    "decision": "approve",
                },
                {
                    "tool": "weather",
                    "arguments": {"place": {"city": "Oslo", "zip": ""}, "days": 4, "units": []},
                    "decision": "edit",
                    "edited": {"place": {"city": "Oslo"}, "days": 2},
                },
            ]
        )
    )
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", str(path))
    assert setting_verdict(request({**ASKED, "days": 4})) == Edit({"place": {"city": "Oslo"}, "days": 2})
    assert setting_verdict(request(ASKED)) == Approve(), "matched on the validated arguments, in any key order"
    assert setting_verdict(request({**ASKED, "days": 5})) == Deny("Only Oslo."), "an entry without arguments: any"
    with pytest.raises(NoDecisionError) as e:
        setting_verdict(request(ASKED, tool_name="mail"))
    assert str(e.value) == (
        f"{path} (AGL_NOTEBOOK_APPROVALS) has no decision for the call to tool 'mail' with the arguments "
        '{"days":3,"place":{"city":"Oslo","zip":""},"units":[]}, so it was not run. Add an entry {"tool": "mail", '
        '"arguments": {"days":3,"place":{"city":"Oslo","zip":""},"units":[]}, "decision": "approve"} (or one '
        'without "arguments" for every call of the tool).'
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a decisions file: invalid JSON"),
        ('{"tool": "weather"}', "a decisions file is a JSON list of"),
        ('[{"tool": "weather", "decision": "yes"}]', "entry 0: 'decision' must be 'approve', 'deny' or 'edit'"),
        ('[{"tool": "weather", "decision": "edit"}]', "entry 0: a decision 'edit' needs 'edited'"),
        ('[{"tool": "weather", "decision": "approve", "why": 1}]', "entry 0: unknown keys ['why']"),
        ('[{"decision": "approve"}]', "entry 0: 'tool' must be the tool's name."),
    ],
)
def test_a_broken_decisions_file_is_named_with_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "decisions.json"
    path.write_text(content)
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", str(path))
    with pytest.raises(InputError) as e:
        setting_verdict(request(ASKED))
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_a_setting_naming_no_file_says_what_it_takes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGL_NOTEBOOK_APPROVALS", "aprove")
    with pytest.raises(InputError, match=r"AGL_NOTEBOOK_APPROVALS='aprove': expected approve, deny, or the path"):
        setting_verdict(request(ASKED))


# ----------------------------------------------------------------------------------------------------------------
# Client tools, the console, and what changed


async def test_a_client_tool_asks_too_and_its_handler_gets_the_edited_arguments() -> None:
    got: list[dict[str, Any]] = []

    async def send(args: dict[str, Any], ctx: Any) -> ClientResult:
        got.append(args)
        return ClientResult(f"sent to {args['to']}")

    model = ScriptedModel(
        lambda request: (
            {"calls": [{"name": "send", "args": {"to": "all@example.com"}}]}
            if len(request.messages) == 1
            else {"text": "Done."}
        )
    )
    runner = Runner(model=model, run=Run(approvals=[Edit({"to": "me@example.com"})]))
    result = await runner.run(
        {"name": "mailer", "instructions": "Mail."},
        "Send it.",
        tool_handlers={"send": send},
        client_tools=[{"name": "send", "description": "Send.", "parameters": {"type": "object"}, "approval": "ask"}],
    )
    assert got == [{"to": "me@example.com"}]
    assert [e.type for e in result.events if e.type.startswith("approval")] == [
        "approval.requested",
        "approval.decided",
    ]
    with pytest.raises(InputError, match=r"client_tools\[0\] \('send'\): approval must be None"):
        await runner.run(
            {"name": "mailer", "instructions": "Mail."},
            "Send it.",
            client_tools=[{"name": "send", "parameters": {"type": "object"}, "approval": "sometimes"}],
        )


async def test_the_console_asks_until_the_decision_is_valid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    typed = iter(
        ["maybe", "e", '{"place": {"city": "Oslo"}, "days": 0}', "e", '{"place": {"city": "Rome"}, "days": 1}']
    )
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    decision = await ConsoleTerminal().ask_approval(request(ASKED))
    assert decision.decision == "edit" and decision.arguments == {
        "place": {"city": "Rome", "zip": ""},
        "days": 1,
        "units": [],
    }
    assert "- arguments: days: must be from 1 to 7." in capsys.readouterr().err

    def closed(prompt: str = "") -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", closed)
    with pytest.raises(NoDecisionError, match="Nobody can approve the call to tool 'weather': standard input"):
        await ConsoleTerminal().ask_approval(request(ASKED))


def test_changed_paths_name_nested_fields_and_whole_lists() -> None:
    before: JsonObject = {"place": {"city": "Oslo", "zip": ""}, "days": 3, "units": ["C"]}
    assert changed_paths(before, before) == ()
    assert changed_paths(before, {"place": {"city": "Oslo", "zip": "1"}, "days": 3, "units": ["C", "F"]}) == (
        "place.zip",
        "units",
    )
    assert changed_paths({"a": 1}, {"b": 1}) == ("a", "b")
    assert changed_paths({"z": 1, "a": 1}, {"a": 2, "z": 2}) == ("z", "a"), "in the order of the call's arguments"
    assert changed_paths({"a": 1}, {"a": 1.5}) == ("a",)


def test_words_for_views() -> None:
    words = approvals_module.decision_words
    assert words("approve", by="person") == "approved by a person"
    assert words("approve", by="person", always=True) == (
        "approved by a person, and every later call of this tool in this Run"
    )
    assert (
        words("edit", by="setting", changed=("city", "days")) == "edited by AGL_NOTEBOOK_APPROVALS: changed city, days"
    )
    assert words("deny", by="policy", message="Too far.") == "denied by the tool's policy: Too far."
