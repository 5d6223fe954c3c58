"""Replay cost, and the framework's overhead over the bare Anthropic client, side by side in one process.

The step is the one of ``bench_core.py``: request 1, the model calls ``look_up`` with ``Lookup(topic, limit)`` and
the async handler's text goes back; request 2, the model reports ``Answer(summary, count)`` through the role's
reporting tool.

Part 1, replay (scripted model, no I/O):

- ``replay``: the step is recorded once into a `MemoryStore`, then every iteration makes a new ``Run`` sharing that
  store (as a notebook re-execution does) and calls the public ``await run.step(role, prompt)`` in the default mode;
  the model call count is checked to stay unchanged, so every iteration really replays;
- ``live (scripted)``: the same step run live on the ``ScriptedModel`` (a new ``Run``, so a fresh store that the
  record goes into), for comparison. Target: a replayed step costs at most 100 µs.

Part 2, Claude's backend over HTTP without a network: ``AnthropicModel(client=AsyncAnthropic(api_key=...,
base_url="http://anthropic.test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
max_retries=0))``. The handler serves real-format server-sent events (request 1: a ``tool_use`` block whose input
arrives as ``input_json_delta`` pieces; request 2: the report's ``tool_use``), so the SDK's request building, SSE
decoding and event parsing all run. Variants, all on one client:

- ``agl, mode off``: ``await Run(model=backend, mode="off").step(role, prompt)``, nothing recorded;
- ``agl, default mode``: ``await Run(model=backend).step(role, prompt)``: live, then the record is scrubbed and kept;
- ``bare client``: the same two ``client.messages.create(..., stream=True)`` requests (the same system text and tool
  definitions, cache marks included), with the events iterated, the tool input assembled and parsed, the same
  handler awaited and the ``Answer`` built, as a hand-written loop would.

The framework's own overhead is the difference between an agl variant and the bare client (and their ratio). Every
run's HTTP request count is checked to be exactly 2.

Timing: one event loop; per variant, a warm-up, then rounds with the variants interleaved within each round; each
figure is the median over the rounds of (batch time / runs), with the fastest and slowest rounds beside it. The
overhead is printed from the medians and from the fastest rounds (the least disturbed by other work on the machine).

Run: ``.venv/bin/python benchmarks/bench_replay.py`` (``--runs N --http-runs M --repeats R`` to change the sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from _step import EXPECTED, PROMPT, ROLE, Answer, Lookup, look_up, scripted_model
from anthropic.types import (
    InputJSONDelta,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    TextBlockParam,
    ToolParam,
    ToolUseBlock,
)

from agl_notebook import Claude, Run
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay import MemoryStore
from agl_notebook.run import system_text

REPLAY_TARGET_US = 100.0

# --- Part 1: replay on the scripted model --------------------------------------------------------------------------

SCRIPTED = scripted_model()
STORE = MemoryStore()


async def replay_run() -> int:
    """One re-execution: a new Run sharing the store; returns the model requests made (0: it replayed)."""
    before = SCRIPTED.calls
    result = await Run(model=SCRIPTED, store=STORE).step(ROLE, PROMPT)
    assert result == EXPECTED, result
    return SCRIPTED.calls - before


async def live_scripted_run() -> int:
    """One live run on the scripted model (a new Run, so its own store); returns the model requests made."""
    before = SCRIPTED.calls
    result = await Run(model=SCRIPTED).step(ROLE, PROMPT)
    assert result == EXPECTED, result
    return SCRIPTED.calls - before


# --- Part 2: the Anthropic backend over an in-process HTTP transport -----------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _tool_use_reply(call_id: str, name: str, pieces: list[str]) -> bytes:
    """A real-format streamed reply holding one tool_use block whose input arrives in ``pieces``."""
    return _sse(
        [
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{call_id}",
                    "type": "message",
                    "role": "assistant",
                    "model": Claude.OPUS.value,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 120,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            },
            {"type": "ping"},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
            *(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
                for p in pieces
            ),
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 24},
            },
            {"type": "message_stop"},
        ]
    )


LOOK_UP_REPLY = _tool_use_reply("toolu_01", "look_up", ["", '{"topic": ', '"a", "lim', 'it": 0}'])
REPORT_REPLY = _tool_use_reply("toolu_02", "report_answer", ["", '{"summary": "do', 'ne", "count": 1}'])


class FakeAPI:
    """Answers a request with the report when it carries a tool result, else with the look_up call."""

    def __init__(self) -> None:
        self.requests = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        body = REPORT_REPLY if b'"tool_result"' in request.content else LOOK_UP_REPLY
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream", "request-id": "req_bench"}, content=body
        )


API = FakeAPI()
CLIENT = anthropic.AsyncAnthropic(
    api_key="bench-key-not-real",
    base_url="http://anthropic.test",
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(API.handle)),
    max_retries=0,
)
BACKEND = AnthropicModel(client=CLIENT, model=Claude.OPUS)


async def agl_off_run() -> int:
    """One live run through the framework, recording nothing; returns the HTTP requests made."""
    before = API.requests
    result = await Run(model=BACKEND, mode="off").step(ROLE, PROMPT)
    assert result == EXPECTED, result
    return API.requests - before


async def agl_default_run() -> int:
    """One live run through the framework in the default mode (it records); returns the HTTP requests made."""
    before = API.requests
    run = Run(model=BACKEND)
    result = await run.step(ROLE, PROMPT)
    assert result == EXPECTED, result
    assert len(run.store.records()) == 1
    return API.requests - before


# What the framework sends, written out once as a hand-written loop would have it.
BARE_SYSTEM: list[TextBlockParam] = [
    {"type": "text", "text": system_text(ROLE), "cache_control": {"type": "ephemeral"}}
]
BARE_TOOLS: list[ToolParam] = [
    {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)} for t in ROLE.tools
]
BARE_TOOLS[-1]["cache_control"] = {"type": "ephemeral"}


async def _bare_request(messages: list[MessageParam]) -> tuple[str, str, dict[str, Any]]:
    """Send one streamed request; return the (id, name, parsed input) of the reply's tool_use block."""
    stream = await CLIENT.messages.create(
        model=Claude.OPUS.value,
        max_tokens=4096,
        system=BARE_SYSTEM,
        tools=BARE_TOOLS,
        messages=messages,
        stream=True,
    )
    call_id = name = ""
    parts: list[str] = []
    async for event in stream:
        if isinstance(event, RawContentBlockStartEvent) and isinstance(event.content_block, ToolUseBlock):
            call_id, name = event.content_block.id, event.content_block.name
        elif isinstance(event, RawContentBlockDeltaEvent) and isinstance(event.delta, InputJSONDelta):
            parts.append(event.delta.partial_json)
    return call_id, name, json.loads("".join(parts))


