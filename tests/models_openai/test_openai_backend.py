"""The OpenAI-compatible backend through the real ``openai`` client over an in-process transport.

Every response is real-format SSE built from the SDK's own ``ChatCompletionChunk`` models (tests/support/openai_api.py),
so the client's request building, SSE decoding (bytes split anywhere, inside a character too), chunk parsing and
error mapping all run. Each step that records is then replayed with no request.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Image, Role, Run, ToolResult, describe, reporting_tool, tool
from agl_notebook.errors import InputError, ModelOutputTruncatedError, ModelServerError, UpstreamUnexpected
from agl_notebook.events import Event, MarkupError
from agl_notebook.models.base import (
    UNKNOWN_USAGE,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
)
from agl_notebook.models.openai import OpenAIModel, chat_params
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock, user_text
from tests.support.openai_api import FakeChat, call, chat, chunk, fail, reply, usage_json
from tests.support.steps import Answer, Query

LOOK_UP = ToolSpec(
    "look_up", "Look a thing up.", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (), max_tokens: int = 512) -> ModelRequest:
    return ModelRequest("ignored", "You are terse.", messages or (user_text("Hello"),), tools, max_tokens)


async def collect(model: OpenAIModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [e async for e in model.stream(req or request())]


@dataclass(frozen=True)
class Place:
    city: str = describe("The city.")
    note: str = describe("Anything to say about it.")


def researcher(model: str = "gpt-4.1") -> Role[Answer]:
    async def look_up(query: Query) -> ToolResult:
        return ToolResult(f"notes on {query.text}")

    return Role(
        "researcher",
        instructions="Look things up, then report.",
        tools=[tool("look_up", "Look a thing up.", Query, look_up), reporting_tool("report", "Report.", Answer)],
        model=model,
    )


async def record_then_replay(fake: FakeChat, role: Role[Any], text: str, **model: Any) -> tuple[Any, MemoryStore]:
    """Run the step live on the fake, then again in mode replay with a model that would fail any request."""
    store = MemoryStore()
    live = await Run(model=fake.model(**model), store=store).step(role, text)
    sent = len(fake.requests)
    nothing = chat()  # no response queued: any request fails the test
    replayed = await Run(model=nothing.model(**model), store=store, mode="replay").step(role, text)
    assert replayed == live and not nothing.requests and len(fake.requests) == sent
    return live, store


# --- Streaming ------------------------------------------------------------------------------------------------------


async def test_text_streams_and_the_usage_counts_cached_tokens_apart() -> None:
    fake = chat(reply("Hel", "lo, wörld ", "🙂", usage=usage_json(prompt=1200, completion=7, cached=1000)))
    events = await collect(fake.model())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello, wörld 🙂"
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.stop_reason == "end_turn"
    assert (end.usage.input_tokens, end.usage.cache_read_input_tokens, end.usage.output_tokens) == (200, 1000, 7)


async def test_parallel_calls_interleaved_and_split_inside_characters_are_assembled() -> None:
    # Arguments split mid-escape and next to multi-byte characters; the SSE bytes split every 37 bytes, so inside
    # characters too.
    first = call(0, "call_a", "look_up", '{"te', 'xt": "caf', "é ☕ \\u00", 'e9 🙂"', "}")
    second = call(1, "call_b", "look_up", "{", '"text"', ': "日本', '語"}')
    fake = chat(reply("Looking.", calls=(first, second), interleave=True))
    events = await collect(fake.model(), request(tools=(LOOK_UP,)))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls == [
        ToolCall("call_a", "look_up", {"text": "café ☕ é 🙂"}),
        ToolCall("call_b", "look_up", {"text": "日本語"}),
    ]
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "tool_use"


async def test_stop_while_tool_calls_were_sent_is_tool_use() -> None:
    fake = chat(reply(calls=(call(0, "call_1", "look_up", '{"text": "x"}'),), finish="stop"))
    events = await collect(fake.model(), request(tools=(LOOK_UP,)))
    assert events == [ToolCall("call_1", "look_up", {"text": "x"}), TurnEnd("tool_use", events[-1].usage)]  # type: ignore[union-attr]


async def test_length_inside_a_call_is_the_truncation_error_naming_the_tool() -> None:
    fake = chat(reply(calls=(call(0, "call_1", "look_up", '{"text": "a long'),), finish="length"))
    with pytest.raises(
        ModelOutputTruncatedError, match=r"'gpt-4.1' at http://chat.test:80/v1.*max_tokens=512.*'look_up'"
    ):
        await collect(fake.model(), request(tools=(LOOK_UP,)))


async def test_length_in_text_is_max_tokens_and_content_filter_a_refusal() -> None:
    fake = chat(reply("cut", finish="length"), reply("no", finish="content_filter"))
    model = fake.model()
    assert (await collect(model))[-1] == TurnEnd("max_tokens", Usage(input_tokens=10, output_tokens=5))
    assert isinstance(end := (await collect(model))[-1], TurnEnd) and end.stop_reason == "refusal"


async def test_a_stream_without_a_finish_reason_or_with_bad_arguments_is_upstream_unexpected() -> None:
    no_finish = [chunk({"content": "half"})]
    not_object = reply(calls=(call(0, "c", "look_up", "[1, 2]"),))
    not_json = reply(calls=(call(0, "c", "look_up", '{"text": '),))
    fake = chat(no_finish, not_object, not_json)
    model = fake.model()
    with pytest.raises(UpstreamUnexpected, match="without a finish reason"):
        await collect(model)
    with pytest.raises(UpstreamUnexpected, match="JSON but not an object"):
        await collect(model, request(tools=(LOOK_UP,)))
    with pytest.raises(UpstreamUnexpected, match="not JSON"):
        await collect(model, request(tools=(LOOK_UP,)))


async def test_no_usage_chunk_ends_with_unknown_usage() -> None:
    fake = chat(reply("hi", send_usage=False))
    end = (await collect(fake.model()))[-1]
    assert isinstance(end, TurnEnd) and end.usage is UNKNOWN_USAGE


# --- What is sent ---------------------------------------------------------------------------------------------------


async def test_the_conversation_becomes_chat_messages() -> None:
    history = (
        user_text("Find cafés."),
        Message(
            "assistant",
            (
                TextBlock("Looking."),
                ToolUseBlock("call_1", "look_up", {"text": "café"}),
                ToolUseBlock("call_2", "look_up", {"text": "tea"}),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock("call_1", "3 cafés"),
                ToolResultBlock("call_2", "no tea", is_error=True),
                TextBlock("And?"),
            ),
        ),
    )
    fake = chat(reply("Done."))
    await collect(fake.model(), request(*history, tools=(LOOK_UP,), max_tokens=300))
    (body,) = fake.bodies()
    assert body["model"] == "gpt-4.1" and body["stream"] is True and body["max_tokens"] == 300
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "look_up", "description": "Look a thing up.", "parameters": LOOK_UP.input_schema},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Find cafés."},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look_up", "arguments": '{"text": "café"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "look_up", "arguments": '{"text": "tea"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "3 cafés"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: no tea"},
        {"role": "user", "content": "And?"},
    ]


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("o3", "max_completion_tokens"),
        ("gpt-5-mini", "max_completion_tokens"),
        ("o4-mini", "max_completion_tokens"),
        ("gpt-4.1", "max_tokens"),
        ("llama3.2", "max_tokens"),
        ("openai/gpt-5", "max_completion_tokens"),
    ],
)
def test_reasoning_models_take_max_completion_tokens(model: str, field: str) -> None:
    params = chat_params(request(), model, OpenAIModel(model).max_tokens_field)
    assert params[field] == 512 and len({"max_tokens", "max_completion_tokens"} & set(params)) == 1


def test_a_block_it_cannot_send_is_refused_before_any_request() -> None:
    @dataclass(frozen=True)
    class ImageBlock:
        type: str = "image"

    message = Message("user", (TextBlock("look"), ImageBlock()))  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"Message 0 holds a 'image' block.*no images, documents or server tools"):
        chat_params(request(message), "gpt-4.1")
    from agl_notebook.models.base import model_accepts

    assert not model_accepts(OpenAIModel("x"), "images") and model_accepts(OpenAIModel("x"), "tools")
    assert not model_accepts(Run(model=OpenAIModel("x")).meter.wrap(OpenAIModel("x")), "documents")


async def test_tools_to_a_backend_made_without_them_are_refused_before_any_request() -> None:
    fake = chat()
    with pytest.raises(InputError, match=r"tools=False.*look_up"):
        await collect(fake.model(tools=False), request(tools=(LOOK_UP,)))
    assert not fake.requests


# --- Backend id, keys, errors ---------------------------------------------------------------------------------------


def test_the_backend_id_names_model_and_server_without_userinfo_or_query() -> None:
    assert OpenAIModel("gpt-4.1").backend_id("any") == "openai:gpt-4.1@https://api.openai.com:443/v1"
    local = OpenAIModel("llama3", base_url="http://localhost:11434/v1/")
    hosted = OpenAIModel("llama3", base_url="https://api.groq.com/openai/v1")
    assert local.backend_id("") == "openai:llama3@http://localhost:11434/v1"
    assert hosted.backend_id("") == "openai:llama3@https://api.groq.com:443/openai/v1"
    secret = "q" + "-".join(["planted", "query", "value", "1234"])
    odd = OpenAIModel("m", base_url=f"https://me:{secret}x@Example.COM:8443/v1?api-version=2024-06-01&key={secret}")
    assert odd.backend_id("") == "openai:m@https://example.com:8443/v1"
    assert secret not in repr(odd) and secret not in repr(odd.server)


@pytest.mark.parametrize(
    "bad",
    [
        {"model": ""},
        {"model": "m", "base_url": "ftp://x"},
        {"model": "m", "base_url": "localhost:8000"},
        {"model": "m", "max_retries": -1},
        {"model": "m", "connect_timeout": float("nan")},
        {"model": "m", "free": True, "rates": 1},
    ],
)
def test_bad_settings_are_refused_when_made(bad: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="OpenAIModel"):
        OpenAIModel(**bad)


async def test_unknown_model_is_one_error_naming_server_and_model_and_nothing_is_recorded() -> None:
    fake = chat(fail(404, "The model `gpt-9` does not exist or you do not have access to it."))
    store = MemoryStore()
    with pytest.raises(ModelServerError, match=r"'gpt-9' at http://chat.test:80/v1 .*404.*does not exist") as e:
        await Run(model=fake.model("gpt-9"), store=store).step(researcher("gpt-9"), "x")
    assert e.value.status_code == 404 and e.value.server == "http://chat.test:80/v1" and len(fake.requests) == 1
    assert not list(store.records())


async def test_tools_refused_by_the_server_name_server_and_model() -> None:
    said = "registry.ollama.ai/library/gemma:2b does not support tools"
    fake = chat(fail(400, said))
    with pytest.raises(ModelServerError, match=r"'gemma:2b' at .*refused the tools.*does not support tools"):
        await Run(model=fake.model("gemma:2b")).step(researcher("gemma:2b"), "x")


async def test_retryable_statuses_are_retried_then_the_error_names_the_server() -> None:
    fake = chat(fail(503, "busy"), fail(500, "oops"), reply("ok"))
    assert isinstance((await collect(fake.model()))[-1], TurnEnd) and len(fake.requests) == 3
    fake = chat(fail(429, "slow"), fail(429, "slow"), fail(429, "slow"))
    with pytest.raises(ModelServerError, match="rate limiting after the retries"):
        await collect(fake.model())
    assert len(fake.requests) == 3  # two retries by default


def test_importing_the_backend_does_not_import_the_client() -> None:
    import subprocess

    code = "import agl_notebook, agl_notebook.models.openai, sys; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_the_openai_package_a_live_step_says_which_extra_to_install() -> None:
    """The client is an optional extra: a live step without it is one clear error (no request, nothing recorded)."""
    import subprocess

    code = """
