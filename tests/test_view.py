"""The notebook view without a browser or a kernel: a fake comm records every widget message sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool
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
from agl_notebook.notebook import view as view_module
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import WIDGET_MIME, NotebookView


class RecordingComm(BaseComm):
    """A comm that keeps what it would have sent."""

    def __init__(self, sent: list[tuple[str, Any]], *args: Any, **kwargs: Any) -> None:
        self._sent = sent
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None,
                    **keys: Any) -> None:
        self._sent.append((msg_type, data))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    messages: list[tuple[str, Any]] = []
    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(messages, *a, **k))
    return messages


class FakeDisplay:
    """Stands in for IPython's display: keeps every bundle shown and every update of it."""

    def __init__(self) -> None:
        self.shown: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.updates: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def __call__(self, bundle: dict[str, Any], *, raw: bool, metadata: dict[str, Any] | None = None,
                 display_id: bool = False) -> Any:
        assert raw
        self.shown.append((bundle, metadata or {}))
        return self if display_id else None

    def update(self, bundle: dict[str, Any], *, metadata: dict[str, Any], raw: bool) -> None:
        self.updates.append((bundle, metadata))


@dataclass(frozen=True)
class Query:
    text: str = describe("What to look up.")


@dataclass(frozen=True)
class Verdict:
    summary: str = describe("One sentence <b>summary</b>.")


async def look_up(query: Query) -> ToolResult:
    return ToolResult(text=f"<script>alert('{query.text}')</script>")


ROLE = Role(name="judge", instructions="Judge.", tools=[tool("look_up", "Look it up.", Query, look_up),
                                                        reporting_tool("verdict", "Give the verdict.", Verdict)])
SCRIPT = [{"text": "Let me <i>check</i>.", "calls": [{"name": "look_up", "args": {"text": "<img src=x>"}}]},
          {"calls": [{"name": "verdict", "args": {"summary": "Fine & dandy </td>"}}]}]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(view_module.time, "monotonic", lambda: now[0])
    return now


def widget_updates(sent: list[tuple[str, Any]]) -> list[Any]:
    return [d for kind, d in sent if kind == "comm_msg" and d.get("method") == "update" and "value" in d["state"]]


def test_five_thousand_deltas_over_five_seconds_redraw_at_most_twenty_times_a_second(
        sent: list[tuple[str, Any]], clock: list[float]) -> None:
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
    assert len(opened) == len(closed) == 7  # the box, its HTML and question area, their layouts and style


async def test_live_and_replayed_steps_leave_the_same_final_bundle(sent: list[tuple[str, Any]]) -> None:
    model = ScriptedModel(SCRIPT)
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    live = Run(model=model, view=lambda role: NotebookView(role, display=live_display))
    await live.step(ROLE, "Is it fine?")
    replay = Run(model=model, store=live.store, mode="replay",
                 view=lambda role: NotebookView(role, display=replay_display))
    await replay.step(ROLE, "Is it fine?")
    ((final, metadata),) = live_display.updates
    ((replayed, replay_metadata),) = replay_display.shown  # displayed once, already final: no widget
    assert final == replayed
    assert WIDGET_MIME not in replayed
    # Only the provenance differs (output metadata, which nbval does not compare; the extension draws it).
    live_source, replay_source = metadata.pop("agl_notebook_provenance"), replay_metadata.pop("agl_notebook_provenance")
    assert (live_source["source"], replay_source["source"]) == ("live", "replayed")
    assert metadata == replay_metadata
    assert metadata["agl_notebook"]["records"][0]["role"] == "judge"


async def test_everything_drawn_is_escaped(sent: list[tuple[str, Any]]) -> None:
    display = FakeDisplay()
    await Run(model=ScriptedModel(SCRIPT), view=lambda role: NotebookView(role, display=display)).step(
        ROLE, "<b>Is</b> it fine?")
    html = display.updates[0][0]["text/html"]
    for hostile in ("<script", "<img", "<i>check", "dandy </td>", "<b>Is"):
        assert hostile not in html
    assert "&lt;script&gt;alert(&#x27;&lt;img src=x&gt;&#x27;)&lt;/script&gt;" in html
    assert "Fine &amp; dandy &lt;/td&gt;" in html
    assert "One sentence &lt;b&gt;summary&lt;/b&gt;." in html  # the field's description, in the result table


def test_the_text_view_is_deterministic_and_says_what_the_record_claims() -> None:
    trace = StepTrace("judge")
    for event in (StepStarted("judge", "q", "scripted:abc"), ClientToolRequested("look_up", {"text": "x"}, "t1"),
                  ClientToolResult("look_up", "t1", "found", False), QuestionAsked("Which one?", ("Answer",)),
                  QuestionAnswered("Which one?", "the first"), ClientToolRequested("verdict", {"summary": "ok"}, "t2"),
                  StepReported("verdict", "t2", {"summary": "ok"}),
                  ClientToolResult("verdict", "t2", "Reported.", False)):
        trace.apply(event)
    assert render_text(trace) == (
        "agl_notebook step: role 'judge', running, with scripted:abc\n"
        "  tool look_up: ok\n"
        "  question 'Which one?': \"the first\"\n"
        "  tool verdict: reported\n"
        "  result (verdict): {\"summary\": \"ok\"}")
    assert render_html(trace) == render_html(trace)


async def test_a_failed_step_shows_what_failed_and_records_nothing(sent: list[tuple[str, Any]]) -> None:
    display = FakeDisplay()

    async def broken(query: Query) -> ToolResult:
        raise ConnectionError("the docs server is down")

    role = Role(name="judge", instructions="Judge.", tools=[tool("look_up", "Look it up.", Query, broken),
                                                            reporting_tool("verdict", "Verdict.", Verdict)])
    run = Run(model=ScriptedModel(SCRIPT), view=lambda r: NotebookView(r, display=display))
    with pytest.raises(ConnectionError):
        await run.step(role, "Is it fine?")
    ((bundle, metadata),) = display.updates
    assert metadata == {}
    assert "error: ConnectionError: the docs server is down" in bundle["text/plain"]
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
