"""agl_notebook: design and run LLM agents inside Jupyter notebooks.

A role is a model, instructions, tools and at most one reporting tool; `Run.step` runs one role on one typed input
until the agent reports a typed result. In a notebook, steps draw live widget views, ask questions through input
widgets, and are recorded in the notebook's metadata so that re-executing it replays them with no model call.
"""

from typing import TYPE_CHECKING, Any

from .approvals import Approve, Deny, Edit
from .errors import InputError, RoleIncompleteError, UpstreamUnexpected
from .events import Event
from .models.base import Model
from .models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, scripted_unless_credentials
from .payloads import JsonValue, describe
from .roles import Claude, Role, RoleFactory, prompt_file, role
from .run import Run
from .screens import ChoiceInput, ConfirmInput, NumberInput, Screen, TextInput
from .tools import ReportingTool, Tool, ToolResult, reporting_tool, tool

if TYPE_CHECKING:
    from .run._map_state import MapItemError, MapResults

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # A map's results load with the first map (or the first to ask for them), not with every notebook.
    if name in ("MapItemError", "MapResults"):
        from .run import _map_state

        return getattr(_map_state, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext agl_notebook``: register the ``%agl`` magic."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    # Roles, tools and payloads
    "Claude",
    "JsonValue",
    "ReportingTool",
    "Role",
    "RoleFactory",
    "Tool",
    "ToolResult",
    "describe",
    "prompt_file",
    "reporting_tool",
    "role",
    "tool",
    # Running steps, asking questions, approving tool calls
    "Approve",
    "ChoiceInput",
    "ConfirmInput",
    "Deny",
    "Edit",
    "Event",
    "MapItemError",
    "MapResults",
    "NumberInput",
    "Run",
    "Screen",
    "TextInput",
    # Models
    "Model",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "scripted_unless_credentials",
    # Errors
    "InputError",
    "RoleIncompleteError",
    "UpstreamUnexpected",
    "__version__",
]
