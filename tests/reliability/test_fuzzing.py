"""Reliability, fuzzing: property tests of payload validation over random dataclass shapes and random JSON.

A *shape* is a small tree describing a field type: ``("str",)``, ``("bool",)``, ``("int",)``, ``("float",)``,
``("list", t)``, ``("tuple", t)`` (``tuple[t, ...]``), ``("fixed", (t, ...))`` (``tuple[t1, t2]``), ``("opt", t)``
(``t | None``) and ``("dc", ((has_default, t), ...))`` (a frozen dataclass made with `dataclasses.make_dataclass`
and `describe()`, field ``i`` named ``f{i}``). From a shape come the Python type, valid JSON with its expected
`dump`, and invalid JSON with the path a problem must name.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agl_notebook import describe
from agl_notebook.payloads import dump, payload_spec
from tests.support.reliability_report import ReliabilityNotes

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

Shape = tuple[Any, ...]
# The `reliability` fixture is function-scoped on purpose: it gathers every example's note into one.
SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
UNKNOWN = "not_a_field"

# ---------------------------------------------------------------------------------------------------------------
# Shapes and the types built from them

LEAVES = st.sampled_from([("str",), ("bool",), ("int",), ("float",)])


def _extend(child: st.SearchStrategy[Shape]) -> st.SearchStrategy[Shape]:
    return st.one_of(
        st.tuples(st.just("list"), child),
        st.tuples(st.just("tuple"), child),
        st.tuples(st.just("fixed"), st.lists(child, min_size=1, max_size=3).map(tuple)),
        st.tuples(st.just("opt"), child),
        st.tuples(st.just("dc"), st.lists(st.tuples(st.booleans(), child), max_size=4).map(tuple)),
    )


FIELD_TYPES = st.recursive(LEAVES, _extend, max_leaves=8)
ROOTS: st.SearchStrategy[Shape] = st.tuples(
    st.just("dc"), st.lists(st.tuples(st.booleans(), FIELD_TYPES), min_size=1, max_size=5).map(tuple)
)

_names = itertools.count()
_built: dict[Shape, Any] = {}


def default_of(shape: Shape) -> tuple[bool, Any, Any]:
    """``(possible, python default, its JSON)`` for a field of this shape."""
    kind = shape[0]
    simple = {"str": ("d", "d"), "bool": (True, True), "int": (7, 7), "float": (2.5, 2.5)}
    if kind in simple:
        return (True, *simple[kind])
    if kind == "list":
        return True, [], []
    if kind == "tuple":
        return True, (), []
    if kind == "opt":
        return True, None, None
    if kind == "fixed":
        parts = [default_of(s) for s in shape[1]]
        if all(p[0] for p in parts):
            return True, tuple(p[1] for p in parts), [p[2] for p in parts]
    return False, None, None


def has_default(field: tuple[bool, Shape]) -> bool:
    wanted, shape = field
    return wanted and default_of(shape)[0]


def python_type(shape: Shape) -> Any:
    kind = shape[0]
    if kind in ("str", "bool", "int", "float"):
        return {"str": str, "bool": bool, "int": int, "float": float}[kind]
    if kind == "list":
        return list[python_type(shape[1])]  # type: ignore[misc]
    if kind == "tuple":
        return tuple[python_type(shape[1]), ...]  # type: ignore[misc]
    if kind == "fixed":
        return tuple[tuple(python_type(s) for s in shape[1])]  # type: ignore[misc]
    if kind == "opt":
        return python_type(shape[1]) | None
    if shape not in _built:
        fields = []
        for i, (wanted, sub) in enumerate(shape[1]):
            if has_default((wanted, sub)):
                spec = describe(f"Field {i}.", default=default_of(sub)[1])
            else:
                spec = describe(f"Field {i}.")
            fields.append((f"f{i}", python_type(sub), spec))
        _built[shape] = dataclasses.make_dataclass(f"Shape{next(_names)}", fields, frozen=True, kw_only=True)
    return _built[shape]


# ---------------------------------------------------------------------------------------------------------------
# Valid JSON for a shape, with the JSON `dump` gives back for it


def valid(shape: Shape) -> st.SearchStrategy[tuple[Any, Any]]:
    kind = shape[0]
    if kind == "str":
        return st.text(max_size=8).map(lambda s: (s, s))
    if kind == "bool":
        return st.booleans().map(lambda b: (b, b))
    if kind == "int":
        return st.one_of(
            st.integers().map(lambda n: (n, n)), st.integers(-(2**50), 2**50).map(lambda n: (float(n), n))
        )  # JSON's 3.0 is an int
    if kind == "float":
        return st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).map(lambda x: (x, x)),
            st.integers(-(2**60), 2**60).map(lambda n: (n, float(n))),
        )
    if kind in ("list", "tuple"):
        return st.lists(valid(shape[1]), max_size=3).map(lambda xs: ([x for x, _ in xs], [e for _, e in xs]))
    if kind == "fixed":
        return st.tuples(*(valid(s) for s in shape[1])).map(lambda xs: ([x for x, _ in xs], [e for _, e in xs]))
    if kind == "opt":
        return st.one_of(st.just((None, None)), valid(shape[1]))
    fields = shape[1]

    def build(parts: tuple[tuple[bool, tuple[Any, Any]], ...]) -> tuple[Any, Any]:
        given_json: dict[str, Any] = {}
        expected: dict[str, Any] = {}
        for i, ((present, (value, value_expected)), field) in enumerate(zip(parts, fields, strict=True)):
            name = f"f{i}"
            if present or not has_default(field):
                given_json[name], expected[name] = value, value_expected
            else:
                expected[name] = default_of(field[1])[2]
        return given_json, expected

    return st.tuples(*(st.tuples(st.booleans(), valid(sub)) for _, sub in fields)).map(build)


def same(a: Any, b: Any) -> bool:
    """Equal JSON with equal types (a float stays a float, a bool is not an int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@SETTINGS
@given(data=st.data())
def test_valid_json_for_any_shape_builds_the_class_and_dumps_back(
    data: st.DataObject, reliability: ReliabilityNotes
) -> None:
    shape = data.draw(ROOTS, label="shape")
    cls = python_type(shape)
    value, expected = data.draw(valid(shape), label="json")
    payload, problems = payload_spec(cls).validate(value)
    assert problems == ()
    assert type(payload) is cls
    assert same(dump(payload), expected), (dump(payload), expected)
    reliability.example(
        "Fuzzing",
        "valid JSON for random dataclass shapes (nested dataclasses, lists, tuples, optionals, defaults)",
        "always builds the class, no problems, and dumps back equal",
    )


# ---------------------------------------------------------------------------------------------------------------
# Invalid JSON: one mutation at a known path


WRONG: dict[str, list[Any]] = {
    "str": [1, 2.5, True, [], {}, None],
    "bool": ["true", 1, 0.0, [], {}, None],
    "int": ["3", 1.5, True, [], {}, None],
    "float": ["1.5", True, [], {}, None],
    "list": ["x", 1, {}, True, None],
    "tuple": ["x", 1, {}, True, None],
    "fixed": ["x", 1, {}, True, None],
    "dc": ["x", 1, [], True, None],
}


def wrong_values(shape: Shape) -> list[Any]:
    """Values of the wrong type for a field of this shape."""
    if shape[0] == "opt":
        return [w for w in wrong_values(shape[1]) if w is not None]
    out = list(WRONG[shape[0]])
    if shape[0] == "fixed":
        out.append([None] * (len(shape[1]) + 1))  # the wrong length
    return out


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def sites(shape: Shape, value: Any, path: str) -> list[tuple[str, str, Any]]:
    """Every place a mutation can go: ``(kind, path, detail)``; the mutated JSON is made by `mutate`."""
    kind = shape[0]
    out: list[tuple[str, str, Any]] = [("wrong", path, shape)]
    if value is None:
        return out
    if kind == "opt":
        return [("wrong", path, shape)] + [s for s in sites(shape[1], value, path) if s[0] != "wrong" or s[1] != path]
    if kind in ("list", "tuple"):
        for i, item in enumerate(value):
            out += sites(shape[1], item, f"{path}[{i}]")
    elif kind == "fixed":
        for i, (sub, item) in enumerate(zip(shape[1], value, strict=True)):
            out += sites(sub, item, f"{path}[{i}]")
    elif kind == "dc":
        out.append(("unknown", join(path, UNKNOWN), None))
        for i, field in enumerate(shape[1]):
            name = f"f{i}"
            if name in value:
                out += sites(field[1], value[name], join(path, name))
                if not has_default(field):
                    out.append(("missing", join(path, name), None))
    return out


def mutate(shape: Shape, value: Any, path: str, target: tuple[str, str, Any], wrong: Any) -> Any:
    """``value`` with the mutation ``target`` applied (``wrong`` is the replacement of a "wrong" mutation)."""
    kind, where, _ = target
    if kind == "wrong" and where == path:
        return wrong
    if value is None:
        return value
    if shape[0] == "opt":
        return mutate(shape[1], value, path, target, wrong)
    if shape[0] in ("list", "tuple"):
        return [mutate(shape[1], v, f"{path}[{i}]", target, wrong) for i, v in enumerate(value)]
    if shape[0] == "fixed":
        return [
            mutate(s, v, f"{path}[{i}]", target, wrong) for i, (s, v) in enumerate(zip(shape[1], value, strict=True))
        ]
    if shape[0] == "dc":
        out = dict(value)
        if kind == "unknown" and where == join(path, UNKNOWN):
            out[UNKNOWN] = 1
        for i, field in enumerate(shape[1]):
            name = f"f{i}"
            if name not in out:
                continue
            if kind == "missing" and where == join(path, name):
                del out[name]
            else:
                out[name] = mutate(field[1], out[name], join(path, name), target, wrong)
        return out
    return value


@SETTINGS
@given(data=st.data())
def test_invalid_json_names_the_path_of_the_problem_and_never_raises(
    data: st.DataObject, reliability: ReliabilityNotes
) -> None:
    shape = data.draw(ROOTS, label="shape")
    cls = python_type(shape)
    value, _ = data.draw(valid(shape), label="valid json")
    target = data.draw(st.sampled_from(sites(shape, value, "")), label="mutation")
    wrong = data.draw(st.sampled_from(wrong_values(target[2])), label="wrong value") if target[0] == "wrong" else None
    bad = mutate(shape, value, "", target, wrong)
    payload, problems = payload_spec(cls).validate(bad)
    assert payload is None
    named = target[1] or "arguments"
    assert any(p.startswith(f"{named}: ") for p in problems), (named, problems)
    reliability.example(
        "Fuzzing",
        "valid JSON with one mutation (a wrong type, a missing or an unknown field) at a random path",
        "never builds, never raises; a problem names the mutated path",
    )


# ---------------------------------------------------------------------------------------------------------------
# Arbitrary JSON


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.one_of(st.sampled_from(["f0", "f1", "f2", "f3", UNKNOWN]), st.text(max_size=4)), children, max_size=5
        )
    ),
    max_leaves=20,
)


