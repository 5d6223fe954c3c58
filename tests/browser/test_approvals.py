"""Approvals in a real browser, in JupyterLab (light and dark) and Notebook 7: one step whose agent calls two
gated tools five times. The person approves the first call; edits the second (a nested field, a list item added, a
number typed as a word, then out of range, then corrected), and the handler gets the corrected payload while the
agent is told which arguments changed; denies the third with a message, from the keyboard; and chooses "Always
approve this tool" for the fourth, again from the keyboard, so the fifth shows no prompt. The saved notebook keeps
the decisions and replays under nbval with no prompt.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.browser.harness import (
    JS_CONTRAST,
    QUESTION,
    UI_ACTION,
    WCAG_AA,
    Jupyter,
    NotebookPage,
    records_anywhere,
    run_nbval,
)

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

SENT, ARCHIVED = [], []

@dataclass(frozen=True)
class Recipient:
    name: str = describe("Their name.")
    email: str = describe("Their email address.")

@dataclass(frozen=True)
class Mail:
    to: Recipient = describe("Who receives it.")
    subject: str = describe("The subject line.")
    copies: int = describe("How many copies to send, 1 to 3.", default=1)
    cc: list[str] = describe("Addresses copied in.", default=[])

    def __post_init__(self):
        if not 1 <= self.copies <= 3:
            raise ValueError("copies: must be from 1 to 3.")

@dataclass(frozen=True)
class Folder:
    name: str = describe("The folder to archive the mail into.")

@dataclass(frozen=True)
class Done:
    results: list[str] = describe("Every tool result, in order.")

async def send_mail(mail: Mail) -> ToolResult:
    SENT.append(mail)
    return ToolResult(f"Sent {mail.subject!r} to {mail.to.email}.")

async def archive(folder: Folder) -> ToolResult:
    ARCHIVED.append(folder.name)
    return ToolResult(f"Archived into {folder.name}.")

CALLS = [
    ("send_mail", {"to": {"name": "Ada", "email": "ada@example.com"}, "subject": "Minutes"}),
    ("send_mail", {"to": {"name": "Ada", "email": "ada@example"}, "subject": "Budget"}),
    ("send_mail", {"to": {"name": "All", "email": "all@example.com"}, "subject": "Party"}),
    ("archive", {"name": "minutes"}),
    ("archive", {"name": "budget"}),
]

def script(request):
    turn = (len(request.messages) - 1) // 2
    if turn < len(CALLS):
        name, args = CALLS[turn]
        return {"calls": [{"name": name, "args": args}]}
    return {"calls": [{"name": "report", "args": {"results": [m.content[0].content for m in request.messages[2::2]]}}]}

mailer = Role(name="mailer", instructions="Send and file the mail.",
              tools=[tool("send_mail", "Send an email.", Mail, send_mail, approval="ask"),
                     tool("archive", "Archive the mail.", Folder, archive, approval="ask"),
                     reporting_tool("report", "Report every result.", Done)])"""

CELLS = [
    SETUP,
    "run = Run(model=ScriptedModel(script))",
    'done = await run.step(mailer, "Send the mail")\nprint(*done.results, sep="\\n---\\n")',
    # What the handlers received; nothing on replay, so nbval does not compare it.
    "# NBVAL_IGNORE_OUTPUT\nprint(SENT, ARCHIVED, sorted(run.always_approved), sep='\\n')",
    # Under nbval the step replays: no handler may run. The cell prints nothing, live or replayed.
    "import os\n"
    'if os.environ.get("AGL_NOTEBOOK_UNDER_NBVAL") == "1":\n'
    "    assert SENT == ARCHIVED == [], (SENT, ARCHIVED)",
]
STEP_CELL, STATE_CELL = 2, 3
EDITED = {
    "to": {"name": "Ada", "email": "ada@example.org"},
    "subject": "Budget",
    "copies": 2,
    "cc": ["boss@example.com"],
}
DENIAL = "Not to the whole list."

# Each approval form drawn in the page is counted once, however long it stays.
_JS_COUNT_FORMS = """() => {
  window.__aglForms = new WeakSet();
  window.__aglFormCount = 0;
  const note = () => {
    for (const form of document.querySelectorAll('.jp-OutputArea .agl-approval')) {
      if (!window.__aglForms.has(form)) { window.__aglForms.add(form); window.__aglFormCount += 1; }
    }
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true});
  note();
}"""


def approval(nb: NotebookPage, showing: str) -> Any:
    """Wait for the approval form whose call shows ``showing`` among its arguments."""
    form = nb.output(STEP_CELL).locator(".agl-approval").filter(has=nb.page.locator("td", has_text=showing))
    nb.wait_visible(form, f"the approval form of the call with {showing!r}", QUESTION)
    form.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    return form


def button(form: Any, name: str) -> Any:
    return form.get_by_role("button", name=re.compile(f"^{re.escape(name)}"))


