"""Client tools: the text-markup interceptor's throughput, and events per second through ``client_tools.stream()``.

1. Interceptor throughput, in MB/s of streamed text (UTF-8 bytes), through `agl_notebook.models.markup.intercept`
   (the async generator every reply passes through in `loop.model_events`), for the same amount of text in four
   shapes, each as word-sized deltas (about 6 characters, as the scripted model and Claude stream) and as 64-character
   deltas:

   - ``prose``: no ``<`` anywhere (the fast path: one substring test per delta);
   - ``code``: prose with a ``<`` every ~40 characters (``a < b``, ``<div>``), so the parser runs but finds no tag;
   - ``markup``: prose with a tool call written as text (about 120 characters of JSON) every ~2 KB;
   - ``markup-heavy``: mostly calls (one every ~250 characters).

   The baseline row is the same deltas through a bare ``async for`` (no interceptor), so the interceptor's own cost
   is the difference. Every variant is checked first: its output text and calls are those of the unsplit reply.

2. Events per second through ``stream()``: one run on a `ScriptedModel` of 4 requests (3 tool round trips, 2 client
   tools, text in every reply), consumed with ``async for``; a new ``stream()`` call per run (a new Runner and Run,
   as the module-level function does), with its recording kept in the Run's memory store (the default mode,
   ``auto``). Reported: events per second, µs per run, and the same for ``run()``.

Run: ``.venv/bin/python benchmarks/bench_client_tools.py`` (``--mb 4 --runs 500 --repeats 5`` are the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from agl_notebook import ScriptedModel
from agl_notebook.client_tools import (
    DSML_TOOL_CALL_CLOSE,
    DSML_TOOL_CALL_OPEN,
    ToolExecutionContext,
    ToolResult,
    run,
    stream,
)
from agl_notebook.events import MarkupError
from agl_notebook.models.base import ModelEvent, ModelRequest, TextDelta, ToolCall, TurnEnd
from agl_notebook.models.markup import intercept
from agl_notebook.transcript import user_text

WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "seventeen",
    "patient",
    "engineers",
    "review",
    "every",
    "streamed",
    "delta",
    "of",
    "text",
    "carefully",
)


def prose(chars: int) -> str:
    out: list[str] = []
    n = 0
    i = 0
    while n < chars:
        w = WORDS[i % len(WORDS)] + " "
        out.append(w)
        n += len(w)
        i += 1
    return "".join(out)[:chars]


def code(chars: int) -> str:
    pieces = ["if a < b: ", "<div>", " x <= y ", "<tag attr='v'> "]
    text: list[str] = []
    n = i = 0
    while n < chars:
        chunk = prose(32) + pieces[i % len(pieces)]
        text.append(chunk)
        n += len(chunk)
        i += 1
    return "".join(text)[:chars]


CALL = (
    DSML_TOOL_CALL_OPEN
    + json.dumps(
        {
            "name": "get_weather",
            "arguments": {
                "city": "Sydney",
                "units": "metric",
                "note": "a close tag </｜DSML｜tool_call> inside a string",
            },
        }
    )
    + DSML_TOOL_CALL_CLOSE
)


def with_markup(chars: int, every: int) -> tuple[str, int]:
    text: list[str] = []
    n = calls = 0
    while n < chars:
        chunk = prose(every) + CALL
        text.append(chunk)
        n += len(chunk)
        calls += 1
    return "".join(text), calls


def deltas(text: str, size: int | None) -> list[ModelEvent]:
    """``text`` as deltas: word-sized (``size=None``: each word with its trailing space) or fixed-size."""
    if size is None:
        pieces: list[str] = []
        start = 0
        for i, ch in enumerate(text):
            if ch == " ":
                pieces.append(text[start : i + 1])
                start = i + 1
        pieces.append(text[start:])
        return [TextDelta(p) for p in pieces if p]
    return [TextDelta(text[i : i + size]) for i in range(0, len(text), size)]


REQUEST = ModelRequest("m", "s", (user_text("hi"),), (), 100)


async def source(events: list[ModelEvent]) -> AsyncIterator[ModelEvent]:
    for e in events:
        yield e


async def through_interceptor(events: list[ModelEvent]) -> tuple[int, int, int]:
    """(text characters, calls, errors) out of the interceptor."""
    chars = calls = errors = 0
    async for e in intercept(source(events), REQUEST):
        if isinstance(e, TextDelta):
            chars += len(e.text)
        elif isinstance(e, ToolCall):
            calls += 1
        elif isinstance(e, MarkupError):
            errors += 1
    return chars, calls, errors


async def bare(events: list[ModelEvent]) -> tuple[int, int, int]:
    chars = 0
    async for e in source(events):
        if isinstance(e, TextDelta):
            chars += len(e.text)
    return chars, 0, 0


def timed(
    loop: asyncio.AbstractEventLoop, fn: Callable[[list[ModelEvent]], Any], events: list[ModelEvent], repeats: int
) -> float:
    """The median seconds of one pass."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        loop.run_until_complete(fn(events))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- stream() -----------------------------------------------------------------------------------------------------

