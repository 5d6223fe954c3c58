"""What a sandbox value may be, and how large: `Limits`, `measure` (a value's weight), dicts safe from hash floods.

Values are None, booleans, numbers, strings, lists, tuples, dicts and `ErrorInfo` (``exc``). Every bound of
`Limits` that concerns a value's size is checked here, by `measure`, as the value is built; the operations
(`agl_notebook.functions.expressions.operations`) check theirs before they run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from operator import countOf
from typing import Any, NoReturn

from ..errors import ErrorInfo, ExpressionLimitError, ExpressionRuntimeError, SandboxError, shorten


@dataclass(frozen=True)
class Limits:
    """The bounds every evaluation keeps."""

    max_source: int = 10_000
    """Characters of one expression's source."""
    max_depth: int = 100
    """Nesting of the expression's syntax tree."""
    max_weight: int = 4_000_000
    """The size of any value (its weight, `measure`): characters of strings, items of containers, all nested."""
    max_value_depth: int = 100
    """Nesting of any value (lists in lists in dicts...)."""
    max_int_bits: int = 4096
    """Bits of any integer (about 1,233 decimal digits)."""
    max_steps: int = 1_000_000
    """Work of one evaluation: each comprehension iteration costs the size of its body, and a built-in whose work
    grows faster than its arguments (``sorted``, ``pow`` with a modulus) a step per estimated microsecond of it,
    charged before it runs."""
    timeout: float = 1.0
    """Seconds one evaluation may take; a backstop behind the deterministic bounds above."""
    max_format_width: int = 10_000
    """The largest width or precision in an f-string format specification."""


DEFAULT_LIMITS = Limits()


BYTES_PER_WEIGHT = 12
"""What one unit of weight may take when the value is shown, logged or returned: a value of weight ``w`` takes at
most ``12 * w`` bytes as ``str()``, ``repr()`` or ``ascii()`` text (UTF-8) or as JSON (with or without
``ensure_ascii``, HTML-escaped or not). The weights below are chosen so: a string weighs one plus its characters (a
character takes at most 12 bytes, as the JSON escape ``\\ud83d\\ude00``), an integer one plus a unit per 32 bits
(about 10 digits), a float 2 (``-2.2250738585072014e-308`` is 24 characters), ``exc`` `ERROR_WEIGHT` plus its
fields, a container one plus a unit per item. ``tests/reliability/test_sandbox_bounds.py`` checks it on random
values."""

ERROR_WEIGHT = 10
"""What ``exc`` (`ErrorInfo`) weighs beyond its fields (its type, message, status, body and command), for the
field names its JSON and its repr spell out."""

FLOAT_WEIGHT = 2


def int_weight(bits: int) -> int:
    """The weight of an integer of ``bits`` bits."""
    return 1 + (bits >> 5)


