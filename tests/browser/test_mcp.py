"""An MCP server's tool in a real browser, in JupyterLab (light and dark): the step's agent calls the server's ``ask``
tool, which is behind an approval; the person approves it with a click. The server then asks for input
(elicitation): the question form shows Accept, Decline and Cancel as buttons and the schema's fields; the person
types a wrong email and too many nights, clicks Accept, reads the errors next to the fields, corrects them and clicks
Accept again. The server's tool receives what the form showed and the step finishes; the saved notebook keeps the
decision and the question's answer. A second step is approved again and its question Declined with a click, no
field filled: the server's tool is told "decline" and nothing else. The server is a subprocess
(tests/support/mcp_servers.py), gone with the kernel.

Screenshots for the docs: ``mcp_approval_light.png``, ``mcp_elicitation_light.png`` and their ``_dark`` twins in the
test's artifacts folder (copied into docs/screenshots by hand when they change).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from tests.browser.harness import (
    JS_CONTRAST,
    QUESTION,
    REPO,
    UI_ACTION,
    WCAG_AA,
    Jupyter,
    NotebookPage,
    records_anywhere,
)
from tests.mcp.conftest import wait_until_gone

SERVER = REPO / "tests" / "support" / "mcp_servers.py"


def setup(tag: str) -> str:
    return f"""\
import sys
from dataclasses import dataclass
from agl_notebook import MCPServer, Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Said:
    text: str = describe("What the server's tool said.")

server = MCPServer.stdio("booking", sys.executable, [{str(SERVER)!r}, "faults", "--tag", {tag!r}])
booker = Role("booker", "Book a room with the server's tool, then report what it said.",
              tools=[reporting_tool("report", "Report.", Said)], mcp=[server], mcp_approvals={{"ask": "ask"}})

