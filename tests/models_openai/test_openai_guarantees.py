"""The OpenAI-compatible backend keeps Claude's guarantees: a map's pacer, a dead server given up on in seconds,
no key in a record, and `run.compare` of a Claude role beside an OpenAI-compatible one through both real clients."""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import pytest

from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook.errors import ModelServerError
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.openai import DEAD_SERVER_SECONDS, OpenAIModel
from agl_notebook.replay.stores import MemoryStore
from tests.support.anthropic_api import api, use
from tests.support.anthropic_api import reply as claude_reply
from tests.support.openai_api import FakeChat, call, chat, error_response, fake_key, reply, stream_response
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Answer, Query

ROLE: Role[Answer] = Role(
    "summarizer",
    instructions="Summarize the text.",
    model="gpt-4.1",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)


class ThrottlingChat(FakeChat):
    """Answers 429 to the first ``throttled`` requests, then reports each item's own text."""

    def __init__(self, throttled: int) -> None:
        super().__init__([])
        self.throttled = throttled
        self.answered: Counter[str] = Counter()

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if len(self.requests) <= self.throttled:
            return error_response(429, "Rate limit reached for requests.", retry_after="0.001")
        user = json.loads(request.content)["messages"][1]["content"]
        text = json.loads(user.split("\n", 1)[1])["text"]
        self.answered[text] += 1
        args = json.dumps({"summary": f"about {text}"})
        return stream_response(reply(calls=(call(0, "call_1", "report_answer", args),)))


@pytest.mark.reliability
async def test_a_429_storm_in_a_map_runs_every_item_once_and_concurrency_falls_then_recovers(
    reliability: ReliabilityNotes,
) -> None:
    fake = ThrottlingChat(throttled=24)
    store = MemoryStore()
    run = Run(model=OpenAIModel("gpt-4.1", client=fake.client(), max_retries=0), store=store)
    results = await run.map(ROLE, [Query(f"text {i}") for i in range(40)], concurrency=8, retries=10)
    assert [r.summary for r in results] == [f"about text {i}" for i in range(40)]
    assert fake.answered == Counter({f"text {i}": 1 for i in range(40)})  # none lost, none run twice
    assert len(fake.requests) == 40 + 24 and results.throttled == 24
    limits = [limit for _, limit in results.concurrency_trace]
    lowest = limits.index(min(limits))
    assert limits[0] == 8 and min(limits) == 1 and limits[: lowest + 1] == [8, 4, 2, 1], limits
    assert limits[-1] == 8 and limits[lowest:] == sorted(limits[lowest:]), limits
    # Replayed whole with no request.
    nothing = FakeChat([])
    again = await Run(model=OpenAIModel("gpt-4.1", client=nothing.client()), store=store, mode="replay").map(
        ROLE, [Query(f"text {i}") for i in range(40)], concurrency=8
    )
    assert list(again) == list(results) and not nothing.requests
    reliability.note(
        "Model faults",
        "an OpenAI-compatible server answering 429 to the first 24 requests of a 40-item map (the real openai client)",
        "every item finishes once; the map's concurrency falls 8, 4, 2, 1 and grows back to 8; replayed, no request",
        records_lost=0,
    )


