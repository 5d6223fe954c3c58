"""A top-level call of an agent's function through a normal `Run` (`Run.unit`): fingerprinted, numbered, recorded
and replayed like a step, with the same events, views, store and modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.errors import ModelCallBlockedError
from agl_notebook.functions import FunctionCallError, load_agent
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import NotebookView
from agl_notebook.replay import ReplayMissError, modes
from agl_notebook.replay.fingerprint import fingerprint
from agl_notebook.replay.records import block_from_json, block_to_json, record_from_json
from tests.support.functions_server import OrdersServer, support_model
from tests.support.steps import LIFECYCLE, visible

TOKEN = "tok-run-9f8e7d6c5b"  # a test secret


def support_agent(server: OrdersServer, **functions: Any) -> Any:
    return load_agent(
        {
            "name": "support",
            "model": "claude-sonnet-5-5",
            "profiles": {
                "orders": {
                    "baseUrl": server.base_url,
                    "timeout": 0.5,
                    "headers": {"Authorization": {"env": "ORDERS_TOKEN", "prefix": "Bearer "}},
                }
            },
            "functions": {
                "lookupOrder": {
                    "description": "Looks up one order by id and returns its status and total.",
                    "args": {"orderId": {"type": "str", "description": "The order id, such as ORD-1042."}},
                    "commands": [
                        {"log": "{ f'looking up <{orderId}>' }"},
                        {"api": {"profile": "orders", "path": "{ f'/orders/{orderId}' }"}},
                        {"return": "{ {'status': result['status'], 'total': result['total']} }"},
                    ],
                    "onError": {"return": "{ {'error': exc.message, 'status': exc.status} }"},
                },
                "support": {
                    "args": {"question": {"type": "str"}},
                    "commands": [
                        {"func": {"name": "lookupOrder", "args": {"orderId": "ORD-404"}}},
                        {"set": {"missing": "{ result }"}},
                        {
                            "llm": {
                                "prompt": "{ question }",
                                "tools": ["lookupOrder"],
                                "output": {"answer": {"type": "str", "description": "The answer."}},
                            }
                        },
                        {"return": "{ {'answer': result['answer'], 'missing': missing} }"},
                    ],
                },
                "broken": {"commands": {"return": "{ 1 / 0 }"}},
                **functions,
            },
        },
        environ={"ORDERS_TOKEN": TOKEN},
    )


async def test_a_call_records_once_and_replays_in_a_new_run_with_no_model_or_server(server: OrdersServer) -> None:
    model = support_model()
    live_events: list[Any] = []
    live = Run(model=model, on_event=live_events.append)
    expected = {
        "answer": "ORD-1 has shipped.",
        "missing": {"error": f"HTTP 404 Not Found from GET {server.base_url}/orders/ORD-404.", "status": 404},
    }
    assert await support_agent(server).call("support", {"question": "Where is ORD-1?"}, run=live) == expected
    assert (model.calls, len(server.received)) == (2, 2)
    (record,) = live.store.records()
    assert record.role == "support.support"
    assert [e["kind"] for e in record.tape] == ["api", "model", "api", "model"]  # type: ignore[index,call-overload]
    assert {"agent", "function"} <= set(record.parts)
    assert TOKEN not in json.dumps(record.to_json())
    assert [e.type for e in live_events if e.type in LIFECYCLE] == ["step.started", "step.finished"]

    server.stop()
    replay_events: list[Any] = []
    again = Run(model=model, store=live.store, on_event=replay_events.append)
    assert await support_agent(server).call("support", {"question": "Where is ORD-1?"}, run=again) == expected
    assert (model.calls, len(server.received)) == (2, 2)  # no model call, no HTTP request
    assert visible(replay_events) == visible(live_events)
    assert [e.type for e in replay_events if e.type in LIFECYCLE] == ["step.started", "step.replayed", "step.finished"]
    assert len(live.store.records()) == 1


async def test_identical_calls_are_numbered_and_mode_off_keeps_nothing(server: OrdersServer) -> None:
    agent = support_agent(server)
    run = Run()
    for _ in range(2):
        await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=run)
    assert sorted(r.occurrence for r in run.store.records()) == [0, 1]
    off = Run(mode="off")
    await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=off)
    assert off.store.records() == ()


async def test_a_miss_in_mode_replay_names_the_differing_part(server: OrdersServer) -> None:
    run = Run()
    await support_agent(server).call("lookupOrder", {"orderId": "ORD-1"}, run=run)
    replay = Run(store=run.store, mode="replay")
    with pytest.raises(ReplayMissError) as other_input:
        await support_agent(server).call("lookupOrder", {"orderId": "ORD-2"}, run=replay)
    assert other_input.value.differing == ("input",)
    assert "differs in: input" in str(other_input.value)
    changed = support_agent(
        server,
        lookupOrder={
            "description": "Changed.",
            "args": {"orderId": {"type": "str", "description": "The order id."}},
            "commands": {"return": "changed"},
        },
    )
    with pytest.raises(ReplayMissError) as other_agent:
        await changed.call("lookupOrder", {"orderId": "ORD-1"}, run=replay)
    assert other_agent.value.differing == ("agent",)
    assert len(server.received) == 1


async def test_a_live_call_that_reaches_the_network_is_blocked_where_model_calls_are(
    server: OrdersServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Run()
    agent = support_agent(server)
    await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=run)
    monkeypatch.setenv(modes.BLOCK_VARIABLE, "1")
    assert (await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=Run(store=run.store)))["status"] == "shipped"
    with pytest.raises(ModelCallBlockedError, match=r"support\.lookupOrder"):
        await agent.call("lookupOrder", {"orderId": "ORD-2"}, run=Run(store=run.store))
    assert len(server.received) == 1


async def test_a_failed_call_records_nothing_and_gives_its_number_back(server: OrdersServer) -> None:
    events: list[Any] = []
    run = Run(on_event=events.append)
    agent = support_agent(server)
    with pytest.raises(FunctionCallError):
        await agent.call("broken", run=run)
    assert run.store.records() == ()
    assert events[-1].type == "step.failed"
    fixed = support_agent(server, broken={"commands": {"return": 1}})
    await fixed.call("broken", run=run)
    (record,) = run.store.records()
    assert record.occurrence == 0


async def test_the_notebook_view_draws_a_call_the_same_live_and_replayed(server: OrdersServer) -> None:
    shown: list[dict[str, Any]] = []

    def display(bundle: dict[str, Any], **_: Any) -> None:
        shown.append(bundle)

    def view(role: Any) -> NotebookView:
        return NotebookView(role, display=display, live=False)

    live = Run(view=view)
    await support_agent(server).call("lookupOrder", {"orderId": "ORD-404"}, run=live)
    await support_agent(server).call("lookupOrder", {"orderId": "ORD-404"}, run=Run(store=live.store, view=view))
    assert len(shown) == 2 and shown[0] == shown[1]
    text, page = shown[0]["text/plain"], shown[0]["text/html"]
    assert "support.lookupOrder" in text
    assert "log lookupOrder: looking up <ORD-404>" in text
    assert f"api GET {server.base_url}/orders/ORD-404: 404" in text
    assert "&lt;ORD-404&gt;" in page and "<ORD-404>" not in page
    assert "returned" in page


def test_function_events_are_drawn_escaped_and_deterministically() -> None:
    from agl_notebook.functions import (
        ApiResponded,
        ErrorHandled,
        FunctionCalled,
        FunctionEvent,
        FunctionReturned,
        Logged,
    )

    events: list[FunctionEvent] = [
        FunctionCalled("f", {"x": "<b>"}, 0),
        FunctionCalled("g", {}, 1, "$.f[0]"),
        ApiResponded("p", "GET", "https://x.example/<a>", None, True),
        ErrorHandled("g", "$.g.onError", "ApiConnectionError", "refused <now>"),
        FunctionReturned("g", None, 1),
        Logged("f", "$.f[1]", "done & dusted"),
        FunctionReturned("f", 3, 0),
    ]
    drawn: set[tuple[str, str]] = set()
    for _ in range(2):
        trace = StepTrace("a.f")
        for e in events:
            trace.apply(e)
        drawn.add((render_text(trace, ()), render_html(trace, ())))
    ((text, page),) = drawn
    assert text.splitlines()[1:] == [
        '  call f {"x": "<b>"}',
        "    call g {}",
        "    api GET https://x.example/<a>: no response",
        "    handled ApiConnectionError in g: refused <now>",
        "    returned g: null",
        "  log f: done & dusted",
        "  returned f: 3",
    ]
    assert '<b>"' not in page and "&lt;a&gt;" in page and "done &amp; dusted" in page


def test_a_tape_is_kept_only_when_there_is_one_and_read_back() -> None:
    run_fp = fingerprint(
        role="a.f",
        backend="none",
        system="",
        tools=(),
        reporting=None,
        input_type="arguments",
        input={},
        settings={},
        extra={"agent": "x", "function": "f"},
    )
    assert {"agent", "function"} <= set(run_fp.parts)
    with pytest.raises(ValueError, match="input"):
        fingerprint(
            role="a.f",
            backend="none",
            system="",
            tools=(),
            reporting=None,
            input_type="arguments",
            input={},
            settings={},
            extra={"input": 1},
        )
    from agl_notebook.replay.records import StepRecord

    unit = StepRecord(
        id="u",
        parts=run_fp.parts,
        occurrence=0,
        role="a.f",
        backend="none",
        input={},
        result=1,
        transcript=(),
        tape=({"kind": "api", "status": 200},),
    )
    step = StepRecord(id="s", parts={}, occurrence=0, role="r", backend="none", input="", result=None, transcript=())
    assert "tape" not in step.to_json()
    assert record_from_json(unit.to_json()).tape == unit.tape
    block = block_from_json(json.loads(json.dumps(block_to_json([unit, step]))), where="block")
    assert [r.tape for r in block.records] == [unit.tape, ()]


def test_the_errors_of_running_an_agent_are_of_the_packages_families() -> None:
    import inspect

    from agl_notebook import errors
    from agl_notebook.functions import errors as function_errors

    raised = [
        c
        for _, c in inspect.getmembers(function_errors, inspect.isclass)
        if issubclass(c, Exception) and c.__module__ == function_errors.__name__
    ]
    assert raised and all(issubclass(c, errors.UpstreamUnexpected) for c in raised), raised
    assert errors.ReplayMissError.__module__ == "agl_notebook.errors"