import asyncio, sys
sys.modules["openai"] = None  # not installed
from agl_notebook import Role, Run
from agl_notebook.errors import InputError
from agl_notebook.models.openai import OpenAIModel
from agl_notebook.replay.stores import MemoryStore
store = MemoryStore()
try:
    asyncio.run(Run(model=OpenAIModel("llama3.2", base_url="http://127.0.0.1:9/v1"), store=store).step(
        Role("chat", "Answer."), "Hello"))
except InputError as e:
    print(type(e).__name__, e, len(store.records()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == (
        "InputError 'llama3.2' at http://127.0.0.1:9/v1 runs live through the openai package, which is not "
        "installed: pip install 'agl_notebook[openai]' (recorded steps replay without it). 0"
    ), out.stdout + out.stderr


# --- Whole steps, recorded and replayed -----------------------------------------------------------------------------


async def test_a_step_with_parallel_split_calls_records_and_replays_with_no_request() -> None:
    fake = chat(
        reply(
            calls=(call(0, "c1", "look_up", '{"text": "ca', 'fé"}'), call(1, "c2", "look_up", '{"text": "🙂"}')),
            interleave=True,
        ),
        reply(calls=(call(0, "c3", "report", '{"summary": "two', ' lookups"}'),), finish="stop"),
    )
    live, store = await record_then_replay(fake, researcher(), "What is there?")
    assert live == Answer("two lookups")
    (record,) = list(store.records())
    assert record.backend == "openai:gpt-4.1@http://chat.test:80/v1"
    assert [b.name for b in record.transcript[1].tool_uses] == ["look_up", "look_up"]


async def test_dsml_text_calls_become_calls_and_replay() -> None:
    dsml = '<｜DSML｜tool_call>{"name": "report", "arguments": {"summary": "by markup"}}</｜DSML｜tool_call>'
    # The markup split across text deltas (and, in the SSE bytes, inside its full-width bars).
    fake = chat(reply("I will report. ", dsml[:9], dsml[9:40], dsml[40:]))
    live, _ = await record_then_replay(fake, researcher(), "Report by markup.")
    assert live == Answer("by markup")


async def test_a_broken_dsml_span_is_a_markup_error_and_the_step_goes_on() -> None:
    broken = "<｜DSML｜tool_call>{not json}</｜DSML｜tool_call>"
    events: list[Event] = []
    fake = chat(reply("Trying. ", broken), reply(calls=(call(0, "c", "report", '{"summary": "ok"}'),)))
    answer = await Run(model=fake.model(), on_event=events.append).step(researcher(), "x")
    assert answer == Answer("ok") and any(isinstance(e, MarkupError) for e in events)


async def test_a_step_whose_server_sends_no_usage_settles_at_its_estimate_and_says_usage_unknown() -> None:
    fake = chat(reply(calls=(call(0, "c", "report", '{"summary": "s"}'),), send_usage=False))
    store = MemoryStore()
    from agl_notebook.models.prices import Rates

    # Priced as the person says (gpt-4.1's rates) for a model of its own name: a declared price lasts the process.
    run = Run(model=fake.model("no-usage-model", rates=Rates(2, 8, 2, 2, 0.5)), store=store, budget_usd=1.0)
    assert await run.step(researcher(), "x") == Answer("s")
    (record,) = list(store.records())
    assert record.cost is not None and record.cost.usage_unknown and record.cost.words() == "usage unknown"
    assert record.to_json()["cost"] == {"usd": None, "rates": record.cost.rates_as_of, "usage": "unknown"}
    assert run.meter.requests == 1 and 0.03 < run.spent_usd < 0.04  # the estimate: 4,096 output tokens at $8
    from agl_notebook.replay.records import record_from_json

    assert record_from_json(json.loads(json.dumps(record.to_json()))).cost == record.cost


async def test_a_step_with_cached_tokens_is_priced_from_the_snapshot() -> None:
    fake = chat(
        reply(
            calls=(call(0, "c", "report", '{"summary": "s"}'),), usage=usage_json(1_000_000, 1_000_000, cached=400_000)
        )
    )
    store = MemoryStore()
    run = Run(model=fake.model("gpt-4.1"), store=store)
    await run.step(researcher(), "x")
    (record,) = list(store.records())
    # gpt-4.1 on a server that is not OpenAI's: no price. The same model on OpenAI's host: $2 in, $0.50 cached, $8 out.
    assert record.cost is not None and record.cost.words() == "price unknown"
    from agl_notebook.models.base import Usage
    from agl_notebook.models.prices import PRICES

    usage = Usage(input_tokens=600_000, output_tokens=1_000_000, cache_read_input_tokens=400_000)
    assert record.usage == usage
    assert PRICES.cost(OpenAIModel("gpt-4.1").backend_id(""), usage) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 8)


async def test_a_local_model_is_free_only_when_the_person_says_so() -> None:
    base = "http://127.0.0.1:9/v1"
    for free, words in ((False, "price unknown"), (True, "$0.0000")):
        fake = chat(reply(calls=(call(0, "c", "report", '{"summary": "s"}'),)))
        model = OpenAIModel(f"llama3-{free}", client=fake.client(base_url=base), free=free)
        store = MemoryStore()
        await Run(model=model, store=store).step(researcher(), "x")
        (record,) = list(store.records())
        assert record.cost is not None and record.cost.words() == words


# --- Reasoning text -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_text_streams_as_thinking_and_is_kept_before_the_reply(field: str) -> None:
    from agl_notebook.models.base import ThinkingDelta
    from agl_notebook.transcript import RawBlock

    fake = chat(reply("Answer.", reasoning=("Let me ", "think: é🙂"), reasoning_field=field))
    events = await collect(fake.model())
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["Let me ", "think: é🙂"]
    kept = [i for i, e in enumerate(events) if isinstance(e, RawBlock)]
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert len(kept) == 1 and kept[0] < first_text
    assert events[kept[0]] == RawBlock({"type": "thinking", "thinking": "Let me think: é🙂"})


async def test_a_step_s_reasoning_is_shown_kept_in_the_record_never_sent_back_and_replayed() -> None:
    from agl_notebook.events import ReasoningTextDelta
    from agl_notebook.transcript import RawBlock

    fake = chat(
        reply(calls=(call(0, "c1", "look_up", '{"text": "x"}'),), reasoning=("I should ", "look it up.")),
        reply(calls=(call(0, "c2", "report", '{"summary": "found"}'),), reasoning=("Now report.",)),
    )
    events: list[Event] = []
    store = MemoryStore()
    answer = await Run(model=fake.model(), store=store, on_event=events.append).step(researcher(), "x")
    assert answer == Answer("found")
    assert "".join(e.delta for e in events if isinstance(e, ReasoningTextDelta)) == "I should look it up.Now report."
    second = fake.bodies()[1]["messages"]
    assert "look it up" not in json.dumps(second)  # Chat Completions takes no reasoning back
    (record,) = list(store.records())
    assert record.transcript[1].content[0] == RawBlock({"type": "thinking", "thinking": "I should look it up."})
    replayed: list[Event] = []
    nothing = chat()
    again = await Run(model=nothing.model(), store=store, mode="replay", on_event=replayed.append).step(
        researcher(), "x"
    )
    assert again == answer and not nothing.requests
    from agl_notebook.events import ReplyBlockKept

    kept = [e for e in replayed if isinstance(e, ReplyBlockKept)]
    assert [e.block["thinking"] for e in kept] == ["I should look it up.", "Now report."], kept


async def test_the_key_comes_from_the_variable_named_and_openai_s_only_for_openai(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agl_notebook.errors import MissingCredentialsError

    planted = "-".join(["sk", "planted", "env", "key", "0001"])
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    monkeypatch.setenv("MY_SERVER_KEY", planted + "-other")
    sent: list[str] = []

    def answer(request: Any) -> Any:
        sent.append(request.headers["authorization"])
        from tests.support.openai_api import stream_response

        return stream_response(reply("ok"))

    import httpx2

    def model(**kwargs: Any) -> OpenAIModel:
        return OpenAIModel("m", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)), **kwargs)

    await collect(model())  # OpenAI's own server: OPENAI_API_KEY
    await collect(model(base_url="http://localhost:11434/v1"))  # another server: no key of OpenAI's
    await collect(model(base_url="https://api.example.com/v1", api_key_env="MY_SERVER_KEY"))
    assert sent == [f"Bearer {planted}", "Bearer no-key-needed", f"Bearer {planted}-other"]
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(
        MissingCredentialsError, match=r"MY_SERVER_KEY is not set.*'m' at https://api\.example\.com:443/v1"
    ):
        await collect(model(base_url="https://api.example.com/v1", api_key_env="MY_SERVER_KEY"))
    assert len(sent) == 3


