"""The tool loop (docs/roles-and-tools.md, "The loop"): argument checks, payloads, roles without a reporting tool,
round trips, reports, stop reasons, events; and the scripted model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from agl_notebook import (
    Claude,
    Role,
    RoleIncompleteError,
    Run,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
    ToolResult,
    UpstreamUnexpected,
    reporting_tool,
    tool,
)
from agl_notebook import events as ev
from agl_notebook.errors import InputError, ModelOutputTruncatedError, ModelRefusedError, ScriptExhaustedError
from agl_notebook.events import Event
from agl_notebook.loop import DEFAULT_MAX_TOOL_ROUNDTRIPS, not_offered
from agl_notebook.models.base import ModelRequest
from agl_notebook.transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock
from tests.support.steps import Query, Review, look, report, types


class Recorder:
    """A look_up tool that remembers its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, query: Query) -> ToolResult:
        self.calls.append(query.text)
        return ToolResult(text=f"found {query.text}")


def make_role(recorder: Recorder, *, reporting: bool = True, **options: Any) -> Role[Any]:
    tools: list[Any] = [tool("look_up", "Search the project's docs.", Query, recorder)]
    if reporting:
        tools.append(reporting_tool("report_review", "Report what you found.", Review))
    return Role("reviewer", "Review the request.", tools, model=Claude.OPUS, **options)


def make_run(script: Any) -> tuple[Run, ScriptedModel, list[Event]]:
    model = ScriptedModel(script)
    events: list[Event] = []
    return Run(model=model, on_event=events.append), model, events


def results(events: Sequence[Event]) -> list[tuple[str, str, bool]]:
    return [(e.name, e.result, e.is_error) for e in events if isinstance(e, ev.ClientToolResult)]


def assert_every_call_answered(transcript: Sequence[Message]) -> None:
    """Every tool_use has exactly one tool_result with its id, in the next user message, in call order."""
    for i, message in enumerate(transcript):
        if message.role != "assistant" or not message.tool_uses:
            continue
        assert i + 1 < len(transcript), "a tool_use ends the transcript"
        answer = transcript[i + 1]
        assert answer.role == "user"
        ids = [b.tool_use_id for b in answer.content if isinstance(b, ToolResultBlock)]
        assert ids == [u.id for u in message.tool_uses]


# ---------------------------------------------------------------------------------------------------------------
# A simple step, and the events it emits


async def test_a_step_with_a_tool_call_then_a_report_emits_the_vocabulary_in_order() -> None:
    recorder = Recorder()
    run, model, events = make_run(
        [
            ScriptedTurn("Let me look.", [ScriptedCall("look_up", {"text": "retries"})]),
            {"calls": [report(["no retries"])]},
        ]
    )
    result = await run.step(make_role(recorder), "Review this.")
    assert result == Review(["no retries"])
    assert recorder.calls == ["retries"]
    assert len(model.requests) == 2
    assert types(events) == [
        "step.started",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "client.tool.requested",
        "client.tool.executing",
        "client.tool.result",
        "client.tool.roundtrip",
        "client.tool.requested",
        "step.reported",
        "client.tool.result",
        "step.finished",
    ]
    assert [e.delta for e in events if isinstance(e, ev.OutputTextDelta)] == ["Let ", "me ", "look."]
    assert events[0] == ev.StepStarted("reviewer", "Review this.", f"scripted:{model.digest}", "Review this.")
    assert events[4] == ev.ClientToolRequested("look_up", {"text": "retries"}, "toolu_00_0")
    assert events[5] == ev.ClientToolExecuting("look_up", "toolu_00_0")
    assert events[6] == ev.ClientToolResult("look_up", "toolu_00_0", "found retries", False)
    assert events[7] == ev.ClientToolRoundtrip(1, 25)
    assert events[9] == ev.StepReported("report_review", "toolu_01_0", {"issues": ["no retries"]})
    assert events[-1] == ev.StepFinished("reviewer", {"issues": ["no retries"]}, 2, False)
    outcome = run.outcomes[-1]
    assert outcome.requests == 2
    assert outcome.truncated is False
    assert [m.role for m in outcome.transcript] == ["user", "assistant", "user", "assistant", "user"]
    assert outcome.transcript[1].content == (
        TextBlock("Let me look."),
        ToolUseBlock("toolu_00_0", "look_up", {"text": "retries"}),
    )
    assert outcome.transcript[2].content == (ToolResultBlock("toolu_00_0", "found retries", False),)
    assert_every_call_answered(outcome.transcript)


