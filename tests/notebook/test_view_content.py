"""What a step's view says, as a person reads it: the header at once, labels, start order, failures, big values."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool
from agl_notebook.events import ClientToolExecuting, ClientToolRequested, QuestionAsked, StepFailed, StepStarted
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import WIDGET_MIME, DisplayOrder, NotebookView
from tests.support.widgets import FakeDisplay, Sent


@dataclass(frozen=True)
class Topic:
    name: str = describe("What to research.")
    depth: int = describe("How deep to go.", default=1)


@dataclass(frozen=True)
class Notes:
    points: list[str] = describe("What was found.")


REPORT = reporting_tool("report", "Report the notes.", Notes)
RESEARCHER: Role[Notes] = Role(name="researcher", instructions="Research the topic.", tools=[REPORT])


def report(*points: str) -> dict[str, Any]:
    return {"calls": [{"name": "report", "args": {"points": list(points)}}]}


# The header at once ------------------------------------------------------------------------------------------------


async def test_a_live_step_shows_its_header_before_the_model_answers(sent: Sent) -> None:
    display = FakeDisplay()
    released = asyncio.Event()

    async def slow(request: ModelRequest) -> dict[str, Any]:
        await released.wait()
        return report("done")

    run = Run(model=ScriptedModel(slow), view=lambda role: NotebookView(role, display=display))
    task = asyncio.create_task(run.step(RESEARCHER, Topic("tides")))
    await asyncio.sleep(0.05)
    # Nothing has come back from the model, and the cell already says which step this is and what it waits for.
    ((header, _),) = display.shown
    assert header["text/plain"].startswith("agl_notebook step: role 'researcher' on 'tides', waiting for scripted:")
    assert "waiting for scripted:" in header["text/html"]
    assert WIDGET_MIME in display.updates[-1][0]  # then the live widget, in the same place
    released.set()
    await task
    final = display.updates[-1][0]
    assert "waiting for" not in final["text/plain"]
    assert final["text/plain"].startswith("agl_notebook step: role 'researcher' on 'tides', finished (1 model request)")


# Labels and start order --------------------------------------------------------------------------------------------


async def test_steps_run_together_are_labelled_from_their_input_or_by_label() -> None:
    display = FakeDisplay()
    run = Run(model=ScriptedModel([report("x")]), view=lambda role: NotebookView(role, display=display, live=False))
    await asyncio.gather(
        run.step(RESEARCHER, Topic("tides and the   moon\n")),
        run.step(RESEARCHER, Topic("volcanoes")),
        run.step(RESEARCHER, Topic("volcanoes"), label="volcanoes, second look"),
        run.step(RESEARCHER, Topic("a" * 90)),
    )
    headers = [bundle["text/plain"].splitlines()[0] for bundle, _ in display.shown]
    assert [h.split(",")[0] for h in headers] == [
        "agl_notebook step: role 'researcher' on 'tides and the moon'",
        "agl_notebook step: role 'researcher' on 'volcanoes'",
        "agl_notebook step: role 'researcher' on 'volcanoes",  # the label's own comma
        "agl_notebook step: role 'researcher' on '" + "a" * 39 + "…'",
    ]
    assert '<span title="The step\'s input">volcanoes, second look</span>' in display.shown[2][0]["text/html"]


async def test_headless_views_appear_in_the_order_the_steps_started_not_the_order_they_ended() -> None:
    display = FakeDisplay()
    order = DisplayOrder()
    delays = {"first": 0.15, "second": 0.0, "third": 0.08, "fourth": 0.02}
    ended: list[str] = []

    async def reply(request: ModelRequest) -> dict[str, Any]:
        name = next(n for n in delays if n in request.messages[0].text)
        await asyncio.sleep(delays[name])
        ended.append(name)
        return report(name)

    run = Run(
        model=ScriptedModel(reply), view=lambda role: NotebookView(role, display=display, live=False, order=order)
    )
    await asyncio.gather(*(run.step(RESEARCHER, Topic(name)) for name in delays))
    assert ended == ["second", "fourth", "third", "first"]
    shown = [re.search(r"on '(\w+)'", bundle["text/plain"]).group(1) for bundle, _ in display.shown]  # type: ignore[union-attr]
    assert shown == ["first", "second", "third", "fourth"]
    # A replay of the same cell (every step answered at once, in any order) shows the same outputs.
    again, replay_order = FakeDisplay(), DisplayOrder()
    replay = Run(
        model=ScriptedModel(reply),
        store=run.store,
        mode="replay",
        view=lambda role: NotebookView(role, display=again, live=False, order=replay_order),
    )
    await asyncio.gather(*(replay.step(RESEARCHER, Topic(name)) for name in delays))
    assert [bundle for bundle, _ in again.shown] == [bundle for bundle, _ in display.shown]


def test_a_display_order_holds_back_later_bundles_until_earlier_ones_show() -> None:
    order, drawn = DisplayOrder(), []
    tickets = [order.ticket() for _ in range(4)]
    order.show(tickets[2], lambda: drawn.append(2))
    order.show(tickets[1], lambda: drawn.append(1))
    assert drawn == []
    order.show(tickets[0], lambda: drawn.append(0))
    assert drawn == [0, 1, 2]
    order.show(tickets[3], lambda: drawn.append(3))
    assert drawn == [0, 1, 2, 3]


async def test_a_failed_headless_step_keeps_its_place_and_later_steps_still_show() -> None:
    display, order = FakeDisplay(), DisplayOrder()

    async def reply(request: ModelRequest) -> dict[str, Any]:
        if "broken" in request.messages[0].text:
            await asyncio.sleep(0.05)
            raise RuntimeError("the model is down")
        return report("fine")

    run = Run(
        model=ScriptedModel(reply), view=lambda role: NotebookView(role, display=display, live=False, order=order)
    )
    results = await asyncio.gather(
        run.step(RESEARCHER, Topic("broken")), run.step(RESEARCHER, Topic("fine")), return_exceptions=True
    )
    assert isinstance(results[0], RuntimeError)
    assert ["broken" in b["text/plain"] for b, _ in display.shown] == [True, False]
    assert "failed, nothing was recorded" in display.shown[0][0]["text/plain"]


# Failed and interrupted views --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lookup:
    key: str = describe("What to look up.")


async def test_a_failed_view_names_the_raising_tool_and_gives_every_row_its_final_state(
    sent: Sent,
) -> None:
    display = FakeDisplay()

    async def lookup(args: Lookup) -> ToolResult:
        return ToolResult(text={"a": "1"}[args.key])  # a KeyError for anything but "a"

    role: Role[Notes] = Role(
        name="librarian",
        instructions="Look things up.",
        tools=[tool("lookup", "Look up a key.", Lookup, lookup), REPORT],
    )
    script = [
        {"calls": [{"name": "lookup", "args": {"key": "a"}}]},
        {"calls": [{"name": "lookup", "args": {"key": "zzz"}}]},
    ]
    with pytest.raises(KeyError):
        await Run(model=ScriptedModel(script), view=lambda r: NotebookView(r, display=display)).step(role, "go")
    final = display.updates[-1][0]
    text, page = final["text/plain"], final["text/html"]
    assert text.splitlines() == [
        "agl_notebook step: role 'librarian' on 'go', failed, nothing was recorded, with scripted:"
        + text.split("with scripted:")[1].splitlines()[0],
        "  tool lookup: ok",
        "  tool lookup: raised an error",
        "  error: KeyError in the handler of tool lookup: 'zzz'",
    ]
    assert "running…" not in page and "recorded with" not in page
    assert "raised an error" in page


def test_an_interrupted_view_says_so_and_leaves_nothing_waiting() -> None:
    trace = StepTrace("planner")
    for event in (
        StepStarted("planner", "go", "anthropic:claude-opus-5-5", "go"),
        ClientToolRequested("ask_person", {"q": "When?"}, "t1"),
        ClientToolExecuting("ask_person", "t1"),
        QuestionAsked("When shall we meet?", ("Day",)),
        ClientToolRequested("book", {}, "t2"),
        StepFailed("planner", "CancelledError", ""),
    ):
        trace.apply(event)
    text, page = render_text(trace, ()), render_html(trace, ())
    assert text.splitlines() == [
        "agl_notebook step: role 'planner' on 'go', failed, nothing was recorded, with anthropic:claude-opus-5-5",
        "  tool ask_person: interrupted",
        "  question 'When shall we meet?': not answered",
        "  tool book: not run",
        "  error: CancelledError: the step was interrupted; nothing was recorded",
    ]
    assert "waiting" not in page and "running…" not in page


# Big values --------------------------------------------------------------------------------------------------------


def _finished(result: dict[str, Any], tool_result: str = "") -> StepTrace:
    from agl_notebook.events import ClientToolResult, StepFinished, StepReported

    trace = StepTrace("writer", result_descriptions={"items": "The items.", "poem": "A poem."})
    events: list[Any] = [StepStarted("writer", "go", "scripted:x", "go")]
    if tool_result:
        events += [ClientToolRequested("fetch", {}, "t0"), ClientToolResult("fetch", "t0", tool_result, False)]
    events += [
        ClientToolRequested("report", result, "t1"),
        StepReported("report", "t1", result),
        StepFinished("writer", result, 1),
    ]
    for event in events:
        trace.apply(event)
    return trace


def test_a_long_list_is_drawn_as_a_list_in_a_capped_block() -> None:
    items = [f"item number {i}" for i in range(120)]
    page = render_html(_finished({"items": items}), ())
    table = page[page.index("Result, reported") :]
    assert table.count("<li>") == 120
    assert "<ol" in table and "item number 119" in table
    assert '"item number 0", "item number 1"' not in page  # not one JSON block
    block = table[table.index("<ol") - 60 : table.index("<ol")]
    assert "max-height:24em;overflow:auto" in block


def test_a_multi_line_string_keeps_its_line_breaks() -> None:
    poem = "Roses are red,\nviolets are blue,\nreplays are free."
    page = render_html(_finished({"poem": poem}), ())
    assert "\\n" not in page
    assert "Roses are red,\nviolets are blue,\nreplays are free." in page
    assert "white-space:pre-wrap" in page


def test_a_200_line_tool_result_scrolls_inside_a_capped_block_and_the_text_summary_stays_short() -> None:
    result = "\n".join(f"line {i}" for i in range(200))
    trace = _finished({"items": ["x" * 1000]}, tool_result=result)
    page = render_html(trace, ())
    start = page.index("line 0")
    assert "max-height:24em;overflow:auto" in page[start - 200 : start]
    text = render_text(trace, ())
    assert max(len(line) for line in text.splitlines()) < 220
    assert render_html(trace, ()) == page and render_text(trace, ()) == text  # deterministic


# Secrets across every cut ------------------------------------------------------------------------------------------


SECRET = "tok_" + "0123456789abcdef" * 2 + "fedcba98"  # 40 characters, named by a secret-looking variable


@pytest.mark.parametrize("cut", [40, 60, 100, 200])
def test_a_secret_across_any_cut_is_never_kept_in_part(cut: int) -> None:
    from agl_notebook.functions.events import Logged

    for offset in range(-len(SECRET) + 1, 0, 7):
        text = "x" * (cut + offset) + SECRET + " and more"
        trace = StepTrace("agent")
        for event in (
            StepStarted("agent", text, "scripted:x", text),
            QuestionAsked(text, ("Answer",)),
            Logged("f", "commands[0]", text),
        ):
            trace.apply(event)
        trace.apply(ClientToolRequested("report", {"v": text}, "t1"))
        from agl_notebook.events import StepReported

        trace.apply(StepReported("report", "t1", {"v": text}))
        for drawn in (render_text(trace, (SECRET,)), render_html(trace, (SECRET,))):
            for size in range(8, len(SECRET) + 1):
                assert SECRET[:size] not in drawn, (cut, offset, size)


@dataclass(frozen=True)
class Quote:
    total: float = describe("The total.")
    lines: list[str] = describe("The lines.")


async def test_arguments_given_out_of_order_draw_the_same_live_and_replayed() -> None:
    # The model writes "total" before "lines"; the record keeps canonical JSON (sorted keys).
    role: Role[Quote] = Role(
        name="quoter", instructions="Quote.", tools=[reporting_tool("report_quote", "Report.", Quote)]
    )
    script = [{"calls": [{"name": "report_quote", "args": {"total": 0.75, "lines": ["3 x bolt"]}}]}]
    live, replayed = FakeDisplay(), FakeDisplay()
    run = Run(model=ScriptedModel(script), view=lambda r: NotebookView(r, display=live, live=False))
    await run.step(role, "three bolts")
    await Run(
        model=ScriptedModel(script),
        store=run.store,
        mode="replay",
        view=lambda r: NotebookView(r, display=replayed, live=False),
    ).step(role, "three bolts")
    assert [bundle for bundle, _ in live.shown] == [bundle for bundle, _ in replayed.shown]
