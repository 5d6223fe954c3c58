"""What every saved view draws of a value: scrubbed first, then capped at one byte cap, then escaped (issues 25, 26).

A step's view, a map's table (and its items' steps), a comparison's grid: each value is drawn the same way, a nested
payload as rows and ``None`` as the step view shows it; a value over `VIEW_VALUE_BYTES` is cut, after scrubbing, with
its full size and sha256; a secret holding HTML's special characters never survives an escape; a step that recorded
nothing (mode ``off``) says so.
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool
from agl_notebook._view_values import VIEW_VALUE_BYTES, capped, whole_text
from agl_notebook.events import (
    ClientToolRequested,
    ClientToolResult,
    OutputTextDelta,
    QuestionAnswered,
    QuestionAsked,
    StepFailed,
    StepFinished,
    StepReported,
    StepStarted,
)
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.map_view import MapWidget, NotebookMapView
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.payloads import JsonObject
from agl_notebook.run._map_state import MapItem, MapState, render_map_html, render_map_text
from tests.support.steps import Query
from tests.support.widgets import FakeDisplay, Sent, from_browser, views_on

# --- The cap --------------------------------------------------------------------------------------------------------


def placeholder(whole: str) -> str:
    """What a cut value ends with: its full size and the sha256 of its whole (scrubbed) text."""
    data = whole.encode()
    return f"[cut: {len(data):,} bytes in full, sha256 {hashlib.sha256(data).hexdigest()}; the record keeps it whole]"


def big_text(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghij \n€") for _ in range(size))  # some multi-byte characters


def test_the_cap_keeps_short_text_whole_and_cuts_long_text_at_a_character_boundary() -> None:
    assert capped("short") == "short"
    exact = "é" * (VIEW_VALUE_BYTES // 2)  # exactly the cap, in two-byte characters
    assert capped(exact) == exact
    over = "x" + exact  # one byte over: the cut falls inside a character, which is left out whole
    cut = capped(over)
    assert cut.startswith("x" + "é" * (VIEW_VALUE_BYTES // 2 - 1) + "… ") and cut.endswith(placeholder(over))
    assert len(cut.split("… [cut:")[0].encode()) <= VIEW_VALUE_BYTES


def test_every_value_of_a_step_view_is_capped_with_its_size_and_sha256() -> None:
    result = big_text(2_000_000, 1)  # a 2 MB tool result, as in the issue
    args: JsonObject = {
        "rows": [big_text(400, i) for i in range(200)],
        "name": "many rows",
    }  # ~80 KB spread over 200 strings
    reported: JsonObject = {"summary": big_text(50_000, 2)}
    text = big_text(40_000, 3)
    answer = big_text(60_000, 4)
    trace = StepTrace("fetcher")
    for event in (
        StepStarted("fetcher", {"text": big_text(70_000, 5)}, "scripted:x"),
        OutputTextDelta(text[:20_000]),
        OutputTextDelta(text[20_000:]),  # one block of text, over the cap only once joined
        ClientToolRequested("fetch", args, "call_1"),
        ClientToolResult("fetch", "call_1", result, False),
        QuestionAsked("Which?", ("Answer",)),
        QuestionAnswered("Which?", answer),
        StepReported("report_answer", "call_2", reported),
        StepFinished("fetcher", reported, 2),
    ):
        trace.apply(event)
    page = render_html(trace, ())
    plain = render_text(trace, ())
    for value in (result, args, reported["summary"], text, answer):
        assert placeholder(whole_text(value)) in page, str(value)[:40]
    assert result[:1000] not in plain and len(plain) < 5_000
    # Six values cut, each to the cap and a placeholder: the page is bounded by them, not by the 2 MB.
    assert len(page.encode()) < 6 * (VIEW_VALUE_BYTES * 1.25 + 400) + 20_000, len(page)
    assert render_html(trace, ()) == page  # deterministic


def test_a_failed_step_s_long_error_is_capped_in_both_of_its_views() -> None:
    message = "the server said: " + big_text(300_000, 7)
    trace = StepTrace("fetcher")
    trace.apply(StepStarted("fetcher", "go", "scripted:x"))
    trace.apply(StepFailed("fetcher", "RuntimeError", message))
    cut = placeholder(message)
    assert cut in render_text(trace, ()) and cut in html.unescape(render_html(trace, ()))
    assert len(render_text(trace, ()).encode()) < VIEW_VALUE_BYTES + 1_000


def test_the_cap_cuts_after_scrubbing_so_a_secret_at_the_cut_leaves_nothing_behind() -> None:
    secret = "zq" + "".join(random.Random(3).choice("ghjkmnpqrtvwxyz") for _ in range(30))
    # The secret straddles the cap: cut first, its first half would stay.
    result = "a" * (VIEW_VALUE_BYTES - 15) + secret + "b" * 100
    trace = StepTrace("fetcher")
    trace.apply(ClientToolRequested("fetch", {}, "call_1"))
    trace.apply(ClientToolResult("fetch", "call_1", result, False))
    page = render_html(trace, (secret,))
    assert secret[:10] not in page and secret[-10:] not in page
    scrubbed = result.replace(secret, "[REDACTED]")
    assert placeholder(scrubbed) in page  # the size and sha256 are of the scrubbed value, never of the secret


# --- Drawing payloads in a map's table and a comparison's grid ------------------------------------------------------


@dataclass(frozen=True)
class Details:
    cause: str = describe("Why.")
    lines: list[int] = describe("Where.")


@dataclass(frozen=True)
class Finding:
    title: str = describe("A title.")
    details: Details | None = describe("What was found.", default=None)
    notes: list[str] | None = describe("Loose notes.", default=None)


FINDER: Role[Finding] = Role(
    "finder",
    instructions="Find.",
    accepts=(Query,),
    tools=[reporting_tool("report_finding", "Report.", Finding)],
)


def finding_script(request: ModelRequest) -> Any:
    text = json.loads(request.messages[0].text.split("\n", 1)[1])["text"]
    if text == "nested":
        args: dict[str, Any] = {
            "title": "deep",
            "details": {"cause": "a <b>bold</b> claim", "lines": [3, 14]},
            "notes": ["x", "y"],
        }
    else:
        args = {"title": "flat", "details": None, "notes": None}
    return {"calls": [{"name": "report_finding", "args": args}]}


async def test_a_map_table_draws_nested_payloads_as_rows_and_none_as_the_step_view_does() -> None:
    display = FakeDisplay()
    view = NotebookMapView(FINDER, display=display, live=False)
    results = await Run(model=ScriptedModel(finding_script)).map(FINDER, [Query("nested"), Query("flat")], view=view)
    ((bundle, _),) = display.shown
    page = bundle["text/html"]
    assert page == results._repr_html_()
    # The step view's drawing of the same values: an object as rows of its keys, a list as a list, None as null.
    step_pages = []
    for item in results.items:
        step = StepTrace("finder")
        step.apply(StepReported("report_finding", "c", item.result_json))
        step_pages.append(render_html(step, ()))
    step_page = "".join(step_pages)
    nested = '<td style="text-align:left;vertical-align:top;padding:2px 8px"><code>cause</code></td>'
    assert nested in step_page and nested in page
    assert "a &lt;b&gt;bold&lt;/b&gt; claim" in page and '{"cause"' not in page  # rows, not cut raw JSON
    assert "<li><code>3</code></li>" in page and "<li><span" in page  # the lists as lists
    assert "<code>null</code>" in page and "<code>null</code>" in step_page  # None as the step view shows it
    assert ">null<" not in page.replace("<code>null</code>", "")  # never as bare text, like a string "null"


async def test_a_comparison_grid_draws_nested_payloads_as_rows_and_none_as_the_step_view_does() -> None:
    run = Run(model=ScriptedModel(finding_script))
    grid = await run.compare({"a": FINDER, "b": FINDER}, [Query("nested"), Query("flat")])
    page = grid._repr_mimebundle_()["text/html"]
    grid_page = page.split('class="agl-grid"')[1].split('class="agl-variants"')[0]
    assert "<code>cause</code>" in grid_page and "a &lt;b&gt;bold&lt;/b&gt; claim" in grid_page
    assert "<li><code>3</code></li>" in grid_page  # the list as a list
    assert "&quot;cause&quot;" not in grid_page and '{"cause"' not in grid_page  # not raw JSON
    assert grid_page.count("<td><code>null</code></td>") == 4  # flat: details and notes, in both variants
    assert ">null<" not in grid_page.replace("<code>null</code>", "")
    assert grid._repr_mimebundle_()["text/html"] == page


async def test_a_map_cell_and_a_grid_cell_over_the_cap_are_cut_with_its_size_and_sha256() -> None:
    huge: dict[str, Any] = {
        "title": "big",
        "details": {"cause": big_text(3 * VIEW_VALUE_BYTES, 9), "lines": []},
        "notes": None,
    }

    def script(request: ModelRequest) -> Any:
        return {"calls": [{"name": "report_finding", "args": huge}]}

    run = Run(model=ScriptedModel(script))
    results = await run.map(FINDER, [Query("one")])
    grid = await run.compare({"a": FINDER}, [Query("one")])
    cut = placeholder(whole_text(huge["details"]))
    assert cut in html.unescape(results._repr_html_())
    assert cut in html.unescape(grid._repr_mimebundle_()["text/html"])
    assert len(results._repr_html_()) < 2 * VIEW_VALUE_BYTES
    assert results[0].details.cause == huge["details"]["cause"]  # the results (and the record) keep everything


# --- mode "off" -------------------------------------------------------------------------------------------------


async def test_a_step_in_mode_off_says_it_was_not_recorded() -> None:
    displays: list[FakeDisplay] = []
    run = Run(model=ScriptedModel(finding_script), view=views_on(displays), mode="off")
    await run.step(FINDER, Query("flat"))
    ((bundle, _),) = displays[0].shown
    assert "recorded with" not in bundle["text/plain"] and "recorded with" not in bundle["text/html"]
    assert (
        "not recorded (mode 'off')" in bundle["text/plain"]
        and "not recorded (mode &#x27;off&#x27;)" in (bundle["text/html"])
    )
    displays.clear()
    run.mode = "auto"
    await run.step(FINDER, Query("flat"))  # recorded: says so
    assert "recorded with scripted" in displays[0].shown[0][0]["text/plain"]


async def test_a_map_item_s_step_in_mode_off_says_it_was_not_recorded(sent: Sent) -> None:
    view = NotebookMapView(FINDER, display=FakeDisplay())
    details = opened_before_the_end(view, 1)
    await Run(model=ScriptedModel(finding_script), mode="off").map(FINDER, [Query("flat")], view=view)
    assert "not recorded (mode &#x27;off&#x27;)" in details[0] and "recorded with" not in details[0]


def opened_before_the_end(view: NotebookMapView, items: int) -> list[str]:
    """Each item's step as the live view shows it when its row is opened (clicked) just before the map ends."""
    details: list[str] = []
    finish = view.finish

    def open_each_then_finish(saved: Any) -> None:
        widget = view._widget
        assert isinstance(widget, MapWidget)
        for index in range(items):
            from_browser(widget, {"kind": "open", "index": index})
            details.append(widget.detail)
        finish(saved)

    view.finish = open_each_then_finish  # type: ignore[method-assign]
    return details


