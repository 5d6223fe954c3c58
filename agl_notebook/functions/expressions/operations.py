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
from .values import DEFAULT_LIMITS, DictBuilder, Limits, checked_iterable, int_too_big, measure, too_big, type_name

# Operators


def _is_int(x: object) -> bool:
    return type(x) is int or type(x) is bool


def _add(a: Any, b: Any, limits: Limits) -> Any:
    if type(a) is str and type(b) is str and len(a) + len(b) >= limits.max_weight:
        too_big(len(a) + len(b), limits)
    return a + b


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
    ast.BitOr: _plain(operator.or_),
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
    measure(value, limits)
    return str(value)


def _n_int(limits: Limits, value: Any = 0, base: Any = None) -> int:
    if base is None:
        if type(value) not in (str, int, float, bool):
            raise ExpressionRuntimeError(
                f"int() takes a number or a string, not {type_name(value)}.", python_type="TypeError"
            )
        return int(value)
    if type(value) is not str or type(base) is not int:
        raise ExpressionRuntimeError("int(text, base) takes a string and an integer base.", python_type="TypeError")
    return int(value, base)


def _n_float(limits: Limits, value: Any = 0.0) -> float:
    if type(value) not in (str, int, float, bool):
        raise ExpressionRuntimeError(
            f"float() takes a number or a string, not {type_name(value)}.", python_type="TypeError"
        )
    return float(value)


def _n_str(limits: Limits, value: Any = "") -> str:
    return to_text(value, limits)


def _n_repr(limits: Limits, value: Any) -> str:
    measure(value, limits)
    return repr(value)


def _n_bool(limits: Limits, value: Any = False) -> bool:
    return bool(value)


def _n_len(limits: Limits, value: Any) -> int:
    return len(checked_iterable(value, "", "len()"))


def _n_list(limits: Limits, value: Any = ()) -> list[Any]:
    return list(checked_iterable(value, "", "list()"))


def _n_tuple(limits: Limits, value: Any = ()) -> tuple[Any, ...]:
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
    if len(r) * 2 > limits.max_weight:
        raise ExpressionLimitError(f"range() of {len(r):,} numbers is too large (at most {limits.max_weight // 2:,}).")
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
    return sorted(checked_iterable(values, "", "sorted()"), reverse=bool(reverse))


def _n_reversed(limits: Limits, values: Any) -> list[Any]:
    return list(reversed(checked_iterable(values, "", "reversed()")))


def _n_enumerate(limits: Limits, values: Any, start: Any = 0) -> list[tuple[int, Any]]:
    if not _is_int(start):
        raise ExpressionRuntimeError("enumerate() starts from an integer.", python_type="TypeError")
    return list(enumerate(checked_iterable(values, "", "enumerate()"), start))


def _n_zip(limits: Limits, *values: Any) -> list[tuple[Any, ...]]:
    return list(zip(*(checked_iterable(v, "", "zip()") for v in values), strict=False))


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
        return impl(s, *args, **kwargs)

    return split


def _m_plain(owner: type, name: str) -> Builtin:
    impl = getattr(owner, name)
    return lambda limits, target, *args, **kwargs: impl(target, *args, **kwargs)


def _m_dict_view(name: str) -> Builtin:
    impl = getattr(dict, name)
    return lambda limits, target: list(impl(target))


def _m_get(limits: Limits, d: dict[Any, Any], key: Any, default: Any = None) -> Any:
    return d.get(key, default)


_STR_PLAIN = (
    "capitalize",
    "casefold",
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
    "lower",
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
    "swapcase",
    "title",
    "upper",
)

METHODS: dict[type, dict[str, Builtin]] = {
    str: {
        **{name: _m_plain(str, name) for name in _STR_PLAIN},
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
