"""Payloads (docs/roles-and-tools.md, "Payloads"): `describe`, supported types, validation, `JsonValue`."""

from __future__ import annotations

import dataclasses
import datetime
import typing
from dataclasses import dataclass
from typing import Any

import pytest

import agl_notebook
from agl_notebook import InputError, JsonValue, ToolResult, describe, reporting_tool, tool
from agl_notebook import payloads as payloads_module
from agl_notebook.payloads import dump, payload_spec
from tests.support.steps import Review

# ---------------------------------------------------------------------------------------------------------------
# Payload types (module level, so their annotations resolve)


@dataclass(frozen=True)
class Address:
    city: str = describe("The city.")
    zip: str | None = describe("Postal code.", default=None)


@dataclass(frozen=True)
class Person:
    name: str = describe("Full name.")
    age: int = describe("Age in years.")
    height: float = describe("Height in metres.")
    active: bool = describe("Whether the person is active.")
    address: Address = describe("Where they live.")
    tags: list[str] = describe("Tags.", default=[])
    point: tuple[int, int] = describe("A point.", default=(0, 0))
    scores: tuple[float, ...] = describe("Scores.", default=())
    nickname: str | None = describe("Nickname.", default=None)


@dataclass(frozen=True)
class Defaults:
    items: list[str] = describe("Items.", default=[])
    table: list[Address] = describe("Addresses.", default=[])


@dataclass(frozen=True)
class MaybeNumber:
    value: int | None = describe("A number or null.")


@dataclass(frozen=True)
class Crowd:
    people: list[Address] = describe("Addresses.")


@dataclass(frozen=True)
class WithDict:
    extra: dict[str, int]


@dataclass(frozen=True)
class WithSet:
    extra: set[int]


@dataclass(frozen=True)
class WithAny:
    extra: Any


@dataclass(frozen=True)
class WithDatetime:
    when: datetime.datetime


@dataclass(frozen=True)
class Nested:
    inner: WithDict


class NotADataclass:
    text: str = "x"


async def _ok(payload: object) -> ToolResult:
    return ToolResult("ok")


# ---------------------------------------------------------------------------------------------------------------
# describe()


def test_describe_returns_a_dataclass_field_whose_text_the_agent_reads() -> None:
    f = describe("The city.")
    assert isinstance(f, dataclasses.Field)
    assert f.default is dataclasses.MISSING
    assert f.default_factory is dataclasses.MISSING
    schema = payload_spec(Address).schema
    assert schema["properties"] == {
        "city": {"type": "string", "description": "The city."},
        "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Postal code.", "default": None},
    }
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("text", ["", " ", "\t\n  "])
def test_describe_refuses_empty_or_whitespace_text(text: str) -> None:
    with pytest.raises(InputError) as e:
        describe(text)
    assert str(e.value) == "describe() needs a description: the text the agent reads beside the field's name."


def test_describe_default_list_becomes_a_default_factory_not_shared() -> None:
    template: list[str] = ["seed"]
    f: Any = describe("Items.", default=template)
    assert f.default is dataclasses.MISSING
    assert callable(f.default_factory)
    first, second = Defaults(), Defaults()
    assert first.items == []
    assert second.items == []
    assert first.items is not second.items
    first.items.append("x")
    assert second.items == []
    assert Defaults().items == []
    made = f.default_factory()
    made.append("y")
    assert template == ["seed"]
    assert f.default_factory() == ["seed"]


def test_a_field_with_a_default_may_be_left_out_by_the_agent() -> None:
    value, problems = payload_spec(Defaults).validate({})
    assert problems == ()
    assert value == Defaults([], [])
    value, problems = payload_spec(Address).validate({"city": "Oslo"})
    assert problems == ()
    assert value == Address("Oslo", None)


def test_required_fields_cannot_be_left_out() -> None:
    value, problems = payload_spec(Review).validate({})
    assert value is None
    assert problems == ("issues: this required field is missing.",)


