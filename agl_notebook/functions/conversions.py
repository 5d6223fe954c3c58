"""JSON at the edges of running an agent: sandbox values as JSON, errors as ``exc``, functions as tools.

What a model is shown of a function (its schema), what it reads back from one, and how its arguments are checked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..models.base import ToolSpec
from ..payloads import JsonObject, JsonValue
from .errors import (
    ApiError,
    CommandError,
    ErrorInfo,
    ExpressionError,
    ExpressionRuntimeError,
    ReplayedError,
)
from .expressions import Limits, measure, to_text
from .spec import (
    Arg,
    Function,
)

if TYPE_CHECKING:
    pass


def to_json(value: Any) -> JsonValue:
    """A sandbox value as JSON (tuples become lists, ``exc`` its fields); `CommandError` if it cannot be."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CommandError(f"{value} cannot be written as JSON.")
        return value
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for k, v in value.items():
            if isinstance(k, str):
                out[k] = to_json(v)
            elif k is None or isinstance(k, bool | int | float):
                out[json.dumps(k)] = to_json(v)
            else:
                raise CommandError(f"a {type(k).__name__} key cannot be written as JSON.")
        return out
    if isinstance(value, ErrorInfo):
        return to_json(value.to_json())
    raise CommandError(f"a {type(value).__name__} value cannot be written as JSON.")


def json_safe(value: Any) -> JsonValue:
    """``value`` as JSON, or its repr where it cannot be (for logs and events, never for results)."""
    try:
        return to_json(value)
    except CommandError:
        return repr(value)


def error_info(error: BaseException) -> ErrorInfo:
    """An error as ``exc`` shows it."""
    path = str(getattr(error, "agl_path", ""))
    if isinstance(error, ExpressionRuntimeError):
        return ErrorInfo(error.python_type or type(error).__name__, error.message, command=path)
    if isinstance(error, ExpressionError):
        return ErrorInfo(type(error).__name__, error.message, command=path)
    if isinstance(error, ReplayedError):
        return ErrorInfo(error.type_name, str(error), command=path)
    if isinstance(error, ApiError):
        return ErrorInfo(type(error).__name__, str(error), status=error.status, body=error.body, command=path)
    return ErrorInfo(type(error).__name__, str(error) or type(error).__name__, command=path)


def tool_text(value: Any) -> str:
    """What a model reads back from a tool function: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_json(value), ensure_ascii=False)


def input_schema(args: Sequence[Arg]) -> JsonObject:
    """The JSON Schema a model is shown for a function's arguments (or an ``llm`` output's fields)."""
    properties: JsonObject = {}
    for a in args:
        schema = a.type.schema() if a.type is not None else {}
        if a.description:
            schema["description"] = a.description
        properties[a.name] = schema
    out: JsonObject = {"type": "object", "properties": properties, "additionalProperties": False}
    required: list[JsonValue] = [a.name for a in args if a.required]
    if required:
        out["required"] = required
    return out


def tool_spec(fn: Function) -> ToolSpec:
    """A tool function as a model is shown it: its name, description and arguments' schema."""
    description = fn.description.render({}) if fn.description is not None else ""
    return ToolSpec(fn.name, to_text(description), input_schema(fn.args))


def validator(
    args: Sequence[Arg], limits: Limits, *, enforce_required: bool = False
) -> Callable[[JsonObject], tuple[Any, tuple[str, ...]]]:
    """Checks what a model passes.

    A tool argument's ``required`` only tells the model (an omitted argument is None, as for ``func``); an ``llm``
    output field's is enforced, so the model is asked again for a field it left out.
    """
    names = [a.name for a in args]

    def validate(data: JsonObject) -> tuple[Any, tuple[str, ...]]:
        problems: list[str] = []
        out: dict[str, Any] = {}
        for a in args:
            if a.name in data:
                value = data[a.name]
                if a.type is not None:
                    before = len(problems)
                    a.type.check(value, a.name, problems)
                    if len(problems) == before:
                        value = a.type.convert(value)
                out[a.name] = value
            elif a.required and enforce_required:
                problems.append(f"{a.name}: this required argument is missing.")
        for key in data:
            if key not in names:
                problems.append(f"{key}: unknown argument; the arguments are {', '.join(names) or 'none'}.")
        if not problems:
            try:
                measure(out, limits)
            except ExpressionError as e:
                problems.append(f"arguments: {e.message}")
        return (None, tuple(problems)) if problems else (out, ())

    return validate
