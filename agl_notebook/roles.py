"""Roles: a model, instructions, tools and at most one reporting tool; `@role`, `prompt_file` and `Claude`."""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, cast

from ._fieldwise import Fieldwise
from .errors import InputError
from .models.base import EFFORTS, Effort, Thinking, ThinkingMode
from .payloads import payload_spec
from .tools import ReportingTool, Tool, check_strict, check_strict_request

if TYPE_CHECKING:
    from .approvals import ApprovalPolicy
    from .mcp import MCPServer
    from .models.base import Model
    from .server_tools import ServerTool

T = TypeVar("T")
Params = ParamSpec("Params")


class Claude(enum.StrEnum):
    """The newest Claude models the installed anthropic SDK knows. Any model id string is accepted too."""

    OPUS = "claude-opus-5-5"
    """The most capable model."""
    SONNET = "claude-sonnet-5-5"
    """The balanced model."""
    HAIKU = "claude-haiku-5-5"
    """The fastest model."""


@dataclass(frozen=True, eq=False, repr=False)
class Role(Fieldwise, Generic[T]):
    """What one agent is: instructions, tools, and at most one reporting tool whose payload type is ``T``.

    A role without a reporting tool is a ``Role[None]``: its step ends when the agent stops calling tools.
    """

    name: str
    """The role's name, shown in views and part of every step's fingerprint."""
    instructions: str
    """The system text the agent reads (`prompt_file()` reads it from a file)."""
    tools: Sequence[Tool[Any] | ReportingTool[Any]] = ()
    """The tools the agent may call; at most one `ReportingTool`."""
    model: str | Model | None = None
    """A model id (`Claude.OPUS`, any Claude id string; ``"openai:<model>"`` or ``"openai:<model>@<server URL>"`` for
    an OpenAI-compatible model, docs/models.md) or a `Model`; `@role(model=...)` fills it in."""
    accepts: tuple[type[Any], ...] = ()
    """The input types `Run.step` accepts for this role; empty accepts any payload or string."""
    max_tokens: int = 4096
    """The most output tokens per model reply."""
    max_tool_roundtrips: int = 25
    """How many tool round trips a step may take, so at most this many plus one model requests."""
    reminders: int = 1
    """How many framed reminders to report the agent gets before the step raises `RoleIncompleteError`."""
    thinking: Thinking | ThinkingMode | None = None
    """How the agent thinks before it answers: a `Thinking`, or ``"adaptive"``, ``"between_tools"`` or
    ``"disabled"``; None sends nothing (the model's default). Part of the fingerprint only when set."""
    effort: Effort | None = None
    """How much effort each reply takes (``"low"`` to ``"max"``); None sends nothing. Fingerprinted only when set."""
    strict_tools: bool = False
    """Whether every tool (the reporting tool included) is offered with a strict schema, so the API guarantees
    arguments that fit it (the loop still validates them). Fingerprinted only when set."""
    mcp: Sequence[MCPServer] = ()
    """MCP servers whose tools the agent may call too (`agl_notebook.mcp.MCPServer`; docs/mcp.md)."""
    mcp_approvals: Mapping[str, ApprovalPolicy] = field(default_factory=dict, repr=False, compare=False)
    """Approval policies of the MCP tools, by offered name or ``fnmatch`` pattern (``{"notes_*": "ask"}``): the
    exact name first, else the first pattern that matches. Not fingerprinted (docs/mcp.md, "Approvals")."""
    ask_destructive: bool = False
    """Ask a person about every call of an MCP tool its server does not mark read-only and non-destructive (the
    protocol's default is destructive). A server's hints may add an approval this way, never remove one."""
    server_tools: Sequence[ServerTool] = ()
    """Tools Anthropic runs itself: `WebSearch`, `WebFetch`, `CodeExecution` (`agl_notebook.server_tools`;
    docs/server-tools.md). No approval can gate them. Part of the fingerprint only when set."""
    _tools_by_name: dict[str, Tool[Any]] = field(init=False, repr=False, compare=False)
    _reporting: ReportingTool[Any] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError(f"Role needs a non-empty name, not {self.name!r}.")
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise InputError(f"Role {self.name!r} needs non-empty instructions: the system text the agent reads.")
        tools = tuple(self.tools)
        object.__setattr__(self, "tools", tools)
        by_name: dict[str, Tool[Any]] = {}
        reporting: ReportingTool[Any] | None = None
        seen: set[str] = set()
        for t in tools:
            if not isinstance(t, Tool | ReportingTool):
                if type(t).__module__ == "agl_notebook.server_tools":  # type: ignore[unreachable]
                    raise InputError(
                        f"Role {self.name!r}: {type(t).__name__} is run by Anthropic; offer it with "
                        f"server_tools=[{type(t).__name__}(...)], not in tools."
                    )
                raise InputError(
                    f"Role {self.name!r}: {t!r} is not a tool; build tools with tool() or reporting_tool()."
                )
            if t.name in seen:
                raise InputError(
                    f"Role {self.name!r}: two tools are named {t.name!r}; tool names are unique within a role."
                )
            seen.add(t.name)
            if isinstance(t, ReportingTool):
                if reporting is not None:
                    raise InputError(
                        f"Role {self.name!r}: a role has at most one reporting tool, and "
                        f"{reporting.name!r} and {t.name!r} are both reporting tools."
                    )
                reporting = t
            else:
                by_name[t.name] = t
        for accepted in self.accepts:
            if accepted is not str:
                payload_spec(accepted)  # an accepted input must be a payload the model can be shown as JSON
        for name in ("max_tokens", "max_tool_roundtrips", "reminders"):
            number = getattr(self, name)
            if isinstance(number, bool) or not isinstance(number, int):
                raise InputError(f"Role {self.name!r}: {name} takes a whole number, not {number!r}.")
        if self.max_tool_roundtrips < 0 or self.reminders < 0 or self.max_tokens < 1:
            raise InputError(f"Role {self.name!r}: max_tool_roundtrips and reminders must be >= 0 and max_tokens >= 1.")
        _check_model_string(self.model, f"Role {self.name!r}")
        object.__setattr__(self, "thinking", _thinking(self.name, self.thinking, self.max_tokens))
        if self.effort is not None and (not isinstance(self.effort, str) or self.effort not in EFFORTS):
            raise InputError(
                f"Role {self.name!r}: effort={self.effort!r} is not an effort level; use one of "
                f"{', '.join(map(repr, EFFORTS))} (or None, the model's default)."
            )
        if not isinstance(self.strict_tools, bool):
            raise InputError(f"Role {self.name!r}: strict_tools takes True or False, not {self.strict_tools!r}.")
        strict = [t for t in tools if self.strict_tools or t.strict]
        for t in strict:
            if not t.strict:  # a tool built strict was checked when it was built
                check_strict(f"Role {self.name!r}: strict_tools=True, but tool {t.name!r}", t.input_schema)
        check_strict_request(f"Role {self.name!r}", [(t.name, t.input_schema) for t in strict])
        object.__setattr__(self, "_tools_by_name", by_name)
        object.__setattr__(self, "_reporting", reporting)
        if self.mcp:
            _check_mcp(self)
        if self.mcp_approvals or self.ask_destructive:
            _check_mcp_approvals(self)
        if self.server_tools:
            from .server_tools import check_server_tools  # loaded only for a role that offers server tools

            object.__setattr__(self, "server_tools", check_server_tools(self.name, self.server_tools, list(seen)))

    @property
    def reporting_tool(self) -> ReportingTool[Any] | None:
        """The role's reporting tool, if it has one."""
        return self._reporting

    def tool_named(self, name: str) -> Tool[Any] | None:
        """The (non-reporting) tool called ``name``, if the role has one."""
        return self._tools_by_name.get(name)


