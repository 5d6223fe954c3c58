"""A 50-item run.map in real JupyterLab: the one live view updates while items run; one item's question and another
item's tool call wait in it and are answered there; saved, restarted and run again, it makes no request and draws
the same final view.
"""

from __future__ import annotations

from typing import Any

from tests.browser.harness import QUESTION, UI_ACTION, Jupyter, records_anywhere

SETUP = """\
import asyncio
from dataclasses import dataclass
from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Task:
    text: str = describe("What to do.")

@dataclass(frozen=True)
class Done:
    summary: str = describe("What was done.")

async def ask_day(task: Task) -> ToolResult:
    day = await run.terminal.ask(Screen(f"Which day for {task.text}?", [TextInput("Day")]))
    return ToolResult(day)

async def send(task: Task) -> ToolResult:
    return ToolResult(f"sent {task.text}")

worker = Role(
    "worker",
    instructions="Do the task.",
    accepts=(Task,),
    tools=[
        tool("ask_day", "Ask which day.", Task, ask_day),
        tool("send", "Send it.", Task, send, approval="ask"),
        reporting_tool("report", "Report.", Done),
    ],
)

async def script(request):
    text = request.messages[0].text.split('"text": "')[1].split('"')[0]
    await asyncio.sleep(0.05)
    if len(request.messages) == 1 and text in ("plan 7", "mail 23"):
        return {"calls": [{"name": "ask_day" if text == "plan 7" else "send", "args": {"text": text}}]}
    done = request.messages[-1].content[0].content if len(request.messages) > 1 else "done"
    return {"calls": [{"name": "report", "args": {"summary": f"{text}: {done}"}}]}

MODEL = ScriptedModel(script)
TASKS = [Task("plan 7" if i == 7 else "mail 23" if i == 23 else f"task {i}") for i in range(50)]"""

CELLS = [
    SETUP,
    "run = Run(model=MODEL)\nresults = await run.map(worker, TASKS, concurrency=4)",
    "# NBVAL_IGNORE_OUTPUT\nprint(MODEL.calls)",
]
MAP_CELL, CALLS_CELL = 1, 2


def map_text(nb: Any) -> str:
    text: str = nb.output_text(MAP_CELL)
    return text


def test_a_map_s_question_and_approval_are_answered_in_its_view_and_it_replays_after_a_restart(
    jupyter: Jupyter,
) -> None:
    jupyter.server.write_notebook("map.ipynb", CELLS)
    nb = jupyter.open("map.ipynb", ui="lab")
    nb.run_all()
    live = nb.output(MAP_CELL).locator(".agl-map-live")
    nb.wait_visible(live, "the map's live view", QUESTION)
    # The question of item 7 waits in the map's view, under a line naming the item and its input.
    nb.question_form(MAP_CELL)
    assert "Item 7" in nb.output(MAP_CELL).inner_text() and "plan 7" in nb.output(MAP_CELL).inner_text()
    nb.wait_until(lambda: " done, " in live.inner_text(), "the live view to count finished items", UI_ACTION)
    nb.shot("map-question")
    # A person starts typing while the other items run and the view redraws around the form, then corrects it.
    nb.type_answer("Mon", cell=MAP_CELL)
    counted = live.inner_text()
    nb.wait_until(lambda: live.inner_text() != counted, "the live view to redraw while the answer is typed", QUESTION)
    assert nb.question_field_value(MAP_CELL) == "Mon", "a redraw of the map's view kept what was typed"
    field = nb.output(MAP_CELL).locator(".agl-form input[type=text]").first
    field.press("Control+a")
    field.press("Backspace")
    nb.answer("Tuesday", cell=MAP_CELL)
    # The approval of item 23's call, in the same view.
    approval = nb.output(MAP_CELL).locator(".agl-approval")
    nb.wait_visible(approval, "the approval form of item 23's call", QUESTION)
    assert "Item 23" in nb.output(MAP_CELL).inner_text()
    nb.shot("map-approval")
    approval.get_by_role("button", name="Approve").first.click(timeout=UI_ACTION * 1000)
    nb.wait_cells_done(what="the map to finish")
    final = map_text(nb)
    assert final.startswith("map 'worker' of role 'worker': 50 items: 50 done, 0 failed"), final
    assert "plan 7: Tuesday" in final and "mail 23: sent mail 23" in final
    assert nb.output(MAP_CELL).locator(".agl-map-live").count() == 0, "the live view became the static one"
    assert nb.output_text(CALLS_CELL).strip() == "52"  # 50 items, two of them with a second request
    saved = nb.save()
    records = [r for r in records_anywhere(saved) if r.get("role") == "worker"]
    assert len({r["id"] for r in records}) == 50

    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart")
    assert nb.output_text(CALLS_CELL).strip() == "0", "every item replayed: no request"
    assert map_text(nb) == final