def check_outcome(cls: Any, value: Any) -> None:
    payload, problems = payload_spec(cls).validate(value)  # nothing may be raised
    assert isinstance(problems, tuple)
    assert all(isinstance(p, str) and p for p in problems)
    if problems:
        assert payload is None
    else:
        assert type(payload) is cls
        assert isinstance(dump(payload), dict)


@SETTINGS
@given(shape=ROOTS, value=JSON)
def test_arbitrary_json_against_any_shape_only_returns_a_payload_or_problems(
    shape: Shape, value: Any, reliability: ReliabilityNotes
) -> None:
    check_outcome(python_type(shape), value)
    reliability.example(
        "Fuzzing",
        "arbitrary JSON against a random shape",
        "only ever a payload of the class or a list of problems, nothing raised",
    )


@SETTINGS
@given(data=st.data())
def test_arbitrary_json_inside_a_valid_object_only_returns_a_payload_or_problems(
    data: st.DataObject, reliability: ReliabilityNotes
) -> None:
    shape = data.draw(ROOTS, label="shape")
    value, _ = data.draw(valid(shape), label="valid json")
    field = data.draw(st.sampled_from([f"f{i}" for i in range(len(shape[1]))] + [UNKNOWN]), label="field")
    value[field] = data.draw(JSON, label="replacement")
    check_outcome(python_type(shape), value)
    reliability.example(
        "Fuzzing",
        "arbitrary JSON in one field of a valid object",
        "only ever a payload of the class or a list of problems, nothing raised",
    )