async def test_a_rejected_tool_result_reaches_the_model_as_an_error() -> None:
    async def refuse(query: Query) -> ToolResult:
        return ToolResult("no such page", rejected=True)

    role: Role[Any] = Role("r", "Do it.", [tool("look_up", "Search.", Query, refuse)], model=Claude.OPUS)
    run, model, events = make_run([{"calls": [look("x")]}, "done"])
    assert await run.step(role, "go") is None
    assert results(events) == [("look_up", "no such page", True)]
    assert model.requests[1].messages[-1].content == (ToolResultBlock("toolu_00_0", "no such page", True),)


# ---------------------------------------------------------------------------------------------------------------
# Arguments are checked before the handler runs; the agent may try again


async def test_arguments_that_do_not_fit_are_sent_back_and_the_handler_does_not_run() -> None:
    recorder = Recorder()
    run, model, events = make_run(
        [
            {"calls": [{"name": "look_up", "args": {"text": 3, "extra": True}}]},
            {"calls": [look("fixed")]},
            {"calls": [report([])]},
        ]
    )
    assert await run.step(make_role(recorder), "go") == Review([])
    assert recorder.calls == ["fixed"]
    rejected = [e for e in events if isinstance(e, ev.PayloadRejected)]
    problems = ("text: expected a string, got a number (3).", "extra: unknown field; the fields are: text.")
    assert rejected == [ev.PayloadRejected("look_up", "toolu_00_0", {"text": 3, "extra": True}, problems)]
    expected_text = (
        "The arguments for `look_up` do not fit its schema:\n"
        "- text: expected a string, got a number (3).\n"
        "- extra: unknown field; the fields are: text.\n"
        "Fix these and call `look_up` again."
    )
    assert results(events)[0] == ("look_up", expected_text, True)
    assert "client.tool.executing" not in types(events)[: types(events).index("client.tool.roundtrip")]
    assert len(model.requests) == 3


# ---------------------------------------------------------------------------------------------------------------
# The first payload that fits counts


async def test_a_report_that_does_not_fit_is_sent_back_and_the_next_one_counts() -> None:
    run, model, events = make_run(
        [
            {"calls": [report("not a list")]},
            {"calls": [report(["a", 2])]},
            {"calls": [report(["a", "b"])]},
        ]
    )
    assert await run.step(make_role(Recorder()), "go") == Review(["a", "b"])
    assert len(model.requests) == 3
    assert [e.problems for e in events if isinstance(e, ev.PayloadRejected)] == [
        ("issues: expected an array, got a string ('not a list').",),
        ("issues[1]: expected a string, got a number (2).",),
    ]
    assert [e.payload for e in events if isinstance(e, ev.StepReported)] == [{"issues": ["a", "b"]}]


async def test_of_two_reports_in_one_reply_the_first_that_fits_counts() -> None:
    run, model, events = make_run([{"calls": [report([1]), report(["first"]), report(["second"])]}])
    assert await run.step(make_role(Recorder()), "go") == Review(["first"])
    assert len(model.requests) == 1
    assert [r[2] for r in results(events)] == [True, False, True]
    assert results(events)[2] == ("report_review", "Skipped: the step already reported its result.", True)


# ---------------------------------------------------------------------------------------------------------------
# E: reports and other calls in one reply


async def test_calls_before_the_report_run_and_calls_after_it_are_skipped() -> None:
    recorder = Recorder()
    run, model, events = make_run([{"calls": [look("before"), report(["done"]), look("after")]}])
    assert await run.step(make_role(recorder), "go") == Review(["done"])
    assert recorder.calls == ["before"]
    assert len(model.requests) == 1
    assert results(events) == [
        ("look_up", "found before", False),
        ("report_review", "Reported. Your work on this step is done.", False),
        ("look_up", "Skipped: the step already reported its result.", True),
    ]
    transcript = run.outcomes[-1].transcript
    assert transcript[-1] == Message(
        "user",
        (
            ToolResultBlock("toolu_00_0", "found before", False),
            ToolResultBlock("toolu_00_1", "Reported. Your work on this step is done.", False),
            ToolResultBlock("toolu_00_2", "Skipped: the step already reported its result.", True),
        ),
    )
    assert_every_call_answered(transcript)


# ---------------------------------------------------------------------------------------------------------------
# A role without a reporting tool; the reminder; RoleIncompleteError


async def test_without_a_reporting_tool_the_step_returns_none_when_the_agent_stops() -> None:
    recorder = Recorder()
    run, model, events = make_run([{"calls": [look("a")]}, "All done."])
    assert await run.step(make_role(recorder, reporting=False), "go") is None
    assert recorder.calls == ["a"]
    assert len(model.requests) == 2
    assert events[-1] == ev.StepFinished("reviewer", None, 2, False)
    assert run.outcomes[-1].text == "All done."


