"""What the notebook view tells the frontend extension: live displays marked, provenance, a miss explained live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.nbfile import LIVE_VIEW_KEY, PROVENANCE_KEY
from agl_notebook.notebook.view import SAVED_WHILE_RUNNING, WIDGET_MIME, NotebookView
from agl_notebook.replay.stores import MemoryStore
from tests.support.widgets import FakeDisplay

pytestmark = pytest.mark.usefixtures("sent")  # widgets over recording comms (tests/conftest.py)


@dataclass(frozen=True)
class Summary:
    text: str = describe("The summary.")


def summariser(instructions: str) -> Role[Summary]:
    return Role(
        name="summariser",
        instructions=instructions,
        tools=[reporting_tool("report_summary", "Report the summary.", Summary)],
    )


class Views:
    """A view factory that keeps every view it made and its display."""

    def __init__(self) -> None:
        self.views: list[NotebookView] = []
        self.displays: list[FakeDisplay] = []

    def __call__(self, role: Role[Any]) -> NotebookView:
        display = FakeDisplay()
        self.displays.append(display)
        self.views.append(NotebookView(role, display=display))
        return self.views[-1]

    def final(self) -> tuple[dict[str, Any], dict[str, Any]]:
        display = self.displays[-1]
        # A live step updates its display to the final bundle last; a replay's one display is already final.
        bundle, metadata = (display.updates or display.shown)[-1]
        return bundle, metadata


def live_html(view: NotebookView) -> str:
    value: str = view._html.value  # the live widget's HTML, as the person sees it now
    return value


async def test_a_live_display_is_marked_and_its_placeholder_says_to_run_the_cell_again() -> None:
    views = Views()
    await Run(model=ScriptedModel([{"calls": [{"name": "report_summary", "args": {"text": "x"}}]}]), view=views).step(
        summariser("Sum up."), "text"
    )
    # The header first (at once), then the live widget in its place: both marked live.
    ((header, header_metadata),) = views.displays[0].shown
    assert header_metadata == {LIVE_VIEW_KEY: {"version": 1}} and WIDGET_MIME not in header
    ((live, live_metadata), *_) = views.displays[0].updates
    assert WIDGET_MIME in live and live_metadata == {LIVE_VIEW_KEY: {"version": 1}}
    assert SAVED_WHILE_RUNNING in live["text/plain"] and SAVED_WHILE_RUNNING in live["text/html"]
    final, metadata = views.final()
    assert LIVE_VIEW_KEY not in metadata and WIDGET_MIME not in final


async def test_provenance_says_live_or_replayed_with_the_record_date_and_requests_made_now() -> None:
    views, store = Views(), MemoryStore()
    model = ScriptedModel([{"calls": [{"name": "report_summary", "args": {"text": "x"}}]}])
    await Run(model=model, store=store, view=views).step(summariser("Sum up."), "text")
    final, metadata = views.final()
    (record,) = store.records()
    live = metadata[PROVENANCE_KEY]
    assert live == {
        "version": 1,
        "source": "live",
        "model_requests": 1,
        "recorded_at": record.recorded_at,
        "record_id": record.id,
        "backend": record.backend,
    }

    await Run(model=model, store=store, view=views).step(summariser("Sum up."), "text")
    replayed_final, replayed_metadata = views.final()
    assert replayed_final == final, "the static view is the same live or replayed"
    assert replayed_metadata[PROVENANCE_KEY] == {**live, "source": "replayed", "model_requests": 0}

    await Run(model=model, mode="off", view=views).step(summariser("Sum up."), "text")
    _, off_metadata = views.final()
    assert off_metadata[PROVENANCE_KEY]["recorded_at"] is None and off_metadata[PROVENANCE_KEY]["source"] == "live"


async def test_a_step_whose_recording_no_longer_matches_says_what_differs_before_the_call() -> None:
    views, store, seen = Views(), MemoryStore(), []

    def script(request: ModelRequest) -> dict[str, Any]:
        seen.append(live_html(views.views[-1]))  # what the live view shows while the model is called
        return {"calls": [{"name": "report_summary", "args": {"text": "x"}}]}

    await Run(model=ScriptedModel(script), store=store, view=views).step(summariser("Sum up."), "text")
    assert "agl-miss" not in seen[-1], "a step never recorded is not a miss to explain"

    await Run(model=ScriptedModel(script), store=store, view=views).step(summariser("Sum up in French."), "text")
    assert 'class="agl-miss"' in seen[-1] and "differs in: instructions" in seen[-1], seen[-1]
    final, metadata = views.final()
    assert "differs in" not in final["text/plain"] and "agl-miss" not in final["text/html"]
    provenance = metadata[PROVENANCE_KEY]
    assert provenance["source"] == "live" and provenance["differing"] == ["instructions"]
    assert "differs in: instructions" in provenance["miss"]


@pytest.mark.parametrize("mode", ["replay", "refresh"])
async def test_no_miss_is_shown_outside_mode_auto(mode: Literal["replay", "refresh"]) -> None:
    views, store = Views(), MemoryStore()
    model = ScriptedModel([{"calls": [{"name": "report_summary", "args": {"text": "x"}}]}] * 2)
    await Run(model=model, store=store, view=views).step(summariser("Sum up."), "text")
    run = Run(model=model, store=store, view=views, mode=mode)
    if mode == "replay":
        with pytest.raises(Exception, match="differs in: instructions"):
            await run.step(summariser("Sum up in French."), "text")
        return
    await run.step(summariser("Sum up in French."), "text")
    assert "miss" not in views.final()[1][PROVENANCE_KEY]


async def test_a_question_asked_outside_a_step_is_marked_live_until_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    from agl_notebook import Screen, TextInput
    from agl_notebook.notebook import form as form_module
    from agl_notebook.notebook import view as view_module

    shown: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    class Handle:
        def update(self, bundle: dict[str, Any], *, raw: bool) -> None:
            shown.append(("update", bundle, {}))

    def display(
        bundle: dict[str, Any], *, raw: bool, metadata: dict[str, Any] | None = None, display_id: bool = False
    ) -> Handle:
        shown.append(("display", bundle, metadata or {}))
        return Handle()

    async def answered(form: Any) -> list[object]:
        return ["Monday"]

    monkeypatch.setattr(view_module, "_ipython_display", display)
    monkeypatch.setattr(form_module._Form, "answer", answered)
    await view_module.standalone_ask(Screen("Which day?", [TextInput("Answer", str)]))
    (_, live, live_metadata), (_, final, final_metadata) = shown
    assert WIDGET_MIME in live and live_metadata == {LIVE_VIEW_KEY: {"version": 1}}
    assert "unanswered when the notebook was saved; run the cell again" in live["text/plain"]
    assert WIDGET_MIME not in final and final_metadata == {} and "Answer: Monday" in final["text/plain"]
