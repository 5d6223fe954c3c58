"""The sandbox's bounds hold while values are built, not only once they exist: memory, time and loop results."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.functions import (
    ExpressionError,
    ExpressionLimitError,
    FunctionCallError,
    Limits,
    LoopBoundError,
    evaluate,
    load_agent,
)
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
