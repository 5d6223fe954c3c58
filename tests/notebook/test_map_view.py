"""The map's notebook view without a kernel: a fake display, and fake comms counting every widget message."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from agl_notebook import Role, Run, ScriptedModel, TextInput, reporting_tool, tool
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.map_view import MapWidget, NotebookMapView
from agl_notebook.notebook.terminal import WidgetTerminal
from agl_notebook.notebook.view import WIDGET_MIME
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.screens import Screen
from agl_notebook.tools import ToolResult
from tests.support.steps import Answer, Query
from tests.support.widgets import FakeDisplay, Sent, from_browser

ROLE: Role[Answer] = Role(
    "summarizer",
    instructions="Summarize the text.",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)


def item_text(request: ModelRequest) -> str:
    return str(json.loads(request.messages[0].text.split("\n", 1)[1])["text"])


async def slow_script(request: ModelRequest) -> Any:
    """Each item takes 20 ms; texts starting with "bad" never report."""
    await asyncio.sleep(0.02)
    text = item_text(request)
    if text.startswith("bad"):
        return "No."
    return {"calls": [{"name": "report_answer", "args": {"summary": f"about {text}"}}]}


def map_messages(sent: Sent, widget_ids: set[str]) -> list[Any]:
    return [d for kind, d in sent if kind == "comm_msg" and d.get("method") == "update"]


async def until(condition: Any) -> None:
    """Wait (polling the view, which has no event to wait on) until ``condition()``."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("the map did not get there")


async def test_a_running_map_sends_at_most_two_widget_messages_a_second(sent: Sent) -> None:
    display = FakeDisplay()
    view = NotebookMapView(ROLE, display=display)
    started = time.monotonic()
    inputs = [Query(f"t{i}") for i in range(500)]
    results = await Run(model=ScriptedModel(slow_script)).map(ROLE, inputs, concurrency=8, view=view)
    seconds = time.monotonic() - started
    assert seconds > 1.0, "the map must run long enough to measure a rate"
    updates = [d for kind, d in sent if kind == "comm_msg"]
    assert len(updates) <= 2 * seconds + 2, (len(updates), seconds)
    assert view.redraws >= 2  # it did redraw while running
    assert len(results) == 500 and not results.failures
    # The live display became the static bundle carrying every record; every widget closed.
    ((live, _),) = display.shown
    assert WIDGET_MIME in live
    ((final, metadata),) = display.updates
    assert WIDGET_MIME not in final
    assert len(metadata["agl_notebook"]["records"]) == 500
    assert len([k for k, _ in sent if k == "comm_open"]) == len([k for k, _ in sent if k == "comm_close"])


async def test_the_static_view_is_small_deterministic_and_the_same_when_replayed(sent: Sent) -> None:
    store = MemoryStore()
    inputs = [Query(f"bad{i}" if i % 40 == 7 else f"t{i}") for i in range(300)]
    live = FakeDisplay()
    await Run(model=ScriptedModel(slow_script), store=store).map(
        ROLE, inputs, concurrency=16, view=NotebookMapView(ROLE, display=live)
    )
    replayed = FakeDisplay()
    await Run(model=ScriptedModel(slow_script), store=store).map(
        ROLE, inputs, concurrency=16, view=NotebookMapView(ROLE, display=replayed, live=False)
    )
    ((final, _),) = live.updates
    ((headless, metadata),) = replayed.shown  # headless: displayed once, already final
    assert headless == final
    text = final["text/plain"]
    assert text.startswith("map 'summarizer' of role 'summarizer': 300 items: 292 done, 8 failed")
    assert len(text.splitlines()) == 1 + 1 + 50 + 1 + 1 + 6  # summary, header, 50 rows, note, failures
    assert "t49 | about t49" in text and "t50" not in text
    assert "287: failed: RoleIncompleteError" in text
    assert len(final["text/html"]) < 40_000
    kinds = [r["kind"] for r in metadata["agl_notebook"]["records"]]
    assert (kinds.count("step"), kinds.count("failure")) == (292, 8)  # the failed items keep failure records only


async def test_stop_starts_no_more_items_and_keeps_the_finished_ones(sent: Sent) -> None:
    view = NotebookMapView(ROLE, display=FakeDisplay())
    store = MemoryStore()
    task = asyncio.ensure_future(
        Run(model=ScriptedModel(slow_script), store=store).map(
            ROLE, [Query(f"t{i}") for i in range(100)], concurrency=2, view=view
        )
    )
    await until(lambda: len(store.records()) >= 4)
    (widget,) = [w for w in _widgets(view) if isinstance(w, MapWidget)]
    from_browser(widget, {"kind": "stop"})
    assert widget.stopping
    results = await task
    finished = sum(r.finished for r in store.records())
    assert 4 <= finished <= 8
    assert len(store.records()) == 100, "each item not started keeps a failure record (not run)"
    assert len([r for r in results if not hasattr(r, "error")]) == finished
    assert "(stopped)" in repr(results)


