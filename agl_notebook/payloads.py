"""Payloads: frozen dataclasses that cross the boundary between an agent and Python.

A payload type is compiled once into a `PayloadSpec`: the JSON Schema the model reads (with each field's
`describe()` text) and a validator that turns the model's JSON into the dataclass, or into a list of problems that
name each field path (``issues[2]``, ``address.city``) in words a model can act on.

Supported field types (docs/roles-and-tools.md, "Payloads"): ``str``, ``bool``, ``int``, ``float``, another
dataclass, ``list[X]``, ``tuple[X, ...]`` or a fixed ``tuple[X, Y]`` of these, and ``X | None``; in a step's input,
an `Attachment` too (an image or a document, `agl_notebook.media`), which the model is sent beside the JSON.
Anything else is an `InputError` when the payload is compiled, which is when its tool is built.

Why a hand-written validator and schema rather than pydantic's ``TypeAdapter`` (measured, see the issue note):

- pydantic refuses a ``config`` for a stdlib dataclass, so rejecting unknown fields (a misspelled optional field
  silently dropped is the worst failure for an agent) would mean writing ``__pydantic_config__`` onto the user's
  classes;
- the schema is part of every step's fingerprint: a schema we generate cannot change under a pydantic upgrade and
  make every recording miss;
- ``from pydantic import TypeAdapter`` costs about 107 ms, most of the 150 ms import budget; the closed set of
  field types above makes a direct validator short and faster than a round trip through pydantic's JSON mode.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, Union, overload

from ._families import InputError
from ._fieldwise import Fieldwise

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"  # noqa: RUF036 (the seed's spelling)
"""Any value JSON can hold, at any depth."""

JsonObject: TypeAlias = "dict[str, JsonValue]"

T = TypeVar("T")

_DESCRIPTION_KEY = "agl_notebook.description"
_INVALID: Any = object()  # a validator's "this value has problems" marker; never escapes this module


@overload
def describe(text: str, *, default: T) -> T: ...
@overload
def describe(text: str) -> Any: ...
def describe(text: str, *, default: Any = dataclasses.MISSING) -> Any:
    """Describe a payload field to the agent.

    Args:
        text: The description of the field, shown to the agent beside its name.
        default: The field's default. If omitted, the field is required. A mutable default (a list, dict or
            set) becomes a default factory that copies it, so instances never share it.

    Returns:
        The `dataclasses.field` to assign to the annotated field.

    Raises:
        InputError: ``text`` is empty or only whitespace.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("describe() needs a description: the text the agent reads beside the field's name.")
    metadata = {_DESCRIPTION_KEY: text}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, list | dict | set):
        template = default
        return dataclasses.field(default_factory=lambda: copy.deepcopy(template), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def field_description(f: dataclasses.Field[Any]) -> str | None:
    """The `describe()` text of a dataclass field, if it has one."""
    text = f.metadata.get(_DESCRIPTION_KEY)
    return text if isinstance(text, str) else None


class Attachment:
    """A field value the model is sent as a content block beside the input's JSON (`agl_notebook.media`).

    Its JSON, in records and fingerprints, is its `reference`; the model cannot write one (a tool's or a report's
    field of this type never validates).
    """

    __slots__ = ()

    def reference(self) -> JsonObject:
        """What a record and the fingerprint keep of the value."""
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------------------
# Compiling a payload type


Validator = Callable[[Any, str, list[str]], Any]
"""Validates one JSON value found at a path; appends problems and returns `_INVALID`, or returns the built value."""


@dataclass(frozen=True, eq=False, repr=False)
class PayloadSpec(Fieldwise):
    """A compiled payload type: its JSON Schema and its validator."""

    type: type[Any]
    """The dataclass."""
    schema: JsonObject
    """The JSON Schema of the dataclass as the model reads it."""
    _validate: Validator = dataclasses.field(repr=False, compare=False)

    def validate(self, data: object) -> tuple[Any, tuple[str, ...]]:
        """Build the payload from the model's JSON: ``(payload, ())``, or ``(None, problems)``."""
        problems: list[str] = []
        value = self._validate(data, "", problems)
        if value is _INVALID or problems:
            return None, tuple(problems)
        return value, ()


_SPECS: dict[type[Any], PayloadSpec] = {}


def payload_spec(payload: object) -> PayloadSpec:
    """Compile (once, then from a cache) the payload dataclass ``payload``.

    Raises:
        InputError: ``payload`` is not a dataclass, or a field has a type that can't be saved as JSON.
    """
    if not (isinstance(payload, type) and dataclasses.is_dataclass(payload)):
        raise InputError(
            f"A payload must be a dataclass type, not {_name_of(payload)}: a payload that can't be saved as JSON."
        )
    spec = _SPECS.get(payload)
    if spec is None:
        schema, validate = _compile_dataclass(payload, where=payload.__qualname__, active=())
        spec = _SPECS[payload] = PayloadSpec(payload, schema, validate)
    return spec


def _compile_dataclass(cls: type[Any], *, where: str, active: tuple[type[Any], ...]) -> tuple[JsonObject, Validator]:
    if cls in active:
        chain = " -> ".join(c.__qualname__ for c in (*active, cls))
        raise InputError(f"{where}: recursive payload types can't be described to a model ({chain}).")
    try:
        hints = typing.get_type_hints(cls)
    except NameError as e:
        raise InputError(
            f"{where}: cannot resolve the field types of {cls.__qualname__} ({e}); define the types it refers to "
            "at module level."
        ) from e
    properties: JsonObject = {}
    required: list[JsonValue] = []
    fields: list[tuple[str, Validator, bool]] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        field_schema, validate = _compile_type(hints[f.name], where=f"{where}.{f.name}", active=(*active, cls))
        text = field_description(f)
        if text is not None:
            field_schema = {**field_schema, "description": text}
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if f.default is not dataclasses.MISSING and _is_json(f.default):
            field_schema = {**field_schema, "default": _dump(f.default)}
        if not has_default:
            required.append(f.name)
        properties[f.name] = field_schema
        fields.append((f.name, validate, has_default))
    schema: JsonObject = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, _object_validator(cls, fields)


def _compile_type(tp: Any, *, where: str, active: tuple[type[Any], ...]) -> tuple[JsonObject, Validator]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str:
        return {"type": "string"}, _validate_str
    if tp is bool:
        return {"type": "boolean"}, _validate_bool
    if tp is int:
        return {"type": "integer"}, _validate_int
    if tp is float:
        return {"type": "number"}, _validate_float
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _compile_dataclass(tp, where=where, active=active)
    if isinstance(tp, type) and issubclass(tp, Attachment):
        noun = ("an " if tp.__name__[0] in "AEIOU" else "a ") + tp.__name__.lower()
        return {"type": "object", "description": f"{noun.capitalize()} attached beside the JSON."}, (
            _attachment_validator(tp, noun)
        )
    if origin is list and len(args) == 1:
        item_schema, item = _compile_type(args[0], where=f"{where}[]", active=active)
        return {"type": "array", "items": item_schema}, _sequence_validator(item, list)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item_schema, item = _compile_type(args[0], where=f"{where}[]", active=active)
        return {"type": "array", "items": item_schema}, _sequence_validator(item, tuple)
    if origin is tuple and args and Ellipsis not in args:
        compiled = [_compile_type(a, where=f"{where}[{i}]", active=active) for i, a in enumerate(args)]
        schema: JsonObject = {
            "type": "array",
            "prefixItems": [s for s, _ in compiled],
            "minItems": len(args),
            "maxItems": len(args),
        }
        return schema, _fixed_tuple_validator([v for _, v in compiled])
    if origin in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner_schema, inner = _compile_type(rest[0], where=where, active=active)
            return {"anyOf": [inner_schema, {"type": "null"}]}, _optional_validator(inner)
    raise InputError(
        f"{where}: the type {_type_name(tp)} can't be saved as JSON. Payload fields may be str, bool, int, float, "
        "another dataclass, a list or tuple of these, or optional (X | None)."
    )


# --------------------------------------------------------------------------------------------------------------
# Validators. Each takes (value, path, problems). Messages name the path and say what was expected and what came.


def _problem(problems: list[str], path: str, message: str) -> Any:
    problems.append(f"{path or 'arguments'}: {message}")
    return _INVALID


def _describe_value(value: object) -> str:
    kind = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} ({text})" if value is not None else "null"


