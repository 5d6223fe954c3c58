"""Server tool blocks and citations carried by maps, compare, replay, partial records and batches (issue 29, item 4).

Scripted turns script the blocks Anthropic would send (`agl_notebook.server_tools.scripted_search` and siblings) and
cited text, so each path runs offline; the batch engine runs through the real ``anthropic`` client against the fake
Message Batches API. Each test checks the blocks arrive in the record in place, are sent back unchanged on later
turns, and replay with no request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Claude, Role, Run, reporting_tool
from agl_notebook.errors import InputError
from agl_notebook.events import Event, ReplyBlockKept, TextCited
from agl_notebook.models.openai import OpenAIModel
from agl_notebook.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook.replay.stores import JsonFileStore, MemoryStore
from agl_notebook.server_tools import (
    CodeExecution,
    WebFetch,
    WebSearch,
    scripted_code_execution,
    scripted_fetch,
    scripted_search,
)
from agl_notebook.transcript import RawBlock, TextBlock, block_to_json
from tests.run.test_resume import Person, saved, wait_then_crash
from tests.support.anthropic_api import exact, opaque, text, use
from tests.support.anthropic_batches import FakeBatches, Turn
from tests.support.approvals import ASKED, Summary, Weather, weather_role
from tests.support.batch_steps import engine_for
from tests.support.steps import Answer, Query

CITE = {
    "type": "web_search_result_location",
    "url": "https://example.test/tides",
    "title": "Tides",
    "cited_text": "two high tides a day",
    "encrypted_index": "Eo8f",
}
SEARCH = scripted_search("srvtoolu_1", "tides", [("Tides", "https://example.test/tides")])
CODE = scripted_code_execution("srvtoolu_2", "echo 12", stdout="12\n")
REPORTER: Role[Answer] = Role(
    "researcher",
    "Search, then report.",
    tools=[reporting_tool("report", "Report.", Answer)],
    model=Claude.SONNET,
    server_tools=[WebSearch(max_uses=2), CodeExecution()],
)


def script(request: Any) -> ScriptedTurn:
    """Search and run code (paused), then report with a cited passage; the reply depends on the input."""
    topic = request.messages[0].text
    if len(request.messages) == 1:
        return ScriptedTurn(blocks=[*SEARCH, *CODE], stop_reason="pause_turn", container="container_1")
    return ScriptedTurn(
        "Found: ",
        [ScriptedCall("report", {"summary": f"{topic}: two a day"})],
        cited=[{"text": "There are two high tides a day.", "citations": [CITE]}],
    )


def assert_carried(transcript: Any) -> None:
    """The paused reply's server blocks in place, and the cited passage with its citation."""
    paused, final = transcript[1].content, transcript[2].content
    assert [block_to_json(b) for b in paused] == [*SEARCH, *CODE]
    assert [b for b in final if isinstance(b, TextBlock)][-1].citations == (CITE,)


async def test_a_map_carries_server_blocks_and_citations_and_replays_with_no_request() -> None:
    model = ScriptedModel(script)
    store = MemoryStore()
    results = await Run(model=model, store=store).map(REPORTER, ["tides", "waves"], name="search map")
    assert [r.summary for r in results] == ["tides: two a day", "waves: two a day"]
    # The paused reply went back unchanged, and the container it named went back with it.
    resent = [r for r in model.requests if len(r.messages) == 2]
    assert len(resent) == 2 and all(r.container == "container_1" for r in resent)
    assert all([block_to_json(b) for b in r.messages[1].content] == [*SEARCH, *CODE] for r in resent)
    for record in store.records():
        assert_carried(record.transcript)
        assert record.usage.web_search_requests == 1
    calls = model.calls
    again = await Run(model=model, store=store, mode="replay").map(REPORTER, ["tides", "waves"], name="search map")
    assert list(again) == list(results) and model.calls == calls


async def test_a_replayed_step_tells_the_views_every_server_block_and_citation_again() -> None:
    store = MemoryStore()
    live: list[Event] = []
    await Run(model=ScriptedModel(script), store=store, on_event=live.append).step(REPORTER, "tides")
    replayed: list[Event] = []
    same = ScriptedModel(script)  # the same script (its digest is the backend), never asked
    await Run(model=same, store=store, mode="replay", on_event=replayed.append).step(REPORTER, "tides")
    assert same.calls == 0

    def told(events: list[Event]) -> list[Any]:
        return [
            e.block if isinstance(e, ReplyBlockKept) else e.citations
            for e in events
            if isinstance(e, ReplyBlockKept | TextCited)
        ]

    assert told(replayed) == told(live) == [*SEARCH, *CODE, (CITE,)]


