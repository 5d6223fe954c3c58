"""The errors agl_notebook raises.

Two families, by whose move it was:

- `InputError`: what the person wrote is wrong (a payload type that can't be saved as JSON, an empty tool name,
  an input type the role doesn't accept, a missing prompt file). Raised as early as possible, usually when the thing
  is built rather than when the model first touches it.
- `UpstreamUnexpected`: the model, or something else upstream, did something the step cannot go on from (it never
  reported, it refused, its output was cut off inside a tool call, no recording matches in mode ``replay``). The
  errors of running a JSON-function agent (`agl_notebook.functions.errors`, the expression sandbox's among them)
  are of this family too; a problem with an agent file is an `InputError` (`agl_notebook.functions.AgentInvalidError`).

A step stopped by the kernel's interrupt ends with `agl_notebook.interrupts.StepInterrupted`. Warnings are issued
with `warn`, so they point at the person's line, not the library's. In a kernel, an error of either family is shown
with the person's frames only, none of the library's (`_families`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ._families import _MACHINERY, _PACKAGE
from ._families import InputError as InputError
from ._families import UpstreamUnexpected as UpstreamUnexpected

if TYPE_CHECKING:
    from types import FrameType

    from .replay.records import StepRecord
    from .transcript import Message

T = TypeVar("T")
P = ParamSpec("P")

_call_site: ContextVar[tuple[str, int, dict[str, Any]] | None] = ContextVar("agl_notebook_call_site", default=None)


def _outside_package(frame: FrameType | None) -> tuple[FrameType | None, int]:
    """The nearest frame from ``frame`` outwards that is not the package's, and how many frames out it is."""
    out = 0
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, out = frame.f_back, out + 1
    return frame, out


def warn(message: str, category: type[Warning]) -> None:
    """Issue a warning pointing at the person's line: the nearest frame outside agl_notebook.

    What ``warnings.warn(..., skip_file_prefixes=...)`` does from Python 3.12, for 3.11 as well. Where the nearest
    such frame is an event loop's or a thread's, the person's line stands in for it: the one noted by `at_call_site`
    (a step run by `Run.step_sync` on a worker thread), or in a kernel the line where the cell awaits (a step under
    ``asyncio.gather`` runs in a task of its own).
    """
    frame, out = _outside_package(sys._getframe(0))
    machinery = frame is None or frame.f_code.co_filename.startswith(_MACHINERY)
    site = (_call_site.get() or _awaiting_cell()) if machinery else None
    if site is not None:
        filename, lineno, module_globals = site
        warnings.warn_explicit(
            message,
            category,
            filename,
            lineno,
            module=module_globals.get("__name__"),
            registry=module_globals.setdefault("__warningregistry__", {}),
            module_globals=module_globals,
        )
        return
    # stacklevel 1 is this function's own line; `out` frames further is the person's.
    warnings.warn(message, category, stacklevel=out + 1 if frame is not None else 1)


def _awaiting_cell() -> tuple[str, int, dict[str, Any]] | None:
    """In a kernel, the executing cell's frame, found among the event loop's tasks: its file, line and globals."""
    from .notebook import _kernel  # imports nothing unless a kernel runs

    kernel = _kernel.kernel()
    if kernel is None:
        return None
    import asyncio  # loaded already in a kernel

    code = _kernel.executing_code()
    try:
        filename = kernel.shell.compile.get_code_name(code, code, kernel.shell.execution_count)
        tasks = asyncio.all_tasks()
    except Exception:  # an IPython or a loop that does not tell: the warning points where it can
        return None
    for task in tasks:
        awaiting: Any = task.get_coro()
        while awaiting is not None:  # the chain of coroutines the task awaits through, down to the cell's
            frame = getattr(awaiting, "cr_frame", None) or getattr(awaiting, "gi_frame", None)
            if frame is not None and frame.f_code.co_filename == filename:
                return filename, frame.f_lineno or 0, frame.f_globals
            awaiting = getattr(awaiting, "cr_await", None) or getattr(awaiting, "gi_yieldfrom", None)
    return None


