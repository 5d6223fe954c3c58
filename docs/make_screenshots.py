"""Make the documentation's screenshots of agl_notebook in JupyterLab: ``.venv/bin/python docs/make_screenshots.py``.

It starts one JupyterLab server (the browser tests' harness, ``tests/browser/harness.py``) on a temporary copy of
``notebooks/*.ipynb``, drives Debian's chromium with Playwright, and writes into ``docs/screenshots/``:

* ``NN_name.png`` for each ``notebooks/NN_name.ipynb``: the notebook opened as saved (no cell is run), the file
  browser collapsed, scrolled so its first step's final view (the bordered box with the tool calls and the result
  table) is in sight; cropped to the notebook area.
* ``live_question.png``: notebook 03 with its recordings stripped, so its first step runs live; the planner asks
  "Which day suits you?" and "Saturday" is typed into the input widget, not yet submitted. Cropped to that cell.
* ``answered.png``: the same cell after *Submit*: the step's final view with the answer and the plan.
* ``live_question_dark.png`` and ``answered_dark.png``: the same two in JupyterLab's dark theme.

Rerun it after changing what a step's view looks like (``agl_notebook/notebook``, the labextension, the question
widgets) or after re-recording the example notebooks (``make notebooks``). Nothing outside ``docs/screenshots/`` is
written except the server's log and failure screenshots, in ``build/browser-artifacts/make_screenshots/``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.harness import (  # noqa: E402
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_LOAD,
    QUESTION,
    UI_ACTION,
    Artifacts,
    BrowserTestError,
    JupyterServer,
    NotebookPage,
)

NOTEBOOKS = REPO / "notebooks"
OUT = REPO / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 900}

LIVE = "live_question.ipynb"
LIVE_SOURCE = "03_asking_questions.ipynb"
QUESTION_TEXT = "Which day suits you?"
ANSWER = "Saturday"
MAX_BYTES = 250_000

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

STEP = ".agl-step"
FINISHED = ".agl-step.agl-finished"


def strip_recordings(source: Path, target: Path) -> None:
    """Copy a notebook without its recordings (notebook and output metadata), outputs or execution counts."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    nb.get("metadata", {}).pop("agl_notebook", None)
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            (output.get("metadata") or {}).pop("agl_notebook", None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def new_notebook_page(
    server: JupyterServer, browser: Any, artifacts: Artifacts, name: str, console: list[str]
) -> NotebookPage:
    """Open a notebook in JupyterLab in a fresh browser context of the screenshot's viewport, file browser shut.

    The saved workspaces are deleted first: Lab would otherwise reopen the notebooks of the earlier pages beside
    this one, and the harness's locators (``.jp-Notebook .jp-Cell``) would see their cells too.
    """
    for saved in (server.base / "workspaces").glob("*"):
        saved.unlink()
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.on("console", lambda m: console.append(f"[{name}] {m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[{name}] pageerror: {e}"))
    nb = NotebookPage(server, page, artifacts, name, "lab").open()
    page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); window.jupyterapp.shell.collapseRight(); }")
    nb.wait_js(
        "() => !document.querySelector('#jp-left-stack:not(.lm-mod-hidden)')",
        "the left sidebar (file browser) to collapse",
        UI_ACTION,
    )
    page.wait_for_timeout(300)  # the dock panel re-lays out after the sidebar closed
    return nb


def check_no_widget_errors(nb: NotebookPage, what: str) -> None:
    """Fail (with a screenshot in the artifacts) if the page shows "Error displaying widget" or the like."""
    errors = nb.error_texts()
    if errors:
        raise nb.fail(f"{what}: the page shows widget errors {errors}")


def save_png(path: Path, take: Any) -> None:
    """Write a screenshot via ``take(path)``, and say how large it is (warning above MAX_BYTES)."""
    take(path)
    size = path.stat().st_size
    note = f"  (over {MAX_BYTES // 1000} KB)" if size > MAX_BYTES else ""
    print(f"wrote {path.relative_to(REPO)}: {size // 1000} KB{note}")


def notebook_shot(server: JupyterServer, browser: Any, artifacts: Artifacts, name: str, console: list[str]) -> None:
    """The notebook as saved, its first step's final view in sight, cropped to the notebook panel."""
    nb = new_notebook_page(server, browser, artifacts, name, console)
    page = nb.page
    step = page.locator(f".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea {STEP}").first
    nb.wait_visible(step, f"the first step's view in {name}", PAGE_LOAD)
    # Show the step's cell from its code down to the end of the view; when that is taller than the notebook
    # area, put the view's bottom (the result table) at the bottom and let the code be cut at the top.
    page.evaluate(
        """(step) => {
        const cell = step.closest('.jp-Cell');
        const scroller = cell.closest('.jp-WindowedPanel-outer') ?? document.scrollingElement;
        const area = scroller.getBoundingClientRect();
        const c = cell.getBoundingClientRect(), s = step.getBoundingClientRect();
        const margin = 4;
        if (s.bottom - c.top + 2 * margin <= area.height) scroller.scrollTop += c.top - area.top - margin;
        else if (s.height + 2 * margin <= area.height) scroller.scrollTop += s.bottom - area.bottom + margin;
        else scroller.scrollTop += s.top - area.top - margin;
    }""",
        step.element_handle(),
    )
    page.wait_for_timeout(300)
    check_no_widget_errors(nb, name)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
    box = panel.bounding_box()
    if box is None:
        raise nb.fail(f"the notebook panel of {name} to have a size")
    save_png(
        OUT / f"{Path(name).stem}.png", lambda path: page.screenshot(path=str(path), clip=box, timeout=UI_ACTION * 1000)
    )
    page.context.close()


