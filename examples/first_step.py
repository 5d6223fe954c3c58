"""A first step, offline: a reviewer role with one tool and a reporting tool, run on a scripted model.

Run it after ``make demo`` (which sets up ``.venv``) with ``.venv/bin/python examples/first_step.py``, or with any
Python where agl_notebook is installed (``pip install .``): ``python examples/first_step.py``. It prints each event
as the step runs, then runs the same step again: the second time it replays from the recording the first run left
in the Run's store, with no model call and no tool call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agl_notebook import (
    Claude,
    Event,
    Role,
    Run,
    ScriptedModel,
    ToolResult,
    describe,
    reporting_tool,
    role,
    tool,
)


@dataclass(frozen=True)
class Request:
    diff: str = describe("The change to review, as a unified diff.")


@dataclass(frozen=True)
class Query:
    text: str = describe("What to search the project's docs for.")


@dataclass(frozen=True)
class Review:
    issues: list[str] = describe("Every problem you found, one sentence each.")
    approve: bool = describe("True if the change can be merged as it is.")


DOCS = {"retries": "Network calls retry three times with exponential backoff."}


async def look_up(query: Query) -> ToolResult:
    found = [text for key, text in DOCS.items() if key in query.text.lower()]
    return ToolResult(text="\n".join(found) or "Nothing found.", rejected=not found)


@role(model=Claude.OPUS, accepts=(Request,))
def reviewer() -> Role[Review]:
    return Role(
        name="reviewer",
        instructions="You review code changes against the project's documented conventions.",
        tools=[
            tool("look_up", "Search the project's docs.", Query, look_up),
            reporting_tool("report_review", "Report what you found.", Review),
        ],
    )


# What the model says, written down: the first reply calls the tool with a wrong argument type (the loop sends
# the problem back), the second fixes it, the third reports.
SCRIPT = ScriptedModel(
    [
        {"text": "Let me check the conventions.", "calls": [{"name": "look_up", "args": {"text": 42}}]},
        {"calls": [{"name": "look_up", "args": {"text": "retries"}}]},
        {
            "text": "The change drops the retry.",
            "calls": [
                {
                    "name": "report_review",
                    "args": {
                        "issues": ["The new HTTP call does not retry, against the documented convention."],
                        "approve": False,
                    },
                }
            ],
        },
    ]
)


def show(event: Event) -> None:
    if event.type == "response.output_text.delta":
        print(f"  | {event.delta}")
    else:
        print(f"[{event.type}] " + ", ".join(f"{k}={v!r}" for k, v in vars_of(event).items() if k != "type"))


def vars_of(event: Event) -> dict[str, object]:
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


async def main() -> None:
    run = Run(model=SCRIPT, on_event=show)
    request = Request(diff="+ response = http.get(url)")
    review = await run.step(reviewer, request)
    print(f"\n\nResult: {review}\n\n--- the same step in a new Run on the same store: it replays ---")
    # Identical steps within one Run are told apart by their occurrence number (the second identical step of a
    # Run is a new step), so a rerun of the script is a new Run sharing the recordings.
    calls_before = len(SCRIPT.requests)
    again = await Run(model=SCRIPT, on_event=show, store=run.store).step(reviewer, request)
    print(f"\n\nResult: {again}; model calls during the replay: {len(SCRIPT.requests) - calls_before}")


if __name__ == "__main__":
    asyncio.run(main())