def at_call_site(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, with the person's line that called into the library noted for `warn`.

    Seen on a worker thread too, when the thread runs in a copy of this context.
    """
    __tracebackhide__ = True
    frame, _ = _outside_package(sys._getframe(0))
    token = _call_site.set(
        (frame.f_code.co_filename, frame.f_lineno or 0, frame.f_globals) if frame is not None else None
    )
    try:
        return function(*args, **kwargs)
    finally:
        _call_site.reset(token)


class RoleIncompleteError(UpstreamUnexpected):
    """The agent stopped without reporting a result.

    The step's work is wiped; the transcript of what the agent did is kept here for debugging.
    """

    def __init__(self, message: str, *, role: str, transcript: Sequence[Message]) -> None:
        super().__init__(message)
        self.role = role
        """The name of the role whose step did not report."""
        self.transcript: tuple[Message, ...] = tuple(transcript)
        """Every message of the step, the agent's replies and the tool results, in order."""


class ItemNotRunError(UpstreamUnexpected):
    """A ``run.map`` item that never ran: the map was stopped (its Stop button) before the item started."""


class RecordedItemError(UpstreamUnexpected):
    """A ``run.map`` item's failure replayed from its failure record (mode ``replay``), not the live exception.

    The record keeps only the class name and the message (scrubbed) of what the item ended with, so this carries
    them: ``type_name`` (``BudgetExceededError``, ``ItemNotRunError``, ...) and ``str(error)``, the message. The map's
    table and the compare grid show it under ``type_name``, as the live run showed it.
    """

    def __init__(self, type_name: str, message: str, *, status: str = "failed", record_id: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name
        """The class name of the error the item ended with when it was recorded."""
        self.status = status
        """``failed`` (it ran and raised), or ``not_run`` (the map's Stop kept it from starting)."""
        self.record_id = record_id
        """The id of the failure record it was replayed from."""


class ModelRefusedError(UpstreamUnexpected):
    """The model declined to answer (stop reason `refusal`)."""


class ModelOutputTruncatedError(UpstreamUnexpected):
    """The model ran out of output tokens in the middle of a tool call, so the call cannot be read."""


class ScriptExhaustedError(UpstreamUnexpected):
    """A `ScriptedModel` was asked for a turn its script does not have."""


class NoAnswerError(UpstreamUnexpected):
    """A question was asked where nobody can answer it (no stdin, a headless run) and no answers were supplied."""


class NoDecisionError(NoAnswerError):
    """A tool call needs a person's approval where nobody can give it (a headless run) and no policy decides it.

    Raised before the tool's handler runs; the message names the tool and the setting that decides headless runs.
    """


class MissingCredentialsError(UpstreamUnexpected):
    """A model that needs the network was asked for a reply, but no credentials for it were found.

    The message says how to get credentials, or how to run without them (a recording, or a `ScriptedModel`).
    """


class ModelServerError(UpstreamUnexpected):
    """A model server refused a request or could not be reached, after the retries.

    Its message is the server's own, naming the server (``scheme://host:port/path``, never a key) and the model.
    """

    def __init__(self, message: str, *, server: str, model: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.server = server
        """The server, as the backend id names it."""
        self.model = model
        """The model asked for."""
        self.status_code = status_code
        """The HTTP status, or None when no response came."""


class ModelCallBlockedError(UpstreamUnexpected):
    """A step would call a model where model calls are blocked (under nbval, or with AGL_NOTEBOOK_BLOCK_MODELS=1)."""


class ContextWindowExceededError(UpstreamUnexpected):
    """The step's conversation no longer fits the model's context window (``model_context_window_exceeded``)."""


class ReplayMissError(UpstreamUnexpected):
    """A step had to replay (mode ``replay``) and no recording matches it, or its recording does not replay."""

    def __init__(self, message: str, *, nearest: StepRecord | None, differing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.nearest = nearest
        """The closest record, if there is any."""
        self.differing = differing
        """The fingerprint parts in which it differs (``occurrence`` when only that does)."""


class BudgetExceededError(UpstreamUnexpected):
    """A model request would pass the Run's budget (``Run(budget_usd=...)``), so it was not made.

    The step fails and is wiped like any other failure (nothing is recorded); the message names what was spent and
    the budget. Of the upstream family: what ran out is what the model's requests cost, not something the person
    wrote wrong.
    """

    def __init__(self, message: str, *, spent_usd: float, budget_usd: float, needed_usd: float) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        """What the Run had spent (settled requests) when the request was refused, in dollars."""
        self.budget_usd = budget_usd
        """The Run's budget, in dollars."""
        self.needed_usd = needed_usd
        """What the refused request was estimated to cost, in dollars."""


class PriceUnknownError(InputError):
    """A Run with a budget was asked to call a model the price table has no price for, so it cannot keep to it.

    Raised before the request; give the model's rates with ``Run(prices=...)`` (docs/cost.md).
    """


class BatchRequestError(UpstreamUnexpected):
    """A request sent in a Message Batch came back without a reply (errored, expired or canceled).

    Raised to the step that made the request once the engine's retries are spent, or at once for a request the API
    found invalid (``error_type`` ``invalid_request_error``): only that step fails, with the API's message.
    """

    def __init__(
        self, message: str, *, custom_id: str, batch_id: str, result: str, error_type: str = "", api_message: str = ""
    ) -> None:
        super().__init__(message)
        self.custom_id = custom_id
        """The request's ``custom_id`` in its batch."""
        self.batch_id = batch_id
        """The batch whose result this was."""
        self.result = result
        """The result's type: ``errored``, ``expired`` or ``canceled``."""
        self.error_type = error_type
        """For an errored request, the API's error type (``invalid_request_error``, ``overloaded_error``, ...)."""
        self.api_message = api_message
        """For an errored request, the API's own message."""


class MCPServerError(UpstreamUnexpected):
    """An MCP server failed a step (docs/mcp.md).

    It did not start, crashed, hung past its timeout, answered something that is not MCP, or listed tools that cannot
    be offered. Nothing of the step is recorded; the next use starts the server again.
    """

    def __init__(self, message: str, *, server: str, tool: str | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.server = server
        """The server's name (`MCPServer.name`)."""
        self.tool = tool
        """The tool (the server's name for it) whose call or listing failed, if one did."""
        self.stderr = stderr
        """The tail of what the server wrote to its stderr (stdio servers), scrubbed of secrets."""
