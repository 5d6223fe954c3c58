"""The expression sandbox: the ``"{ expr }"`` language of agent files (docs/functions.md, "Dynamic strings").

An expression is one Python expression, parsed with `ast` and compiled by this module into a tree of closures that
only ever does what an allow-list says. Nothing is handed to `eval` or `compile`.

Why our own evaluator rather than a package (``simpleeval``, ``asteval``):

- Their default attribute policy is a block-list (``simpleeval`` checks a list of forbidden prefixes and methods;
  an allow-list of attributes is opt-in), and both have had sandbox escapes fixed in recent releases (simpleeval
  1.0.5, CVE-2026-32640; asteval's format-string escape). An allow-list cannot be bypassed by a name nobody
  thought of.
- Bounds must hold *before* an operation runs: ``10**10**10`` or ``round(5, -10**7)`` spend seconds inside one C
  call, where no timer can stop them. A tree walker sees every operation and its operands first.
- The validator needs what an expression reads (`Expression.names`), with comprehension scopes handled, and exact
  positions for its messages; the compiled tree gives both.

What is allowed: literals (no bytes, no sets: their order changes between runs, which would break replay),
variables, arithmetic, comparisons, ``and``/``or``/``not``, ``x if c else y``, subscripts and slices, list, tuple and
dict displays with ``*``/``**`` unpacking, list/dict comprehensions and generator expressions (evaluated eagerly),
f-strings, calls to `BUILTINS`, and the methods in `METHODS` of str, list, tuple and dict (none that mutates).
Attributes are read only on ``exc`` (`ErrorInfo`); no name or attribute may start with ``__``/``_``. A call of a
name always calls the built-in: a variable of the same name (an argument called ``max``) is read, never called.

What is bounded (`Limits`): the source's length and nesting, every value's size (its *weight*: characters plus
items plus a word per 64 bits of an integer, shared parts counted each time they appear, since that is what
printing or sending it costs) and depth, integer sizes, f-string widths, the work of comprehensions (steps) and,
as a backstop, the wall-clock time of one evaluation. Sizes are checked as a value is built (each item of a display,
each argument of a call, each comprehension value), and a dict holds at most `SAME_HASH_LIMIT` keys of one hash.

Every error is an `ExpressionError`: `ExpressionSyntaxError`, `SandboxError` (refused; `ExpressionLimitError` when a
bound was hit) or `ExpressionRuntimeError` (the expression failed the ordinary way: a missing key, a division by
zero; ``python_type`` names the Python exception).
"""

from __future__ import annotations

import ast
import math
import operator
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NoReturn

# --------------------------------------------------------------------------------------------------------------
# Limits and errors


@dataclass(frozen=True)
class Limits:
    """The bounds every evaluation keeps."""

    max_source: int = 10_000
    """Characters of one expression's source."""
    max_depth: int = 100
    """Nesting of the expression's syntax tree."""
    max_weight: int = 4_000_000
    """The size of any value: characters of strings, items of containers, words of integers, all nested."""
    max_value_depth: int = 100
    """Nesting of any value (lists in lists in dicts...)."""
    max_int_bits: int = 4096
    """Bits of any integer (about 1,233 decimal digits)."""
    max_steps: int = 1_000_000
    """Work of one evaluation: each comprehension iteration costs the size of its body."""
    timeout: float = 1.0
    """Seconds one evaluation may take; a backstop behind the deterministic bounds above."""
    max_format_width: int = 10_000
    """The largest width or precision in an f-string format specification."""


DEFAULT_LIMITS = Limits()


class ExpressionError(Exception):
    """Anything an expression can raise. The message shows the expression and where in it, when known."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        line: int | None = None,
        column: int | None = None,
        python_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        """What went wrong, without the expression."""
        self.source = source
        """The expression's source."""
        self.line = line
        """The 1-based line of the expression where it went wrong, when known."""
        self.column = column
        """The 0-based column, when known."""
        self.python_type = python_type
        """For a runtime error, the Python exception's name (``KeyError``); else None."""

    def __str__(self) -> str:
        if not self.source:
            return self.message
        lines = self.source.splitlines() or [""]
        if self.line is None or self.column is None or not 1 <= self.line <= len(lines):
            return f"{self.message}\n    {_shorten(self.source)}"
        text = lines[self.line - 1]
        column = min(self.column, len(text))
        start = max(0, column - 60)
        shown = ("…" if start else "") + text[start : start + 120] + ("…" if len(text) > start + 120 else "")
        caret = " " * (column - start + (1 if start else 0)) + "^"
        where = f" (line {self.line}, column {column + 1})" if len(lines) > 1 else f" (column {column + 1})"
        return f"{self.message}{where}\n    {shown}\n    {caret}"

    def located(self, source: str, node: ast.AST | None) -> ExpressionError:
        """The same error, with its position set from ``node`` if it has none yet."""
        if not self.source:
            self.source = source
        if self.line is None and node is not None:
            self.line = getattr(node, "lineno", None)
            self.column = getattr(node, "col_offset", None)
        return self


class ExpressionSyntaxError(ExpressionError):
    """The expression is not a valid Python expression."""


class SandboxError(ExpressionError):
    """The sandbox refused the expression: something it never allows (a dunder attribute, a call, a node type)."""


class ExpressionLimitError(SandboxError):
    """The expression went past a bound of `Limits` (size, depth, steps, time)."""