async def test_opening_a_row_shows_that_item_s_step(sent: Sent) -> None:
    view = NotebookMapView(ROLE, display=FakeDisplay())
    gate = asyncio.Event()

    async def script(request: ModelRequest) -> Any:
        text = item_text(request)
        if text == "last":
            await gate.wait()
        return {"calls": [{"name": "report_answer", "args": {"summary": f"about {text}"}}]}

    task = asyncio.ensure_future(Run(model=ScriptedModel(script)).map(ROLE, [Query("first"), Query("last")], view=view))
    await until(lambda: view._traces.get(0) is not None)
    (widget,) = [w for w in _widgets(view) if isinstance(w, MapWidget)]
    view._draw()  # what the next redraw shows: the progress line and the clickable row
    assert "1 done, 0 failed, 1 running, 0 queued;" in widget.html and " tokens; concurrency 8, about " in widget.html
    assert 'data-item="0"' in widget.html
    from_browser(widget, {"kind": "open", "index": 0})
    assert "about first" in widget.detail and "report_answer" in widget.detail
    from_browser(widget, {"kind": "open", "index": 1})
    assert "not kept" in widget.detail
    from_browser(widget, {"kind": "close"})
    assert widget.detail == ""
    gate.set()
    await task


TERMINAL = WidgetTerminal()


async def ask_day(query: Query) -> ToolResult:
    answer: str = await TERMINAL.ask(Screen(f"Which day for {query.text}?", [TextInput("Day")]))
    return ToolResult(str(answer))


ASKING: Role[Answer] = Role(
    "asker",
    instructions="Ask, then report.",
    accepts=(Query,),
    tools=[
        tool("ask_day", "Ask which day.", Query, ask_day),
        reporting_tool("report_answer", "Report what you found.", Answer),
    ],
)


async def asking_script(request: ModelRequest) -> Any:
    if len(request.messages) == 1:
        return {"calls": [{"name": "ask_day", "args": {"text": item_text(request)}}]}
    day = request.messages[-1].content[0].content  # type: ignore[union-attr]
    return {"calls": [{"name": "report_answer", "args": {"summary": f"on {day}"}}]}


async def test_questions_of_items_queue_and_are_answered_one_at_a_time_with_the_input_shown(sent: Sent) -> None:
    view = NotebookMapView(ASKING, display=FakeDisplay())
    run = Run(model=ScriptedModel(asking_script), terminal=TERMINAL)
    task = asyncio.ensure_future(run.map(ASKING, [Query("alpha"), Query("beta")], view=view))
    answers = {"alpha": "Monday", "beta": "Friday"}
    asked: list[str] = []
    for _ in range(2):
        await until(lambda: view._questions is not None and len(view._questions.children) == 2)
        header, form = view._questions.children
        assert len(view._questions.children) == 2  # one question at a time
        which = "alpha" if "alpha" in header.value else "beta"
        asked.append(which)
        assert f"Item {0 if which == 'alpha' else 1}</b> ({{&quot;text&quot;: &quot;{which}&quot;}})" in header.value
        assert f"asks: Which day for {which}?" in header.value
        from_browser(form, {"kind": "submit", "attempt": 1, "values": [answers[which]]})
        await until(lambda h=header: view._questions is None or view._questions.children[:1] != (h,))
    results = await task
    assert sorted(asked) == ["alpha", "beta"]
    assert [r.summary for r in results] == ["on Monday", "on Friday"]


def _widgets(view: NotebookMapView) -> list[Any]:
    box = view._box
    return list(box.children) if box is not None else []


