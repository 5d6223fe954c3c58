"""The framework's overhead per request of a thinking step against a plain step's, on the same local wire.

The step is the one of ``bench_core.py`` (request 1 calls ``look_up``, request 2 reports ``Answer``), run through
the real ``anthropic`` client against a local fake of the Messages API served by **another process** (so its work is
not counted) over real HTTP on 127.0.0.1. Two clients share that server; the thinking one marks its requests with a
header, and the server answers them with thinking before each tool call: request 1 a thinking block (its text in
``thinking_delta`` pieces, then a ``signature_delta``) and a redacted thinking block, request 2 a thinking block,
each before the same ``tool_use`` block the plain step gets. The thinking step's role sets
``thinking=Thinking.adaptive()`` and ``effort="high"``, so its blocks are kept and sent back in request 2.

Variants, interleaved within every round:

- ``agl plain`` / ``agl thinking``: ``await Run(model=backend, mode=MODE).step(role, prompt)`` (``--mode``: ``off``
  records nothing, ``auto`` records and scrubs as a notebook does);
- ``bare plain`` / ``bare thinking``: the same two streamed ``client.messages.create`` requests written as a
  hand-written loop would (the thinking one keeps the thinking blocks and sends them back), the handler awaited.

The framework's overhead is agl minus bare, per request (a step makes 2), taken within each round from batches run
back to back; the figure is the ratio of the medians over the rounds, thinking over plain. Time is the client
process's CPU time (``time.process_time``), so the server and the wait for it count for nothing.
Goal: the thinking step's overhead within 5% of the plain step's.

Run: ``.venv/bin/python benchmarks/bench_thinking.py`` (``--runs N --repeats R --mode off|auto``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from typing import Any

import anthropic
from _step import EXPECTED, PROMPT, ROLE, Answer, Lookup, look_up

from agl_notebook import Claude, Run, Thinking
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.run import system_text

GOAL = 1.05
VARIANT_HEADER = "x-bench-variant"
THINKING_ROLE = dataclasses.replace(ROLE, thinking=Thinking.adaptive(), effort="high")

# --- the fake Messages API, in its own process ---------------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _thinking(index: int, pieces: list[str], signature: str) -> list[dict[str, Any]]:
    empty = {"type": "thinking", "thinking": "", "signature": ""}
    return [
        {"type": "content_block_start", "index": index, "content_block": empty},
        *(
            {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}}
            for p in pieces
        ),
        {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}},
        {"type": "content_block_stop", "index": index},
    ]  # fmt: skip


def _redacted(index: int, data: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "redacted_thinking", "data": data}},
        {"type": "content_block_stop", "index": index},
    ]


def _reply(call_id: str, name: str, pieces: list[str], before: list[dict[str, Any]]) -> bytes:
    """A real-format streamed reply: the blocks ``before`` (thinking), then one tool_use whose input is ``pieces``."""
    index = sum(1 for e in before if e["type"] == "content_block_start")
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
                    "usage": {"input_tokens": 120, "output_tokens": 1},
                },
            },
            *before,
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
            *(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                }
                for p in pieces
            ),
            {"type": "content_block_stop", "index": index},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 24},
            },
            {"type": "message_stop"},
        ]
    )


LOOK_UP = ("toolu_01", "look_up", ["", '{"topic": ', '"a", "lim', 'it": 0}'])
REPORT = ("toolu_02", "report_answer", ["", '{"summary": "do', 'ne", "count": 1}'])
THOUGHT_1 = ["The user wants ", "retries looked up; ", "call look_up ", "with topic a."]
THOUGHT_2 = ["One result came back; ", "report it."]
REPLIES = {
    ("plain", False): _reply(*LOOK_UP, []),
    ("plain", True): _reply(*REPORT, []),
    ("thinking", False): _reply(
        *LOOK_UP, [*_thinking(0, THOUGHT_1, "c2lnbmF0dXJlLW9uZQ=="), *_redacted(1, "ZW5jcnlwdGVkLXRoaW5raW5n")]
    ),
    ("thinking", True): _reply(*REPORT, _thinking(0, THOUGHT_2, "c2lnbmF0dXJlLXR3bw==")),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's pooled connection is reused, as against the real API

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        variant = "thinking" if self.headers.get(VARIANT_HEADER) == "thinking" else "plain"
        reply = REPLIES[(variant, b'"tool_result"' in body)]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("request-id", "req_bench")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(ready: Connection) -> None:
    """The server process: answer until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ready.send(server.server_address[1])
    server.serve_forever()


# --- the client side -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Side:
    """One variant's client, backend and role, and the HTTP requests it has made."""

    client: anthropic.AsyncAnthropic
    backend: AnthropicModel
    thinking: bool
    requests: int = 0


def side(url: str, thinking: bool) -> Side:
    client = anthropic.AsyncAnthropic(
        api_key="-".join(["bench", "key", "not", "real"]),
        base_url=url,
        max_retries=0,
        default_headers={VARIANT_HEADER: "thinking" if thinking else "plain"},
    )
    return Side(client, AnthropicModel(client=client, model=Claude.OPUS), thinking)


async def agl_run(s: Side, mode: str) -> None:
    role = THINKING_ROLE if s.thinking else ROLE
    result = await Run(model=s.backend, mode=mode).step(role, PROMPT)  # type: ignore[arg-type]
    assert result == EXPECTED, result


BARE_SYSTEM = [{"type": "text", "text": system_text(ROLE), "cache_control": {"type": "ephemeral"}}]
BARE_TOOLS: list[dict[str, Any]] = [
    {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)} for t in ROLE.tools
]
BARE_TOOLS[-1]["cache_control"] = {"type": "ephemeral"}


