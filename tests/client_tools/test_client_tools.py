"""The client-tools API (docs/client-tools.md): the public names, the loop, handler errors, round trips, events, the
advertised-tool guard and tool calls written as text; each test able to fail, with the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

import agl_notebook.client_tools as ct
from agl_notebook import Claude, Role, Run, Screen, ScriptedModel, TextInput
from agl_notebook.client_tools import (
    DEFAULT_MAX_TOOL_ROUNDTRIPS,
    DSML_TOOL_CALL_CLOSE,
    DSML_TOOL_CALL_OPEN,
    ClientToolExecuting,
    ClientToolRequested,
    ClientToolResult,
    ClientToolRoundtrip,
    Event,
    OutputTextDelta,
    Runner,
    RunTruncated,
    ToolExecutionContext,
    ToolResult,
    run,
    stream,
)
from agl_notebook.errors import InputError, MissingCredentialsError, ScriptExhaustedError
from agl_notebook.models.base import ModelRequest
from agl_notebook.models.scripted import TurnLike
from agl_notebook.replay import MemoryStore, ReplayMissError
from agl_notebook.transcript import Message, ToolResultBlock, ToolUseBlock
from tests.support.steps import Boom, types

AGENT = {"name": "assistant", "instructions": "Use the available tools to answer questions."}
WEATHER = {
    "name": "get_weather",
    "description": "Get current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALCULATE = {"name": "calculate", "description": "Evaluate a math expression", "parameters": {"type": "object"}}


async def get_weather(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(content=json.dumps({"city": args.get("city", "unknown"), "temp": 22}))


async def calculate(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    try:
        return ToolResult(content=str(int(args["a"]) * int(args["b"])))
    except Exception:
        return ToolResult(content="Invalid expression", is_error=True)


HANDLERS = {"get_weather": get_weather, "calculate": calculate}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def merged(events: Sequence[Event]) -> list[Event]:
    """Events with adjacent text deltas joined (a replay streams each recorded text block as one delta)."""
    out: list[Event] = []
    for e in events:
        if isinstance(e, OutputTextDelta) and out and isinstance(out[-1], OutputTextDelta):
            out[-1] = OutputTextDelta(out[-1].delta + e.delta)
        else:
            out.append(e)
    return out


def unanswered(transcript: Sequence[Message]) -> list[str]:
    """Tool calls without a result with their id in the next message (none may be left)."""
    missing = []
    for i, m in enumerate(transcript):
        uses = [b.id for b in m.content if isinstance(b, ToolUseBlock)]
        if uses:
            nxt = transcript[i + 1].content if i + 1 < len(transcript) else ()
            answered = [b.tool_use_id for b in nxt if isinstance(b, ToolResultBlock)]
            missing += [u for u in uses if u not in answered]
    return missing


def always_calls(name: str = "search") -> ScriptedModel:
    """A model that asks for a tool in every reply."""
    return ScriptedModel(lambda request: {"calls": [{"name": name, "args": {"q": "x"}}]})


# The public names ------------------------------------------------------------------------------------------------


def test_the_module_exports_the_seed_names() -> None:
    for name in (
        "stream",
        "run",
        "Runner",
        "ToolResult",
        "ToolExecutionContext",
        "ToolHandler",
        "ToolHandlers",
        "DEFAULT_MAX_TOOL_ROUNDTRIPS",
        "DSML_TOOL_CALL_OPEN",
        "DSML_TOOL_CALL_CLOSE",
        "ClientToolRequested",
        "ClientToolExecuting",
        "ClientToolResult",
        "ClientToolRoundtrip",
        "OutputTextDelta",
        "RunTruncated",
        "MarkupError",
        "RunResult",
    ):
        assert name in ct.__all__ and hasattr(ct, name), name
    assert DEFAULT_MAX_TOOL_ROUNDTRIPS == 25
    assert DSML_TOOL_CALL_OPEN == "<｜DSML｜tool_call>" and DSML_TOOL_CALL_CLOSE == "</｜DSML｜tool_call>"
    assert ToolResult("x") == ToolResult(content="x", is_error=False)
    assert ToolExecutionContext().tool_call_id is None
    assert callable(Runner.run) and callable(Runner.stream)
    import agl_notebook

    roles_tool_result: type = agl_notebook.ToolResult
    assert ct.ToolResult is not roles_tool_result  # its own (content, is_error), not the roles' one


# C1: stream() yields the seed's events; run() returns them --------------------------------------------------------


async def test_stream_yields_the_seeds_event_types_with_their_fields() -> None:
    model = ScriptedModel(
        [
            {"text": "Let me check.", "calls": [call("get_weather", city="Sydney"), call("calculate", a=15, b=23)]},
            "It is 22 degrees in Sydney, and 15 * 23 = 345.",
        ]
    )
    events = [
        e
        async for e in stream(
            AGENT,
            "What is the weather in Sydney, and what is 15 * 23?",
            tool_handlers=HANDLERS,
            client_tools=[WEATHER, CALCULATE],
            model=model,
        )
    ]
    assert types(events) == [
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "client.tool.requested",
        "client.tool.executing",
        "client.tool.result",
        "client.tool.requested",
        "client.tool.executing",
        "client.tool.result",
        "client.tool.roundtrip",
        *["response.output_text.delta"] * 12,
    ]
    requested = [e for e in events if isinstance(e, ClientToolRequested)]
    assert [(e.name, e.args, e.id) for e in requested] == [
        ("get_weather", {"city": "Sydney"}, "toolu_00_0"),
        ("calculate", {"a": 15, "b": 23}, "toolu_00_1"),
    ]
    executing = [e for e in events if isinstance(e, ClientToolExecuting)]
    assert [(e.name, e.id) for e in executing] == [("get_weather", "toolu_00_0"), ("calculate", "toolu_00_1")]
    results = [e for e in events if isinstance(e, ClientToolResult)]
    assert [(e.name, e.result, e.is_error, e.id) for e in results] == [
        ("get_weather", '{"city": "Sydney", "temp": 22}', False, "toolu_00_0"),
        ("calculate", "345", False, "toolu_00_1"),
    ]
    (roundtrip,) = [e for e in events if isinstance(e, ClientToolRoundtrip)]
    assert (roundtrip.turn, roundtrip.max_turns) == (1, 25)
    text = "".join(e.delta for e in events if isinstance(e, OutputTextDelta))
    assert text == "Let me check.It is 22 degrees in Sydney, and 15 * 23 = 345."


async def test_run_returns_the_events_the_text_and_the_transcript() -> None:
    script: list[TurnLike] = [{"calls": [call("get_weather", city="Oslo")]}, "Cold."]
    result = await run(
        AGENT, "Weather in Oslo?", tool_handlers=HANDLERS, client_tools=[WEATHER], model=ScriptedModel(script)
    )
    streamed = [
        e
        async for e in stream(
            AGENT, "Weather in Oslo?", tool_handlers=HANDLERS, client_tools=[WEATHER], model=ScriptedModel(script)
        )
    ]
    assert list(result.events) == streamed
    assert result.text == "Cold." and result.truncated is False and result.requests == 2 and not result.replayed
    assert [m.role for m in result.transcript] == ["user", "assistant", "user", "assistant"]
    assert result.usage.output_tokens > 0


async def test_the_stream_holds_no_step_lifecycle_events_but_the_runs_sinks_get_them() -> None:
    seen: list[Event] = []
    runner = Runner(model=ScriptedModel(["Hi."]), run=Run(on_event=seen.append))
    result = await runner.run(AGENT, "Hello")
    assert types(result.events) == ["response.output_text.delta"]
    assert types(seen) == ["step.started", "response.output_text.delta", "step.finished"]


# The loop -----------------------------------------------------------------------------------------------------------


async def test_the_model_is_sent_the_instructions_the_tools_as_input_schemas_and_paired_results() -> None:
    model = ScriptedModel([{"calls": [call("get_weather", city="Rome")]}, "Warm."])
    await run(AGENT, "Rome?", tool_handlers=HANDLERS, client_tools=[WEATHER], model=model)
    first, second = model.requests
    assert first.system == AGENT["instructions"]
    assert [(t.name, t.description, t.input_schema) for t in first.tools] == [
        (WEATHER["name"], WEATHER["description"], WEATHER["parameters"])
    ]
    assert first.messages[-1].text == "Rome?"
    # The assistant turn is kept, and its result goes back as a tool_result with the call's id.
    assert second.messages[1].content == (ToolUseBlock("toolu_00_0", "get_weather", {"city": "Rome"}),)
    assert second.messages[2].content == (ToolResultBlock("toolu_00_0", '{"city": "Rome", "temp": 22}', False),)


async def test_the_loop_repeats_until_the_model_stops_calling_tools() -> None:
    model = ScriptedModel(
        [
            {"calls": [call("calculate", a=1, b=2)]},
            {"calls": [call("calculate", a=3, b=4)]},
            {"calls": [call("calculate", a=5, b=6)]},
            "Done.",
        ]
    )
    result = await run(AGENT, "Go", tool_handlers=HANDLERS, client_tools=[CALCULATE], model=model)
    assert model.calls == 4 and result.requests == 4
    assert [(e.turn, e.max_turns) for e in result.events if isinstance(e, ClientToolRoundtrip)] == [
        (1, 25),
        (2, 25),
        (3, 25),
    ]
    assert [e.result for e in result.events if isinstance(e, ClientToolResult)] == ["2", "12", "30"]
    assert result.text == "Done." and not result.truncated


@pytest.mark.parametrize("limit", [0, 1, 2, 5])
async def test_n_round_trips_means_exactly_n_plus_one_requests_then_truncation(limit: int) -> None:
    ran: list[str] = []

    async def search(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        ran.append(str(ctx.tool_call_id))
        return ToolResult("result")

    model = always_calls()
    events = [
        e
        async for e in stream(
            AGENT,
            "Search forever",
            tool_handlers={"search": search},
            model=model,
            client_tools=[{"name": "search", "description": "Search", "parameters": {"type": "object"}}],
            max_tool_roundtrips=limit,
        )
    ]
    assert model.calls == limit + 1
    assert len(ran) == limit  # the calls of the last reply are not run
    assert [e.turn for e in events if isinstance(e, ClientToolRoundtrip)] == list(range(1, limit + 1))
    (truncated,) = [e for e in events if isinstance(e, RunTruncated)]
    assert (truncated.type, truncated.turn, truncated.max_turns, truncated.unanswered) == (
        "run.truncated",
        limit,
        limit,
        ("search",),
    )
    assert events[-1] is truncated
    last = [e for e in events if isinstance(e, ClientToolResult)][-1]
    assert last.is_error and f"limit of {limit} tool round trips" in last.result


async def test_at_truncation_no_tool_call_is_left_without_a_result() -> None:
    model = ScriptedModel(lambda request: {"calls": [call("search", q="a"), call("search", q="b")]})
    result = await run(
        AGENT,
        "Go",
        tool_handlers={"search": lambda a, c: _ok()},
        model=model,
        max_tool_roundtrips=2,
        client_tools=[{"name": "search", "description": "Search", "parameters": {"type": "object"}}],
    )
    assert result.truncated and result.requests == 3
    assert result.transcript[-1].role == "user"
    assert unanswered(result.transcript) == []
    assert sum(1 for m in result.transcript for b in m.content if isinstance(b, ToolUseBlock)) == 6


async def _ok() -> ToolResult:
    return ToolResult("ok")


async def test_the_default_limit_is_25_round_trips_so_26_requests() -> None:
    model = always_calls()
    result = await run(
        AGENT,
        "Go",
        tool_handlers={"search": lambda a, c: _ok()},
        model=model,
        client_tools=[{"name": "search", "description": "Search", "parameters": {"type": "object"}}],
    )
    assert model.calls == 26 and result.truncated
    assert sum(1 for e in result.events if isinstance(e, ClientToolRoundtrip)) == 25


async def test_stopping_within_the_limit_is_not_truncated() -> None:
    model = ScriptedModel([{"calls": [call("calculate", a=1, b=1)]}, {"calls": [call("calculate", a=1, b=1)]}, "ok"])
    result = await run(
        AGENT, "Go", tool_handlers=HANDLERS, client_tools=[CALCULATE], model=model, max_tool_roundtrips=2
    )
    assert model.calls == 3 and not result.truncated
    assert not any(isinstance(e, RunTruncated) for e in result.events)


# C3: handlers -------------------------------------------------------------------------------------------------------


async def test_a_handler_gets_the_arguments_and_the_call_id_and_its_result_goes_back() -> None:
    seen: list[tuple[dict[str, Any], str | None]] = []

    async def lookup(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        seen.append((args, ctx.tool_call_id))
        return ToolResult("no such order", is_error=True)

    model = ScriptedModel([{"calls": [{"name": "lookup", "args": {"id": 7}, "id": "call_1"}]}, "Sorry."])
    result = await run(
        AGENT,
        "Order 7?",
        tool_handlers={"lookup": lookup},
        model=model,
        client_tools=[{"name": "lookup", "description": "Look up", "parameters": {"type": "object"}}],
    )
    assert seen == [({"id": 7}, "call_1")]
    (res,) = [e for e in result.events if isinstance(e, ClientToolResult)]
    assert (res.result, res.is_error, res.tool_call_id) == ("no such order", True, "call_1")
    assert model.requests[1].messages[-1].content == (ToolResultBlock("call_1", "no such order", True),)


async def test_a_lambda_returning_a_coroutine_is_a_handler() -> None:
    async def search_handler(args: dict[str, Any]) -> ToolResult:
        return ToolResult(f"searched {args['q']}")

    result = await Runner().run(
        {"name": "tool-heavy-agent", "instructions": "Use tools to gather information."},
        "Do a task that needs tools",
        max_tool_roundtrips=5,
        model=ScriptedModel([{"calls": [call("search", q="x")]}, "done"]),
        tool_handlers={"search": lambda args, ctx: search_handler(args)},
        client_tools=[{"name": "search", "description": "Search", "parameters": {"type": "object"}}],
    )
    roundtrips = [e for e in result.events if e.type == "client.tool.roundtrip"]
    assert len(roundtrips) == 1
    assert [e.result for e in result.events if isinstance(e, ClientToolResult)] == ["searched x"]


async def raises(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    raise ValueError("the city is not known")


async def raises_blank(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    raise Boom()


async def returns_str(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
    return "not a ToolResult"


async def returns_role_result(args: dict[str, Any], ctx: ToolExecutionContext) -> Any:
    from agl_notebook import ToolResult as RoleToolResult

    return RoleToolResult("x")


async def returns_bad_content(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(content=42)  # type: ignore[arg-type]


def sync_handler(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult("sync")


def raises_when_called(args: dict[str, Any], ctx: ToolExecutionContext) -> Any:
    raise KeyError("city")


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (raises, "ValueError: the city is not known"),
        (raises_blank, "Boom"),
        (returns_str, "TypeError: the handler of tool 'get_weather' returned str; it must return ToolResult("),
        (returns_role_result, "TypeError: the handler of tool 'get_weather' returned ToolResult; it must return"),
        (returns_bad_content, "TypeError: the handler of tool 'get_weather' returned ToolResult content of type int"),
        (sync_handler, "TypeError: the handler of tool 'get_weather' returned ToolResult, not an awaitable"),
        (raises_when_called, "KeyError: 'city'"),
    ],
)
async def test_a_failing_handler_becomes_an_error_result_and_the_run_goes_on(handler: Any, expected: str) -> None:
    model = ScriptedModel([{"calls": [call("get_weather", city="Atlantis")]}, "I could not find it."])
    result = await run(AGENT, "Atlantis?", tool_handlers={"get_weather": handler}, client_tools=[WEATHER], model=model)
    (res,) = [e for e in result.events if isinstance(e, ClientToolResult)]
    assert res.is_error and res.result.startswith(expected) and res.result.strip()
    assert model.calls == 2 and result.text == "I could not find it."
    assert model.requests[1].messages[-1].content[0] == ToolResultBlock("toolu_00_0", res.result, True)


async def test_a_handler_cannot_change_what_the_model_wrote() -> None:
    async def mutate(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        args["city"] = "changed"
        args.setdefault("nested", {})["x"] = 1
        return ToolResult("ok")

    model = ScriptedModel([{"calls": [call("get_weather", city="Lima", nested={})]}, "ok"])
    result = await run(AGENT, "Lima?", tool_handlers={"get_weather": mutate}, client_tools=[WEATHER], model=model)
    assert result.transcript[1].content[0] == ToolUseBlock("toolu_00_0", "get_weather", {"city": "Lima", "nested": {}})


async def test_cancelling_a_run_is_not_turned_into_an_error_result() -> None:
    started = asyncio.Event()

    async def forever(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    task = asyncio.create_task(
        run(
            AGENT,
            "Go",
            tool_handlers={"get_weather": forever},
            client_tools=[WEATHER],
            model=ScriptedModel([{"calls": [call("get_weather")]}, "ok"]),
        )
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# The advertised-tool guard -------------------------------------------------------------------------------------------


async def test_a_tool_not_offered_gets_the_guard_result_and_its_handler_never_runs() -> None:
    ran: list[str] = []

    async def secret(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        ran.append("secret")
        return ToolResult("leaked")

    model = ScriptedModel([{"calls": [call("delete_everything"), call("get_weather", city="Paris")]}, "ok"])
    result = await run(
        AGENT, "Go", tool_handlers={**HANDLERS, "delete_everything": secret}, client_tools=[WEATHER], model=model
    )
    assert ran == []
    results = [(e.name, e.result, e.is_error) for e in result.events if isinstance(e, ClientToolResult)]
    assert results == [
        ("delete_everything", "Tool not offered this turn: delete_everything", True),
        ("get_weather", '{"city": "Paris", "temp": 22}', False),
    ]
    assert "client.tool.executing" in types(result.events)  # the offered one ran
    assert [e.name for e in result.events if isinstance(e, ClientToolExecuting)] == ["get_weather"]


@pytest.mark.parametrize("client_tools", [None, []])
async def test_the_guard_holds_with_no_tools_listed(client_tools: Any) -> None:
    # Another SDK turns the guard off when no tools are listed, and then runs the handler: this one fails closed.
    ran: list[str] = []

    async def handler(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        ran.append("ran")
        return ToolResult("ran")

    model = ScriptedModel([{"calls": [call("get_weather", city="Paris")]}, "ok"])
    result = await run(AGENT, "Go", tool_handlers={"get_weather": handler}, client_tools=client_tools, model=model)
    assert ran == []
    assert model.requests[0].tools == ()
    (res,) = [e for e in result.events if isinstance(e, ClientToolResult)]
    assert (res.result, res.is_error) == ("Tool not offered this turn: get_weather", True)
    assert not any(isinstance(e, ClientToolExecuting) for e in result.events)


async def test_a_listed_tool_without_a_handler_gets_an_error_result() -> None:
    model = ScriptedModel([{"calls": [call("calculate", a=1, b=2)]}, "ok"])
    result = await run(
        AGENT, "Go", tool_handlers={"get_weather": get_weather}, client_tools=[WEATHER, CALCULATE], model=model
    )
    (res,) = [e for e in result.events if isinstance(e, ClientToolResult)]
    assert res.is_error and res.result.startswith("No handler for tool calculate:")
    assert [t.name for t in model.requests[0].tools] == ["get_weather", "calculate"]
    assert model.calls == 2


async def test_the_guard_applies_to_calls_written_as_text_too() -> None:
    ran: list[str] = []

    async def handler(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        ran.append("ran")
        return ToolResult("ran")

    text = DSML_TOOL_CALL_OPEN + '{"name": "rm", "arguments": {}}' + DSML_TOOL_CALL_CLOSE
    result = await run(
        AGENT, "Go", tool_handlers={"rm": handler}, client_tools=[WEATHER], model=ScriptedModel([text, "ok"])
    )
    assert ran == []
    assert [e.result for e in result.events if isinstance(e, ClientToolResult)] == ["Tool not offered this turn: rm"]


# Tool calls written as text --------------------------------------------------------------------------------------


async def test_markup_in_streamed_text_surfaces_as_ordinary_tool_call_events() -> None:
    reply = (
        "Checking. "
        + DSML_TOOL_CALL_OPEN
        + '{"name": "get_weather", "arguments": "{\\"city\\": \\"Sydney\\"}"}'
        + DSML_TOOL_CALL_CLOSE
        + DSML_TOOL_CALL_OPEN
        + "{oops"
        + DSML_TOOL_CALL_CLOSE
        + " And "
        + DSML_TOOL_CALL_OPEN
        + '{"name": "calculate", "args": {"a": 15, "b": 23}}'
        + DSML_TOOL_CALL_CLOSE
    )
    model = ScriptedModel([reply, "Sunny, and 345."])
    events = [
        e
        async for e in stream(
            AGENT, "Weather and 15*23?", tool_handlers=HANDLERS, client_tools=[WEATHER, CALCULATE], model=model
        )
    ]
    text = "".join(e.delta for e in events if isinstance(e, OutputTextDelta))
    assert text == "Checking.  And Sunny, and 345."
    assert "DSML" not in text and "{" not in text
    assert [(e.name, e.args, e.id) for e in events if isinstance(e, ClientToolRequested)] == [
        ("get_weather", {"city": "Sydney"}, "markup_00_0"),
        ("calculate", {"a": 15, "b": 23}, "markup_00_1"),
    ]
    assert [e.result for e in events if isinstance(e, ClientToolResult)] == ['{"city": "Sydney", "temp": 22}', "345"]
    assert types(events).count("markup.error") == 1
    assert unanswered(model.requests[1].messages) == []


async def test_the_final_text_never_holds_markup_though_the_transcript_keeps_what_the_model_wrote() -> None:
    broken = DSML_TOOL_CALL_OPEN + '{"name": "get_weather", "arguments": {' + DSML_TOOL_CALL_CLOSE
    result = await run(
        AGENT, "Hi", tool_handlers=HANDLERS, client_tools=[WEATHER], model=ScriptedModel(["Hello " + broken + "there."])
    )
    assert result.text == "Hello there."
    assert result.transcript[-1].text == "Hello " + broken + "there."
    (error,) = [e for e in result.events if e.type == "markup.error"]
    assert "not valid JSON" in error.message


# C6: human in the loop ------------------------------------------------------------------------------------------------


async def test_a_handler_can_wait_for_a_person() -> None:
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def ask_user(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult(content=(await answer).strip())

    model = ScriptedModel([{"calls": [call("ask_user", question="Where to?")]}, "Lisbon it is."])
    events: list[Event] = []
    waiting = asyncio.Event()

    async def consume() -> None:
        async for e in stream(
            {"name": "clarifier", "instructions": "Ask the user for clarification when needed."},
            "Help me plan a trip",
            tool_handlers={"ask_user": ask_user},
            model=model,
            client_tools=[
                {"name": "ask_user", "description": "Ask the user a question", "parameters": {"type": "object"}}
            ],
        ):
            events.append(e)
            if e.type == "client.tool.executing":
                waiting.set()

    task = asyncio.create_task(consume())
    await waiting.wait()
    assert "client.tool.result" not in types(events)  # streamed while the person has not answered
    answer.set_result("  Lisbon ")
    await task
    assert [e.result for e in events if isinstance(e, ClientToolResult)] == ["Lisbon"]


def destination(question: str) -> Screen[str]:
    return Screen(question, [TextInput("Answer", str)])


async def test_questions_through_the_runs_terminal_are_recorded_and_replayed_without_the_handler() -> None:
    store = MemoryStore()
    calls: list[str] = []
    tools = [{"name": "ask_user", "description": "Ask the user a question", "parameters": {"type": "object"}}]
    script: list[TurnLike] = [{"calls": [call("ask_user", question="Where to?")]}, "Lisbon it is."]

    def runner_with(answers: list[object] | None, mode: Any) -> Runner:
        return Runner(model=ScriptedModel(script), run=Run(store=store, mode=mode, answers=answers))

    live = runner_with(["Lisbon"], "auto")

    async def ask_user(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        calls.append("asked")
        return ToolResult(await live.terminal.show(destination, question=args["question"]))

    first = await live.run(AGENT, "Plan a trip", tool_handlers={"ask_user": ask_user}, client_tools=tools)
    assert calls == ["asked"] and not first.replayed
    assert types(first.events)[:5] == [
        "client.tool.requested",
        "client.tool.executing",
        "question.asked",
        "question.answered",
        "client.tool.result",
    ]

    replay = runner_with(None, "replay")
    again = await replay.run(AGENT, "Plan a trip", tool_handlers={"ask_user": ask_user}, client_tools=tools)
    assert calls == ["asked"] and again.replayed
    assert merged(again.events) == merged(first.events) and again.text == "Lisbon it is."
    assert again.transcript == first.transcript


# Recording and replay, views -----------------------------------------------------------------------------------------


async def test_a_run_is_recorded_and_replays_with_no_model_and_no_handler() -> None:
    store = MemoryStore()
    ran: list[str] = []

    async def counted(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        ran.append(str(ctx.tool_call_id))
        raise RuntimeError("flaky")

    text = (
        DSML_TOOL_CALL_OPEN
        + '{"name": "get_weather", "arguments": {"city": "Bern"}}'
        + DSML_TOOL_CALL_CLOSE
        + " and "
        + DSML_TOOL_CALL_OPEN
        + "{broken"
        + DSML_TOOL_CALL_CLOSE
    )
    script: list[TurnLike] = [{"text": text, "calls": [call("calculate", a=2, b=3)]}, "Done."]
    live_model = ScriptedModel(script)
    live = await Runner(run=Run(store=store)).run(
        AGENT,
        "Go",
        tool_handlers={**HANDLERS, "get_weather": counted},
        client_tools=[WEATHER, CALCULATE],
        model=live_model,
    )
    assert len(store.records()) == 1 and ran == ["markup_00_0"]

    replay_model = ScriptedModel(script)
    again = await Runner(run=Run(store=store, mode="replay")).run(
        AGENT,
        "Go",
        tool_handlers={**HANDLERS, "get_weather": counted},
        client_tools=[WEATHER, CALCULATE],
        model=replay_model,
    )
    assert replay_model.calls == 0 and ran == ["markup_00_0"]
    assert again.replayed and merged(again.events) == merged(live.events) and again.transcript == live.transcript
    assert types(again.events).count("markup.error") == 1  # the dropped span is in the transcript, dropped again
    assert not again.truncated and again.requests == live.requests

    # Anything the model sees changing is a miss, never a stale answer.
    with pytest.raises(ReplayMissError, match="tools"):
        await Runner(run=Run(store=store, mode="replay")).run(
            AGENT, "Go", tool_handlers=HANDLERS, client_tools=[WEATHER], model=ScriptedModel(script)
        )


async def test_a_truncated_run_replays_truncated() -> None:
    store = MemoryStore()
    tools = [{"name": "search", "description": "Search", "parameters": {"type": "object"}}]
    live = await Runner(run=Run(store=store)).run(
        AGENT,
        "Go",
        tool_handlers={"search": lambda a, c: _ok()},
        client_tools=tools,
        model=always_calls(),
        max_tool_roundtrips=1,
    )
    again = await Runner(run=Run(store=store, mode="replay")).run(
        AGENT, "Go", tool_handlers={}, client_tools=tools, model=always_calls(), max_tool_roundtrips=1
    )
    assert live.truncated and again.truncated and merged(again.events) == merged(live.events)


class FakeView:
    def __init__(self, role: Role[Any]) -> None:
        self.role = role.name
        self.calls: list[str] = []

    def begin(self, *, replaying: bool) -> None:
        self.calls.append(f"begin replaying={replaying}")

    def event(self, event: Event) -> None:
        self.calls.append(event.type)

    def finish(self, record: Any) -> None:
        self.calls.append(f"finish recorded={record is not None}")

    def fail(self, error: BaseException) -> None:
        self.calls.append(f"fail {type(error).__name__}")


async def test_the_runs_view_draws_the_run_like_a_step() -> None:
    views: list[FakeView] = []

    def factory(role: Role[Any]) -> FakeView:
        views.append(FakeView(role))
        return views[-1]

    runner = Runner(model=ScriptedModel([{"calls": [call("calculate", a=1, b=2)]}, "3"]), run=Run(view=factory))
    result = await runner.run(AGENT, "1*2?", tool_handlers=HANDLERS, client_tools=[CALCULATE])
    (view,) = views
    assert view.role == "assistant"
    # step.started comes first: it is told before the step's first await, so views take their places in start order.
    assert view.calls == [
        "step.started",
        "begin replaying=False",
        *types(result.events),
        "step.finished",
        "finish recorded=True",
    ]


# Streams: errors, early exits, concurrency -------------------------------------------------------------------------


async def test_an_error_that_stops_the_run_comes_out_of_the_stream() -> None:
    events: list[Event] = []

    async def consume() -> None:
        async for e in stream(
            AGENT,
            "Go",
            tool_handlers=HANDLERS,
            client_tools=[CALCULATE],
            model=ScriptedModel([{"calls": [call("calculate", a=1, b=2)]}]),
        ):
            events.append(e)

    with pytest.raises(ScriptExhaustedError):
        await consume()
    assert types(events)[-1] == "client.tool.roundtrip"


async def test_leaving_a_stream_early_stops_the_run() -> None:
    cancelled = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    seen: list[Event] = []
    runner = Runner(model=ScriptedModel([{"calls": [call("get_weather")]}, "ok"]), run=Run(on_event=seen.append))
    events = runner.stream(AGENT, "Go", tool_handlers={"get_weather": slow}, client_tools=[WEATHER])
    async for e in events:
        if e.type == "client.tool.executing":
            break
    await events.aclose()  # type: ignore[attr-defined]
    assert cancelled.is_set()
    assert seen[-1].type == "step.failed"


async def test_concurrent_runs_on_one_runner_keep_their_events_apart() -> None:
    def model_for(request: ModelRequest) -> Any:
        word = request.messages[0].text
        if len(request.messages) == 1:
            return {"calls": [call("echo", word=word)]}
        return f"{word} done"

    async def echo(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        await asyncio.sleep(0)
        return ToolResult(args["word"])

    runner = Runner(model=ScriptedModel(model_for))
    tools = [{"name": "echo", "description": "Echo", "parameters": {"type": "object"}}]
    results = await asyncio.gather(
        *(runner.run(AGENT, w, tool_handlers={"echo": echo}, client_tools=tools) for w in ("alpha", "beta", "gamma"))
    )
    for word, result in zip(("alpha", "beta", "gamma"), results, strict=True):
        assert [e.result for e in result.events if isinstance(e, ClientToolResult)] == [word]
        assert result.text == f"{word} done"


async def test_a_role_step_started_by_a_handler_does_not_leak_into_the_stream() -> None:
    inner_role: Role[None] = Role("helper", "Help.", model=ScriptedModel(["inner text"]))
    shared = Run()

    async def delegate(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        await shared.step(inner_role, "help")
        return ToolResult(shared.outcomes[-1].text)

    runner = Runner(model=ScriptedModel([{"calls": [call("delegate")]}, "outer text"]), run=shared)
    result = await runner.run(
        AGENT,
        "Go",
        tool_handlers={"delegate": delegate},
        client_tools=[{"name": "delegate", "description": "Delegate", "parameters": {"type": "object"}}],
    )
    text = "".join(e.delta for e in result.events if isinstance(e, OutputTextDelta))
    assert text == "outer text"
    assert [e.result for e in result.events if isinstance(e, ClientToolResult)] == ["inner text"]


# The default model and the checks on what is given -------------------------------------------------------------


async def test_without_a_model_the_anthropic_backend_runs_the_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no SDK credentials profile either
    assert ct.DEFAULT_MODEL == Claude.SONNET
    with pytest.raises(MissingCredentialsError):
        await run(AGENT, "Hi")


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("assistant", "No agent dict"),
        ({"name": "a"}, "needs non-empty 'instructions'"),
        ({"name": " ", "instructions": "x"}, "non-empty 'name'"),
        ({"name": "a", "instructions": "x", "model": "m"}, "unknown keys ['model']"),
    ],
)
def test_the_agent_is_checked(agent: Any, message: str) -> None:
    with pytest.raises(InputError, match="agent"):
        stream(agent, "Hi", model=ScriptedModel(["x"]))
    if message != "No agent dict":
        with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
            stream(agent, "Hi", model=ScriptedModel(["x"]))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"client_tools": [{"name": "has space", "parameters": {"type": "object"}}]}, "client_tools\\[0\\]: the name"),
        ({"client_tools": [{"name": "f", "params": {}}]}, "unknown keys \\['params'\\]"),
        ({"client_tools": [{"name": "f", "parameters": {"type": "string"}}]}, "JSON Schema of an object"),
        ({"client_tools": [{"name": "f", "parameters": {"type": "object", "x": {1, 2}}}]}, "must be JSON"),
        ({"client_tools": [{"name": "f"}, {"name": "f"}]}, "two client tools are named 'f'"),
        ({"client_tools": {"name": "f"}}, "client_tools is a list"),
        ({"tool_handlers": {"f": "not callable"}}, "tool_handlers\\['f'\\] must be a callable"),
        ({"tool_handlers": [get_weather]}, "tool_handlers is a dict"),
        ({"max_tool_roundtrips": -1}, "max_tool_roundtrips must be a whole number >= 0"),
        ({"max_tool_roundtrips": True}, "max_tool_roundtrips"),
        ({"model": 3}, "model=... takes a model backend"),
    ],
)
def test_tools_handlers_and_limits_are_checked_when_the_run_is_asked_for(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        stream(AGENT, "Hi", **{"model": ScriptedModel(["x"]), **options})


def test_the_message_must_be_text() -> None:
    with pytest.raises(InputError, match="message"):
        stream(AGENT, "  ", model=ScriptedModel(["x"]))
    with pytest.raises(InputError, match=r"Runner\(run=\.\.\.\)"):
        Runner(run="nope")  # type: ignore[arg-type]


async def test_a_tool_without_description_or_parameters_is_offered_as_an_open_object() -> None:
    model = ScriptedModel(["ok"])
    await run(AGENT, "Hi", client_tools=[{"name": "ping"}], model=model)
    (spec,) = model.requests[0].tools
    assert (spec.name, spec.description, spec.input_schema) == ("ping", "", {"type": "object"})


async def test_the_anthropic_backends_stream_is_intercepted_too() -> None:
    from agl_notebook.models.anthropic import AnthropicModel
    from tests.support.anthropic_api import api, reply, text

    fake = api(
        reply(
            text(
                "Sure. <｜DS",
                'ML｜tool_call>{"name": "get_weather", "argu',
                'ments": {"city": "Paris"}}</｜DSML｜tool',
                "_call>",
            )
        ),
        reply(text("Sunny in Paris.")),
    )
    result = await run(
        AGENT,
        "Paris?",
        tool_handlers=HANDLERS,
        client_tools=[WEATHER],
        model=AnthropicModel(client=fake.client(), model=Claude.HAIKU),
    )
    assert "".join(e.delta for e in result.events if isinstance(e, OutputTextDelta)) == "Sure. Sunny in Paris."
    assert [(e.name, e.args) for e in result.events if isinstance(e, ClientToolRequested)] == [
        ("get_weather", {"city": "Paris"})
    ]
    second = fake.bodies()[1]["messages"]
    assert second[1]["content"][1] == {
        "type": "tool_use",
        "id": "markup_00_0",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert second[2]["content"][0]["tool_use_id"] == "markup_00_0"


def test_run_sync_runs_without_an_event_loop() -> None:
    runner = Runner(model=ScriptedModel([{"calls": [call("calculate", a=6, b=7)]}, "42."]))
    result = runner.run_sync(AGENT, "6*7?", tool_handlers=HANDLERS, client_tools=[CALCULATE])
    assert result.text == "42." and [e.result for e in result.events if isinstance(e, ClientToolResult)] == ["42"]


def test_an_unknown_option_is_refused_by_every_entry_point_naming_it() -> None:
    runner = Runner(model=ScriptedModel(["Hi."]))
    for entry, where in ((runner.run_sync, "run_sync"), (runner.stream, "stream")):
        with pytest.raises(TypeError, match=rf"{where}\(\) got an unexpected keyword argument 'max_turns'"):
            entry(AGENT, "Hi", max_turns=2)  # type: ignore[call-arg]
