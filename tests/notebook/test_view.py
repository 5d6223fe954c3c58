"""The notebook view without a browser or a kernel: a fake comm records every widget message sent (the ``sent``
fixture of tests/conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import pytest
from ipywidgets.widgets.widget import _instances

from agl_notebook import (
    ChoiceInput,
    ConfirmInput,
    NumberInput,
    Role,
    Run,
    Screen,
    ScriptedModel,
    TextInput,
    ToolResult,
    describe,
    reporting_tool,
    tool,
)
from agl_notebook.events import (
    ClientToolRequested,
    ClientToolResult,
    OutputTextDelta,
    QuestionAnswered,
    QuestionAsked,
    StepFailed,
    StepReported,
    StepStarted,
)
from agl_notebook.models.scripted import TurnLike
from agl_notebook.notebook import form as form_module
from agl_notebook.notebook import view as view_module
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import WIDGET_MIME, NotebookView
from agl_notebook.replay import MemoryStore
from agl_notebook.replay.records import VIEWS, record_from_json
from tests.support.steps import Query
from tests.support.widgets import FakeDisplay, Sent, form_state, from_browser


@dataclass(frozen=True)
class Verdict:
    summary: str = describe("One sentence <b>summary</b>.")


async def look_up(query: Query) -> ToolResult:
    return ToolResult(text=f"<script>alert('{query.text}')</script>")


ROLE: Role[Verdict] = Role(
    name="judge",
    instructions="Judge.",
    tools=[tool("look_up", "Look it up.", Query, look_up), reporting_tool("verdict", "Give the verdict.", Verdict)],
)
SCRIPT: list[TurnLike] = [
    {"text": "Let me <i>check</i>.", "calls": [{"name": "look_up", "args": {"text": "<img src=x>"}}]},
    {"calls": [{"name": "verdict", "args": {"summary": "Fine & dandy </td>"}}]},
]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr("agl_notebook.notebook.view.time.monotonic", lambda: now[0])
    return now


def widget_updates(sent: Sent) -> list[Any]:
    return [d for kind, d in sent if kind == "comm_msg" and d.get("method") == "update" and "value" in d["state"]]


def test_five_thousand_deltas_over_five_seconds_redraw_at_most_twenty_times_a_second(
    sent: Sent, clock: list[float]
) -> None:
    display = FakeDisplay()
    view = NotebookView(ROLE, display=display)
    view.begin(replaying=False)
    view.event(StepStarted("judge", "q", "scripted:x"))
    before = len(widget_updates(sent))
    for i in range(5000):
        clock[0] += 0.001
        view.event(OutputTextDelta(f"w{i} "))
    redraws = len(widget_updates(sent)) - before
    assert 95 <= redraws <= 101, redraws  # 5 seconds at 20 a second
    view.finish(None)
    ((bundle, metadata),) = display.updates
    assert metadata == {}
    assert WIDGET_MIME not in bundle
    assert "w4999" in bundle["text/html"]
    opened = [kind for kind, _ in sent if kind == "comm_open"]
    closed = [kind for kind, _ in sent if kind == "comm_close"]
    assert len(opened) == len(closed) == 6  # the box, its step widget and question area, and their layouts


async def test_live_and_replayed_steps_leave_the_same_final_bundle(sent: Sent) -> None:
    model = ScriptedModel(SCRIPT)
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    live = Run(model=model, view=lambda role: NotebookView(role, display=live_display))
    await live.step(ROLE, "Is it fine?")
    replay = Run(
        model=model,
        store=live.store,
        mode="replay",
        view=lambda role: NotebookView(role, display=replay_display, live=False),
    )
    await replay.step(ROLE, "Is it fine?")
    watched_display = FakeDisplay()
    watched = Run(
        model=model, store=live.store, mode="replay", view=lambda role: NotebookView(role, display=watched_display)
    )
    await watched.step(ROLE, "Is it fine?")
    # Live: the header at once, then the widget, then the final bundle, each in place of the one before.
    ((header, _),) = live_display.shown
    assert "waiting for scripted:" in header["text/plain"]
    (widget, _), (final, metadata) = live_display.updates
    assert WIDGET_MIME in widget
    ((replayed, replay_metadata),) = replay_display.shown  # headless: displayed once, already final: no widget
    assert final == replayed == watched_display.updates[-1][0]
    assert WIDGET_MIME not in replayed
    # Only the provenance differs (output metadata, which nbval does not compare; the extension draws it).
    live_source, replay_source = metadata.pop("agl_notebook_provenance"), replay_metadata.pop("agl_notebook_provenance")
    assert (live_source["source"], replay_source["source"]) == ("live", "replayed")
    assert metadata == replay_metadata
    assert metadata["agl_notebook"]["records"][0]["role"] == "judge"


async def test_everything_drawn_is_escaped(sent: Sent) -> None:
    display = FakeDisplay()
    await Run(model=ScriptedModel(SCRIPT), view=lambda role: NotebookView(role, display=display)).step(
        ROLE, "<b>Is</b> it fine?"
    )
    html = display.updates[-1][0]["text/html"]
    for hostile in ("<script", "<img", "<i>check", "dandy </td>", "<b>Is"):
        assert hostile not in html
    assert "&lt;script&gt;alert(&#x27;&lt;img src=x&gt;&#x27;)&lt;/script&gt;" in html
    assert "Fine &amp; dandy &lt;/td&gt;" in html
    assert "One sentence &lt;b&gt;summary&lt;/b&gt;." in html  # the field's description, in the result table


def test_the_text_view_is_deterministic_and_says_what_the_record_claims() -> None:
    trace = StepTrace("judge")
    for event in (
        StepStarted("judge", "q", "scripted:abc"),
        ClientToolRequested("look_up", {"text": "x"}, "t1"),
        ClientToolResult("look_up", "t1", "found", False),
        QuestionAsked("Which one?", ("Answer",)),
        QuestionAnswered("Which one?", "the first"),
        ClientToolRequested("verdict", {"summary": "ok"}, "t2"),
        StepReported("verdict", "t2", {"summary": "ok"}),
        ClientToolResult("verdict", "t2", "Reported.", False),
    ):
        trace.apply(event)
    assert render_text(trace) == (
        "agl_notebook step: role 'judge', running, with scripted:abc\n"
        "  tool look_up: ok\n"
        "  question 'Which one?': \"the first\"\n"
        "  tool verdict: reported\n"
        "  result (verdict):\n"
        '    summary: "ok"'
    )
    assert render_html(trace) == render_html(trace)


async def test_a_failed_step_shows_what_failed_and_records_nothing(sent: Sent) -> None:
    display = FakeDisplay()

    async def broken(query: Query) -> ToolResult:
        raise ConnectionError("the docs server is down")

    role: Role[Verdict] = Role(
        name="judge",
        instructions="Judge.",
        tools=[tool("look_up", "Look it up.", Query, broken), reporting_tool("verdict", "Verdict.", Verdict)],
    )
    run = Run(model=ScriptedModel(SCRIPT), view=lambda r: NotebookView(r, display=display))
    with pytest.raises(ConnectionError):
        await run.step(role, "Is it fine?")
    bundle, metadata = display.updates[-1]
    assert metadata == {}
    text = bundle["text/plain"]
    assert "error: ConnectionError in the handler of tool look_up: the docs server is down" in text
    assert "failed, nothing was recorded, with scripted:" in text  # not "recorded with": nothing was
    assert "tool look_up: raised an error" in text  # not left "running…"
    assert WIDGET_MIME not in bundle
    assert run.store.records() == ()


def test_step_failed_event_marks_the_trace_failed() -> None:
    trace = StepTrace("judge")
    trace.apply(StepFailed("judge", "KeyboardInterrupt", ""))
    assert trace.state == "failed"
    assert "failed" in render_text(trace)


def test_a_dropped_markup_span_is_shown() -> None:
    from agl_notebook.events import MarkupError

    trace = StepTrace("agent")
    trace.apply(MarkupError("not valid JSON", "{not json"))
    assert "  markup error: not valid JSON" in render_text(trace)
    assert "A tool call written as text was dropped: not valid JSON" in render_html(trace)


# The question form ---------------------------------------------------------------------------------------------

MEETING: Screen[tuple[str, int, str, bool]] = Screen(
    "Book the room?",
    [
        TextInput("Title"),
        NumberInput("Attendees", int, min=1, max=20),
        ChoiceInput("Room", ["Aster", "Birch", "Cedar"]),
        ConfirmInput("Send invites"),
    ],
)


def submit(widget: Any, attempt: int, values: list[object]) -> None:
    from_browser(widget, {"kind": "submit", "attempt": attempt, "values": values})


async def open_question(view: NotebookView, screen: Screen[Any]) -> tuple[asyncio.Task[list[object]], Any]:
    task = asyncio.create_task(view.ask(screen))
    await asyncio.sleep(0)  # the task runs until it awaits the answer: the form is drawn
    (widget,) = view._questions.children
    return task, widget


async def test_the_form_sends_every_field_at_submit_and_the_tool_gets_the_last_values(
    sent: Sent,
) -> None:
    view = NotebookView(ROLE, display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_question(view, MEETING)
    opened = form_state(sent, widget)
    assert opened["fields"] == [
        {"kind": "text", "label": "Title"},
        {
            "kind": "number",
            "label": "Attendees",
            "integer": True,
            "placeholder": "1\u201320",
            "hint": "a whole number from 1 to 20",
        },
        {"kind": "choice", "label": "Room", "options": ["Aster", "Birch", "Cedar"], "placeholder": "Choose one\u2026"},
        {"kind": "confirm", "label": "Send invites"},
    ]
    assert opened["errors"] == ["", "", "", ""] and opened["title"] == ""  # the step's view shows the question
    assert "render" in opened["_esm"] and ".agl-form" in opened["_css"]

    # An invalid number, corrected twice; every field changed between submissions; the last submission wins.
    submit(widget, 1, ["Planning", "50", "Aster", False])
    state = form_state(sent, widget)
    assert state["errors"] == ["", "Attendees: 50 is above the maximum 20; type a whole number from 1 to 20.", "", ""]
    assert (state["checked"], state["accepted"]) == (1, False)
    submit(widget, 2, ["Planning review", "0", None, None])
    state = form_state(sent, widget)
    assert state["errors"] == [
        "",
        "Attendees: 0 is below the minimum 1; type a whole number from 1 to 20.",
        "Room: choose one of Aster, Birch, Cedar.",
        "Send invites: choose Yes or No.",
    ]
    assert (state["checked"], state["accepted"]) == (2, False)
    await asyncio.sleep(0.05)
    assert not task.done(), "an invalid answer leaves the form open"
    submit(widget, 3, ["Quarterly review", "7", "Cedar", True])
    assert await asyncio.wait_for(task, 5) == ["Quarterly review", 7, "Cedar", True]
    state = form_state(sent, widget)
    assert state["errors"] == ["", "", "", ""] and (state["checked"], state["accepted"]) == (3, True)
    assert view._questions.children == ()
    view.finish(None)
    forms = [d for k, d in sent if k == "comm_open" and "fields" in d["state"]]
    assert len(forms) == 1
    assert len([k for k, _ in sent if k == "comm_open"]) == len([k for k, _ in sent if k == "comm_close"])


async def test_each_submission_sends_one_update_and_a_late_or_malformed_one_changes_nothing(
    sent: Sent,
) -> None:
    view = NotebookView(ROLE, display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_question(view, Screen("Name?", [TextInput("Name")]))
    before = len(sent)
    submit(widget, 1, ["   "])
    updates = [d for k, d in sent[before:] if k == "comm_msg"]
    assert updates == [
        {"method": "update", "state": {"errors": ["Name: the answer is empty."], "checked": 1}, "buffer_paths": []}
    ], "errors and the submission they answer arrive in one message"
    submit(widget, 2, ["a", "b"])
    assert form_state(sent, widget)["message"] == (
        "The form sent ['a', 'b'] instead of 1 value(s); please submit again."
    )
    from_browser(widget, {"kind": "submit", "attempt": 3})
    assert form_state(sent, widget)["message"] == "The form sent None instead of 1 value(s); please submit again."
    submit(widget, 4, [7])
    state = form_state(sent, widget)
    assert state["errors"] == ["Name: expected typed text, got 7."] and state["message"] == ""
    assert state["checked"] == 4
    from_browser(widget, {"kind": "something else"})
    from_browser(widget, "not a dict")
    submit(widget, 5, ["Ada"])
    after_answer = len(sent)
    submit(widget, 6, ["Grace"])  # a second click before the form closed: the first valid answer stands
    assert await asyncio.wait_for(task, 5) == ["Ada"]
    assert not [d for k, d in sent[after_answer:] if k == "comm_msg" and "errors" in d.get("state", {})]
    view.finish(None)


async def test_a_submission_from_another_thread_resolves_the_answer_on_the_step_loop(
    sent: Sent,
) -> None:
    import threading

    view = NotebookView(ROLE, display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_question(view, Screen("Sure?", [ConfirmInput("Sure")]))
    thread = threading.Thread(target=submit, args=(widget, 1, [False]))  # as a kernel subshell would
    thread.start()
    thread.join()
    assert await asyncio.wait_for(task, 5) == [False]
    view.finish(None)


async def test_a_submission_handled_before_the_form_is_awaited_is_kept(sent: Sent) -> None:
    form = form_module._Form(Screen("Sure?", [ConfirmInput("Sure")]), title=False)
    submit(form.box, 1, [True])
    assert await asyncio.wait_for(form.answer(), 5) == [True]
    form.close()


async def test_a_standalone_question_shows_its_title_and_leaves_the_static_answer(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython.display

    class StandaloneDisplay(FakeDisplay):
        def update(self, bundle: dict[str, Any], *, metadata: dict[str, Any] | None = None, raw: bool) -> None:
            self.updates.append((bundle, metadata or {}))

    display = StandaloneDisplay()
    monkeypatch.setattr(IPython.display, "display", display)
    task = asyncio.create_task(view_module.standalone_ask(Screen("Which room?", [ChoiceInput("Room", ["A", "B"])])))
    await asyncio.sleep(0)
    ((bundle, _),) = display.shown
    widget = _instances[bundle[WIDGET_MIME]["model_id"]]
    assert widget.title == "Which room?"
    submit(widget, 1, ["B"])
    assert await asyncio.wait_for(task, 5) == ["B"]
    ((final, _),) = display.updates
    assert final == {
        "text/plain": "Question: Which room?\nAnswer: B",
        "text/html": "<pre>Question: Which room?\nAnswer: B</pre>",
    }
    assert widget.comm is None, "the form is closed"


def test_text_fields_say_what_to_type() -> None:
    assert form_module._field(TextInput("Notes", multiline=True)) == {"kind": "textarea", "label": "Notes"}
    assert form_module._field(TextInput("Age", int)) == {
        "kind": "number",
        "label": "Age",
        "integer": True,
        "placeholder": "a whole number",
        "hint": "",
    }
    assert form_module._field(NumberInput("Ratio", float)) == {
        "kind": "number",
        "label": "Ratio",
        "integer": False,
        "placeholder": "a number",
        "hint": "",
    }
    assert form_module._read(TextInput("Notes", multiline=True), "  two\nlines ") == "  two\nlines "


async def test_a_record_drawn_before_fork_snippets_replays_without_them_and_a_new_one_with_them() -> None:
    live = Run(model=ScriptedModel(SCRIPT), view=lambda role: NotebookView(role, display=FakeDisplay()))
    await live.step(ROLE, "Is it fine?")
    (now,) = live.store.records()
    assert now.views == VIEWS >= 2 and record_from_json(now.to_json()).views == VIEWS
    before = dataclasses.replace(now, views=1)  # as a version before `views` wrote it
    assert "views" not in before.to_json() and record_from_json(before.to_json()).views == 1
    for kept, forks in ((now, True), (before, False)):
        display = FakeDisplay()
        replay = Run(
            model=ScriptedModel(SCRIPT),
            store=MemoryStore([kept]),
            mode="replay",
            view=functools.partial(NotebookView, display=display, live=False),
        )
        await replay.step(ROLE, "Is it fine?")
        ((bundle, _),) = display.shown
        assert ('class="agl-fork"' in bundle["text/html"]) is forks
        assert ("fork_from=" in bundle["text/plain"]) is False  # the text view never had them


def test_a_screens_answer_is_drawn_label_by_label_from_view_version_3_and_as_before_for_older_records() -> None:
    planted = "pw-" + "labelled" * 3  # a secret in an answer, built at run time
    inputs = ("Response", "Email (an email address)", "Nights", "Note, optional")
    secrets = (planted,)

    def drawn(answer: Any, views: int) -> tuple[str, str]:
        trace = StepTrace("booker")
        trace.apply(QuestionAsked("Book a room?", inputs))
        trace.apply(QuestionAnswered("Book a room?", answer))
        trace.views = views
        return render_html(trace, secrets), render_text(trace, secrets)

    html_now, text_now = drawn(["Accept", f"ada@example.org {planted}", 3, None], 3)
    assert "Email (an email address): " in html_now and "Nights: " in html_now and "Response: " in html_now
    assert "Nights: 3" in text_now and planted not in html_now + text_now
    html_old, text_old = drawn(["Accept", "ada@example.org", 3, None], 2)  # a record drawn before labels
    assert "Nights" not in html_old and "Nights" not in text_old
    declined, declined_text = drawn(["Decline", None, None, None], 3)
    assert "Response: " in declined and "Decline" in declined and "null" not in declined and "Nights" not in declined
    assert "Decline" in declined_text and "None" not in declined_text and "null" not in declined_text
    one, _ = drawn("Saturday", 3)  # one value, as before
    assert "Saturday" in one and "Response" not in one