async def bare_run() -> int:
    """The same two requests on the bare client, with the handler run in between; returns the HTTP requests made."""
    before = API.requests
    messages: list[MessageParam] = [{"role": "user", "content": PROMPT}]
    call_id, name, args = await _bare_request(messages)
    assert name == "look_up", name
    result = await look_up(Lookup(**args))
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result.text}]},
    ]
    _, name, args = await _bare_request(messages)
    assert name == "report_answer", name
    answer = Answer(**args)
    assert answer == EXPECTED, answer
    return API.requests - before


# --- timing -------------------------------------------------------------------------------------------------------

Variant = Callable[[], Awaitable[int]]


@dataclass(frozen=True)
class Spec:
    run: Variant
    requests: int
    """The model (or HTTP) requests each run must make."""
    http: bool


VARIANTS: dict[str, Spec] = {
    "replay (new Run, shared store)": Spec(replay_run, 0, http=False),
    "live, scripted model": Spec(live_scripted_run, 2, http=False),
    "agl + Claude backend, mode off": Spec(agl_off_run, 2, http=True),
    "agl + Claude backend, default": Spec(agl_default_run, 2, http=True),
    "bare anthropic client": Spec(bare_run, 2, http=True),
}


async def batch(spec: Spec, n: int) -> float:
    """Seconds for ``n`` sequential runs, each checked to make exactly its number of requests."""
    start = time.perf_counter()
    for _ in range(n):
        made = await spec.run()
        assert made == spec.requests, f"{spec.run.__name__} made {made} requests, not {spec.requests}"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2000, help="runs per round for the scripted variants")
    parser.add_argument("--http-runs", type=int, default=300, help="runs per round for the HTTP variants")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(live_scripted_run()) == 2  # record the step once, outside the timing...
        loop.run_until_complete(Run(model=SCRIPTED, store=STORE).step(ROLE, PROMPT))
        assert len(STORE.records()) == 1  # ...so every replay_run below replays it
        for spec in VARIANTS.values():
            loop.run_until_complete(batch(spec, args.warmup))
        per_run: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.repeats):
            for name, spec in VARIANTS.items():
                n = args.http_runs if spec.http else args.runs
                gc.collect()
                per_run[name].append(loop.run_until_complete(batch(spec, n)) / n)
        loop.run_until_complete(CLIENT.close())
    finally:
        loop.close()

    median = {name: statistics.median(times) * 1e6 for name, times in per_run.items()}
    print(
        f"Python {sys.version.split()[0]}, anthropic {anthropic.__version__}; one event loop; warm-up "
        f"{args.warmup}, then {args.repeats} rounds ({args.runs} runs per scripted variant, {args.http_runs} per "
        "HTTP variant), variants interleaved; median per-run time over the rounds."
    )
    print(
        "The step: request 1 calls look_up (handler runs), request 2 reports Answer. HTTP variants share one "
        "AsyncAnthropic over httpx2.MockTransport serving real-format SSE."
    )
    print()
    print(f"{'variant':<34}{'µs/run':>10}{'min µs':>10}{'max µs':>10}")
    for name, times in per_run.items():
        print(f"{name:<34}{median[name]:>10.1f}{min(times) * 1e6:>10.1f}{max(times) * 1e6:>10.1f}")
    print()
    replay, live = median["replay (new Run, shared store)"], median["live, scripted model"]
    print(
        f"replay per step: {replay:.1f} µs (target <= {REPLAY_TARGET_US:.0f} µs: "
        f"{'met' if replay <= REPLAY_TARGET_US else 'NOT met'}); live on the scripted model: {live:.1f} µs "
        f"({live / replay:.1f}x the replay)"
    )
    # The fastest rounds are the least disturbed by other work on the machine: the overhead from them too.
    fastest = {name: min(times) * 1e6 for name, times in per_run.items()}
    for name in ("agl + Claude backend, mode off", "agl + Claude backend, default"):
        for label, figures in (("median", median), ("fastest", fastest)):
            agl, bare = figures[name], figures["bare anthropic client"]
            print(
                f"{name}: framework overhead over the bare client ({label} rounds) {agl - bare:+.1f} µs per step "
                f"({agl / bare:.2f}x the bare client's {bare:.1f} µs)"
            )


if __name__ == "__main__":
    main()