SLOW_CELLS = [
    SETUP.replace("await asyncio.sleep(0.05)", "await asyncio.sleep(0.3)"),
    "run = Run(model=MODEL)\nresults = await run.map(worker, TASKS[8:23], concurrency=2)",
]


def test_a_row_opens_its_item_s_step_and_stop_keeps_the_finished_items(jupyter: Jupyter) -> None:
    jupyter.server.write_notebook("map_stop.ipynb", SLOW_CELLS)
    nb = jupyter.open("map_stop.ipynb", ui="lab")
    nb.run_all()
    row = nb.output(MAP_CELL).locator('.agl-map-live tr[data-item="0"]')
    nb.wait_visible(row, "the first finished item's row in the live table", QUESTION)
    row.click(timeout=UI_ACTION * 1000)
    detail = nb.output(MAP_CELL).locator(".agl-map-detail")
    nb.wait_until(lambda: "task 8: done" in detail.inner_text(), "the item's step under the table", UI_ACTION)
    assert "report" in detail.inner_text()
    nb.shot("map-row-opened")
    detail.get_by_role("button", name="Close").click(timeout=UI_ACTION * 1000)
    nb.wait_until(lambda: detail.inner_text().strip() == "", "the opened step to close", UI_ACTION)
    nb.output(MAP_CELL).locator('.agl-map-live tr[data-item="1"]').focus(timeout=UI_ACTION * 1000)
    nb.page.keyboard.press("Enter")  # a row opens from the keyboard too
    nb.wait_until(lambda: "task 9: done" in detail.inner_text(), "the second item's step, opened with Enter", UI_ACTION)
    nb.output(MAP_CELL).get_by_role("button", name="Stop").click(timeout=UI_ACTION * 1000)
    nb.wait_cells_done(what="the stopped map to end")
    final = map_text(nb)
    assert "items (stopped)" in final and "not run" in final, final
    assert "task 8: done" in final


LAST_EXPRESSION_CELLS = [
    SETUP,
    "run = Run(model=MODEL)\nawait run.map(worker, TASKS[:5], name='last')",
    "_",
]
LATER_CELL = 2


def test_a_map_as_the_cells_last_expression_draws_its_table_once_live_and_replayed(jupyter: Jupyter) -> None:
    jupyter.server.write_notebook("map_last.ipynb", LAST_EXPRESSION_CELLS)
    nb = jupyter.open("map_last.ipynb", ui="lab")
    nb.set_theme("JupyterLab Dark")
    nb.run_all()
    nb.wait_cells_done_without_question(what="the map to finish")

    def shown() -> tuple[int, str, int, str]:
        cell, later = nb.output(MAP_CELL), nb.output(LATER_CELL)
        return (cell.locator("table").count(), cell.inner_text(), later.locator("table").count(), later.inner_text())

    tables, text, later_tables, later_text = shown()
    nb.output(LATER_CELL).scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    nb.shot("map-last-expression-dark")
    assert tables == 1, f"the cell that ran the map shows its table once, not {tables} times: {text!r}"
    assert text.count("task 4: done") == 1, text
    assert "map 'last' of role 'worker': 5 items: 5 done, 0 failed" in text and "(the table is above)" in text, text
    assert later_tables == 1 and "task 4" in later_text, "a later cell shows the results as the table again"
    live = shown()
    nb.save()
    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart")
    nb.output(LATER_CELL).scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    nb.shot("map-last-expression-replayed")
    assert shown() == live, "the replay shows the same outputs"
