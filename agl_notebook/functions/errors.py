"""The errors of running JSON-function agents.

Inside an agent, an error a command raises goes to the command's ``onError``, then to its function's; there ``exc``
holds it as an `ErrorInfo` (its type name, message and, for HTTP errors, status and body). An error no handler
takes ends the top-level call with `FunctionCallError`. Some errors are never handled inside the agent, because
handling them would hide a bug, a runaway or a broken recording: `ReentrancyError`, `CommandBudgetError`, and a
replay that diverges (`agl_notebook.errors.ReplayMissError`).

All of them are `agl_notebook.errors.UpstreamUnexpected` (so still ``RuntimeError``): the agent's program, run
upstream of the caller, did something the call cannot go on from.
"""

from __future__ import annotations

from typing import Any

from ..errors import UpstreamUnexpected
from .expressions import ErrorInfo


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
