"""Server tools and citations through the real ``anthropic`` client against the fake API (issue 29).

The streams are built from the SDK's own models (tests/support/server_tools_api.py): ``server_tool_use`` with its
input streamed, ``web_search_tool_result``, ``web_fetch_tool_result``, ``bash_code_execution_tool_result``, a text
block whose citations come as ``citations_delta``s, a ``pause_turn`` mid-turn, and a ``message_delta`` that counts
the searches and names the container. What the loop sends back is asserted on the request bodies the fake received.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.errors import InputError
from agl_notebook.events import Event, ReplyBlockKept, TextCited
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import Cited, TurnEnd
from agl_notebook.models.batch_replies import message_events
from agl_notebook.models.prices import PRICES
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.server_tools import CodeExecution, WebFetch, WebSearch
from agl_notebook.transcript import RawBlock, TextBlock
from tests.support.anthropic_api import api, assembled, exact, message_json, text, use
from tests.support.server_tools_api import (
    bash_result,
    cited_text,
    fetch_result,
    search_result,
    server_call,
    server_reply,
    web_citation,
)
from tests.support.steps import Answer, Query

SEARCH = server_call("srvtoolu_01", "web_search", {"query": "exponential backoff"})
RESULTS = search_result(
    "srvtoolu_01",
    [("Backoff <explained>", "https://example.test/backoff"), ("Retries", "https://example.test/retries")],
)
CITATION = web_citation("https://example.test/backoff", "Backoff <explained>", "the wait doubles after each failure")
FETCH = server_call("srvtoolu_02", "web_fetch", {"url": "https://example.test/backoff"})
PAGE = fetch_result("srvtoolu_02", "https://example.test/backoff", "Backoff explained", "The wait doubles.")
CODE = server_call("srvtoolu_03", "bash_code_execution", {"command": "python -c 'print(2**5)'"})
OUTPUT = bash_result("srvtoolu_03", "32\n", stderr="warning: slow\n")

TURN1 = (SEARCH, RESULTS)  # paused after the search: Anthropic's own loop stopped, the turn goes on
TURN2 = (
    text("Here is what I found. "),
    cited_text("The wait doubles after each failure.", CITATION),
    FETCH,
    PAGE,
    CODE,
    OUTPUT,
    use("toolu_1", "look_up", '{"text": "jitter"}'),
)
TURN3 = (use("toolu_2", "report", '{"summary": "Backoff doubles; 2**5 is 32."}'),)
CONTAINER = "container_011CPRq8Z3vLh"


def researcher(**settings: Any) -> Role[Answer]:
    async def look_up(query: Query) -> ToolResult:
        return ToolResult(f"Found a note on {query.text}.")

    return Role(
        name="researcher",
        instructions="Search, read, compute, then report.",
        tools=[
            tool("look_up", "Look a thing up.", Query, look_up),
            reporting_tool("report", "Report what you found.", Answer),
        ],
        model=Claude.SONNET,
        server_tools=[
            WebSearch(max_uses=3, allowed_domains=["example.test"]),
            WebFetch(citations=True),
            CodeExecution(),
        ],
        **settings,
    )


def the_fake() -> Any:
    return api(
        server_reply(*TURN1, stop_reason="pause_turn", searches=1),
        server_reply(*TURN2, stop_reason="tool_use", fetches=1, container=CONTAINER),
        server_reply(*TURN3, stop_reason="tool_use"),
    )


def sent_back(body: bytes, sent: list[Any], turn: tuple[Any, ...]) -> None:
    """``sent`` is ``turn`` as the API sent it, and every kept block is in the body byte for byte."""
    assert [exact(b) for b in sent] == [exact(b) for b in message_json(*turn)]
    for block in turn:
        if hasattr(block, "start"):
            assert exact(assembled(block)) in body


async def test_a_step_with_search_fetch_code_and_citations_sends_every_block_back_and_the_container() -> None:
    fake = the_fake()
    events: list[Event] = []
    store = MemoryStore()
    run = Run(model=AnthropicModel(client=fake.client()), store=store, on_event=events.append)
    answer = await run.step(researcher(), "How do retries back off?")
    assert answer == Answer("Backoff doubles; 2**5 is 32.")
    bodies = fake.bodies()
    # The server tools are offered after the role's own, as the API takes them, the cache mark on the last.
    assert [t.get("type", "custom") for t in bodies[0]["tools"]] == [
        "custom",
        "custom",
        "web_search_20250305",
        "web_fetch_20250910",
        "code_execution_20250825",
    ]
    assert bodies[0]["tools"][2] == {
        "type": "web_search_20250305",
        "name": "web_search",
        "allowed_domains": ["example.test"],
        "max_uses": 3,
    }
    assert bodies[0]["tools"][3] == {"type": "web_fetch_20250910", "name": "web_fetch", "citations": {"enabled": True}}
    assert bodies[0]["tools"][4] == {
        "type": "code_execution_20250825",
        "name": "code_execution",
        "cache_control": {"type": "ephemeral"},
    }
    # pause_turn: the paused reply goes back as the last message, unchanged, and the turn continues.
    assert [[m["role"] for m in b["messages"]] for b in bodies] == [
        ["user"],
        ["user", "assistant"],
        ["user", "assistant", "assistant", "user"],
    ]
    sent_back(fake.requests[1].content, bodies[1]["messages"][1]["content"], TURN1)
    sent_back(fake.requests[2].content, bodies[2]["messages"][1]["content"], TURN1)
    sent_back(fake.requests[2].content, bodies[2]["messages"][2]["content"], TURN2)
    # The cited passage goes back with its citations, as the API sent them.
    cited = bodies[2]["messages"][2]["content"][1]
    assert cited == {"type": "text", "text": "The wait doubles after each failure.", "citations": [CITATION]}
    # The container the second reply named is sent back on the next request, and not before.
    assert "container" not in bodies[0] and "container" not in bodies[1]
    assert bodies[2]["container"] == CONTAINER

    # The record keeps every block in place, the citations, and the searches counted and priced.
    (record,) = store.records()
    reply2 = record.transcript[2].content
    assert [type(b).__name__ for b in reply2] == [
        "TextBlock",
        "TextBlock",
        "RawBlock",
        "RawBlock",
        "RawBlock",
        "RawBlock",
        "ToolUseBlock",
    ]
    assert isinstance(reply2[1], TextBlock) and reply2[1].citations == (CITATION,)
    assert [b.data for b in reply2 if isinstance(b, RawBlock)] == [assembled(b) for b in (FETCH, PAGE, CODE, OUTPUT)]
    assert record.usage.web_search_requests == 1 and record.usage.web_fetch_requests == 1
    rates = PRICES.rates_for("anthropic:" + Claude.SONNET)
    assert rates is not None and rates.web_search == 10.0
    tokens_only = rates.cost(dataclasses.replace(record.usage, web_search_requests=0))
    assert record.cost is not None and record.cost.usd == pytest.approx(tokens_only + 10.0 / 1000)
    saved = json.loads(json.dumps(record.to_json()))
    assert saved["usage"]["web_search_requests"] == 1

    # The view drew each server call, the cited passage and its source; the live events said so in order.
    assert [e.block["type"] for e in events if isinstance(e, ReplyBlockKept)] == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_fetch_tool_result",
        "server_tool_use",
        "bash_code_execution_tool_result",
    ]
    assert [e.citations for e in events if isinstance(e, TextCited)] == [(CITATION,)]

    # Replayed: no request, the same events drawn the same.
    replayed: list[Event] = []
    again = the_fake()
    replay = Run(model=AnthropicModel(client=again.client()), store=store, mode="replay", on_event=replayed.append)
    assert await replay.step(researcher(), "How do retries back off?") == answer
    assert again.requests == []

    def drawn(seen: list[Event]) -> tuple[str, str]:
        trace = StepTrace("researcher")
        for e in seen:
            trace.apply(e)
        return render_text(trace, ()), render_html(trace, ())

    live_text, live_html = drawn(events)
    assert drawn(replayed)[1] == live_html
    assert "web_search (run by Anthropic): ok" in live_text
    assert "source [1]: Backoff <explained> (https://example.test/backoff)" in live_text
    assert 'href="https://example.test/backoff"' in live_html and "Backoff &lt;explained&gt;" in live_html
    assert "32\n" in live_html and "warning: slow" in live_html


async def test_a_role_with_server_tools_changes_the_fingerprint_and_the_options_are_part_of_it() -> None:
    store = MemoryStore()
    plain: Role[None] = Role("r", "Do it.", model=Claude.SONNET)
    fake = api(server_reply(text("ok"), stop_reason="end_turn"), server_reply(text("ok"), stop_reason="end_turn"))
    fake.responses.append(fake.responses[0])
    run = Run(model=AnthropicModel(client=fake.client()), store=store)
    await run.step(plain, "go")
    await run.step(Role("r", "Do it.", model=Claude.SONNET, server_tools=[WebSearch(max_uses=1)]), "go")
    await run.step(Role("r", "Do it.", model=Claude.SONNET, server_tools=[WebSearch(max_uses=2)]), "go")
    assert len({r.id for r in store.records()}) == 3, "each choice of server tools is a step of its own"
    assert "server_tools" not in json.dumps(store.records()[0].parts), "a role without them keeps its old fingerprint"


def test_a_batch_reply_with_server_blocks_citations_and_container_reads_as_the_stream_does() -> None:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": message_json(*TURN2),
        "stop_reason": "tool_use",
        "container": {"id": CONTAINER, "expires_at": "2026-12-02T12:00:00Z"},
        "usage": {"input_tokens": 5, "output_tokens": 5, "server_tool_use": {"web_search_requests": 2}},
    }
    events = message_events(message)
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.container == CONTAINER and end.usage.web_search_requests == 2
    cited = [e for e in events if isinstance(e, Cited)]
    assert [(c.text, c.citations) for c in cited] == [("The wait doubles after each failure.", (CITATION,))]


async def test_a_budget_with_search_needs_max_uses_and_reserves_every_search() -> None:
    fake = api(server_reply(text("ok"), stop_reason="end_turn"))
    run = Run(model=AnthropicModel(client=fake.client()), budget_usd=1.0)
    role: Role[None] = Role("r", "Search.", model=Claude.SONNET, server_tools=[WebSearch()])
    with pytest.raises(InputError, match=r"WebSearch without max_uses.*cannot be reserved.*max_uses=") as raised:
        await run.step(role, "go")
    assert fake.requests == [], "nothing was sent"
    assert "$0.01" in str(raised.value)
    # With max_uses, every use is reserved: a budget smaller than the searches alone refuses the request.
    from agl_notebook.errors import BudgetExceededError

    tight = Run(model=AnthropicModel(client=fake.client()), budget_usd=0.05)
    with pytest.raises(BudgetExceededError):
        await tight.step(Role("r", "Search.", model=Claude.SONNET, server_tools=[WebSearch(max_uses=10)]), "go")
    assert fake.requests == []


@pytest.mark.parametrize("form", ["plain", "json-escaped", "html-escaped"])
async def test_a_secret_in_a_fetched_page_code_output_search_title_or_citation_is_scrubbed_from_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    # A fetched page is a plain-text document whose text is under "data": readable text, scrubbed like any other,
    # not an opaque field as a redacted thinking block's "data" is.
    from agl_notebook.replay.stores import JsonFileStore
    from tests.notebook.test_view_thinking import assert_no_secret, planted, spellings

    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    spelled = spellings(secret)[form]
    page = fetch_result("srvtoolu_02", "https://example.test/backoff", f"Title {spelled}", f"Page {spelled} end.")
    output = bash_result("srvtoolu_03", f"out {spelled}\n", stderr=f"err {spelled}")
    results = search_result("srvtoolu_01", [(f"Result {spelled}", "https://example.test/r")])
    citation = web_citation("https://example.test/backoff", f"Cited {spelled}", f"cited {spelled}")
    turn2 = (text("Here. "), cited_text("It doubles.", citation), FETCH, page, CODE, output, TURN2[-1])
    fake = api(
        server_reply(SEARCH, results, stop_reason="pause_turn", searches=1),
        server_reply(*turn2, stop_reason="tool_use", fetches=1, container=CONTAINER),
        server_reply(*TURN3, stop_reason="tool_use"),
    )
    file = tmp_path / "records.json"
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(researcher(), "q")
    assert (
        f"Page {spelled} end." in fake.bodies()[2]["messages"][2]["content"][3]["content"]["content"]["source"]["data"]
    ), "the API is sent the page as it came"
    saved = file.read_text()
    assert "Page [REDACTED] end." in saved
    assert_no_secret(saved, secret)


async def test_a_record_whose_server_tool_result_lost_a_secret_says_so_when_it_cannot_be_resumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refusal names what was changed: a server tool's result here, not the model's thinking (there is none).
    from agl_notebook.replay.records import resume_refusal
    from agl_notebook.replay.stores import scrubbed

    secret = "planted-" + "4c1f" * 6
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    page = fetch_result("srvtoolu_02", "https://example.test/backoff", "Backoff", f"Page {secret}.")
    fake = api(server_reply(FETCH, page, TURN3[0], stop_reason="tool_use", fetches=1))
    store = MemoryStore()
    await Run(model=AnthropicModel(client=fake.client()), store=store).step(researcher(), "q")
    (record,) = store.records()
    said = resume_refusal(scrubbed(record), "researcher") or ""
    assert "web_fetch_tool_result (message 1 block 1)" in said and "thinking" not in said, said
