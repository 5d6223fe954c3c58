"""What every check of an agent file uses: the problems found, fields, names, declared arguments and templates.

A template is a value as written in the file, with each dynamic string ``"{ expr }"`` in it compiled by the
expression sandbox; the variables each expression reads are kept for the checks of variable flow.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..argtypes import TypeSpec, TypeSyntaxError, parse_type
from ..errors import ExpressionError
from ..expressions import Limits, compile_expression
from ..spec import Arg, Template
from .calls import Facts
from .reading import Problem, expression_of, is_constant, key_path, kind_of, pairs_of, plain_json, suggest

RESERVED_WHY = {"result": "result holds the previous command's value", "exc": "exc holds the error in an error handler"}
RESERVED = frozenset(RESERVED_WHY)
"""Names no argument or variable may take: ``result`` holds the previous command's value, ``exc`` the error."""

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Checker:
    """The problems of one agent file, found so far, and the checks every part of the file uses.

    The checks of profiles (`ProfileChecks`), commands (`CommandChecks`) and the whole file (`AgentChecks`) build on
    it, each adding to ``problems`` in file order.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        """The expression sandbox's bounds, for compiling templates."""
        self.problems: list[Problem] = []
        """Every problem found so far, in file order."""
        self.facts: dict[str, Facts] = {}
        """What each function does, for the checks across functions."""
        self.profile_names: set[str] = set()
        """Every profile name, also of profiles too broken to build."""
        self.declared: set[str] = set()
        """Every function name, also of functions too broken to build."""

    def problem(self, path: str, message: str) -> None:
        """Report a problem at ``path``."""
        self.problems.append(Problem(path, message))

    def fields(self, obj: Mapping[str, Any], path: str, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
        """The object's fields, with unknown and repeated ones reported."""
        seen: dict[str, Any] = {}
        for key, value in pairs_of(obj):
            if key in seen:
                self.problem(
                    key_path(path, key), f"{key!r} is given twice in {what}; only one can count, so remove one."
                )
                continue
            if key not in allowed:
                self.problem(
                    key_path(path, key),
                    f"unknown field {key!r} in {what}; the fields are {', '.join(allowed)}.{suggest(key, allowed)}",
                )
                continue
            seen[key] = value
        return seen

    def unique_pairs(self, obj: Mapping[str, Any], path: str, what: str) -> list[tuple[str, Any]]:
        """The object's pairs, with a repeated key reported (the ``what`` it names is defined twice)."""
        out: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for key, value in pairs_of(obj):
            if key in seen:
                self.problem(
                    key_path(path, key),
                    f"the {what} {key!r} is defined twice; the second would silently "
                    "replace the first, so rename or remove one.",
                )
                continue
            seen.add(key)
            out.append((key, value))
        return out

    def args(self, raw: Any, path: str, *, tool: bool, what: str) -> tuple[Arg, ...]:
        """Declared arguments (of a function, or an ``llm`` output's fields, ``what`` says which)."""
        if raw is None:
            return ()
        if not isinstance(raw, Mapping):
            self.problem(
                path, f"must be an object of {what} name → {{type, description, required}}, not {kind_of(raw)}."
            )
            return ()
        out: list[Arg] = []
        for name, spec in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            self.variable_name(name, where, what)
            if not isinstance(spec, Mapping):
                self.problem(
                    where, f"an {what} is an object with type and description (and required), not {kind_of(spec)}."
                )
                continue
            f = self.fields(spec, where, ("type", "description", "required"), f"an {what}")
            owner = f"a tool function's {what}" if what == "argument" else f"an {what}"
            arg_type: TypeSpec | None = None
            if "type" in f:
                arg_type = self.arg_type(f["type"], key_path(where, "type"))
            elif tool:
                self.problem(
                    where,
                    f"{owner} needs a type (str, int, float, bool, list[str], dict[str, int], "
                    "str | None, ...): the model reads it.",
                )
            description = f.get("description")
            if description is not None and (not isinstance(description, str) or not description.strip()):
                self.problem(key_path(where, "description"), "a description is a non-empty string.")
                description = None
            elif description is None and tool:
                self.problem(
                    where, f"{owner} needs a description: the model reads it, so say what to pass and every constraint."
                )
            required = f.get("required", True)
            if not isinstance(required, bool):
                self.problem(key_path(where, "required"), "required is true or false.")
                required = True
            out.append(Arg(name, arg_type, description, required))
        return tuple(out)

    def arg_type(self, raw: Any, path: str) -> TypeSpec | None:
        """An argument's type (``str``, ``list[int]``, ``str | None`` ...), or None if it cannot be read."""
        try:
            return parse_type(raw)
        except TypeSyntaxError as e:
            self.problem(path, str(e))
            return None

    def variable_name(self, name: str, path: str, what: str) -> bool:
        """Whether ``name`` may name a variable (an argument, a ``set`` target, a loop's); a problem if not."""
        if not _VARIABLE.fullmatch(name):
            self.problem(
                path,
                f"{name!r} is not a valid {what} name: use letters, digits and '_', not starting with "
                "a digit (the rules for Python variable names).",
            )
            return False
        if keyword.iskeyword(name):
            self.problem(
                path, f"{name!r} is a Python keyword, so expressions could not read it; choose another {what} name."
            )
            return False
        if name in RESERVED:
            self.problem(
                path,
                f"{name!r} is reserved ({RESERVED_WHY[name]}); choose another {what} name.",
            )
            return False
        if name.startswith("__"):
            self.problem(path, f"{what} names may not start with '__'.")
            return False
        return True

    def template(self, raw: Any, path: str) -> Template:
        """A value as written, with each ``"{ expr }"`` string in it compiled."""
        reads: list[tuple[str, frozenset[str]]] = []
        render = self.compile_value(raw, path, reads)
        return Template(plain_json(raw), render, tuple(reads))

    def compile_value(self, raw: Any, path: str, reads: list[tuple[str, frozenset[str]]]) -> Callable[[Any], Any]:
        """What renders ``raw``; each expression's path and the variables it reads are added to ``reads``."""
        if isinstance(raw, str):
            source = expression_of(raw)
            if source is None:
                return lambda env: raw
            if not source.strip():
                self.problem(
                    path,
                    f'the expression between the braces is empty; to write the text itself, write "{{ {raw!r} }}".',
                )
                return lambda env: None
            try:
                expression = compile_expression(source, limits=self.limits)
            except ExpressionError as e:
                self.problem(path, f"the expression cannot be used: {e}")
                return lambda env: None
            reads.append((path, expression.names))
            return expression.evaluate
        if isinstance(raw, list):
            items = [self.compile_value(v, f"{path}[{i}]", reads) for i, v in enumerate(raw)]
            if all(is_constant(v) for v in raw):
                return lambda env: raw
            return lambda env: [item(env) for item in items]
        if isinstance(raw, Mapping):
            parts: list[tuple[str, Callable[[Any], Any]]] = []
            for key, value in self.unique_pairs(raw, path, "key"):
                parts.append((key, self.compile_value(value, key_path(path, key), reads)))
            if all(is_constant(v) for _, v in pairs_of(raw)):
                constant = dict(pairs_of(raw))
                return lambda env: constant
            return lambda env: {key: part(env) for key, part in parts}
        if raw is None or isinstance(raw, bool | int | float):
            return lambda env: raw
        self.problem(path, f"{kind_of(raw)} is not a JSON value.")
        return lambda env: None