async def test_role_incomplete_after_exactly_one_reminder() -> None:
    run, model, events = make_run(["I think it is fine.", "Really, it is fine."])
    with pytest.raises(RoleIncompleteError) as e:
        await run.step(make_role(Recorder()), "go")
    assert len(model.requests) == 2
    reminder = (
        "[agl_notebook] Your last reply did not call a tool. This step ends only when you call "
        "`report_review` with your result: call it now."
    )
    assert model.requests[1].messages[-1] == Message("user", (TextBlock(reminder),))
    assert e.value.role == "reviewer"
    assert [(m.role, m.text) for m in e.value.transcript] == [
        ("user", "go"),
        ("assistant", "I think it is fine."),
        ("user", reminder),
        ("assistant", "Really, it is fine."),
    ]
    assert str(e.value) == (
        "The agent of 'reviewer' stopped without calling its reporting tool 'report_review' "
        "(after 1 reminder(s)); its work was wiped. The transcript is on this error's "
        ".transcript."
    )
    assert isinstance(e.value, UpstreamUnexpected)
    assert types(events)[-1] == "step.failed"
    assert events[-1] == ev.StepFailed("reviewer", "RoleIncompleteError", str(e.value))
    assert run.outcomes == []


async def test_the_reminder_can_be_answered_with_a_report() -> None:
    run, model, _ = make_run(["Fine.", {"calls": [report(["late"])]}])
    assert await run.step(make_role(Recorder()), "go") == Review(["late"])
    assert len(model.requests) == 2


@pytest.mark.parametrize(("reminders", "requests"), [(0, 1), (2, 3)])
async def test_the_number_of_reminders_is_configurable(reminders: int, requests: int) -> None:
    run, model, _ = make_run(["a", "b", "c", "d"])
    with pytest.raises(RoleIncompleteError):
        await run.step(make_role(Recorder(), reminders=reminders), "go")
    assert len(model.requests) == requests


# ---------------------------------------------------------------------------------------------------------------
# E: round trips


async def test_max_tool_roundtrips_n_allows_n_round_trips_and_n_plus_one_requests() -> None:
    recorder = Recorder()
    run, model, events = make_run([{"calls": [look(str(i))]} for i in range(5)])
    assert await run.step(make_role(recorder, reporting=False, max_tool_roundtrips=2), "go") is None
    assert len(model.requests) == 3
    assert model.calls == 3
    assert recorder.calls == ["0", "1"]
    assert [e for e in events if isinstance(e, ev.ClientToolRoundtrip)] == [
        ev.ClientToolRoundtrip(1, 2),
        ev.ClientToolRoundtrip(2, 2),
    ]
    assert [e for e in events if isinstance(e, ev.RunTruncated)] == [ev.RunTruncated(2, 2, ("look_up",))]
    assert results(events)[-1] == ("look_up", "Not run: the limit of 2 tool round trips was reached.", True)
    assert events[-1] == ev.StepFinished("reviewer", None, 3, True)
    outcome = run.outcomes[-1]
    assert outcome.truncated is True
    assert outcome.requests == 3
    assert_every_call_answered(outcome.transcript)
    assert outcome.transcript[-1].role == "user"
    assert types(events)[-3:] == ["client.tool.result", "run.truncated", "step.finished"]


async def test_max_tool_roundtrips_zero_allows_one_request_and_no_tool_call() -> None:
    recorder = Recorder()
    run, model, events = make_run([{"calls": [look("a"), look("b")]}])
    assert await run.step(make_role(recorder, reporting=False, max_tool_roundtrips=0), "go") is None
    assert len(model.requests) == 1
    assert recorder.calls == []
    assert [e for e in events if isinstance(e, ev.RunTruncated)] == [ev.RunTruncated(0, 0, ("look_up", "look_up"))]
    assert_every_call_answered(run.outcomes[-1].transcript)


async def test_a_report_in_the_last_allowed_reply_counts_and_the_calls_before_it_run() -> None:
    # A valid report needs no further request, so the limit does not cut that reply short (and the calls
    # before the reporting call run).
    recorder = Recorder()
    run, model, events = make_run([{"calls": [look("a")]}, {"calls": [look("b"), report(["ok"])]}])
    result = await run.step(make_role(recorder, max_tool_roundtrips=1), "go")
    assert result == Review(["ok"])
    assert recorder.calls == ["a", "b"]
    assert len(model.requests) == 2
    assert [r[0] for r in results(events)] == ["look_up", "look_up", "report_review"]
    assert results(events)[2] == ("report_review", "Reported. Your work on this step is done.", False)
    assert not [e for e in events if isinstance(e, ev.RunTruncated)]
    assert run.outcomes[-1].truncated is False