_THINKING_WORDS = ("adaptive", "between_tools", "disabled")


def _thinking(role: str, value: object, max_tokens: int) -> Thinking | None:
    """The role's thinking setting as a `Thinking`, or an `InputError` naming what is wrong.

    `Thinking` checks itself when built; what only the role knows is its ``max_tokens``, which a budget must be under.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value == "adaptive":
            return Thinking.adaptive()
        if value in _THINKING_WORDS:
            return Thinking(cast(ThinkingMode, value))
        if value == "enabled":
            raise InputError(
                f"Role {role!r}: thinking='enabled' needs a budget: thinking=Thinking.enabled(budget_tokens=...)."
            )
    if not isinstance(value, Thinking):
        raise InputError(
            f"Role {role!r}: thinking takes a Thinking (Thinking.adaptive(), Thinking.enabled(budget_tokens)) or "
            f"one of 'adaptive', 'between_tools' or 'disabled', not {value!r}."
        )
    budget = value.budget_tokens
    if budget is not None and budget >= max_tokens:
        raise InputError(
            f"Role {role!r}: Thinking.enabled(budget_tokens={budget}) must be under the role's max_tokens "
            f"({max_tokens}): thinking tokens count toward it. Raise max_tokens or lower the budget."
        )
    return value


def _check_mcp(role: Role[Any]) -> None:
    """A role's MCP servers: descriptions, each name once (the `mcp` module loads only for a role that has them)."""
    from .mcp import MCPServer

    if isinstance(role.mcp, MCPServer | str):
        raise InputError(f"Role {role.name!r}: mcp takes a list of servers, mcp=[MCPServer.stdio(...)].")
    servers = tuple(role.mcp)
    object.__setattr__(role, "mcp", servers)
    names: set[str] = set()
    for server in servers:
        if not isinstance(server, MCPServer):
            raise InputError(
                f"Role {role.name!r}: {server!r} is not an MCP server; describe one with MCPServer.stdio(...) or "
                "MCPServer.http(...)."
            )
        if server.name in names:
            raise InputError(f"Role {role.name!r}: two MCP servers are named {server.name!r}.")
        names.add(server.name)