def field_error(form: Any, label: str) -> Any:
    field_id = form.get_by_label(label, exact=True).get_attribute("id", timeout=UI_ACTION * 1000)
    return form.locator(f'[id="{field_id}-error"]')


def wait_text(nb: NotebookPage, locator: Any, text: str, what: str) -> None:
    nb.wait_until(lambda: locator.inner_text(timeout=UI_ACTION * 1000).strip() == text, what, QUESTION)


def check_contrast(nb: NotebookPage, stage: str) -> None:
    found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-approval")
    nb.artifacts.write(f"contrast-{stage}.json", json.dumps(found, indent=1))
    assert len(found) > 10, f"{stage}: too few texts measured in the approval form: {found}"
    poor = [f for f in found if f["ratio"] < WCAG_AA]
    assert not poor, f"{stage}: texts under {WCAG_AA}:1 in the approval form: {poor}"


def decide_every_call(nb: NotebookPage, shots: str) -> None:
    # 1. Approve, with the mouse.
    first = approval(nb, "Minutes")
    assert "Approve the call to send_mail?" in first.inner_text()
    check_contrast(nb, "asking")
    first.screenshot(path=str(nb.artifacts.folder / f"{shots}_asking.png"))
    nb.shot("asking")
    button(first, "Approve").click()

    # 2. Edit: a nested field, a list item added, a number typed as a word; then out of range; then corrected.
    second = approval(nb, "Budget")
    button(second, "Edit").click()
    email = second.get_by_label("email", exact=True)
    assert email.input_value() == "ada@example", "the form starts from the agent's arguments"
    assert second.get_by_label("copies", exact=True).input_value() == "1", "defaults are filled in"
    assert "Their email address." in second.inner_text(), "each field shows its describe() text"
    email.fill("ada@example.org")
    button(second, "Add to cc").click()
    second.get_by_label("cc 1", exact=True).fill("boss@example.com")
    copies = second.get_by_label("copies", exact=True)
    copies.fill("two")
    button(second, "Run with these arguments").click()
    wait_text(
        nb,
        field_error(second, "copies"),
        "copies: expected a whole number, got a string ('two').",
        "the agent's own message next to copies",
    )
    assert copies.get_attribute("aria-invalid") == "true"
    nb.page.keyboard.press("Tab")  # no caret in the picture
    check_contrast(nb, "edit-rejected")
    second.screenshot(path=str(nb.artifacts.folder / f"{shots}_edit_rejected.png"))
    nb.shot("edit-rejected")
    copies.fill("5")
    copies.press("Enter")  # Enter in a one-line field submits the edit
    wait_text(
        nb,
        second.locator(".agl-form-message"),
        "arguments: copies: must be from 1 to 3.",
        "the payload's own check, under the fields",
    )
    wait_text(nb, field_error(second, "copies"), "", "the earlier error next to copies cleared")
    copies.fill("2")
    button(second, "Run with these arguments").click()

    # 3. Deny with a message, from the keyboard: the Deny button focused, Enter, the message typed, Enter.
    third = approval(nb, "Party")
    button(third, "Deny").focus()
    nb.page.keyboard.press("Enter")
    reason = third.get_by_label("Message to the agent", exact=True)
    nb.wait_until(lambda: reason.evaluate("e => e === document.activeElement"), "focus in the message", UI_ACTION)
    nb.page.keyboard.type(DENIAL, delay=10)
    nb.shot("deny-typed")
    nb.page.keyboard.press("Enter")

    # 4. Always approve this tool, from the keyboard: Tab from Approve to it, Space.
    fourth = approval(nb, "minutes")
    button(fourth, "Approve").focus()
    for _ in range(3):
        nb.page.keyboard.press("Tab")
    focused = nb.page.evaluate("() => document.activeElement.textContent")
    assert focused == "Always approve this tool", f"Tab reached {focused!r}"
    nb.page.keyboard.press(" ")


