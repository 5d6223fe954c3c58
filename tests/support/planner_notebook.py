"""The notebook the browser tests run: a step whose model asks the person a question and plans with the answer.

The kernel tests (``tests/notebook/test_kernel.py`` and others) run the same planner role and scripted model: the
model's first reply asks "Which day suits you?" through the ``ask`` tool (a Text input widget with a Submit button),
its second reports ``Meet on <answer>``.
"""

from __future__ import annotations

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, role, tool

CALLS = []

@dataclass(frozen=True)
class Question:
    text: str = describe("What to ask the person.")

@dataclass(frozen=True)
class Plan:
    steps: list[str] = describe("The plan's steps, in order.")

def asking(text: str) -> Screen[str]:
    return Screen(text, [TextInput("Answer", str)])

@role(accepts=(str,))
def planner(run: Run) -> Role[Plan]:
    async def ask(question: Question) -> ToolResult:
        CALLS.append(question)
        return ToolResult(text=await run.terminal.show(asking, text=question.text))
    return Role(name="planner", instructions="Plan the meeting.",
                tools=[tool("ask", "Ask the person a question.", Question, ask),
                       reporting_tool("report_plan", "Report the plan.", Plan)])

def script(request):
    if len(request.messages) == 1:
        return {"text": "I need a day.", "calls": [{"name": "ask", "args": {"text": "Which day suits you?"}}]}
    answer = request.messages[-1].content[0].content
    return {"calls": [{"name": "report_plan", "args": {"steps": [f"Meet on {answer}"]}}]}

MODEL = ScriptedModel(script)"""

CELLS = [
    SETUP,
    "run = Run(model=MODEL)",
    'plan = await run.step(planner, "Plan a meeting")\nplan',
    "print(MODEL.calls)",
]
STEP_CELL = 2
"""The cell running the step (its output: the step's view, then the plan's repr)."""
CALLS_CELL = 3
"""The cell printing how many model requests were made."""

LIVE_CALLS = "2"
"""Model requests of the live step: the question, then the report."""

FINAL_TABLE = ".agl-step.agl-finished table.agl-result"
"""The final static view's result table."""
