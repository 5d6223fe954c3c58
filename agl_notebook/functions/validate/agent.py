"""The whole agent file: its top-level fields, its profiles and functions, then the checks across functions.

`check_agent` lists every problem; `build_agent` returns the agent, or raises `AgentInvalidError` with every problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ExpressionError
from ..expressions import DEFAULT_LIMITS, Limits, to_text
from ..spec import AgentSpec, Block, Function, Template
from .calls import Facts, check_calls
from .commands import CommandChecks, Context
from .flow import check_handler_reads
from .reading import (
    AgentInvalidError,
    Problem,
    key_path,
    kind_of,
    nesting_problem,
    pairs_of,
    plain_json,
    read_source,
    shorten_repr,
)

_FUNCTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def check_agent(
    source: str | Path | Mapping[str, Any],
    *,
    profiles: Mapping[str, Any] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> list[Problem]:
    """Every problem of an agent file (an empty list when it is valid)."""
    try:
        data, _ = read_source(source)
    except AgentInvalidError as e:
        return list(e.problems)
    return AgentChecks(limits).run(data, profiles)[1]


def build_agent(
    source: str | Path | Mapping[str, Any],
    *,
    profiles: Mapping[str, Any] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> AgentSpec:
    """The validated agent.

    Args:
        source: A path to the agent file, its JSON text, or its content as a dict.
        profiles: Profiles to add or settings to override, by profile name (``{"orders": {"baseUrl": ...}}``).
        limits: The expression sandbox's bounds.

    Raises:
        AgentInvalidError: The agent has problems; every one is listed.
    """
    data, name = read_source(source)
    spec, problems = AgentChecks(limits).run(data, profiles)
    if problems or spec is None:
        raise AgentInvalidError(problems, source=name)
    return spec


class AgentChecks(CommandChecks):
    """The checks of a whole agent file, run once per file."""

    def run(self, data: Any, overrides: Mapping[str, Any] | None) -> tuple[AgentSpec | None, list[Problem]]:
        """The agent, or None and every problem found."""
        if not isinstance(data, Mapping):
            self.problem("", f"an agent file is a JSON object with 'functions' (and 'profiles'), not {kind_of(data)}.")
            return None, self.problems
        too_deep = nesting_problem(data)
        if too_deep is not None:  # the checks below recurse; they never meet a file deeper than this
            self.problems.append(too_deep)
            return None, self.problems
        top = self.fields(
            data, "", ("$schema", "version", "name", "description", "model", "profiles", "functions"), "an agent file"
        )
        if "version" in top and top["version"] != 1:
            self.problem(
                "version", f"this version of agl_notebook reads agent files of version 1, not {top['version']!r}."
            )
        name = top.get("name", "agent")
        if not isinstance(name, str) or not name.strip():
            self.problem("name", "the agent's name must be a non-empty string.")
            name = "agent"
        for key in ("description", "$schema"):
            if key in top and not isinstance(top[key], str):
                self.problem(key, f"must be a string, not {kind_of(top[key])}.")
        model = top.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            self.problem("model", "the default model must be a model id such as 'claude-sonnet-5-5'.")
            model = None
        profiles, raw_profiles = self.profiles(top.get("profiles"), overrides)
        raw_functions = top.get("functions")
        functions: dict[str, Function] = {}
        if raw_functions is None:
            self.problem("functions", "an agent needs 'functions': an object of function name → function.")
        elif not isinstance(raw_functions, Mapping):
            self.problem("functions", f"must be an object of function name → function, not {kind_of(raw_functions)}.")
        else:
            if not raw_functions:
                self.problem("functions", "the agent has no functions.")
            self.declared = {k for k, _ in pairs_of(raw_functions)}
            for fname, value in self.unique_pairs(raw_functions, "functions", "function"):
                fn = self.function(fname, value)
                if fn is not None:
                    functions[fname] = fn
        calls = check_calls(functions, self.facts, self.declared, self.problem)
        if self.problems:
            return None, self.problems
        raw = dict(raw_functions) if isinstance(raw_functions, Mapping) else {}
        return AgentSpec(
            name=name,
            functions=functions,
            profiles=profiles,
            model=model,
            raw_functions={k: plain_json(v) for k, v in raw.items()},
            raw_profiles=raw_profiles,
            calls=calls,
        ), []

    def function(self, name: str, raw: Any) -> Function | None:
        """One function, or None if it cannot be built."""
        path = key_path("functions", name)
        if not _FUNCTION_NAME.fullmatch(name):
            self.problem(
                path,
                "a function name starts with a letter and has only letters, digits and '_' (at most "
                "64 characters), so a model can call it as a tool.",
            )
        if not isinstance(raw, Mapping):
            self.problem(
                path, f"a function is an object with commands (and description, args, onError), not {kind_of(raw)}."
            )
            return None
        f = self.fields(raw, path, ("description", "args", "commands", "onError"), "a function")
        description: Template | None = None
        if "description" in f:
            description = self.description(f["description"], key_path(path, "description"))
        tool = "description" in f
        args = self.args(f.get("args"), key_path(path, "args"), tool=tool, what="argument")
        self.facts[name] = Facts([], [], [], [])
        ctx = Context(name, tool, handler=False)
        if "commands" not in f:
            self.problem(key_path(path, "commands"), "a function needs commands: the block it runs when called.")
            commands: Block = ()
        else:
            commands = self.block(f["commands"], key_path(path, "commands"), ctx)
        on_error = None
        if "onError" in f:
            on_error = self.block(f["onError"], key_path(path, "onError"), Context(name, tool, handler=True))
            check_handler_reads(on_error, {a.name for a in args}, name, self.problem)
        return Function(name, path, args, commands, on_error, description)

    def description(self, raw: Any, path: str) -> Template | None:
        """A function's description (a model reads it): non-empty, and computed without variables."""
        if not isinstance(raw, str) or not raw.strip():
            self.problem(
                path,
                "a description is a non-empty string: it tells a model what the function does and when to call it.",
            )
            return None
        template = self.template(raw, path)
        for where, names in template.reads:
            if names:
                self.problem(
                    where,
                    f"a description is computed before any call, so it cannot read variables "
                    f"({', '.join(sorted(names))}).",
                )
                return template
        if template.constant or any(p.path == path for p in self.problems):
            return template
        # It reads nothing, so its value is known now: a description that fails or is empty would otherwise break
        # every llm command that offers the tools, far from here.
        try:
            text = to_text(template.render({}), self.limits)
        except ExpressionError as e:
            self.problem(path, f"the description cannot be evaluated: {e}")
            return template
        if not text.strip():
            self.problem(
                path,
                "a description is a non-empty string: it tells a model what the function does and "
                f"when to call it; this one evaluates to {shorten_repr(text)}.",
            )
        return template
