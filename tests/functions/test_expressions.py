"""The expression sandbox (docs/functions.md): the language, its errors, an escape suite and property tests."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agl_notebook.functions import (
    ErrorInfo,
    ExpressionError,
    ExpressionLimitError,
    ExpressionRuntimeError,
    ExpressionSyntaxError,
    Limits,
    SandboxError,
    compile_expression,
    evaluate,
)
from agl_notebook.functions.expressions import BUILTINS, METHOD_NAMES, measure

ENV: dict[str, Any] = {
    "x": "abc",
    "s": "hello world",
    "n": 3,
    "xs": [1, 2, 3],
    "d": {"a": 1, "b": [1, 2]},
    "orderId": "ORD-1042",
    "result": {"status": "shipped", "total": 12.5},
    "exc": ErrorInfo("KeyError", "no key 'total'", status=None),
}


# ---------------------------------------------------------------------------------------------------------------
# The language


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("f'/orders/{orderId}'", "/orders/ORD-1042"),
        ("{'status': result['status'], 'total': result['total']}", {"status": "shipped", "total": 12.5}),
        ("[v * 2 for v in xs if v > 1]", [4, 6]),
        ("{k: v for k, v in d.items() if k == 'a'}", {"a": 1}),
        ("sum(v for v in xs)", 6),
        ("len(s.split())", 2),
        ("', '.join(str(v) for v in xs)", "1, 2, 3"),
        ("s.upper().replace('WORLD', 'there')", "HELLO there"),
        ("d.get('missing', 'none')", "none"),
        ("xs[-1] if xs else None", 3),
        ("xs[1:]", [2, 3]),
        ("(1, *xs)", (1, 1, 2, 3)),
        ("{**d, 'c': 3}", {"a": 1, "b": [1, 2], "c": 3}),
        ("1 < n <= 3 and not False", True),
        ("n ** 2 // 2 % 5", 4),
        ("round(2 / 3, 2)", 0.67),
        ("sorted(['b', 'a'], reverse=True)", ["b", "a"]),
        ("max(xs, default=0) + min([], default=0)", 3),
        ("f'{exc}'", "no key 'total'"),
        ("exc.type + ': ' + exc.message", "KeyError: no key 'total'"),
        ("f'{n:>4}|{2.5:.2f}|{x!r}'", "   3|2.50|'abc'"),
        ("list(zip(xs, 'ab'))", [(1, "a"), (2, "b")]),
        ("dict(enumerate(['a', 'b'], start=1))", {1: "a", 2: "b"}),
        ("range(3)", [0, 1, 2]),
        ("'a' in d and 'z' not in d", True),
        ("x is not None", True),
    ],
)
def test_expressions_evaluate_like_python(source: str, expected: Any) -> None:
    assert evaluate(source, ENV) == expected


def test_names_are_what_an_expression_reads_with_comprehension_scopes() -> None:
    e = compile_expression("[v + w for v in xs for w in range(n) if v > limit] + [u for u in other]")
    assert e.names == {"xs", "n", "limit", "other"}
    assert e.calls == {"range"}
    # The first iterable is read in the enclosing scope, so a name bound by the comprehension is still read there.
    assert compile_expression("[v for v in v]").names == {"v"}
    assert compile_expression("f'{a}{b!r:{c}}'").names == {"a", "b", "c"}


def test_a_runtime_error_names_the_python_error_and_points_at_the_expression() -> None:
    with pytest.raises(ExpressionRuntimeError) as e:
        evaluate("result['totl'] + 1", ENV)
    assert e.value.python_type == "KeyError"
    assert "no key 'totl' (the keys are 'status', 'total')" in str(e.value)
    assert str(e.value).endswith("result['totl'] + 1\n    ^")
    with pytest.raises(ExpressionRuntimeError) as e2:
        evaluate("n + (1 / 0)", ENV)
    assert e2.value.python_type == "ZeroDivisionError"
    assert e2.value.column == 5
    with pytest.raises(ExpressionRuntimeError, match="name 'nope' is not defined"):
        evaluate("nope", ENV)


def test_a_syntax_error_shows_the_expression_and_where() -> None:
    with pytest.raises(ExpressionSyntaxError) as e:
        compile_expression("f'/orders/{orderId'")
    text = str(e.value)
    assert text.startswith("syntax error: f-string: expecting '}'")
    assert "\n    f'/orders/{orderId'\n" in text
    assert text.splitlines()[-1].strip() == "^"


def test_a_variable_named_like_a_builtin_is_read_as_the_variable_and_the_builtin_still_called() -> None:
    # Values are data, never functions, so a call can only mean the built-in: natural argument names (max, len,
    # round, range) must not break the built-ins in the function that declares them.
    assert evaluate("max", {"max": 5}) == 5
    assert evaluate("max(1, max)", {"max": 5}) == 5
    assert evaluate("len(len)", {"len": "abc"}) == 3
    assert evaluate("[range(r) for r in range(3)]") == [[], [0], [0, 1]]
    with pytest.raises(SandboxError, match="round is a built-in function: it can only be called"):
        evaluate("round")


def test_values_stay_in_the_sandbox_universe() -> None:
    with pytest.raises(ExpressionRuntimeError, match="complex numbers are not supported"):
        evaluate("(-8) ** 0.5")
    with pytest.raises(SandboxError, match="set values are not supported"):
        measure({1, 2})
    with pytest.raises(SandboxError, match="set values are not supported"):
        evaluate("[x]", {"x": {1, 2}})
    assert measure([1, "ab", {"k": (1.5, None)}]) > 0


def test_compiled_expressions_are_cached_and_reusable() -> None:
    assert compile_expression("n + 1") is compile_expression("n + 1")
    e = compile_expression("n + 1")
    assert [e.evaluate({"n": i}) for i in range(3)] == [1, 2, 3]


def test_limits_are_configurable() -> None:
    tight = Limits(max_weight=1000, max_steps=50, max_depth=5)
    with pytest.raises(ExpressionLimitError, match="too large"):
        evaluate("'a' * 2000", limits=tight)
    with pytest.raises(ExpressionLimitError, match="steps"):
        evaluate("[i for i in range(60)]", limits=tight)
    with pytest.raises(ExpressionLimitError, match="nested more than 5"):
        evaluate("[[[[[[[1]]]]]]]", limits=Limits(max_depth=5))
    with pytest.raises(ExpressionLimitError, match="longer than"):
        evaluate("[i * j for i in range(2000) for j in range(2000)]", limits=Limits(timeout=0.05, max_steps=10**9))


# ---------------------------------------------------------------------------------------------------------------
# The escape suite: known Python sandbox escapes and resource exhaustion, every one refused quickly

ESCAPES = [
    # Reaching classes, frames and modules through dunder attributes
    "().__class__",
    "().__class__.__bases__[0].__subclasses__()",
    "''.__class__.__mro__[1].__subclasses__()",
    "[].__class__.__base__",
    "x.__dict__",
    "x.__init__.__globals__",
    "x.__getattribute__('__class__')",
    "x.upper.__self__",
    "exc.__traceback__",
    "exc.with_traceback",
    "d.__class__.fromkeys",
    "__class__",
    "__builtins__",
    "__builtins__['eval']",
    "[__builtins__ for _ in ()]",
    "__import__('os').system('true')",
    # Imports, code execution and reflection by name
    "import os",
    "from os import system",
    "eval('1')",
    "exec('1')",
    "compile('1', '', 'eval')",
    "open('/etc/passwd')",
    "getattr(x, '__class__')",
    "setattr(x, 'a', 1)",
    "vars()",
    "globals()",
    "locals()",
    "dir(x)",
    "type(x)",
    "breakpoint()",
    "dict.fromkeys(xs)",
    "sorted(xs, key=len)",
    "x.upper",
    # Format strings that read attributes
    "'{0.__class__}'.format(x)",
    "'{0.__class__.__mro__}'.format_map({})",
    "f'{x.__class__}'",
    "f'{x!r:{\"{0.__class__}\"}}'",
    "'%s' % (x,)",
    # Functions, scopes and assignment tricks
    "(lambda: 0).__code__",
    "(lambda: __import__('os'))()",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "[y for y in [x] if y.__class__]",
    "(y := x)",
    "await x",
    "(yield)",
    "b'bytes'",
    # Resource exhaustion: memory
    "'a' * 10**9",
    "[1] * 10**8",
    "[[1] * 1000] * 10**6",
    "'x' * 4_000_000 + 'y'",
    "('a' * 1000).replace('', 'x' * 10000)",
    "','.join(['a' * 100000] * 100)",
    "'a'.center(10**9)",
    "x.zfill(10**9)",
    "f'{x:>{10**9}}'",
    "f'{1.5:.{10**8}f}'",
    "'%999999999d' % 1",
    "range(10**12)",
    "list(range(10**9))",
    "sum([[1]] * 10**5, [])",
    # Resource exhaustion: time inside one C call
    "10**10**10",
    "2 ** 100000",
    "pow(10, 10**8)",
    "1 << 10**9",
    "round(5, -10**7)",
    "max(range(10**10))",
    # Resource exhaustion: loops through comprehensions
    "[i for i in range(10**6) for j in range(10**6)]",
    "[[j for j in range(10**5)] for i in range(10**5)]",
    "sum(1 for a in range(3000) for b in range(3000))",
    # Deep nesting and huge sources
    "(" * 300 + "1" + ")" * 300,
    "[" * 150 + "]" * 150,
    "-" * 9000 + "1",
    "not " * 2000 + "x",
    "+".join(["n"] * 3000),
    "'" + "x" * 20000 + "'",
]


@pytest.mark.parametrize("source", ESCAPES, ids=[f"{i:02d}" for i in range(len(ESCAPES))])
def test_escape_attempts_are_refused_quickly_with_a_sandbox_error(source: str) -> None:
    started = time.monotonic()
    with pytest.raises(SandboxError) as e:
        evaluate(source, ENV)
    assert time.monotonic() - started < 3.0, f"took {time.monotonic() - started:.1f} s"
    message = str(e.value)
    assert message and "Traceback" not in message
    # Refused ones say what was refused; limits say which bound.
    assert any(
        word in message for word in ("not", "refused", "too", "limit", "more than", "only", "longer", "cannot", "over")
    ), message


def test_the_escape_suite_is_large_enough() -> None:
    assert len(ESCAPES) >= 40


def test_most_refusals_happen_before_anything_runs() -> None:
    static = [s for s in ESCAPES if _refused_at_compile(s)]
    assert len(static) >= 40


def _refused_at_compile(source: str) -> bool:
    try:
        compile_expression(source)
    except SandboxError:
        return True
    return False


# ---------------------------------------------------------------------------------------------------------------
# Property tests: whatever the expression, only the sandbox's own errors

_ATOMS = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=8).map(repr),
    st.sampled_from(
        [
            "x",
            "s",
            "n",
            "xs",
            "d",
            "exc",
            "result",
            "None",
            "True",
            "False",
            "undefined",
            "len",
            "__class__",
            "10**10**10",
            "()",
            "[]",
            "{}",
            "''",
            "-1",
            "0",
            "0.0",
            "1e308",
        ]
    ),
)
_BINARY = [
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "@",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not in",
    "is",
    "is not",
    "and",
    "or",
]
_FUNCTIONS = [*sorted(BUILTINS), "getattr", "eval", "type", "map", "__import__"]
_METHODS = [*sorted(METHOD_NAMES), "format", "__class__", "mro", "append", "pop", "__getattribute__"]
_ATTRIBUTES = ["message", "type", "status", "body", "command", "__class__", "upper", "real", "_x"]
_SPECS = ["", "!r", "!s", "!a", ":>5", ":.2f", ":{n}", ":,", ":x", ":{xs}", ":<{n}.{n}"]


def _expressions() -> st.SearchStrategy[str]:
    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(children, st.sampled_from(_BINARY), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["-", "+", "~", "not "]), children).map(lambda t: f"({t[0]}{t[1]})"),
            st.tuples(st.sampled_from(_FUNCTIONS), st.lists(children, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
            st.tuples(children, st.sampled_from(_METHODS), st.lists(children, max_size=2)).map(
                lambda t: f"{t[0]}.{t[1]}({', '.join(t[2])})"
            ),
            st.tuples(children, st.sampled_from(_ATTRIBUTES)).map(lambda t: f"{t[0]}.{t[1]}"),
            st.tuples(children, children).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.tuples(children, children, children).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}]"),
            st.lists(children, max_size=4).map(lambda items: f"[{', '.join(items)}]"),
            st.lists(children, max_size=3).map(lambda items: f"({', '.join(items)},)"),
            st.lists(st.tuples(children, children), max_size=3).map(
                lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
            ),
            st.tuples(children, children).map(lambda t: f"[{t[0]} for v in {t[1]}]"),
            st.tuples(children, children, children).map(lambda t: f"{{{t[0]}: {t[1]} for v in {t[2]}}}"),
            st.tuples(children, children).map(lambda t: f"[v for v in {t[0]} if {t[1]}]"),
            st.tuples(children, st.sampled_from(_SPECS)).map(lambda t: f"f'{{{t[0]}{t[1]}}}'"),
            st.tuples(children, children, children).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(children, children).map(lambda t: f"[*{t[0]}, *{t[1]}]"),
            st.tuples(children, children).map(lambda t: f"{{**{t[0]}, **{t[1]}}}"),
        )

    return st.recursive(_ATOMS, extend, max_leaves=12)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=15,
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_expressions())
def test_random_expressions_raise_only_sandbox_errors(source: str) -> None:
    try:
        value = evaluate(source, ENV)
    except ExpressionError:
        return
    measure(value)  # whatever comes out is a value the sandbox can hold


@settings(max_examples=300, deadline=None)
@given(source=st.text(max_size=60))
def test_random_text_raises_only_sandbox_errors(source: str) -> None:
    with contextlib.suppress(ExpressionError):
        evaluate(source, ENV)


@settings(max_examples=200, deadline=None)
@given(source=_expressions(), variables=st.dictionaries(st.sampled_from(["x", "s", "n", "xs", "d"]), _JSON))
def test_random_expressions_on_random_json_raise_only_sandbox_errors(source: str, variables: dict[str, Any]) -> None:
    with contextlib.suppress(ExpressionError):
        evaluate(source, {**ENV, **variables})
