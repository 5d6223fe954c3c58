"""`Fieldwise` gives a dataclass the equality, hash and repr `dataclasses.dataclass` would generate for it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from agl_notebook._fieldwise import Fieldwise


@dataclass(frozen=True)
class Generated:
    name: str
    size: int = 0
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    only_hashed: int = field(default=0, compare=False, hash=True)
    kind: str = field(default="generated", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class Shared(Fieldwise):
    name: str
    size: int = 0
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    only_hashed: int = field(default=0, compare=False, hash=True)
    kind: str = field(default="generated", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class OneField(Fieldwise):
    text: str


@dataclass(frozen=True, eq=False, repr=False)
class NoFields(Fieldwise):
    pass


CASES: list[dict[str, Any]] = [
    {"name": "a"},
    {"name": "a", "size": 2},
    {"name": "a", "note": "differs but is not compared"},
    {"name": "a", "secret": "s"},
    {"name": "a", "only_hashed": 7},
    {"name": "b", "size": 2, "note": "n", "secret": "t", "only_hashed": 1},
]


@pytest.mark.parametrize("left", CASES)
@pytest.mark.parametrize("right", CASES)
def test_equality_and_hash_agree_with_the_generated_methods(left: dict[str, Any], right: dict[str, Any]) -> None:
    generated = Generated(**left) == Generated(**right)
    assert (Shared(**left) == Shared(**right)) is generated
    assert (Shared(**left) != Shared(**right)) is not generated
    same_hash = hash(Generated(**left)) == hash(Generated(**right))
    assert (hash(Shared(**left)) == hash(Shared(**right))) is same_hash


@pytest.mark.parametrize("values", CASES)
def test_repr_is_the_generated_one_with_the_class_name(values: dict[str, Any]) -> None:
    assert repr(Shared(**values)) == repr(Generated(**values)).replace("Generated(", "Shared(", 1)


def test_other_classes_are_never_equal_and_frozen_stays_frozen() -> None:
    assert Shared("a") != Generated("a")
    assert Shared("a").__eq__(Generated("a")) is NotImplemented
    assert OneField("x") == OneField("x") and OneField("x") != OneField("y")
    assert hash(OneField("x")) == hash(OneField("x"))
    assert repr(OneField("x")) == "OneField(text='x')"
    assert NoFields() == NoFields() and hash(NoFields()) == hash(NoFields()) and repr(NoFields()) == "NoFields()"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Shared("a").name = "b"  # type: ignore[misc]


def test_every_event_compares_and_shows_as_a_frozen_dataclass() -> None:
    from agl_notebook.events import EVENT_TYPES, StepStarted

    for event_type in EVENT_TYPES:
        assert issubclass(event_type, Fieldwise) and dataclasses.is_dataclass(event_type)
        assert event_type.__dataclass_params__.frozen  # type: ignore[union-attr]
    started = StepStarted(role="r", input={"a": 1}, model="m")
    assert repr(started) == "StepStarted(role='r', input={'a': 1}, model='m', label='', type='step.started')"
    assert started == StepStarted(role="r", input={"a": 1}, model="m") != StepStarted(role="r", input=1, model="m")
