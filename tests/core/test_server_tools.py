"""Offering server tools: the typed options, what a role refuses and why, the JSON the API takes, the price of search.

The JSON each option object sends is checked against the SDK's own parameter types (their keys and ``type``
literals), so a field the API does not take fails here rather than as a 400.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from agl_notebook import Role, ToolResult, tool
from agl_notebook.errors import InputError
from agl_notebook.models.base import Usage
from agl_notebook.models.prices import PRICES, WEB_SEARCH_PER_THOUSAND, Rates
from agl_notebook.models.scripted import ScriptedModel, ScriptedTurn
from agl_notebook.payloads import JsonObject
from agl_notebook.server_tools import (
    APPROVAL_REFUSED,
    CodeExecution,
    UserLocation,
    WebFetch,
    WebSearch,
    scripted_code_execution,
    scripted_fetch,
    scripted_search,
)
from tests.support.steps import Query


def sdk_keys(param: Any) -> set[str]:
    return set(typing.get_type_hints(param))


def test_each_option_object_sends_only_what_the_sdks_param_type_takes() -> None:
    from anthropic.types import CodeExecutionTool20250825Param, WebFetchTool20250910Param, WebSearchTool20250305Param
    from anthropic.types.user_location_param import UserLocationParam

    search = WebSearch(
        blocked_domains=["spam.test"],
        max_uses=4,
        user_location=UserLocation(city="Oslo", country="NO", timezone="Europe/Oslo"),
    ).to_json()
    assert search == {
        "type": "web_search_20250305",
        "name": "web_search",
        "blocked_domains": ["spam.test"],
        "max_uses": 4,
        "user_location": {"type": "approximate", "city": "Oslo", "country": "NO", "timezone": "Europe/Oslo"},
    }
    assert set(search) <= sdk_keys(WebSearchTool20250305Param)
    assert set(search["user_location"]) <= sdk_keys(UserLocationParam)  # type: ignore[arg-type]
    fetch = WebFetch(allowed_domains=["docs.test"], max_uses=2, citations=True, max_content_tokens=5000).to_json()
    assert set(fetch) <= sdk_keys(WebFetchTool20250910Param)
    assert fetch["type"] == "web_fetch_20250910" and fetch["citations"] == {"enabled": True}
    code = CodeExecution().to_json()
    assert set(code) <= sdk_keys(CodeExecutionTool20250825Param) and code["type"] == "code_execution_20250825"
    for param, sent in (
        (WebSearchTool20250305Param, search),
        (WebFetchTool20250910Param, fetch),
        (CodeExecutionTool20250825Param, code),
    ):
        hints = typing.get_type_hints(param)
        assert typing.get_args(hints["type"]) == (sent["type"],) and typing.get_args(hints["name"]) == (sent["name"],)


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (lambda: WebSearch(allowed_domains=["a.test"], blocked_domains=["b.test"]), "not both"),
        (lambda: WebSearch(max_uses=0), r"max_uses=\.\.\.\) takes a whole number >= 1"),
        (lambda: WebSearch(max_uses=True), "max_uses"),
        (lambda: WebSearch(allowed_domains="a.test"), "takes a list of domains"),
        (lambda: WebSearch(allowed_domains=["has space.test"]), "is not a domain"),
        (lambda: WebSearch(user_location={"city": "Oslo"}), "takes a UserLocation"),  # type: ignore[arg-type]
        (lambda: UserLocation(country="Norway"), "two-letter ISO country code"),
        (lambda: WebFetch(max_content_tokens=0), "max_content_tokens"),
        (lambda: WebFetch(citations="yes"), "citations"),  # type: ignore[arg-type]
    ],
)
def test_bad_options_are_input_errors_naming_what_is_wrong(build: Any, said: str) -> None:
    with pytest.raises(InputError, match=said):
        build()


@pytest.mark.parametrize("server_tool", [WebSearch, WebFetch, CodeExecution])
def test_an_approval_on_a_server_tool_is_an_input_error_saying_why(server_tool: Any) -> None:
    with pytest.raises(InputError) as raised:
        server_tool(approval="ask")
    assert "Anthropic runs server tools inside the model's request" in str(raised.value)
    assert "nothing can ask a person first" in APPROVAL_REFUSED


def test_an_mcp_approval_naming_a_server_tool_is_refused_the_same_way() -> None:
    with pytest.raises(InputError, match=r"mcp_approvals\['web_search'\] names a server tool: Anthropic runs"):
        Role("r", "Search.", server_tools=[WebSearch()], mcp_approvals={"web_search": "ask"})


async def _handler(query: Query) -> ToolResult:
    return ToolResult("x")


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"server_tools": WebSearch()}, "server_tools takes a list"),
        ({"server_tools": ["web_search"]}, "is not a server tool"),
        ({"server_tools": [WebSearch(), WebSearch(max_uses=1)]}, "offers 'web_search' twice"),
        ({"tools": [WebSearch()]}, r"WebSearch is run by Anthropic; offer it with server_tools=\[WebSearch"),
        (
            {"tools": [tool("web_fetch", "Mine.", Query, _handler)], "server_tools": [WebFetch()]},
            "a tool of its own is named 'web_fetch'",
        ),
    ],
)
def test_a_role_refuses_server_tools_it_cannot_offer(settings: dict[str, Any], said: str) -> None:
    with pytest.raises(InputError, match=said):
        Role("r", "Search.", **settings)


def test_a_role_keeps_its_server_tools_as_a_tuple() -> None:
    role: Role[None] = Role("r", "Search.", server_tools=[WebSearch(max_uses=1), CodeExecution()])
    assert role.server_tools == (WebSearch(max_uses=1), CodeExecution())


def test_searches_are_priced_at_ten_dollars_a_thousand_beside_the_tokens() -> None:
    assert WEB_SEARCH_PER_THOUSAND == 10.0
    rates = PRICES.rates_for("anthropic:claude-sonnet-5-5")
    assert rates is not None
    tokens = Usage(input_tokens=1000, output_tokens=100)
    searched = Usage(input_tokens=1000, output_tokens=100, web_search_requests=3, web_fetch_requests=2)
    assert rates.cost(searched) == pytest.approx(rates.cost(tokens) + 0.03), "fetches cost nothing beyond tokens"
    assert rates.batched().cost(searched) == pytest.approx(rates.batched().cost(tokens) + 0.03), "no batch discount"
    assert Rates(1, 1, 1, 1, 1, web_search=25.0).cost(Usage(web_search_requests=2)) == pytest.approx(0.05)
    with pytest.raises(InputError, match="web_search"):
        Rates(1, 1, 1, 1, 1, web_search=-1)
    assert (searched + searched).web_search_requests == 6


async def test_scripted_turns_script_server_blocks_and_citations_and_count_searches() -> None:
    cite: JsonObject = {"type": "web_search_result_location", "url": "https://x.test", "title": "X", "cited_text": "x"}
    model = ScriptedModel(
        [
            ScriptedTurn(
                "See ",
                blocks=[
                    *scripted_search("s1", "x", [("X", "https://x.test")]),
                    *scripted_fetch("s2", "https://x.test", "X", "text"),
                    *scripted_code_execution("s3", "ls", stderr="no such file", return_code=2),
                ],
                cited=[{"text": "x is x.", "citations": [cite]}],
                container="container_s",
            )
        ]
    )
    from agl_notebook.models.base import Cited, ModelRequest, TurnEnd
    from agl_notebook.transcript import user_text

    events = [e async for e in model.stream(ModelRequest("m", "", (user_text("go"),), (), 100))]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.container == "container_s"
    assert end.usage.web_search_requests == 1 and end.usage.web_fetch_requests == 1
    assert [e for e in events if isinstance(e, Cited)] == [Cited("x is x.", (cite,))]
    for bad, said in (
        ({"cited": [{"text": "x"}]}, r"cited\[0\]: expected"),
        ({"cited": [{"text": "", "citations": [cite]}]}, r"cited\[0\]"),
        ({"cited": "x"}, "cited is a list"),
        ({"container": ""}, "container is a container id"),
    ):
        with pytest.raises(InputError, match=said):
            ScriptedModel([bad])
    # A script without them keeps the digest it had (and its recordings).
    assert ScriptedModel(["hi"]).digest == ScriptedModel([{"text": "hi", "cited": []}]).digest
