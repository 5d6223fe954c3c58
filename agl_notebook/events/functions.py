"""The events of a running JSON function (`agl_notebook.functions`): part of the one vocabulary, `Event`.

They load with the first JSON function (or the first use of `Event`), not with every notebook: seven dataclasses
that a notebook of roles never draws (docs/architecture.md, "Import time").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from .._fieldwise import Fieldwise
from ..payloads import JsonValue


@dataclass(frozen=True, eq=False, repr=False)
class FunctionCalled(Fieldwise):
    """A function started: called at the top level, by ``func``, or by a model as a tool."""

    function: str
    """The function's name."""
    args: JsonValue
    """Its arguments, as JSON."""
    depth: int
    """0 for the top-level call, 1 for a function it calls, and so on."""
    caller: str = ""
    """The JSON path of the command that called it ("" at the top level)."""
    type: Literal["function.called"] = field(default="function.called", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class FunctionReturned(Fieldwise):
    """A function finished, with its result."""

    function: str
    """The function's name."""
    result: JsonValue
    """Its result, as JSON."""
    depth: int
    """As in `FunctionCalled`."""
    type: Literal["function.returned"] = field(default="function.returned", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class CommandStarted(Fieldwise):
    """A command is about to run."""

    function: str
    """The function it belongs to."""
    command: str
    """Its kind: ``set``, ``api``, ``llm`` ..."""
    path: str
    """Its JSON path in the agent file."""
    type: Literal["command.started"] = field(default="command.started", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class Logged(Fieldwise):
    """A ``log`` command's message."""

    function: str
    """The function that logged it."""
    path: str
    """The command's JSON path."""
    message: str
    """The text logged (a value that is not text is logged as JSON)."""
    type: Literal["function.log"] = field(default="function.log", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ErrorHandled(Fieldwise):
    """A command or function failed and its ``onError`` block runs."""

    function: str
    """The function whose handler runs."""
    path: str
    """The JSON path of the handler."""
    error: str
    """The error's type name (what ``exc.type`` holds)."""
    message: str
    """The error's message (what ``exc.message`` holds)."""
    type: Literal["function.error_handled"] = field(default="function.error_handled", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ApiRequested(Fieldwise):
    """An ``api`` command sends a request."""

    profile: str
    """The profile's name."""
    method: str
    """The HTTP method."""
    url: str
    """The URL without any value read from the environment."""
    type: Literal["api.requested"] = field(default="api.requested", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ApiResponded(Fieldwise):
    """An ``api`` command got its response (or failed to)."""

    profile: str
    """The profile's name."""
    method: str
    """The HTTP method."""
    url: str
    """As in `ApiRequested`."""
    status: int | None
    """The HTTP status, or None when no response came (a timeout, a refused connection)."""
    is_error: bool
    """True when the command fails with this response."""
    type: Literal["api.responded"] = field(default="api.responded", init=False)


FunctionEvent: TypeAlias = (
    FunctionCalled | FunctionReturned | CommandStarted | Logged | ErrorHandled | ApiRequested | ApiResponded
)
"""Any event of a running JSON function."""

FUNCTION_EVENT_TYPES: tuple[type[FunctionEvent], ...] = (
    FunctionCalled,
    FunctionReturned,
    CommandStarted,
    Logged,
    ErrorHandled,
    ApiRequested,
    ApiResponded,
)
"""Every class of `FunctionEvent`, in the order of `agl_notebook.events.EVENT_TYPES`."""