def _check_mcp_approvals(role: Role[Any]) -> None:
    """``mcp_approvals`` maps names or patterns to policies, ``ask_destructive`` is a bool, both need servers."""
    from .approvals import check_policy  # loaded only for a role that states MCP approvals

    if not isinstance(role.ask_destructive, bool):
        raise InputError(f"Role {role.name!r}: ask_destructive takes True or False, not {role.ask_destructive!r}.")
    approvals = role.mcp_approvals if isinstance(role.mcp_approvals, Mapping) else {}
    served = [p for p in approvals if p in ("web_search", "web_fetch", "code_execution")]
    if served:
        from .server_tools import APPROVAL_REFUSED

        raise InputError(f"Role {role.name!r}, mcp_approvals[{served[0]!r}] names a server tool: {APPROVAL_REFUSED}")
    if not role.mcp:
        raise InputError(
            f"Role {role.name!r}: mcp_approvals and ask_destructive apply to MCP tools, and the role has no MCP "
            "servers (mcp=[MCPServer.stdio(...)]); a tool of its own takes tool(..., approval=...)."
        )
    if not isinstance(role.mcp_approvals, Mapping):
        raise InputError(
            f"Role {role.name!r}: mcp_approvals maps tool names or patterns to policies ({{'notes_*': 'ask'}}), "
            f"not {role.mcp_approvals!r}."
        )
    policies = dict(role.mcp_approvals)
    for pattern, policy in policies.items():
        if not isinstance(pattern, str) or not pattern:
            raise InputError(f"Role {role.name!r}: mcp_approvals key {pattern!r} is not a tool name or pattern.")
        check_policy(f"Role {role.name!r}, mcp_approvals[{pattern!r}]", policy)
    object.__setattr__(role, "mcp_approvals", policies)