async def test_over_a_real_loopback_connection_the_client_s_own_transport_works() -> None:
    from tests.support.openai_api import chat_server

    def answer(body: dict[str, Any]) -> list[str]:
        answered = any(m["role"] == "tool" for m in body["messages"])
        if answered:
            return reply(calls=(call(0, "c2", "report", '{"summary": "over TCP"}'),))
        return reply("Checking.", calls=(call(0, "c1", "look_up", '{"text": "wire"}'),))

    with chat_server(answer) as served:
        store = MemoryStore()
        model = OpenAIModel("llama3", base_url=served.url, free=True)
        assert await Run(model=model, store=store).step(researcher("llama3"), "x") == Answer("over TCP")
        assert served.requests == 2
        (record,) = list(store.records())
        assert record.backend == f"openai:llama3@{served.url}"
        assert record.cost is not None and record.cost.words() == "$0.0000"


async def test_an_error_sent_inside_the_stream_is_one_server_error() -> None:
    from tests.support.openai_api import sse

    def broken(_request: Any) -> Any:
        import httpx2

        body = sse([chunk({"content": "Hal"})])[: -len(b"data: [DONE]\n\n")]
        body += b'data: {"error": {"message": "the model crashed", "type": "server_error"}}\n\n'
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    fake = chat(broken)
    with pytest.raises(ModelServerError, match="the model crashed"):
        await collect(fake.model())


