"""The sandbox's bounds hold while values are built, not only once they exist: memory, time and loop results."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from agl_notebook import Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.functions import (
    AgentInvalidError,
    ExpressionError,
    ExpressionLimitError,
    FunctionCallError,
    Limits,
    LoopBoundError,
    evaluate,
    load_agent,
)
from agl_notebook.functions.errors import ErrorInfo
from agl_notebook.functions.expressions import measure

MB = 1_000_000


def peak_bytes(work: Callable[[], Any]) -> int:
    """The most memory Python allocated (beyond what it held before) while ``work`` ran, errors included."""
    tracemalloc.start()
    try:
        work()
    except ExpressionError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# ---------------------------------------------------------------------------------------------------------------
# Measuring is cheap


def test_measuring_a_large_flat_list_allocates_almost_nothing() -> None:
    numbers = list(range(500_000))
    assert measure(numbers) == 1 + 2 * 500_000
    assert peak_bytes(lambda: measure(numbers)) < 1 * MB  # it pushed a tuple per item: 32 MB here
    nested = [{"id": i, "tags": ["a", "b"]} for i in range(20_000)]
    assert peak_bytes(lambda: measure(nested)) < 1 * MB


def test_evaluating_a_legitimate_large_range_costs_about_the_value_itself() -> None:
    # The list holds 500,000 ints: 4 MB of pointers and 14 MB of int objects; measuring it used to add 32 MB more
    # (for range(1999999): 80 MB, and 213 MB before).
    assert peak_bytes(lambda: evaluate("range(500000)")) < 25 * MB


def test_flat_and_walked_lists_weigh_the_same() -> None:
    for items in ([1] * 20, ["ab"] * 20, [2**100] * 20, [True, None, 1.5] * 5, [2**70, 1] * 5, ["a", 1] * 10):
        walked = 1 + len(items) + sum(measure(x) for x in items)
        assert measure(items) == walked, items
    with pytest.raises(ExpressionLimitError, match="bits"):
        measure([1] * 10 + [2**5000])


# ---------------------------------------------------------------------------------------------------------------
# Displays and calls are weighed as they are built

BIG = "'😀'.ljust(3999990)"  # a new 16-MB string (4 bytes a character) just under the size bound, each time


@pytest.mark.parametrize(
    "template",
    [
        "[{items}]",
        "({items},)",
        "max({items})",
        "[*[{first}], {rest}]",
        "{{{pairs}}}",
        "dict({keywords})",
    ],
)
def test_a_display_or_call_of_many_large_items_is_refused_at_the_second(template: str) -> None:
    count = 10  # all built first: 160 MB before the refusal
    source = template.format(
        items=", ".join([BIG] * count),
        first=BIG,
        rest=", ".join([BIG] * (count - 1)),
        pairs=", ".join(f"{i}: {BIG}" for i in range(count)),
        keywords=", ".join(f"k{i}={BIG}" for i in range(count)),
    )
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate(source)
    assert peak_bytes(lambda: evaluate(source)) < 50 * MB


def test_displays_and_calls_within_the_bound_still_work() -> None:
    assert evaluate("[*xs, 4, *'ab', *{'k': 1}]", {"xs": [1, 2, 3]}) == [1, 2, 3, 4, "a", "b", "k"]
    assert evaluate("max(*xs, 7)", {"xs": [1, 9]}) == 9
    assert evaluate("dict(a=1, **d)", {"d": {"b": [1]}}) == {"a": 1, "b": [1]}
    assert evaluate("{**d, 'c': 2}", {"d": {"b": [1]}}) == {"b": [1], "c": 2}
    half = "x" * 1_900_000
    assert len(evaluate("[s, s]", {"s": half})) == 2
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate("[s, s, 1]", {"s": half + "x" * 99_999})
    deep: list[Any] = []
    for _ in range(99):
        deep = [deep]  # 100 levels: as deep as a value may be
    assert evaluate("[*v]", {"v": deep}) == deep
    with pytest.raises(ExpressionLimitError, match="nested more than"):
        evaluate("[v]", {"v": deep})
    with pytest.raises(ExpressionLimitError, match="nested more than"):
        evaluate("{'k': v}", {"v": deep})


# ---------------------------------------------------------------------------------------------------------------
# A loop's result


async def test_a_loop_whose_collected_values_outgrow_the_size_bound_stops_with_its_path() -> None:
    agent = load_agent(
        {
            "functions": {
                "main": {
                    "commands": [
                        {"loop": {"over": "{ range(20) }", "do": [{"set": {"big": f"{{ {BIG} }}"}}]}},
                        {"return": "{ len(result) }"},
                    ]
                }
            }
        }
    )
    tracemalloc.start()
    try:
        with pytest.raises(FunctionCallError) as e:
            await agent.call("main", run=Run())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(e.value.__cause__, LoopBoundError)
    message = str(e.value)
    assert "the loop at functions.main.commands[0].loop" in message
    assert "stopped at item 2 of 20" in message
    assert peak < 60 * MB  # every iteration's 16-MB value was kept: 320 MB here


async def test_a_loop_result_within_the_bound_is_kept_and_errors_can_be_handled() -> None:
    agent = load_agent(
        {
            "functions": {
                "main": {
                    "commands": [
                        {"loop": {"over": "{ range(3) }", "as": "i", "do": {"set": {"s": "{ 'ab' * 1000 }"}}}},
                        {"set": {"lengths": "{ [len(s) for s in result] }"}},
                        {
                            "loop": {
                                "over": "{ range(3) }",
                                "do": {"set": {"s": "{ 'x' * 1999000 }"}},
                                "onError": {"return": "{ [lengths, exc.type, exc.command] }"},
                            }
                        },
                    ]
                }
            }
        }
    )
    assert await agent.call("main", run=Run()) == [
        [2000, 2000, 2000],
        "LoopBoundError",
        "functions.main.commands[2].loop",
    ]


# ---------------------------------------------------------------------------------------------------------------
# Dicts whose keys hash alike

P = 2305843009213693951  # 2**61 - 1: every multiple of it hashes to 0, so a dict of them takes quadratic time


@pytest.mark.parametrize(
    "source",
    [
        f"{{i * {P}: 0 for i in range(55000)}}",
        f"dict([[i * {P}, 0] for i in range(20000)])",
        f"{{(i * {P}, 'id'): 0 for i in range(55000)}}",
        f"{{**{{i * {P}: 0 for i in range(40)}}, **{{i * {P}: 0 for i in range(40, 80)}}}}",
        "{**d, **e}",
    ],
)
def test_a_dict_of_keys_that_hash_alike_is_refused_within_the_deadline(source: str) -> None:
    # Keys can come from data (ids in an API response): a display, a comprehension or dict() over them.
    variables = {"d": {i * P: 0 for i in range(40)}, "e": {i * P: 0 for i in range(40, 80)}}
    started = time.monotonic()
    with pytest.raises(ExpressionLimitError, match="same hash"):
        # The same-hash bound, not the deadline (checked around every call), must refuse it: a generous deadline.
        evaluate(source, variables, limits=Limits(timeout=10))
    assert time.monotonic() - started < 5  # building it took 21 s in one C call, past the 1 s deadline


def test_ordinary_keys_still_make_dicts() -> None:
    assert len(evaluate("{i: i for i in range(20000)}")) == 20_000
    assert evaluate("{**{1: 'a', -1: 'b'}, -2: 'c', 1.0: 'd', True: 'e'}") == {1: "e", -1: "b", -2: "c"}
    assert evaluate(f"{{i * {P}: 0 for i in range(30)}}") == {i * P: 0 for i in range(30)}
    assert evaluate("dict([[(1, 2), 'x'], [(2, 1), 'y']])") == {(1, 2): "x", (2, 1): "y"}
    with pytest.raises(ExpressionError, match="unhashable"):
        evaluate("{[1]: 2}")


def test_a_list_too_long_for_the_bound_is_refused_without_walking_it() -> None:
    # Every item weighs at least 1, so the length alone settles it: no pass over the items.
    items = [[1, 2]] * 2_000_001  # walking would visit 6 million values
    started = time.monotonic()
    with pytest.raises(ExpressionLimitError, match="too large"):
        measure(items)
    assert time.monotonic() - started < 0.05


def test_one_argument_may_be_as_large_as_any_value() -> None:
    slow = Limits(timeout=60)  # about weight, not time: building and weighing 2 million numbers takes a second on a
    # loaded machine, and the deadline is checked around every call
    assert evaluate("len(range(1999999))", limits=slow) == 1_999_999  # the list weighs 3,999,999 of the 4,000,000
    assert evaluate("len(s)", {"s": "x" * 3_999_990}, limits=slow) == 3_999_990


# ---------------------------------------------------------------------------------------------------------------
# Weights cover what a value holds, measured before the cost is paid (issue 26, item 1)


UNHURRIED = Limits(timeout=600)
"""For tests of weights and steps: on a loaded machine the deadline (checked around every call) would refuse first."""


def test_an_exc_weighs_its_message_and_a_million_copies_of_one_are_refused() -> None:
    # exc weighed 1 whatever its message: a million copies passed every bound, then took gigabytes when shown.
    error = ErrorInfo("ApiError", "upstream said: " + "n" * 5000, status=502, body={"detail": "d" * 2000})
    assert measure(error) > 7000
    for source in ("[e] * 1000000", "[e for i in range(2000)]", "{'a': [e] * 700}", "(e, e) * 400"):
        with pytest.raises(ExpressionLimitError, match="too large"):
            evaluate(source, {"e": error}, limits=UNHURRIED)
    assert len(evaluate("[e] * 100", {"e": error})) == 100


@pytest.mark.parametrize(
    "source",
    [
        "enumerate(range(100000), 2**4000)",
        "enumerate(range(100000), -2**4090)",
        "range(10**1000, 10**1000 + 200000)",
        "range(-2**4095 + 1, -2**4095 + 300000, 7)",
        "zip(s, s)",
        "list(s)",
        "s.split('😀')",
    ],
)
def test_numbers_and_strings_a_builtin_makes_are_weighed_before_they_exist(source: str) -> None:
    variables = {"s": "😀" * 1_500_000}
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate(source, variables, limits=UNHURRIED)
    # Each used to build everything first: 700 MB for the first, 85 MB for the range of wide numbers.
    assert peak_bytes(lambda: evaluate(source, variables, limits=UNHURRIED)) < 10 * MB


@pytest.mark.parametrize(
    "source",
    ["str(xs)", "repr(xs)", "f'{xs}'", "f'{xs!r}'", "f'{xs!a}'", "str([xs])", "repr({'k': xs})"],
)
def test_text_of_a_value_is_refused_before_it_is_all_built(source: str) -> None:
    xs = [2**4000] * 30_000  # weighs 3.8 million: 36 million digits shown
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate(source, {"xs": xs}, limits=UNHURRIED)
    assert peak_bytes(lambda: evaluate(source, {"xs": xs}, limits=UNHURRIED)) < 20 * MB  # 37 MB of text before


def test_text_shown_in_parts_is_what_python_shows() -> None:
    value = [{"a": (1, "é\x00", None)}, [2.5, -(2**100)], (), ("x",), ErrorInfo("T", "m", 404, [1], "c")] * 3
    tight = Limits(max_weight=len(repr(value)) + 1)  # past the cheap bound: shown a part at a time
    assert evaluate("repr(v)", {"v": value}, limits=tight) == repr(value)
    assert evaluate("f'{v!a}'", {"v": value}, limits=Limits(max_weight=len(ascii(value)) + 1)) == ascii(value)
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate("str(v)", {"v": value}, limits=Limits(max_weight=len(repr(value))))


# ---------------------------------------------------------------------------------------------------------------
# Built-ins costed before they run; the deadline checked around every operation (item 2)

A, M = 2**4095 - 1, 2**4095 - 3


@pytest.mark.parametrize(
    "source",
    [
        "pow(a, a, m)",
        "[" + ", ".join(["pow(a, a - 1, m)"] * 40) + "]",
        "[pow(a // 2**1000, a // 2**1000, m // 2**1000) for i in range(50)]",
        "sorted(rows)",
        "sorted(rows, reverse=True)",
    ],
)
def test_modular_powers_and_sorts_are_charged_before_they_run(source: str) -> None:
    rows = [(i * 7919 % 1_000_003,) for i in range(900_000)]  # sorting them took 1.4 s in one C call
    started = time.process_time()
    with pytest.raises(ExpressionLimitError, match="steps of work"):
        evaluate(source, {"a": A, "m": M, "rows": rows}, limits=UNHURRIED)
    assert time.process_time() - started < 3  # 60 powers took 21 s (steps, not the deadline, stopped these)


def test_smaller_modular_powers_and_sorts_still_work() -> None:
    assert evaluate("pow(3, 2**2000 + 1, 2**2048 - 159)") == pow(3, 2**2000 + 1, 2**2048 - 159)
    assert evaluate("sorted(xs)[:3]", {"xs": list(range(100_000, 0, -1))}, limits=UNHURRIED) == [1, 2, 3]


def test_dict_union_keeps_the_same_hash_bound() -> None:
    alike = {"d": {i * P: 0 for i in range(20)}, "e": {i * P: 1 for i in range(20, 40)}}
    with pytest.raises(ExpressionLimitError, match="same hash"):
        evaluate("d | e", alike)  # dict.__or__ skipped the bound, then compared colliding keys quadratically
    assert evaluate("{'a': 1} | {'b': 2, 'a': 3}") == {"a": 3, "b": 2}
    assert evaluate("6 | 3") == 7


def test_the_deadline_holds_between_operations_not_only_between_iterations() -> None:
    rows = [[0] * 180 + [i] for i in range(20_000)]
    copy = [list(r) for r in rows]
    source = "[" + ", ".join(["a == b"] * 300) + "]"  # each comparison is one C call over 3.6 million items
    limits = Limits(timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ExpressionLimitError, match=r"longer than 0\.5 s"):
        evaluate(source, {"a": rows, "b": copy}, limits=limits)
    one = time.monotonic()
    evaluate("a == b", {"a": rows, "b": copy}, limits=UNHURRIED)
    once = time.monotonic() - one
    assert time.monotonic() - one < 600 and one - started < 0.5 + 3 * once + 1  # 300 of them ran to the end


def test_int_of_a_long_text_is_refused_before_it_is_parsed() -> None:
    for source in ("int('7' * 5000)", "int('1' * 100000, 2)", "int('0x' + 'f' * 5000, 16)", "int(' -' + '9' * 1300)"):
        with pytest.raises(ExpressionLimitError, match="bits"):
            evaluate(source, limits=UNHURRIED)
    assert evaluate("int('0' * 50 + '12')") == 12
    assert evaluate("int('1_000_000')") == 1_000_000


# ---------------------------------------------------------------------------------------------------------------
# The tape is bounded as a whole (item 3)


async def test_a_calls_responses_are_bounded_as_a_whole_and_replay_the_same() -> None:
    import httpx2

    body = json.dumps({"s": "y" * 1_000_000}).encode()
    served: list[int] = []

    def handler(request: Any) -> Any:
        served.append(1)
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    agent = load_agent(
        {
            "profiles": {"p": {"baseUrl": "https://api.example.com"}},
            "functions": {
                "main": {
                    "commands": [
                        {"set": {"got": 0}},
                        {
                            "loop": {
                                "over": "{ range(40) }",
                                "do": [
                                    {"api": {"profile": "p", "path": "/big"}},
                                    {"set": {"got": "{ got + 1 }", "last": None}},
                                ],
                                "onError": [{"return": "{ [got, exc.type, 'recording' in exc.message] }"}],
                            }
                        },
                    ]
                }
            },
        },
        transport=httpx2.MockTransport(handler),
        max_recording_bytes=5_500_000,
    )
    outcome = await agent.record("main")
    assert outcome.result == [5, "ApiError", True]  # every response was kept: 40 MB here, 2.25 GB with 150 of 15 MB
    assert len(served) == 6
    assert sum(len(json.dumps(e)) for e in outcome.tape) <= 5_500_000
    replayed = await agent.replay("main", None, outcome.tape)
    assert replayed.result == outcome.result and len(served) == 6


# ---------------------------------------------------------------------------------------------------------------
# Nesting and long numbers are agl_notebook errors naming where (item 4)


async def test_a_call_chain_too_long_is_an_error_naming_it() -> None:
    functions: dict[str, Any] = {f"f{i}": {"commands": [{"func": f"f{i + 1}"}]} for i in range(150)}
    functions["f150"] = {"commands": [{"return": 1}]}
    with pytest.raises(FunctionCallError) as e:
        await load_agent({"functions": functions}).call("f0", run=Run())
    assert e.value.error.type == "CommandError"  # RecursionError before
    assert "call chain 101 functions deep (f0 → f1 → f2 → … → f97 → f98 → f99 → f100)" in str(e.value)
    assert e.value.path == "functions.f99.commands[0].func"
    shorter: dict[str, Any] = {
        f"f{i}": {"commands": [{"func": f"f{i + 1}"}, {"return": "{ result }"}]} for i in range(99)
    }
    shorter["f99"] = {"commands": [{"return": 7}]}
    assert await load_agent({"functions": shorter}).call("f0", run=Run()) == 7


@pytest.mark.parametrize("depth", [101, 900, 2000])
def test_an_agent_file_nested_too_deeply_is_a_problem_naming_where(depth: int) -> None:
    nested: Any = "{ 1 }"
    for _ in range(depth):
        nested = {"k": [nested]}
    with pytest.raises(AgentInvalidError) as e:
        load_agent({"functions": {"main": {"commands": [{"return": nested}]}}})
    (problem,) = e.value.problems
    assert problem.path.startswith("functions.main.commands[0].return.k[0].k[0]")
    assert "nested more than 100 levels deep" in problem.message
    text = '{"functions": {"main": {"commands": [{"return": ' + "[" * depth + "]" * depth + "}]}}}"
    with pytest.raises(AgentInvalidError, match="nested"):
        load_agent(text)


def test_a_number_too_long_in_an_agent_file_is_a_problem_with_its_place() -> None:
    text = '{"functions": {"main": {\n  "commands": [{"return": "9999"}, {"set": {"n": -' + "7" * 4400 + "}}]}}}"
    with pytest.raises(AgentInvalidError) as e:
        load_agent(text)
    assert "not readable at line 2, column 50 (a number of 4,400 digits" in str(e.value)


async def test_a_models_deeply_nested_tool_input_is_refused_naming_the_tool() -> None:
    deep: Any = {}
    for _ in range(3000):
        deep = {"a": deep}
    agent = load_agent(
        {
            "model": "m",
            "functions": {
                "echo": {
                    "description": "Echoes.",
                    "args": {"value": {"type": "any", "description": "Anything."}},
                    "commands": [{"return": "{ value }"}],
                },
                "main": {"commands": [{"llm": {"prompt": "go", "tools": ["echo"]}}]},
            },
        }
    )
    model = ScriptedModel(lambda request: ScriptedTurn("", [ScriptedCall("echo", {"value": deep})]))
    with pytest.raises(FunctionCallError) as e:
        await agent.call("main", run=Run(model=model))
    assert "the model called the tool 'echo' with input nested more than 100 levels deep" in str(e.value)
