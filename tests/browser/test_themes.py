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
from tests.browser.harness import UI, Jupyter, NotebookPage

WCAG_AA = 4.5
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

CELLS = [
    SETUP,
    'await run.step(planner, "Plan a meeting")',
    'try:\n    await run.step(broken, "Break")\nexcept KeyError:\n    pass',
]

# Every element of the step views that holds text, with its contrast ratio against what is behind it.
_JS_CONTRAST = """() => {
  const parse = c => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, bottom) => ({r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
                                  b: top.b * top.a + bottom.b * (1 - top.a), a: 1});
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let colour = {r: 255, g: 255, b: 255, a: 1};
    for (let i = layers.length - 1; i >= 0; i--) colour = over(layers[i], colour);
    return colour;
  };
  const opacity = el => {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const found = [];
  for (const view of document.querySelectorAll('.jp-OutputArea .agl-step')) {
    for (const el of [view, ...view.querySelectorAll('*')]) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.getClientRects().length) continue;
      const behind = background(el);
      const fg = parse(getComputedStyle(el).color);
      const text = over({...fg, a: fg.a * opacity(el)}, behind);
      const [hi, lo] = [lum(text), lum(behind)].sort((a, b) => b - a);
      found.push({ratio: (hi + 0.05) / (lo + 0.05), text: el.textContent.trim().slice(0, 40), tag: el.tagName});
    }
  }
  return found;
}"""


def measure(nb: NotebookPage, theme: str, trust: str) -> list[dict[str, Any]]:
    nb.set_theme(theme)
    found: list[dict[str, Any]] = nb.page.evaluate(_JS_CONTRAST)
    nb.output(1).scroll_into_view_if_needed()
    nb.shot(f"{trust}-{theme.split()[-1].lower()}")
    assert len(found) > 15, f"{trust}, {theme}: too few texts measured in the step views: {found}"
    return found


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
