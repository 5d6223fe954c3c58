"""The step every benchmark measures: request 1 calls ``look_up``, request 2 reports an ``Answer``.

Shared so that the core, replay and Anthropic-path figures are about the very same step.
"""

from __future__ import annotations

from dataclasses import dataclass

from agl_notebook import Role, ScriptedCall, ScriptedModel, ScriptedTurn, ToolResult, reporting_tool, tool
from agl_notebook.payloads import JsonObject

PROMPT = "Look up retries and report how many you found."
INSTRUCTIONS = "You look things up and report what you found."


@dataclass(frozen=True)
class Lookup:
    """What to look up."""

    topic: str
    limit: int


@dataclass(frozen=True)
class Answer:
    """What was found."""

    summary: str
    count: int


# The arguments both models send: pydantic-ai's TestModel generates {"topic": "a", "limit": 0} from the schema, so
# the script does the same; the reported answer is fixed.
TOOL_ARGS: JsonObject = {"topic": "a", "limit": 0}
ANSWER_ARGS: JsonObject = {"summary": "done", "count": 1}
EXPECTED = Answer("done", 1)


async def look_up(payload: Lookup) -> ToolResult:
    return ToolResult(f"{payload.topic}:{payload.limit}")


ROLE: Role[Answer] = Role(
    name="looker",
    instructions=INSTRUCTIONS,
    tools=[
        tool("look_up", "Look a topic up.", Lookup, look_up),
        reporting_tool("report_answer", "Report what you found.", Answer),
    ],
)


def scripted_model() -> ScriptedModel:
    """The script of the step: the tool call, then the report."""
    return ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("look_up", TOOL_ARGS)]),
            ScriptedTurn(calls=[ScriptedCall("report_answer", ANSWER_ARGS)]),
        ]
    )
