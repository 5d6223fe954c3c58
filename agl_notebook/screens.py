"""Screens: the questions a tool asks the person, and the typed inputs that take the answers.

A screen function returns a `Screen`; `run.terminal.show(screen_fn, **kwargs)` draws it (input widgets in a
notebook, a prompt on a console, a scripted answer in tests) and returns the validated answer: the value for a
screen with one input, a tuple for a screen with several.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from ._fieldwise import Fieldwise
from .errors import InputError
from .payloads import JsonValue

T = TypeVar("T")

_TRUE = {"y", "yes", "true", "1"}
_FALSE = {"n", "no", "false", "0"}


@dataclass(frozen=True, eq=False, repr=False)
class TextInput(Fieldwise):
    """A line (or, with ``multiline``, a block) of text, converted to ``type`` (str, int or float)."""

    label: str
    """What the input is called, shown beside it."""
    type: type[str] | type[int] | type[float] = str
    """The answer's type; text is converted to it."""
    multiline: bool = False
    """Draw a text area rather than a line."""

    def __post_init__(self) -> None:
        _check_label(self.label)
        if self.type not in (str, int, float):
            raise InputError(f"TextInput {self.label!r}: type must be str, int or float, not {self.type!r}.")

    def parse(self, raw: str) -> Any:
        """Convert typed text into the answer, or raise `InputError` saying what to type instead."""
        text = raw if self.multiline else raw.strip()
        if self.type is str:
            return self.validate(text)
        # Only the conversion is guarded: InputError is a ValueError, and validate's own message must get through.
        try:
            number = self.type(text.strip())
        except ValueError:
            raise InputError(f"{self.label}: type {self.expected()}.") from None
        return self.validate(number)

    def expected(self) -> str:
        """What to type, in words ("a whole number"); empty for text."""
        return "" if self.type is str else _kind(self.type)

    def validate(self, value: object) -> Any:
        """Check an answer given as a value; return it (converted) or raise `InputError`."""
        if self.type is str:
            if not isinstance(value, str):
                raise InputError(f"{self.label}: expected text, got {value!r}.")
            if not value.strip():
                raise InputError(f"{self.label}: the answer is empty.")
            return value
        return _number(self.label, int if self.type is int else float, value)


@dataclass(frozen=True, eq=False, repr=False)
class NumberInput(Fieldwise):
    """A number, whole (``type=int``) or not (``type=float``), optionally between ``min`` and ``max``."""

    label: str
    """What the input is called."""
    type: type[int] | type[float] = int
    """int or float."""
    min: float | None = None
    """The smallest answer allowed."""
    max: float | None = None
    """The largest answer allowed."""

    def __post_init__(self) -> None:
        _check_label(self.label)
        if self.type not in (int, float):
            raise InputError(f"NumberInput {self.label!r}: type must be int or float.")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InputError(f"NumberInput {self.label!r}: min {self.min} is above max {self.max}.")

    def parse(self, raw: str) -> Any:
        """Convert typed text into the number."""
        # Only the conversion is guarded: InputError is a ValueError, and a range error must say the range.
        try:
            number = self.type(raw.strip())
        except ValueError:
            raise InputError(f"{self.label}: type {self.expected()}.") from None
        return self.validate(number)

    def validate(self, value: object) -> Any:
        """Check the number and its bounds."""
        number = _number(self.label, self.type, value)
        if self.min is not None and number < self.min:
            raise InputError(f"{self.label}: {number} is below the minimum {_fmt(self.min)}{self._range_hint()}.")
        if self.max is not None and number > self.max:
            raise InputError(f"{self.label}: {number} is above the maximum {_fmt(self.max)}{self._range_hint()}.")
        return number

    def expected(self) -> str:
        """What to type, in words with the bounds: "a whole number from 1 to 20"."""
        kind = _kind(self.type)
        if self.min is not None and self.max is not None:
            return f"{kind} from {_fmt(self.min)} to {_fmt(self.max)}"
        if self.min is not None:
            return f"{kind} of at least {_fmt(self.min)}"
        if self.max is not None:
            return f"{kind} of at most {_fmt(self.max)}"
        return kind

    def range_text(self) -> str:
        """The bounds in short, for a form's hint: "1–20", "≥ 1", "≤ 20", or empty without bounds."""
        if self.min is not None and self.max is not None:
            return f"{_fmt(self.min)}\u2013{_fmt(self.max)}"
        if self.min is not None:
            return f"\u2265 {_fmt(self.min)}"
        if self.max is not None:
            return f"\u2264 {_fmt(self.max)}"
        return ""

    def _range_hint(self) -> str:
        # With both bounds, the message says the whole range, so the person sees where both ends are.
        return f"; type {self.expected()}" if self.min is not None and self.max is not None else ""