def script(request):
    if len(request.messages) == 1:
        return {{"calls": [{{"name": "ask", "args": {{}}}}]}}
    return {{"calls": [{{"name": "report", "args": {{"text": request.messages[-1].content[0].content}}}}]}}"""


STEP = 'said = await Run(model=ScriptedModel(script)).step(booker, "Book a room")\nprint(said.text)'
AGAIN = 'again = await Run(model=ScriptedModel(script)).step(booker, "Book another room")\nprint(again.text)'
STEP_CELL, AGAIN_CELL = 1, 2
EMAIL, NIGHTS, ROOM, BREAKFAST = "Email (an email address)", "Nights", "room", "Breakfast"
SENT = 'accept: {"breakfast": true, "email": "ada@example.org", "nights": 3, "room": "double"}'


def button(locator: Any, name: str) -> Any:
    return locator.get_by_role("button", name=re.compile(f"^{re.escape(name)}"))


def check_contrast(nb: NotebookPage, selector: str, stage: str) -> None:
    found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, selector)
    nb.artifacts.write(f"contrast-{stage}.json", json.dumps(found, indent=1))
    assert len(found) > 5, f"{stage}: too few texts measured: {found}"
    poor = [f for f in found if f["ratio"] < WCAG_AA]
    assert not poor, f"{stage}: texts under {WCAG_AA}:1: {poor}"


def approve_then_answer(nb: NotebookPage, shots: str) -> None:
    # The approval of the MCP tool, clicked.
    approval = nb.output(STEP_CELL).locator(".agl-approval")
    nb.wait_visible(approval, "the approval form of the MCP tool ask", QUESTION)
    approval.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    assert "Approve the call to ask?" in approval.inner_text()
    check_contrast(nb, ".jp-OutputArea .agl-approval", "approval")
    approval.screenshot(path=str(nb.artifacts.folder / f"mcp_approval_{shots}.png"))
    button(approval, "Approve").click()
    nb.wait_until(lambda: approval.count() == 0, "the approval form gone once approved", QUESTION)

    # The server's question: buttons for the response, the schema's fields, nothing chosen for the person.
    form = nb.output(STEP_CELL).locator(".agl-form:not(.agl-approval)")
    nb.wait_visible(form, "the server's question form", QUESTION)
    form.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    text = nb.output_text(STEP_CELL)  # the question is in the step's view, the form under it
    assert "Question: Book a room?" in text and "- Email: Where to send it." in text, text
    assert "(asked by the MCP server 'booking' during the call to ask)" in text, text
    buttons = [b.inner_text().strip() for b in form.locator(".agl-form-actions button").all()]
    assert buttons == ["Accept", "Decline", "Cancel"], buttons
    assert nb.form_field(STEP_CELL, "Response").count() == 0, "the response is the buttons, not a field"
    assert nb.form_field(STEP_CELL, ROOM).input_value() == "", "no room is chosen for the person"

    # A wrong email and too many nights, as a person types them; Accept.
    nb.form_field(STEP_CELL, EMAIL).fill("ada@example")
    nb.form_field(STEP_CELL, NIGHTS).fill("30")
    nb.form_field(STEP_CELL, ROOM).select_option("Double room")
    nb.choose(STEP_CELL, BREAKFAST, "Yes")
    button(form, "Accept").click()
    nb.wait_form_error(STEP_CELL, EMAIL, "Email (an email address): type an email address.", "a wrong email")
    nb.wait_form_error(
        STEP_CELL, NIGHTS, "Nights: 30 is above the maximum 14; type a whole number from 1 to 14.", "too many nights"
    )
    assert nb.form_field(STEP_CELL, EMAIL).get_attribute("aria-invalid") == "true"
    nb.page.keyboard.press("Tab")  # no caret in the picture
    check_contrast(nb, ".jp-OutputArea .agl-form", "elicitation-rejected")
    nb.output(STEP_CELL).screenshot(path=str(nb.artifacts.folder / f"mcp_elicitation_{shots}.png"))
    nb.shot("elicitation-rejected")

    # Corrected; Accept again.
    nb.form_field(STEP_CELL, EMAIL).fill("ada@example.org")
    nb.form_field(STEP_CELL, NIGHTS).fill("3")
    nb.shot("elicitation-corrected")
    button(form, "Accept").click()


def approve_then_decline(nb: NotebookPage) -> None:
    """The second step: approved again; then Decline, clicked with no field filled (Decline reads none)."""
    approval = nb.output(AGAIN_CELL).locator(".agl-approval")
    nb.wait_visible(approval, "the second approval form", QUESTION)
    button(approval, "Approve").click()
    nb.wait_until(lambda: approval.count() == 0, "the second approval form gone once approved", QUESTION)
    form = nb.output(AGAIN_CELL).locator(".agl-form:not(.agl-approval)")
    nb.wait_visible(form, "the second question form", QUESTION)
    form.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    button(form, "Decline").click()


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_an_mcp_tool_approved_and_its_question_answered_in_the_cell(jupyter: Jupyter, theme: str) -> None:
    dark = theme.endswith("Dark")
    tag = f"agl-test-{uuid.uuid4().hex[:12]}"
    name = f"mcp_{'dark' if dark else 'light'}.ipynb"
    jupyter.server.write_notebook(name, [setup(tag), STEP, AGAIN])
    nb = jupyter.open(name, ui="lab")
    if dark:
        nb.set_theme(theme)
    try:
        nb.run_all()
        approve_then_answer(nb, "dark" if dark else "light")
        approve_then_decline(nb)
        nb.wait_cells_done(what="Run All after the approvals and the answers")
    finally:
        if dark:  # the theme is a user setting shared by every test of this server
            nb.set_theme("JupyterLab Light")
    nb.output(STEP_CELL).scroll_into_view_if_needed()
    nb.shot("done")
    assert SENT in nb.output_text(STEP_CELL), nb.output_text(STEP_CELL)
    assert nb.output(STEP_CELL).locator(".agl-form, .agl-approval").count() == 0, "no form is left once it ends"

    saved = nb.save()
    records = {str(r.get("input")): r for r in records_anywhere(saved) if r.get("role") == "booker"}
    assert sorted(records) == ["Book a room", "Book another room"], sorted(records)
    record, declined = records["Book a room"], records["Book another room"]
    assert [(d["tool"], d["decision"]) for d in record["decisions"]] == [("ask", "approve")], record["decisions"]
    answers = [q.get("answer") for q in record.get("questions", [])]
    assert answers == [["Accept", "ada@example.org", 3, "Double room", True, None]], answers
    assert "decline: null" in nb.output_text(AGAIN_CELL), nb.output_text(AGAIN_CELL)
    assert [q["answer"][0] for q in declined["questions"]] == ["Decline"], declined["questions"]

    jupyter.server.shut_down_sessions(name)
    assert wait_until_gone(tag) == [], "the server's process outlived its kernel"


def test_an_autosave_while_the_servers_question_waits_keeps_the_placeholder_and_the_typed_answer(
    jupyter: Jupyter,
) -> None:
    """JupyterLab's autosave while the MCP server's question waits: the file holds the placeholder, no widget; the
    typed, not yet accepted email stays in its field, and Accept then finishes the step."""
    from tests.browser.test_autosave import PLACEHOLDER, plain_text, widget_outputs

    tag = f"agl-test-{uuid.uuid4().hex[:12]}"
    name = "mcp_autosave.ipynb"
    jupyter.server.write_notebook(name, [setup(tag), STEP])
    nb = jupyter.open(name, ui="lab")
    nb.run_all()
    approval = nb.output(STEP_CELL).locator(".agl-approval")
    nb.wait_visible(approval, "the approval form of the MCP tool ask", QUESTION)
    button(approval, "Approve").click()
    form = nb.output(STEP_CELL).locator(".agl-form:not(.agl-approval)")
    nb.wait_visible(form, "the server's question form", QUESTION)
    nb.form_field(STEP_CELL, EMAIL).fill("ada@example.org")
    nb.shot("question-waiting")

    saved = nb.autosave()
    assert widget_outputs(saved) == [], f"saved outputs refer to a widget: {widget_outputs(saved)}"
    (step_output,) = saved["cells"][STEP_CELL]["outputs"]
    assert PLACEHOLDER in plain_text(step_output), plain_text(step_output)
    assert nb.form_field(STEP_CELL, EMAIL).input_value() == "ada@example.org", "the save left the live form alone"

    nb.form_field(STEP_CELL, NIGHTS).fill("3")
    nb.form_field(STEP_CELL, ROOM).select_option("Double room")
    nb.choose(STEP_CELL, BREAKFAST, "Yes")
    button(form, "Accept").click()
    nb.wait_cells_done(what="Run All after the server's question was answered")
    nb.shot("done")
    assert SENT in nb.output_text(STEP_CELL), nb.output_text(STEP_CELL)
    saved = nb.save()
    assert widget_outputs(saved) == [] and PLACEHOLDER not in plain_text(saved["cells"][STEP_CELL]["outputs"][0])
    jupyter.server.shut_down_sessions(name)
    assert wait_until_gone(tag) == [], "the server's process outlived its kernel"