def _validate_str(value: Any, path: str, problems: list[str]) -> Any:
    if isinstance(value, str):
        return value
    return _problem(problems, path, f"expected a string, got {_describe_value(value)}.")


def _validate_bool(value: Any, path: str, problems: list[str]) -> Any:
    if isinstance(value, bool):
        return value
    return _problem(problems, path, f"expected true or false, got {_describe_value(value)}.")


def _validate_int(value: Any, path: str, problems: list[str]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():  # JSON does not tell 3 from 3.0
        return int(value)
    return _problem(problems, path, f"expected a whole number, got {_describe_value(value)}.")


def _validate_float(value: Any, path: str, problems: list[str]) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # JSON allows integers of any size; a float does not
            return _problem(problems, path, f"expected a number a float can hold, got {_describe_value(value)}.")
    return _problem(problems, path, f"expected a number, got {_describe_value(value)}.")


def _attachment_validator(kind: type[Any], noun: str) -> Validator:
    def validate(value: Any, path: str, problems: list[str]) -> Any:
        if isinstance(value, kind):  # built in Python (a DataFrame's cell); a model's JSON never holds one
            return value
        return _problem(problems, path, f"{noun} can't be written as arguments; leave this field out.")

    return validate


def _sequence_validator(item: Validator, build: type[list[Any]] | type[tuple[Any, ...]]) -> Validator:
    def validate(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, list | tuple):
            return _problem(problems, path, f"expected an array, got {_describe_value(value)}.")
        before = len(problems)
        built = [item(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return _INVALID if len(problems) > before else build(built)

    return validate


def _fixed_tuple_validator(items: list[Validator]) -> Validator:
    def validate(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, list | tuple):
            return _problem(problems, path, f"expected an array, got {_describe_value(value)}.")
        if len(value) != len(items):
            return _problem(problems, path, f"expected an array of exactly {len(items)} items, got {len(value)}.")
        before = len(problems)
        built = tuple(v(x, f"{path}[{i}]", problems) for i, (v, x) in enumerate(zip(items, value, strict=True)))
        return _INVALID if len(problems) > before else built

    return validate


def _optional_validator(inner: Validator) -> Validator:
    def validate(value: Any, path: str, problems: list[str]) -> Any:
        return None if value is None else inner(value, path, problems)

    return validate


def _object_validator(cls: type[Any], fields: list[tuple[str, Validator, bool]]) -> Validator:
    names = {name for name, _, _ in fields}
    listed = ", ".join(name for name, _, _ in fields)

    def validate(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, dict):
            return _problem(
                problems, path, f"expected an object with the fields {listed}, got {_describe_value(value)}."
            )
        before = len(problems)
        kwargs: dict[str, Any] = {}
        for name, validate_field, has_default in fields:
            child = f"{path}.{name}" if path else name
            if name in value:
                kwargs[name] = validate_field(value[name], child, problems)
            elif not has_default:
                _problem(problems, child, "this required field is missing.")
        for name in value:
            if name not in names:
                child = f"{path}.{name}" if path else str(name)
                _problem(problems, child, f"unknown field; the fields are: {listed}.")
        if len(problems) > before:
            return _INVALID
        try:
            return cls(**kwargs)
        except (ValueError, TypeError) as e:  # the dataclass's own __post_init__ checks speak to the model too
            return _problem(problems, path, str(e) or type(e).__name__)

    return validate


# --------------------------------------------------------------------------------------------------------------
# Payload -> JSON


def dump(value: object) -> JsonValue:
    """The JSON form of a payload, or of any value made of payload field types.

    Dataclasses become objects and tuples become arrays.
    """
    return _dump(value)


def _dump(value: Any) -> JsonValue:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Attachment):
        return value.reference()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _dump(v) for k, v in value.items()}
    raise InputError(f"{type(value).__name__} value {value!r} can't be saved as JSON.")


def _is_json(value: object) -> bool:
    try:
        _dump(value)
    except InputError:
        return False
    return True


def _name_of(obj: object) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    return f"{type(obj).__name__} {obj!r}"


def _type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)
