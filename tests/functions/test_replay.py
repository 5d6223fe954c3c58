"""Recording and replaying a top-level call as one unit (docs/functions.md): its model replies, API responses
and answers go on a tape, and a replay reaches no model, no server and no person.

`UnitRun` overrides ``Run.unit`` (the hook `Agent.call` runs every call through, `agl_notebook.run.units`)
in its smallest form: records in a dict, kept as JSON, keyed by the fingerprint the agent gives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook._canonical import digest
from agl_notebook._scope import StepScope, current_scope
from agl_notebook.events import StepFinished, StepReplayed, StepStarted
from agl_notebook.functions import UnitOutcome, load_agent
from agl_notebook.payloads import JsonValue
from agl_notebook.replay import ReplayMissError
from agl_notebook.run.units import Work
from tests.support.functions_server import OrdersServer, support_model
from tests.support.steps import LIFECYCLE, visible

TOKEN = "tok-replay-5e4d3c2b1a"  # a test secret


class UnitRun(Run):
    """A Run offering ``unit``: replays a matching record, else runs live and keeps the record."""

    def __init__(self, *, records: dict[str, Any] | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.records: dict[str, Any] = {} if records is None else records
        self.live = self.replayed = 0

    async def unit(
        self,
        name: str,
        input: JsonValue,
        *,
        parts: Mapping[str, JsonValue],
        backend: str,
        network: bool,
        work: Work,
        mode: Any = None,
    ) -> UnitOutcome:
        key = digest({"name": name, "input": input, "parts": dict(parts), "backend": backend})
        token = current_scope.set(StepScope(name, emit=self._emit))
        try:
            self._emit(StepStarted(name, input, backend))
            recorded = self.records.get(key)
            if recorded is not None:
                self._emit(StepReplayed(name, key, backend))
                outcome = await work(recorded["tape"])
                assert outcome.result == recorded["result"]
                self.replayed += 1
            else:
                outcome = await work(None)
                self.records[key] = json.loads(json.dumps({"result": outcome.result, "tape": list(outcome.tape)}))
                self.live += 1
            self._emit(StepFinished(name, outcome.result, outcome.requests))
            return outcome
        finally:
            current_scope.reset(token)


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
                    "commands": {
                        "api": {"profile": "orders", "path": "{ f'/orders/{orderId}' }"},
                        "return": "{ {'status': result['status'], 'total': result['total']} }",
                    },
                    "onError": {"return": "{ {'error': exc.message, 'status': exc.status} }"},
                },
                "support": {
                    "args": {"question": {"type": "str"}},
                    "commands": [
                        {"ask": {"text": "{ f'May I look into: {question}?' }", "input": "confirm"}},
                        {"if": {"condition": "{ not result }", "then": [{"end": "declined"}]}},
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
                "unrelated": {"commands": {"return": 1}},
                **functions,
            },
        },
        environ={"ORDERS_TOKEN": TOKEN},
    )


async def test_a_replayed_call_reaches_no_model_server_or_person(server: OrdersServer) -> None:
    model = support_model()
    live_events: list[Any] = []
    live = UnitRun(model=model, answers=[True], on_event=live_events.append)
    agent = support_agent(server)
    result = await agent.call("support", {"question": "Where is ORD-1?"}, run=live)
    expected = {
        "answer": "ORD-1 has shipped.",
        "missing": {"error": f"HTTP 404 Not Found from GET {server.base_url}/orders/ORD-404.", "status": 404},
    }
    assert result == expected
    assert (live.live, model.calls, len(server.received)) == (1, 2, 2)
    kinds = [e["kind"] for e in live.records[next(iter(live.records))]["tape"]]
    assert kinds == ["ask", "api", "model", "api", "model"]

    server.stop()
    replay_events: list[Any] = []
    again = UnitRun(records=live.records, model=model, answers=[], on_event=replay_events.append)
    assert await support_agent(server).call("support", {"question": "Where is ORD-1?"}, run=again) == expected
    assert (again.replayed, model.calls, len(server.received)) == (1, 2, 2)
    assert visible(replay_events) == visible(live_events)
    assert [e.type for e in replay_events if e.type in LIFECYCLE] == ["step.started", "step.replayed", "step.finished"]
    assert "step.reported" in [e.type for e in visible(replay_events)]
    assert TOKEN not in json.dumps(live.records)


async def test_recorded_errors_replay_into_the_same_handlers(server: OrdersServer) -> None:
    agent = support_agent(
        server,
        slow={
            "commands": {"api": {"profile": "orders", "path": "/slow"}},
            "onError": {"return": "{ [exc.type, exc.message] }"},
        },
    )
    run = UnitRun()
    first = await agent.call("slow", run=run)
    assert first[0] == "ApiTimeoutError"
    server.stop()
    again = UnitRun(records=run.records)
    assert await agent.call("slow", run=again) == first
    assert again.replayed == 1


async def test_the_fingerprint_covers_what_the_call_can_reach_and_nothing_else(server: OrdersServer) -> None:
    base = support_agent(server)
    parts = base.fingerprint_parts("lookupOrder")
    assert parts["function"] == "lookupOrder"
    assert base.reachable("support") == ["support", "lookupOrder"]
    changed_unrelated = support_agent(server, unrelated={"commands": {"return": 2}})
    assert changed_unrelated.fingerprint_parts("lookupOrder") == parts
    changed = load_agent(
        {
            **_raw(base),
            "functions": {
                **_raw(base)["functions"],
                "lookupOrder": {**_raw(base)["functions"]["lookupOrder"], "onError": {"return": "changed"}},
            },
        }
    )
    assert changed.fingerprint_parts("lookupOrder") != parts
    assert changed.fingerprint_parts("support") != base.fingerprint_parts("support")
    other_url = support_agent(server)
    other_url.spec.raw_profiles["orders"] = {"baseUrl": "https://elsewhere.example"}
    assert other_url.fingerprint_parts("lookupOrder") != parts


def _raw(agent: Any) -> dict[str, Any]:
    return {"model": agent.spec.model, "profiles": agent.spec.raw_profiles, "functions": agent.spec.raw_functions}


async def test_backend_and_network_are_what_the_call_may_use(server: OrdersServer) -> None:
    agent = support_agent(server)
    model = support_model()
    assert agent.backend("support", Run(model=model)) == f"scripted:{model.digest}"
    assert agent.backend("support", Run()) == "anthropic:claude-sonnet-5-5"
    assert agent.backend("unrelated", Run()) == "none"
    assert agent.network("support", Run(model=model)) is True  # api
    assert agent.network("unrelated", Run()) is False


async def test_a_different_input_or_model_does_not_replay(server: OrdersServer) -> None:
    run = UnitRun()
    agent = support_agent(server)
    await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=run)
    await agent.call("lookupOrder", {"orderId": "ORD-2"}, run=run)
    assert (run.live, run.replayed) == (2, 0)
    await agent.call("lookupOrder", {"orderId": "ORD-1"}, run=run)
    assert (run.live, run.replayed) == (2, 1)


async def test_a_tape_that_diverges_fails_loudly_and_no_handler_hides_it(server: OrdersServer) -> None:
    agent = support_agent(server)
    outcome = await agent.record("lookupOrder", {"orderId": "ORD-1"})
    tampered = [dict(outcome.tape[0], key="0" * 24)]
    with pytest.raises(ReplayMissError, match="diverges at effect 1"):
        await agent.replay("lookupOrder", {"orderId": "ORD-1"}, tampered)
    with pytest.raises(ReplayMissError, match="ends before the response"):
        await agent.replay("lookupOrder", {"orderId": "ORD-1"}, [])
    with pytest.raises(ReplayMissError, match="using 1 of the 2 effects"):
        await agent.replay("lookupOrder", {"orderId": "ORD-1"}, [*outcome.tape, outcome.tape[0]])
