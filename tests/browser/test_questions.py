"""The question form in a real browser: every kind of field edited several times, an invalid number corrected twice,
a choice and a toggle changed after a rejected submission; the tool must receive exactly what the screen showed at
the last Submit. In JupyterLab (light and dark themes) and in Notebook 7.

A form of one widget per field lost every edit after the first here: the busy kernel never published the "idle"
status the browser's widget code waits for before it sends a model's next change.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.harness import Jupyter, NotebookPage, records_anywhere

SETUP = """\
from dataclasses import dataclass
from agl_notebook import (ChoiceInput, ConfirmInput, NumberInput, Role, Run, Screen, ScriptedModel, TextInput,
                          ToolResult, describe, reporting_tool, role, tool)

BOOKED = []

@dataclass(frozen=True)
class Request:
    what: str = describe("What to book.")

@dataclass(frozen=True)
class Plan:
    steps: list[str] = describe("The plan's steps, in order.")

def booking(what: str) -> Screen[tuple[str, int, str, bool]]:
    return Screen(f"Book {what}?", [TextInput("Title"), NumberInput("Attendees", int, min=1, max=20),
                                    ChoiceInput("Room", ["Aster", "Birch", "Cedar"]), ConfirmInput("Send invites")])

@role(accepts=(str,))
def booker(run: Run) -> Role[Plan]:
    async def book(request: Request) -> ToolResult:
        title, attendees, room, send = await run.terminal.show(booking, what=request.what)
        BOOKED.append((title, attendees, room, send))
        return ToolResult(text=f"title={title}; attendees={attendees}; room={room}; send={send}")
    return Role(name="booker", instructions="Book the meeting.",
                tools=[tool("book", "Ask the person for the booking.", Request, book),
                       reporting_tool("report_plan", "Report the plan.", Plan)])

def script(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "book", "args": {"what": "the meeting room"}}]}
    return {"calls": [{"name": "report_plan", "args": {"steps": [request.messages[-1].content[0].content]}}]}

MODEL = ScriptedModel(script)"""

CELLS = [SETUP, "run = Run(model=MODEL)", 'plan = await run.step(booker, "Book a meeting")\nplan', "print(BOOKED)"]
STEP_CELL, BOOKED_CELL = 2, 3
FINAL = ["Quarterly review", 7, "Cedar", True]
RANGE = "type a whole number from 1 to 20."


def edit_and_submit(nb: NotebookPage, shots: str) -> None:
    """Drive the form as a person would; every field is edited at least three times."""
    form = nb.question_form(STEP_CELL)
    form.scroll_into_view_if_needed()
    title, attendees, room = (nb.form_field(STEP_CELL, label) for label in ("Title", "Attendees", "Room"))
    assert attendees.get_attribute("placeholder") == "1\u201320", "the number field shows its range"
    assert "a whole number from 1 to 20" in form.inner_text()
    assert room.input_value() == "" and "Choose one" in room.inner_text(), "no room is chosen for the person"

    # Submission 1: an out-of-range number, no room and no answer to the toggle.
    title.fill("Planning")
    attendees.fill("50")
    nb.submit_form(STEP_CELL)
    nb.wait_form_error(STEP_CELL, "Attendees", f"Attendees: 50 is above the maximum 20; {RANGE}", "submission 1")
    nb.wait_form_error(STEP_CELL, "Room", "Room: choose one of Aster, Birch, Cedar.", "submission 1")
    nb.wait_form_error(STEP_CELL, "Send invites", "Send invites: choose Yes or No.", "submission 1")
    assert attendees.get_attribute("aria-invalid") == "true"
    error = nb.form_error(STEP_CELL, "Attendees")
    contrast = nb.contrast(error)
    nb.artifacts.write("error_contrast.json", json.dumps(contrast))
    assert contrast["ratio"] >= 4.5, f"the error colour reads on the form's background: {contrast}"
    nb.page.keyboard.press("Tab")  # no caret in the picture
    form.screenshot(path=str(nb.artifacts.folder / f"{shots}.png"))

    # Submission 2, by Enter in the number field: another invalid number; room Aster, toggle No.
    title.fill("Planning review")
    room.select_option("Aster")
    nb.choose(STEP_CELL, "Send invites", "No")
    attendees.fill("0")
    attendees.press("Enter")
    nb.wait_form_error(STEP_CELL, "Attendees", f"Attendees: 0 is below the minimum 1; {RANGE}", "submission 2")
    nb.wait_form_error(STEP_CELL, "Room", "", "submission 2")
    nb.wait_form_error(STEP_CELL, "Send invites", "", "submission 2")
    nb.shot("second-submission-rejected")

    # The last edits: every field changed again; the number corrected a second time.
    title.click()
    nb.page.keyboard.press("Control+a")
    title.press_sequentially("Quarterly review", delay=15)
    attendees.fill("12")
    attendees.fill("7")
    room.select_option("Birch")
    room.select_option("Cedar")
    nb.choose(STEP_CELL, "Send invites", "Yes")
    nb.choose(STEP_CELL, "Send invites", "No")
    nb.choose(STEP_CELL, "Send invites", "Yes")
    on_screen = [
        title.input_value(),
        attendees.input_value(),
        room.input_value(),
        nb.form_field(STEP_CELL, "Send invites").locator("input:checked").get_attribute("value"),
    ]
    assert on_screen == ["Quarterly review", "7", "Cedar", "Yes"], on_screen
    nb.shot("last-edits")
    nb.submit_form(STEP_CELL)


@pytest.mark.parametrize(
    ("ui", "theme"), [("lab", "JupyterLab Light"), ("notebook", "JupyterLab Light"), ("lab", "JupyterLab Dark")]
)
def test_the_tool_receives_what_the_form_showed_at_the_last_submit(jupyter: Jupyter, ui: str, theme: str) -> None:
    name = f"questions_{ui}_{theme.split()[-1].lower()}.ipynb"
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui="lab" if ui == "lab" else "notebook")
    dark = theme.endswith("Dark")
    if dark:
        nb.set_theme(theme)
    try:
        nb.run_all()
        edit_and_submit(nb, f"question_form_{'dark' if dark else 'light'}")
        nb.wait_cells_done(what="Run All after the form was submitted")
    finally:
        if dark:  # the theme is a user setting shared by every test of this server
            nb.set_theme("JupyterLab Light")
    nb.shot("answered")
    assert nb.output_text(BOOKED_CELL).strip() == repr([tuple(FINAL)]), nb.output_text(BOOKED_CELL)
    expected = "title=Quarterly review; attendees=7; room=Cedar; send=True"
    assert expected in nb.output_text(STEP_CELL), nb.output_text(STEP_CELL)
    assert nb.output(STEP_CELL).locator(".agl-form").count() == 0, "the form is gone once answered"

    saved = nb.save()
    answers = [q.get("answer") for r in records_anywhere(saved) for q in r.get("questions", [])]
    assert answers == [FINAL], f"the record keeps the submitted values: {answers}"
    printed = "".join(saved["cells"][BOOKED_CELL]["outputs"][0]["text"])
    assert printed.strip() == repr([tuple(FINAL)]), printed
    assert not any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in saved["cells"][STEP_CELL]["outputs"]
    ), json.dumps(saved["cells"][STEP_CELL]["outputs"])
