"""Agents written as JSON functions (docs/functions.md): load, validate and call them.

::

    from agl_notebook import Run
    from agl_notebook.functions import load_agent

    agent = load_agent("orders.agent.json")       # every problem at once, before anything runs
    status = await agent.call("lookupOrder", {"orderId": "ORD-1042"}, run=Run())

An agent file is JSON; `schema_path()` is its JSON Schema (point an editor at it). Dynamic strings are
``"{ expr }"``: one Python expression evaluated in the sandbox of `agl_notebook.functions.expressions`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..run.units import UnitOutcome
from ._tape import MAX_TAPE_BYTES
from .agent import Agent
from .errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    CommandBudgetError,
    CommandError,
    ErrorInfo,
    ExpressionError,
    ExpressionLimitError,
    ExpressionRuntimeError,
    ExpressionSyntaxError,
    FunctionCallError,
    LoopBoundError,
    MissingSecretError,
    ReentrancyError,
    SandboxError,
)
from .events import (
    ApiRequested,
    ApiResponded,
    CommandStarted,
    ErrorHandled,
    FunctionCalled,
    FunctionEvent,
    FunctionReturned,
    Logged,
)
from .expressions import DEFAULT_LIMITS, Expression, Limits, compile_expression, evaluate
from .validate import COMMANDS, AgentInvalidError, Problem, build_agent, check_agent


def load_agent(
    source: str | Path | Mapping[str, Any],
    *,
    profiles: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    transport: Any = None,
    limits: Limits = DEFAULT_LIMITS,
    max_commands: int = 1_000_000,
    max_recording_bytes: int = MAX_TAPE_BYTES,
) -> Agent:
    """Load and validate an agent.

    Args:
        source: A path to the agent file, its JSON text, or its content as a dict.
        profiles: Profiles to add, or settings to override by profile name (``{"orders": {"baseUrl": ...}}``).
        environ: Where the profiles' environment variables are read (``os.environ`` when None).
        transport: An httpx2 transport for ``api`` requests (``httpx2.MockTransport`` in tests).
        limits: The expression sandbox's bounds.
        max_commands: The most commands one top-level call may run.
        max_recording_bytes: The most bytes one top-level call's recording (its model replies, API responses and
            answers, as JSON) may take; an API response past it is an ``ApiError``.

    Raises:
        AgentInvalidError: The agent has problems; ``.problems`` lists every one with its JSON path.
    """
    spec = build_agent(source, profiles=profiles, limits=limits)
    return Agent(
        spec,
        environ=environ,
        transport=transport,
        limits=limits,
        max_commands=max_commands,
        max_recording_bytes=max_recording_bytes,
    )


def schema_path() -> Path:
    """The JSON Schema of agent files, shipped with the package (for editors, and ``"$schema"``)."""
    return Path(__file__).with_name("schema.json")


def agent_schema() -> dict[str, Any]:
    """The JSON Schema of agent files, read from `schema_path`."""
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


__all__ = [
    # Loading and calling
    "Agent",
    "COMMANDS",
    "agent_schema",
    "check_agent",
    "load_agent",
    "schema_path",
    # Validation
    "AgentInvalidError",
    "Problem",
    # Running
    "ApiConnectionError",
    "ApiError",
    "ApiTimeoutError",
    "CommandBudgetError",
    "CommandError",
    "ErrorInfo",
    "FunctionCallError",
    "LoopBoundError",
    "MissingSecretError",
    "ReentrancyError",
    # Recording (the hook a Run offers)
    "UnitOutcome",
    # Events
    "ApiRequested",
    "ApiResponded",
    "CommandStarted",
    "ErrorHandled",
    "FunctionCalled",
    "FunctionEvent",
    "FunctionReturned",
    "Logged",
    # Expressions
    "DEFAULT_LIMITS",
    "Expression",
    "ExpressionError",
    "ExpressionLimitError",
    "ExpressionRuntimeError",
    "ExpressionSyntaxError",
    "Limits",
    "SandboxError",
    "compile_expression",
    "evaluate",
]