async def test_an_invalid_report_in_the_last_allowed_reply_does_not_lift_the_limit() -> None:
    recorder = Recorder()
    run, _, events = make_run([{"calls": [look("a")]}, {"calls": [look("b"), report("not a list")]}])
    with pytest.raises(RoleIncompleteError):
        await run.step(make_role(recorder, max_tool_roundtrips=1), "go")
    assert recorder.calls == ["a"]
    assert results(events)[1] == ("look_up", "Not run: the limit of 1 tool round trips was reached.", True)


async def test_truncation_of_a_role_that_must_report_raises_role_incomplete_with_every_call_answered() -> None:
    run, model, events = make_run([{"calls": [look(str(i))]} for i in range(5)])
    with pytest.raises(RoleIncompleteError) as e:
        await run.step(make_role(Recorder(), max_tool_roundtrips=1), "go")
    assert len(model.requests) == 2
    assert str(e.value) == (
        "The agent of 'reviewer' did not report within 1 tool round trips; its work was wiped. "
        "The transcript is on this error's .transcript."
    )
    assert_every_call_answered(e.value.transcript)
    assert e.value.transcript[-1].content == (
        ToolResultBlock("toolu_01_0", "Not run: the limit of 1 tool round trips was reached.", True),
    )
    assert types(events)[-2:] == ["run.truncated", "step.failed"]


async def test_the_default_round_trip_limit_is_25() -> None:
    recorder = Recorder()
    run, model, events = make_run(lambda request: {"calls": [look("again")]})
    assert DEFAULT_MAX_TOOL_ROUNDTRIPS == 25
    assert await run.step(make_role(recorder, reporting=False), "go") is None
    assert len(model.requests) == 26
    assert len(recorder.calls) == 25
    assert [e for e in events if isinstance(e, ev.RunTruncated)] == [ev.RunTruncated(25, 25, ("look_up",))]


# ---------------------------------------------------------------------------------------------------------------
# The advertised-tool guard


async def test_a_call_to_a_tool_not_offered_gets_the_guard_result_and_no_handler_runs() -> None:
    recorder = Recorder()
    run, _model, events = make_run([{"calls": [{"name": "delete_everything", "args": {}}, look("a")]}, "done"])
    assert await run.step(make_role(recorder, reporting=False), "go") is None
    assert recorder.calls == ["a"]
    assert not_offered("delete_everything") == "Tool not offered this turn: delete_everything"
    assert results(events) == [
        ("delete_everything", "Tool not offered this turn: delete_everything", True),
        ("look_up", "found a", False),
    ]
    assert [e.name for e in events if isinstance(e, ev.ClientToolExecuting)] == ["look_up"]


async def test_the_guard_fails_closed_when_no_tools_are_offered() -> None:
    run, model, events = make_run([{"calls": [look("a"), report(["x"])]}, "done"])
    role: Role[Any] = Role("bare", "Do it.", model=Claude.OPUS)
    assert await run.step(role, "go") is None
    assert model.requests[0].tools == ()
    assert results(events) == [
        ("look_up", "Tool not offered this turn: look_up", True),
        ("report_review", "Tool not offered this turn: report_review", True),
    ]
    assert "client.tool.executing" not in types(events)
    assert "step.reported" not in types(events)


async def test_the_guard_uses_each_turns_offered_tools() -> None:
    recorder = Recorder()
    role = make_role(recorder)
    run, model, events = make_run(
        [{"calls": [look("a")]}, {"calls": [{"name": "look_up ", "args": {"text": "b"}}]}, {"calls": [report([])]}]
    )
    assert await run.step(role, "go") == Review([])
    assert [[t.name for t in r.tools] for r in model.requests] == [["look_up", "report_review"]] * 3
    assert results(events)[1] == ("look_up ", "Tool not offered this turn: look_up ", True)
    assert recorder.calls == ["a"]


# ---------------------------------------------------------------------------------------------------------------
# Stop reasons


async def test_pause_turn_is_resent() -> None:
    run, model, events = make_run(
        [
            ScriptedTurn("Searching...", stop_reason="pause_turn"),
            ScriptedTurn("Still searching...", stop_reason="pause_turn"),
            {"calls": [report(["found"])]},
        ]
    )
    assert await run.step(make_role(Recorder()), "go") == Review(["found"])
    assert len(model.requests) == 3
    assert [(m.role, m.text) for m in model.requests[2].messages] == [
        ("user", "go"),
        ("assistant", "Searching..."),
        ("assistant", "Still searching..."),
    ]
    assert "client.tool.roundtrip" not in types(events)