class ExpressionRuntimeError(ExpressionError):
    """The expression failed the ordinary way (a missing key, a division by zero); ``python_type`` says which."""


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What ``exc`` holds in an error handler: the error's type, message and, for HTTP errors, status."""

    type: str
    """The error's type name (``ApiError``, ``KeyError``, ``ExpressionRuntimeError`` ...)."""
    message: str
    """What went wrong; this is what ``f'{exc}'`` shows."""
    status: int | None = None
    """The HTTP status of an ``api`` command's error response, else None."""
    body: Any = None
    """The parsed body of an ``api`` command's error response, else None."""
    command: str = ""
    """The JSON path of the command that failed."""

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        """The error as JSON (how it is returned, logged or sent to a model)."""
        data: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.status is not None:
            data["status"] = self.status
        if self.body is not None:
            data["body"] = self.body
        if self.command:
            data["command"] = self.command
        return data


_ERROR_FIELDS = frozenset({"type", "message", "status", "body", "command"})


def measure(value: object, limits: Limits = DEFAULT_LIMITS, *, depth: int = 0, budget: int | None = None) -> int:
    """The weight of ``value``.

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
            _too_big(n, limits)
        return n
    if t is int:
        bits: int = value.bit_length()  # type: ignore[attr-defined]
        if bits > limits.max_int_bits:
            _int_too_big(bits, limits)
        weight = 1 + (bits >> 6)
        if weight > allowed:
            _too_big(weight, limits)
        return weight
    if t is float or t is bool or value is None:
        if allowed < 1:
            _too_big(1, limits)
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
                    _int_too_big(bits, limits)
                total += 1 + (bits >> 6)
            elif t is float or t is bool or v is None or t is ErrorInfo:
                total += 1
            elif t is list or t is tuple or t is dict:
                if level >= max_depth:
                    _too_deep(limits)
                n = len(v)
                total += 1 + n
                # Every item (every key and value) weighs at least 1: a value too large by its length alone is
                # refused without walking it.
                if total + (2 * n if t is dict else n) > allowed:
                    _too_big(total, limits)
                if not n:
                    continue
                if t is dict:
                    stack.append(chain.from_iterable(v.items()))  # keys and values, one level deeper
                    break
                flat = _flat_weight(v, limits) if n >= 8 else None
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
                _too_big(total, limits)
        else:
            stack.pop()
    return total


_UNIT_TYPES = frozenset({float, bool, type(None)})
_INT_TYPES = frozenset({int, bool})


def _flat_weight(items: list[Any] | tuple[Any, ...], limits: Limits) -> int | None:
    """The weight of a list's items when they are all strings, all integers or all unit scalars, else None.

    Computed in C, without a Python step per item; the caller walks any other list.
    """
    kinds = set(map(type, items))
    n = len(items)  # each item weighs 1, plus its characters or its integer's extra words
    if kinds <= _UNIT_TYPES:
        return n
    if kinds == {str}:
        return n + sum(map(len, items))
    if kinds <= _INT_TYPES:
        widest = max(map(int.bit_length, items))
        if widest > limits.max_int_bits:
            _int_too_big(widest, limits)
        return n if widest < 64 else n + sum(map((64).__rfloordiv__, map(int.bit_length, items)))
    return None


def _spread_weight(items: Any, limits: Limits, room: int) -> int:
    """What ``*items`` adds to a list being built (its items, each one and its weight), at most ``room``."""
    if type(items) is str:
        weight = 3 * len(items)  # each character is an item of weight 2
        if weight > room:
            _too_big(weight, limits)
        return weight
    return measure(items if type(items) is not dict else list(items), limits, budget=room + 1) - 1


SAME_HASH_LIMIT = 32
"""The most keys of one dict that may share a hash.