@dataclass(frozen=True, eq=False, repr=False)
class ChoiceInput(Fieldwise):
    """One of a list of options; the answer is the option's text."""

    label: str
    """What the input is called."""
    options: Sequence[str]
    """The options, in the order shown."""

    def __post_init__(self) -> None:
        _check_label(self.label)
        options = tuple(self.options)
        if not options or not all(isinstance(o, str) and o.strip() for o in options):
            raise InputError(f"ChoiceInput {self.label!r}: options must be a non-empty list of non-empty strings.")
        if len(set(options)) != len(options):
            raise InputError(f"ChoiceInput {self.label!r}: options must be distinct.")
        object.__setattr__(self, "options", options)

    def parse(self, raw: str) -> Any:
        """Accept an option's text or its number (1-based)."""
        text = raw.strip()
        if text in self.options:  # an option's own text wins over a position ("1" among "3", "2", "1")
            return text
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return self.options[int(text) - 1]
        return self.validate(text)

    def validate(self, value: object) -> Any:
        """Check the answer is one of the options."""
        if value not in self.options:
            raise InputError(f"{self.label}: choose one of {', '.join(self.options)}; {value!r} is not one.")
        return value


@dataclass(frozen=True, eq=False, repr=False)
class ConfirmInput(Fieldwise):
    """Yes or no; the answer is a bool."""

    label: str
    """What the input is called."""

    def __post_init__(self) -> None:
        _check_label(self.label)

    def parse(self, raw: str) -> Any:
        """Accept y/yes/true/1 or n/no/false/0."""
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise InputError(f"{self.label}: answer yes or no.")

    def validate(self, value: object) -> Any:
        """Check the answer is a bool."""
        if not isinstance(value, bool):
            raise InputError(f"{self.label}: expected yes or no (a bool), got {value!r}.")
        return value


@dataclass(frozen=True, eq=False, repr=False)
class ActionInput(ChoiceInput):
    """The first input of a screen that can be answered without its fields: drawn as the form's buttons.

    Its answer is the option chosen (the button pressed). Choosing one of ``dismissing`` answers the screen with
    that option alone: the other inputs are neither asked nor checked, and answer None (an MCP server's question,
    declined or cancelled).
    """

    dismissing: Sequence[str] = ()
    """The options that answer without the other inputs."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "dismissing", tuple(self.dismissing))
        if not set(self.dismissing) <= set(self.options):
            raise InputError(f"ActionInput {self.label!r}: every dismissing option must be one of its options.")


Input: TypeAlias = TextInput | NumberInput | ChoiceInput | ConfirmInput
"""Any input a screen can hold."""


@dataclass(frozen=True, eq=False, repr=False)
class Screen(Fieldwise, Generic[T]):
    """A question for the person: text and the inputs that take the answer (``Screen[str]`` for one text)."""

    text: str
    """What the person reads."""
    inputs: Sequence[Input]
    """The inputs, in order; `show` returns one value per input (a tuple when there are several)."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError("Screen needs text: what the person reads.")
        inputs = tuple(self.inputs)
        if not inputs:
            raise InputError(f"Screen {self.text[:40]!r} needs at least one input.")
        for i in inputs:
            if not isinstance(i, TextInput | NumberInput | ChoiceInput | ConfirmInput):
                raise InputError(f"Screen {self.text[:40]!r}: {i!r} is not an input.")
        labels = [i.label for i in inputs]
        if len(set(labels)) != len(labels):
            raise InputError(f"Screen {self.text[:40]!r}: input labels must be distinct.")
        object.__setattr__(self, "inputs", inputs)

    def validate(self, answers: Sequence[object]) -> T:
        """Validate one answer per input; return the value (one input) or the tuple (several).

        A first `ActionInput` answered with a dismissing option needs no other answer: the rest are None.
        """
        first = self.inputs[0]
        if isinstance(first, ActionInput) and answers and answers[0] in first.dismissing and len(self.inputs) > 1:
            return (first.validate(answers[0]), *([None] * (len(self.inputs) - 1)))  # type: ignore[return-value]
        if len(answers) != len(self.inputs):
            raise InputError(
                f"Screen {self.text[:40]!r} has {len(self.inputs)} input(s), got {len(answers)} answer(s)."
            )
        values = tuple(i.validate(a) for i, a in zip(self.inputs, answers, strict=True))
        return values[0] if len(values) == 1 else values  # type: ignore[return-value]

    def answer_json(self, answer: object) -> JsonValue:
        """The answer as JSON, for events and records."""
        if len(self.inputs) == 1:
            return answer  # type: ignore[return-value]
        return list(answer)  # type: ignore[call-overload, no-any-return]


def _check_label(label: object) -> None:
    if not isinstance(label, str) or not label.strip():
        raise InputError(f"An input needs a non-empty label, not {label!r}.")


def _number(label: str, kind: type[int] | type[float], value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{label}: expected a number, got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{label}: expected a finite number.")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise InputError(f"{label}: expected a whole number, got {value}.")
        return int(value)
    return float(value)


def _kind(kind: type[Any]) -> str:
    return "a whole number" if kind is int else "a number"


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)