async def test_endless_pause_turns_give_up() -> None:
    run, model, _ = make_run(lambda request: ScriptedTurn("...", stop_reason="pause_turn"))
    with pytest.raises(UpstreamUnexpected) as e:
        await run.step(make_role(Recorder()), "go")
    assert str(e.value) == "The model paused its turn 11 times in a row."
    assert len(model.requests) == 11


async def test_refusal_raises_model_refused_error() -> None:
    recorder = Recorder()
    run, model, events = make_run([ScriptedTurn("I can't help with that.", stop_reason="refusal")])
    with pytest.raises(ModelRefusedError) as e:
        await run.step(make_role(recorder), "go")
    assert isinstance(e.value, UpstreamUnexpected)
    assert str(e.value) == "The model refused to continue the step of 'reviewer'."
    assert len(model.requests) == 1
    assert events[-1] == ev.StepFailed("reviewer", "ModelRefusedError", str(e.value))
    assert run.outcomes == []


async def test_refusal_after_tool_calls_does_not_run_them() -> None:
    recorder = Recorder()
    run, _, _ = make_run([ScriptedTurn("", [ScriptedCall("look_up", {"text": "a"})], stop_reason="refusal")])
    with pytest.raises(ModelRefusedError):
        await run.step(make_role(recorder), "go")
    assert recorder.calls == []


async def test_max_tokens_inside_a_tool_call_is_an_error_the_step_reports() -> None:
    recorder = Recorder()
    run, _model, events = make_run(
        [ScriptedTurn("Let me", [ScriptedCall("look_up", {"text": "a"})], stop_reason="max_tokens")]
    )
    with pytest.raises(ModelOutputTruncatedError) as e:
        await run.step(make_role(recorder), "go")
    assert isinstance(e.value, UpstreamUnexpected)
    assert recorder.calls == []
    assert "'look_up'" in str(e.value)
    assert "max_tokens=4096" in str(e.value)
    assert events[-1] == ev.StepFailed("reviewer", "ModelOutputTruncatedError", str(e.value))


async def test_max_tokens_in_plain_text_is_not_an_error() -> None:
    run, model, _ = make_run([ScriptedTurn("A long answer, cut", stop_reason="max_tokens")])
    assert await run.step(make_role(Recorder(), reporting=False), "go") is None
    assert len(model.requests) == 1


# ---------------------------------------------------------------------------------------------------------------
# The event vocabulary


VOCABULARY: list[tuple[type[Any], str, list[str]]] = [
    (ev.StepStarted, "step.started", ["role", "input", "model", "label"]),
    (ev.OutputTextDelta, "response.output_text.delta", ["delta"]),
    (ev.ClientToolRequested, "client.tool.requested", ["name", "args", "tool_call_id"]),
    (ev.ClientToolExecuting, "client.tool.executing", ["name", "tool_call_id"]),
    (ev.ClientToolResult, "client.tool.result", ["name", "tool_call_id", "result", "is_error"]),
    (ev.ClientToolRoundtrip, "client.tool.roundtrip", ["turn", "max_turns"]),
    (ev.PayloadRejected, "payload.rejected", ["name", "tool_call_id", "args", "problems"]),
    (ev.StepReported, "step.reported", ["name", "tool_call_id", "payload"]),
    (ev.RunTruncated, "run.truncated", ["turn", "max_turns", "unanswered"]),
    (ev.QuestionAsked, "question.asked", ["text", "inputs"]),
    (ev.QuestionAnswered, "question.answered", ["text", "answer"]),
    (ev.ApprovalRequested, "approval.requested", ["name", "tool_call_id", "args"]),
    (
        ev.ApprovalDecided,
        "approval.decided",
        ["name", "tool_call_id", "decision", "by", "always", "changed", "arguments", "message"],
    ),
    (ev.MarkupError, "markup.error", ["message", "text"]),
    (ev.ReasoningTextDelta, "response.reasoning_text.delta", ["delta"]),
    (ev.ReplyBlockKept, "response.content_block.kept", ["block"]),
    (ev.TextCited, "response.output_text.cited", ["text", "citations"]),
    (ev.StepFinished, "step.finished", ["role", "result", "requests", "truncated"]),
    (ev.StepFailed, "step.failed", ["role", "error", "message"]),
    (ev.StepReplayed, "step.replayed", ["role", "record_id", "backend"]),
    (ev.StepForked, "step.forked", ["role", "forked_from", "at_turn"]),
    (ev.ModelRetryWaiting, "model.retry_waiting", ["seconds", "reason", "asked", "retry", "max_retries"]),
    (ev.ModelSpent, "model.spent", ["usd", "run_spent_usd"]),
    (ev.FunctionCalled, "function.called", ["function", "args", "depth", "caller"]),
    (ev.FunctionReturned, "function.returned", ["function", "result", "depth"]),
    (ev.CommandStarted, "command.started", ["function", "command", "path"]),
    (ev.Logged, "function.log", ["function", "path", "message"]),
    (ev.ErrorHandled, "function.error_handled", ["function", "path", "error", "message"]),
    (ev.ApiRequested, "api.requested", ["profile", "method", "url"]),
    (ev.ApiResponded, "api.responded", ["profile", "method", "url", "status", "is_error"]),
]


