"""Running JSON-function agents: commands, arguments, error handling, reentrancy, llm, ask, loop, end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run, Screen, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook import events as ev
from agl_notebook.functions import (
    CommandBudgetError,
    FunctionCallError,
    LoopBoundError,
    ReentrancyError,
    load_agent,
)
from agl_notebook.functions import events as fev
from agl_notebook.models.base import ModelRequest
from agl_notebook.terminals import Terminal

CORPUS = Path(__file__).parent / "corpus"


def agent_of(**functions: Any) -> Any:
    return load_agent({"model": "claude-haiku-5-5", "functions": functions})


async def call(
    agent: Any, function: str, args: dict[str, Any] | None = None, **run_options: Any
) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    run = Run(on_event=events.append, **run_options)
    result = await agent.call(function, args or {}, run=run)
    return result, events


def logs(events: list[Any]) -> list[str]:
    return [e.message for e in events if isinstance(e, fev.Logged)]


# ---------------------------------------------------------------------------------------------------------------
# B1: functions, commands in order, result


async def test_commands_run_in_order_and_result_holds_the_previous_value() -> None:
    agent = agent_of(
        main={
            "commands": [
                {"log": "first"},
                {"set": {"a": 2, "b": "{ a * 10 }"}},
                {"log": "{ f'set gave {result}' }"},
                {"return": "{ [a, b, result] }"},
            ]
        }
    )
    result, events = await call(agent, "main")
    assert result == [2, 20, "set gave 20"]
    assert logs(events) == ["first", "set gave 20"]
    assert [e.path for e in events if isinstance(e, fev.CommandStarted)] == [
        f"functions.main.commands[{i}].{k}" for i, k in enumerate(["log", "set", "log", "return"])
    ]


async def test_a_function_without_return_returns_none() -> None:
    assert (await call(agent_of(main={"commands": {"set": {"x": 1}}}), "main"))[0] is None


async def test_duplicate_keys_in_a_block_run_in_order() -> None:
    agent = load_agent(CORPUS / "valid" / "blocks.json")
    result, events = await call(agent, "twice", {"name": "Ada"})
    assert result == 2
    assert logs(events) == ["hello Ada", "hello again Ada"]
    result, _ = await call(agent, "listed")
    assert result == {"doubled": 4, "literal": "plain text", "items": [5, 3]}


# ---------------------------------------------------------------------------------------------------------------
# B2: arguments


async def test_an_omitted_argument_is_none_for_func_and_for_a_top_level_call() -> None:
    agent = agent_of(
        show={"args": {"a": {}, "b": {}}, "commands": {"return": "{ [a, b] }"}},
        main={"commands": {"func": {"name": "show", "args": {"a": 1}}, "return": "{ result }"}},
    )
    assert (await call(agent, "main"))[0] == [1, None]
    assert (await call(agent, "show", {"b": "x"}))[0] == [None, "x"]


async def test_an_argument_named_like_a_builtin_leaves_the_builtin_usable() -> None:
    agent = agent_of(
        stats={
            "description": "Sums up numbers.",
            "args": {
                "len": {"type": "int", "description": "How many to keep."},
                "max": {"type": "int", "description": "The largest allowed."},
            },
            "commands": {"return": "{ [min(n, max) for n in range(len(range(len)))] + [max(1, 2)] }"},
        },
        main={"commands": {"func": {"name": "stats", "args": {"len": 3, "max": 1}}, "return": "{ result }"}},
    )
    assert (await call(agent, "main"))[0] == [0, 1, 1, 2]


async def test_a_call_with_an_undeclared_argument_or_function_is_refused() -> None:
    agent = agent_of(show={"args": {"a": {}}, "commands": {"return": 1}})
    from agl_notebook import InputError

    with pytest.raises(InputError, match="show has no argument 'z'; its arguments are a"):
        await agent.call("show", {"z": 1}, run=Run())
    with pytest.raises(InputError, match="has no function 'nope'"):
        await agent.call("nope", run=Run())


def test_a_tool_function_shows_the_model_each_argument_type_and_description() -> None:
    agent = load_agent(CORPUS / "valid" / "orders.json")
    (spec,) = agent.tool_specs()
    assert spec.name == "lookupOrder"
    assert spec.description == "Looks up one order by id and returns its status and total."
    assert spec.input_schema == {
        "type": "object",
        "properties": {"orderId": {"type": "string", "description": "The order id, such as ORD-1042."}},
        "additionalProperties": False,
        "required": ["orderId"],
    }


def test_required_only_tells_the_model() -> None:
    agent = agent_of(
        tool={
            "description": "A tool.",
            "args": {
                "q": {"type": "str", "description": "The query."},
                "limit": {"type": "int | None", "description": "At most this many.", "required": False},
            },
            "commands": {"return": 1},
        }
    )
    schema = agent.tool_specs()[0].input_schema
    assert schema["required"] == ["q"]
    assert schema["properties"]["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "description": "At most this many.",
    }


async def test_a_tool_call_without_a_required_argument_runs_with_it_none() -> None:
    agent = agent_of(
        find={
            "description": "Finds things.",
            "args": {
                "q": {"type": "str", "description": "The query."},
                "limit": {"type": "int", "description": "At most this many.", "required": False},
            },
            "commands": {"return": "{ {'q': q, 'limit': limit} }"},
        },
        main={"commands": {"llm": {"prompt": "Find.", "tools": ["find"]}, "return": "{ result }"}},
    )
    model = ScriptedModel([ScriptedTurn("", [ScriptedCall("find", {"limit": 3})]), "Done."])
    result, events = await call(agent, "main", model=model)
    assert result == "Done."
    assert [(e.name, e.result, e.is_error) for e in events if isinstance(e, ev.ClientToolResult)] == [
        ("find", '{"q": null, "limit": 3}', False)
    ]


# ---------------------------------------------------------------------------------------------------------------
# B3 and the llm command: tool functions offered to a model through the one loop


TOOLS = {
    "double": {
        "description": "Doubles a number.",
        "args": {"n": {"type": "int", "description": "The number."}},
        "commands": {"return": "{ n * 2 }"},
    },
    "fail": {"description": "Always fails.", "commands": {"return": "{ 1 / 0 }"}},
    "main": {
        "args": {"question": {}},
        "commands": {
            "llm": {
                "system": "Use the tools.",
                "prompt": "{ question }",
                "tools": ["double", "fail"],
                "output": {"answer": {"type": "int", "description": "The answer."}},
            },
            "return": "{ result }",
        },
        "onError": {"return": "{ {'failed': exc.type} }"},
    },
    "chat": {"commands": {"llm": "Say hello.", "return": "{ result }"}},
}


async def test_llm_runs_tool_functions_through_the_loop_and_reports_a_typed_result() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                "Let me double it.",
                [ScriptedCall("double", {"n": 21}), ScriptedCall("double", {"n": "x"}), ScriptedCall("fail", {})],
            ),
            {"calls": [{"name": "report_result", "args": {"answer": 42}}]},
        ]
    )
    result, events = await call(agent_of(**TOOLS), "main", {"question": "Double 21."}, model=model)
    assert result == {"answer": 42}
    first = model.requests[0]
    assert [t.name for t in first.tools] == ["double", "fail", "report_result"]
    assert first.system.startswith(
        "Use the tools.\n\nWhen you have the result, hand it back by calling the `report_result` tool."
    )
    assert first.messages[0].text == "Double 21."
    assert [(e.name, e.result, e.is_error) for e in events if isinstance(e, ev.ClientToolResult)] == [
        ("double", "42", False),
        (
            "double",
            "The arguments for `double` do not fit its schema:\n- n: expected a whole number, got a string "
            "('x').\nFix these and call `double` again.",
            True,
        ),
        ("fail", "ZeroDivisionError: division by zero", True),
        ("report_result", "Reported. Your work on this step is done.", False),
    ]
    called = [(e.function, e.depth) for e in events if isinstance(e, fev.FunctionCalled)]
    assert called == [("main", 0), ("double", 1), ("fail", 1)]
    assert any(isinstance(e, ev.OutputTextDelta) for e in events)


async def test_llm_without_output_gives_the_reply_text() -> None:
    result, _ = await call(agent_of(**TOOLS), "chat", model=ScriptedModel(["Hello there."]))
    assert result == "Hello there."


async def test_llm_whose_model_never_reports_goes_to_on_error() -> None:
    result, _ = await call(agent_of(**TOOLS), "main", {"question": "?"}, model=ScriptedModel(["No.", "Still no."]))
    assert result == {"failed": "RoleIncompleteError"}


async def test_llm_needs_a_model() -> None:
    agent = load_agent({"functions": {"chat": TOOLS["chat"]}})
    with pytest.raises(FunctionCallError, match="has no model"):
        await agent.call("chat", run=Run())


async def test_the_scripted_model_sees_the_function_name_as_the_role() -> None:
    seen: list[str] = []

    def reply(request: ModelRequest) -> str:
        seen.append(request.role)
        return "ok"

    await call(agent_of(**TOOLS), "chat", model=ScriptedModel(reply))
    assert seen == ["chat"]


# ---------------------------------------------------------------------------------------------------------------
# B4: error handling


async def test_a_command_on_error_gives_the_command_its_value() -> None:
    agent = agent_of(
        main={
            "commands": [
                {
                    "set": {
                        "x": "{ {}['missing'] }",
                        "onError": {"log": "{ f'{exc.type}: {exc.message}' }", "set": {"x": 0}},
                    }
                },
                {"return": "{ [x, result] }"},
            ]
        }
    )
    result, events = await call(agent, "main")
    assert result == [0, 0]
    assert logs(events) == ["KeyError: no key 'missing' (the keys are none)."]
    handled = [e for e in events if isinstance(e, fev.ErrorHandled)]
    assert handled == [
        fev.ErrorHandled(
            "main", "functions.main.commands[0].set.onError", "KeyError", "no key 'missing' (the keys are none)."
        )
    ]


async def test_an_unhandled_error_runs_the_function_on_error_instead_of_the_rest() -> None:
    agent = agent_of(
        main={
            "args": {"n": {}},
            "commands": [{"log": "before"}, {"set": {"x": "{ 1 / n }"}}, {"log": "never"}],
            "onError": [{"log": "{ f'{exc.command}: {exc}' }"}, {"return": "{ {'n': n, 'error': exc.type} }"}],
        }
    )
    result, events = await call(agent, "main", {"n": 0})
    assert result == {"n": 0, "error": "ZeroDivisionError"}
    assert logs(events) == ["before", "functions.main.commands[1].set: division by zero"]


async def test_without_return_the_handler_returns_none_and_the_caller_continues() -> None:
    agent = agent_of(
        inner={"commands": {"return": "{ 1 / 0 }"}, "onError": {"log": "handled"}},
        outer={"commands": {"func": "inner", "set": {"after": "{ result }"}, "return": "{ ['continued', after] }"}},
    )
    result, events = await call(agent, "outer")
    assert result == ["continued", None]
    assert logs(events) == ["handled"]


async def test_an_error_nobody_handles_ends_the_call_with_where_and_the_chain() -> None:
    agent = agent_of(
        inner={"args": {"d": {}}, "commands": {"log": "in", "return": "{ d['k'] }"}},
        outer={"commands": {"func": {"name": "inner", "args": {"d": {}}}}},
    )
    with pytest.raises(FunctionCallError) as e:
        await call(agent, "outer")
    assert str(e.value) == (
        "outer failed at functions.inner.commands[1].return (call chain: outer → inner): "
        "KeyError: no key 'k' (the keys are none)."
    )
    assert e.value.chain == ("outer", "inner")
    assert e.value.error.type == "KeyError"


async def test_an_error_in_a_handler_goes_to_the_caller() -> None:
    agent = agent_of(
        inner={"commands": {"return": "{ 1 / 0 }"}, "onError": {"return": "{ exc.message + 1 }"}},
        outer={"commands": {"func": {"name": "inner", "onError": {"return": "{ 'caller handled ' + exc.type }"}}}},
    )
    assert (await call(agent, "outer"))[0] == "caller handled TypeError"


# ---------------------------------------------------------------------------------------------------------------
# B5: reentrancy at run time


class ReenteringTerminal(Terminal):
    """Answers a question by calling the agent again: a call chain the validator cannot see."""

    def __init__(self) -> None:
        super().__init__()
        self.agent: Any = None

    async def ask(self, screen: Screen[Any]) -> Any:
        return await self.agent.call("main", run=Run(answers=["x"]))


async def test_reentrancy_is_refused_at_run_time_with_the_call_chain() -> None:
    terminal = ReenteringTerminal()
    agent = agent_of(
        main={"commands": {"func": {"name": "confirm", "onError": {"return": "handled?"}}}},
        confirm={"commands": {"ask": {"text": "Sure?", "onError": {"return": "handled?"}}}},
    )
    terminal.agent = agent
    with pytest.raises(ReentrancyError) as e:
        await agent.call("main", run=Run(terminal=terminal))
    assert e.value.chain == ("main", "confirm", "main")
    assert "main is already running: main → confirm → main" in str(e.value)


async def test_the_same_function_may_run_again_after_it_returned() -> None:
    agent = agent_of(
        one={"commands": {"return": 1}},
        main={"commands": [{"func": "one"}, {"func": "one"}, {"return": "{ result + 1 }"}]},
    )
    assert (await call(agent, "main"))[0] == 2


# ---------------------------------------------------------------------------------------------------------------
# B6: the other commands


async def test_ask_goes_through_the_run_terminal_with_typed_inputs() -> None:
    agent = agent_of(
        main={
            "commands": [
                {"ask": "Your name?"},
                {"set": {"name": "{ result }"}},
                {"ask": {"text": "{ f'Hi {name}, pick one' }", "input": "choice", "options": "{ ['tea', 'coffee'] }"}},
                {"set": {"drink": "{ result }"}},
                {"ask": {"text": "How many?", "input": "integer", "min": 1, "max": 3}},
                {"set": {"count": "{ result }"}},
                {"ask": {"text": "Sure?", "input": "confirm"}},
                {"return": "{ [name, drink, count, result] }"},
            ]
        }
    )
    result, events = await call(agent, "main", answers=["Ada", "coffee", 2, True])
    assert result == ["Ada", "coffee", 2, True]
    asked = [(e.text, e.inputs) for e in events if isinstance(e, ev.QuestionAsked)]
    assert asked[1] == ("Hi Ada, pick one", ("Answer",))
    assert [e.answer for e in events if isinstance(e, ev.QuestionAnswered)] == ["Ada", "coffee", 2, True]


async def test_loop_goes_over_a_list_with_its_variables_and_collects_values() -> None:
    agent = agent_of(
        main={
            "commands": [
                {"set": {"total": 0}},
                {
                    "loop": {
                        "over": "{ [3, 4, 5] }",
                        "as": "n",
                        "index": "i",
                        "max": 3,
                        "do": [{"set": {"total": "{ total + n * i }"}}],
                    }
                },
                {"return": "{ [total, result] }"},
            ]
        }
    )
    assert (await call(agent, "main"))[0] == [14, [0, 4, 14]]


async def test_a_loop_over_more_items_than_its_bound_fails_rather_than_skipping() -> None:
    agent = agent_of(main={"commands": {"loop": {"over": "{ range(5) }", "max": 4, "do": {"log": "x"}}}})
    with pytest.raises(FunctionCallError) as e:
        await call(agent, "main")
    assert isinstance(e.value.__cause__, LoopBoundError)
    assert "given 5 items and its bound is max=4" in str(e.value)


async def test_if_runs_one_branch_and_gives_its_last_value() -> None:
    agent = agent_of(
        main={
            "args": {"n": {}},
            "commands": [
                {
                    "if": {
                        "condition": "{ n > 1 }",
                        "then": [{"log": "big"}, {"set": {"v": "big"}}],
                        "else": {"set": {"v": "small"}},
                    }
                },
                {"return": "{ [v, result] }"},
            ],
        }
    )
    assert (await call(agent, "main", {"n": 5}))[0] == ["big", "big"]
    assert (await call(agent, "main", {"n": 0}))[0] == ["small", "small"]


async def test_end_ends_the_whole_call_through_every_function() -> None:
    agent = agent_of(
        inner={"commands": [{"end": "{ {'stopped': True} }"}, {"log": "never"}]},
        outer={"commands": [{"func": "inner"}, {"log": "never either"}]},
    )
    result, events = await call(agent, "outer")
    assert result == {"stopped": True}
    assert logs(events) == []


async def test_return_and_log_accept_their_own_on_error() -> None:
    agent = agent_of(
        main={
            "commands": [
                {"log": {"value": "{ 1 / 0 }", "onError": {"set": {"logged": "no"}}}},
                {"return": {"value": "{ missing }", "onError": {"return": "{ [result, exc.type] }"}}},
            ]
        }
    )
    assert (await call(agent, "main"))[0] == ["no", "NameError"]


async def test_log_writes_to_the_python_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="agl_notebook.functions"):
        await call(agent_of(main={"commands": {"log": "{ {'a': 1} }"}}), "main")
    assert caplog.messages == ['main: {"a": 1}']


async def test_function_events_nest_with_depth_and_caller() -> None:
    agent = agent_of(a={"commands": {"func": "b"}}, b={"commands": {"return": 7}})
    _, events = await call(agent, "a")
    flow = [e for e in events if isinstance(e, fev.FunctionCalled | fev.FunctionReturned)]
    assert flow == [
        fev.FunctionCalled("a", {}, 0, ""),
        fev.FunctionCalled("b", {}, 1, "functions.a.commands[0].func"),
        fev.FunctionReturned("b", 7, 1),
        fev.FunctionReturned("a", None, 0),
    ]


async def test_a_runaway_call_stops_at_the_command_budget_and_no_handler_keeps_it_going() -> None:
    spec = {
        "functions": {
            "main": {
                "commands": {
                    "loop": {
                        "over": "{ range(100) }",
                        "max": 100,
                        "do": {"loop": {"over": "{ range(100) }", "max": 100, "do": {"set": {"x": 1}}}},
                        "onError": {"return": 0},
                    }
                },
                "onError": {"return": "handled"},
            }
        }
    }
    agent = load_agent(spec, max_commands=500)
    with pytest.raises(CommandBudgetError, match="more than 500 commands"):
        await agent.call("main", run=Run())
    assert load_agent(spec).call_sync("main", run=Run()) is None  # 10,101 commands: within the default


def test_call_sync_runs_outside_an_event_loop() -> None:
    agent = agent_of(main={"args": {"n": {}}, "commands": {"return": "{ n + 1 }"}})
    assert agent.call_sync("main", {"n": 1}, run=Run()) == 2


async def test_results_are_json() -> None:
    agent = agent_of(
        main={"commands": {"return": "{ {'t': (1, 2), 1: None} }"}}, bad={"commands": {"return": "{ float('nan') }"}}
    )
    assert (await call(agent, "main"))[0] == {"t": [1, 2], "1": None}
    with pytest.raises(FunctionCallError, match="nan cannot be written as JSON"):
        await call(agent, "bad")