@pytest.mark.parametrize(
    ("ui", "theme"), [("lab", "JupyterLab Light"), ("notebook", "JupyterLab Light"), ("lab", "JupyterLab Dark")]
)
def test_a_person_approves_edits_denies_and_always_approves_in_the_cell(jupyter: Jupyter, ui: str, theme: str) -> None:
    name = f"approvals_{ui}_{theme.split()[-1].lower()}.ipynb"
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui="lab" if ui == "lab" else "notebook")
    dark = theme.endswith("Dark")
    if dark:
        nb.set_theme(theme)
    try:
        nb.page.evaluate(_JS_COUNT_FORMS)
        nb.run_all()
        decide_every_call(nb, f"approval_form_{'dark' if dark else 'light'}")
        nb.wait_cells_done(what="Run All after every call was decided")
    finally:
        if dark:  # the theme is a user setting shared by every test of this server
            nb.set_theme("JupyterLab Light")
    nb.output(STEP_CELL).scroll_into_view_if_needed()
    nb.shot("decided")
    assert nb.page.evaluate("() => window.__aglFormCount") == 4, "the fifth call (always approved) showed no prompt"
    assert nb.output(STEP_CELL).locator(".agl-approval").count() == 0, "no form is left once the step ends"

    results = nb.output_text(STEP_CELL)
    assert "Sent 'Minutes' to ada@example.com." in results
    assert (
        "The person edited your arguments before the call ran (changed: to.email, copies, cc); it ran with "
        + json.dumps(EDITED)
        + ".\n\nSent 'Budget' to ada@example.org."
    ) in results, results
    assert f"The person denied this call: {DENIAL}" in results
    assert "Archived into minutes." in results and "Archived into budget." in results
    assert "edited by a person: changed to.email, copies, cc" in results, "the step's view says what was edited"
    state = nb.output_text(STATE_CELL).splitlines()
    assert state == [
        "[Mail(to=Recipient(name='Ada', email='ada@example.com'), subject='Minutes', copies=1, cc=[]), "
        "Mail(to=Recipient(name='Ada', email='ada@example.org'), subject='Budget', copies=2, "
        "cc=['boss@example.com'])]",
        "['minutes', 'budget']",
        "['archive']",
    ], state

    saved = nb.save()
    (record,) = [r for r in records_anywhere(saved) if r.get("role") == "mailer"]
    assert [(d["decision"], d["always"], d.get("arguments"), d.get("message")) for d in record["decisions"]] == [
        ("approve", False, None, None),
        ("edit", False, EDITED, None),
        ("deny", False, None, DENIAL),
        ("approve", True, None, None),
    ]
    if ui == "lab" and not dark:  # the saved notebook replays with no prompt and no handler (once is enough)
        result = run_nbval(nb.path)
        assert result.returncode == 0, result.stdout + result.stderr


# Every other kind of field: a fixed tuple as JSON (invalid JSON caught in the page), an optional text switched on,
# a Yes/No toggle, and a list item removed.

ODD_SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

GOT = []

@dataclass(frozen=True)
class Slot:
    hours: tuple[int, int] = describe("From and to, in whole hours.")
    note: str | None = describe("A note for the room, if any.", default=None)
    urgent: bool = describe("Book it before anything else.", default=False)
    rooms: list[str] = describe("Rooms to try, in order.", default=[])

@dataclass(frozen=True)
class Booked:
    result: str = describe("What the tool said.")

async def book(slot: Slot) -> ToolResult:
    GOT.append(slot)
    return ToolResult("Booked.")

def script(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "book", "args": {"hours": [9, 10], "rooms": ["Aster", "Birch", "Cedar"]}}]}
    return {"calls": [{"name": "report", "args": {"result": request.messages[-1].content[0].content}}]}

booker = Role(name="booker", instructions="Book.", tools=[tool("book", "Book a room.", Slot, book, approval="ask"),
                                                          reporting_tool("report", "Report.", Booked)])"""

ODD_CELLS = [ODD_SETUP, "run = Run(model=ScriptedModel(script))", 'await run.step(booker, "Book")', "print(GOT)"]


def test_json_optional_boolean_and_list_fields_edit_as_shown(jupyter: Jupyter) -> None:
    jupyter.server.write_notebook("approvals_fields.ipynb", ODD_CELLS)
    nb = jupyter.open("approvals_fields.ipynb", ui="lab")
    nb.run_all()
    form = approval(nb, "Aster")
    button(form, "Edit").click()
    hours = form.get_by_label("hours", exact=True)
    assert json.loads(hours.input_value()) == [9, 10], "a fixed tuple is edited as JSON"
    note = form.get_by_label("note", exact=True)
    assert note.is_disabled(), "an optional field left empty starts as None"
    form.get_by_label("note: None", exact=True).uncheck()
    note.fill("Bring the projector.")
    nb.choose(STEP_CELL, "urgent", "Yes")
    form.get_by_role("button", name="Remove rooms 2").click()
    assert form.get_by_label("rooms 2", exact=True).input_value() == "Cedar", "the items are numbered again"
    hours.fill("[9, 11")
    button(form, "Run with these arguments").click()
    # JSON the page cannot read is not sent: the page says so next to the field.
    nb.wait_until(
        lambda: field_error(form, "hours").inner_text().startswith("hours: not valid JSON ("),
        "the page's own message for JSON it cannot read",
        UI_ACTION,
    )
    nb.shot("json-rejected")
    hours.fill("[9, 11]")
    button(form, "Run with these arguments").click()
    nb.wait_cells_done(what="the edited call to run")
    assert nb.output_text(3).strip() == (
        "[Slot(hours=(9, 11), note='Bring the projector.', urgent=True, rooms=['Aster', 'Cedar'])]"
    )
    assert "edited by a person: changed hours, note, urgent, rooms" in nb.output_text(STEP_CELL)