def test_the_vocabulary_is_complete() -> None:
    assert {cls for cls, _, _ in VOCABULARY} == set(ev.EVENT_TYPES)
    assert sorted(t for _, t, _ in VOCABULARY) == sorted(
        {
            "client.tool.requested",
            "client.tool.executing",
            "client.tool.result",
            "client.tool.roundtrip",
            "response.output_text.delta",
            "response.reasoning_text.delta",
            "response.content_block.kept",
            "step.started",
            "response.output_text.cited",
            "step.finished",
            "step.failed",
            "step.replayed",
            "step.forked",
            "step.reported",
            "payload.rejected",
            "run.truncated",
            "question.asked",
            "question.answered",
            "approval.requested",
            "approval.decided",
            "markup.error",
            "model.retry_waiting",
            "model.spent",
            "function.called",
            "function.returned",
            "command.started",
            "function.log",
            "function.error_handled",
            "api.requested",
            "api.responded",
        }
    )


@pytest.mark.parametrize(("cls", "type_string", "field_names"), VOCABULARY, ids=[t for _, t, _ in VOCABULARY])
def test_each_event_is_a_frozen_dataclass_with_its_type(
    cls: type[Any], type_string: str, field_names: list[str]
) -> None:
    assert dataclasses.is_dataclass(cls)
    fields = dataclasses.fields(cls)
    assert [f.name for f in fields] == [*field_names, "type"]
    type_field = fields[-1]
    assert type_field.init is False
    instance: Any = cls(*[None] * len(field_names))
    assert instance.type == type_string
    with pytest.raises(dataclasses.FrozenInstanceError):
        instance.type = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, field_names[0], "other")


def test_client_tool_events_carry_the_seeds_id_too() -> None:
    assert ev.ClientToolRequested("look_up", {"text": "x"}, "toolu_1").id == "toolu_1"
    assert ev.ClientToolExecuting("look_up", "toolu_2").id == "toolu_2"
    result = ev.ClientToolResult("look_up", "toolu_3", "found", True)
    assert (result.id, result.name, result.result, result.is_error) == ("toolu_3", "look_up", "found", True)


# ---------------------------------------------------------------------------------------------------------------
# ScriptedModel


def _request(role: str = "", messages: tuple[Message, ...] = (Message("user", (TextBlock("hi"),)),)) -> ModelRequest:
    return ModelRequest("m", "system", messages, (), 100, role)


async def _collect(model: ScriptedModel, request: ModelRequest) -> list[Any]:
    return [e async for e in model.stream(request)]


async def test_scripted_model_data_script_streams_turns_by_position() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn("Let me look.", [ScriptedCall("look_up", {"text": "retries"}, id="call_a")]),
            {"text": "Done", "calls": [{"name": "report_review", "args": {"issues": []}}]},
            "plain text",
        ]
    )
    first = await _collect(model, _request())
    assert [type(e).__name__ for e in first] == ["TextDelta", "TextDelta", "TextDelta", "ToolCall", "TurnEnd"]
    assert (first[3].id, first[3].name, first[3].args) == ("call_a", "look_up", {"text": "retries"})
    assert first[-1].stop_reason == "tool_use"
    second_messages = (
        Message("user", (TextBlock("hi"),)),
        Message("assistant", (TextBlock("x"),)),
        Message("user", (TextBlock("y"),)),
    )
    second = await _collect(model, _request(messages=second_messages))
    assert (second[1].id, second[1].name) == ("toolu_01_0", "report_review")
    third = await _collect(
        model, _request(messages=(*second_messages, Message("assistant", ()), Message("user", (TextBlock("z"),))))
    )
    assert [getattr(e, "text", None) for e in third[:-1]] == ["plain ", "text"]
    assert third[-1].stop_reason == "end_turn"
    assert len(model.requests) == 3