# --- Secrets that HTML escapes, in the map's table, its errors, its items' steps and the grid ----------------------


def planted_secret() -> str:
    """A secret holding every character HTML escapes, and a space (so a scripted model streams it in two deltas)."""
    core = "".join(random.SystemRandom().choice("ghjkmnpqrtvwxyz") for _ in range(20))
    return f"pw&'\"<{core[:10]} >{core[10:]}"


def leaked(texts: list[str], secret: str) -> list[str]:
    """The texts in which any 6 characters running of the secret's letters appear, in any spelling drawn."""
    core = re.sub(r"[^a-z]", "", secret)[2:]
    found = []
    for text in texts:
        for spelling in (text, html.unescape(text), html.unescape(html.unescape(text))):
            if any(core[i : i + 6] in spelling for i in range(len(core) - 5)):
                found.append(text[:80])
                break
    return found


def leaky_role(secret: str) -> Role[Finding]:
    async def look_up(query: Query) -> ToolResult:
        if query.text.startswith("bad"):
            # Long enough that the table cuts the error: cut first, most of the secret would stay.
            raise RuntimeError(f"{'the login failed ' * 9}for {secret} and more")
        return ToolResult(f"found it for {secret}")

    return Role(
        "finder",
        instructions="Find.",
        accepts=(Query,),
        tools=[tool("look_up", "Look.", Query, look_up), reporting_tool("report_finding", "Report.", Finding)],
    )


