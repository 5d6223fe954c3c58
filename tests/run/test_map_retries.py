"""A map's requests through the real anthropic client against the fake Messages API: the map owns the retries.

The fake answers 429 for a while: every item still finishes, none is lost or run twice, and the map's concurrency
falls (halved per generation of throttled requests) and grows back as requests succeed.
"""

from __future__ import annotations

import json
from collections import Counter

import httpx2
import pytest

from agl_notebook import Role, Run, reporting_tool
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.run import MapItemError
from tests.support.anthropic_api import FakeAPI, error_response, reply, stream_response, use
from tests.support.steps import Answer, Query

ROLE: Role[Answer] = Role(
    "summarizer",
    instructions="Summarize the text.",
    model="claude-opus-5-5",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)


class ThrottlingAPI(FakeAPI):
    """Answers 429 (or another status) to the first ``throttled`` requests, then reports each item's own text."""

    def __init__(self, throttled: int, *, status: int = 429, retry_after: str = "1") -> None:
        super().__init__([])
        self.throttled = throttled
        self.status = status
        self.retry_after = retry_after
        self.answered: Counter[str] = Counter()
        self.in_flight = 0
        self.most_in_flight = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if len(self.requests) <= self.throttled:
            kind = "rate_limit_error" if self.status == 429 else "overloaded_error"
            response = error_response(self.status, kind, "Slow down.")
            response.headers["retry-after-ms"] = self.retry_after
            return response
        text = json.loads(json.loads(request.content)["messages"][0]["content"][0]["text"].split("\n", 1)[1])["text"]
        self.answered[text] += 1
        args = json.dumps({"summary": f"about {text}"})
        return stream_response(reply(use("toolu_1", "report_answer", args), stop_reason="tool_use"))


def inputs(n: int) -> list[Query]:
    return [Query(f"text {i}") for i in range(n)]


async def test_429s_for_a_while_every_item_finishes_once_and_concurrency_falls_then_recovers() -> None:
    api = ThrottlingAPI(throttled=24)
    run = Run(model=AnthropicModel(client=api.client(max_retries=0)))  # the SDK's own setting is not used
    results = await run.map(ROLE, inputs(40), concurrency=8, retries=10)
    assert [r.summary for r in results] == [f"about text {i}" for i in range(40)]
    assert api.answered == Counter({f"text {i}": 1 for i in range(40)})  # none lost, none run twice
    assert len(api.requests) == 40 + 24
    limits = [limit for _, limit in results.concurrency_trace]
    lowest = limits.index(min(limits))
    assert limits[0] == 8 and min(limits) == 1, limits  # 8 halved to 1 ...
    assert limits[: lowest + 1] == [8, 4, 2, 1], limits  # ... once per generation of throttled requests
    assert limits[-1] == 8 and limits[lowest:] == sorted(limits[lowest:]), limits  # ... and grown back
    assert results.throttled == 24


async def test_529_overloaded_is_throttling_too() -> None:
    api = ThrottlingAPI(throttled=3, status=529)
    results = await Run(model=AnthropicModel(client=api.client())).map(ROLE, inputs(4), concurrency=2, retries=3)
    assert not results.failures
    assert min(limit for _, limit in results.concurrency_trace) == 1


async def test_retries_are_the_maps_and_spent_retries_fail_only_that_item() -> None:
    api = ThrottlingAPI(throttled=3)
    # The client would retry 5 times; the map says once: the one item that keeps meeting 429s fails after 2 tries.
    results = await Run(model=AnthropicModel(client=api.client(max_retries=5))).map(
        ROLE, inputs(3), concurrency=1, retries=1
    )
    failed = [r for r in results if isinstance(r, MapItemError)]
    assert [f.index for f in failed] == [0]
    assert type(failed[0].error).__name__ == "RateLimitError"
    assert len(api.requests) == 2 + 1 + 2  # item 0: 2 attempts (429, 429); item 1: 429 then answered; item 2


async def test_an_invalid_request_is_not_retried() -> None:
    class Invalid(ThrottlingAPI):
        def handle(self, request: httpx2.Request) -> httpx2.Response:
            self.requests.append(request)
            return error_response(400, "invalid_request_error", "messages: bad")

    api = Invalid(throttled=0)
    results = await Run(model=AnthropicModel(client=api.client())).map(ROLE, inputs(3), retries=5)
    assert len(api.requests) == 3
    assert [type(f.error).__name__ for f in results.failures] == ["BadRequestError"] * 3
    assert all(limit == 8 for _, limit in results.concurrency_trace)


async def test_retry_after_is_honoured_up_to_the_maps_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from agl_notebook.models import anthropic as backend
    from agl_notebook.run import _map

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(backend, "_sleep", sleep)
    monkeypatch.setattr(_map, "MAX_RETRY_WAIT", 5.0)
    api = ThrottlingAPI(throttled=2, retry_after="3000")  # 3 s asked, then 3 s again
    await Run(model=AnthropicModel(client=api.client())).map(ROLE, inputs(1), retries=3)
    assert waits == [3.0, 3.0]
    waits.clear()
    api = ThrottlingAPI(throttled=1, retry_after="3600000")  # an hour asked: capped
    await Run(model=AnthropicModel(client=api.client())).map(ROLE, inputs(1), retries=3)
    assert waits == [5.0]