async def test_scripted_model_dict_script_keyed_by_role() -> None:
    model = ScriptedModel({"a": ["from a"], "b": ["from b"]})
    assert [e.text for e in (await _collect(model, _request("b")))[:-1]] == ["from ", "b"]
    assert [e.text for e in (await _collect(model, _request("a")))[:-1]] == ["from ", "a"]
    with pytest.raises(ScriptExhaustedError) as e:
        await _collect(model, _request("c"))
    assert str(e.value) == "ScriptedModel has no turns for role 'c'; it has turns for 'a', 'b'."


async def test_scripted_model_dict_script_drives_two_roles_in_one_run() -> None:
    model = ScriptedModel({"first": [{"calls": [report(["one"])]}], "second": ["nothing to say"]})
    run = Run(model=model)
    first: Role[Any] = Role("first", "Do it.", [reporting_tool("report_review", "Report.", Review)], model=Claude.OPUS)
    second: Role[Any] = Role("second", "Do it.", model=Claude.OPUS)
    assert await run.step(first, "go") == Review(["one"])
    assert await run.step(second, "go") is None
    assert [r.role for r in model.requests] == ["first", "second"]


async def test_scripted_model_function_script_sync_and_async() -> None:
    seen: list[int] = []

    def sync_script(request: ModelRequest) -> str:
        seen.append(len(request.messages))
        return f"sync {len(request.messages)}"

    async def async_script(request: ModelRequest) -> ScriptedTurn:
        return ScriptedTurn(f"async {request.role}")

    sync_model, async_model = ScriptedModel(sync_script), ScriptedModel(async_script)
    assert [e.text for e in (await _collect(sync_model, _request()))[:-1]] == ["sync ", "1"]
    assert seen == [1]
    assert [e.text for e in (await _collect(async_model, _request("r")))[:-1]] == ["async ", "r"]
    assert sync_model.digest != async_model.digest
    assert len(sync_model.digest) == 16


def test_scripted_model_digest_changes_when_the_script_changes() -> None:
    base = ScriptedModel(["a", {"calls": [report(["x"])]}])
    assert ScriptedModel(["a", {"calls": [report(["x"])]}]).digest == base.digest
    assert ScriptedModel(["a", {"calls": [report(["y"])]}]).digest != base.digest
    assert ScriptedModel(["b", {"calls": [report(["x"])]}]).digest != base.digest
    assert ScriptedModel({"r": ["a"]}).digest != ScriptedModel({"s": ["a"]}).digest
    assert ScriptedModel([ScriptedTurn("a", stop_reason="refusal")]).digest != ScriptedModel(["a"]).digest
    assert base.backend_id("claude-opus-5-5") == f"scripted:{base.digest}"

    def one(request: ModelRequest) -> str:
        return "one"

    def two(request: ModelRequest) -> str:
        return "two"

    assert ScriptedModel(one).digest != ScriptedModel(two).digest


async def test_scripted_model_exhausted_says_which_turn() -> None:
    run, _model, events = make_run([{"calls": [look("a")]}])
    with pytest.raises(ScriptExhaustedError) as e:
        await run.step(make_role(Recorder()), "go")
    assert str(e.value) == (
        "ScriptedModel was asked for turn 2 of role 'reviewer' but its script has 1 turn(s). Last message sent: ''"
    )
    assert events[-1].type == "step.failed"


def test_scripted_model_refuses_bad_scripts() -> None:
    with pytest.raises(InputError) as e:
        ScriptedModel("just a string")
    assert str(e.value) == (
        "ScriptedModel takes a list of turns, a dict of lists keyed by role name, or a function "
        "of the request, not str."
    )
    with pytest.raises(InputError) as e:
        ScriptedModel([{"text": "x", "tools": []}])
    assert str(e.value) == (
        "script[0]: unknown keys ['tools']; a turn has text, calls, stop_reason, thinking, redacted, blocks, cited "
        "and container."
    )
    with pytest.raises(InputError) as e:
        ScriptedModel([{"calls": [{"args": {}}]}])
    assert str(e.value) == "script[0].calls[0]: expected {'name': str, 'args': dict}."
    with pytest.raises(InputError) as e:
        ScriptedModel([3])  # type: ignore[list-item]
    assert str(e.value) == "script[0]: a turn is a ScriptedTurn, a string or a dict, not int."


async def test_a_paused_turn_holding_tool_calls_answers_them_rather_than_resending() -> None:
    recorder = Recorder()
    run, model, _ = make_run([{"calls": [look("a")], "stop_reason": "pause_turn"}, {"calls": [report(["ok"])]}])
    assert await run.step(make_role(recorder), "go") == Review(["ok"])
    assert recorder.calls == ["a"]
    assert len(model.requests) == 2
    assert_every_call_answered(run.outcomes[-1].transcript)


