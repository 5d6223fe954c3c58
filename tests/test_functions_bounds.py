"""The sandbox's bounds hold while values are built, not only once they exist: memory, time and loop results."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from agl_notebook.functions import ExpressionError, ExpressionLimitError, evaluate
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
