"""agl_notebook: design and run LLM agents inside Jupyter notebooks.

A role is a model, instructions, tools and at most one reporting tool; `Run.step` runs one role on one typed input
until the agent reports a typed result. In a notebook, steps draw live widget views, ask questions through input
widgets, and are recorded in the notebook's metadata so that re-executing it replays them with no model call.
"""

from typing import TYPE_CHECKING, Any

from .errors import InputError, RoleIncompleteError, UpstreamUnexpected
from .media import Document, Image
from .models.base import Effort, Model, Thinking
from .models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, scripted_unless_credentials
from .payloads import JsonValue, describe
from .roles import Claude, Role, RoleFactory, prompt_file, role
from .run import Run
from .tools import ReportingTool, Tool, ToolResult, reporting_tool, tool

if TYPE_CHECKING:
    from .approvals import Approve, Deny, Edit
    from .events import Event
    from .mcp import MCPServer
    from .models.prices import PriceTable, Rates
    from .run._judge import JudgeCase, Verdict, judge
    from .run._map_state import MapItemError, MapResults
    from .screens import ChoiceInput, ConfirmInput, NumberInput, Screen, TextInput
    from .server_tools import CodeExecution, UserLocation, WebFetch, WebSearch

__version__ = "0.1.0"

# What a notebook of plain steps never uses loads when first asked for: approvals, questions' screens, the whole
# event vocabulary (with the JSON functions' events), a map's results, the price table (docs/architecture.md, "Import
# time").
_ON_FIRST_USE = {
    "MCPServer": "mcp",
    "Approve": "approvals",
    "Deny": "approvals",
    "Edit": "approvals",
    "Event": "events",
    "ChoiceInput": "screens",
    "ConfirmInput": "screens",
    "NumberInput": "screens",
    "Screen": "screens",
    "TextInput": "screens",
    "MapItemError": "run._map_state",
    "MapResults": "run._map_state",
    "JudgeCase": "run._judge",
    "Verdict": "run._judge",
    "judge": "run._judge",
    "PriceTable": "models.prices",
    "Rates": "models.prices",
    "CodeExecution": "server_tools",
    "UserLocation": "server_tools",
    "WebFetch": "server_tools",
    "WebSearch": "server_tools",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once: the next lookup finds it without this function
    return value


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
    "Image",
    "Document",
    "describe",
    "prompt_file",
    "reporting_tool",
    "role",
    "tool",
    "MCPServer",
    # Tools Anthropic runs (docs/server-tools.md): Role(server_tools=[WebSearch(max_uses=3)])
    "CodeExecution",
    "UserLocation",
    "WebFetch",
    "WebSearch",
    # Running steps, asking questions, approving tool calls
    "Approve",
    "ChoiceInput",
    "ConfirmInput",
    "Deny",
    "Edit",
    "Event",
    "MapItemError",
    "MapResults",
    # Evaluating (docs/evaluating.md): run.map(..., score=judge(role, rubric), epochs=3)
    "JudgeCase",
    "Verdict",
    "judge",
    "NumberInput",
    "Run",
    "Screen",
    "TextInput",
    # Models
    "Effort",
    "Model",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "Thinking",
    "scripted_unless_credentials",
    # Prices (docs/cost.md): Run(prices={model id: Rates(...)})
    "PriceTable",
    "Rates",
    # Errors
    "InputError",
    "RoleIncompleteError",
    "UpstreamUnexpected",
    "__version__",
]