Strings hash randomly per process, but integers, floats and tuples of them hash predictably: ``i * (2**61 - 1)``
hashes to 0 for every ``i``, and a dict of 55,000 such keys takes 21 s to build, inside C calls no deadline can
interrupt, and as long again to compare. Refusing more than a few keys of one hash keeps every dict operation
linear, whoever chose the keys (ids in an API response can).
"""


class _DictBuilder:
    """Builds a dict key by key, refusing more than `SAME_HASH_LIMIT` keys of one hash."""

    __slots__ = ("hashes", "out")

    def __init__(self) -> None:
        self.out: dict[Any, Any] = {}
        self.hashes: dict[int, int] = {}

    def put(self, key: Any, value: Any) -> None:
        out = self.out
        if type(key) is not str and key not in out:  # a TypeError for an unhashable key is wanted here
            h = hash(key)
            count = self.hashes.get(h, 0) + 1
            if count > SAME_HASH_LIMIT:
                raise ExpressionLimitError(
                    f"a dict would have more than {SAME_HASH_LIMIT} keys with the same hash "
                    f"(such as {_short_repr(key)}), which makes every use of it slow; "
                    "such keys are refused."
                )
            self.hashes[h] = count
        out[key] = value

    def merge(self, other: dict[Any, Any]) -> None:
        if not self.out and not any(type(k) is not str for k in other):
            self.out.update(other)  # string keys hash randomly: nothing to count
            return
        for key, value in other.items():
            self.put(key, value)


def _too_big(weight: int, limits: Limits) -> NoReturn:
    raise ExpressionLimitError(
        f"a value would be too large (size over {limits.max_weight:,}; strings count their "
        "characters, lists and dicts their items)."
    )


def _too_deep(limits: Limits) -> NoReturn:
    raise ExpressionLimitError(f"a value would be nested more than {limits.max_value_depth} levels deep.")


def _int_too_big(bits: int, limits: Limits) -> NoReturn:
    raise ExpressionLimitError(f"an integer would have {bits:,} bits; the limit is {limits.max_int_bits:,}.")


def _type_phrase(value: object) -> str:
    if isinstance(value, complex):
        return "complex"
    if isinstance(value, set | frozenset):
        return "set"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    return type(value).__name__


# --------------------------------------------------------------------------------------------------------------
# Compiled expressions


class _State:
    """The bookkeeping of one evaluation."""

    __slots__ = ("deadline", "limits", "steps")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.steps = 0
        self.deadline = time.monotonic() + limits.timeout

    def spend(self, steps: int) -> None:
        self.steps += steps
        if self.steps > self.limits.max_steps:
            raise ExpressionLimitError(
                f"the expression did more than {self.limits.max_steps:,} steps of work "
                "(comprehensions over large or nested lists)."
            )
        if time.monotonic() > self.deadline:
            raise ExpressionLimitError(f"the expression ran longer than {self.limits.timeout:g} s.")


Env = dict[str, Any]
_Fn = Callable[[Env, _State], Any]


@dataclass(frozen=True, eq=False)
class Expression:
    """A compiled expression. Evaluate it with `Expression.evaluate`; it never raises but `ExpressionError`."""

    source: str
    """The source, as written between the braces."""
    names: frozenset[str]
    """The variables it reads (comprehension variables excluded; built-ins called by name excluded)."""
    calls: frozenset[str]
    """The built-in functions it calls by name (a variable of the same name does not hide them: a call of a name
    always calls the built-in, and reading the name reads the variable)."""
    limits: Limits = field(repr=False)
    _fn: _Fn = field(repr=False)

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        """The expression's value with ``variables`` in scope.

        Raises:
            ExpressionError: It failed (`ExpressionRuntimeError`) or the sandbox refused it (`SandboxError`).
        """
        env = variables if type(variables) is dict else dict(variables)
        try:
            return self._fn(env, _State(self.limits))
        except ExpressionError as e:
            raise e.located(self.source, None) from None
        except RecursionError:  # a value deeper than any bound allows cannot arrive, but a full stack can
            raise ExpressionLimitError("the expression is nested too deeply to evaluate.", source=self.source) from None


_CACHE: dict[tuple[str, Limits], Expression] = {}
_CACHE_LIMIT = 8192


def compile_expression(source: str, *, limits: Limits = DEFAULT_LIMITS) -> Expression:
    """Parse and check ``source`` once; the result is cached by source.

    Raises:
        ExpressionSyntaxError: It is not a Python expression.
        SandboxError: It uses something the sandbox never allows (reported before anything runs).
    """
    key = (source, limits)
    found = _CACHE.get(key)
    if found is not None:
        return found
    compiled = _Compiler(source, limits).compile()
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = compiled
    return compiled


def evaluate(source: str, variables: Mapping[str, Any] | None = None, *, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Compile (cached) and evaluate ``source`` with ``variables`` in scope."""
    return compile_expression(source, limits=limits).evaluate(variables or {})


_IMPORT = re.compile(r"\s*(?:import|from)\s+[\w.]+")


def _parse(source: str, limits: Limits) -> ast.Expression:
    if not isinstance(source, str):
        raise SandboxError(f"an expression is text, not {type(source).__name__}.")
    if len(source) > limits.max_source:
        raise ExpressionLimitError(
            f"the expression is {len(source):,} characters long; the limit is {limits.max_source:,}.",
            source=source[:200],
        )
    if _IMPORT.match(source):
        raise SandboxError("imports are not allowed in expressions.", source=source, line=1, column=0)
    try:
        with warnings.catch_warnings():  # `x is 1`, "\d": the parser's warnings are not the person's problem here
            warnings.simplefilter("ignore")
            return ast.parse(source, mode="eval")
    except SyntaxError as e:
        message = e.msg or "invalid syntax"
        if "nested" in message or "too many" in message:
            raise ExpressionLimitError(f"the expression is nested too deeply ({message}).", source=source) from None
        if "Exceeds the limit" in message:
            raise ExpressionLimitError("an integer literal is too long.", source=source) from None
        line = e.lineno or 1
        column = (e.offset or 1) - 1
        raise ExpressionSyntaxError(f"syntax error: {message}", source=source, line=line, column=column) from None
    except (MemoryError, RecursionError):
        raise ExpressionLimitError("the expression is nested too deeply to parse.", source=source) from None
    except ValueError as e:  # e.g. a null character
        raise ExpressionSyntaxError(f"syntax error: {e}", source=source.replace("\0", "\\0")) from None


