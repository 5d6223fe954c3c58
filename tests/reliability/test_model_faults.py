"""Reliability (docs/reliability.md): model faults through the real anthropic SDK over an in-process transport.

Each fault is served by ``httpx2.MockTransport`` (``tests/support/anthropic_api.py``), so the SDK's own retries,
SSE decoding and event parsing run. For every fault: it is retried where the SDK retries, otherwise the step fails
with the error named here; nothing is recorded; the step's view shows the failure; and the next step on the same Run
works.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import pytest

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.errors import UpstreamUnexpected
from agl_notebook.events import Event
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import Thinking
from agl_notebook.notebook.view import NotebookView
from tests.support.anthropic_api import (
    MESSAGE_STOP,
    FakeAPI,
    Responder,
    api,
    block_start,
    fail,
    message_delta,
    message_start,
    opaque,
    reply,
    sse,
    stream_response,
    text,
    thought,
    use,
)
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Answer, Query
from tests.support.widgets import FakeDisplay, views_on

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)


async def look_up(query: Query) -> ToolResult:
    return ToolResult(f"notes on {query.text}")


ROLE: Role[Answer] = Role(
    name="researcher",
    instructions="Look things up, then report.",
    tools=[
        tool("look_up", "Look a thing up.", Query, look_up),
        reporting_tool("report", "Report what you found.", Answer),
    ],
    model=Claude.SONNET,
)


def report(summary: str) -> list[Any]:
    """A reply that reports at once, so a step that works takes exactly one request."""
    return reply(use("toolu_r", "report", '{"summary": ', f'"{summary}"}}'), stop_reason="tool_use")


class Harness:
    """A Run on the fake API whose every step is drawn by a NotebookView on a fake display (static, no widgets)."""

    def __init__(self, fake: FakeAPI, **client: Any) -> None:
        self.fake = fake
        self.displays: list[FakeDisplay] = []
        self.run = Run(model=AnthropicModel(client=fake.client(**client)), view=views_on(self.displays))

    def last_bundle(self) -> dict[str, Any]:
        shown = self.displays[-1].shown
        assert len(shown) == 1, shown
        bundle, metadata = shown[0]
        self.last_metadata = metadata
        return bundle


def reset_mid_stream() -> httpx2.Response:
    """A 200 stream that sends part of a reply, then the connection is reset."""
    body = sse(report("never whole"))

    async def chunks() -> AsyncIterator[bytes]:
        yield body[:120]
        raise httpx2.ReadError("Connection reset by peer")

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())


def raw_stream(body: bytes) -> Responder:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 41):
            yield body[i : i + 41]

    return lambda: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())


def malformed_sse() -> httpx2.Response:
    """Garbage lines, then an event whose data is not JSON, in the middle of an otherwise good reply."""
    events = report("x")
    body = (
        b"this line is garbage\n:a comment\n\n"
        + sse(events[:3])
        + b"event: content_block_delta\ndata: {not json at all\n\n"
        + sse(events[3:])
    )
    return raw_stream(body)()


def connection_refused() -> httpx2.Response:
    raise httpx2.ConnectError("Connection refused")


def timeout() -> httpx2.Response:
    raise httpx2.ReadTimeout("The read operation timed out")


def retry_after(status: int, kind: str, seconds: str) -> Responder:
    return lambda: httpx2.Response(
        status,
        headers={"retry-after": seconds, "request-id": "req_retry"},
        json={"type": "error", "error": {"type": kind, "message": "Slow down, please."}},
    )


async def assert_next_step_works(h: Harness, requests_before: int) -> None:
    records_before = len(h.run.store.records())
    answer = await h.run.step(ROLE, "And the next thing?")
    assert answer == Answer("next works")
    assert len(h.fake.requests) == requests_before + 1
    assert len(h.run.store.records()) == records_before + 1
    assert "finished" in h.last_bundle()["text/plain"]


# --- Retried by the SDK: the step succeeds --------------------------------------------------------------------------


RETRIED: dict[str, Callable[[], Responder]] = {
    "429 with retry-after": lambda: retry_after(429, "rate_limit_error", "0.01"),
    "500 api_error": lambda: fail(500, "api_error", "Internal server error"),
    "529 overloaded": lambda: fail(529, "overloaded_error", "Overloaded"),
    "connection refused before the response": lambda: connection_refused,
    "timeout before the response": lambda: timeout,
}


@pytest.mark.parametrize("fault", list(RETRIED))
async def test_retryable_faults_are_retried_and_the_step_succeeds(fault: str, reliability: ReliabilityNotes) -> None:
    h = Harness(api(RETRIED[fault](), report("made it"), report("next works")))
    started = time.monotonic()
    answer = await h.run.step(ROLE, "What do we know?")
    assert answer == Answer("made it")
    assert len(h.fake.requests) == 2
    assert [r.headers.get("x-stainless-retry-count") for r in h.fake.requests] == ["0", "1"]
    assert len(h.run.store.records()) == 1  # the step recorded once, not once per attempt
    assert "finished (1 model request)" in h.last_bundle()["text/plain"]
    if fault == "429 with retry-after":
        # retry-after: 0.01 s is honoured (the SDK's own backoff would wait at least 0.375 s).
        assert time.monotonic() - started < 0.35
    await assert_next_step_works(h, 2)
    reliability.note(
        "Model faults",
        fault,
        "retried once (2 requests); the step succeeds, recorded once; the next step works",
        requests_retried=1,
        records_lost=0,
    )


async def test_a_retry_after_of_a_day_is_capped_at_60_seconds(
    reliability: ReliabilityNotes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agl_notebook.events import ModelRetryWaiting
    from agl_notebook.models import anthropic as backend

    waited: list[float] = []

    async def no_real_wait(seconds: float) -> None:  # the cap is what is under test, not the clock
        waited.append(seconds)

    monkeypatch.setattr(backend, "_sleep", no_real_wait)
    seen: list[object] = []

    def noted(view: NotebookView, event: Event) -> None:
        seen.append(event)
        view.trace.apply(event)

    monkeypatch.setattr(NotebookView, "event", noted)
    h = Harness(api(retry_after(429, "rate_limit_error", "86400"), report("made it"), report("next works")))
    assert await h.run.step(ROLE, "What do we know?") == Answer("made it")
    assert waited == [60.0]
    (waiting,) = [e for e in seen if isinstance(e, ModelRetryWaiting)]
    assert (waiting.seconds, waiting.asked, waiting.reason) == (60.0, 86400.0, "HTTP 429")
    bundle = h.last_bundle()
    assert "waiting" not in bundle["text/plain"] and "waiting" not in bundle["text/html"]  # a live line only
    await assert_next_step_works(h, 2)
    reliability.note(
        "Model faults",
        "a 429 whose retry-after asks for a day (86400 s)",
        "the retry waits 60 s, not a day (the backend's cap), and the step's view says so while it "
        "waits (not in its final view); the step succeeds, recorded once; the next step works",
        requests_retried=1,
        records_lost=0,
    )


# --- Not retried (or retries exhausted): the step fails clearly ----------------------------------------------------


@dataclass(frozen=True)
class Failure:
    responders: tuple[Responder, ...]
    error: type[BaseException]
    fragment: str
    requests: int
    role: Role[Answer] = ROLE


FAILURES: dict[str, Callable[[], Failure]] = {
    "429 retries exhausted": lambda: Failure(
        (retry_after(429, "rate_limit_error", "0.01"),) * 2, anthropic.RateLimitError, "Slow down, please.", 2
    ),
    "529 retries exhausted": lambda: Failure(
        (fail(529, "overloaded_error", "Overloaded"),) * 2, anthropic.OverloadedError, "Overloaded", 2
    ),
    "timeout, retries exhausted": lambda: Failure((timeout, timeout), anthropic.APITimeoutError, "timed out", 2),
    "connection reset mid-stream": lambda: Failure(
        (reset_mid_stream,), UpstreamUnexpected, "The Anthropic stream broke off: ReadError: Connection reset", 1
    ),
    "stream without message_stop": lambda: Failure(
        (lambda: stream_response(reply(text("Half a rep"), message_stop=False)),),
        UpstreamUnexpected,
        "ended before message_stop",
        1,
    ),
    "malformed SSE": lambda: Failure(
        (malformed_sse,),
        UpstreamUnexpected,
        "The Anthropic stream broke off: JSONDecodeError: Expecting property name",
        1,
    ),
    "invalid tool_use JSON": lambda: Failure(
        (lambda: stream_response(reply(use("toolu_1", "look_up", '{"text": ,,}'), stop_reason="tool_use")),),
        UpstreamUnexpected,
        "'look_up' could not be read: its input is not valid JSON",
        1,
    ),
    "tool_use input with a 5,000-digit number": lambda: Failure(
        (
            lambda: stream_response(
                reply(use("toolu_1", "look_up", '{"text": ' + "9" * 5000 + "}"), stop_reason="tool_use")
            ),
        ),
        UpstreamUnexpected,
        "'look_up' could not be read: its input is not valid JSON (a number too long to read)",
        1,
    ),
    "tool_use input nested 5,000 deep": lambda: Failure(
        (
            lambda: stream_response(
                reply(use("toolu_1", "look_up", '{"text": ' + "[" * 5000 + "]" * 5000 + "}"), stop_reason="tool_use")
            ),
        ),
        UpstreamUnexpected,
        "'look_up' could not be read: its input is not valid JSON (nested too deeply)",
        1,
    ),
    "400 bad request": lambda: Failure(
        (fail(400, "invalid_request_error", "max_tokens: too large"),),
        anthropic.BadRequestError,
        "max_tokens: too large",
        1,
    ),
    "a thinking mode the model does not take": lambda: Failure(
        (fail(400, "invalid_request_error", "thinking.type.enabled is not supported for this model."),),
        anthropic.BadRequestError,
        "thinking.type.enabled is not supported for this model.",
        1,
        dataclasses.replace(ROLE, thinking=Thinking.enabled(2048)),
    ),
    "a thinking block left open": lambda: Failure(
        (
            lambda: stream_response(
                [message_start(), block_start(0, thought("Hm")), message_delta("end_turn"), MESSAGE_STOP]
            ),
        ),
        UpstreamUnexpected,
        "its 'thinking' block still open (no content_block_stop)",
        1,
    ),
    "a kept block's streamed input not JSON": lambda: Failure(
        (
            lambda: stream_response(
                reply(
                    opaque({"type": "server_tool_use", "input": {}}, {"type": "input_json_delta", "partial_json": "{"})
                )
            ),
        ),
        UpstreamUnexpected,
        "The input of the reply's 'server_tool_use' block is not valid JSON",
        1,
    ),
    "an error event after a thinking block": lambda: Failure(
        (
            lambda: stream_response(
                [
                    *reply(thought("Let me think."), text("Hi"))[:7],
                    ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                ]
            ),
        ),
        anthropic.APIStatusError,
        "Overloaded",
        1,
    ),
}


@pytest.mark.parametrize("fault", list(FAILURES))
async def test_a_fault_fails_the_step_clearly_records_nothing_shows_it_and_the_next_step_works(
    fault: str,
    reliability: ReliabilityNotes,
) -> None:
    case = FAILURES[fault]()
    h = Harness(api(*case.responders, report("next works")), max_retries=1)
    with pytest.raises(case.error) as raised:
        await h.run.step(case.role, "What do we know?")
    assert case.fragment in str(raised.value)
    assert len(h.fake.requests) == case.requests
    assert h.run.store.records() == ()
    bundle = h.last_bundle()
    assert h.last_metadata == {}  # no record travels with a failed step's output
    assert "failed" in bundle["text/plain"]
    assert f"error: {type(raised.value).__name__}: " in bundle["text/plain"]
    assert case.fragment.replace("'", "&#x27;") in bundle["text/html"]
    assert "agl-failed" in bundle["text/html"]
    await assert_next_step_works(h, case.requests)
    retried = "retried once, then " if case.requests > 1 else ""
    reliability.note(
        "Model faults",
        fault,
        f'{retried}the step fails with {case.error.__name__} ("{case.fragment}"); nothing recorded; '
        "the view shows the failure; the next step works",
        requests_retried=case.requests - 1,
        records_lost=0,
    )


async def test_a_fault_after_a_tool_ran_loses_the_whole_step_and_a_retry_is_the_same_step(
    reliability: ReliabilityNotes,
) -> None:
    h = Harness(
        api(
            reply(text("Looking."), use("toolu_1", "look_up", '{"text": "x"}'), stop_reason="tool_use"),
            reset_mid_stream,
            reply(use("toolu_1", "look_up", '{"text": "x"}'), stop_reason="tool_use"),
            report("next works"),
        ),
        max_retries=0,
    )
    with pytest.raises(UpstreamUnexpected, match="stream broke off"):
        await h.run.step(ROLE, "And the next thing?")
    assert h.run.store.records() == ()
    assert "tool look_up: ok" in h.last_bundle()["text/plain"]
    # Retrying the identical input is the same step (occurrence 0), not the next one.
    assert await h.run.step(ROLE, "And the next thing?") == Answer("next works")
    (record,) = h.run.store.records()
    assert record.occurrence == 0
    reliability.note(
        "Model faults",
        "a connection reset after a tool already ran",
        "the whole step fails, nothing recorded; retrying the same input is the same step "
        "(occurrence 0), recorded once",
        records_lost=0,
    )


# --- A stream that breaks while being read says so, whatever broke it ---------------------------------------------


@pytest.mark.parametrize("responder", [reset_mid_stream, malformed_sse], ids=["reset", "malformed"])
async def test_a_broken_stream_is_reported_as_upstream_unexpected(
    responder: Responder, reliability: ReliabilityNotes
) -> None:
    h = Harness(api(responder), max_retries=0)
    with pytest.raises(UpstreamUnexpected, match="Anthropic"):
        await h.run.step(ROLE, "What do we know?")
    reliability.note(
        "Model faults",
        f"{responder.__name__.replace('_', ' ')} with retries off",
        "UpstreamUnexpected naming the Anthropic stream, never a raw httpx or JSON error",
    )
