"""The expression sandbox: the ``"{ expr }"`` language of agent files (docs/functions.md, "Dynamic strings").

An expression is one Python expression, parsed with `ast` and compiled by this package into a tree of closures that
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
items plus a unit per 32 bits of an integer, 2 a float, ``exc`` its fields, shared parts counted each time they
appear, so that it bounds what showing, logging or returning the value takes: `values.BYTES_PER_WEIGHT`) and depth,
integer sizes, f-string widths, the work of comprehensions, sorts and modular powers (steps, charged before they
run) and, as a backstop checked around every operation, the wall-clock time of one evaluation. Sizes are checked as
a value is built (each item of a display, each argument of a call, each comprehension value, what a built-in will
make from its arguments), and a dict holds at most `SAME_HASH_LIMIT` keys of one hash.

Every error is an `ExpressionError`: `ExpressionSyntaxError`, `SandboxError` (refused; `ExpressionLimitError` when a
bound was hit) or `ExpressionRuntimeError` (the expression failed the ordinary way: a missing key, a division by
zero; ``python_type`` names the Python exception). They are defined with the other errors of running an agent, in
`agl_notebook.functions.errors`.

This module compiles (with a cache) and evaluates; the work is done in ``values.py`` (what a value may be, and its
weight), ``operations.py`` (the operators, built-in functions and methods) and ``compiler.py`` (the syntax tree
turned into closures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .compiler import Expression, compile_uncached
from .operations import BUILTINS, METHOD_NAMES, METHODS, format_value, to_text
from .values import DEFAULT_LIMITS, SAME_HASH_LIMIT, Limits, measure

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
    compiled = compile_uncached(source, limits)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = compiled
    return compiled


def evaluate(source: str, variables: Mapping[str, Any] | None = None, *, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Compile (cached) and evaluate ``source`` with ``variables`` in scope."""
    return compile_expression(source, limits=limits).evaluate(variables or {})


__all__ = [
    "BUILTINS",
    "DEFAULT_LIMITS",
    "METHODS",
    "METHOD_NAMES",
    "SAME_HASH_LIMIT",
    "Expression",
    "Limits",
    "compile_expression",
    "evaluate",
    "format_value",
    "measure",
    "to_text",
]
