"""The approval form and the drawing of decisions, without a browser or a kernel: a fake comm records what was sent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from ipywidgets.widgets.widget import _instances

from agl_notebook import Edit, Run, ScriptedModel, describe
from agl_notebook._scope import Decision
from agl_notebook.approvals import ApprovalRequest
from agl_notebook.events import ApprovalDecided, ApprovalRequested, ClientToolRequested, ClientToolResult, StepStarted
from agl_notebook.notebook import view as view_module
from agl_notebook.notebook.approval_form import edit_fields
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import WIDGET_MIME, NotebookView
from agl_notebook.payloads import JsonObject, dump, payload_spec
from agl_notebook.roles import Role
from tests.support.approvals import ASKED, Forecast, Weather, weather_role
from tests.support.widgets import FakeDisplay, form_state, from_browser


def request(arguments: dict[str, Any] = ASKED) -> ApprovalRequest:
    spec = payload_spec(Forecast)
    payload, _ = spec.validate(arguments)
    dumped = dump(payload)
    assert isinstance(dumped, dict)
    return ApprovalRequest("weather", "c1", payload, dumped, spec, "forecaster", "Get the forecast.")


async def open_approval(view: NotebookView) -> tuple[asyncio.Task[Decision], Any]:
    task = asyncio.create_task(view.ask_approval(request()))
    await asyncio.sleep(0)
    (widget,) = view._questions.children
    return task, widget


def test_the_edit_fields_follow_the_payload_nested_and_listed_with_their_descriptions() -> None:
    assert edit_fields(payload_spec(Forecast).schema, dict(request().arguments)) == {
        "kind": "object",
        "description": "",
        "fields": [
            {
                "name": "place",
                "kind": "object",
                "description": "Where.",
                "fields": [
                    {"name": "city", "kind": "text", "description": "The city."},
                    {"name": "zip", "kind": "text", "description": "The postal code."},
                ],
            },
            {"name": "days", "kind": "integer", "description": "How many days ahead, 1 to 7."},
            {
                "name": "units",
                "kind": "list",
                "description": "Units to report in.",
                "item": {"kind": "text", "description": ""},
            },
        ],
    }


@dataclass(frozen=True)
class Odd:
    pair: tuple[int, str] = describe("A fixed pair.")
    maybe: float | None = describe("Perhaps a number.", default=None)
    flag: bool = describe("On or off.", default=False)


def test_what_a_form_does_not_fit_is_a_json_field() -> None:
    fields = edit_fields(payload_spec(Odd).schema)["fields"]
    assert [(f["name"], f["kind"]) for f in fields] == [("pair", "json"), ("maybe", "optional"), ("flag", "boolean")]
    assert fields[1]["inner"] == {"kind": "number", "description": ""}
    # A client tool's schema: no properties, or a value with keys its schema does not list.
    assert edit_fields({"type": "object"}, {"to": "x"}) == {"kind": "json", "description": ""}
    schema: JsonObject = {"type": "object", "properties": {"to": {"type": "string"}}}
    assert edit_fields(schema, {"to": "x", "cc": "y"})["kind"] == "json"
    assert edit_fields(schema, {"to": "x"})["kind"] == "object"


async def test_an_invalid_edit_comes_back_field_by_field_then_the_corrected_one_decides(
    sent: list[tuple[str, Any]],
) -> None:
    view = NotebookView(Role("forecaster", "Forecast."), display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_approval(view)
    opened = form_state(sent, widget)
    assert opened["tool"] == "weather" and opened["arguments"] == request().arguments
    assert opened["fields"]["kind"] == "object" and opened["decided"] == ""
    assert "render" in opened["_esm"] and ".agl-approval" in opened["_css"] and ".agl-form " in opened["_css"]

    from_browser(widget, {"kind": "edit", "attempt": 1, "arguments": {"place": {"city": 7}, "days": "9", "units": []}})
    state = form_state(sent, widget)
    assert state["errors"] == [
        {"path": "place.city", "text": "place.city: expected a string, got a number (7)."},
        {"path": "days", "text": "days: expected a whole number, got a string ('9')."},
    ]
    assert (state["checked"], state["decided"]) == (1, "")
    from_browser(widget, {"kind": "edit", "attempt": 2, "arguments": {"place": {"city": "Oslo"}, "days": 9}})
    state = form_state(sent, widget)
    # The payload's own check names the whole arguments object: the form draws it under the fields.
    assert state["errors"] == [{"path": "arguments", "text": "arguments: days: must be from 1 to 7."}]
    await asyncio.sleep(0.05)
    assert not task.done(), "an invalid edit leaves the form open"
    from_browser(widget, {"kind": "edit", "attempt": 3, "arguments": {"place": {"city": "Bergen"}, "days": 2}})
    decision = await asyncio.wait_for(task, 5)
    assert decision == Decision(
        "c1",
        "weather",
        "edit",
        arguments={"place": {"city": "Bergen", "zip": ""}, "days": 2, "units": []},
        changed=("place.city", "days"),
    )
    state = form_state(sent, widget)
    assert state["errors"] == [] and state["checked"] == 3
    assert state["decided"] == "edited by a person: changed place.city, days"
    assert view._questions.children == ()
    view.finish(None)
    assert len([k for k, _ in sent if k == "comm_open"]) == len([k for k, _ in sent if k == "comm_close"])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"kind": "approve"}, Decision("c1", "weather", "approve")),
        ({"kind": "always"}, Decision("c1", "weather", "approve", always=True)),
        ({"kind": "deny", "message": "  Not today. "}, Decision("c1", "weather", "deny", message="Not today.")),
        ({"kind": "deny"}, Decision("c1", "weather", "deny")),
    ],
)
async def test_each_action_is_one_message_and_the_first_decision_stands(
    sent: list[tuple[str, Any]],
    content: dict[str, Any],
    expected: Decision,
) -> None:
    view = NotebookView(Role("forecaster", "Forecast."), display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_approval(view)
    from_browser(widget, "not a dict")
    from_browser(widget, {"kind": "launch"})
    assert form_state(sent, widget)["message"] == "The form sent 'launch', which is no action; please try again."
    from_browser(widget, content)
    from_browser(widget, {"kind": "deny", "message": "a second click"})
    assert await asyncio.wait_for(task, 5) == expected
    view.finish(None)


async def test_a_decision_from_another_thread_resolves_on_the_step_loop(sent: list[tuple[str, Any]]) -> None:
    import threading

    view = NotebookView(Role("forecaster", "Forecast."), display=FakeDisplay())
    view.begin(replaying=False)
    task, widget = await open_approval(view)
    thread = threading.Thread(target=from_browser, args=(widget, {"kind": "approve"}))  # as a kernel subshell would
    thread.start()
    thread.join()
    assert (await asyncio.wait_for(task, 5)).decision == "approve"
    view.finish(None)


async def test_a_standalone_approval_leaves_the_decision_in_words(
    sent: list[tuple[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import IPython.display

    class StandaloneDisplay(FakeDisplay):
        def update(self, bundle: dict[str, Any], *, metadata: dict[str, Any] | None = None, raw: bool) -> None:
            self.updates.append((bundle, metadata or {}))

    display = StandaloneDisplay()
    monkeypatch.setattr(IPython.display, "display", display)
    task = asyncio.create_task(view_module.standalone_approval(request()))
    await asyncio.sleep(0)
    ((bundle, _),) = display.shown
    widget = _instances[bundle[WIDGET_MIME]["model_id"]]
    from_browser(widget, {"kind": "deny", "message": "No."})
    assert (await asyncio.wait_for(task, 5)).message == "No."
    ((final, _),) = display.updates
    assert final["text/plain"] == "The call to weather: denied by a person: No."
    assert widget.comm is None


# The step's drawing ----------------------------------------------------------------------------------------------


def trace_of(*decisions: ApprovalDecided) -> StepTrace:
    trace = StepTrace("forecaster")
    trace.apply(StepStarted("forecaster", "go", "scripted:x"))
    for i, d in enumerate(decisions):
        call = f"c{i}"
        trace.apply(ClientToolRequested("weather", {"days": i}, call))
        trace.apply(ApprovalRequested("weather", call, {"days": i}))
        trace.apply(ApprovalDecided("weather", call, d.decision, d.by, d.always, d.changed, d.arguments, d.message))
        trace.apply(ClientToolResult("weather", call, "denied" if d.decision == "deny" else "ok", d.decision == "deny"))
    return trace


def test_decisions_are_drawn_in_text_and_html() -> None:
    trace = trace_of(
        ApprovalDecided("weather", "", "approve", always=True),
        ApprovalDecided("weather", "", "edit", changed=("days",), arguments={"days": 2}),
        ApprovalDecided("weather", "", "deny", message="Not <b>today</b>."),
        ApprovalDecided("weather", "", "deny", by="policy"),
    )
    text = render_text(trace, ())
    assert text.splitlines()[1:] == [
        "  tool weather: ok (approved by a person, and every later call of this tool in this Run)",
        "  tool weather: ok (edited by a person: changed days)",
        "  tool weather: denied (by a person: Not <b>today</b>.)",
        "  tool weather: denied (by the tool's policy)",
    ]
    html = render_html(trace, ())
    assert "<b>Approval</b>: denied by a person: Not &lt;b&gt;today&lt;/b&gt;." in html
    assert "denied</span> · by a person</summary>" in html
    assert "<b>Ran with</b>" in html and " · edited by a person: changed days</summary>" in html
    assert "Not <b>today</b>" not in html


def test_a_call_waiting_for_approval_says_so_and_is_not_run_when_the_step_fails() -> None:
    trace = StepTrace("forecaster")
    trace.apply(ClientToolRequested("weather", {}, "c1"))
    trace.apply(ApprovalRequested("weather", "c1", {}))
    assert "tool weather: awaiting approval…" in render_text(trace, ())
    trace.end_failed("NoDecisionError", "Nobody can approve")
    assert "tool weather: not run" in render_text(trace, ())


async def test_live_and_replayed_steps_with_decisions_leave_the_same_final_bundle(
    sent: list[tuple[str, Any]],
) -> None:
    calls = (ASKED, {**ASKED, "days": 5})
    model = ScriptedModel(
        lambda r: (
            {"calls": [{"name": "weather", "args": calls[(len(r.messages) - 1) // 2]}]}
            if len(r.messages) < 5
            else {"calls": [{"name": "report", "args": {"text": "done"}}]}
        )
    )
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    handler = Weather()
    run = Run(
        model=model,
        approvals=[Edit({"place": {"city": "Bergen"}, "days": 2}), "deny"],
        view=lambda role: NotebookView(role, display=live_display, live=False),
    )
    await run.step(weather_role(handler), "Weather?")
    again = Run(model=model, store=run.store, view=lambda role: NotebookView(role, display=replay_display, live=False))
    await again.step(weather_role(handler), "Weather?")
    assert len(handler.calls) == 1
    ((live, _),), ((replayed, _),) = live_display.shown, replay_display.shown
    assert live == replayed
    assert "edited by a person: changed place.city, days" in live["text/plain"]
    assert "tool weather: denied (by a person)" in live["text/plain"]
