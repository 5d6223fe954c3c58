"""Reliability, fuzzing: the JSON functions' sandbox keeps its bounds against hostile expressions and agents.

Two kinds of test:

- A property test of value weights: for random nestings of lists, tuples, dicts, strings, numbers and errors
  (``exc``), the weight `measure` gives bounds the bytes the value takes when shown (``str``, ``repr``, ``ascii``,
  HTML-escaped), logged (JSON text) or returned (JSON, with and without ``ensure_ascii``): at most
  `BYTES_PER_WEIGHT` bytes per unit. And a value shown a part at a time (past the cheap bound) is the same text.
- A corpus of attacks, each run in a worker process capped in memory (``RLIMIT_AS``) and watched by a wall clock
  (tests/support/sandbox_worker.py): each must end within 3 s with an agl_notebook error (never a raw
  MemoryError, RecursionError or ValueError) and at most 500 MB of memory growth (peak RSS of the attack).
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agl_notebook.functions.conversions import to_json
from agl_notebook.functions.errors import CommandError, ErrorInfo, ExpressionLimitError
from agl_notebook.functions.expressions import Limits, measure
from agl_notebook.functions.expressions.operations import bounded_text, to_text
from agl_notebook.functions.expressions.values import BYTES_PER_WEIGHT
from tests.support.reliability_report import ReliabilityNotes

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

# ---------------------------------------------------------------------------------------------------------------
# Random sandbox values

# Every character, lone surrogates included (a JSON response's "\ud800" decodes to one), control characters and
# the astral ones whose escapes are longest.
CHARACTERS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
TEXT = st.one_of(
    st.text(CHARACTERS, max_size=12),
    st.sampled_from(["", "\x00", '"', "'\"", "\\", "\U000e0001", "😀", "<&>", "\u2028", "\ud800", "ﬃ"]),
)
INTEGERS = st.one_of(
    st.integers(-10, 10),
    st.integers(-(2**63), 2**63),
    st.integers(0, 4095).map(lambda bits: -(2**bits) + 1),
    st.integers(0, 4095).map(lambda bits: 2**bits - 1),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-2.2250738585072014e-308, -1.2345678901234567e-300, 5e-324, -1.7976931348623157e308]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTEGERS, FLOATS, TEXT)
KEYS = st.one_of(TEXT, INTEGERS, FLOATS, st.booleans(), st.none(), st.tuples(INTEGERS, TEXT))


def _errors(children: st.SearchStrategy[Any]) -> st.SearchStrategy[ErrorInfo]:
    return st.builds(
        ErrorInfo,
        type=TEXT,
        message=TEXT,
        status=st.one_of(st.none(), st.integers(100, 599)),
        body=st.one_of(st.none(), children),
        command=TEXT,
    )


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(KEYS, children, max_size=5),
        _errors(children),
    )


VALUES = st.recursive(st.one_of(SCALARS, _errors(SCALARS)), _containers, max_leaves=30)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def renderings(value: Any) -> dict[str, str]:
    """Every text the value becomes when shown, logged or returned."""
    shown = {
        "str": to_text(value),
        "repr": bounded_text(value, repr, Limits()),
        "ascii": bounded_text(value, ascii, Limits()),
    }
    try:
        data = to_json(value)
    except CommandError:  # a tuple key or a float that is not finite: refused, nothing written
        pass
    else:
        shown["logged"] = json.dumps(data, ensure_ascii=False)
        shown["returned"] = json.dumps(data)
    return {**shown, **{f"{name} as HTML": html.escape(text) for name, text in shown.items()}}


@SETTINGS
@given(value=VALUES)
def test_a_values_weight_bounds_what_it_takes_shown_logged_or_returned(value: Any, reliability: ReliabilityNotes) -> None:
    weight = measure(value)
    for name, text in renderings(value).items():
        assert _utf8(text) <= BYTES_PER_WEIGHT * weight, (name, weight, text[:200])
    reliability.example(
        "Fuzzing",
        "random nestings of lists, tuples, dicts, strings (every character), numbers and errors (exc), weighed and "
        "then shown (str, repr, ascii, HTML), logged (JSON) and returned (JSON, ensure_ascii or not)",
        f"the weight bounds the bytes of every rendering (at most {BYTES_PER_WEIGHT} bytes a unit)",
    )


@SETTINGS
@given(value=VALUES)
def test_a_heavy_value_shown_in_parts_is_the_same_text_or_refused(value: Any, reliability: ReliabilityNotes) -> None:
    for show in (repr, ascii):
        whole = show(value)
        # Past the cheap bound (weight x 12 over the room) the value is shown a part at a time: the same text if it
        # fits the size bound, else refused.
        fits = Limits(max_weight=max(len(whole) + 1, math.ceil(measure(value) / 2), 2))
        if measure(value, Limits(max_weight=10**9)) <= fits.max_weight:
            assert bounded_text(value, show, fits) == whole
        tight = Limits(max_weight=max(1, len(whole) // 2))
        if len(whole) + 1 > tight.max_weight:
            with pytest.raises(ExpressionLimitError):
                bounded_text(value, show, tight)
    reliability.example(
        "Fuzzing",
        "random values shown with str(), repr() and ascii() past the cheap bound, a part at a time",
        "the same text as Python's when it fits the size bound, refused (never built whole) when it does not",
    )


def test_an_error_weighs_its_message_and_body() -> None:
    # An exc weighed 1 whatever it held: a list of a million copies of one passed every bound.
    light = ErrorInfo("ApiError", "x")
    heavy = ErrorInfo("ApiError", "x" * 1000, status=500, body={"detail": "y" * 1000})
    assert measure(heavy) > 2000 > measure(light)
    with pytest.raises(ExpressionLimitError, match="too large"):
        measure([heavy] * 2000)
