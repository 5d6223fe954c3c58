"""The ``api`` command against a real HTTP server on 127.0.0.1: requests, errors into onError, timeouts, and
secrets that never reach a log, a view, a recording or an error."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.functions import FunctionCallError, load_agent
from agl_notebook.functions import events as fev
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from tests.support.functions_server import OrdersServer

TOKEN = "tok-9f8e7d6c5b4a3921"  # a test secret
KEY = "key/with spaces&more"  # a secret a URL must encode


def orders_agent(server: OrdersServer, **functions: Any) -> Any:
    return load_agent(
        {
            "profiles": {
                "orders": {
                    "baseUrl": server.base_url,
                    "headers": {
                        "Accept": "application/json",
                        "Authorization": {"env": "ORDERS_BEARER", "prefix": "Bearer "},
                    },
                    "query": {"apikey": {"env": "ORDERS_QUERY_KEY"}, "v": "2"},
                    "timeout": 0.5,
                    "maxResponseBytes": 10_000,
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
                    "onError": {
                        "log": "{ f'Order lookup failed: {exc}' }",
                        "return": "{ {'error': 'order not found', 'status': exc.status, 'type': exc.type} }",
                    },
                },
                **functions,
            },
        },
        environ={"ORDERS_BEARER": TOKEN, "ORDERS_QUERY_KEY": KEY},
    )


def fetch(path: str, **api: Any) -> dict[str, Any]:
    return {
        "commands": [{"api": {"profile": "orders", "path": path, **api}}, {"return": "{ result }"}],
        "onError": {"return": "{ {'type': exc.type, 'status': exc.status, 'message': exc.message, 'body': exc.body} }"},
    }


async def run_call(agent: Any, function: str, args: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    result = await agent.call(function, args or {}, run=Run(on_event=events.append))
    return result, events


async def test_the_seed_example_looks_up_an_order(server: OrdersServer) -> None:
    result, events = await run_call(orders_agent(server), "lookupOrder", {"orderId": "ORD-1"})
    assert result == {"status": "shipped", "total": 12.5}
    (request,) = server.received
    assert (request.method, request.path) == ("GET", "/api/orders/ORD-1")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.query == {"apikey": [KEY], "v": ["2"]}
    url = f"{server.base_url}/orders/ORD-1?v=2"
    assert [e for e in events if isinstance(e, fev.ApiRequested | fev.ApiResponded)] == [
        fev.ApiRequested("orders", "GET", url),
        fev.ApiResponded("orders", "GET", url, 200, False),
    ]


async def test_a_4xx_goes_to_on_error_with_status_and_body(server: OrdersServer) -> None:
    result, events = await run_call(orders_agent(server), "lookupOrder", {"orderId": "ORD-404"})
    assert result == {"error": "order not found", "status": 404, "type": "ApiError"}
    assert [e.message for e in events if isinstance(e, fev.Logged)] == [
        f"Order lookup failed: HTTP 404 Not Found from GET {server.base_url}/orders/ORD-404?v=2."
    ]
    result, _ = await run_call(orders_agent(server, get=fetch("/orders/nope")), "get")
    assert result["body"] == {"detail": "no such order"}


async def test_a_5xx_goes_to_on_error(server: OrdersServer) -> None:
    result, events = await run_call(orders_agent(server, get=fetch("/boom")), "get")
    assert result == {
        "type": "ApiError",
        "status": 500,
        "body": "internal trouble",
        "message": f"HTTP 500 Internal Server Error from GET {server.base_url}/boom?v=2.",
    }
    assert [e.status for e in events if isinstance(e, fev.ApiResponded)] == [500]


async def test_a_timeout_goes_to_on_error(server: OrdersServer) -> None:
    result, events = await run_call(orders_agent(server, get=fetch("/slow")), "get")
    assert result["type"] == "ApiTimeoutError"
    assert result["status"] is None
    assert result["message"] == f"no response from GET {server.base_url}/slow?v=2 within 0.5 s."
    assert [(e.status, e.is_error) for e in events if isinstance(e, fev.ApiResponded)] == [(None, True)]


async def test_a_command_timeout_overrides_the_profile(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("/slow", timeout=0.1)), "get")
    assert result["message"].endswith("within 0.1 s.")


async def test_no_connection_goes_to_on_error(server: OrdersServer) -> None:
    agent = orders_agent(server, get=fetch("/orders/ORD-1"))
    server.stop()
    result, _ = await run_call(agent, "get")
    assert result["type"] == "ApiConnectionError"
    assert result["message"].startswith(f"GET {server.base_url}/orders/ORD-1?v=2 failed: ConnectError")


async def test_an_unhandled_http_error_ends_the_call(server: OrdersServer) -> None:
    agent = orders_agent(server, get={"commands": {"api": {"profile": "orders", "path": "/boom"}}})
    with pytest.raises(FunctionCallError) as e:
        await run_call(agent, "get")
    assert e.value.error.status == 500
    assert e.value.path == "functions.get.commands[0].api"


async def test_post_sends_json_with_query_and_headers(server: OrdersServer) -> None:
    agent = orders_agent(
        server,
        send=fetch(
            "/echo",
            method="post",
            body="{ {'ids': [1, 2], 'note': note} }",
            query={"page": "{ 2 }", "tag": ["a", "b"], "none": None},
            headers={"X-Request-Id": "{ 'req-' + note }"},
        )
        | {"args": {"note": {}}},
    )
    result, _ = await run_call(agent, "send", {"note": "n1"})
    assert result["method"] == "POST"
    assert json.loads(result["body"]) == {"ids": [1, 2], "note": "n1"}
    assert result["query"] == {"apikey": ["[REDACTED]"], "v": ["2"], "page": ["2"], "tag": ["a", "b"]}
    assert result["headers"]["X-Request-Id"] == "req-n1"
    assert result["headers"]["Content-Type"] == "application/json"


async def test_text_bodies_and_empty_bodies(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("/text")), "get")
    assert result == "plain text ✓"


async def test_redirects_are_not_followed(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("/redirect")), "get")
    assert (result["type"], result["status"]) == ("ApiError", 302)
    assert "redirects are not followed" in result["message"]
    assert len(server.received) == 1


async def test_a_response_over_the_size_bound_fails(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("/big")), "get")
    assert result["message"].endswith("is larger than 10,000 bytes (the profile's maxResponseBytes).")


async def test_a_body_that_claims_json_but_is_not_fails(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("/badjson")), "get")
    assert "says it is JSON but is not" in result["message"]


async def test_a_path_must_stay_on_the_profile_server(server: OrdersServer) -> None:
    result, _ = await run_call(orders_agent(server, get=fetch("{ 'http://evil.example/steal' }")), "get")
    assert result["type"] == "ApiError"
    assert "must be relative to the profile's baseUrl" in result["message"]
    assert server.received == []


async def test_a_missing_secret_variable_is_named_not_guessed(server: OrdersServer) -> None:
    agent = orders_agent(server)
    agent._environ = {"ORDERS_BEARER": TOKEN}
    result, _ = await run_call(agent, "lookupOrder", {"orderId": "ORD-1"})
    assert result["type"] == "MissingSecretError"
    assert server.received == []


async def test_secrets_come_from_os_environ_by_default(server: OrdersServer, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = orders_agent(server)
    agent._environ = None
    monkeypatch.setenv("ORDERS_BEARER", "from-the-environment")
    monkeypatch.setenv("ORDERS_QUERY_KEY", "query-from-the-environment")
    await run_call(agent, "lookupOrder", {"orderId": "ORD-1"})
    assert server.received[0].headers["authorization"] == "Bearer from-the-environment"


# ---------------------------------------------------------------------------------------------------------------
# Secrets never reach a log, a view, a recording or an error


def _leaks(text: str) -> list[str]:
    from urllib.parse import quote, quote_plus

    return [s for secret in (TOKEN, KEY) for s in {secret, quote(secret, safe=""), quote_plus(secret)} if s in text]


async def test_secrets_never_reach_logs_views_recordings_or_errors(
    server: OrdersServer, caplog: pytest.LogCaptureFixture
) -> None:
    agent = orders_agent(
        server,
        echo={
            "commands": [
                {"api": {"profile": "orders", "path": "/echo"}},
                {"set": {"echoed": "{ result }"}},
                {"log": "{ echoed }"},
                {"return": "{ {'seen': echoed['headers']['Authorization'], 'url': echoed['url']} }"},
            ]
        },
        fail={"commands": [{"api": {"profile": "orders", "path": "/boom"}}]},
        slow={"commands": [{"api": {"profile": "orders", "path": "/slow"}}]},
    )
    caplog.set_level(logging.DEBUG)
    events: list[Any] = []
    run = Run(on_event=events.append)
    result = await agent.call("echo", run=run)
    assert server.received[0].headers["authorization"] == f"Bearer {TOKEN}"  # the server did get it
    assert result == {"seen": "Bearer [REDACTED]", "url": "/api/echo?apikey=[REDACTED]&v=2"}
    errors: list[str] = []
    for function in ("fail", "slow"):
        with pytest.raises(FunctionCallError) as e:
            await agent.call(function, run=run)
        errors.append(str(e.value) + repr(e.value.error) + repr(e.value.__cause__))
    recording = await agent.record("echo")
    trace = StepTrace("orders.echo")
    for event in events:
        trace.apply(event)
    shown = [
        render_text(trace, ()),
        render_html(trace, ()),
        repr(events),
        json.dumps(recording.tape),
        "\n".join(caplog.messages),
        *errors,
    ]
    for text in shown:
        assert _leaks(text) == [], text[:500]
    assert "[REDACTED]" in json.dumps(recording.tape)


SLASHED = "Zq9/tk+Lm4/Wx8Rv"  # a secret with slashes, which PHP's JSON writes as \/


async def test_a_secret_echoed_with_escaped_slashes_is_scrubbed_from_the_decoded_body(
    server: OrdersServer, caplog: pytest.LogCaptureFixture
) -> None:
    agent = orders_agent(
        server,
        echo={
            "commands": [
                {"api": {"profile": "orders", "path": "/echo-escaped"}},
                {"set": {"echoed": "{ result }"}},
                {"log": "{ echoed['headers'] }"},
                {"return": "{ echoed['headers']['Authorization'] }"},
            ]
        },
    )
    agent._environ = {"ORDERS_BEARER": SLASHED, "ORDERS_QUERY_KEY": KEY}
    caplog.set_level(logging.DEBUG)
    events: list[Any] = []
    result = await agent.call("echo", run=Run(on_event=events.append))
    assert server.received[0].headers["authorization"] == f"Bearer {SLASHED}"  # the server did get it
    assert result == "Bearer [REDACTED]"
    recording = await agent.record("echo")
    shown = [repr(events), json.dumps(recording.tape), recording.tape[0]["text"], "\n".join(caplog.messages)]
    for text in shown:
        for spelling in (SLASHED, SLASHED.replace("/", "\\/"), SLASHED.replace("/", "\\\\/")):
            assert spelling not in text, text[:500]