# ---------------------------------------------------------------------------------------------------------------
# Supported types, validation messages naming field paths


FULL_PERSON: dict[str, JsonValue] = {
    "name": "Ada",
    "age": 36.0,  # JSON does not tell 36 from 36.0
    "height": 2,  # an int is a fine float
    "active": True,
    "address": {"city": "London"},
    "tags": ["a", "b"],
    "point": [1, 2],
    "scores": [1.5, 2],
    "nickname": None,
}


def test_a_payload_of_every_supported_type_is_built() -> None:
    value, problems = payload_spec(Person).validate(FULL_PERSON)
    assert problems == ()
    assert value == Person("Ada", 36, 2.0, True, Address("London", None), ["a", "b"], (1, 2), (1.5, 2.0), None)
    assert type(value.age) is int
    assert type(value.height) is float
    assert isinstance(value.point, tuple)
    assert isinstance(value.scores, tuple)
    assert isinstance(value.address, Address)
    assert dump(value) == {
        "name": "Ada",
        "age": 36,
        "height": 2.0,
        "active": True,
        "address": {"city": "London", "zip": None},
        "tags": ["a", "b"],
        "point": [1, 2],
        "scores": [1.5, 2.0],
        "nickname": None,
    }


def test_problems_name_list_indexes() -> None:
    value, problems = payload_spec(Review).validate({"issues": ["a", "b", 3]})
    assert value is None
    assert problems == ("issues[2]: expected a string, got a number (3).",)


def test_problems_name_nested_fields() -> None:
    args: dict[str, JsonValue] = {**FULL_PERSON, "address": {"city": 7}}
    assert payload_spec(Person).validate(args) == (None, ("address.city: expected a string, got a number (7).",))
    args = {**FULL_PERSON, "address": {"zip": "N1"}}
    assert payload_spec(Person).validate(args) == (None, ("address.city: this required field is missing.",))


def test_problems_name_fields_of_dataclasses_inside_lists() -> None:
    value, problems = payload_spec(Crowd).validate({"people": [{"city": "A"}, {"town": "B"}]})
    assert value is None
    assert problems == (
        "people[1].city: this required field is missing.",
        "people[1].town: unknown field; the fields are: city, zip.",
    )


def test_unknown_fields_are_refused() -> None:
    value, problems = payload_spec(Address).validate({"city": "Oslo", "colour": "red"})
    assert value is None
    assert problems == ("colour: unknown field; the fields are: city, zip.",)


def test_every_problem_is_reported_at_once() -> None:
    value, problems = payload_spec(Person).validate(
        {
            "name": 1,
            "age": True,
            "height": "tall",
            "active": 1,
            "address": {"zip": 3},
            "tags": ["a", "b", 3],
            "point": [1, 2, 3],
            "x": 1,
        }
    )
    assert value is None
    assert problems == (
        "name: expected a string, got a number (1).",
        "age: expected a whole number, got a boolean (True).",
        "height: expected a number, got a string ('tall').",
        "active: expected true or false, got a number (1).",
        "address.city: this required field is missing.",
        "address.zip: expected a string, got a number (3).",
        "tags[2]: expected a string, got a number (3).",
        "point: expected an array of exactly 2 items, got 3.",
        "x: unknown field; the fields are: name, age, height, active, address, tags, point, scores, nickname.",
    )


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("age", True, "age: expected a whole number, got a boolean (True)."),
        ("age", False, "age: expected a whole number, got a boolean (False)."),
        ("age", 3.5, "age: expected a whole number, got a number (3.5)."),
        ("age", "3", "age: expected a whole number, got a string ('3')."),
        ("height", True, "height: expected a number, got a boolean (True)."),
        ("height", None, "height: expected a number, got null."),
        ("active", "true", "active: expected true or false, got a string ('true')."),
        ("name", None, "name: expected a string, got null."),
        ("tags", "a", "tags: expected an array, got a string ('a')."),
        ("point", [1, "2"], "point[1]: expected a whole number, got a string ('2')."),
        ("scores", [1, False], "scores[1]: expected a number, got a boolean (False)."),
        ("address", "London", "address: expected an object with the fields city, zip, got a string ('London')."),
    ],
)
def test_wrong_types_are_named(field: str, value: JsonValue, problem: str) -> None:
    assert payload_spec(Person).validate({**FULL_PERSON, field: value}) == (None, (problem,))


