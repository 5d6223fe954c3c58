"""The errors of running JSON-function agents, and `ErrorInfo`, how an error handler sees one.

Inside an agent, an error a command raises goes to the command's ``onError``, then to its function's; there ``exc``
holds it as an `ErrorInfo` (its type name, message and, for HTTP errors, status and body). An error no handler
takes ends the top-level call with `FunctionCallError`. Some errors are never handled inside the agent, because
handling them would hide a bug, a runaway or a broken recording: `ReentrancyError`, `CommandBudgetError`, and a
replay that diverges (`agl_notebook.errors.ReplayMissError`).

All of them are `agl_notebook.errors.UpstreamUnexpected` (so still ``RuntimeError``): the agent's program, run
upstream of the caller, did something the call cannot go on from. That holds for the expression sandbox's errors
(`ExpressionError`: an expression of the agent failed or was refused) and for `ReplayedError` (an error that
happened when the call was recorded) too: inside a call a handler sees them as `ErrorInfo`, and a call they end
raises `FunctionCallError`. A problem with the agent file itself is `agl_notebook.functions.AgentInvalidError`, an
`agl_notebook.errors.InputError`, raised before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UpstreamUnexpected

if TYPE_CHECKING:
    import ast


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


# Expressions (the sandbox of `agl_notebook.functions.expressions`)


class ExpressionError(UpstreamUnexpected):
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
            return f"{self.message}\n    {shorten(self.source)}"
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


def shorten(text: str, limit: int = 160) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Replays


class ReplayedError(UpstreamUnexpected):
    """An error that happened when the call was recorded, raised again as it replays (see `functions._tape`)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        """The recorded error's type name."""


# Commands and calls


class CommandError(UpstreamUnexpected):
    """A command could not do its work (a value of the wrong kind, a loop over more items than its bound)."""


class LoopBoundError(CommandError):
    """A ``loop`` was given more items than its ``max``; nothing is skipped silently."""


class ApiError(CommandError):
    """An ``api`` command failed: an error status, no response in time, or no connection."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status, when a response came."""
        self.body = body
        """The response's body (parsed JSON, or text), when a response came."""


class ApiTimeoutError(ApiError):
    """No response within the timeout."""


class ApiConnectionError(ApiError):
    """The request could not be sent, or the response could not be read."""


class MissingSecretError(ApiError):
    """A profile reads an environment variable that is not set."""


class CommandBudgetError(UpstreamUnexpected):
    """A call ran more commands than its agent allows (``max_commands``): a runaway loop.

    Never handled by ``onError``, which could otherwise keep it running.
    """


class ReentrancyError(UpstreamUnexpected):
    """A function was called while it was already running, directly or through others.

    The message shows the call chain. Never handled by ``onError``.
    """

    def __init__(self, message: str, *, chain: tuple[str, ...]) -> None:
        super().__init__(message)
        self.chain = chain
        """The functions running, outermost first, ending with the one called again."""


class FunctionCallError(UpstreamUnexpected):
    """A top-level call ended with an error no ``onError`` handled."""

    def __init__(self, message: str, *, function: str, error: ErrorInfo, path: str, chain: tuple[str, ...]) -> None:
        super().__init__(message)
        self.function = function
        """The function called at the top level."""
        self.error = error
        """The error as an error handler would have seen it."""
        self.path = path
        """The JSON path of the command that failed."""
        self.chain = chain
        """The functions running when it failed, outermost first."""
