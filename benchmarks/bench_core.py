"""Core overhead: one 2-request agent run in agl_notebook versus pydantic-ai, side by side in one process.

What is measured, for each library, is one full agent run with an offline model and no I/O:

- request 1: the model calls ``look_up`` with a small frozen dataclass payload ``Lookup(topic, limit)``; the
  async handler runs and its text goes back to the model;
- request 2: the model hands back the typed result ``Answer(summary, count)`` (agl_notebook: through its
  ``reporting_tool``; pydantic-ai: through its output tool, ``output_type=Answer``).

agl_notebook runs through the public API: ``await Run(model=ScriptedModel([...])).step(role, prompt)``, with default
arguments, and a variant with an ``on_event`` sink that appends every event to a list. pydantic-ai runs
``await agent.run(prompt)`` on an ``Agent(TestModel(...), output_type=Answer)``.

Fairness: the definitions (agl_notebook's role and ScriptedModel, pydantic-ai's Agent and TestModel) are built once
and reused, as an application would. Everything that belongs to a run is done in every iteration: agl_notebook
builds a new ``Run`` per iteration (and a new event list for the sink variant); pydantic-ai's ``agent.run`` builds
its own run state. Both take the same string prompt. Each run's request count is checked to be exactly 2.

Timing: one event loop for the whole script; per variant, 200 warm-up runs, then 5 rounds of 2000 runs with the
variants interleaved within each round; the figure is the median over the rounds of (batch time / runs).

Run: ``.venv/bin/python benchmarks/bench_core.py`` (``--runs N --repeats R`` to change the sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from _step import ANSWER_ARGS, EXPECTED, INSTRUCTIONS, PROMPT, ROLE, Answer, Lookup, scripted_model
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.test import TestModel

from agl_notebook import Event, Run

TARGET_RATIO = 10.0

AGL_ROLE = ROLE
AGL_MODEL = scripted_model()


async def agl_run() -> int:
    """One run with default store and events; returns the model requests it made."""
    before = AGL_MODEL.calls
    result = await Run(model=AGL_MODEL).step(AGL_ROLE, PROMPT)
    assert result == EXPECTED, result
    return AGL_MODEL.calls - before


async def agl_run_with_events() -> int:
    """One run with an ``on_event`` sink collecting every event in a list."""
    events: list[Event] = []
    before = AGL_MODEL.calls
    result = await Run(model=AGL_MODEL, on_event=events.append).step(AGL_ROLE, PROMPT)
    assert result == EXPECTED, result
    assert events, "no events were collected"
    return AGL_MODEL.calls - before


# --- pydantic-ai --------------------------------------------------------------------------------------------------

PAI_AGENT = Agent(
    TestModel(call_tools=["look_up"], custom_output_args=ANSWER_ARGS),
    output_type=Answer,
    instructions=INSTRUCTIONS,
)


@PAI_AGENT.tool_plain
async def look_up(payload: Lookup) -> str:
    """Look a topic up."""
    return f"{payload.topic}:{payload.limit}"


async def pai_run() -> int:
    """One pydantic-ai run; returns the model requests it made (model responses in its messages)."""
    result = await PAI_AGENT.run(PROMPT)
    assert result.output == EXPECTED, result.output
    return sum(isinstance(m, ModelResponse) for m in result.all_messages())


# --- timing -------------------------------------------------------------------------------------------------------

Variant = Callable[[], Awaitable[int]]
VARIANTS: dict[str, Variant] = {
    "agl_notebook": agl_run,
    "agl_notebook + on_event": agl_run_with_events,
    "pydantic-ai": pai_run,
}


async def batch(run: Variant, n: int) -> float:
    """Seconds for ``n`` sequential runs; every run must make exactly 2 model requests."""
    start = time.perf_counter()
    for _ in range(n):
        requests = await run()
        assert requests == 2, f"{run.__name__} made {requests} model requests, not 2"
    return time.perf_counter() - start


def count_calls(loop: asyncio.AbstractEventLoop, run: Variant) -> int:
    """Python function calls made during one run (a rough measure of the work done)."""
    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        loop.run_until_complete(run())
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    loop = asyncio.new_event_loop()
    try:
        for run in VARIANTS.values():  # correctness first: 2 requests, the right typed result
            assert loop.run_until_complete(run()) == 2
            loop.run_until_complete(batch(run, args.warmup))
        calls = {name: count_calls(loop, run) for name, run in VARIANTS.items()}
        per_run: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.repeats):
            for name, run in VARIANTS.items():
                gc.collect()
                per_run[name].append(loop.run_until_complete(batch(run, args.runs)) / args.runs)
        events_per_run = len(_collect_events(loop))
    finally:
        loop.close()

    median = {name: statistics.median(times) * 1e6 for name, times in per_run.items()}
    print(
        f"Python {sys.version.split()[0]}; one event loop; warm-up {args.warmup}, then {args.repeats} rounds of "
        f"{args.runs} runs per variant, interleaved; median per-run time over the rounds."
    )
    print(
        "Per run, for both: definitions reused (agl role + ScriptedModel / pydantic-ai Agent + TestModel); a new "
        "Run (and event list) per agl run; one full 2-request run per iteration, request count asserted == 2."
    )
    print()
    print(f"{'variant':<26}{'µs/run':>10}{'min µs':>10}{'max µs':>10}{'py calls':>10}")
    for name, times in per_run.items():
        print(f"{name:<26}{median[name]:>10.1f}{min(times) * 1e6:>10.1f}{max(times) * 1e6:>10.1f}{calls[name]:>10}")
    print()
    ratio = median["pydantic-ai"] / median["agl_notebook"]
    ratio_events = median["pydantic-ai"] / median["agl_notebook + on_event"]
    print(
        f"ratio pydantic-ai / agl_notebook:            {ratio:6.1f}x  (target >= {TARGET_RATIO:.0f}x: "
        f"{'met' if ratio >= TARGET_RATIO else 'NOT met'})"
    )
    print(f"ratio pydantic-ai / agl_notebook + on_event: {ratio_events:6.1f}x")
    print(
        f"agl_notebook per-step overhead with events collected: {median['agl_notebook + on_event']:.1f} µs "
        f"({events_per_run} events per step; the sink adds "
        f"{median['agl_notebook + on_event'] - median['agl_notebook']:+.1f} µs)"
    )


def _collect_events(loop: asyncio.AbstractEventLoop) -> list[Event]:
    events: list[Event] = []
    loop.run_until_complete(Run(model=AGL_MODEL, on_event=events.append).step(AGL_ROLE, PROMPT))
    return events


if __name__ == "__main__":
    main()
