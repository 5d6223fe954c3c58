"""Tools an agent can call, and the reporting tool it hands back a step's result through."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._fieldwise import Fieldwise
from .errors import InputError
from .payloads import JsonObject, PayloadSpec, payload_spec

if TYPE_CHECKING:
    from .approvals import ApprovalPolicy  # loaded by the first tool that has one

P = TypeVar("P")

# The Messages API's rule for tool names; checked when the tool is built rather than when the API refuses it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_tool_name(name: object) -> bool:
    """Whether ``name`` is a valid tool name: 1 to 64 letters, digits, '_' or '-' (the Messages API's rule)."""
    return isinstance(name, str) and _TOOL_NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolResult(Fieldwise):
    """What a tool's handler returns to the agent."""

    text: str
    """What the agent reads back from the call."""
    rejected: bool = False
    """True tells the agent the call failed, False that it succeeded."""


@dataclass(frozen=True, eq=False, repr=False)
class Tool(Fieldwise, Generic[P]):
    """A tool an agent can call. Build it with `tool()`."""

    name: str
    """The name the agent calls it by, unique within a role."""
    description: str
    """The whole of what the agent reads to decide this is the tool it wants."""
    payload: type[P]
    """The dataclass the agent's arguments are checked against and built into."""
    handler: Callable[[P], Awaitable[ToolResult]] = field(repr=False, compare=False)
    """The coroutine function awaited with the built payload."""
    spec: PayloadSpec = field(repr=False, compare=False)
    """The compiled payload: its JSON Schema and validator."""
    approval: ApprovalPolicy = field(default=None, repr=False, compare=False)
    """Who decides whether a call runs: None (it runs), ``"ask"`` (a person) or a policy function; not part of the
    fingerprint (docs/roles-and-tools.md, "Approvals")."""

    @property
    def input_schema(self) -> JsonObject:
        """The JSON Schema of the arguments, as the model reads it."""
        return self.spec.schema


@dataclass(frozen=True, eq=False, repr=False)
class ReportingTool(Fieldwise, Generic[P]):
    """The tool an agent reports a step's result through. Build it with `reporting_tool()`."""

    name: str
    """The name the agent calls it by, unique among the role's tools."""
    description: str
    """The whole of what the agent reads to decide this is the tool it wants."""
    payload: type[P]
    """The dataclass the step's result is returned as."""
    spec: PayloadSpec = field(repr=False, compare=False)
    """The compiled payload: its JSON Schema and validator."""

    @property
    def input_schema(self) -> JsonObject:
        """The JSON Schema of the payload, as the model reads it."""
        return self.spec.schema


def tool(
    name: str,
    description: str,
    payload: type[P],
    handler: Callable[[P], Awaitable[ToolResult]],
    *,
    approval: ApprovalPolicy = None,
) -> Tool[P]:
    """Build a tool an agent can call.

    Args:
        name: The name the agent calls it by, unique within a `Role`.
        description: The whole of what the agent reads to decide this is the tool it wants.
        payload: The dataclass the agent's arguments are checked against and built into.
        handler: The coroutine function awaited with the built payload; its `ToolResult` goes back to the agent.
        approval: Whether a call runs at once (None, the default), waits for a person to approve, edit or deny it
            (``"ask"``), or is decided per call by ``approval(payload, request)`` returning ``"approve"``,
            ``"deny"`` (or ``Deny(message)``) or ``"ask"``. Decided after the arguments pass validation, before the
            handler runs; recorded like answers; not part of the fingerprint.

    Raises:
        InputError: An empty name or description, a name the Messages API would refuse, a payload that can't be
            saved as JSON, a handler that is not callable, or an approval that is none of the above.
    """
    _check_name_and_description("tool", name, description)
    if not callable(handler):
        raise InputError(f"tool {name!r}: the handler must be an async function of the payload, not {handler!r}.")
    if inspect.isfunction(handler) and not inspect.iscoroutinefunction(handler):
        raise InputError(
            f"tool {name!r}: the handler {handler.__qualname__} must be an async function (async def) returning "
            "a ToolResult."
        )
    if approval is not None:
        from .approvals import check_policy

        check_policy(f"tool {name!r}", approval)
    return Tool(name, description, payload, handler, _spec("tool", name, payload), approval)


def with_report_instruction(system: str, tool_name: str, *, ends: str) -> str:
    """``system`` followed by how to hand back the result: call ``tool_name``, which ends ``ends``.

    The one wording of the instruction for roles and JSON functions. It is part of the system text, so of every
    recorded step's fingerprint: changing a character of it makes every recording stale.
    """
    head = f"{system.rstrip()}\n\n" if system.strip() else ""
    return f"{head}When you have the result, hand it back by calling the `{tool_name}` tool. Calling it ends {ends}."


def reporting_tool(name: str, description: str, payload: type[P]) -> ReportingTool[P]:
    """Declare the tool an agent reports a step's result through.

    Args:
        name: The name the agent calls it by, unique among the role's tools.
        description: The whole of what the agent reads to decide this is the tool it wants.
        payload: The dataclass the step's result is returned as.

    Raises:
        InputError: An empty name or description, or a payload that can't be saved as JSON.
    """
    _check_name_and_description("reporting_tool", name, description)
    return ReportingTool(name, description, payload, _spec("reporting_tool", name, payload))


def _check_name_and_description(kind: str, name: object, description: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{kind}(): the name must be a non-empty string, not {name!r}.")
    if not _TOOL_NAME.fullmatch(name):
        raise InputError(
            f"{kind} {name!r}: a tool name may use only letters, digits, '_' and '-', at most 64 characters."
        )
    if not isinstance(description, str) or not description.strip():
        raise InputError(
            f"{kind} {name!r}: the description must be non-empty; it is the whole of what the agent reads to "
            "decide this is the tool it wants."
        )


def _spec(kind: str, name: str, payload: Any) -> PayloadSpec:
    try:
        return payload_spec(payload)
    except InputError as e:
        raise InputError(f"{kind} {name!r}: {e}") from None
