"""Every operation an expression may perform: the operators, `BUILTINS` and `METHODS`, each checked before it runs.

A bound of `Limits` that an operation could break inside one C call (``10**10**10``, ``'x' * 10**9``,
``round(5, -10**7)``) is checked on its operands first; what it returns is measured by the compiled expression.
Everything here is pure: no operation changes a value it was given.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from ..errors import ErrorInfo, ExpressionLimitError, ExpressionRuntimeError, SandboxError, shorten
from .values import (
    BYTES_PER_WEIGHT,
    DEFAULT_LIMITS,
    DictBuilder,
    Limits,
    checked_iterable,
    int_too_big,
    int_weight,
    measure,
    too_big,
    type_name,
)

# Operators


def _is_int(x: object) -> bool:
    return type(x) is int or type(x) is bool


def _add(a: Any, b: Any, limits: Limits) -> Any:
    if type(a) is str and type(b) is str and len(a) + len(b) >= limits.max_weight:
        too_big(len(a) + len(b), limits)
    if type(a) in (list, tuple) and type(a) is type(b) and len(a) + len(b) >= limits.max_weight:
        too_big(len(a) + len(b), limits)  # each item weighs at least 1: refused before the list is made
    return a + b


def _or(a: Any, b: Any, limits: Limits) -> Any:
    if type(a) is dict and type(b) is dict:
        # A union made by dict.__or__ would skip the same-hash bound, then compare colliding keys in quadratic time.
        measure(a, limits, budget=limits.max_weight - measure(b, limits) + 1)
        out = DictBuilder()
        out.merge(a)
        out.merge(b)
        return out.out
    return a | b


def _mul(a: Any, b: Any, limits: Limits) -> Any:
    if _is_int(a) and _is_int(b):
        if a.bit_length() + b.bit_length() > limits.max_int_bits + 1:
            int_too_big(a.bit_length() + b.bit_length(), limits)
        return a * b
    if _is_int(b) and type(a) in (str, list, tuple):
        a, b = b, a
    if _is_int(a) and type(b) in (str, list, tuple):
        if a > 0 and measure(b, limits) * a > limits.max_weight:
            too_big(measure(b, limits) * a, limits)
        return b * a
    return a * b


def _pow(a: Any, b: Any, limits: Limits) -> Any:
    _check_pow(a, b, limits)
    return a**b


def _check_pow(a: Any, b: Any, limits: Limits) -> None:
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1:
        bits = (abs(a).bit_length() - 1) * b  # a lower bound of the result's size, exact for powers of two
        if b > limits.max_int_bits or bits > limits.max_int_bits:
            raise ExpressionLimitError(
                f"an integer power that large is refused (the result would have more than "
                f"{limits.max_int_bits:,} bits)."
            )
    if type(a) in (int, float, bool) and type(b) in (int, float, bool) and a < 0 and not float(b).is_integer():
        raise ExpressionRuntimeError(
            "a negative number to a fractional power is a complex number; complex numbers are not supported.",
            python_type="ValueError",
        )


def _lshift(a: Any, b: Any, limits: Limits) -> Any:
    if _is_int(a) and _is_int(b) and a and b > 0 and a.bit_length() + b > limits.max_int_bits:
        raise ExpressionLimitError(f"a shift that large is refused (more than {limits.max_int_bits:,} bits).")
    return a << b


def _mod(a: Any, b: Any, limits: Limits) -> Any:
    if type(a) is str:
        raise SandboxError("%-formatting of strings is not allowed; use an f-string: f'{x}'.")
    return a % b


def _plain(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Limits], Any]:
    return lambda a, b, limits: op(a, b)


BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any, Limits], Any]] = {
    ast.Add: _add,
    ast.Sub: _plain(operator.sub),
    ast.Mult: _mul,
    ast.Div: _plain(operator.truediv),
    ast.FloorDiv: _plain(operator.floordiv),
    ast.Mod: _mod,
    ast.Pow: _pow,
    ast.LShift: _lshift,
    ast.RShift: _plain(operator.rshift),
    ast.BitAnd: _plain(operator.and_),
    ast.BitOr: _or,
    ast.BitXor: _plain(operator.xor),
}

UNARY_SYMBOLS = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}

COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: _contains(b, a),
    ast.NotIn: lambda a, b: not _contains(b, a),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _contains(container: Any, item: Any) -> bool:
    if type(container) not in (list, tuple, str, dict):
        raise ExpressionRuntimeError(
            f"'in' needs a list, tuple, string or dict, not {type_name(container)}.", python_type="TypeError"
        )
    return item in container


# Built-in functions and methods

_FORMAT_SPEC = re.compile(
    r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?z?#?0?(?P<width>\d+)?[,_]?(?:\.(?P<precision>\d+))?"
    r"[bcdeEfFgGnosxX%]?",
    re.DOTALL,
)


def format_value(value: Any, spec: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """``format(value, spec)`` for sandbox values, with widths and precisions bounded."""
    if type(value) is ErrorInfo:
        value = value.message
    if not spec:
        return to_text(value, limits)
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None:
        raise SandboxError(f"the format specification {shorten(spec, 40)!r} is not supported.")
    for part in ("width", "precision"):
        digits = match.group(part)
        if digits is not None and (len(digits) > 6 or int(digits) > limits.max_format_width):
            raise ExpressionLimitError(f"a format {part} over {limits.max_format_width:,} is refused.")
    if type(value) not in (str, int, float, bool):
        raise ExpressionRuntimeError(f"{type_name(value)} cannot be formatted with {spec!r}.", python_type="TypeError")
    return format(value, spec)


def to_text(value: Any, limits: Limits = DEFAULT_LIMITS) -> str:
    """``str(value)`` for a sandbox value (an error shows its message)."""
    if type(value) is str:
        return value
    if type(value) is ErrorInfo:
        return value.message
    return bounded_text(value, repr, limits)


def bounded_text(value: Any, show: Callable[[Any], str], limits: Limits) -> str:
    """``show(value)`` (`repr` or `ascii`; `str` of a container is its repr), refused if it would be too large.

    A value of weight ``w`` shows as at least ``w`` characters and at most ``BYTES_PER_WEIGHT * w``: a value heavier
    than the room is refused at once, and a light one is shown in one C call. One in between is shown a part at a
    time, the same text built from its items' texts, so a text over the size bound is refused once the parts shown
    so far pass it, never after all of it exists.
    """
    room = limits.max_weight - 1  # a string weighs one more than its characters
    measure(value, limits, budget=room)
    text = _shown_within(value, show, room, limits)
    if len(text) > room:
        too_big(len(text) + 1, limits)
    return text


def _shown_in_parts(value: Any, show: Callable[[Any], str], room: int, limits: Limits) -> str:
    t = type(value)
    if t is not list and t is not tuple and t is not dict and t is not ErrorInfo:
        return show(value)  # a scalar: at most 10 characters a character (a string's escapes), checked after
    if t is ErrorInfo:
        fields: list[str] = []
        used = 11  # "ErrorInfo()"
        for name in ("type", "message", "status", "body", "command"):
            field = f"{name}={_shown_within(getattr(value, name), show, room - used, limits)}"
            used += len(field) + (2 if fields else 0)
            if used > room:
                too_big(used, limits)
            fields.append(field)
        return f"ErrorInfo({', '.join(fields)})"
    items: list[Any] = list(value.items()) if t is dict else list(value)
    parts: list[str] = []
    used = 2
    step = max(1, len(items) // 16)
    for start in range(0, len(items), step):
        chunk = items[start : start + step]
        if t is dict:
            part = _dict_items_text(chunk, show, room - used, limits)
        elif len(chunk) == 1:
            part = _shown_within(chunk[0], show, room - used, limits)
        else:
            part = _shown_within(chunk, show, room - used, limits)[1:-1]  # a list of the items: "[a, b]" less "[]"
        used += len(part) + (2 if parts else 0)  # and ", " before it
        if used > room:
            too_big(used, limits)
        parts.append(part)
    inner = ", ".join(parts)
    if t is dict:
        return "{" + inner + "}"
    if t is tuple:
        return "(" + inner + ("," if len(items) == 1 else "") + ")"
    return "[" + inner + "]"


def _dict_items_text(pairs: list[tuple[Any, Any]], show: Callable[[Any], str], room: int, limits: Limits) -> str:
    texts: list[str] = []
    used = 0
    for key, item in pairs:
        text = f"{_shown_within(key, show, room - used, limits)}: {_shown_within(item, show, room - used, limits)}"
        used += len(text) + (2 if texts else 0)
        if used > room:
            too_big(used, limits)
        texts.append(text)
    return ", ".join(texts)


def _shown_within(value: Any, show: Callable[[Any], str], room: int, limits: Limits) -> str:
    try:  # weighing stops as soon as the value is too heavy to show in one call, so a large one costs little here
        measure(value, limits, budget=room // BYTES_PER_WEIGHT)
    except ExpressionLimitError:
        return _shown_in_parts(value, show, room, limits)
    return show(value)


def _n_int(limits: Limits, value: Any = 0, base: Any = None) -> int:
    if base is None:
        if type(value) not in (str, int, float, bool):
            raise ExpressionRuntimeError(
                f"int() takes a number or a string, not {type_name(value)}.", python_type="TypeError"
            )
        if type(value) is str:
            _check_digits(value, 10, limits)
        return int(value)
    if type(value) is not str or type(base) is not int:
        raise ExpressionRuntimeError("int(text, base) takes a string and an integer base.", python_type="TypeError")
    _check_digits(value, base, limits)
    return int(value, base)


def _check_digits(text: str, base: int, limits: Limits) -> None:
    """Refuse, before parsing, a number whose digits alone make it larger than the integer bound."""
    if len(text) < 40 or not 0 <= base <= 36:
        return  # a short text is cheap to parse and its value is weighed after; a bad base is int()'s error
    digits = text.strip().lstrip("+-").lower()
    if base in (0, 2, 8, 16) and digits[:2] in ("0x", "0o", "0b"):
        base = {"0x": 16, "0o": 8, "0b": 2}[digits[:2]]
        digits = digits[2:]
    stripped = digits.lstrip("0_")
    bits = (len(stripped) - stripped.count("_") - 1) * math.log2(base or 10)
    if bits > limits.max_int_bits:
        int_too_big(int(bits), limits)


def _n_float(limits: Limits, value: Any = 0.0) -> float:
    if type(value) not in (str, int, float, bool):
        raise ExpressionRuntimeError(
            f"float() takes a number or a string, not {type_name(value)}.", python_type="TypeError"
        )
    return float(value)


def _n_str(limits: Limits, value: Any = "") -> str:
    return to_text(value, limits)


def _n_repr(limits: Limits, value: Any) -> str:
    return bounded_text(value, repr, limits)


def _n_bool(limits: Limits, value: Any = False) -> bool:
    return bool(value)


def _n_len(limits: Limits, value: Any) -> int:
    return len(checked_iterable(value, "", "len()"))


def _items_weight(values: Any, limits: Limits) -> int:
    """The weight of the items a list of ``values``'s items holds (a string's characters, a dict's keys)."""
    if type(values) is str:
        return 2 * len(values)  # each character a string of weight 2
    if type(values) is dict:
        return measure(list(values), limits) - 1 - len(values)
    return measure(values, limits) - 1 - len(values)