class _Compiler:
    """Turns a checked syntax tree into closures; collects what it reads."""

    def __init__(self, source: str, limits: Limits) -> None:
        self.source = source.strip() if isinstance(source, str) else source
        self.limits = limits
        self.names: set[str] = set()
        self.calls: set[str] = set()
        self.local: list[set[str]] = []  # comprehension scopes, innermost last

    def compile(self) -> Expression:
        tree = _parse(self.source, self.limits)
        try:
            fn = self.node(tree.body, 0)
        except ExpressionError as e:
            raise e.located(self.source, None) from None
        return Expression(self.source, frozenset(self.names), frozenset(self.calls), self.limits, fn)

    def refuse(self, node: ast.AST, message: str) -> NoReturn:
        raise SandboxError(
            message, source=self.source, line=getattr(node, "lineno", None), column=getattr(node, "col_offset", None)
        )

    def node(self, node: ast.AST, depth: int) -> _Fn:
        if depth > self.limits.max_depth:
            raise ExpressionLimitError(
                f"the expression is nested more than {self.limits.max_depth} levels deep.",
                source=self.source,
                line=getattr(node, "lineno", None),
                column=getattr(node, "col_offset", None),
            )
        method = getattr(self, f"n_{type(node).__name__}", None)
        if method is None:
            self.refuse(
                node, _NODE_REFUSALS.get(type(node).__name__, f"{type(node).__name__} is not allowed in expressions.")
            )
        fn: _Fn = method(node, depth + 1)
        return fn

    def located(self, node: ast.AST, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with its errors placed at ``node``."""
        source = self.source
        line, column = getattr(node, "lineno", None), getattr(node, "col_offset", None)

        def at(*args: Any) -> Any:
            try:
                return fn(*args)
            except ExpressionError as e:
                raise _runtime(e, source, line, column) from None

        return at

    # Leaves ---------------------------------------------------------------------------------------------------

    def n_Constant(self, node: ast.Constant, depth: int) -> _Fn:
        value = node.value
        if isinstance(value, bytes):
            self.refuse(node, "bytes literals are not supported; use a string.")
        if isinstance(value, complex):
            self.refuse(node, "complex numbers are not supported.")
        if value is Ellipsis:
            self.refuse(node, "... (Ellipsis) is not supported.")
        try:
            measure(value, self.limits)
        except ExpressionError as e:
            raise e.located(self.source, node) from None
        return lambda env, st: value

    def n_Name(self, node: ast.Name, depth: int) -> _Fn:
        name = node.id
        if name.startswith("__"):
            self.refuse(node, f"the name {name!r} is not accessible: names starting with '__' are refused.")
        if not any(name in scope for scope in self.local):
            self.names.add(name)
        source, line, column = self.source, node.lineno, node.col_offset

        def load(env: Env, st: _State) -> Any:
            try:
                return env[name]
            except KeyError:
                if name in BUILTINS:
                    raise SandboxError(
                        f"{name} is a built-in function: it can only be called, as {name}(...).",
                        source=source,
                        line=line,
                        column=column,
                    ) from None
                raise ExpressionRuntimeError(
                    f"name {name!r} is not defined.", source=source, line=line, column=column, python_type="NameError"
                ) from None

        return load

    # Operators ------------------------------------------------------------------------------------------------

    def n_BinOp(self, node: ast.BinOp, depth: int) -> _Fn:
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.refuse(node, f"the operator {type(node.op).__name__} is not allowed.")
        left, right = self.node(node.left, depth), self.node(node.right, depth)
        source, line, column = self.source, node.lineno, node.col_offset

        def binop(env: Env, st: _State) -> Any:
            a, b = left(env, st), right(env, st)
            try:
                result = op(a, b, st.limits)
                tr = type(result)
                if tr is int:
                    if result.bit_length() > st.limits.max_int_bits:
                        _int_too_big(result.bit_length(), st.limits)
                elif tr is not float and tr is not bool:
                    measure(result, st.limits)
                return result
            except Exception as e:  # an ExpressionError gets its location, others become one
                raise _runtime(e, source, line, column) from None

        return binop

    def n_UnaryOp(self, node: ast.UnaryOp, depth: int) -> _Fn:
        operand = self.node(node.operand, depth)
        if isinstance(node.op, ast.Not):
            return lambda env, st: not operand(env, st)
        ops: dict[type[ast.unaryop], Callable[[Any], Any]] = {
            ast.USub: operator.neg,
            ast.UAdd: operator.pos,
            ast.Invert: operator.invert,
        }
        op = ops[type(node.op)]
        source, line, column = self.source, node.lineno, node.col_offset

        def unary(env: Env, st: _State) -> Any:
            value = operand(env, st)
            if type(value) not in (int, float, bool):
                raise ExpressionRuntimeError(
                    f"bad operand type for unary {_UNARY_SYMBOL[type(node.op)]}: {_type_name(value)}",
                    source=source,
                    line=line,
                    column=column,
                    python_type="TypeError",
                )
            try:
                return op(value)
            except Exception as e:
                raise _runtime(e, source, line, column) from None

        return unary

    def n_BoolOp(self, node: ast.BoolOp, depth: int) -> _Fn:
        values = [self.node(v, depth) for v in node.values]
        if isinstance(node.op, ast.And):

            def all_of(env: Env, st: _State) -> Any:
                value: Any = True
                for v in values:
                    value = v(env, st)
                    if not value:
                        return value
                return value

            return all_of

        def any_of(env: Env, st: _State) -> Any:
            value: Any = False
            for v in values:
                value = v(env, st)
                if value:
                    return value
            return value

        return any_of

    def n_Compare(self, node: ast.Compare, depth: int) -> _Fn:
        first = self.node(node.left, depth)
        rest = [(_COMPARISONS[type(op)], self.node(c, depth)) for op, c in zip(node.ops, node.comparators, strict=True)]
        source, line, column = self.source, node.lineno, node.col_offset

        def compare(env: Env, st: _State) -> Any:
            a = first(env, st)
            for op, fn in rest:
                b = fn(env, st)
                try:
                    if not op(a, b):
                        return False
                except Exception as e:
                    raise _runtime(e, source, line, column) from None
                a = b
            return True

        return compare

    def n_IfExp(self, node: ast.IfExp, depth: int) -> _Fn:
        test, body, orelse = self.node(node.test, depth), self.node(node.body, depth), self.node(node.orelse, depth)
        return lambda env, st: body(env, st) if test(env, st) else orelse(env, st)

    # Containers -----------------------------------------------------------------------------------------------

    def _items(
        self, elements: Sequence[ast.expr], depth: int, *, display: bool = True
    ) -> Callable[[Env, _State], tuple[list[Any], int]]:
        """Builds the items of a display (or a call's positional arguments), with their weight.

        Each item is weighed as soon as it is built, against the room the items before it left, so many large
        items are refused at the first that does not fit rather than after all of them exist. A display's weight
        counts the list and each item as a list does; a call's arguments count only themselves, so one argument
        may be as large as any value.
        """
        parts: list[tuple[bool, _Fn]] = []
        for e in elements:
            if isinstance(e, ast.Starred):
                parts.append((True, self.node(e.value, depth)))
            else:
                parts.append((False, self.node(e, depth)))
        source = self.source

        def items(env: Env, st: _State) -> tuple[list[Any], int]:
            limits = st.limits
            out: list[Any] = []
            total = each = 1 if display else 0  # the list itself, and then each item
            for starred, fn in parts:
                value = fn(env, st)
                if starred:
                    spread = _iterable(value, source, "*")
                    total += _spread_weight(spread, limits, limits.max_weight - total)
                    out.extend(spread)
                else:
                    total += each + measure(value, limits, depth=1, budget=limits.max_weight - total - each)
                    out.append(value)
            return out, total

        return items

    def n_List(self, node: ast.List, depth: int) -> _Fn:
        items = self._items(node.elts, depth)
        return self.located(node, lambda env, st: items(env, st)[0])

    def n_Tuple(self, node: ast.Tuple, depth: int) -> _Fn:
        items = self._items(node.elts, depth)
        return self.located(node, lambda env, st: tuple(items(env, st)[0]))

    def n_Set(self, node: ast.Set, depth: int) -> _Fn:
        self.refuse(
            node,
            "sets are not supported (their order changes from run to run, which breaks replay); "
            "use a list, or a dict's keys.",
        )

    def n_SetComp(self, node: ast.SetComp, depth: int) -> _Fn:
        return self.refuse(
            node,
            "sets are not supported (their order changes from run to run, which breaks "
            "replay); use a list, or a dict's keys.",
        )

    def n_Dict(self, node: ast.Dict, depth: int) -> _Fn:
        parts = [
            (None if k is None else self.node(k, depth), self.node(v, depth))
            for k, v in zip(node.keys, node.values, strict=True)
        ]
        source, line, column = self.source, node.lineno, node.col_offset

        def make(env: Env, st: _State) -> Any:
            limits = st.limits
            out = _DictBuilder()
            total = 1  # weighed as it is built, as a list display is (a repeated key is counted each time)
            try:
                for k, v in parts:
                    if k is None:
                        value = v(env, st)
                        if type(value) is not dict:
                            raise ExpressionRuntimeError(
                                f"** needs a dict, not {_type_name(value)}.", python_type="TypeError"
                            )
                        total += measure(value, limits, budget=limits.max_weight - total + 1) - 1
                        out.merge(value)
                    else:
                        key = k(env, st)
                        total += 1 + measure(key, limits, depth=1, budget=limits.max_weight - total - 1)
                        item = v(env, st)
                        total += measure(item, limits, depth=1, budget=limits.max_weight - total)
                        out.put(key, item)
            except Exception as e:  # an ExpressionError gets its location, others become one
                raise _runtime(e, source, line, column) from None
            return out.out

        return self.located(node, make)

    def n_Subscript(self, node: ast.Subscript, depth: int) -> _Fn:
        value = self.node(node.value, depth)
        index = self.node(node.slice, depth)
        source, line, column = self.source, node.lineno, node.col_offset

        def subscript(env: Env, st: _State) -> Any:
            container, key = value(env, st), index(env, st)
            t = type(container)
            if t is not list and t is not tuple and t is not str and t is not dict:
                raise ExpressionRuntimeError(
                    f"{_type_name(container)} cannot be indexed.",
                    source=source,
                    line=line,
                    column=column,
                    python_type="TypeError",
                )
            try:
                return container[key]
            except KeyError as e:
                raise ExpressionRuntimeError(
                    f"no key {_short_repr(key)} (the keys are {_keys(container)}).",
                    source=source,
                    line=line,
                    column=column,
                    python_type="KeyError",
                ) from e
            except Exception as e:
                raise _runtime(e, source, line, column) from None

        return subscript

    def n_Slice(self, node: ast.Slice, depth: int) -> _Fn:
        parts = [None if p is None else self.node(p, depth) for p in (node.lower, node.upper, node.step)]
        source, line, column = self.source, node.lineno, node.col_offset

        def make(env: Env, st: _State) -> Any:
            bounds = [None if p is None else p(env, st) for p in parts]
            for b in bounds:
                if b is not None and type(b) is not int and type(b) is not bool:
                    raise ExpressionRuntimeError(
                        "slice indices must be integers or None.",
                        source=source,
                        line=line,
                        column=column,
                        python_type="TypeError",
                    )
            return slice(*bounds)

        return make

    def n_Attribute(self, node: ast.Attribute, depth: int) -> _Fn:
        attr = node.attr
        if attr.startswith("_"):
            self.refuse(node, f"the attribute {attr!r} is not accessible: attributes starting with '_' are refused.")
        if attr not in _ERROR_FIELDS:
            hint = (
                f"call it as a method: x.{attr}(...)"
                if attr in METHOD_NAMES
                else f"only exc has attributes ({', '.join(sorted(_ERROR_FIELDS))})"
            )
            self.refuse(node, f"the attribute {attr!r} cannot be read: {hint}.")
        value = self.node(node.value, depth)
        source, line, column = self.source, node.lineno, node.col_offset

        def get(env: Env, st: _State) -> Any:
            target = value(env, st)
            if type(target) is not ErrorInfo:
                raise SandboxError(
                    f"attributes can only be read from exc, not from {_type_name(target)}.",
                    source=source,
                    line=line,
                    column=column,
                )
            return getattr(target, attr)

        return get

    # Calls ----------------------------------------------------------------------------------------------------

    def n_Call(self, node: ast.Call, depth: int) -> _Fn:
        args = self._items(node.args, depth, display=False)
        keywords: list[tuple[str | None, _Fn]] = [(k.arg, self.node(k.value, depth)) for k in node.keywords]
        for k in node.keywords:
            if k.arg is not None and k.arg.startswith("_"):
                self.refuse(k, f"the keyword argument {k.arg!r} is refused.")
        source, line, column = self.source, node.lineno, node.col_offset

        def gather(env: Env, st: _State) -> tuple[list[Any], dict[str, Any]]:
            # The arguments are weighed as they are built, all together, like a list display's items.
            limits = st.limits
            positional, total = args(env, st)
            kwargs: dict[str, Any] = {}
            for name, fn in keywords:
                value = fn(env, st)
                if name is None:
                    if type(value) is not dict or not all(type(k) is str for k in value):
                        raise ExpressionRuntimeError(
                            "** in a call needs a dict with string keys.",
                            source=source,
                            line=line,
                            column=column,
                            python_type="TypeError",
                        )
                    total += measure(value, limits, budget=limits.max_weight - total + 1) - 1
                    kwargs.update(value)
                else:
                    total += measure(value, limits, depth=1, budget=limits.max_weight - total)
                    kwargs[name] = value
            return positional, kwargs

        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
            builtin = BUILTINS.get(name)
            if builtin is None:
                if name.startswith("__"):
                    self.refuse(func, f"the name {name!r} is not accessible: names starting with '__' are refused.")
                self.refuse(
                    func,
                    f"{name}() cannot be called: calls are limited to the built-in functions "
                    f"{', '.join(sorted(BUILTINS))} and the methods of strings, lists and dicts.",
                )
            self.calls.add(name)

            def call_builtin(env: Env, st: _State) -> Any:
                # A variable of the same name does not hide the built-in: values are data, never functions, so a
                # call can only mean the built-in, and an argument may be named max, len or range.
                try:
                    positional, kwargs = gather(env, st)
                    result = builtin(st.limits, *positional, **kwargs)
                    measure(result, st.limits)
                    return result
                except Exception as e:  # an ExpressionError gets its location, others become one
                    raise _runtime(e, source, line, column) from None

            return call_builtin
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method.startswith("_"):
                self.refuse(
                    func, f"the attribute {method!r} is not accessible: attributes starting with '_' are refused."
                )
            if method in ("format", "format_map"):
                self.refuse(
                    func,
                    f"the method {method}() is not allowed (format strings can read attributes); use an "
                    "f-string: f'{x}'.",
                )
            if method not in METHOD_NAMES:
                self.refuse(
                    func,
                    f"the method {method}() is not allowed; allowed are the methods "
                    f"{', '.join(sorted(METHOD_NAMES))} of strings, lists, tuples and dicts.",
                )
            receiver = self.node(func.value, depth)

            def call_method(env: Env, st: _State) -> Any:
                target = receiver(env, st)
                table = METHODS.get(type(target))
                impl = table.get(method) if table is not None else None
                if impl is None:
                    raise ExpressionRuntimeError(
                        f"{_type_name(target)} has no method {method}().",
                        source=source,
                        line=line,
                        column=column,
                        python_type="AttributeError",
                    )
                try:
                    positional, kwargs = gather(env, st)
                    result = impl(st.limits, target, *positional, **kwargs)
                    measure(result, st.limits)
                    return result
                except Exception as e:  # an ExpressionError gets its location, others become one
                    raise _runtime(e, source, line, column) from None

            return call_method
        return self.refuse(node, "only built-in functions and methods can be called, by name (len(x), text.upper()).")

    # Comprehensions -------------------------------------------------------------------------------------------

    def _targets(self, target: ast.expr) -> list[str]:
        if isinstance(target, ast.Name):
            if target.id.startswith("__"):
                self.refuse(target, f"the name {target.id!r} is refused.")
            return [target.id]
        if isinstance(target, ast.Tuple | ast.List):
            return [n for t in target.elts for n in self._targets(t)]
        return self.refuse(target, "a comprehension's variables must be names (for k, v in ...).")

    def _comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, depth: int, elements: Callable[[], list[_Fn]]
    ) -> Callable[[Env, _State, Callable[[list[Any]], None]], None]:
        """Compiles the loops; the result runs them and hands each iteration's values to ``emit`` as they come."""
        loops: list[tuple[ast.expr, _Fn, list[_Fn]]] = []
        scope: set[str] = set()
        pushed = False
        for generator in node.generators:
            if generator.is_async:
                self.refuse(node, "async comprehensions are not allowed.")
            iterable = self.node(generator.iter, depth)  # the first one reads the enclosing scope
            if not pushed:
                self.local.append(scope)
                pushed = True
            scope.update(self._targets(generator.target))
            conditions = [self.node(c, depth) for c in generator.ifs]
            loops.append((generator.target, iterable, conditions))
        try:
            parts = elements()
        finally:
            self.local.pop()
        cost = 1 + sum(1 for _ in ast.walk(node))  # the work one iteration may do, roughly
        source, line, column = self.source, node.lineno, node.col_offset
        binders = [_binder(target, source) for target, _, _ in loops]

        def run(env: Env, st: _State, emit: Callable[[list[Any]], None]) -> None:
            local = dict(env)
            weight = 0

            def level(i: int) -> None:
                nonlocal weight
                _, iterable, conditions = loops[i]
                bind = binders[i]
                for item in _iterable(iterable(local, st), source, "for"):
                    st.spend(cost)
                    bind(local, item)
                    if all(c(local, st) for c in conditions):
                        if i + 1 < len(loops):
                            level(i + 1)
                        else:
                            values = [p(local, st) for p in parts]
                            weight += sum(measure(v, st.limits) for v in values)
                            if weight > st.limits.max_weight:
                                _too_big(weight, st.limits)
                            emit(values)

            try:
                level(0)
            except Exception as e:  # an ExpressionError gets its location, others become one
                raise _runtime(e, source, line, column) from None

        return run

    def n_ListComp(self, node: ast.ListComp, depth: int) -> _Fn:
        run = self._comprehension(node, depth, lambda: [self.node(node.elt, depth)])

        def make(env: Env, st: _State) -> list[Any]:
            out: list[Any] = []
            run(env, st, lambda values: out.append(values[0]))
            return out

        return make

    n_GeneratorExp = n_ListComp  # evaluated eagerly, into a list

    def n_DictComp(self, node: ast.DictComp, depth: int) -> _Fn:
        run = self._comprehension(node, depth, lambda: [self.node(node.key, depth), self.node(node.value, depth)])

        def make(env: Env, st: _State) -> Any:
            out = _DictBuilder()  # filled as the loop goes, so its deadline and bounds hold for every key
            run(env, st, lambda values: out.put(values[0], values[1]))
            return out.out

        return make

    # f-strings ------------------------------------------------------------------------------------------------

    def n_JoinedStr(self, node: ast.JoinedStr, depth: int) -> _Fn:
        parts = [self.node(v, depth) for v in node.values]

        def join(env: Env, st: _State) -> Any:
            pieces: list[str] = []
            total = 0
            for p in parts:
                piece = p(env, st)
                total += len(piece)
                if total >= st.limits.max_weight:
                    _too_big(total, st.limits)
                pieces.append(piece)
            return "".join(pieces)

        return self.located(node, join)

    def n_FormattedValue(self, node: ast.FormattedValue, depth: int) -> _Fn:
        value = self.node(node.value, depth)
        spec = None if node.format_spec is None else self.node(node.format_spec, depth)
        conversion = node.conversion
        source, line, column = self.source, node.lineno, node.col_offset

        def formatted(env: Env, st: _State) -> str:
            v = value(env, st)
            try:
                if conversion == 114:  # !r
                    measure(v, st.limits)
                    v = repr(v)
                elif conversion == 97:  # !a
                    measure(v, st.limits)
                    v = ascii(v)
                elif conversion == 115:  # !s
                    v = to_text(v, st.limits)
                text = format_value(v, "" if spec is None else spec(env, st), st.limits)
            except Exception as e:  # an ExpressionError gets its location, others become one
                raise _runtime(e, source, line, column) from None
            measure(text, st.limits)
            return text

        return formatted


_NODE_REFUSALS = {
    "Lambda": "lambda is not allowed in expressions.",
    "NamedExpr": "assignment expressions (:=) are not allowed; use a set command.",
    "Await": "await is not allowed in expressions.",
    "Yield": "yield is not allowed in expressions.",
    "YieldFrom": "yield is not allowed in expressions.",
    "Starred": "* unpacking is only allowed in list and tuple displays and in calls.",
}


def _binder(target: ast.expr, source: str) -> Callable[[Env, Any], None]:
    if isinstance(target, ast.Name):
        name = target.id

        def bind_name(env: Env, value: Any) -> None:
            env[name] = value

        return bind_name
    assert isinstance(target, ast.Tuple | ast.List)
    parts = [_binder(t, source) for t in target.elts]
    line, column = target.lineno, target.col_offset

    def bind_tuple(env: Env, value: Any) -> None:
        if type(value) not in (list, tuple, str) or len(value) != len(parts):
            raise ExpressionRuntimeError(
                f"cannot unpack {_type_name(value)} into {len(parts)} variables.",
                source=source,
                line=line,
                column=column,
                python_type="ValueError",
            )
        for bind, item in zip(parts, value, strict=True):
            bind(env, item)

    return bind_tuple


def _iterable(value: Any, source: str, what: str) -> Any:
    t = type(value)
    if t is list or t is tuple or t is str or t is dict:
        return value
    raise ExpressionRuntimeError(f"{what}: {_type_name(value)} is not iterable.", python_type="TypeError")


def _runtime(error: Exception, source: str, line: int | None, column: int | None) -> ExpressionError:
    """The error to raise for ``error`` caught at this place.

    An ExpressionError is given this location if it has none yet (the innermost place wins); anything else becomes
    the ExpressionError that says what went wrong here.
    """
    if isinstance(error, ExpressionError):
        if error.line is None:
            error.source, error.line, error.column = source, line, column
        return error
    if isinstance(error, RecursionError):
        return ExpressionLimitError("a value is nested too deeply.", source=source, line=line, column=column)
    if isinstance(error, MemoryError):
        return ExpressionLimitError("out of memory.", source=source, line=line, column=column)
    message = str(error) or type(error).__name__
    return ExpressionRuntimeError(
        _shorten(message, 300), source=source, line=line, column=column, python_type=type(error).__name__
    )


def _type_name(value: object) -> str:
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


def _short_repr(value: object) -> str:
    text = repr(value) if type(value) in (str, int, float, bool, type(None)) else _type_name(value)
    return _shorten(text, 60)


def _keys(container: dict[Any, Any]) -> str:
    keys = [_short_repr(k) for k in list(container)[:10]]
    return (", ".join(keys) + (", …" if len(container) > 10 else "")) if keys else "none"


# --------------------------------------------------------------------------------------------------------------
# Operators, each checked before it runs


def _is_int(x: object) -> bool:
    return type(x) is int or type(x) is bool


def _add(a: Any, b: Any, limits: Limits) -> Any:
    if type(a) is str and type(b) is str and len(a) + len(b) >= limits.max_weight:
        _too_big(len(a) + len(b), limits)
    return a + b


def _mul(a: Any, b: Any, limits: Limits) -> Any:
    if _is_int(a) and _is_int(b):
        if a.bit_length() + b.bit_length() > limits.max_int_bits + 1:
            _int_too_big(a.bit_length() + b.bit_length(), limits)
        return a * b
    if _is_int(b) and type(a) in (str, list, tuple):
        a, b = b, a
    if _is_int(a) and type(b) in (str, list, tuple):
        if a > 0 and measure(b, limits) * a > limits.max_weight:
            _too_big(measure(b, limits) * a, limits)
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


_BINOPS: dict[type[ast.operator], Callable[[Any, Any, Limits], Any]] = {
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

_UNARY_SYMBOL = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}

_COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
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
            f"'in' needs a list, tuple, string or dict, not {_type_name(container)}.", python_type="TypeError"
        )
    return item in container


# --------------------------------------------------------------------------------------------------------------
# Built-in functions and methods: pure, and checked before they build anything large

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
        raise SandboxError(f"the format specification {_shorten(spec, 40)!r} is not supported.")
    for part in ("width", "precision"):
        digits = match.group(part)
        if digits is not None and (len(digits) > 6 or int(digits) > limits.max_format_width):
            raise ExpressionLimitError(f"a format {part} over {limits.max_format_width:,} is refused.")
    if type(value) not in (str, int, float, bool):
        raise ExpressionRuntimeError(f"{_type_name(value)} cannot be formatted with {spec!r}.", python_type="TypeError")
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
                f"int() takes a number or a string, not {_type_name(value)}.", python_type="TypeError"
            )
        return int(value)
    if type(value) is not str or type(base) is not int:
        raise ExpressionRuntimeError("int(text, base) takes a string and an integer base.", python_type="TypeError")
    return int(value, base)


