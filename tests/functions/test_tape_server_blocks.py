"""A JSON function's tape keeps what the API must get back as it came, as a step's record does (issue 29): a cited
passage's citations with their opaque ``encrypted_index`` never scrubbed, and the code execution container a reply
named. Through the real ``anthropic`` client against the fake API, recorded by a Run into a records file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook.functions import load_agent
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay.stores import JsonFileStore
from tests.notebook.test_view_thinking import assert_no_secret, planted
from tests.support.anthropic_api import api, text, use
from tests.support.server_tools_api import cited_text, server_reply, web_citation

AGENT = {
    "model": "claude-sonnet-5-5",
    "functions": {
        "double": {
            "description": "Double a number.",
            "args": {"n": {"type": "int", "description": "The number."}},
            "commands": {"return": "{ n * 2 }"},
        },
        "main": {
            "commands": [{"llm": {"prompt": "What is 21 doubled?", "tools": ["double"]}}, {"return": "{ result }"}]
        },
    },
}
CONTAINER = "container_011CTape"


def the_fake(citation: dict[str, Any]) -> Any:
    return api(
        server_reply(
            cited_text("Doubling it.", citation),
            use("toolu_1", "double", '{"n": 21}'),
            stop_reason="tool_use",
            container=CONTAINER,
        ),
        server_reply(text("42"), stop_reason="end_turn"),
    )


async def test_the_tape_keeps_the_container_and_an_opaque_encrypted_index_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    citation = {**web_citation("https://example.test/a", "Doubling", "twice"), "encrypted_index": "Eo8f+" + secret}
    agent = load_agent(AGENT)
    file = tmp_path / "records.json"
    live = the_fake(citation)
    result = await agent.call(
        "main", {}, run=Run(model=AnthropicModel(client=live.client()), store=JsonFileStore(file))
    )
    assert result == "42"
    second = live.bodies()[1]
    assert second["container"] == CONTAINER and second["messages"][1]["content"][0]["citations"] == [citation]

    (record,) = json.loads(file.read_text())["records"]
    events = record["tape"][0]["events"]
    (cited,) = [e for e in events if "cited" in e]
    assert cited["citations"] == [citation], "an opaque field goes back to the API as it came"
    assert events[-1]["end"] == "tool_use" and events[-1]["container"] == CONTAINER

    # The replay asks what the live call asked (the citation as it came): no request, the same result.
    again = the_fake(citation)
    replay = Run(model=AnthropicModel(client=again.client()), store=JsonFileStore(file), mode="replay")
    assert await agent.call("main", {}, run=replay) == "42"
    assert again.requests == []


async def test_the_readable_fields_of_a_citation_on_the_tape_are_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    citation = web_citation(f"https://example.test/{secret}", f"Leak {secret}", f"the token is {secret}")
    file = tmp_path / "records.json"
    live = the_fake(citation)
    await load_agent(AGENT).call(
        "main", {}, run=Run(model=AnthropicModel(client=live.client()), store=JsonFileStore(file))
    )
    (record,) = json.loads(file.read_text())["records"]
    (cited,) = [e for e in record["tape"][0]["events"] if "cited" in e]
    (kept,) = cited["citations"]
    assert (kept["title"], kept["url"], kept["cited_text"]) == (
        "Leak [REDACTED]",
        "https://example.test/[REDACTED]",
        "the token is [REDACTED]",
    )
    assert kept["encrypted_index"] == citation["encrypted_index"]


async def test_a_secret_in_a_reply_before_a_tool_call_is_scrubbed_from_the_tape_and_the_call_still_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The next request holds that reply: live it holds the secret, replayed its scrubbed recording. Each request is
    # found on the tape by what it asks, scrubbed, so the two are the same request.
    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)

    def the_fake() -> Any:
        return api(
            server_reply(text(f"The key is {secret}."), use("toolu_1", "double", '{"n": 21}'), stop_reason="tool_use"),
            server_reply(text("42"), stop_reason="end_turn"),
        )

    agent = load_agent(AGENT)
    file = tmp_path / "records.json"
    live = the_fake()
    assert (
        await agent.call("main", {}, run=Run(model=AnthropicModel(client=live.client()), store=JsonFileStore(file)))
        == "42"
    )
    assert secret in live.bodies()[1]["messages"][1]["content"][0]["text"], "the model is sent its reply as it came"
    assert_no_secret(file.read_text(), secret)
    again = the_fake()
    replay = Run(model=AnthropicModel(client=again.client()), store=JsonFileStore(file), mode="replay")
    assert await agent.call("main", {}, run=replay) == "42"
    assert again.requests == []