def _check_split(values: Any, limits: Limits) -> None:
    """Refuse turning a string into a list of its characters when that list would be too large (before it is)."""
    if type(values) is str and 1 + 3 * len(values) > limits.max_weight:
        too_big(1 + 3 * len(values), limits)


def _n_list(limits: Limits, value: Any = ()) -> list[Any]:
    _check_split(value, limits)
    return list(checked_iterable(value, "", "list()"))


def _n_tuple(limits: Limits, value: Any = ()) -> tuple[Any, ...]:
    _check_split(value, limits)
    return tuple(checked_iterable(value, "", "tuple()"))


def _n_dict(limits: Limits, value: Any = None, **kwargs: Any) -> dict[Any, Any]:
    if value is None:
        return dict(**kwargs)
    if type(value) is dict:
        return dict(value, **kwargs)
    pairs = checked_iterable(value, "", "dict()")
    out = DictBuilder()
    for pair in pairs:
        if type(pair) not in (list, tuple) or len(pair) != 2:
            raise ExpressionRuntimeError(
                "dict() takes a dict or a list of [key, value] pairs.", python_type="TypeError"
            )
        out.put(pair[0], pair[1])
    out.out.update(kwargs)  # string keys
    return out.out


def _n_range(limits: Limits, *args: Any) -> list[int]:
    if not 1 <= len(args) <= 3 or not all(_is_int(a) for a in args):
        raise ExpressionRuntimeError("range() takes one to three integers.", python_type="TypeError")
    r = range(*args)
    if not r:
        return []
    bits = max(r[0].bit_length(), r[-1].bit_length())  # the widest of its numbers is at an end
    if bits > limits.max_int_bits:
        int_too_big(bits, limits)
    weight = 1 + len(r) * (1 + int_weight(bits))
    if weight > limits.max_weight:  # weighed before the numbers exist: wide ones take 500 bytes each
        raise ExpressionLimitError(
            f"range() of {len(r):,} numbers of {bits:,} bits is too large (size {weight:,}, over "
            f"{limits.max_weight:,})."
        )
    return list(r)


