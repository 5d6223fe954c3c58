"""The compiler: an expression's syntax tree, checked node by node, turned into the closures that evaluate it.

`Expression` is what it makes. `_Compiler` has one method per kind of syntax node the sandbox allows (``n_Name``,
``n_BinOp`` ...); a node without one is refused, with the reason in `_NODE_REFUSALS` where there is one. Each
method checks its node (names, attributes and calls against the allow-lists) and returns a closure that evaluates
it, weighing every value it builds against `Limits` as it goes and placing any error at the node's line and column.
It is one module because it is one idea: the allow-list is the set of methods of one class.
"""

from __future__ import annotations

import ast
import operator
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..errors import (
    ErrorInfo,
    ExpressionError,
    ExpressionLimitError,
    ExpressionRuntimeError,
    ExpressionSyntaxError,
    SandboxError,
    shorten,
)
from .operations import (
    BINARY_OPERATORS,
    BUILTIN_COSTS,
    BUILTINS,
    COMPARISONS,
    METHOD_NAMES,
    METHODS,
    UNARY_SYMBOLS,
    bounded_text,
    format_value,
    to_text,
)
from .values import (
    DictBuilder,
    Limits,
    checked_iterable,
    int_too_big,
    measure,
    short_repr,
    spread_weight,
    too_big,
    type_name,
)

_ERROR_FIELDS = frozenset({"type", "message", "status", "body", "command"})


class _State:
    """The bookkeeping of one evaluation."""

    __slots__ = ("deadline", "limits", "steps")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.steps = 0
        self.deadline = time.monotonic() + limits.timeout

    def spend(self, steps: int) -> None:
        """Charge ``steps`` of work (before doing it), and check the deadline."""
        self.steps += steps
        if self.steps > self.limits.max_steps:
            raise ExpressionLimitError(
                f"the expression would do more than {self.limits.max_steps:,} steps of work "
                "(comprehensions over large or nested lists, or sorting or modular powers of large values)."
            )
        self.tick()

    def tick(self) -> None:
        """Check the deadline.

        It is checked before every operator, comparison and call, so no run of them outlasts it by more than one
        operation (and one operation's cost is bounded by its operands).
        """
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


def compile_uncached(source: str, limits: Limits) -> Expression:
    """Parse ``source``, check it and compile it (`agl_notebook.functions.expressions.compile_expression` caches it).

    Raises:
        ExpressionSyntaxError: It is not a Python expression.
        SandboxError: It uses something the sandbox never allows.
    """
    return _Compiler(source, limits).compile()


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
        op = BINARY_OPERATORS.get(type(node.op))
        if op is None:
            self.refuse(node, f"the operator {type(node.op).__name__} is not allowed.")
        left, right = self.node(node.left, depth), self.node(node.right, depth)
        source, line, column = self.source, node.lineno, node.col_offset

        def binop(env: Env, st: _State) -> Any:
            a, b = left(env, st), right(env, st)
            try:
                st.tick()
                result = op(a, b, st.limits)
                tr = type(result)
                if tr is int:
                    if result.bit_length() > st.limits.max_int_bits:
                        int_too_big(result.bit_length(), st.limits)
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
                    f"bad operand type for unary {UNARY_SYMBOLS[type(node.op)]}: {type_name(value)}",
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
        rest = [(COMPARISONS[type(op)], self.node(c, depth)) for op, c in zip(node.ops, node.comparators, strict=True)]
        source, line, column = self.source, node.lineno, node.col_offset

        def compare(env: Env, st: _State) -> Any:
            a = first(env, st)
            for op, fn in rest:
                b = fn(env, st)
                try:
                    st.tick()  # comparing two large values is linear in their weight, one C call each
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
                    spread = checked_iterable(value, source, "*")
                    total += spread_weight(spread, limits, limits.max_weight - total)
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
            out = DictBuilder()
            total = 1  # weighed as it is built, as a list display is (a repeated key is counted each time)
            try:
                for k, v in parts:
                    if k is None:
                        value = v(env, st)
                        if type(value) is not dict:
                            raise ExpressionRuntimeError(
                                f"** needs a dict, not {type_name(value)}.", python_type="TypeError"
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
                    f"{type_name(container)} cannot be indexed.",
                    source=source,
                    line=line,
                    column=column,
                    python_type="TypeError",
                )
            try:
                return container[key]
            except KeyError as e:
                raise ExpressionRuntimeError(
                    f"no key {short_repr(key)} (the keys are {_keys(container)}).",
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
                    f"attributes can only be read from exc, not from {type_name(target)}.",
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
            cost = BUILTIN_COSTS.get(name)

            def call_builtin(env: Env, st: _State) -> Any:
                # A variable of the same name does not hide the built-in: values are data, never functions, so a
                # call can only mean the built-in, and an argument may be named max, len or range.
                try:
                    positional, kwargs = gather(env, st)
                    if cost is not None:
                        st.spend(cost(*positional, **kwargs))  # refused before it runs, not after
                    else:
                        st.tick()
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
                        f"{type_name(target)} has no method {method}().",
                        source=source,
                        line=line,
                        column=column,
                        python_type="AttributeError",
                    )
                try:
                    positional, kwargs = gather(env, st)
                    st.tick()
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
                for item in checked_iterable(iterable(local, st), source, "for"):
                    st.spend(cost)
                    bind(local, item)
                    if all(c(local, st) for c in conditions):
                        if i + 1 < len(loops):
                            level(i + 1)
                        else:
                            values = [p(local, st) for p in parts]
                            weight += sum(measure(v, st.limits) for v in values)
                            if weight > st.limits.max_weight:
                                too_big(weight, st.limits)
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
            out = DictBuilder()  # filled as the loop goes, so its deadline and bounds hold for every key
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
                    too_big(total, st.limits)
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
                    v = bounded_text(v, repr, st.limits)
                elif conversion == 97:  # !a
                    v = bounded_text(v, ascii, st.limits)
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
                f"cannot unpack {type_name(value)} into {len(parts)} variables.",
                source=source,
                line=line,
                column=column,
                python_type="ValueError",
            )
        for bind, item in zip(parts, value, strict=True):
            bind(env, item)

    return bind_tuple


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
        shorten(message, 300), source=source, line=line, column=column, python_type=type(error).__name__
    )


def _keys(container: dict[Any, Any]) -> str:
    keys = [short_repr(k) for k in list(container)[:10]]
    return (", ".join(keys) + (", …" if len(container) > 10 else "")) if keys else "none"
