"""A step's view reads in JupyterLab's light and dark themes, trusted and untrusted: every text at 4.5:1 or more.

Measured in the browser: for each element of a step's view that holds text, its computed colour (faded by the
opacity of it and its ancestors) against its effective background (every translucent background up to the first
opaque one, composited). Trusted: the notebook run in the page. Untrusted: the same notebook executed headlessly
(``agl-notebook execute``, so nobody signed it) and opened as saved, which JupyterLab renders through its HTML
sanitizer. Screenshots of both themes go to the test's artifacts (``docs/make_screenshots.py`` makes the docs' own).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main as agl_notebook
from tests.browser.harness import JS_CONTRAST, UI, WCAG_AA, Jupyter, NotebookPage

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Question:
    text: str = describe("What to ask the person.")

@dataclass(frozen=True)
class Plan:
    steps: list[str] = describe("The plan's steps, in order.")
    notes: str = describe("Anything else, on several lines.")

def asking(text):
    return Screen(text, [TextInput("Answer", str)])

run = Run(model=ScriptedModel({
    "planner": [{"text": "I need a day.", "calls": [{"name": "ask", "args": {"text": "Which day suits you?"}}]},
                {"calls": [{"name": "report_plan", "args": {"steps": [f"step {i}" for i in range(30)],
                                                            "notes": "line one\\nline two"}}]}],
    "broken": [{"calls": [{"name": "ask", "args": {"text": "?"}}]}]}), answers=["Saturday"])

async def ask(question: Question) -> ToolResult:
    return ToolResult(text=await run.terminal.show(asking, text=question.text))

async def fails(question: Question) -> ToolResult:
    raise KeyError(question.text)

planner = Role(name="planner", instructions="Plan the meeting.",
               tools=[tool("ask", "Ask the person.", Question, ask), reporting_tool("report_plan", "Report.", Plan)])
broken = Role(name="broken", instructions="Fail.", tools=[tool("ask", "Ask.", Question, fails)])"""

MAP = """\
@dataclass(frozen=True)
class Topic:
    text: str = describe("What to plan.")

plans = Run(model=ScriptedModel(lambda request: {"calls": [{"name": "report_plan", "args": {
    "steps": ["one", "two"], "notes": request.messages[0].text[-12:]}}]}))
tidy = Role(name="tidy", instructions="Plan.", accepts=(Topic,), tools=[reporting_tool("report_plan", "Report.", Plan)])
await plans.map(tidy, [Topic(f"topic {i}") for i in range(6)], score=lambda topic, plan: len(plan.steps) > 1)"""

# A comparison whose cells hold a nested payload and None, and a step whose tool result is cut at the byte cap.
COMPARE = """\
@dataclass(frozen=True)
class Where:
    place: str = describe("Where.")
    floor: int | None = describe("Which floor.", default=None)

@dataclass(frozen=True)
class Venue:
    name: str = describe("Its name.")
    where: Where | None = describe("Where it is.", default=None)

async def read(topic: Topic) -> ToolResult:
    return ToolResult("".join(f"line {i} of the venue list\\n" for i in range(2000)))

venue = Role(name="venue", instructions="Find.", accepts=(Topic,),
             tools=[tool("read", "Read.", Topic, read), reporting_tool("report_venue", "Report.", Venue)])
found = {"name": "Hall", "where": {"place": "North wing", "floor": 2}}
venues = Run(model=ScriptedModel(lambda request: {"calls": [
    {"name": "read", "args": {"text": "all"}} if len(request.messages) == 1 else
    {"name": "report_venue", "args": found if "topic 0" in request.messages[0].text else {"name": "Yard"}}]}))
await venues.step(venue, Topic("topic 0"))
await venues.compare({"a": venue, "b": venue}, [Topic("topic 0"), Topic("topic 1")])"""

CELLS = [
    SETUP,
    'await run.step(planner, "Plan a meeting")',
    'try:\n    await run.step(broken, "Break")\nexcept KeyError:\n    pass',
    MAP,  # a map's view (its table, scores and summary) reads in both themes too
    COMPARE,  # a grid's nested payload and null, and a value cut at the byte cap, too
]


def measure(nb: NotebookPage, theme: str, trust: str) -> list[dict[str, Any]]:
    nb.set_theme(theme)
    found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST)
    in_map: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-map")
    nb.output(1).scroll_into_view_if_needed()
    nb.shot(f"{trust}-{theme.split()[-1].lower()}")
    nb.output(3).scroll_into_view_if_needed()
    nb.shot(f"{trust}-{theme.split()[-1].lower()}-map")
    in_grid: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-compare")
    nb.output(4).locator(".agl-compare").scroll_into_view_if_needed()
    nb.shot(f"{trust}-{theme.split()[-1].lower()}-compare")
    assert len(found) > 15, f"{trust}, {theme}: too few texts measured in the step views: {found}"
    assert len(in_map) > 20, f"{trust}, {theme}: too few texts measured in the map's view: {in_map}"
    assert {"North wing", "null", "2"} <= {f["text"] for f in in_grid}, f"{trust}, {theme}: {in_grid}"
    return found + in_map + in_grid


def check_both_themes(nb: NotebookPage, trust: str) -> dict[str, list[dict[str, Any]]]:
    measured = {}
    try:
        for theme in (LIGHT, DARK):
            measured[theme] = measure(nb, theme, trust)
    finally:
        nb.set_theme(LIGHT)  # the theme is a server-side setting: the next test starts light
    for theme, found in measured.items():
        poor = [f for f in found if f["ratio"] < WCAG_AA]
        assert not poor, f"{trust}, {theme}: texts under {WCAG_AA}:1: {poor}"
    return measured


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_views_read_in_light_and_dark_themes_trusted_and_untrusted(jupyter: Jupyter, ui: UI) -> None:
    server = jupyter.server
    name = f"themes_{ui}.ipynb"
    server.write_notebook(name, CELLS)
    nb = jupyter.open(name, ui=ui)
    nb.run_all()
    nb.wait_cells_done(what="the steps to run")
    assert "finished" in nb.output_text(1) and "failed, nothing was recorded" in nb.output_text(2)
    assert "6 items: 6 done, 0 failed" in nb.output_text(3)
    assert "[cut: " in nb.output(4).locator(".agl-step pre").first.text_content() and "null" in nb.output_text(4)
    trusted = check_both_themes(nb, "trusted")

    # The same notebook executed headlessly: nobody signed it, so JupyterLab shows its outputs untrusted.
    untrusted_name = f"themes_untrusted_{ui}.ipynb"
    shutil.copyfile(server.root / name, server.root / untrusted_name)
    assert agl_notebook(["execute", str(server.root / untrusted_name)]) == 0
    other = jupyter.open(untrusted_name, ui=ui)
    assert other.page.evaluate("() => !window.jupyterapp.shell.currentWidget.content.model.cells.get(1).trusted")
    untrusted = check_both_themes(other, "untrusted")
    assert {f["text"] for f in untrusted[DARK]} >= {"Question:", "Answer:"}
    assert len(trusted[DARK]) > 15


def test_the_views_of_a_saved_notebook_are_untrusted_when_nobody_signed_them(tmp_path: Path) -> None:
    # The premise of the untrusted half above: a notebook executed headlessly carries no signature.
    import nbformat

    notebook = tmp_path / "unsigned.ipynb"
    v4: Any = nbformat.v4
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in CELLS]), notebook)  # type: ignore[no-untyped-call]  # unannotated in nbformat
    assert agl_notebook(["execute", str(notebook)]) == 0
    saved = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]  # unannotated in nbformat
    assert "signature" not in saved["metadata"]