@pytest.mark.parametrize("reporting", [True, False])
async def test_a_full_context_window_fails_the_step_rather_than_ending_it(reporting: bool) -> None:
    from agl_notebook.errors import ContextWindowExceededError

    run, model, _ = make_run([{"text": "...", "stop_reason": "model_context_window_exceeded"}])
    with pytest.raises(ContextWindowExceededError, match="no longer fits the model's context window"):
        await run.step(make_role(Recorder(), reporting=reporting), "go")
    assert len(model.requests) == 1, "no reminder is sent into a full context"
    assert run.outcomes == []


class ThinkingModel:
    """A backend of one's own that thinks: readable thinking, a redacted block and an unknown type, kept whole."""

    thinking = True
    network = False

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def backend_id(self, model: str) -> str:
        return "thinker:1"

    async def stream(self, request: ModelRequest) -> Any:
        from agl_notebook.models.base import TextDelta, ThinkingDelta, ToolCall, TurnEnd
        from agl_notebook.transcript import RawBlock

        self.requests.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        yield ThinkingDelta(f"Turn {turn}: ")
        yield ThinkingDelta("let me think.")
        yield RawBlock({"type": "thinking", "thinking": f"Turn {turn}: let me think.", "signature": f"sig{turn}=="})
        if turn == 0:
            yield RawBlock({"type": "redacted_thinking", "data": "EncryptedBlob=="})
            yield TextDelta("Looking.")
            yield RawBlock({"type": "future_block", "payload": {"nested": [1, 2]}})
            yield ToolCall("toolu_1", "look_up", {"text": "retries"})
            yield TurnEnd("tool_use")
        else:
            yield ToolCall("toolu_2", "report_review", {"issues": ["found"]})
            yield TurnEnd("tool_use")


async def test_blocks_a_backend_keeps_whole_are_sent_back_unchanged_in_their_place() -> None:
    from agl_notebook.transcript import RawBlock, message_from_json, message_to_json

    model = ThinkingModel()
    events: list[Event] = []
    run = Run(model=model, on_event=events.append)
    role = make_role(Recorder(), thinking="adaptive", effort="high")
    assert await run.step(role, "go") == Review(["found"])
    second = model.requests[1]
    assert second.thinking is not None and second.thinking.to_json() == {"type": "adaptive", "display": "summarized"}
    assert second.effort == "high"
    reply = second.messages[1]
    assert [type(b).__name__ for b in reply.content] == [
        "RawBlock",
        "RawBlock",
        "TextBlock",
        "RawBlock",
        "ToolUseBlock",
    ]
    content = message_to_json(reply)["content"]
    assert isinstance(content, list)
    assert content[:2] == [
        {"type": "thinking", "thinking": "Turn 0: let me think.", "signature": "sig0=="},
        {"type": "redacted_thinking", "data": "EncryptedBlob=="},
    ]
    assert content[3] == {"type": "future_block", "payload": {"nested": [1, 2]}}
    assert message_from_json(message_to_json(reply)) == reply  # read back as it was written
    assert isinstance(reply.content[0], RawBlock) and reply.content[0].thinking == "Turn 0: let me think."
    kinds = [e.type for e in events if isinstance(e, ev.ReasoningTextDelta | ev.ReplyBlockKept)]
    assert kinds[:4] == [
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.content_block.kept",
        "response.content_block.kept",
    ]


async def test_thinking_on_a_backend_that_does_not_declare_it_is_refused_before_any_request() -> None:
    class Plain:
        def backend_id(self, model: str) -> str:
            return "plain:1"

        async def stream(self, request: ModelRequest) -> Any:
            if request.messages:
                raise AssertionError("no request may be sent")
            yield

    with pytest.raises(InputError, match="thinking, effort or strict tools"):
        await Run(model=Plain()).step(make_role(Recorder(), effort="low"), "go")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"effort": "extreme"}, "not an effort level"),
        ({"thinking": "enabled"}, "needs a budget"),
        ({"thinking": "sometimes"}, "thinking takes a Thinking"),
    ],
)
def test_bad_thinking_and_effort_settings_are_input_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_role(Recorder(), **options)


def test_a_thinking_budget_under_the_minimum_or_not_under_max_tokens_is_an_input_error() -> None:
    from agl_notebook.models.base import Thinking

    with pytest.raises(InputError, match="at least 1024"):
        make_role(Recorder(), thinking=Thinking.enabled(1023))
    with pytest.raises(InputError, match="under the role's max_tokens"):
        make_role(Recorder(), thinking=Thinking.enabled(4096), max_tokens=4096)
    assert make_role(Recorder(), thinking=Thinking.enabled(2048), max_tokens=4096).thinking == Thinking.enabled(2048)