def measure(value: object, limits: Limits = DEFAULT_LIMITS, *, depth: int = 0, budget: int | None = None) -> int:
    """The weight of ``value``: a bound on what it takes shown, logged or returned (`BYTES_PER_WEIGHT`).

    Args:
        value: What to measure.
        limits: The bounds it must keep.
        depth: How deep it sits in a value being built (its own nesting adds to this).
        budget: The most weight it may have (the room left in a value being built); ``limits.max_weight`` if None.

    Raises `SandboxError` for a type the sandbox does not hold, `ExpressionLimitError` past a bound. Iterative, with
    one iterator per level of nesting (not an entry per item), and flat lists of one kind of scalar are weighed in
    C, so measuring a large value costs little memory and time.
    """
    allowed = limits.max_weight if budget is None else budget
    t = type(value)
    if t is str:
        n = len(value) + 1  # type: ignore[arg-type]
        if n > allowed:
            too_big(n, limits)
        return n
    if t is int:
        bits: int = value.bit_length()  # type: ignore[attr-defined]
        if bits > limits.max_int_bits:
            int_too_big(bits, limits)
        weight = 1 + (bits >> 5)
        if weight > allowed:
            too_big(weight, limits)
        return weight
    if t is float:
        if allowed < FLOAT_WEIGHT:
            too_big(FLOAT_WEIGHT, limits)
        return FLOAT_WEIGHT
    if t is bool or value is None:
        if allowed < 1:
            too_big(1, limits)
        return 1
    max_depth, max_bits = limits.max_value_depth, limits.max_int_bits
    total = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        level = depth + len(stack) - 1  # the depth of the items the innermost iterator gives
        for v in stack[-1]:
            t = type(v)
            if t is str:
                total += 1 + len(v)
            elif t is int:
                bits = v.bit_length()
                if bits > max_bits:
                    int_too_big(bits, limits)
                total += 1 + (bits >> 5)
            elif t is float:
                total += FLOAT_WEIGHT
            elif t is bool or v is None:
                total += 1
            elif t is ErrorInfo:
                # Its message and body can be as large as any value: an error weighs what it holds.
                if level >= max_depth:
                    _too_deep(limits)
                total += ERROR_WEIGHT
                stack.append(iter((v.type, v.message, v.status, v.body, v.command)))
                break
            elif t is list or t is tuple or t is dict:
                if level >= max_depth:
                    _too_deep(limits)
                n = len(v)
                total += 1 + n
                # Every item (every key and value) weighs at least 1: a value too large by its length alone is
                # refused without walking it.
                if total + (2 * n if t is dict else n) > allowed:
                    too_big(total, limits)
                if not n:
                    continue
                if t is dict:
                    flat = _flat_dict_weight(v, limits) if n >= 8 else None
                    if flat is None:
                        stack.append(chain.from_iterable(v.items()))  # keys and values, one level deeper
                        break
                elif n < 8:
                    stack.append(iter(v))
                    break
                else:
                    flat = _flat_weight(v, limits)
                    if flat is None and level + 1 < max_depth:
                        flat = _flat_rows_weight(v, limits, allowed - total)
                    if flat is None:
                        stack.append(iter(v))
                        break
                total += flat
            else:
                raise SandboxError(
                    f"{_type_phrase(v)} values are not supported in expressions; values are None, "
                    "booleans, numbers, strings, lists, tuples and dicts."
                )
            if total > allowed:
                too_big(total, limits)
        else:
            stack.pop()
    return total


_UNIT_TYPES = frozenset({float, bool, type(None)})
_INT_TYPES = frozenset({int, bool})


def _flat_weight(items: Any, limits: Limits, n: int | None = None) -> int | None:
    """The weight of a list's items when they are all strings, all integers or all unit scalars, else None.

    Computed in C, without a Python step per item; the caller walks any other list. ``items`` may be a function
    giving a new iterator over them each time (with ``n``, their number), so rows are weighed without a list of
    their items.
    """
    if n is None:
        n = len(items)
        every = items.__iter__
    else:
        every = items
    kinds = set(map(type, every()))
    # Each item weighs 1, plus its characters, its integer's extra units or a float's extra unit.
    if kinds <= _UNIT_TYPES:
        if float not in kinds:
            return n
        return n + (n if len(kinds) == 1 else countOf(map(type, every()), float)) * (FLOAT_WEIGHT - 1)
    if kinds == {str}:
        return n + sum(map(len, every()))
    if kinds <= _INT_TYPES:
        widest = max(map(int.bit_length, every()))
        if widest > limits.max_int_bits:
            int_too_big(widest, limits)
        return n if widest < 32 else n + sum(map((32).__rfloordiv__, map(int.bit_length, every())))
    return None


def _flat_dict_weight(d: dict[Any, Any], limits: Limits) -> int | None:
    """The weight of a dict's keys and values when each side is flat (`_flat_weight`), else None."""
    keys = _flat_weight(d.keys().__iter__, limits, len(d))
    if keys is None:
        return None
    values = _flat_weight(d.values().__iter__, limits, len(d))
    return None if values is None else keys + values


def _flat_rows_weight(items: list[Any] | tuple[Any, ...], limits: Limits, allowed: int) -> int | None:
    """The weight of a list's items when they are all tuples (or all lists) of flat scalars, else None.

    Rows of numbers (what ``enumerate``, ``zip`` and ``dict.items()`` make) are weighed in C too: each row is an
    item (1), a container (1 + its length) and its scalars (each at least 1: rows too long for ``allowed`` by
    their lengths alone are not looked into).
    """
    kinds = set(map(type, items))
    if kinds != {tuple} and kinds != {list}:
        return None
    inner = sum(map(len, items))
    if len(items) + 2 * inner > allowed:
        return len(items) + 2 * inner  # too large already; the caller refuses it
    flat = _flat_weight(lambda: chain.from_iterable(items), limits, inner) if inner else 0
    return None if flat is None else len(items) + inner + flat


