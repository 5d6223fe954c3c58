"""Loading and validating agent files (docs/functions.md, "The agent file").

Every problem is reported at once, each with its JSON path and a sentence a person can act on, before anything runs.

An agent file is JSON (``schema.json`` beside this module is its JSON Schema, for editors). It is parsed with an
``object_pairs_hook`` that keeps every key of every object in order, duplicates included: in a command block a
repeated key is a second command, kept in its place; anywhere else a repeated key is reported as a problem, never
dropped silently.

Paths name commands by position whatever the block's spelling, so ``functions.lookupOrder.commands[1].api`` is the
second command of ``lookupOrder``, an ``api`` command, in ``{"log": ..., "api": ...}`` and in
``[{"log": ...}, {"api": ...}]`` alike.
"""

from __future__ import annotations

import difflib
import json
import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import InputError
from ..payloads import JsonValue
from .argtypes import TypeSpec, TypeSyntaxError, parse_type
from .expressions import DEFAULT_LIMITS, ExpressionError, Limits, compile_expression, to_text
from .spec import (
    AgentSpec,
    ApiArgs,
    Arg,
    AskArgs,
    Block,
    Command,
    EnvValue,
    FuncArgs,
    Function,
    IfArgs,
    LlmArgs,
    LoopArgs,
    Profile,
    SetArgs,
    Template,
    ValueArgs,
)

COMMANDS = ("set", "log", "return", "func", "ask", "api", "llm", "if", "loop", "end")
"""Every command, in the order the documentation lists them."""
RESERVED_WHY = {"result": "result holds the previous command's value", "exc": "exc holds the error in an error handler"}
RESERVED = frozenset(RESERVED_WHY)
"""Names no argument or variable may take: ``result`` holds the previous command's value, ``exc`` the error."""
INPUTS = ("text", "multiline", "number", "integer", "choice", "confirm")
"""The kinds of ``ask`` input."""
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
"""The HTTP methods of ``api``."""
MAX_LOOP = 100_000
"""The largest bound a ``loop`` may declare."""

_FUNCTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROFILE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "auth",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "credential",
        "credentials",
        "signature",
        "apikey",
        "sessionid",
    }
)
_SECRET_JOINED = ("apikey", "accesstoken", "accesskey", "privatekey", "clientsecret")
_SECRET_SHAPE = re.compile(r"^(Bearer|Basic|Token)\s+\S+|^sk-|^ghp_|^xox[abp]-|^AKIA[0-9A-Z]{12}", re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an agent file."""

    path: str
    """Where: a JSON path such as ``functions.lookupOrder.commands[1].api``."""
    message: str
    """What is wrong and what to do about it."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class AgentInvalidError(InputError):
    """An agent file has problems; ``problems`` lists every one, in file order."""

    def __init__(self, problems: list[Problem], *, source: str = "the agent") -> None:
        self.problems = tuple(problems)
        """Every problem found."""
        listed = "\n".join(f"- {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"{source} has {count} problem{'s' if count != 1 else ''}; nothing was run:\n{listed}")


class JsonObject(dict[str, Any]):
    """A JSON object as read from a file: a dict (the last value of each key) that keeps every pair in order."""

    pairs: list[tuple[str, Any]]


def _object(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = JsonObject(pairs)
    obj.pairs = pairs
    return obj


def pairs_of(value: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every key and value of an object in order, duplicates included when it was read from a file."""
    found = getattr(value, "pairs", None)
    return list(found) if found is not None else list(value.items())


def parse_json(text: str, *, source: str = "the agent file") -> Any:
    """Parse JSON text keeping duplicate keys (`JsonObject`).

    Raises:
        AgentInvalidError: It is not JSON; the problem gives the line and column.
    """
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise AgentInvalidError(
            [Problem("", f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.")], source=source
        ) from None
    except RecursionError:
        raise AgentInvalidError([Problem("", "not readable: the JSON is nested too deeply.")], source=source) from None


def read_source(source: object) -> tuple[Any, str]:
    """The agent's JSON and a name for messages, from a path, JSON text or a dict."""
    if not isinstance(source, str | Path):
        return source, "the agent"  # a dict, or something else the validator will name
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return parse_json(source, source="the agent text"), "the agent text"
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"Cannot read the agent file {path}: {e}.") from None
    return parse_json(text, source=str(path)), str(path)


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
    return _Validator(limits).run(data, profiles)[1]


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
    spec, problems = _Validator(limits).run(data, profiles)
    if problems or spec is None:
        raise AgentInvalidError(problems, source=name)
    return spec


# --------------------------------------------------------------------------------------------------------------
# Paths


def key_path(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` for a key that is not a plain name."""
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _kind(value: object) -> str:
    return {
        type(None): "null",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
    }.get(type(value), "an object" if isinstance(value, Mapping) else type(value).__name__)


def _suggest(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _shorten_repr(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:59] + "…"


def _dynamic(value: str) -> str | None:
    """The expression of a dynamic string ``"{ expr }"``, else None."""
    if len(value) >= 2 and value[0] == "{" and value[-1] == "}":
        return value[1:-1]
    return None


@dataclass
class _Context:
    function: str
    tool: bool
    handler: bool  # inside any error handler


@dataclass
class _Facts:
    """What a function does, for the checks across functions."""

    calls: list[tuple[str, str, bool]]  # (path, target, in a handler)
    tools: list[tuple[str, tuple[str, ...], bool]]  # llm commands: (path, tools, in a handler)
    ends: list[str]
    asks: list[str]


class _Validator:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.problems: list[Problem] = []
        self.facts: dict[str, _Facts] = {}
        self.profile_names: set[str] = set()
        self.declared: set[str] = set()  # every function name, also of functions too broken to build

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    # The whole file -------------------------------------------------------------------------------------------

    def run(self, data: Any, overrides: Mapping[str, Any] | None) -> tuple[AgentSpec | None, list[Problem]]:
        if not isinstance(data, Mapping):
            self.problem("", f"an agent file is a JSON object with 'functions' (and 'profiles'), not {_kind(data)}.")
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
                self.problem(key, f"must be a string, not {_kind(top[key])}.")
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
            self.problem("functions", f"must be an object of function name → function, not {_kind(raw_functions)}.")
        else:
            if not raw_functions:
                self.problem("functions", "the agent has no functions.")
            self.declared = {k for k, _ in pairs_of(raw_functions)}
            for fname, value in self.unique_pairs(raw_functions, "functions", "function"):
                fn = self.function(fname, value)
                if fn is not None:
                    functions[fname] = fn
        calls = self.across(functions)
        if self.problems:
            return None, self.problems
        raw = dict(raw_functions) if isinstance(raw_functions, Mapping) else {}
        return AgentSpec(
            name=name,
            functions=functions,
            profiles=profiles,
            model=model,
            raw_functions={k: _normal(v) for k, v in raw.items()},
            raw_profiles=raw_profiles,
            calls=calls,
        ), []

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
                    f"unknown field {key!r} in {what}; the fields are {', '.join(allowed)}.{_suggest(key, allowed)}",
                )
                continue
            seen[key] = value
        return seen

    def unique_pairs(self, obj: Mapping[str, Any], path: str, what: str) -> list[tuple[str, Any]]:
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

    # Profiles -------------------------------------------------------------------------------------------------

    def profiles(
        self, raw: Any, overrides: Mapping[str, Any] | None
    ) -> tuple[dict[str, Profile], dict[str, JsonValue]]:
        items: list[tuple[str, Any]] = []
        if raw is not None:
            if not isinstance(raw, Mapping):
                self.problem("profiles", f"must be an object of profile name → profile, not {_kind(raw)}.")
            else:
                items = self.unique_pairs(raw, "profiles", "profile")
        merged: dict[str, Any] = dict(items)
        for name, override in (overrides or {}).items():
            base = merged.get(name)
            if isinstance(base, Mapping) and isinstance(override, Mapping):
                merged[name] = {**dict(pairs_of(base)), **dict(override)}
            else:
                merged[name] = override
        profiles: dict[str, Profile] = {}
        for name, value in merged.items():
            self.profile_names.add(name)
            profile = self.profile(name, value, key_path("profiles", name))
            if profile is not None:
                profiles[name] = profile
        return profiles, {k: _normal(v) for k, v in merged.items()}

    def profile(self, name: str, raw: Any, path: str) -> Profile | None:
        if not _PROFILE_NAME.fullmatch(name):
            self.problem(path, "a profile name starts with a letter and has only letters, digits, '_' and '-'.")
        if not isinstance(raw, Mapping):
            self.problem(path, f"a profile is an object with baseUrl (and headers, query, timeout), not {_kind(raw)}.")
            return None
        f = self.fields(raw, path, ("baseUrl", "headers", "query", "timeout", "maxResponseBytes"), "a profile")
        before = len(self.problems)
        base_url = f.get("baseUrl")
        if not isinstance(base_url, str):
            self.problem(
                key_path(path, "baseUrl"),
                "a profile needs baseUrl, the absolute http(s) URL its paths are relative to.",
            )
            base_url = ""
        else:
            self.base_url(base_url, key_path(path, "baseUrl"))
        headers = self.secret_map(f.get("headers"), key_path(path, "headers"), header=True)
        query = self.secret_map(f.get("query"), key_path(path, "query"), header=False)
        timeout = f.get("timeout", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            self.problem(key_path(path, "timeout"), "the timeout is a number of seconds above 0, at most 600.")
            timeout = 30.0
        max_bytes = f.get("maxResponseBytes", 4_000_000)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not 0 < max_bytes <= 100_000_000:
            self.problem(
                key_path(path, "maxResponseBytes"), "maxResponseBytes is a whole number above 0, at most 100000000."
            )
            max_bytes = 4_000_000
        if len(self.problems) > before:
            return None
        return Profile(name, base_url, headers, query, float(timeout), max_bytes)

    def base_url(self, url: str, path: str) -> None:
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            self.problem(path, f"{url!r} is not an absolute http(s) URL such as 'https://api.example.com/v1'.")
            return
        if parts.username is not None or parts.password is not None:
            self.problem(
                path,
                "the URL holds credentials; never write secrets in an agent file: read them from an "
                'environment variable in headers, as {"env": "VARIABLE"}.',
            )
        if parts.query or parts.fragment:
            self.problem(
                path, "the base URL may not have a query or fragment; put query values in the profile's query."
            )

    def secret_map(self, raw: Any, path: str, *, header: bool) -> tuple[tuple[str, str | EnvValue], ...]:
        if raw is None:
            return ()
        what = "header" if header else "query parameter"
        if not isinstance(raw, Mapping):
            self.problem(path, f'must be an object of {what} name → value or {{"env": "VARIABLE"}}.')
            return ()
        out: list[tuple[str, str | EnvValue]] = []
        for name, value in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            if header and not _HEADER_NAME.fullmatch(name):
                self.problem(where, f"{name!r} is not a valid HTTP header name.")
                continue
            if isinstance(value, str):
                if sensitive_name(name, header=header) or _SECRET_SHAPE.search(value):
                    self.problem(
                        where,
                        f"this {what} looks like it carries a secret, and secrets are never written "
                        f'in an agent file: write {{"env": "VARIABLE"}} (optionally with '
                        f'"prefix": "Bearer ") and set the environment variable.',
                    )
                    continue
                out.append((name, value))
            elif isinstance(value, Mapping):
                f = self.fields(value, where, ("env", "prefix"), "an environment value")
                variable, prefix = f.get("env"), f.get("prefix", "")
                if not isinstance(variable, str) or not _ENV_NAME.fullmatch(variable):
                    self.problem(
                        key_path(where, "env"),
                        'name the environment variable that holds the value, such as "ORDERS_TOKEN".',
                    )
                    continue
                if not isinstance(prefix, str):
                    self.problem(key_path(where, "prefix"), 'the prefix is a string, such as "Bearer ".')
                    continue
                out.append((name, EnvValue(variable, prefix)))
            else:
                self.problem(where, f'a {what} value is a string or {{"env": "VARIABLE"}}, not {_kind(value)}.')
        return tuple(out)

    # Functions ------------------------------------------------------------------------------------------------

    def function(self, name: str, raw: Any) -> Function | None:
        path = key_path("functions", name)
        if not _FUNCTION_NAME.fullmatch(name):
            self.problem(
                path,
                "a function name starts with a letter and has only letters, digits and '_' (at most "
                "64 characters), so a model can call it as a tool.",
            )
        if not isinstance(raw, Mapping):
            self.problem(
                path, f"a function is an object with commands (and description, args, onError), not {_kind(raw)}."
            )
            return None
        f = self.fields(raw, path, ("description", "args", "commands", "onError"), "a function")
        description: Template | None = None
        if "description" in f:
            description = self.description(f["description"], key_path(path, "description"))
        tool = "description" in f
        args = self.args(f.get("args"), key_path(path, "args"), tool=tool, what="argument")
        self.facts[name] = _Facts([], [], [], [])
        ctx = _Context(name, tool, handler=False)
        if "commands" not in f:
            self.problem(key_path(path, "commands"), "a function needs commands: the block it runs when called.")
            commands: Block = ()
        else:
            commands = self.block(f["commands"], key_path(path, "commands"), ctx)
        on_error = None
        if "onError" in f:
            on_error = self.block(f["onError"], key_path(path, "onError"), _Context(name, tool, handler=True))
            self.handler_reads(on_error, {a.name for a in args}, name)
        return Function(name, path, args, commands, on_error, description)

    def description(self, raw: Any, path: str) -> Template | None:
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
                f"when to call it; this one evaluates to {_shorten_repr(text)}.",
            )
        return template

    def args(self, raw: Any, path: str, *, tool: bool, what: str) -> tuple[Arg, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, Mapping):
            self.problem(path, f"must be an object of {what} name → {{type, description, required}}, not {_kind(raw)}.")
            return ()
        out: list[Arg] = []
        for name, spec in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            self.variable_name(name, where, what)
            if not isinstance(spec, Mapping):
                self.problem(
                    where, f"an {what} is an object with type and description (and required), not {_kind(spec)}."
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
        try:
            return parse_type(raw)
        except TypeSyntaxError as e:
            self.problem(path, str(e))
            return None

    def variable_name(self, name: str, path: str, what: str) -> bool:
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

    # Blocks and commands --------------------------------------------------------------------------------------

    def block(self, raw: Any, path: str, ctx: _Context) -> Block:
        entries: list[tuple[str, Any, str]] = []
        if isinstance(raw, Mapping):
            entries = [(k, v, f"{path}[{i}]") for i, (k, v) in enumerate(pairs_of(raw))]
        elif isinstance(raw, list):
            for i, item in enumerate(raw):
                where = f"{path}[{i}]"
                if not isinstance(item, Mapping) or len(pairs_of(item)) != 1:
                    self.problem(
                        where,
                        "in a list of commands each item is an object with exactly one command, "
                        'such as {"log": "..."}.',
                    )
                    continue
                ((k, v),) = pairs_of(item)
                entries.append((k, v, where))
        else:
            self.problem(
                path,
                f"a command block is an object of commands (run in key order) or a list of "
                f"one-command objects, not {_kind(raw)}.",
            )
            return ()
        commands: list[Command] = []
        for name, value, where in entries:
            command = self.command(name, value, where, ctx)
            if command is not None:
                commands.append(command)
        return tuple(commands)

    def command(self, name: str, raw: Any, where: str, ctx: _Context) -> Command | None:
        path = key_path(where, name)
        if name not in COMMANDS:
            hint = " (onError belongs to a function or to a command's own arguments)" if name == "onError" else ""
            self.problem(
                path,
                f"unknown command {name!r}; the commands are {', '.join(COMMANDS)}.{_suggest(name, COMMANDS)}{hint}",
            )
            return None
        parse: Callable[[Any, str, _Context], tuple[Any, Any]] = getattr(self, f"c_{name}")
        before = len(self.problems)
        args, handler_raw = parse(raw, path, ctx)
        on_error = None
        if handler_raw is not None:
            on_error = self.block(handler_raw, key_path(path, "onError"), _Context(ctx.function, ctx.tool, True))
        if len(self.problems) > before or args is None:
            return None
        return Command(name, path, args, on_error)

    def split_handler(self, raw: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        rest = {k: v for k, v in pairs_of(raw) if k != "onError"}
        return rest, dict(pairs_of(raw)).get("onError")

    def value_form(self, raw: Any, path: str, what: str) -> tuple[Template, Any]:
        """``log``/``return``/``end``: a value, or ``{"value": ..., "onError": ...}``."""
        if isinstance(raw, Mapping) and "onError" in dict(pairs_of(raw)):
            f = self.fields(raw, path, ("value", "onError"), f"the {what} command (with its own onError)")
            return self.template(f.get("value"), key_path(path, "value")), f.get("onError")
        return self.template(raw, path), None

    def c_set(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if not isinstance(raw, Mapping) or not raw:
            self.problem(path, 'set takes an object of variable name → value, such as {"total": "{ a + b }"}.')
            return None, None
        assignments: list[tuple[str, Template]] = []
        handler = None
        for name, value in pairs_of(raw):
            if name == "onError":
                handler = value
                continue
            where = key_path(path, name)
            self.variable_name(name, where, "variable")
            assignments.append((name, self.template(value, where)))
        if not assignments:
            self.problem(path, "set needs at least one variable.")
        return SetArgs(tuple(assignments)), handler

    def c_log(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        template, handler = self.value_form(raw, path, "log")
        return ValueArgs(template), handler

    def c_return(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        template, handler = self.value_form(raw, path, "return")
        return ValueArgs(template), handler

    def c_end(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        self.facts[ctx.function].ends.append(path)
        if ctx.tool:
            self.problem(
                path,
                f"end cannot be used in a tool function: {ctx.function} has a description, so a "
                "model may call it, and a tool call cannot end the whole run. Use return.",
            )
        template, handler = self.value_form(raw, path, "end")
        return ValueArgs(template), handler

    def c_func(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if isinstance(raw, str):
            self.facts[ctx.function].calls.append((path, raw, ctx.handler))
            return FuncArgs(raw), None
        if not isinstance(raw, Mapping):
            self.problem(path, 'func takes a function name, or {"name": ..., "args": {...}}.')
            return None, None
        f = self.fields(raw, path, ("name", "args", "onError"), "the func command")
        target = f.get("name")
        if not isinstance(target, str) or not target:
            self.problem(key_path(path, "name"), "name the function to call (a function of this agent).")
            return None, f.get("onError")
        self.facts[ctx.function].calls.append((path, target, ctx.handler))
        args: list[tuple[str, Template]] = []
        raw_args = f.get("args", {})
        if not isinstance(raw_args, Mapping):
            self.problem(key_path(path, "args"), "args is an object of argument name → value.")
        else:
            for name, value in self.unique_pairs(raw_args, key_path(path, "args"), "argument"):
                args.append((name, self.template(value, key_path(key_path(path, "args"), name))))
        return FuncArgs(target, tuple(args)), f.get("onError")

    def c_ask(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        self.facts[ctx.function].asks.append(path)
        if ctx.handler:
            self.problem(
                path,
                "ask cannot be used in error handling: an error handler may run where nobody can "
                "answer. Ask before the work that can fail, or return an error value.",
            )
        if isinstance(raw, str):
            return AskArgs(self.template(raw, path)), None
        if not isinstance(raw, Mapping):
            self.problem(path, 'ask takes the question\'s text, or {"text": ..., "input": ...}.')
            return None, None
        f = self.fields(raw, path, ("text", "input", "label", "options", "min", "max", "onError"), "the ask command")
        if "text" not in f:
            self.problem(key_path(path, "text"), "ask needs text: the question the person reads.")
        text = self.template(f.get("text", ""), key_path(path, "text"))
        kind = f.get("input", "text")
        if kind not in INPUTS:
            self.problem(
                key_path(path, "input"), f"the input is one of {', '.join(INPUTS)}.{_suggest(str(kind), INPUTS)}"
            )
        label = f.get("label", "Answer")
        if not isinstance(label, str) or not label.strip():
            self.problem(key_path(path, "label"), "the label is a non-empty string.")
            label = "Answer"
        options = None
        if "options" in f:
            options = self.template(f["options"], key_path(path, "options"))
            if kind != "choice":
                self.problem(key_path(path, "options"), "options belong to an input of kind choice.")
        elif kind == "choice":
            self.problem(path, "a choice needs options: a list of strings (or an expression giving one).")
        bounds: list[float | None] = []
        for key in ("min", "max"):
            value = f.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                self.problem(key_path(path, key), f"{key} is a number.")
                value = None
            if value is not None and kind not in ("number", "integer"):
                self.problem(key_path(path, key), f"{key} belongs to an input of kind number or integer.")
            bounds.append(value)
        return AskArgs(text, str(kind), label, options, bounds[0], bounds[1]), f.get("onError")

    def c_api(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if not isinstance(raw, Mapping):
            self.problem(
                path, 'api takes an object: {"profile": ..., "path": ...} (and method, query, headers, body, timeout).'
            )
            return None, None
        f = self.fields(
            raw,
            path,
            ("profile", "method", "path", "query", "headers", "body", "timeout", "onError"),
            "the api command",
        )
        profile = f.get("profile")
        if not isinstance(profile, str):
            self.problem(key_path(path, "profile"), "api needs profile: the name of one of the agent's profiles.")
            profile = ""
        elif profile not in self.profile_names:
            known = ", ".join(sorted(self.profile_names)) or "none"
            self.problem(
                key_path(path, "profile"),
                f"there is no profile {profile!r} (the profiles: {known}).{_suggest(profile, self.profile_names)}",
            )
        method = f.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in METHODS:
            self.problem(key_path(path, "method"), f"the method is one of {', '.join(METHODS)}.")
            method = "GET"
        where = key_path(path, "path")
        request_path = self.template(f["path"], where) if "path" in f else None
        if request_path is not None:
            if not isinstance(request_path.raw, str):
                self.problem(where, "the path is a string (or an expression giving one).")
            elif request_path.constant and ("://" in request_path.raw or request_path.raw.startswith("//")):
                self.problem(
                    where, "the path is relative to the profile's baseUrl; requests go only to the profile's server."
                )
        query: tuple[tuple[str, Template], ...] | Template = ()
        if "query" in f:
            raw_query = f["query"]
            if isinstance(raw_query, Mapping):
                query = tuple(self.request_values(raw_query, key_path(path, "query"), header=False))
            elif isinstance(raw_query, str) and _dynamic(raw_query) is not None:
                query = self.template(raw_query, key_path(path, "query"))
            else:
                self.problem(
                    key_path(path, "query"), "query is an object of name → value, or an expression giving one."
                )
        headers: tuple[tuple[str, Template], ...] = ()
        if "headers" in f:
            if isinstance(f["headers"], Mapping):
                headers = tuple(self.request_values(f["headers"], key_path(path, "headers"), header=True))
            else:
                self.problem(key_path(path, "headers"), "headers is an object of header name → value.")
        body = self.template(f["body"], key_path(path, "body")) if "body" in f else None
        timeout = f.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600
        ):
            self.problem(key_path(path, "timeout"), "the timeout is a number of seconds above 0, at most 600.")
            timeout = None
        return ApiArgs(
            profile,
            method.upper() if isinstance(method, str) else "GET",
            request_path,
            query,
            headers,
            body,
            None if timeout is None else float(timeout),
        ), f.get("onError")

    def request_values(self, raw: Mapping[str, Any], path: str, *, header: bool) -> list[tuple[str, Template]]:
        out: list[tuple[str, Template]] = []
        what = "header" if header else "query parameter"
        for name, value in self.unique_pairs(raw, path, what):
            where = key_path(path, name)
            if header and not _HEADER_NAME.fullmatch(name):
                self.problem(where, f"{name!r} is not a valid HTTP header name.")
                continue
            if sensitive_name(name, header=header) or (isinstance(value, str) and _SECRET_SHAPE.search(value)):
                self.problem(
                    where,
                    f"this {what} carries a secret; secrets come only from environment variables "
                    f"named in a profile: move it to the profile's {'headers' if header else 'query'}"
                    f' as {{"env": "VARIABLE"}}.',
                )
                continue
            out.append((name, self.template(value, where)))
        return out

    def c_llm(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if isinstance(raw, str):
            raw = {"prompt": raw}
        if not isinstance(raw, Mapping):
            self.problem(
                path,
                "llm takes the prompt, or an object with prompt (and system, tools, output, model, "
                "maxToolRoundtrips, maxTokens).",
            )
            return None, None
        f = self.fields(
            raw,
            path,
            ("prompt", "system", "tools", "output", "model", "maxToolRoundtrips", "maxTokens", "onError"),
            "the llm command",
        )
        if "prompt" not in f:
            self.problem(key_path(path, "prompt"), "llm needs a prompt: the first message the model reads.")
        prompt = self.template(f.get("prompt", ""), key_path(path, "prompt"))
        system = self.template(f["system"], key_path(path, "system")) if "system" in f else None
        tools: tuple[str, ...] | None = None
        if "tools" in f:
            raw_tools = f["tools"]
            if not isinstance(raw_tools, list) or not all(isinstance(t, str) for t in raw_tools):
                self.problem(
                    key_path(path, "tools"),
                    "tools is a list of the names of tool functions (functions with a description).",
                )
            else:
                tools = tuple(raw_tools)
        self.facts[ctx.function].tools.append((path, tools if tools is not None else ("*",), ctx.handler))
        output = None
        if "output" in f:
            output = self.args(f["output"], key_path(path, "output"), tool=True, what="output field")
            if not output and isinstance(f["output"], Mapping):
                self.problem(key_path(path, "output"), "the output needs at least one field.")
        model = f.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            self.problem(key_path(path, "model"), "the model is a model id such as 'claude-sonnet-5-5'.")
            model = None
        numbers: list[int] = []
        for key, default, low, high in (("maxToolRoundtrips", 25, 0, 100), ("maxTokens", 4096, 1, 128_000)):
            value = f.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                self.problem(key_path(path, key), f"{key} is a whole number from {low} to {high}.")
                value = default
            numbers.append(value)
        return LlmArgs(
            prompt, system, tools if tools is not None else ("*",), output, model, numbers[0], numbers[1]
        ), f.get("onError")

    def c_if(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if not isinstance(raw, Mapping):
            self.problem(path, 'if takes {"condition": ..., "then": [...], "else": [...]}.')
            return None, None
        f = self.fields(raw, path, ("condition", "then", "else", "onError"), "the if command")
        if "condition" not in f:
            self.problem(key_path(path, "condition"), 'if needs a condition (an expression such as "{ total > 100 }").')
        condition = self.template(f.get("condition", False), key_path(path, "condition"))
        if "then" not in f:
            self.problem(key_path(path, "then"), "if needs then: the commands to run when the condition holds.")
        then = self.block(f.get("then", []), key_path(path, "then"), ctx)
        orelse = self.block(f["else"], key_path(path, "else"), ctx) if "else" in f else ()
        return IfArgs(condition, then, orelse), f.get("onError")

    def c_loop(self, raw: Any, path: str, ctx: _Context) -> tuple[Any, Any]:
        if not isinstance(raw, Mapping):
            self.problem(path, 'loop takes {"over": ..., "as": "item", "max": 1000, "do": [...]}.')
            return None, None
        f = self.fields(raw, path, ("over", "as", "index", "max", "do", "onError"), "the loop command")
        if "over" not in f:
            self.problem(key_path(path, "over"), "loop needs over: the list to go through (an expression).")
        over = self.template(f.get("over", []), key_path(path, "over"))
        item = f.get("as", "item")
        if not isinstance(item, str) or not self.variable_name(item, key_path(path, "as"), "loop variable"):
            item = "item"
        index = f.get("index")
        if index is not None and (
            not isinstance(index, str) or not self.variable_name(index, key_path(path, "index"), "loop variable")
        ):
            index = None
        bound = f.get("max", 1000)
        if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= MAX_LOOP:
            self.problem(
                key_path(path, "max"),
                f"max, the most items the loop may go through, is a whole number from 1 to {MAX_LOOP}.",
            )
            bound = 1000
        if "do" not in f:
            self.problem(key_path(path, "do"), "loop needs do: the commands to run for each item.")
        body = self.block(f.get("do", []), key_path(path, "do"), ctx)
        return LoopArgs(over, body, item, index, bound), f.get("onError")

    # Templates ------------------------------------------------------------------------------------------------

    def template(self, raw: Any, path: str) -> Template:
        reads: list[tuple[str, frozenset[str]]] = []
        render = self.compile_value(raw, path, reads)
        return Template(_normal(raw), render, tuple(reads))

    def compile_value(self, raw: Any, path: str, reads: list[tuple[str, frozenset[str]]]) -> Callable[[Any], Any]:
        if isinstance(raw, str):
            source = _dynamic(raw)
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
            if all(_is_constant(v) for v in raw):
                return lambda env: raw
            return lambda env: [item(env) for item in items]
        if isinstance(raw, Mapping):
            parts: list[tuple[str, Callable[[Any], Any]]] = []
            for key, value in self.unique_pairs(raw, path, "key"):
                parts.append((key, self.compile_value(value, key_path(path, key), reads)))
            if all(_is_constant(v) for _, v in pairs_of(raw)):
                constant = dict(pairs_of(raw))
                return lambda env: constant
            return lambda env: {key: part(env) for key, part in parts}
        if raw is None or isinstance(raw, bool | int | float):
            return lambda env: raw
        self.problem(path, f"{_kind(raw)} is not a JSON value.")
        return lambda env: None

    # The onError rule -----------------------------------------------------------------------------------------

    def handler_reads(self, block: Block, args: set[str], function: str) -> None:
        """A function's onError reads only its arguments, ``exc`` and what the block itself sets (docs/functions.md)."""
        self.flow(block, args | {"exc"}, False, function)

    def flow(self, block: Block, known: set[str], has_result: bool, function: str) -> tuple[set[str], bool]:
        known = set(known)
        for command in block:
            own = known | ({"result"} if has_result else set())
            for path, names in _own_reads(command):
                for name in sorted(names - own):
                    if name == "result":
                        why = "result holds the previous command's value, and nothing has run yet in this handler"
                    else:
                        why = f"{name!r} is neither an argument of {function} nor set earlier in this error handler"
                    self.problem(
                        path,
                        f"{why}; a function can fail before any of its commands has run, so its "
                        "onError may rely only on the function's arguments, exc and what the block "
                        "itself sets.",
                    )
            sets: set[str] = set()
            args = command.args
            if command.kind == "set":
                sets = {name for name, _ in args.assignments}
            elif command.kind == "if":
                then_known, _ = self.flow(args.then, known, has_result, function)
                else_known, _ = self.flow(args.orelse, known, has_result, function)
                sets = (then_known & else_known) - known
            elif command.kind == "loop":
                inner = {args.item} | ({args.index} if args.index else set())
                self.flow(args.do, known | inner, has_result, function)
            if command.on_error is not None:
                handler_known, _ = self.flow(command.on_error, known | {"exc"}, has_result, function)
                sets &= handler_known
            known |= sets
            has_result = True
        return known, has_result

    # Across functions -----------------------------------------------------------------------------------------

    def across(self, functions: dict[str, Function]) -> dict[str, tuple[str, ...]]:
        tools = tuple(name for name, fn in functions.items() if fn.is_tool)
        edges: dict[str, list[tuple[str, str]]] = {}  # caller -> [(target, path)]
        for name, facts in self.facts.items():
            out = edges.setdefault(name, [])
            for path, target, _ in facts.calls:
                if target not in self.declared:
                    self.problem(path, f"there is no function {target!r}.{_suggest(target, self.declared)}")
                    continue
                out.append((target, path))
            for path, listed, _ in facts.tools:
                for i, target in enumerate(listed if listed != ("*",) else tools):
                    where = f"{path}.tools[{i}]" if listed != ("*",) else path
                    fn = functions.get(target)
                    if target not in self.declared:
                        self.problem(where, f"there is no function {target!r}.{_suggest(target, self.declared)}")
                        continue
                    if fn is not None and not fn.is_tool:
                        self.problem(
                            where,
                            f"{target} cannot be offered to a model: it has no description, so it "
                            "is not a tool function.",
                        )
                        continue
                    out.append((target, where))
        for fn in functions.values():
            self.call_args(fn, functions)
        self.cycles(edges)
        self.reach_rules(functions, edges)
        return {name: tuple(dict.fromkeys(t for t, _ in targets)) for name, targets in edges.items()}

    def call_args(self, fn: Function, functions: dict[str, Function]) -> None:
        for command in _walk(fn.commands + (fn.on_error or ())):
            if command.kind != "func":
                continue
            target = functions.get(command.args.target)
            if target is None:
                continue
            declared = [a.name for a in target.args]
            for name, _ in command.args.args:
                if name not in declared:
                    listed = ", ".join(declared) if declared else "none"
                    self.problem(
                        key_path(key_path(command.path, "args"), name),
                        f"{target.name} has no argument {name!r} (its arguments: {listed}).{_suggest(name, declared)}",
                    )

    def cycles(self, edges: dict[str, list[tuple[str, str]]]) -> None:
        """Report each call cycle once, at the call that closes it (recursion is refused before anything runs)."""
        state: dict[str, int] = {}  # 1 on the stack, 2 done
        stack: list[str] = []
        reported: set[frozenset[str]] = set()

        def visit(name: str) -> None:
            state[name] = 1
            stack.append(name)
            for target, path in edges.get(name, []):
                if state.get(target) == 1:
                    cycle = [*stack[stack.index(target) :], target]
                    members = frozenset(cycle)
                    if members not in reported:
                        reported.add(members)
                        route = " → ".join(cycle)
                        self.problem(
                            path,
                            f"call cycle {route}: a function cannot call itself while it is "
                            "running, directly or through others (tools offered to a model count as "
                            "calls). Repeat work with a loop.",
                        )
                elif state.get(target) is None:
                    visit(target)
            stack.pop()
            state[name] = 2

        for name in edges:
            if name not in state:
                visit(name)

    def reach_rules(self, functions: dict[str, Function], edges: dict[str, list[tuple[str, str]]]) -> None:
        """``end`` is never reachable from a tool function; ``ask`` never from an error handler."""

        def reaches(start: str, what: str) -> str | None:
            seen: set[str] = set()
            todo = [start]
            while todo:
                name = todo.pop()
                if name in seen or name not in self.facts:
                    continue
                seen.add(name)
                found = getattr(self.facts[name], what)
                if found:
                    return str(found[0])
                todo.extend(t for t, _ in edges.get(name, []))
            return None

        for name, fn in functions.items():
            facts = self.facts[name]
            if fn.is_tool:
                for path, target, _ in facts.calls:
                    where = reaches(target, "ends")
                    if where is not None:
                        self.problem(
                            path,
                            f"{name} is a tool function, and {target} can reach end (at {where}); a "
                            "tool call cannot end the whole run. Use return.",
                        )
            for path, target, in_handler in facts.calls:
                if in_handler:
                    where = reaches(target, "asks")
                    if where is not None:
                        self.problem(path, f"ask cannot be used in error handling, and {target} can ask (at {where}).")
            for path, listed, in_handler in facts.tools:
                if not in_handler:
                    continue
                for target in listed if listed != ("*",) else [n for n, f in functions.items() if f.is_tool]:
                    where = reaches(target, "asks")
                    if where is not None:
                        self.problem(
                            path, f"ask cannot be used in error handling, and the tool {target} can ask (at {where})."
                        )


def sensitive_name(name: str, *, header: bool) -> bool:
    """Whether a header or query parameter of this name carries a secret, so its value must come from the environment.

    ``Authorization``, ``X-Api-Key``, ``X-Auth-Token``, ``access_token``; for a query also ``key`` and ``sig``. Not
    ``X-Author`` or ``Idempotency-Key``.
    """
    words = [w for w in re.split(r"[-_.\s]+", name.lower()) if w]
    joined = "".join(words)
    if any(w in _SECRET_WORDS for w in words) or any(s in joined for s in _SECRET_JOINED):
        return True
    return not header and any(w in ("key", "sig") for w in words)


def _is_constant(raw: Any) -> bool:
    if isinstance(raw, str):
        return _dynamic(raw) is None
    if isinstance(raw, list):
        return all(_is_constant(v) for v in raw)
    if isinstance(raw, Mapping):
        return all(_is_constant(v) for _, v in pairs_of(raw))
    return True


def _own_reads(command: Command) -> list[tuple[str, frozenset[str]]]:
    """What a command's own templates read (not those of its nested blocks)."""
    args = command.args
    templates: list[Template | None] = []
    if isinstance(args, SetArgs):
        templates = [t for _, t in args.assignments]
    elif isinstance(args, ValueArgs):
        templates = [args.value]
    elif isinstance(args, FuncArgs):
        templates = [t for _, t in args.args]
    elif isinstance(args, AskArgs):
        templates = [args.text, args.options]
    elif isinstance(args, ApiArgs):
        query = args.query if isinstance(args.query, Template) else None
        templates = [
            args.path,
            args.body,
            query,
            *(t for _, t in args.headers),
            *(t for _, t in (args.query if not isinstance(args.query, Template) else ())),
        ]
    elif isinstance(args, LlmArgs):
        templates = [args.prompt, args.system]
    elif isinstance(args, IfArgs):
        templates = [args.condition]
    elif isinstance(args, LoopArgs):
        templates = [args.over]
    return [read for t in templates if t is not None for read in t.reads]


def _walk(block: Block) -> list[Command]:
    out: list[Command] = []
    for command in block:
        out.append(command)
        args = command.args
        if isinstance(args, IfArgs):
            out.extend(_walk(args.then) + _walk(args.orelse))
        elif isinstance(args, LoopArgs):
            out.extend(_walk(args.do))
        if command.on_error:
            out.extend(_walk(command.on_error))
    return out


def walk_commands(block: Block) -> list[Command]:
    """Every command of a block, nested ones and handlers included, in order."""
    return _walk(block)


def _normal(value: Any) -> JsonValue:
    """A value as plain JSON, for fingerprints.

    An object with repeated keys becomes ``{"$pairs": [[key, value], ...]}``, so nothing is lost.
    """
    if isinstance(value, Mapping):
        pairs = pairs_of(value)
        if len({k for k, _ in pairs}) != len(pairs):
            return {"$pairs": [[k, _normal(v)] for k, v in pairs]}
        return {k: _normal(v) for k, v in pairs}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return repr(value)