def _n_sum(limits: Limits, values: Any, start: Any = 0) -> Any:
    items = list(checked_iterable(values, "", "sum()"))
    for v in (*items, start):
        if type(v) not in (int, float, bool):  # adding lists or strings one by one takes quadratic time
            raise SandboxError(
                f"sum() adds numbers only, not {type_name(v)}; join strings with ''.join(...) and "
                "lists with a comprehension."
            )
    return sum(items, start)


def _n_min(limits: Limits, *args: Any, **kwargs: Any) -> Any:
    return _extreme(min, args, kwargs)


def _n_max(limits: Limits, *args: Any, **kwargs: Any) -> Any:
    return _extreme(max, args, kwargs)


def _extreme(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if set(kwargs) - {"default"}:
        raise ExpressionRuntimeError(
            f"{fn.__name__}() takes only the keyword argument default.", python_type="TypeError"
        )
    if len(args) == 1:
        return fn(checked_iterable(args[0], "", f"{fn.__name__}()"), **kwargs)
    return fn(*args, **kwargs)


def _n_sorted(limits: Limits, values: Any, *, reverse: Any = False) -> list[Any]:
    _check_split(values, limits)
    return sorted(checked_iterable(values, "", "sorted()"), reverse=bool(reverse))


def _n_reversed(limits: Limits, values: Any) -> list[Any]:
    _check_split(values, limits)
    return list(reversed(checked_iterable(values, "", "reversed()")))


def _n_enumerate(limits: Limits, values: Any, start: Any = 0) -> list[tuple[int, Any]]:
    if not _is_int(start):
        raise ExpressionRuntimeError("enumerate() starts from an integer.", python_type="TypeError")
    items = checked_iterable(values, "", "enumerate()")
    n = len(items)
    if n:
        bits = max(int(start).bit_length(), (start + n - 1).bit_length())
        if bits > limits.max_int_bits:
            int_too_big(bits, limits)
        # A list of n pairs: each an item of the list (1), a tuple (1 + 2), its number and the item.
        weight = 1 + n * (4 + int_weight(bits)) + _items_weight(items, limits)
        if weight > limits.max_weight:
            too_big(weight, limits)
    return list(enumerate(items, start))


def _n_zip(limits: Limits, *values: Any) -> list[tuple[Any, ...]]:
    lists = [checked_iterable(v, "", "zip()") for v in values]
    n = min(map(len, lists), default=0)
    if n:
        # n tuples of one item of each: weighed before they are made (a string's characters become strings).
        weight = 1 + n * (2 + len(lists)) + sum(_items_weight(v, limits) for v in lists)
        if weight > limits.max_weight:
            too_big(weight, limits)
    return list(zip(*lists, strict=False))


def _n_any(limits: Limits, values: Any) -> bool:
    return any(checked_iterable(values, "", "any()"))


def _n_all(limits: Limits, values: Any) -> bool:
    return all(checked_iterable(values, "", "all()"))


def _n_abs(limits: Limits, value: Any) -> Any:
    if type(value) not in (int, float, bool):
        raise ExpressionRuntimeError(f"abs() takes a number, not {type_name(value)}.", python_type="TypeError")
    return abs(value)


def _n_round(limits: Limits, value: Any, digits: Any = None) -> Any:
    if type(value) not in (int, float, bool):
        raise ExpressionRuntimeError(f"round() takes a number, not {type_name(value)}.", python_type="TypeError")
    if digits is None:
        return round(value)
    if not _is_int(digits):
        raise ExpressionRuntimeError("round()'s digits must be an integer.", python_type="TypeError")
    if abs(digits) > 1000:  # CPython computes 10**-digits for an integer: round(5, -10**7) takes seconds
        raise ExpressionLimitError("round() to more than 1,000 digits is refused.")
    return round(value, digits)


def pow_cost(*args: Any) -> int:
    """The steps ``pow(base, exponent, modulus)`` costs: a step per microsecond it may take, before it runs.

    A modular power multiplies numbers the size of the modulus once or twice per bit of the exponent, about 4 ns
    per pair of 30-bit digits on an idle machine (0.3 s for 4,096-bit numbers) and three times that on a loaded one
    (1.2 s, measured): it is charged 13 ns, so a 4,096-bit one is refused and a 3,000-bit one costs 0.4 of the
    steps an evaluation has.
    """
    if len(args) != 3 or not all(_is_int(a) for a in args):
        return 0  # a plain power is bounded by its result's size; pow() itself names wrong arguments
    base, exponent, modulus = (int(a) for a in args)
    digits = modulus.bit_length() // 30 + 1
    return (abs(exponent).bit_length() + base.bit_length() // 30 + 1) * digits * digits * 13 // 1000


def sorted_cost(values: Any = None, *args: Any, **kwargs: Any) -> int:
    """The steps ``sorted(values)`` costs, estimated before it runs (a step a microsecond).

    It compares n log n pairs: about 30 ns a comparison of numbers or strings (the sort's own fast paths), and
    otherwise about 20 ns per unit of the weight of what is compared (lists of lists, tuples, mixed kinds).
    """
    if type(values) not in (list, tuple, dict) or len(values) < 2:
        return 0
    n = len(values)
    comparisons = n * n.bit_length()
    items = list(values) if type(values) is dict else values
    kinds = set(map(type, items))
    if len(kinds) == 1 and kinds <= {int, float, str}:
        return comparisons * 30 // 1000
    return measure(items) * n.bit_length() * 20 // 1000


def _n_pow(limits: Limits, base: Any, exponent: Any, modulus: Any = None) -> Any:
    if modulus is None:
        _check_pow(base, exponent, limits)
        return pow(base, exponent)
    if not (_is_int(base) and _is_int(exponent) and _is_int(modulus)):
        raise ExpressionRuntimeError("pow() with a modulus takes integers.", python_type="TypeError")
    return pow(base, exponent, modulus)


def _n_divmod(limits: Limits, a: Any, b: Any) -> Any:
    if type(a) not in (int, float, bool) or type(b) not in (int, float, bool):
        raise ExpressionRuntimeError("divmod() takes numbers.", python_type="TypeError")
    return divmod(a, b)


def _n_chr(limits: Limits, code: Any) -> str:
    if not _is_int(code):
        raise ExpressionRuntimeError("chr() takes an integer.", python_type="TypeError")
    return chr(code)


def _n_ord(limits: Limits, char: Any) -> int:
    if type(char) is not str:
        raise ExpressionRuntimeError("ord() takes a one-character string.", python_type="TypeError")
    return ord(char)


def _n_isfinite(limits: Limits, value: Any) -> bool:
    if type(value) not in (int, float, bool):
        raise ExpressionRuntimeError("isfinite() takes a number.", python_type="TypeError")
    return math.isfinite(value)


Builtin = Callable[..., Any]

BUILTINS: dict[str, Builtin] = {
    "abs": _n_abs,
    "all": _n_all,
    "any": _n_any,
    "bool": _n_bool,
    "chr": _n_chr,
    "dict": _n_dict,
    "divmod": _n_divmod,
    "enumerate": _n_enumerate,
    "float": _n_float,
    "int": _n_int,
    "isfinite": _n_isfinite,
    "len": _n_len,
    "list": _n_list,
    "max": _n_max,
    "min": _n_min,
    "ord": _n_ord,
    "pow": _n_pow,
    "range": _n_range,
    "repr": _n_repr,
    "reversed": _n_reversed,
    "round": _n_round,
    "sorted": _n_sorted,
    "str": _n_str,
    "sum": _n_sum,
    "tuple": _n_tuple,
    "zip": _n_zip,
}
"""The functions an expression may call, each pure and bounded. ``isfinite`` is math.isfinite."""

BUILTIN_COSTS: dict[str, Callable[..., int]] = {"pow": pow_cost, "sorted": sorted_cost}
"""For a built-in whose work grows faster than its arguments: the steps a call costs, from its arguments (each
other built-in's work is linear in its arguments, whose size is bounded, and the deadline is checked around it)."""


def _width(limits: Limits, width: Any) -> None:
    if _is_int(width) and width >= limits.max_weight:
        raise ExpressionLimitError(f"a width of {width:,} is too large.")


def _m_padding(name: str) -> Builtin:
    impl = getattr(str, name)

    def pad(limits: Limits, s: str, width: Any, *rest: Any) -> Any:
        _width(limits, width)
        return impl(s, width, *rest)

    return pad


def _m_zfill(limits: Limits, s: str, width: Any) -> str:
    _width(limits, width)
    return s.zfill(width)


def _m_replace(limits: Limits, s: str, old: Any, new: Any, count: Any = -1) -> str:
    if type(old) is not str or type(new) is not str or not _is_int(count):
        raise ExpressionRuntimeError("replace() takes two strings and an optional count.", python_type="TypeError")
    occurrences = s.count(old) if count < 0 else min(count, s.count(old))
    if len(s) + occurrences * (len(new) - len(old)) >= limits.max_weight:
        too_big(len(s) + occurrences * len(new), limits)
    return s.replace(old, new, count)


def _m_join(limits: Limits, s: str, values: Any) -> str:
    items = list(checked_iterable(values, "", "join()"))
    total = len(s) * max(0, len(items) - 1)
    for item in items:
        if type(item) is not str:
            raise ExpressionRuntimeError(
                f"join() joins strings, not {type_name(item)}; convert with str().", python_type="TypeError"
            )
        total += len(item)
    if total >= limits.max_weight:
        too_big(total, limits)
    return s.join(items)


def _m_split(name: str) -> Builtin:
    impl = getattr(str, name)

    def split(limits: Limits, s: str, *args: Any, **kwargs: Any) -> Any:
        weight = 1 + 2 * _pieces(s, args, kwargs, name) + len(s)  # the list, each string, every character at most
        if weight > limits.max_weight:
            too_big(weight, limits)
        return impl(s, *args, **kwargs)

    return split


def _m_case(name: str) -> Builtin:
    impl = getattr(str, name)

    def change_case(limits: Limits, s: str) -> str:
        # A character can become three ('ﬃ'.upper() is 'FFI'); only text that is not ASCII can grow.
        if not s.isascii() and 3 * len(s) >= limits.max_weight:
            too_big(3 * len(s), limits)
        result: str = impl(s)
        return result

    return change_case


_WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # every whitespace character is below
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _pieces(s: str, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> int:
    """At most how many strings splitting ``s`` makes, counted before it is split."""
    if name == "splitlines":
        chars = _LINE_BREAKS if not s.isascii() else _LINE_BREAKS[:7]
        return 1 + sum(map(s.count, chars))
    sep = args[0] if args else kwargs.get("sep")
    limit = args[1] if len(args) > 1 else kwargs.get("maxsplit", -1)
    if type(sep) is str and sep:
        found = s.count(sep)
    else:
        found = sum(map(s.count, _WHITESPACE if not s.isascii() else _WHITESPACE[:10]))
    if _is_int(limit) and limit >= 0:
        found = min(found, limit)
    return 1 + found


def _m_plain(owner: type, name: str) -> Builtin:
    impl = getattr(owner, name)
    return lambda limits, target, *args, **kwargs: impl(target, *args, **kwargs)


def _m_dict_view(name: str) -> Builtin:
    impl = getattr(dict, name)

    def view(limits: Limits, target: dict[Any, Any]) -> list[Any]:
        if name == "items":  # a tuple per pair: 3 more a pair than the dict, weighed before the pairs are made
            measure(target, limits, budget=limits.max_weight - 3 * len(target))
        return list(impl(target))

    return view


def _m_get(limits: Limits, d: dict[Any, Any], key: Any, default: Any = None) -> Any:
    return d.get(key, default)


_STR_CASES = ("capitalize", "casefold", "lower", "swapcase", "title", "upper")

_STR_PLAIN = (
    "count",
    "endswith",
    "find",
    "index",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "islower",
    "isnumeric",
    "isspace",
    "istitle",
    "isupper",
    "lstrip",
    "partition",
    "removeprefix",
    "removesuffix",
    "rfind",
    "rindex",
    "rpartition",
    "rstrip",
    "startswith",
    "strip",
)

METHODS: dict[type, dict[str, Builtin]] = {
    str: {
        **{name: _m_plain(str, name) for name in _STR_PLAIN},
        **{name: _m_case(name) for name in _STR_CASES},
        **{name: _m_padding(name) for name in ("center", "ljust", "rjust")},
        "zfill": _m_zfill,
        "replace": _m_replace,
        "join": _m_join,
        "split": _m_split("split"),
        "rsplit": _m_split("rsplit"),
        "splitlines": _m_split("splitlines"),
    },
    list: {"count": _m_plain(list, "count"), "index": _m_plain(list, "index")},
    tuple: {"count": _m_plain(tuple, "count"), "index": _m_plain(tuple, "index")},
    dict: {
        "get": _m_get,
        "keys": _m_dict_view("keys"),
        "values": _m_dict_view("values"),
        "items": _m_dict_view("items"),
    },
}
"""The methods an expression may call, by the receiver's exact type. None of them changes its receiver."""

METHOD_NAMES = frozenset(name for table in METHODS.values() for name in table)
