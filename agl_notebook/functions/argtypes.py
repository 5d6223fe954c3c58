"""The argument type vocabulary of agent files.

The types: ``str``, ``int``, ``float``, ``bool``, ``any``, ``None``, ``list``/``list[T]``, ``dict``/``dict[str, T]``,
and unions ``T | U`` (``str | None`` for an optional value).

A type is written as text in an agent file (``"type": "list[str]"``), parsed here into a `TypeSpec` that gives the
JSON Schema the model reads and checks a model's arguments against it, naming each problem's path.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..payloads import JsonObject

SCALARS = ("str", "int", "float", "bool", "any", "None")
"""The type names that take no parameter."""

_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\[|\]|,|\|)")
_NAMES = (*SCALARS, "list", "dict")
_SCALAR_SCHEMA: dict[str, JsonObject] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "any": {},
    "None": {"type": "null"},
}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class TypeSpec:
    """A parsed argument type."""

    kind: str
    """``str``, ``int``, ``float``, ``bool``, ``any``, ``None``, ``list``, ``dict`` or ``union``."""
    items: tuple[TypeSpec, ...] = ()
    """The item type of a list or the value type of a dict (one, or none when not given), or a union's members."""

    def __str__(self) -> str:
        if self.kind == "union":
            return " | ".join(str(i) for i in self.items)
        if self.kind == "list" and self.items:
            return f"list[{self.items[0]}]"
        if self.kind == "dict" and self.items:
            return f"dict[str, {self.items[0]}]"
        return self.kind

    def schema(self) -> JsonObject:
        """The JSON Schema of this type."""
        if self.kind in _SCALAR_SCHEMA:
            return dict(_SCALAR_SCHEMA[self.kind])
        if self.kind == "list":
            return {"type": "array", "items": self.items[0].schema()} if self.items else {"type": "array"}
        if self.kind == "dict":
            if self.items:
                return {"type": "object", "additionalProperties": self.items[0].schema()}
            return {"type": "object"}
        return {"anyOf": [i.schema() for i in self.items]}

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        """Append a problem (naming ``path``) for each way ``value`` does not fit."""
        kind = self.kind
        if kind == "any":
            return
        if kind == "union":
            for member in self.items:
                trial: list[str] = []
                member.check(value, path, trial)
                if not trial:
                    return
            problems.append(f"{path}: expected {self}, got {_describe(value)}.")
            return
        fits: Callable[[Any], bool] = {
            "str": lambda v: isinstance(v, str),
            "int": lambda v: (
                (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
            ),
            "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool),
            "None": lambda v: v is None,
            "list": lambda v: isinstance(v, list | tuple),
            "dict": lambda v: isinstance(v, dict),
        }[kind]
        if not fits(value):
            problems.append(f"{path}: expected {_PHRASES.get(kind, kind)}, got {_describe(value)}.")
            return
        if kind == "list" and self.items:
            for i, item in enumerate(value):
                self.items[0].check(item, f"{path}[{i}]", problems)
        elif kind == "dict" and self.items:
            for key, item in value.items():
                self.items[0].check(item, f"{path}.{key}", problems)

    def convert(self, value: Any) -> Any:
        """A checked value as the function receives it (a whole float for ``int`` becomes an int)."""
        if self.kind == "int" and isinstance(value, float):
            return int(value)
        return value


_PHRASES = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "None": "null",
    "list": "an array",
    "dict": "an object",
}


def _describe(value: object) -> str:
    kind = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    if value is None:
        return "null"
    text = repr(value)
    return f"{kind} ({text[:37] + '...' if len(text) > 40 else text})"


class TypeSyntaxError(ValueError):
    """A type string that is not in the vocabulary; the message says what was expected where."""


def parse_type(text: str) -> TypeSpec:
    """Parse a type string.

    Raises:
        TypeSyntaxError: It is not one of the vocabulary's types.
    """
    if not isinstance(text, str):
        raise TypeSyntaxError(f"a type is a string such as 'str' or 'list[int]', not {type(text).__name__}.")
    tokens: list[tuple[str, int]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise TypeSyntaxError(_expected(text, position))
        tokens.append((match.group(1), match.start(1)))
        position = match.end()
    parser = _Parser(text, tokens)
    spec = parser.union(0)
    if parser.i != len(tokens):
        raise TypeSyntaxError(_expected(text, tokens[parser.i][1], "the end of the type"))
    return spec


def _expected(text: str, position: int, what: str = "") -> str:
    what = what or f"one of {', '.join(SCALARS)}, list, list[T], dict, dict[str, T], or T | U"
    return f"{text!r} is not a type: at column {position + 1} expected {what}."


class _Parser:
    def __init__(self, text: str, tokens: list[tuple[str, int]]) -> None:
        self.text, self.tokens, self.i = text, tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def position(self) -> int:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.text.rstrip())

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise TypeSyntaxError(_expected(self.text, self.position(), repr(expected)))
        self.i += 1

    def union(self, depth: int) -> TypeSpec:
        members = [self.atom(depth)]
        while self.peek() == "|":
            self.i += 1
            members.append(self.atom(depth))
        return members[0] if len(members) == 1 else TypeSpec("union", tuple(members))

    def atom(self, depth: int) -> TypeSpec:
        if depth > _MAX_DEPTH:
            raise TypeSyntaxError(f"{self.text!r} is nested too deeply.")
        token = self.peek()
        if token in SCALARS:
            self.i += 1
            assert token is not None
            return TypeSpec(token)
        if token == "list":
            self.i += 1
            if self.peek() == "[":
                self.i += 1
                item = self.union(depth + 1)
                self.take("]")
                return TypeSpec("list", (item,))
            return TypeSpec("list")
        if token == "dict":
            self.i += 1
            if self.peek() == "[":
                self.i += 1
                if self.peek() != "str":
                    raise TypeSyntaxError(_expected(self.text, self.position(), "'str' (JSON object keys are strings)"))
                self.i += 1
                self.take(",")
                value = self.union(depth + 1)
                self.take("]")
                return TypeSpec("dict", (value,))
            return TypeSpec("dict")
        if token is not None and token not in "[],|":
            close = difflib.get_close_matches(token, _NAMES, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise TypeSyntaxError(
                f"{self.text!r} is not a type: {token!r} (column {self.position() + 1}) is not one "
                f"of {', '.join(_NAMES)}.{hint}"
            )
        raise TypeSyntaxError(_expected(self.text, self.position()))