class RoleFactory(Generic[Params, T]):
    """A function returning a `Role`, decorated with `@role`.

    Calling it returns the role with its model and accepted input types filled in.
    """

    def __init__(
        self, function: Callable[Params, Role[T]], *, model: str | Model | None, accepts: tuple[type[Any], ...]
    ) -> None:
        self.function = function
        self.model = model
        self.accepts = accepts
        functools.update_wrapper(self, function)

    def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> Role[T]:
        """Call the decorated function and fill in the role's model and accepted input types."""
        built = self.function(*args, **kwargs)
        if not isinstance(built, Role):
            raise InputError(f"{self.function.__qualname__} must return a Role, not {type(built).__name__}.")
        return replace(
            built, model=self.model if built.model is None else built.model, accepts=built.accepts or self.accepts
        )

    def __repr__(self) -> str:
        return f"<role factory {self.function.__qualname__}>"


def role(
    *, model: str | Model | None = None, accepts: Sequence[type[Any]] = ()
) -> Callable[[Callable[Params, Role[T]]], RoleFactory[Params, T]]:
    """Decorate a function that returns a `Role`.

    Args:
        model: The model the role runs on: a `Claude` member, any Claude id string, an ``"openai:..."`` string, or
            a `Model`. `Run(model=...)` overrides it for every role.
        accepts: The input types `Run.step` accepts for this role (an `InputError` for any other).

    Returns:
        A factory with the function's signature; calling it returns the `Role`. The function may take the `Run`
        as an argument (``run.step(planner_role(run), request)``).
    """
    if isinstance(model, str) and not model.strip():
        raise InputError("role(model=...) must name a model.")
    _check_model_string(model, "role(model=...)")
    accepted = tuple(accepts)
    for a in accepted:
        if not isinstance(a, type):
            raise InputError(f"role(accepts=...) takes types, not {a!r}.")

    def decorate(function: Callable[Params, Role[T]]) -> RoleFactory[Params, T]:
        return RoleFactory(function, model=model, accepts=accepted)

    return decorate


def prompt_file(path: str | Path) -> str:
    """Read a role's instructions from a text file.

    A relative path is looked up beside the calling module's file, then in the working directory (in a notebook
    kernel, the notebook's folder).

    Raises:
        InputError: No such file in either place, or it is empty.
    """
    wanted = Path(path)
    candidates = [wanted] if wanted.is_absolute() else [*_caller_folders(), Path.cwd()]
    tried: list[str] = []
    for folder in candidates:
        candidate = wanted if wanted.is_absolute() else folder / wanted
        tried.append(str(candidate))
        if candidate.is_file():
            text = candidate.read_text(encoding="utf-8")
            if not text.strip():
                raise InputError(f"prompt_file: {candidate} is empty; a role needs instructions.")
            return text
    raise InputError(f"prompt_file: no file {str(path)!r}; looked at {', '.join(dict.fromkeys(tried))}.")


def _caller_folders() -> list[Path]:
    frame = inspect.currentframe()
    try:
        caller = frame.f_back.f_back if frame and frame.f_back else None
        filename = caller.f_code.co_filename if caller else ""
    finally:
        del frame
    # A notebook cell's "file" is a temporary name, not the notebook's folder: only trust real files.
    source = Path(filename)
    if filename and not filename.startswith("<") and source.is_file() and "ipykernel_" not in filename:
        return [source.parent]
    return []


def _check_model_string(model: object, where: str) -> None:
    """Refuse, when the role is made, a model string ``"openai:..."`` not of its form (not at its first step)."""
    if isinstance(model, str) and model.startswith("openai:"):
        from .models.openai import parse_model_string  # no SDK: that module imports the openai client only to send

        try:
            parse_model_string(model)
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