AGENT = {"name": "assistant", "instructions": "Use the available tools to answer questions."}
CLIENT_TOOLS = [
    {"name": "get_weather", "description": "Get current weather for a city", "parameters": {"type": "object"}},
    {"name": "calculate", "description": "Evaluate a math expression", "parameters": {"type": "object"}},
]


async def get_weather(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(content=json.dumps({"city": args.get("city", "unknown"), "temp": 22}))


async def calculate(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(content=str(int(args["a"]) * int(args["b"])))


HANDLERS = {"get_weather": get_weather, "calculate": calculate}
MODEL = ScriptedModel(
    [
        {"text": "Let me check the weather first.", "calls": [{"name": "get_weather", "args": {"city": "Sydney"}}]},
        {"text": "Now the sum.", "calls": [{"name": "calculate", "args": {"a": 15, "b": 23}}]},
        {"text": "And Oslo.", "calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
        "It is 22 degrees in Sydney and in Oslo, and 15 * 23 = 345.",
    ]
)


async def stream_runs(n: int) -> int:
    events = 0
    for _ in range(n):
        async for _event in stream(
            AGENT,
            "Weather in Sydney and Oslo, and 15 * 23?",
            tool_handlers=HANDLERS,
            client_tools=CLIENT_TOOLS,
            model=MODEL,
        ):
            events += 1
    return events


async def run_runs(n: int) -> int:
    events = 0
    for _ in range(n):
        result = await run(
            AGENT,
            "Weather in Sydney and Oslo, and 15 * 23?",
            tool_handlers=HANDLERS,
            client_tools=CLIENT_TOOLS,
            model=MODEL,
        )
        assert result.requests == 4, result.requests
        assert not result.truncated
        events += len(result.events)
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0, help="characters of text per variant, in millions")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    chars = int(args.mb * 1_000_000)

    loop = asyncio.new_event_loop()
    try:
        markup, markup_calls = with_markup(chars, 2000)
        heavy, heavy_calls = with_markup(chars, 130)
        texts = {
            "prose": (prose(chars), 0),
            "code": (code(chars), 0),
            "markup": (markup, markup_calls),
            "markup-heavy": (heavy, heavy_calls),
        }
        print(
            f"Python {sys.version.split()[0]}. 1. Interceptor throughput: {args.mb:g}M characters per variant, "
            f"median of {args.repeats} passes, MB = 10^6 bytes of UTF-8 text streamed in."
        )
        print(
            f"{'text':<14}{'deltas':<8}{'MB':>7}{'calls':>8}{'bare MB/s':>11}{'intercepted MB/s':>18}"
            f"{'µs/delta added':>16}"
        )
        for name, (text, calls) in texts.items():
            megabytes = len(text.encode()) / 1e6
            for size in (None, 64):
                events = [*deltas(text, size), TurnEnd("end_turn")]
                # Correct first: the same text and calls as the whole reply.
                whole = loop.run_until_complete(through_interceptor([TextDelta(text), TurnEnd("end_turn")]))
                assert loop.run_until_complete(through_interceptor(events)) == whole, name
                assert whole[1:] == (calls, 0), (name, whole)
                t_bare = timed(loop, bare, events, args.repeats)
                t_int = timed(loop, through_interceptor, events, args.repeats)
                added = (t_int - t_bare) / len(events) * 1e6
                print(
                    f"{name:<14}{'words' if size is None else size:<8}{megabytes:>7.2f}{calls:>8}"
                    f"{megabytes / t_bare:>11.1f}{megabytes / t_int:>18.1f}{added:>16.2f}"
                )

        print()
        print(
            f"2. Events through stream() and run(): a 4-request run (3 round trips, 2 client tools) on a "
            f"ScriptedModel; {args.runs} runs per round, {args.repeats} rounds, median."
        )
        per_run: dict[str, list[float]] = {"stream()": [], "run()": []}
        counts: dict[str, int] = {}
        loop.run_until_complete(stream_runs(50))
        loop.run_until_complete(run_runs(50))
        for _ in range(args.repeats):
            for name, fn in (("stream()", stream_runs), ("run()", run_runs)):
                gc.collect()
                start = time.perf_counter()
                counts[name] = loop.run_until_complete(fn(args.runs))
                per_run[name].append((time.perf_counter() - start) / args.runs)
        print(f"{'api':<10}{'events/run':>11}{'µs/run':>10}{'events/s':>12}")
        for name, times in per_run.items():
            median = statistics.median(times)
            per = counts[name] / args.runs
            print(f"{name:<10}{per:>11.0f}{median * 1e6:>10.1f}{per / median:>12,.0f}")
    finally:
        loop.close()


if __name__ == "__main__":
    main()
