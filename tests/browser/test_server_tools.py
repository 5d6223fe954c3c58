"""Server tool rows and citations in JupyterLab, light and dark (issue 29): a row per call marked "run by Anthropic",
the search results as links, the fetched page, the code with its output; a cited sentence whose number opens its
source in a new tab; a ``javascript:`` URL shown as text, never a link, live and again when the step is replayed from
the record the notebook holds (after a kernel restart); every text readable.

The step runs on the scripted model, which scripts the blocks Claude would send (server_tools.scripted_search and its
siblings). Screenshots of the final view with the search row opened go to ``build/browser-artifacts/<test>/`` as
``server_tools_light.png`` and ``server_tools_dark.png``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.browser.harness import JS_CONTRAST, RUN_CELLS, UI_ACTION, WCAG_AA, Jupyter

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

SETUP = """\
from dataclasses import dataclass
from agl_notebook import CodeExecution, Role, Run, ScriptedModel, WebFetch, WebSearch, describe, reporting_tool
from agl_notebook.server_tools import scripted_code_execution, scripted_fetch, scripted_search

@dataclass(frozen=True)
class Finding:
    answer: str = describe("The answer.")

CITED = {"type": "web_search_result_location", "url": "https://tides.example/brest", "title": "Tides at Brest",
         "cited_text": "two high tides a day", "encrypted_index": "x"}
HOSTILE = {"type": "web_search_result_location", "url": "javascript:alert('cited')", "title": "<b>bold</b>",
           "cited_text": "bad", "encrypted_index": "y"}