@pytest.fixture
def unanswering_port() -> Iterator[int]:
    """A loopback port whose listen queue is full: a connection to it is never accepted (a SYN dropped), as a dead
    host's or a firewalled port's."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):  # fill the accept queue; later connects hang
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    try:
        yield port
    finally:
        for s in fillers:
            s.close()
        server.close()


@pytest.mark.reliability
async def test_a_base_url_that_does_not_answer_fails_within_ten_seconds(
    unanswering_port: int, reliability: ReliabilityNotes
) -> None:
    model = OpenAIModel("llama3", base_url=f"http://127.0.0.1:{unanswering_port}/v1", free=True)
    store = MemoryStore()
    began = time.monotonic()
    with pytest.raises(ModelServerError, match=rf"'llama3' at http://127.0.0.1:{unanswering_port}/v1 did not answer"):
        await Run(model=model, store=store).step(ROLE, Query("x"))
    took = time.monotonic() - began
    assert took < DEAD_SERVER_SECONDS <= 10, took
    assert not list(store.records())
    reliability.note(
        "Model faults",
        "an OpenAI-compatible base URL whose port never accepts a connection",
        "one ModelServerError naming the server and the model, within 10 s; nothing recorded",
        measured={"A base URL that does not answer: time to the error": f"{took:.1f} s"},
        how="OpenAIModel over the real openai client; a loopback port whose accept queue is full; wall time",
    )


async def test_a_refused_connection_fails_at_once_naming_server_and_model() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    began = time.monotonic()
    with pytest.raises(ModelServerError, match=rf"'m' at http://127.0.0.1:{port}/v1 did not answer"):
        await Run(model=OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1")).step(ROLE, Query("x"))
    assert time.monotonic() - began < DEAD_SERVER_SECONDS


@pytest.mark.reliability
async def test_a_key_in_the_base_url_s_query_or_in_code_never_reaches_a_record_or_an_error(
    reliability: ReliabilityNotes,
) -> None:
    in_query = "".join(["q", "k", "-"]) + "planted-query-secret-0042"
    in_code = fake_key() + "-given-in-code"
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        user = json.loads(request.content)["messages"][1]["content"]
        # The model repeats what it was sent, keys included, as a hostile or careless model might.
        args = json.dumps({"summary": f"I was sent {user} with {request.url} and {in_code}"})
        return stream_response(reply(calls=(call(0, "c", "report_answer", args),)))

    model = OpenAIModel(
        "m",
        base_url=f"http://chat.test/v1?key={in_query}",
        api_key=in_code,
        free=True,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    store = MemoryStore()
    await Run(model=model, store=store).step(ROLE, Query(f"say {in_query}"))
    assert seen and seen[0].url.params["key"] == in_query  # the query is sent ...
    (record,) = list(store.records())
    text = json.dumps(record.to_json(), ensure_ascii=False)
    assert in_query not in text and in_code not in text and "[REDACTED]" in text  # ... and never recorded
    assert record.backend == "openai:m@http://chat.test:80/v1"

    def refuse(request: httpx2.Request) -> httpx2.Response:
        return error_response(400, f"bad key {in_code} for {request.url}")

    model = OpenAIModel(
        "m",
        base_url="http://chat.test/v1",
        api_key=in_code,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)),
    )
    from agl_notebook._secrets import scrub_text, secrets_from_environment

    with pytest.raises(
        ModelServerError, match=r"'m' at http://chat.test:80/v1 refused the request \(HTTP 400: bad key"
    ) as e:
        await Run(model=model).step(ROLE, Query("x"))
    assert in_code in str(e.value)  # the server echoed it; every exit scrubs it, as an environment key:
    assert in_code not in scrub_text(str(e.value), secrets_from_environment())
    reliability.note(
        "Secrets",
        "a key in an OpenAI-compatible base URL's query and a key given in code, echoed back by the model and "
        "by the server's error",
        "sent with every request; never in the record or the backend id; scrubbed from the error as an environment "
        "key is",
        secrets_found=0,
    )


# --- run.compare: Claude and an OpenAI-compatible model ---------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    spam: bool = describe("Whether the message is spam.")


def judge(model: object) -> Role[Verdict]:
    return Role(
        "judge",
        instructions="Say whether the message is spam.",
        model=model,  # type: ignore[arg-type]
        accepts=(Query,),
        tools=[reporting_tool("report_verdict", "Report the verdict.", Verdict)],
    )


async def test_compare_of_a_claude_role_and_an_openai_role_through_both_real_clients() -> None:
    messages = [Query("win a prize now"), Query("lunch at noon?"), Query("cheap pills"), Query("minutes attached")]
    claude_says = [True, False, True, False]
    gpt_says = [True, False, False, False]  # disagrees on the third
    claude = api(
        *[
            claude_reply(
                use("toolu_1", "report_verdict", json.dumps({"spam": s})),
                stop_reason="tool_use",
                input_tokens=1000,
                output_tokens=100,
            )
            for s in claude_says
        ]
    )
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    gpt = chat(
        *[reply(calls=(call(0, "c", "report_verdict", json.dumps({"spam": s})),), usage=usage) for s in gpt_says]
    )
    claude_model = AnthropicModel(client=claude.client(), model="claude-opus-5-5")
    gpt_model = OpenAIModel("gpt-4.1", client=gpt.client(base_url="https://api.openai.com/v1"))
    assert gpt_model.backend_id("") == "openai:gpt-4.1@https://api.openai.com:443/v1"  # priced from the snapshot
    store = MemoryStore()
    run = Run(store=store)
    variants = {"claude": judge(claude_model), "gpt": judge(gpt_model)}
    grid = await run.compare(variants, messages, concurrency=1)
    assert grid.agreement == {"spam": 0.75}
    text = grid.render_text()
    # Dollars per variant: Claude Opus 5.5 at $4 in / $20 out, gpt-4.1 at $2 in / $8 out, per 1,000 + 100 tokens.
    assert "$0.0240" in text and "$0.0112" in text, text
    # Replayed with no request.
    nothing_claude, nothing_gpt = api(), FakeChat([])
    again = await Run(store=store, mode="replay").compare(
        {
            "claude": judge(AnthropicModel(client=nothing_claude.client(), model="claude-opus-5-5")),
            "gpt": judge(OpenAIModel("gpt-4.1", client=nothing_gpt.client(base_url="https://api.openai.com/v1"))),
        },
        messages,
        concurrency=1,
    )
    assert again.render_text() == text and not nothing_claude.requests and not nothing_gpt.requests