async def _bare_request(s: Side, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One streamed request: the reply's blocks to send back (thinking kept whole) and the tool call's input."""
    extra: dict[str, Any] = (
        {"thinking": {"type": "adaptive", "display": "summarized"}, "extra_body": {"output_config": {"effort": "high"}}}
        if s.thinking
        else {}
    )
    stream: Any = await s.client.messages.create(
        model=Claude.OPUS.value,
        max_tokens=4096,
        system=BARE_SYSTEM,  # type: ignore[arg-type]
        tools=BARE_TOOLS,  # type: ignore[arg-type]
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        **extra,
    )
    blocks: list[dict[str, Any]] = []
    thought: list[str] = []
    parts: list[str] = []
    event: Any
    async for event in stream:
        if event.type == "content_block_start":
            blocks.append(event.content_block.model_dump(exclude_none=True))
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "input_json_delta":
                parts.append(delta.partial_json)
            elif delta.type == "thinking_delta":
                thought.append(delta.thinking)
            elif delta.type == "signature_delta":
                blocks[-1]["thinking"], blocks[-1]["signature"] = "".join(thought), delta.signature
                thought.clear()
    args = json.loads("".join(parts))
    blocks[-1]["input"] = args
    return blocks, args


async def bare_run(s: Side, mode: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    blocks, args = await _bare_request(s, messages)
    call_id = blocks[-1]["id"]
    result = await look_up(Lookup(**args))
    messages += [
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result.text}]},
    ]
    _, args = await _bare_request(s, messages)
    assert Answer(**args) == EXPECTED


Variant = Callable[[Side, str], Awaitable[None]]


async def batch(run: Variant, s: Side, mode: str, n: int) -> float:
    """CPU seconds for ``n`` sequential runs."""
    start = time.process_time()
    for _ in range(n):
        await run(s, mode)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--runs", type=int, default=25, help="runs per variant per round")
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--mode", choices=("off", "auto"), default="off")
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    server = ctx.Process(target=serve, args=(theirs,), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{mine.recv()}"
        results = asyncio.run(measure(url, args.mode, args.warmup, args.runs, args.repeats))
    finally:
        server.terminate()
        server.join()
    report(results, args)


async def measure(url: str, mode: str, warmup: int, runs: int, repeats: int) -> dict[str, list[float]]:
    plain, thinking = side(url, thinking=False), side(url, thinking=True)
    variants: dict[str, tuple[Variant, Side]] = {
        "agl plain": (agl_run, plain),
        "agl thinking": (agl_run, thinking),
        "bare plain": (bare_run, plain),
        "bare thinking": (bare_run, thinking),
    }
    await check_thinking_is_sent_back(thinking, mode)
    for run, s in variants.values():
        await batch(run, s, mode, warmup)
    per_run: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, (run, s) in variants.items():
            gc.collect()
            per_run[name].append(await batch(run, s, mode, runs) / runs)
    await plain.client.close()
    await thinking.client.close()
    return per_run


async def check_thinking_is_sent_back(s: Side, mode: str) -> None:
    """The thinking step really streams thinking and (with a backend that keeps it) sends it back in request 2."""
    sent: list[bytes] = []
    original = s.client._client.send

    async def spy(request: Any, **kwargs: Any) -> Any:
        sent.append(request.content)
        return await original(request, **kwargs)

    s.client._client.send = spy  # type: ignore[method-assign]
    try:
        await agl_run(s, mode)
    finally:
        s.client._client.send = original  # type: ignore[method-assign]
    assert len(sent) == 2, len(sent)
    second = json.loads(sent[1])
    kept = [b["type"] for b in second["messages"][1]["content"]]
    print(f"request 2 of the thinking step sends back the blocks {kept}")
    if "thinking" not in kept:
        print("  (this backend drops thinking blocks: the thinking step's figure does not cover keeping them)")


def report(per_run: dict[str, list[float]], args: argparse.Namespace) -> None:
    median = {name: statistics.median(times) * 1e6 for name, times in per_run.items()}
    print(
        f"Python {sys.version.split()[0]}, anthropic {anthropic.__version__}; mode {args.mode!r}; fake Messages API in "
        f"its own process on 127.0.0.1; warm-up {args.warmup}, then {args.repeats} rounds of {args.runs} runs per "
        "variant, interleaved; client-process CPU time, median per run over the rounds."
    )
    print(f"{'variant':<16}{'CPU µs/step':>12}{'min':>10}{'max':>10}")
    for name, times in per_run.items():
        print(f"{name:<16}{median[name]:>12.1f}{min(times) * 1e6:>10.1f}{max(times) * 1e6:>10.1f}")
    # The overhead is a small difference of two large figures (most of a step's CPU is the SDK's HTTP and SSE work),
    # so it is taken within each round, from batches run back to back, where the machine's load is most alike.
    overheads: dict[str, list[float]] = {"plain": [], "thinking": []}
    for kind in overheads:
        agl, bare = per_run[f"agl {kind}"], per_run[f"bare {kind}"]
        overheads[kind] = [(a - b) * 1e6 / 2 for a, b in zip(agl, bare, strict=True)]
    plain, thinking = (statistics.median(overheads[k]) for k in ("plain", "thinking"))
    spread = {k: statistics.quantiles(v, n=4) if len(v) > 1 else v for k, v in overheads.items()}
    ratio = thinking / plain
    print(
        f"framework overhead per request, median of the rounds' own (agl - bare) / 2: plain {plain:.1f} µs "
        f"(quartiles {spread['plain'][0]:.0f}..{spread['plain'][-1]:.0f}), thinking {thinking:.1f} µs (quartiles "
        f"{spread['thinking'][0]:.0f}..{spread['thinking'][-1]:.0f}); ratio {ratio:.3f} (goal <= {GOAL:.2f}: "
        f"{'met' if ratio <= GOAL else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