def leaky_script(secret: str) -> Any:
    def script(request: ModelRequest) -> Any:
        text = json.loads(request.messages[0].text.split("\n", 1)[1])["text"]
        if len(request.messages) == 1:
            # The secret streamed in two deltas (split at its space), then a call.
            return {"text": f"I see {secret} here", "calls": [{"name": "look_up", "args": {"text": text}}]}
        title = f"{'a long title ' * 4}{secret}"  # past the table's cut of 60: cut first, part of it would stay
        args = {"title": title, "details": {"cause": secret, "lines": [1]}, "notes": [secret, json.dumps(secret)]}
        return {"calls": [{"name": "report_finding", "args": args}]}

    return script


async def test_a_secret_holding_html_characters_is_in_no_map_or_compare_view(
    monkeypatch: pytest.MonkeyPatch, sent: Sent
) -> None:
    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)  # the way the scrubber learns a secret
    role = leaky_role(secret)
    inputs = [Query(f"good {secret}"), Query(f"bad {secret}"), Query(f"{'padding ' * 6}{secret}")]
    display = FakeDisplay()
    view = NotebookMapView(role, display=display)
    details = opened_before_the_end(view, len(inputs))  # each item's step, its streamed text included
    run = Run(model=ScriptedModel(leaky_script(secret)))
    results = await run.map(role, inputs, view=view)
    assert len(results.failures) == 1
    assert "I see [REDACTED] here" in details[0]
    grid = await run.compare({"a": role, "b": role}, inputs)
    shown = [*display.updates[-1][0].values(), repr(results), results._repr_html_(), *details]
    shown += [*grid._repr_mimebundle_().values(), repr(grid)]
    assert not leaked(shown, secret), leaked(shown, secret)
    assert "RuntimeError" in repr(results) and "[REDACTED]" in results._repr_html_()


def test_the_map_table_scrubs_a_cell_and_an_error_before_cutting_them(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok-" + "".join(random.Random(5).choice("ghjkmnpqrtvwxyz") for _ in range(40))
    monkeypatch.setenv("AGL_TEST_SERVICE_TOKEN", secret)
    items = [MapItem(0, None, {"text": "x" * 50 + secret}), MapItem(1, None, {"text": "y"})]
    state = MapState("m", "finder", items, fields=("summary",), state="finished")
    items[0].status, items[0].result_json = "done", {"summary": "z" * 55 + secret}
    items[1].status, items[1].error = "failed", RuntimeError("e" * 150 + secret)
    state.done, state.failed, state.failures = 1, 1, [items[1]]
    for page in (render_map_text(state), render_map_html(state)):  # the environment's secrets
        assert "tok-" not in page, page  # not even the start of the secret, where a cell or an error was cut
        assert page.count("[RED") == 3  # the input's cell, the result's (cut after it) and the error
