"""A server's request for input (MCP elicitation, form mode) as a question screen, and the answer as its result.

The requested schema is a flat object of primitive properties (the protocol's restricted JSON Schema): a string
(with ``minLength``, ``maxLength`` and a ``format`` of email, uri, date or date-time), a number or integer (with
``minimum`` and ``maximum``), a boolean, or a single choice (``enum``, titled by ``enumNames`` or given as ``oneOf``
of ``const`` and ``title``). Each becomes an input of the screen `run.terminal` shows; a property the schema does not
require may be left empty (a choice then offers "(no answer)"), and is left out of the content. The screen's first
input is the response: Accept sends the fields, Decline and Cancel send nothing (the protocol's meanings: the person
said no; the person dismissed the question). URL mode is not offered. A request this cannot show (a multi-select,
a nested object, too many fields) is answered with an error, which the server's tool sees.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..payloads import JsonValue
from ..screens import ActionInput, ChoiceInput, ConfirmInput, Input, NumberInput, Screen, TextInput

ACCEPT, DECLINE, CANCEL = "Accept", "Decline", "Cancel"
RESPONSE = "Response"
"""The label of the screen's first input: Accept, Decline or Cancel (the first item of a headless answer)."""
NO_ANSWER = "(no answer)"
"""The option of a choice the schema does not require that leaves it out."""
MAX_FIELDS = 32
"""The most properties one request may ask for."""
MAX_SCHEMA_BYTES = 32_000
"""The largest requested schema, as JSON."""
MAX_MESSAGE_CHARS = 4_000
"""The longest message a server may show the person (it is recorded with the step)."""

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
_FORMATS = {"email": "an email address", "uri": "a URI", "date": "a date, YYYY-MM-DD", "date-time": "a date and time"}


class UnsupportedRequest(Exception):
    """A request for input that cannot be shown as a form; its message goes back to the server."""


@dataclass(frozen=True, eq=False, repr=False)
class FormText(TextInput):
    """A string property: optional when the schema does not require it, its length and format checked."""

    optional: bool = False
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None

    def parse(self, raw: str) -> Any:
        """Typed text, stripped: empty is no answer (when optional)."""
        return self.validate(raw.strip())

    def validate(self, value: object) -> Any:
        """Check the text, its length and format; None for an optional one left empty."""
        if self.optional and (value is None or value == ""):
            return None
        text = super().validate(value)
        if self.min_length is not None and len(text) < self.min_length:
            raise InputError(f"{self.label}: at least {self.min_length} characters.")
        if self.max_length is not None and len(text) > self.max_length:
            raise InputError(f"{self.label}: at most {self.max_length} characters.")
        if self.format is not None and not _fits_format(text, self.format):
            raise InputError(f"{self.label}: type {_FORMATS[self.format]}.")
        return text


@dataclass(frozen=True, eq=False, repr=False)
class FormNumber(NumberInput):
    """A number or integer property, optional when the schema does not require it."""

    optional: bool = False

    def parse(self, raw: str) -> Any:
        """Typed text as the number; empty is no answer (when optional)."""
        if self.optional and not raw.strip():
            return None
        return super().parse(raw)

    def validate(self, value: object) -> Any:
        """Check the number and its bounds; None for an optional one left empty."""
        if self.optional and value is None:
            return None
        return super().validate(value)


def _fits_format(text: str, form: str) -> bool:
    if form == "email":
        return bool(_EMAIL.match(text))
    if form == "uri":
        return bool(_URI.match(text))
    try:
        if form == "date":
            datetime.date.fromisoformat(text)
        else:
            datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return form == "date" or "T" in text or " " in text


@dataclass(frozen=True)
class Elicitation:
    """A server's request for input as a screen, and how each of the screen's answers maps back to the schema."""

    screen: Screen[Any]
    names: tuple[str, ...]
    """The property each input after the response fills, in order."""
    choices: tuple[Mapping[str, JsonValue] | None, ...]
    """For each of them that is a choice: the value each option stands for."""

    def result(self, answer: object) -> dict[str, Any]:
        """The answer `run.terminal.show` gave as an ElicitResult's fields: ``action`` and, if accepted, ``content``."""
        values = list(answer) if isinstance(answer, tuple | list) else [answer]
        action = str(values[0])
        if action != ACCEPT:
            return {"action": action.lower()}
        content: dict[str, Any] = {}
        for name, choice, value in zip(self.names, self.choices, values[1:], strict=True):
            if choice is not None and isinstance(value, str):
                value = choice[value]
            if value is not None:
                content[name] = value
        return {"action": "accept", "content": content}


