"""An ``api`` request stays on its profile: its headers, its path and query, and the variables a profile may read."""

from __future__ import annotations

from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.functions import AgentInvalidError, load_agent
from agl_notebook.functions._http import build_request, secrets_of
from agl_notebook.functions.errors import ApiError
from agl_notebook.functions.spec import EnvValue, Profile
from tests.support.functions_server import OrdersServer

PROFILE = Profile("orders", "https://orders.example/api", ())


def request(path: Any = "/x", headers: dict[Any, Any] | None = None) -> Any:
    return build_request(PROFILE, "GET", path, None, headers or {}, None, None, where="functions.f.commands[0].api")


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("Host", "evil.example", "is refused"),
        ("host", "orders.example", "is refused"),
        ("X-Forwarded-Host", "evil.example", "is refused"),
        ("Forwarded", "host=evil.example", "is refused"),
        ("Transfer-Encoding", "chunked", "is refused"),
        ("Content-Length", "0", "is refused"),
        ("X-Note", ["a"], "must be text or a number, not list"),
        ("X-Note", {"a": 1}, "must be text or a number, not dict"),
        ("X-Note", None, "must be text or a number, not NoneType"),
        ("X-Note", True, "must be text or a number, not bool"),
        ("X-Note", "a\r\nHost: evil", "may not hold a line break"),
        ("X-Note", "a\rb", "may not hold a line break"),
        ("X-Note", "a\x00b", "may not hold a control character"),
        ("X-Note", "caf\xe9", "may hold only ASCII characters"),
        ("X-Note", "\u20ac", "may hold only ASCII characters"),
        ("", "x", "is not an HTTP header name"),
        ("X Note", "x", "is not an HTTP header name"),
        (7, "x", "is not an HTTP header name"),
    ],
)
def test_every_bad_header_is_an_api_error_naming_the_command(name: Any, value: Any, said: str) -> None:
    with pytest.raises(ApiError) as raised:
        request(headers={name: value})
    assert said in str(raised.value)
    assert str(raised.value).startswith("the api command at functions.f.commands[0].api: ")


def test_good_headers_pass_as_text() -> None:
    assert request(headers={"X-Note": "a\tb", "X-Count": 3, "X-Ratio": 0.5}).headers == (
        ("X-Note", "a\tb"),
        ("X-Count", "3"),
        ("X-Ratio", "0.5"),
    )


@pytest.mark.parametrize(
    "path",
    ["/a?b=1", "?x", "/a#top", "/../x", "a/%2e%2e/%2e%2e", "%2e%2e", "..%5c..%5cx", "/a/b/../../../x", "/a\x00"],
)
def test_a_path_leaving_the_base_path_or_carrying_a_query_is_an_api_error(path: str) -> None:
    with pytest.raises(ApiError):
        request(path)


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("/orders/1", "/orders/1"),
        ("a/../b", "b"),
        ("./a/./b/", "a/b/"),
        ("a/b/..", "a/"),
        ("a//..", "a/"),
        ("%2e%2e-not-a-segment", "%2e%2e-not-a-segment"),
        ("a/%2e%2e/b", "a/%2e%2e/b"),  # under the base path either way a server reads it
    ],
)
def test_a_path_is_sent_and_shown_with_its_dot_segments_resolved(path: str, sent: str) -> None:
    built = request(path)
    assert built.path == sent
    assert built.public_url == "https://orders.example/api/" + sent.lstrip("/")


async def test_a_question_mark_in_a_path_is_refused_not_dropped(server: OrdersServer) -> None:
    agent = load_agent(
        {
            "profiles": {"orders": {"baseUrl": server.base_url}},
            "functions": {
                "get": {
                    "args": {"orderId": {"type": "str"}},
                    "commands": [{"api": {"profile": "orders", "path": "{ f'/orders/{orderId}' }"}}],
                    "onError": [{"return": "{ [exc.type, exc.message] }"}],
                }
            },
        }
    )
    result: Any = await agent.call("get", {"orderId": "ORD-1?fields=all"}, run=Run())
    kind, message = result
    assert kind == "ApiError"
    assert "holds ?: give query values in the command's query" in message
    assert server.received == []


def test_a_secret_value_a_header_cannot_carry_is_an_api_error_that_does_not_show_it() -> None:
    profile = Profile("orders", "https://orders.example/api", (("Authorization", EnvValue("ORDERS_TOKEN", "Bearer ")),))
    with pytest.raises(ApiError) as raised:
        secrets_of(profile, {"ORDERS_TOKEN": "tok-secret\nX-Evil: 1"})
    assert "ORDERS_TOKEN" in str(raised.value) and "tok-secret" not in str(raised.value)


def agent_file(profile: str, variable: str, *, header: str = "Authorization") -> dict[str, Any]:
    return {
        "profiles": {profile: {"baseUrl": "https://api.example/v1", "headers": {header: {"env": variable}}}},
        "functions": {"main": {"commands": [{"api": {"profile": profile, "path": "/x"}}]}},
    }


@pytest.mark.parametrize(
    ("profile", "variable"),
    [
        ("orders", "ORDERS_TOKEN"),
        ("orders", "ORDERS_BEARER"),
        ("billing-eu", "BILLING_EU_KEY"),
        ("Shop2", "SHOP2_API_KEY"),
    ],
)
def test_a_profile_reads_variables_with_its_own_prefix(profile: str, variable: str) -> None:
    agent = load_agent(agent_file(profile, variable))
    assert agent.spec.profiles[profile].variables == (variable,)


@pytest.mark.parametrize(
    ("profile", "variable"),
    [
        ("orders", "GITHUB_TOKEN"),
        ("orders", "MY_SERVICE_TOKEN"),
        ("orders", "ORDERSTOKEN"),
        ("orders", "orders_token"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("aws", "AWS_SECRET_ACCESS_KEY"),
        ("agl-notebook", "AGL_NOTEBOOK_MODE"),
    ],
)
def test_a_profile_may_not_read_any_other_variable(profile: str, variable: str) -> None:
    with pytest.raises(AgentInvalidError) as raised:
        load_agent(agent_file(profile, variable))
    assert ".headers.Authorization.env: the profile" in str(raised.value)
    assert "may read only environment variables whose names start with" in str(raised.value)


@pytest.mark.parametrize("header", ["Host", "X-Forwarded-Host", "Connection"])
def test_a_routing_header_in_a_profile_or_a_command_is_a_problem_at_load(header: str) -> None:
    in_profile = {
        "profiles": {"orders": {"baseUrl": "https://api.example/v1", "headers": {header: "evil.example"}}},
        "functions": {"main": {"commands": [{"api": {"profile": "orders", "path": "/x"}}]}},
    }
    in_command = {
        "profiles": {"orders": {"baseUrl": "https://api.example/v1"}},
        "functions": {"main": {"commands": [{"api": {"profile": "orders", "headers": {header: "evil.example"}}}]}},
    }
    for agent in (in_profile, in_command):
        with pytest.raises(AgentInvalidError) as raised:
            load_agent(agent)
        assert "routes or frames the request" in str(raised.value)