def cell_shot(nb: NotebookPage, index: int, path: Path) -> None:
    """A screenshot of one cell (its code and its output), with a neighbour selected: no selection bar or toolbar."""
    count = nb.page.locator(".jp-Notebook .jp-Cell").count()
    nb.command_mode(index + 1 if index + 1 < count else index - 1)
    cell = nb.cell(index)
    cell.scroll_into_view_if_needed(timeout=UI_ACTION * 1000)
    nb.page.mouse.move(VIEWPORT["width"] - 2, VIEWPORT["height"] - 2)  # on the status bar: no hover shading
    nb.page.wait_for_timeout(300)
    save_png(path, lambda p: cell.screenshot(path=str(p), timeout=UI_ACTION * 1000))


def set_theme(nb: NotebookPage, theme: str) -> None:
    """Switch JupyterLab's theme (a server-side setting: switch back before the next page)."""
    nb.page.evaluate("(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
    light = "true" if theme == LIGHT else "false"
    nb.wait_js(f"() => document.body.dataset.jpThemeLight === '{light}'", f"the {theme} theme", UI_ACTION)
    nb.page.wait_for_timeout(500)


def live_shots(
    server: JupyterServer, browser: Any, artifacts: Artifacts, console: list[str], *, theme: str = "JupyterLab Light"
) -> None:
    """Notebook 03 without recordings: the question asked live, the answer typed, then submitted."""
    suffix = "" if theme == LIGHT else "_dark"
    strip_recordings(NOTEBOOKS / LIVE_SOURCE, server.root / LIVE)
    nb = new_notebook_page(server, browser, artifacts, LIVE, console)
    set_theme(nb, theme)
    cells = json.loads((server.root / LIVE).read_text(encoding="utf-8"))["cells"]
    step_cell = next(i for i, c in enumerate(cells) if "run.step(planner" in "".join(c["source"]))
    for index in [i for i, c in enumerate(cells[:step_cell]) if c["cell_type"] == "code"]:
        nb.run_cell(index)
        nb.wait_cells_done([index], what=f"cell {index} (set-up) to run")

    nb.run_cell(step_cell)
    output = nb.output(step_cell)
    field = output.locator(".agl-form input[type=text]")
    nb.wait_visible(field, "the planner's question (an input widget) in the step's cell", QUESTION)
    nb.wait_until(lambda: QUESTION_TEXT in nb.output_text(step_cell), f"the question {QUESTION_TEXT!r}", UI_ACTION)
    submit = output.locator("button", has_text="Submit")
    nb.wait_visible(submit, "the question's Submit button", UI_ACTION)
    field.click(timeout=UI_ACTION * 1000)
    field.press_sequentially(ANSWER, delay=25, timeout=UI_ACTION * 1000)
    field.evaluate("(input) => input.blur()")  # no caret or focus ring in the picture
    nb.wait_until(lambda: field.input_value() == ANSWER, f"the input to hold {ANSWER!r}", UI_ACTION)
    check_no_widget_errors(nb, "the live question")
    cell_shot(nb, step_cell, OUT / f"live_question{suffix}.png")

    submit.click(timeout=UI_ACTION * 1000)
    nb.wait_cells_done([step_cell], what="the step to finish after the answer was submitted")
    nb.wait_visible(output.locator(FINISHED).filter(has_text=ANSWER), "the final view with the answer", UI_ACTION)
    check_no_widget_errors(nb, "the answered step")
    cell_shot(nb, step_cell, OUT / f"answered{suffix}.png")
    set_theme(nb, LIGHT)
    nb.page.context.close()


def main() -> int:
    """Start the server and chromium, write every screenshot; 0 when all were written."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        print(f"This needs the Python package playwright in the venv ({e}).", file=sys.stderr)
        return 2
    if not CHROMIUM.is_file():
        print(
            f"This needs chromium at {CHROMIUM} (Debian: apt-get install chromium; or set AGL_BROWSER_CHROMIUM).",
            file=sys.stderr,
        )
        return 2
    notebooks = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    OUT.mkdir(parents=True, exist_ok=True)
    artifacts = Artifacts(ARTIFACTS / "make_screenshots")  # failure screenshots; cleared first
    console: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agl-screenshots-") as tmp:
        server = JupyterServer(Path(tmp), artifacts.folder / "jupyter-server.log")
        for notebook in notebooks:
            server.root.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(notebook, server.root / notebook.name)
        server.start()
        playwright = sync_playwright().start()
        try:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, timeout=PAGE_LOAD * 1000
            )
            try:
                for notebook in notebooks:
                    notebook_shot(server, browser, artifacts, notebook.name, console)
                    server.shut_down_sessions(notebook.name)
                live_shots(server, browser, artifacts, console)
                server.shut_down_sessions(LIVE)
                live_shots(server, browser, artifacts, console, theme=DARK)
            finally:
                browser.close()
        except BrowserTestError as e:
            print(e, file=sys.stderr)
            return 1
        finally:
            playwright.stop()
            artifacts.write("console.log", "\n".join(console) + "\n")
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