def elicitation(server: str, tool: str | None, params: Any, secrets: Sequence[str] = ()) -> Elicitation:
    """The screen for a form-mode request ``params`` (`mcp.types`) of ``server`` during the call to ``tool``.

    Its text is the server's message, each property's description, and who asks: nothing that changes from one run
    to the next, so a headless map's answers can be keyed by it. What it shows is scrubbed of ``secrets`` (the
    server's own credentials, which it may say back); the values it sends back are the schema's.

    Raises:
        UnsupportedRequest: The request cannot be shown as a form (its message goes back to the server).
    """
    if getattr(params, "mode", "form") != "form":
        raise UnsupportedRequest("agl_notebook offers only form-mode elicitation; URL mode is not offered.")
    message = _shown(str(params.message), secrets)
    if len(message) > MAX_MESSAGE_CHARS:
        raise UnsupportedRequest(f"The message is {len(message):,} characters; at most {MAX_MESSAGE_CHARS:,}.")
    schema = params.requested_schema
    if not isinstance(schema, dict):
        schema = dict(schema)
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        raise UnsupportedRequest(f"The requested schema is over {MAX_SCHEMA_BYTES:,} bytes as JSON.")
    properties = schema.get("properties") or {}
    if schema.get("type", "object") != "object" or not isinstance(properties, dict):
        raise UnsupportedRequest("The requested schema must be an object of primitive properties.")
    if len(properties) > MAX_FIELDS:
        raise UnsupportedRequest(f"The requested schema has {len(properties)} properties; at most {MAX_FIELDS}.")
    required = set(schema.get("required") or ())
    inputs: list[Input] = [ActionInput(RESPONSE, (ACCEPT, DECLINE, CANCEL), dismissing=(DECLINE, CANCEL))]
    names: list[str] = []
    choices: list[Mapping[str, JsonValue] | None] = []
    labels = {RESPONSE}
    described: list[str] = []
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            raise UnsupportedRequest(f"The property {name!r} is not a schema.")
        title = _shown(
            prop["title"] if isinstance(prop.get("title"), str) and prop["title"].strip() else str(name), secrets
        )
        label = title if title not in labels else name
        if label in labels:
            raise UnsupportedRequest(f"Two properties are called {label!r}.")
        labels.add(label)
        made, choice = _input(name, label, prop, optional=name not in required, secrets=secrets)
        inputs.append(made)
        names.append(name)
        choices.append(choice)
        if isinstance(prop.get("description"), str) and prop["description"].strip():
            described.append(f"- {label}: {_shown(prop['description'].strip(), secrets)}")
    during = f"during the call to {tool}" if tool else "outside any tool call"
    text = "\n".join([message.strip() or "(no message)", *described, f"(asked by the MCP server {server!r} {during})"])
    return Elicitation(Screen(text, inputs), tuple(names), tuple(choices))


def _input(
    name: str, label: str, prop: dict[str, Any], *, optional: bool, secrets: Sequence[str]
) -> tuple[Input, Mapping[str, Any] | None]:
    kind = prop.get("type")
    options = _options(name, prop, secrets)
    if options is not None:
        if optional:
            if NO_ANSWER in options:
                raise UnsupportedRequest(f"The property {name!r} offers two options shown as {NO_ANSWER!r}.")
            options = {**options, NO_ANSWER: None}
        try:
            return ChoiceInput(label, tuple(options)), options
        except InputError as e:
            raise UnsupportedRequest(f"The property {name!r}: {e}") from None
    if kind == "string":
        form = prop.get("format")
        if form is not None and form not in _FORMATS:
            raise UnsupportedRequest(f"The property {name!r} has the format {form!r}, not one MCP allows.")
        shown = f"{label} ({_FORMATS[form]})" if form else label
        return FormText(
            shown if not optional else f"{shown}, optional",
            optional=optional,
            min_length=_whole(prop.get("minLength")),
            max_length=_whole(prop.get("maxLength")),
            format=form,
        ), None
    if kind in ("number", "integer"):
        low, high = _bound(prop.get("minimum")), _bound(prop.get("maximum"))
        try:
            return FormNumber(
                label if not optional else f"{label}, optional",
                type=int if kind == "integer" else float,
                min=low,
                max=high,
                optional=optional,
            ), None
        except InputError as e:
            raise UnsupportedRequest(f"The property {name!r}: {e}") from None
    if kind == "boolean":
        return ConfirmInput(label), None
    raise UnsupportedRequest(
        f"The property {name!r} is of type {kind!r}: a form here takes strings, numbers, integers, booleans and single "
        "choices (no multi-select, no nested object)."
    )


def _options(name: str, prop: dict[str, Any], secrets: Sequence[str]) -> dict[str, Any] | None:
    """A single choice's options, as shown, to the values they stand for; None when ``prop`` is not a choice."""
    if isinstance(prop.get("enum"), list):
        values = prop["enum"]
        titles = prop.get("enumNames")
        shown = titles if isinstance(titles, list) and len(titles) == len(values) else values
        pairs = [(_shown(str(t), secrets), v) for t, v in zip(shown, values, strict=True)]
    else:
        one_of = prop.get("oneOf") or prop.get("anyOf")
        if not (isinstance(one_of, list) and one_of and all(isinstance(o, dict) and "const" in o for o in one_of)):
            return None
        pairs = [(_shown(str(o.get("title", o["const"])), secrets), o["const"]) for o in one_of]
    options = dict(pairs)
    if len(options) < len(pairs):  # merged, the person could not choose one of them, and would not know
        twice = next(shown for shown, _ in pairs if sum(1 for s, _ in pairs if s == shown) > 1)
        raise UnsupportedRequest(f"The property {name!r} offers two options shown as {twice!r}.")
    return options


def _shown(text: str, secrets: Sequence[str]) -> str:
    """``text`` as the person may see it: without the server's own secrets (the kernel's are scrubbed downstream)."""
    if not secrets:
        return text
    from .._secrets import scrub_text

    return scrub_text(text, secrets)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bound(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