# --- A client given: copied once -------------------------------------------------------------------------------------


async def test_a_given_client_is_copied_once_for_many_requests_and_follows_a_key_set_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import openai

    copies: list[object] = []
    real_copy = openai.AsyncOpenAI.copy

    def counting_copy(self: openai.AsyncOpenAI, *args: Any, **kwargs: Any) -> openai.AsyncOpenAI:
        copies.append(self)
        return real_copy(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "copy", counting_copy)
    monkeypatch.setattr(openai.AsyncOpenAI, "with_options", counting_copy)
    fake = chat(*(reply(f"r{i}") for i in range(4)))
    client = fake.client()
    model = OpenAIModel("gpt-4.1", client=client)
    for _ in range(3):
        [e async for e in model.stream(request())]
    assert len(copies) == 1, f"the client was copied {len(copies)} times for 3 requests"
    later = "sk-" + "later" * 4  # a key assigned to the client after it was made is what is sent next
    client.api_key = later
    [e async for e in model.stream(request())]
    assert len(copies) == 2
    assert fake.requests[-1].headers["authorization"] == f"Bearer {later}"
    assert fake.requests[0].headers["authorization"] != f"Bearer {later}"


async def test_the_map_summary_and_the_compare_grid_say_usage_unknown_not_price_unknown() -> None:
    from agl_notebook.models.prices import RecordedCost

    def no_usage(n: int) -> FakeChat:
        return chat(*(reply(calls=(call(0, "c", "report", '{"summary": "s"}'),), send_usage=False) for _ in range(n)))

    unpriced = chat(*(reply(calls=(call(0, "c", "report", '{"summary": "s"}'),)) for _ in range(2)))
    base = "http://127.0.0.1:9/v1"
    silent = OpenAIModel("silent-model", client=no_usage(4).client(base_url=base), free=True)
    unknown_price = OpenAIModel("unpriced-model", client=unpriced.client(base_url=base))
    mapped = await Run(model=silent, store=MemoryStore()).map(researcher(), ["a", "b"], concurrency=1)
    from agl_notebook.run._map_state import MapItem, MapState

    state = MapState("m", "researcher", [MapItem(i, "x", "x", 0) for i in range(3)])
    for item, mapped_item in zip(state.items, mapped.items, strict=False):
        item.cost = mapped_item.cost
    state.items[2].cost = unpriced_cost = RecordedCost(None, "2026-01-01")
    assert unpriced_cost.words() == "price unknown"
    assert state.dollars() == "$0.0000 (2 with usage unknown, 1 with price unknown)", state.dollars()
    grid = await Run(store=MemoryStore()).compare(
        {
            "silent": dataclasses.replace(researcher(), model=silent),
            "unpriced": dataclasses.replace(researcher(), model=unknown_price),
        },
        ["a", "b"],
        concurrency=1,
    )
    rows = {row[0]: row[2] for row in grid.summary_rows()[1:]}
    assert rows == {"silent": "usage unknown", "unpriced": "price unknown"}, rows