SCRIPT = [
    {"blocks": scripted_search("srvtoolu_1", "tides at Brest", [
        ("Tides at Brest", "https://tides.example/brest"),
        ("<img src=x onerror=alert(1)>Hostile", "javascript:alert('result')"),
     ]), "stop_reason": "pause_turn"},
    {"blocks": [*scripted_fetch("srvtoolu_2", "https://tides.example/brest", "Brest tide table", "..."),
                *scripted_code_execution("srvtoolu_3", "python3 -c 'print(12 * 60 + 25)'", stdout="745\\n")],
     "text": "Here is what I found. ",
     "cited": [{"text": "Brest has two high tides a day.", "citations": [CITED]},
               {"text": " A second claim.", "citations": [HOSTILE]}],
     "calls": [{"name": "report", "args": {"answer": "Two a day."}}]},
]
researcher = Role(name="researcher", instructions="Search, read, compute, report.",
                  tools=[reporting_tool("report", "Report.", Finding)],
                  server_tools=[WebSearch(max_uses=2), WebFetch(), CodeExecution()])"""

STEP = 'run = Run(model=ScriptedModel(SCRIPT))\nfinding = await run.step(researcher, "How often is high tide?")'
CELLS = [SETUP, STEP]
STEP_CELL = 1


def test_server_tool_rows_and_a_citation_open_and_read_in_light_and_dark(jupyter: Jupyter) -> None:
    name = "server_tools.ipynb"
    jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name)
    nb.run_all()
    nb.wait_cells_done(what="the scripted step")
    out = nb.output(STEP_CELL)
    rows = out.locator(".agl-step.agl-finished .agl-server-tool")
    nb.wait_until(lambda: rows.count() == 3, "the three server tool rows", RUN_CELLS)
    summaries = [rows.nth(i).locator("summary").inner_text() for i in range(3)]
    assert [s.split(" ·")[0].strip() for s in summaries] == ["web_search", "web_fetch", "bash_code_execution"]
    assert all("run by Anthropic" in s for s in summaries), summaries

    # The search row, opened: its results as links; the hostile one's URL as text, its title escaped.
    search = rows.nth(0)
    search.locator("summary").click(timeout=UI_ACTION * 1000)
    links = search.locator("li a")
    nb.wait_visible(links.first, "the search results' links", UI_ACTION)
    assert links.count() == 1 and links.first.get_attribute("href") == "https://tides.example/brest"
    hostile = search.locator("li").nth(1)
    assert "<img src=x onerror=alert(1)>Hostile" in hostile.inner_text()
    assert hostile.locator("code").inner_text() == "javascript:alert('result')"
    assert hostile.locator("a, img").count() == 0
    # The fetch and the code: the page's title and URL; the command and its output.
    rows.nth(1).locator("summary").click(timeout=UI_ACTION * 1000)
    assert [a.get_attribute("href") for a in rows.nth(1).locator("a").all()] == ["https://tides.example/brest"] * 2
    assert "Brest tide table" in rows.nth(1).inner_text()
    rows.nth(2).locator("summary").click(timeout=UI_ACTION * 1000)
    code = rows.nth(2).inner_text()
    assert "print(12 * 60 + 25)" in code and "745" in code and "return code: 0" in code

    # No javascript: link anywhere in the output, in any case.
    hrefs: list[str] = out.evaluate("(el) => [...el.querySelectorAll('[href]')].map(a => a.getAttribute('href'))")
    assert hrefs and all(h.startswith("https://") for h in hrefs), hrefs
    # The cited sentence: [1] links to its source and opens it in a new tab; [2] (a javascript: URL) is no link.
    first = out.locator("a.agl-citation")
    assert first.count() == 1 and first.inner_text() == "[1]"
    assert first.get_attribute("href") == "https://tides.example/brest"
    assert "noopener" in (first.get_attribute("rel") or "")
    second = out.locator("span.agl-citation")
    assert second.inner_text() == "[2]" and second.get_attribute("title") == "<b>bold</b>"
    sources = out.locator(".agl-sources li")
    assert sources.count() == 2 and "javascript:alert('cited')" in sources.nth(1).inner_text()
    # The source's site is served by the test (no network here), so the new tab lands on the very URL cited.
    nb.page.context.route(
        "https://tides.example/**", lambda route: route.fulfill(body="<title>Tides</title>ok", content_type="text/html")
    )
    with nb.page.context.expect_page(timeout=UI_ACTION * 1000) as opened:
        first.click(timeout=UI_ACTION * 1000)
    tab: Any = opened.value
    nb.wait_until(lambda: tab.url == "https://tides.example/brest", "the cited source in a new tab", UI_ACTION)
    nb.artifacts.write("citation-tab.txt", tab.url)
    tab.close()

    # Replayed from the record the notebook now holds, after a restart: the same rows, the same links and texts.
    nb.save()
    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay)")
    badge = nb.wait_badge(STEP_CELL, r"^replayed\b", "the replayed badge on the step's output")
    assert "no model call" in badge, badge
    out = nb.output(STEP_CELL)
    replayed_rows = out.locator(".agl-step.agl-finished .agl-server-tool")
    nb.wait_until(lambda: replayed_rows.count() == 3, "the three rows, replayed", RUN_CELLS)
    hrefs = out.evaluate("(el) => [...el.querySelectorAll('[href]')].map(a => a.getAttribute('href'))")
    assert hrefs and all(h.startswith("https://") for h in hrefs), hrefs
    assert "javascript:alert('result')" in [c.text_content() for c in out.locator("code").all()]
    assert out.locator("a.agl-citation").get_attribute("href") == "https://tides.example/brest"
    replayed_rows.nth(0).locator("summary").click(timeout=UI_ACTION * 1000)

    try:
        for theme in (LIGHT, DARK):
            nb.set_theme(theme)
            suffix = theme.split()[-1].lower()
            found: list[dict[str, Any]] = nb.page.evaluate(JS_CONTRAST, ".jp-OutputArea .agl-step")
            nb.artifacts.write(f"contrast-{suffix}.json", json.dumps(found, indent=1))
            texts = " ".join(f["text"] for f in found)
            assert "run by Anthropic" in texts and "Sources" in texts, found
            poor = [f for f in found if f["ratio"] < WCAG_AA]
            assert not poor, f"{suffix}: texts under {WCAG_AA}:1: {poor}"
            nb.command_mode(0)
            nb.cell(STEP_CELL).scroll_into_view_if_needed()
            nb.page.mouse.move(2, 2)
            nb.page.wait_for_timeout(300)
            nb.cell(STEP_CELL).screenshot(path=str(nb.artifacts.folder / f"server_tools_{suffix}.png"))
    finally:
        nb.set_theme(LIGHT)