async def test_always_approves_the_pending_calls_of_that_tool_in_the_map(sent: Sent) -> None:
    from agl_notebook.notebook.approval_form import ApprovalForm
    from tests.support.approvals import ASKED, Weather, weather_role

    handler = Weather()
    forecaster = weather_role(handler)
    view = NotebookMapView(forecaster, display=FakeDisplay())

    def script(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return {"calls": [{"name": "weather", "args": ASKED}]}
        return {"calls": [{"name": "report", "args": {"text": "sunny"}}]}

    run = Run(model=ScriptedModel(script), terminal=WidgetTerminal())
    task = asyncio.ensure_future(run.map(forecaster, ["a", "b", "c"], view=view))
    await until(lambda: view._questions is not None and len(view._questions.children) == 2)
    header, panel = view._questions.children
    assert isinstance(panel, ApprovalForm) and "asks to call weather" in header.value
    from_browser(panel, {"kind": "always"})
    results = await asyncio.wait_for(task, 10)  # without "always" covering them, the other calls would wait
    assert not results.failures
    assert len(handler.calls) == 3
    panels = [d for kind, d in sent if kind == "comm_open" and d["state"].get("tool") == "weather"]
    assert len(panels) == 1  # the other two calls were approved with it, never shown


async def test_opening_a_judged_row_shows_the_verdict_and_the_reasoning(sent: Sent) -> None:
    from agl_notebook import Verdict, judge

    gate = asyncio.Event()

    async def answer(request: ModelRequest) -> Any:
        text = item_text(request)
        if text == "last":
            await gate.wait()
        return {"calls": [{"name": "report_answer", "args": {"summary": f"about {text}"}}]}

    def grade(request: ModelRequest) -> Any:
        return {"calls": [{"name": "report_verdict", "args": {"reasoning": "it names the <topic>", "score": 1}}]}

    tools = [reporting_tool("report_verdict", "Report your verdict.", Verdict)]
    grader: Role[Verdict] = Role("grader", "Judge.", tools=tools, model=ScriptedModel(grade))
    answerer: Role[Answer] = Role(
        ROLE.name, ROLE.instructions, accepts=(Query,), tools=list(ROLE.tools), model=ScriptedModel(answer)
    )
    view = NotebookMapView(ROLE, display=FakeDisplay())
    inputs = [Query("first"), Query("last")]
    task = asyncio.ensure_future(Run().map(answerer, inputs, view=view, score=judge(grader, "Names it.")))
    await until(lambda: view._state is not None and view._state.done == 1)
    (widget,) = [w for w in _widgets(view) if isinstance(w, MapWidget)]
    from_browser(widget, {"kind": "open", "index": 0})
    assert "about first" in widget.detail
    assert "<b>Verdict: 1.0</b> it names the &lt;topic&gt;" in widget.detail
    gate.set()
    await task


def offered(sent: Sent) -> bool:
    """Whether a map widget was told to offer "Only changed items" (its ``paired`` trait sent as true)."""
    return any(kind == "comm_msg" and d.get("state", {}).get("paired") is True for kind, d in sent)


def edited(instructions: str) -> Role[Answer]:
    return Role("summarizer", instructions, accepts=(Query,), tools=ROLE.tools)


async def test_against_a_previous_run_the_live_view_marks_the_changed_rows_and_the_saved_view_does_not(
    sent: Sent,
) -> None:
    """The live table marks each changed row (the view's "Only changed items" keeps those, in the browser); the
    widget offers the filter only once an item has a previous version; the saved bundle is the replay's, unmarked."""
    gate = asyncio.Event()

    async def script(request: ModelRequest) -> Any:
        text = item_text(request)
        if text == "t8" and "again" in request.system:
            await gate.wait()  # the last item runs on while the table is read
        n = int(text[1:])
        edit = "again" in request.system and n % 3 == 0
        return {"calls": [{"name": "report_answer", "args": {"summary": "short" if edit else f"about {text}"}}]}

    def score(query: Query, answer: Answer) -> bool:
        return len(answer.summary) < 6

    store = MemoryStore()
    inputs = [Query(f"t{i}") for i in range(9)]
    first = NotebookMapView(ROLE, display=FakeDisplay())
    gate.set()
    await Run(model=ScriptedModel(script), store=store).map(edited("Summarize."), inputs, score=score, view=first)
    assert not offered(sent), "no previous run: the view never offers the filter"
    gate.clear()
    display = FakeDisplay()
    view = NotebookMapView(ROLE, display=display)
    role = edited("Summarize.\nThen summarize again.")
    task = asyncio.ensure_future(
        Run(model=ScriptedModel(script), store=store).map(role, inputs, score=score, view=view)
    )
    await until(lambda: view._widget is not None and view._state is not None and view._state.done == 8)
    (widget,) = [w for w in _widgets(view) if isinstance(w, MapWidget)]
    view._draw()
    assert widget.paired and offered(sent)
    marked = re.findall(r'<tr data-item="(\d+)"( data-changed="")?', widget.html)
    assert [(int(i), bool(m)) for i, m in marked] == [(0, True), (3, True), (6, True)] + [
        (i, False) for i in (1, 2, 4, 5, 7)
    ], "the improved items first, each marked; the unchanged ones unmarked"
    gate.set()
    await task
    ((final, _),) = display.updates
    assert "data-changed" not in final["text/html"] and "data-item" not in final["text/html"]
    replayed = FakeDisplay()
    await Run(model=ScriptedModel(script), store=store, mode="replay").map(
        role, inputs, score=score, view=NotebookMapView(ROLE, display=replayed, live=False)
    )
    ((headless, _),) = replayed.shown
    assert headless == final, "the filter is the live view's: the saved view is the replay's"
    assert "3 improved, 0 regressed, 6 unchanged" in final["text/plain"]
