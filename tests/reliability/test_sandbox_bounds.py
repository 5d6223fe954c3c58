"""Reliability, fuzzing: the JSON functions' sandbox keeps its bounds against hostile expressions and agents.

Two kinds of test:

- A property test of value weights: for random nestings of lists, tuples, dicts, strings, numbers and errors
  (``exc``), the weight `measure` gives bounds the bytes the value takes when shown (``str``, ``repr``, ``ascii``,
  HTML-escaped), logged (JSON text) or returned (JSON, with and without ``ensure_ascii``): at most
  `BYTES_PER_WEIGHT` bytes per unit. And a value shown a part at a time (past the cheap bound) is the same text.
- A corpus of attacks, each run in a worker process capped in memory (``RLIMIT_AS``) and watched by a wall clock
  (tests/support/sandbox_worker.py): each must end within 3 s of CPU time with an agl_notebook error (never a raw
  MemoryError, RecursionError or ValueError) and at most 500 MB of memory growth (peak RSS of the attack). CPU time,
  not the wall clock, because the suite runs on shared machines: two cores under a load of 8 stretch the wall clock
  of the same work five to seven times (the worker still kills an attempt after 30 s of wall clock).
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
from tests.support.sandbox_worker import AGENTS, P

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
def test_a_values_weight_bounds_what_it_takes_shown_logged_or_returned(
    value: Any, reliability: ReliabilityNotes
) -> None:
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
        assert len(whole) >= measure(value)  # so a value heavier than the room is refused before it is shown
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


# ---------------------------------------------------------------------------------------------------------------
# Attacks, each in a capped worker process

SECONDS = 3.0
GROWTH_MB = 500.0
REPEATED_POW = "[" + ", ".join(["pow(big, big, mod)"] * 60) + "]"
REPEATED_COMPARE = "[" + ", ".join(["lists == lists_copy"] * 400) + "]"  # past the deadline on any machine

EXPRESSIONS: list[tuple[str, list[str]]] = [
    # Errors weigh what they hold
    ("[exc_big] * 1000000", ["exc_big"]),
    ("[exc_big for i in range(100000)]", ["exc_big"]),
    ("{i: exc_big for i in range(50000)}", ["exc_big"]),
    ("[exc_big, exc_big, exc_big] * 2000", ["exc_big"]),
    ("repr(exc_huge)", ["exc_huge"]),
    ("str([exc_huge])", ["exc_huge"]),
    ("f'{exc_huge!a}'", ["exc_huge"]),
    # Numbers made by range, enumerate and zip, weighed before they exist
    ("range(10**1000, 10**1000 + 1000000)", []),
    ("range(-2**4000, -2**4000 + 1900000)", []),
    ("range(0, 2**4095, 2**4070)", []),
    ("enumerate(range(1000000), 2**4000)", []),
    ("enumerate(emoji)", ["emoji"]),
    ("zip(emoji, emoji)", ["emoji"]),
    ("zip(range(1300000), emoji)", ["emoji"]),
    ("list(emoji)", ["emoji"]),
    ("sorted(emoji)", ["emoji"]),
    ("reversed(emoji)", ["emoji"]),
    ("tuple(emoji)", ["emoji"]),
    ("int_dict.items()", ["int_dict"]),
    # Built-ins that run long in one C call
    ("pow(big, big, mod)", ["big", "mod"]),
    (REPEATED_POW, ["big", "mod"]),
    ("[pow(big, big - i, mod) for i in range(1000)]", ["big", "mod"]),
    ("pow(big, -big, mod + 2)", ["big", "mod"]),
    ("big ** big", ["big"]),
    ("pow(3, 2**4000)", []),
    ("1 << 2**4000", []),
    ("big * big * big", ["big"]),
    ("sorted(tuples)", ["tuples"]),
    ("sorted(tuples, reverse=True)", ["tuples"]),
    ("sorted(lists + lists)", ["lists"]),
    (REPEATED_COMPARE, ["lists", "lists_copy"]),
    ("[lists < lists_copy for i in range(1000)]", ["lists", "lists_copy"]),
    ("alike_a | alike_b", ["alike_a", "alike_b"]),
    ("{**alike_a, **alike_b}", ["alike_a", "alike_b"]),
    ("[alike_a | alike_b == alike_b | alike_a for i in range(100)]", ["alike_a", "alike_b"]),
    (f"{{(i * {P},): 0 for i in range(60000)}}", []),
    # Text
    ("'x' * 10**9", []),
    ("['x'] * 10**9", []),
    ("[[1] * 1000] * 100000", []),
    ("half + half + half", ["half"]),
    ("lists + lists", ["lists"]),
    ("[*half, *half]", ["half"]),
    ("'-'.join(words * 2)", ["words"]),
    ("f'{half}{half}{half}'", ["half"]),
    ("f'{big:>1000000}'", ["big"]),
    ("repr(nul)", ["nul"]),
    ("f'{nul!r}'", ["nul"]),
    ("str([big] * 30000)", ["big"]),
    ("str(tuples)", ["tuples"]),
    ("('\ufb03' * 1900000).upper()", []),
    ("(' a' * 1999999).split()", []),
    ("('\\n' * 3999999).splitlines()", []),
    ("(half + half).split('x')", ["half"]),
    ("half.replace('x', 'yyy')", ["half"]),
    ("'x'.center(10**9)", []),
    ("'x'.zfill(10**8)", []),
    ("int('9' * 5000)", []),
    ("int('1' * 3999999, 2)", []),
    ("int('0x' + 'f' * 100000, 0)", []),
    ("round(1.5, 10**7)", []),
    # Nesting
    ("[deep] * 100000", ["deep"]),
    ("[deep]", ["deep"]),
    ("[" * 150 + "]" * 150, []),
    ("-" * 5000 + "1", []),
    ("[x for x in range(10**9)]", []),
    ("[[x, y] for x in range(10**5) for y in range(10**5)]", []),
]


@pytest.fixture(scope="module")
def worker() -> Any:
    """The worker process (tests/support/sandbox_worker.py): one import of agl_notebook, a forked child per attempt."""
    import os
    import subprocess
    import sys

    from tests.support.paths import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sandbox_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    assert json.loads(process.stdout.readline()) == {"ready": True}

    def attempt(**given: Any) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(given) + "\n")
        process.stdin.flush()
        result: dict[str, Any] = json.loads(process.stdout.readline())
        return result

    yield attempt
    process.stdin.close()
    process.wait(timeout=30)


def _check(result: dict[str, Any], what: str, error: str | None = None, says: str = "") -> None:
    assert result["error"] not in (None, "killed", "died"), (what, result)
    assert result["agl_error"], (what, result)  # never a raw MemoryError, RecursionError or ValueError
    assert error is None or result["error"] == error, (what, result)
    assert says in result["message"], (what, result)
    assert result["cpu_seconds"] <= SECONDS, (what, result)
    assert result["growth_mb"] <= GROWTH_MB, (what, result)


def test_every_sandbox_attack_ends_fast_and_small_with_an_agl_notebook_error(
    worker: Any, reliability: ReliabilityNotes
) -> None:
    slowest = largest = 0.0
    for source, variables in EXPRESSIONS:
        result = worker(expression=source, variables=variables)
        _check(result, source, "ExpressionLimitError")  # refused by a bound, not failed some other way
        slowest, largest = max(slowest, result["cpu_seconds"]), max(largest, result["growth_mb"])
    reliability.note(
        "Fuzzing",
        f"{len(EXPRESSIONS)} hostile expressions (every costly built-in and operator: pow, **, *, <<, repetition, "
        "join, f-strings, repr/str of large values, sorted, deep comparisons, dict unions of keys that hash alike, "
        "int() of long text, range/enumerate/zip of wide numbers, errors copied a million times, deep nesting), each "
        "in a forked worker capped in address space",
        f"each ended within {SECONDS:g} s of CPU with an agl_notebook error and at most {GROWTH_MB:g} MB of memory "
        "growth",
        measured={
            "Slowest hostile expression (CPU)": f"{slowest:.2f} s",
            "Largest memory growth of a hostile expression": f"{largest:.0f} MB",
        },
        how="each attempt run by agl_notebook.functions.evaluate in a child forked from a worker that imported "
        "agl_notebook once; time.process_time around the evaluation; growth = VmHWM after less VmRSS before, the peak "
        "reset through /proc/self/clear_refs",
    )


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_an_agent_attack_ends_fast_and_small_with_an_agl_notebook_error(
    name: str, worker: Any, reliability: ReliabilityNotes
) -> None:
    result = worker(agent=name)
    _check(result, name, says=AGENTS[name][1])
    reliability.note(
        "Fuzzing",
        name,
        f"ended within {SECONDS:g} s of CPU with {result['error']} and at most {GROWTH_MB:g} MB of memory growth",
        measured={f"{name}: CPU time, memory growth": f"{result['cpu_seconds']:.2f} s, {result['growth_mb']:.0f} MB"},
        how="the agent called in a child forked from a worker process capped in address space, with a scripted "
        "model and httpx2.MockTransport; time.process_time around the call; growth = VmHWM after less VmRSS before",
    )


# ---------------------------------------------------------------------------------------------------------------
# A number too long to read, anywhere in a notebook


@pytest.mark.parametrize("command", [["list"], ["gc", "--dry-run"], ["consolidate"], ["clear", "--all"], ["explain"]])
def test_a_notebook_holding_a_number_of_5000_digits_is_refused_by_every_command(
    command: list[str], tmp_path: Any, capsys: Any, reliability: ReliabilityNotes
) -> None:
    from agl_notebook.cli import main

    notebook = tmp_path / "n.ipynb"
    cell: dict[str, Any] = {
        "cell_type": "code",
        "id": "a",
        "metadata": {},
        "source": "1",
        "outputs": [],
        "execution_count": None,
    }
    text = json.dumps({"cells": [cell], "metadata": {"n": 0}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    text = text.replace('"n": 0', '"n": ' + "8" * 5000)
    notebook.write_text(text, encoding="utf-8")
    argv = [command[0], str(notebook), *command[1:], *(["1"] if command == ["explain"] else [])]
    assert main(argv) == 2  # a ValueError traceback before
    error = capsys.readouterr().err
    at = text.index("8" * 5000)
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    assert f"{notebook}: not a notebook: invalid JSON at line {line}, column {column} (a number of 5,000" in error
    assert notebook.read_text(encoding="utf-8") == text
    reliability.note(
        "Untrusted notebooks",
        f"`agl-notebook {command[0]}` of a notebook whose metadata holds a 5,000-digit number",
        "exit 2 naming the file, line and column; the notebook left as it was",
        notebooks_corrupted=0,
    )