async def test_compare_carries_them_per_variant() -> None:
    fetcher = dataclasses.replace(REPORTER, server_tools=[WebFetch(max_uses=1)])
    store = MemoryStore()
    comparison = await Run(model=ScriptedModel(script), store=store).compare(
        {"search": REPORTER, "fetch": fetcher}, ["tides"]
    )
    assert [v.name for v in comparison.variants] == ["search", "fetch"]
    assert comparison.agreement == {"summary": 1.0}
    records = store.records()
    assert len(records) == 2, "the server tools offered are part of each variant's fingerprint"
    assert (
        sorted(json.dumps(r.parts.get("settings")) for r in records)[0]
        != sorted(json.dumps(r.parts.get("settings")) for r in records)[1]
    )
    for record in records:
        assert_carried(record.transcript)


async def test_a_partial_record_keeps_the_server_blocks_and_a_resume_sends_them_back_unchanged(tmp_path: Path) -> None:
    file, crashed = tmp_path / "records.json", tmp_path / "after-crash.json"
    role = dataclasses.replace(weather_role(Weather()), server_tools=[WebSearch(max_uses=1), WebFetch()])
    fetched = scripted_fetch("srvtoolu_3", "https://example.test/oslo", "Oslo weather", "Sunny.")
    turns = [
        ScriptedTurn(
            "Checking. ",
            [ScriptedCall("weather", ASKED)],
            blocks=[*SEARCH, *fetched],
            cited=[{"text": "Oslo is sunny.", "citations": [CITE]}],
        ),
        ScriptedTurn(calls=[ScriptedCall("report", {"text": "Oslo: sunny"})]),
    ]
    person = Person()
    await wait_then_crash(
        Run(model=ScriptedModel(turns), terminal=person, store=JsonFileStore(file)), role, person, file, crashed
    )
    (partial,) = saved(crashed)
    assert partial.partial is not None
    kept = [block_to_json(b) for b in partial.transcript[1].content if isinstance(b, RawBlock)]
    assert kept == [*SEARCH, *fetched]
    resumed = ScriptedModel(turns)
    result = await Run(model=resumed, terminal=Person(approve=1), store=JsonFileStore(crashed)).step(role, "Go")
    assert result == Summary("Oslo: sunny")
    (request,) = resumed.requests  # the first reply came from the partial record
    sent = [block_to_json(b) for b in request.messages[1].content]
    assert [b for b in sent if b["type"] not in ("text", "tool_use")] == [*SEARCH, *fetched]
    assert {"type": "text", "text": "Oslo is sunny.", "citations": [CITE]} in sent