def test_a_request_goes_out_as_the_sdks_create_sends_it_without_its_param_transform() -> None:
    """The backend sends its body through the client's ``post`` (the transform ``create`` runs costs a step 0.2 ms a
    request): the same method, URL, JSON body and headers as ``chat.completions.create(..., stream=True)``; the key
    as the one bearer token even when the client also holds an admin key; a retry's count header kept."""
    import asyncio

    import httpx2
    import openai

    from agl_notebook.models import openai as backend

    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"data: [DONE]\n\n")

    client = openai.AsyncOpenAI(
        api_key="plain-test-key",
        admin_api_key="admin-test-key",
        base_url="http://wire.invalid/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    params = chat_params(request(user_text("hello"), tools=(LOOK_UP,)), "m")

    async def both() -> None:
        sdk = await client.chat.completions.create(**params, stream=True)  # type: ignore[call-overload]
        async for _ in sdk:
            pass
        ours = await backend._post_streaming(client, params, {"x-stainless-retry-count": "2"})
        async for _ in ours:
            pass

    asyncio.run(both())
    sdk_request, our_request = seen
    assert (our_request.method, our_request.url) == (sdk_request.method, sdk_request.url)
    assert json.loads(our_request.content) == json.loads(sdk_request.content)
    assert json.loads(our_request.content)["stream"] is True
    assert our_request.headers["authorization"] == sdk_request.headers["authorization"] == "Bearer plain-test-key"
    assert our_request.headers["x-stainless-retry-count"] == "2"
    differing = {
        k
        for k in {*sdk_request.headers, *our_request.headers}
        if sdk_request.headers.get(k) != our_request.headers.get(k)
    }
    assert differing <= {"x-stainless-retry-count", "content-length"}, differing


async def test_arguments_split_between_an_emojis_two_escapes_and_bytes_split_inside_every_character() -> None:
    """Arguments split anywhere: between the two ``\\u`` escapes of one emoji (a surrogate pair), and the SSE bytes
    sent one at a time, so every multi-byte character of the stream arrives in pieces."""
    import httpx2

    from tests.support.openai_api import _pieces, sse

    pieces = ('{"text": "', "\\ud83d", "\\ude42 caf", "é 日", '本 🙂"}')
    body = sse(reply(calls=(call(0, "call_1", "look_up", *pieces),)))
    headers = {"content-type": "text/event-stream"}
    fake = chat(lambda _request: httpx2.Response(200, headers=headers, content=_pieces(body, 1)))
    events = await collect(fake.model(), request(tools=(LOOK_UP,)))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls == [ToolCall("call_1", "look_up", {"text": "🙂 café 日本 🙂"})]


@pytest.mark.parametrize(("header", "waited"), [("0.3", 0.3), (None, None)])
async def test_a_429s_retry_after_is_the_wait_before_the_retry(
    monkeypatch: pytest.MonkeyPatch, header: str | None, waited: float | None
) -> None:
    """The server's ``retry-after`` is how long the backend waits (without it, the client's own backoff)."""
    from agl_notebook.models import openai as backend

    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(backend, "_sleep", sleep)
    fake = chat(fail(429, "slow down", retry_after=header), reply("ok"))
    assert isinstance((await collect(fake.model()))[-1], TurnEnd) and len(fake.requests) == 2
    (slept,) = sleeps
    if waited is not None:
        assert slept == pytest.approx(waited)
    else:
        assert 0 < slept < 2 and slept != pytest.approx(0.3)


async def test_tools_refused_by_the_server_record_nothing_and_name_the_server() -> None:
    said = "registry.ollama.ai/library/gemma:2b does not support tools"
    fake = chat(fail(400, said))
    store = MemoryStore()
    with pytest.raises(ModelServerError) as e:
        await Run(model=fake.model("gemma:2b"), store=store).step(researcher("gemma:2b"), "x")
    assert "'gemma:2b' at http://chat.test:80/v1" in str(e.value) and said in str(e.value)
    assert e.value.server == "http://chat.test:80/v1" and len(fake.requests) == 1
    assert not list(store.records())


def test_the_docs_table_of_servers_builds_each_backend_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/models.md's settings for OpenAI, DeepSeek, Ollama, vLLM and llama.cpp's server: each ``OpenAIModel(...)``
    of the table builds (no request) with the server and key variable the row says."""
    import re
    from pathlib import Path

    from agl_notebook.models import prices

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(prices, "_DECLARED", {})  # free=True declares rates for the process: not past this test
    docs = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| (OpenAI|DeepSeek|Ollama|vLLM|llama\.cpp) \| `(OpenAIModel\([^`]*\))`", docs, re.M)
    }
    assert set(rows) == {"OpenAI", "DeepSeek", "Ollama", "vLLM", "llama.cpp"}, rows
    built = {name: eval(code, {"OpenAIModel": OpenAIModel}) for name, code in rows.items()}  # the docs' own code
    expected = {
        "OpenAI": ("https://api.openai.com:443/v1", "OPENAI_API_KEY", False),
        "DeepSeek": ("https://api.deepseek.com:443", "DEEPSEEK_API_KEY", False),
        "Ollama": ("http://localhost:11434/v1", None, True),
        "vLLM": ("http://localhost:8000/v1", None, True),
        "llama.cpp": ("http://localhost:8080/v1", None, True),
    }
    for name, model in built.items():
        server, key_env, free = expected[name]
        # The key's variable and the person's word that it is free, as the backend keeps them.
        assert (model.server.id, model._api_key_env, model._engine is not None) == (server, key_env, free), name


def test_notebook_11_s_variants_are_named_scripted_and_every_recording_says_a_scripted_model_answered() -> None:
    """No recording may claim to come from a model that never answered it: notebook 11's three variants are named
    ``scripted_...`` and every record it holds (metadata and outputs) and every view of it names a scripted model."""
    import re
    from pathlib import Path

    from agl_notebook.notebook.nbfile import read_notebook_json, records_in_notebook

    path = Path(__file__).resolve().parents[2] / "notebooks" / "11_models_side_by_side.ipynb"
    nb = read_notebook_json(path)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert re.findall(r'^    "(\w+)": spam_judge\(', code, re.M) == [
        "scripted_cautious",
        "scripted_shouting",
        "scripted_trusting",
    ]
    records = list(records_in_notebook(nb).records.values())
    assert len(records) >= 12 and {r.backend.split(":")[0] for r in records} == {"scripted"}
    saved = json.dumps(nb)
    assert set(re.findall(r"recorded with (\w+):", saved)) <= {"scripted"}
    for real in ("openai:", "anthropic:", "claude-", "gpt-", "llama"):
        assert not re.search(rf'"backend": "{real}', saved), real


@dataclass(frozen=True)
class Photo:
    image: Image = describe("The photo.")


async def test_a_step_given_an_image_on_this_backend_is_refused_before_any_request_and_records_nothing() -> None:
    from tests.support.media import png_header

    looker: Role[Answer] = Role(
        "looker",
        instructions="Say what the photo shows.",
        accepts=(Photo,),
        tools=[reporting_tool("report", "Report.", Answer)],
    )
    fake = chat(reply("never sent"))
    store = MemoryStore()
    with pytest.raises(InputError, match=r"image"):
        await Run(model=fake.model(), store=store).step(looker, Photo(Image(png_header(64, 64))))
    assert not fake.requests and not list(store.records())


async def test_the_same_model_name_on_a_local_and_a_hosted_server_never_shares_a_recording(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx2

    from agl_notebook.models import prices

    monkeypatch.setattr(prices, "_DECLARED", {})  # free=True declares rates for the process: not past this test

    def reporting(summary: str) -> list[str]:
        return reply(calls=(call(0, "c1", "report", json.dumps({"summary": summary})),))

    local, hosted = chat(reporting("from local")), chat(reporting("from hosted"))
    store = MemoryStore()
    said: list[Answer] = []
    for fake, base in ((local, "http://localhost:11434/v1"), (hosted, "https://llama.example/v1")):
        transport = httpx2.AsyncClient(transport=httpx2.MockTransport(fake.handle))
        model = OpenAIModel("llama3.2", base_url=base, free=True, http_client=transport)
        said.append(await Run(model=model, store=store).step(researcher("llama3.2"), "Hello"))
    assert said == [Answer("from local"), Answer("from hosted")]
    assert len(local.requests) == len(hosted.requests) == 1  # the hosted one ran live: no recording shared
    assert sorted(r.backend for r in store.records()) == [
        "openai:llama3.2@http://localhost:11434/v1",
        "openai:llama3.2@https://llama.example:443/v1",
    ]