def _n_float(limits: Limits, value: Any = 0.0) -> float:
    if type(value) not in (str, int, float, bool):
        raise ExpressionRuntimeError(
            f"float() takes a number or a string, not {_type_name(value)}.", python_type="TypeError"
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
    return len(_iterable(value, "", "len()"))


def _n_list(limits: Limits, value: Any = ()) -> list[Any]:
    return list(_iterable(value, "", "list()"))


def _n_tuple(limits: Limits, value: Any = ()) -> tuple[Any, ...]:
    return tuple(_iterable(value, "", "tuple()"))


def _n_dict(limits: Limits, value: Any = None, **kwargs: Any) -> dict[Any, Any]:
    if value is None:
        return dict(**kwargs)
    if type(value) is dict:
        return dict(value, **kwargs)
    pairs = _iterable(value, "", "dict()")
    out = _DictBuilder()
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
    items = list(_iterable(values, "", "sum()"))
    for v in (*items, start):
        if type(v) not in (int, float, bool):  # adding lists or strings one by one takes quadratic time
            raise SandboxError(
                f"sum() adds numbers only, not {_type_name(v)}; join strings with ''.join(...) and "
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
        return fn(_iterable(args[0], "", f"{fn.__name__}()"), **kwargs)
    return fn(*args, **kwargs)


def _n_sorted(limits: Limits, values: Any, *, reverse: Any = False) -> list[Any]:
    return sorted(_iterable(values, "", "sorted()"), reverse=bool(reverse))


def _n_reversed(limits: Limits, values: Any) -> list[Any]:
    return list(reversed(_iterable(values, "", "reversed()")))


def _n_enumerate(limits: Limits, values: Any, start: Any = 0) -> list[tuple[int, Any]]:
    if not _is_int(start):
        raise ExpressionRuntimeError("enumerate() starts from an integer.", python_type="TypeError")
    return list(enumerate(_iterable(values, "", "enumerate()"), start))


def _n_zip(limits: Limits, *values: Any) -> list[tuple[Any, ...]]:
    return list(zip(*(_iterable(v, "", "zip()") for v in values), strict=False))


def _n_any(limits: Limits, values: Any) -> bool:
    return any(_iterable(values, "", "any()"))


def _n_all(limits: Limits, values: Any) -> bool:
    return all(_iterable(values, "", "all()"))


def _n_abs(limits: Limits, value: Any) -> Any:
    if type(value) not in (int, float, bool):
        raise ExpressionRuntimeError(f"abs() takes a number, not {_type_name(value)}.", python_type="TypeError")
    return abs(value)


def _n_round(limits: Limits, value: Any, digits: Any = None) -> Any:
    if type(value) not in (int, float, bool):
        raise ExpressionRuntimeError(f"round() takes a number, not {_type_name(value)}.", python_type="TypeError")
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
        _too_big(len(s) + occurrences * len(new), limits)
    return s.replace(old, new, count)


def _m_join(limits: Limits, s: str, values: Any) -> str:
    items = list(_iterable(values, "", "join()"))
    total = len(s) * max(0, len(items) - 1)
    for item in items:
        if type(item) is not str:
            raise ExpressionRuntimeError(
                f"join() joins strings, not {_type_name(item)}; convert with str().", python_type="TypeError"
            )
        total += len(item)
    if total >= limits.max_weight:
        _too_big(total, limits)
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
