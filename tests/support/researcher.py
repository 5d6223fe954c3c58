"""The researcher: a role that looks a topic up, asks the person which one, and reports; recorded and replayed by the
replay tests and the shared-infrastructure tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agl_notebook import Role, Run, Screen, ScriptedCall, ScriptedTurn, ToolResult, describe, reporting_tool, tool
from agl_notebook.models.base import Model
from agl_notebook.replay import Store
from tests.support.steps import Query, which


@dataclass(frozen=True)
class Request:
    text: str = describe("What to look into.")


@dataclass(frozen=True)
class Answer:
    summary: str = describe("What was found.")
    count: int = describe("How many were found.")


INSTRUCTIONS = "You look things up and report what you found."
SCRIPT = [
    ScriptedTurn("Let me look that up.", [ScriptedCall("look_up", {"text": "retries"})]),
    ScriptedTurn("Found two of them.", [ScriptedCall("report_answer", {"summary": "two retries", "count": 2})]),
]
RESULT = Answer("two retries", 2)


def researcher(
    run: Run,
    handled: list[str],
    *,
    name: str = "researcher",
    instructions: str = INSTRUCTIONS,
    tool_description: str = "Look a topic up.",
    tool_payload: type[Any] = Query,
    report_description: str = "Report what you found.",
    report_payload: type[Any] = Answer,
    result_text: str = "found {answer}",
    max_tokens: int = 4096,
    max_tool_roundtrips: int = 25,
    reminders: int = 1,
) -> Role[Any]:
    """A role whose one tool counts its calls in ``handled`` and asks the person a question via the run's terminal."""

    async def look_up(query: Any) -> ToolResult:
        handled.append(query.text)
        answer = await run.terminal.show(which, text=f"Which {query.text}?")
        return ToolResult(result_text.replace("{answer}", answer))

    return Role(
        name,
        instructions,
        [
            tool("look_up", tool_description, tool_payload, look_up),
            reporting_tool("report_answer", report_description, report_payload),
        ],
        max_tokens=max_tokens,
        max_tool_roundtrips=max_tool_roundtrips,
        reminders=reminders,
    )


def answering(asked: list[str], answer: str = "the slow ones") -> Callable[[Screen[Any]], object]:
    """Scripted answers that note every question they were asked."""

    def answer_fn(screen: Screen[Any]) -> object:
        asked.append(screen.text)
        return answer

    return answer_fn


async def record_once(
    model: Model, store: Store | None = None, value: object = Request("retries"), **changes: Any
) -> Run:
    """Run the researcher live once (mode auto) and return its Run (whose store holds the record)."""
    run = Run(model=model, answers=answering([]), store=store)
    assert await run.step(researcher(run, [], **changes), value) == RESULT
    return run
