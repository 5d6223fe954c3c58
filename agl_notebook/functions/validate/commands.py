"""The checks of command blocks and of each command: its fields and their values, and where it may stand.

Each command has a method ``c_<command>`` that returns its arguments (`agl_notebook.functions.spec`) and the raw
``onError`` block it carries, reporting what is wrong. What a command does that the checks across functions need
(the functions it calls, the tools it offers, an ``end`` or an ``ask``) is noted in the function's `Facts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..spec import ApiArgs, AskArgs, Block, Command, FuncArgs, IfArgs, LlmArgs, LoopArgs, SetArgs, Template, ValueArgs
from .profiles import ProfileChecks
from .reading import expression_of, key_path, kind_of, pairs_of, suggest

COMMANDS = ("set", "log", "return", "func", "ask", "api", "llm", "if", "loop", "end")
"""Every command, in the order the documentation lists them."""
INPUTS = ("text", "multiline", "number", "integer", "choice", "confirm")
"""The kinds of ``ask`` input."""
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
"""The HTTP methods of ``api``."""
MAX_LOOP = 100_000
"""The largest bound a ``loop`` may declare."""


@dataclass
class Context:
    """Where a block stands: in which function, whether that is a tool, whether inside an error handler."""

    function: str
    tool: bool
    handler: bool  # inside any error handler


class CommandChecks(ProfileChecks):
    """The checks of command blocks and commands."""

    def block(self, raw: Any, path: str, ctx: Context) -> Block:
        """A command block: an object of commands in key order, or a list of one-command objects."""
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
                f"one-command objects, not {kind_of(raw)}.",
            )
            return ()
        commands: list[Command] = []
        for name, value, where in entries:
            command = self.command(name, value, where, ctx)
            if command is not None:
                commands.append(command)
        return tuple(commands)

    def command(self, name: str, raw: Any, where: str, ctx: Context) -> Command | None:
        """One command (its ``c_<name>`` check), with its own ``onError``; None if it has problems."""
        path = key_path(where, name)
        if name not in COMMANDS:
            hint = " (onError belongs to a function or to a command's own arguments)" if name == "onError" else ""
            self.problem(
                path,
                f"unknown command {name!r}; the commands are {', '.join(COMMANDS)}.{suggest(name, COMMANDS)}{hint}",
            )
            return None
        parse: Callable[[Any, str, Context], tuple[Any, Any]] = getattr(self, f"c_{name}")
        before = len(self.problems)
        args, handler_raw = parse(raw, path, ctx)
        on_error = None
        if handler_raw is not None:
            on_error = self.block(handler_raw, key_path(path, "onError"), Context(ctx.function, ctx.tool, True))
        if len(self.problems) > before or args is None:
            return None
        return Command(name, path, args, on_error)

    def value_form(self, raw: Any, path: str, what: str) -> tuple[Template, Any]:
        """``log``/``return``/``end``: a value, or ``{"value": ..., "onError": ...}``."""
        if isinstance(raw, Mapping) and "onError" in dict(pairs_of(raw)):
            f = self.fields(raw, path, ("value", "onError"), f"the {what} command (with its own onError)")
            return self.template(f.get("value"), key_path(path, "value")), f.get("onError")
        return self.template(raw, path), None

    def c_set(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``set``: variable name → value."""
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

    def c_log(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``log``: a value."""
        template, handler = self.value_form(raw, path, "log")
        return ValueArgs(template), handler

    def c_return(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``return``: a value."""
        template, handler = self.value_form(raw, path, "return")
        return ValueArgs(template), handler

    def c_end(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``end``: a value; never in a tool function."""
        self.facts[ctx.function].ends.append(path)
        if ctx.tool:
            self.problem(
                path,
                f"end cannot be used in a tool function: {ctx.function} has a description, so a "
                "model may call it, and a tool call cannot end the whole run. Use return.",
            )
        template, handler = self.value_form(raw, path, "end")
        return ValueArgs(template), handler

    def c_func(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``func``: a function name, or ``{"name": ..., "args": {...}}``."""
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

    def c_ask(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``ask``: the question, or ``{"text": ..., "input": ...}``; never in error handling."""
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
                key_path(path, "input"), f"the input is one of {', '.join(INPUTS)}.{suggest(str(kind), INPUTS)}"
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

    def c_api(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``api``: a request through a profile."""
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
                f"there is no profile {profile!r} (the profiles: {known}).{suggest(profile, self.profile_names)}",
            )
        method = f.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
            self.problem(key_path(path, "method"), f"the method is one of {', '.join(HTTP_METHODS)}.")
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
            elif isinstance(raw_query, str) and expression_of(raw_query) is not None:
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

    def c_llm(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``llm``: a prompt, or an object with prompt, system, tools, output, model and bounds."""
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

    def c_if(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``if``: a condition, then and else blocks."""
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

    def c_loop(self, raw: Any, path: str, ctx: Context) -> tuple[Any, Any]:
        """``loop``: over a list, with a bound, a body and the loop variables."""
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