def spread_weight(items: Any, limits: Limits, room: int) -> int:
    """What ``*items`` adds to a list being built (its items, each one and its weight), at most ``room``."""
    if type(items) is str:
        weight = 3 * len(items)  # each character is an item of weight 2
        if weight > room:
            too_big(weight, limits)
        return weight
    return measure(items if type(items) is not dict else list(items), limits, budget=room + 1) - 1


SAME_HASH_LIMIT = 32
"""The most keys of one dict that may share a hash.

Strings hash randomly per process, but integers, floats and tuples of them hash predictably: ``i * (2**61 - 1)``
hashes to 0 for every ``i``, and a dict of 55,000 such keys takes 21 s to build, inside C calls no deadline can
interrupt, and as long again to compare. Refusing more than a few keys of one hash keeps every dict operation
linear, whoever chose the keys (ids in an API response can).
"""


class DictBuilder:
    """Builds a dict key by key, refusing more than `SAME_HASH_LIMIT` keys of one hash."""

    __slots__ = ("hashes", "out")

    def __init__(self) -> None:
        self.out: dict[Any, Any] = {}
        self.hashes: dict[int, int] = {}

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``."""
        out = self.out
        if type(key) is not str and key not in out:  # a TypeError for an unhashable key is wanted here
            h = hash(key)
            count = self.hashes.get(h, 0) + 1
            if count > SAME_HASH_LIMIT:
                raise ExpressionLimitError(
                    f"a dict would have more than {SAME_HASH_LIMIT} keys with the same hash "
                    f"(such as {short_repr(key)}), which makes every use of it slow; "
                    "such keys are refused."
                )
            self.hashes[h] = count
        out[key] = value

    def merge(self, other: dict[Any, Any]) -> None:
        """Set every key of ``other`` (``**other`` in a display)."""
        if not self.out and not any(type(k) is not str for k in other):
            self.out.update(other)  # string keys hash randomly: nothing to count
            return
        for key, value in other.items():
            self.put(key, value)


def too_big(weight: int, limits: Limits) -> NoReturn:
    """Refuse a value of this weight (over ``limits.max_weight``)."""
    raise ExpressionLimitError(
        f"a value would be too large (size over {limits.max_weight:,}; strings count their "
        "characters, lists and dicts their items)."
    )


def _too_deep(limits: Limits) -> NoReturn:
    raise ExpressionLimitError(f"a value would be nested more than {limits.max_value_depth} levels deep.")


def int_too_big(bits: int, limits: Limits) -> NoReturn:
    """Refuse an integer of this many bits (over ``limits.max_int_bits``)."""
    raise ExpressionLimitError(f"an integer would have {bits:,} bits; the limit is {limits.max_int_bits:,}.")


def _type_phrase(value: object) -> str:
    if isinstance(value, complex):
        return "complex"
    if isinstance(value, set | frozenset):
        return "set"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    return type(value).__name__


def checked_iterable(value: Any, source: str, what: str) -> Any:
    """``value``, if an expression may iterate over it (a list, tuple, string or dict); ``what`` names the use."""
    t = type(value)
    if t is list or t is tuple or t is str or t is dict:
        return value
    raise ExpressionRuntimeError(f"{what}: {type_name(value)} is not iterable.", python_type="TypeError")


def type_name(value: object) -> str:
    """A value's kind as messages say it ("a string", "an error")."""
    names = {
        type(None): "None",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        tuple: "a tuple",
        dict: "a dict",
        ErrorInfo: "an error",
    }
    return names.get(type(value), type(value).__name__)


def short_repr(value: object) -> str:
    """A scalar's repr, or another value's kind, at most 60 characters: for messages."""
    text = repr(value) if type(value) in (str, int, float, bool, type(None)) else type_name(value)
    return shorten(text, 60)