async def test_a_model_that_cannot_run_server_tools_refuses_before_any_request() -> None:
    model = OpenAIModel("gpt-test", api_key="not-a-key", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(InputError, match=r"offers server tools \(web_search, code_execution\).*cannot run them"):
        await Run(model=model).step(REPORTER, "tides")


# --- The batch engine, through the real client --------------------------------------------------------------------

BATCH_CITE = {**CITE, "url": "https://example.test/batch"}


@dataclasses.dataclass(frozen=True)
class ServerTurn(Turn):
    """A batch reply that counts its searches and names its container, as the API's message does."""

    container: str | None = None
    searches: int = 0

    def message(self, model: str, id: str) -> dict[str, Any]:
        message = super().message(model, id)
        if self.container is not None:
            message["container"] = {"id": self.container, "expires_at": "2026-12-02T12:00:00Z"}
        message["usage"]["server_tool_use"] = {"web_search_requests": self.searches, "web_fetch_requests": 0}
        return message


def batch_script(params: dict[str, Any]) -> Turn:
    topic = params["messages"][0]["content"][0]["text"]
    if len(params["messages"]) == 1:
        # A call of a tool the role does not offer: answered as not offered, so the step takes a second wave.
        blocks = (
            opaque(SEARCH[0]),
            opaque(SEARCH[1]),
            opaque({"type": "text", "text": "Tides: twice a day.", "citations": [BATCH_CITE]}),
            use("toolu_1", "look_up", json.dumps({"text": topic})),
        )
        return ServerTurn(blocks, "tool_use", container="container_b", searches=1)
    return ServerTurn((text("Done."), use("toolu_2", "report", json.dumps({"summary": topic}))), "tool_use")


async def test_batches_send_server_blocks_citations_and_the_container_back_and_replay() -> None:
    fake = FakeBatches(batch_script)
    engine = engine_for(fake)
    run = Run(model=engine)
    queries = [Query("topic 1"), Query("topic 2")]
    participants = [engine.join(f"researcher/{q.text}") for q in queries]
    role = dataclasses.replace(REPORTER, accepts=(Query,))

    async def one(participant: Any, query: Query) -> Any:
        with participant:
            return await run.step_outcome(role, query)

    outcomes = await asyncio.gather(*(one(p, q) for p, q in zip(participants, queries, strict=True)))
    assert len(fake.creations) == 2, "one wave per turn"
    for request in fake.creations[1].requests:
        params = request["params"]
        assert params["container"] == "container_b"
        assert [t["name"] for t in params["tools"]][-2:] == ["web_search", "code_execution"]
        earlier = params["messages"][1]["content"]
        assert [exact(b) for b in earlier[:3]] == [
            exact(SEARCH[0]),
            exact(SEARCH[1]),
            exact({"type": "text", "text": "Tides: twice a day.", "citations": [BATCH_CITE]}),
        ]
    records = run.store.records()
    assert all(r.usage.web_search_requests == 1 for r in records)
    before = len(fake.requests)
    replayed = Run(model=engine_for(fake), store=run.store, mode="replay")
    for query, outcome in zip(queries, outcomes, strict=True):
        again = await replayed.step_outcome(role, query)
        assert again.transcript == outcome.transcript
    assert len(fake.requests) == before, "no request"


# --- Secrets: scrubbed from what a record keeps readable, the opaque fields untouched -------------------------------

PLANTED = "planted-" + "7d1e4b9a" * 3  # built at run time, as the other secret tests do (never a real one)


async def test_a_secret_in_a_search_result_or_a_citation_is_scrubbed_from_the_record_and_the_opaque_fields_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T29_SERVICE_TOKEN", PLANTED)
    leaked = scripted_search("srvtoolu_9", f"token {PLANTED}", [(f"Leak {PLANTED}", f"https://example.test/{PLANTED}")])
    results: Any = leaked[1]["content"]
    results[0]["encrypted_content"] = "EqgfOpaque+" + PLANTED
    cite = {**CITE, "cited_text": f"the token is {PLANTED}"}
    model = ScriptedModel(
        [
            {
                "blocks": leaked,
                "cited": [{"text": f"It says {PLANTED}.", "citations": [cite]}],
                "calls": [{"name": "report", "args": {"summary": "done"}}],
            }
        ]
    )
    file = tmp_path / "records.json"
    await Run(model=model, store=JsonFileStore(file)).step(REPORTER, "tides")
    text = file.read_text()
    (record,) = saved(file)
    kept = [b for b in record.transcript[1].content if isinstance(b, RawBlock)]
    assert kept[0].data["input"] == {"query": "token [REDACTED]"}
    result: Any = kept[1].data["content"]
    result = result[0]
    assert result["title"] == "Leak [REDACTED]" and result["url"] == "https://example.test/[REDACTED]"
    assert result["encrypted_content"] == "EqgfOpaque+" + PLANTED, "an opaque field goes back as it came"
    (cited,) = [b for b in record.transcript[1].content if isinstance(b, TextBlock) and b.citations]
    assert cited.text == "It says [REDACTED]." and cited.citations[0]["cited_text"] == "the token is [REDACTED]"
    assert record.scrubbed_blocks == ((1, 0), (1, 1)), "the record says which kept blocks were scrubbed"
    assert cited.citations[0]["encrypted_index"] == CITE["encrypted_index"]
    assert PLANTED not in text.replace("EqgfOpaque+" + PLANTED, "")


async def test_a_citations_encrypted_index_is_opaque_like_a_kept_blocks_and_its_readable_fields_are_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same rule as a kept block's ``encrypted*`` keys: what goes back to the API as it came is never changed,
    # also when the record holds no kept block at all (only cited text).
    monkeypatch.setenv("T29_SERVICE_TOKEN", PLANTED)
    opaque_index = "Eo8f+" + PLANTED
    cite = {
        **CITE,
        "title": f"Leak {PLANTED}",
        "url": f"https://example.test/{PLANTED}",
        "cited_text": f"the token is {PLANTED}",
        "encrypted_index": opaque_index,
    }
    model = ScriptedModel(
        [
            {
                "cited": [{"text": f"It says {PLANTED}.", "citations": [cite]}],
                "calls": [{"name": "report", "args": {"summary": "done"}}],
            }
        ]
    )
    file = tmp_path / "records.json"
    await Run(model=model, store=JsonFileStore(file)).step(REPORTER, "tides")
    (record,) = saved(file)
    assert not any(isinstance(b, RawBlock) for m in record.transcript for b in m.content)
    (cited,) = [b for b in record.transcript[1].content if isinstance(b, TextBlock) and b.citations]
    assert cited.text == "It says [REDACTED]."
    (kept,) = cited.citations
    assert kept["encrypted_index"] == opaque_index, "an opaque field goes back as it came"
    assert (kept["title"], kept["url"], kept["cited_text"]) == (
        "Leak [REDACTED]",
        "https://example.test/[REDACTED]",
        "the token is [REDACTED]",
    )
    assert kept["type"] == CITE["type"] and record.scrubbed_blocks == (), "nothing signs a citation: still resumable"
    text = file.read_text()
    assert opaque_index in text and PLANTED not in text.replace(opaque_index, ""), "scrubbed everywhere else"