def test_an_integer_too_large_for_a_float_is_a_problem_not_a_crash() -> None:
    huge = 10**400
    value, problems = payload_spec(Person).validate({**FULL_PERSON, "height": huge})
    assert value is None
    assert problems == (f"height: expected a number a float can hold, got a number ({repr(huge)[:37]}...).",)


def test_optional_fields_take_null_or_the_type() -> None:
    spec = payload_spec(MaybeNumber)
    assert spec.validate({"value": None}) == (MaybeNumber(None), ())
    assert spec.validate({"value": 4}) == (MaybeNumber(4), ())
    assert spec.validate({}) == (None, ("value: this required field is missing.",))
    assert spec.validate({"value": "4"}) == (None, ("value: expected a whole number, got a string ('4').",))
    assert spec.schema["properties"] == {
        "value": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "A number or null."}
    }


def test_arguments_that_are_not_an_object() -> None:
    assert payload_spec(Address).validate([1]) == (
        None,
        ("arguments: expected an object with the fields city, zip, got an array ([1]).",),
    )


# ---------------------------------------------------------------------------------------------------------------
# Payloads that can't be saved as JSON are refused when the tool is built


@pytest.mark.parametrize(
    ("payload", "where", "type_name"),
    [
        (WithDict, "WithDict.extra", "dict[str, int]"),
        (WithSet, "WithSet.extra", "set[int]"),
        (WithAny, "WithAny.extra", "Any"),
        (WithDatetime, "WithDatetime.when", "datetime"),
        (Nested, "Nested.inner.extra", "dict[str, int]"),
    ],
)
def test_unsupported_field_types_are_an_input_error_when_the_tool_is_built(
    payload: type[Any], where: str, type_name: str
) -> None:
    suffix = (
        f"{where}: the type {type_name} can't be saved as JSON. Payload fields may be str, bool, int, float, "
        "another dataclass, a list or tuple of these, or optional (X | None)."
    )
    with pytest.raises(InputError) as e:
        tool("look_up", "Search.", payload, _ok)
    assert str(e.value) == f"tool 'look_up': {suffix}"
    with pytest.raises(InputError) as e:
        reporting_tool("report", "Report.", payload)
    assert str(e.value) == f"reporting_tool 'report': {suffix}"


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        (NotADataclass, "the class NotADataclass"),
        (Address("x"), "Address Address(city='x', zip=None)"),
        (str, "the class str"),
    ],
)
def test_a_payload_that_is_not_a_dataclass_type_is_refused(payload: Any, shown: str) -> None:
    with pytest.raises(InputError) as e:
        reporting_tool("report", "Report.", payload)
    assert str(e.value) == (
        f"reporting_tool 'report': A payload must be a dataclass type, not {shown}: a payload "
        "that can't be saved as JSON."
    )


# ---------------------------------------------------------------------------------------------------------------
# JsonValue


def test_json_value_is_exported_with_the_seed_spelling() -> None:
    assert agl_notebook.JsonValue is payloads_module.JsonValue
    assert "JsonValue" in agl_notebook.__all__
    assert payloads_module.JsonValue == "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
    resolved = typing.get_type_hints(_uses_json_value, globalns=vars(payloads_module))["value"]
    assert set(typing.get_args(resolved)) >= {type(None), bool, int, float, str}


def _uses_json_value(value: JsonValue) -> None:
    return None
