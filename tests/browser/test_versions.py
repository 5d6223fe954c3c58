"""A step's diff and a map against its previous run, in JupyterLab, light and dark (docs/iterating.md).

The notebook is recorded headlessly with its first instructions, then its instructions cell is edited and it is run
in the page: the step's finished view ends with the collapsed "Changed since the previous version" section, which
opens on a click to show the line diff and the result before and after; the map's view says how it compares with its
previous run and lists the changed items first. While the map runs (its last item waits for the person's answer),
its live view offers "Only changed items": a click shows only the changed rows, another shows every row again.
Every text of these reads at 4.5:1 or more in both themes, and screenshots of each go to the test's artifacts.
"""

from __future__ import annotations

from typing import Any

import nbformat as _nbformat

from agl_notebook.cli import main as agl_notebook
from tests.browser.harness import JS_CONTRAST, UI_ACTION, WCAG_AA, Jupyter

nbformat: Any = _nbformat  # partly typed; its read and write are not annotated

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool

@dataclass
class Answer:
    text: str = describe("The answer.")

@dataclass
class Check:
    text: str = describe("What to check with the person.")

async def check(item: Check) -> ToolResult:
    return ToolResult(await run.terminal.ask(Screen(f"Keep {item.text}?", [TextInput("Answer")])))

def reply(request):
    n = request.messages[0].text.split()[-1]
    brief = "very brief" in request.system
    if brief and n == "8" and len(request.messages) == 1:  # the edited map's last item waits for the person
        return {"calls": [{"name": "check", "args": {"text": "question 8"}}]}
    odd = n.isdigit() and int(n) % 3 == 0
    words = "short and plain" if brief and not odd else "a longer answer in plain words, with an example"
    return {"calls": [{"name": "answer", "args": {"text": words}}]}

def writer(instructions):
    return Role("writer", instructions, [
        tool("check", "Check with the person.", Check, check),
        reporting_tool("answer", "Hand back the answer.", Answer),
    ])

run = Run(model=ScriptedModel(reply))"""

V1 = 'instructions = """Be brief.\nUse plain words.\nName one example."""'
V2 = 'instructions = """Be very brief.\nUse plain words.\nName one example."""'
STEP = 'await run.step(writer(instructions), "Explain retries")'
MAP = """\
results = await run.map(writer(instructions), [f"question {i}" for i in range(9)],
                        score=lambda question, answer: len(answer.text) < 20)"""


def shown_rows(live: Any) -> list[int]:
    """The items of the live table's rows a person sees (a hidden row has no layout box)."""
    shown: list[str] = live.evaluate(
        "el => [...el.querySelectorAll('tr[data-item]')]"
        ".filter(r => r.getClientRects().length).map(r => r.dataset.item)"
    )
    return [int(n) for n in shown]


def test_a_steps_diff_and_a_map_against_its_previous_run_read_in_both_themes(jupyter: Jupyter) -> None:
    server = jupyter.server
    path = server.write_notebook("versions.ipynb", [SETUP, V1, STEP, MAP])
    assert agl_notebook(["execute", "--record", str(path)]) == 0  # the previous versions
    edited = nbformat.read(path, as_version=4)
    edited.cells[1].source = V2
    nbformat.write(edited, path)

    nb = jupyter.open("versions.ipynb")
    nb.run_all()
    nb.question_form(3)  # the map's item 8 asks; the other items have ended
    live = nb.output(3).locator(".agl-map-live")
    nb.wait_until(lambda: "8 done, " in live.inner_text(), "the live view to count 8 finished items", UI_ACTION)
    only_changed = live.locator(".agl-map-changed-only")
    nb.wait_visible(only_changed, 'the live view\'s "Only changed items" (the map has a previous run)', UI_ACTION)
    assert shown_rows(live) == [1, 2, 4, 5, 7, 0, 3, 6], "every ended row, the changed ones first"
    only_changed.click()
    nb.wait_until(lambda: shown_rows(live) == [1, 2, 4, 5, 7], "only the changed rows to show", UI_ACTION)
    try:
        for theme in (LIGHT, DARK):
            nb.set_theme(theme)
            live.scroll_into_view_if_needed()
            nb.shot(f"map-only-changed-{theme.split()[-1].lower()}")
            live_texts: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-map-live")
            assert any("Only changed items" in m["text"] for m in live_texts), f"{theme}: the control not measured"
            low = [m for m in live_texts if m["ratio"] < WCAG_AA]
            assert not low, f"{theme}: texts under {WCAG_AA}:1: {low}"
    finally:
        nb.set_theme(LIGHT)
    only_changed.click()
    nb.wait_until(lambda: len(shown_rows(live)) == 8, "every row to show again", UI_ACTION)
    nb.answer("yes", cell=3)
    nb.wait_cells_done(what="the edited step and map to run")
    step = nb.output(2)
    change = step.locator("details.agl-change")
    assert "Changed since the previous version: instructions, result" in change.locator("summary").text_content()
    assert not change.get_attribute("open"), "the section is collapsed until opened"
    change.locator("summary").click()
    diff = change.locator("pre.agl-diff")
    nb.wait_visible(diff, "the instructions' diff to show", 10)
    assert "+Be very brief." in diff.text_content() and "-Be brief." in diff.text_content()
    assert "short and plain" in change.text_content()
    mapped = nb.output(3).locator(".agl-map")
    against = mapped.locator(".agl-vs-previous").text_content()
    assert "against the previous run (9 items paired): 6 improved, 0 regressed, 3 unchanged" in against
    rows = mapped.locator("table").first.locator(":scope > tbody > tr").all()
    first_rows = [row.locator(":scope > td").first.text_content() for row in rows[:6]]
    assert sorted(int(n) for n in first_rows) == [1, 2, 4, 5, 7, 8], "the changed items are listed first"

    try:
        for theme in (LIGHT, DARK):
            nb.set_theme(theme)
            name = theme.split()[-1].lower()
            change.scroll_into_view_if_needed()
            nb.shot(f"step-diff-{name}")
            mapped.scroll_into_view_if_needed()
            nb.shot(f"map-vs-previous-{name}")
            measured: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-change")
            measured += nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-vs-previous")
            texts = {m["text"] for m in measured}
            assert any("+Be very brief." in t for t in texts), f"{theme}: the diff was not measured: {texts}"
            poor = [m for m in measured if m["ratio"] < WCAG_AA]
            assert not poor, f"{theme}: texts under {WCAG_AA}:1: {poor}"
    finally:
        nb.set_theme(LIGHT)  # the theme is a server-side setting: the next test starts light
