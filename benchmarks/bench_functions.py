"""JSON-function agents: interpreter speed on a 1,000-iteration loop, and validation time of a 200-function agent.

1. Commands per second. One top-level call of a function whose ``loop`` goes over ``range(1000)``; each iteration
   runs a ``set`` (two expressions), an ``if`` on an expression and, on even items, a ``set`` in its branch, then a
   ``func`` call of a one-command function; then the function returns. Every command counts (the loop, each
   iteration's commands, those of the called function, the return): the count is taken from the ``command.started``
   events of one call. The call runs through the public API (``await agent.call(...)`` with a `Run` and no event
   sink), so it includes what every call pays: the tool-less unit around it, events, sandbox checks.
2. Validation. A generated agent of 200 functions (40 of them tools with typed, described arguments), each with 6 to
   9 commands and 8 to 10 expressions, calling one another in a chain (no cycle), with ``onError`` handlers whose
   reads are checked. Timed cold (the expression cache cleared, so every expression is parsed and compiled) and
   warm (the same file again). Every expression differs per function, so cold really compiles them all.

Timing: medians over rounds after warm-up. Run: ``.venv/bin/python benchmarks/bench_functions.py``
(``--rounds N`` to change the number of rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from typing import Any

from agl_notebook import Run
from agl_notebook.functions import check_agent, load_agent
from agl_notebook.functions import expressions as sandbox
from agl_notebook.functions.events import CommandStarted

LOOP_AGENT: dict[str, Any] = {
    "functions": {
        "square": {"args": {"n": {}}, "commands": {"return": "{ n * n }"}},
        "count": {
            "commands": [
                {"set": {"total": 0, "evens": 0, "squares": 0}},
                {
                    "loop": {
                        "over": "{ range(1000) }",
                        "max": 1000,
                        "do": [
                            {"set": {"total": "{ total + item }", "label": "{ f'item {item}' }"}},
                            {"if": {"condition": "{ item % 2 == 0 }", "then": [{"set": {"evens": "{ evens + 1 }"}}]}},
                            {"func": {"name": "square", "args": {"n": "{ item }"}}},
                        ],
                    }
                },
                {"return": "{ {'total': total, 'evens': evens} }"},
            ],
        },
    },
}


def big_agent(functions: int = 200) -> dict[str, Any]:
    """An agent of ``functions`` functions, every expression unique to its function."""
    out: dict[str, Any] = {}
    for i in range(functions):
        tool = i % 5 == 0
        fn: dict[str, Any] = {
            "args": {
                "orderId": {"type": "str", "description": f"The order id ({i})."},
                "limit": {"type": "int | None", "description": "At most this many.", "required": False},
            },
            "commands": [
                {"set": {"base": f"{{ (limit or {i}) + {i} }}", "tag": f"{{ f'fn{i}-{{orderId}}' }}"}},
                {"log": f"{{ f'step {i}: {{tag}} {{base}}' }}"},
                {
                    "if": {
                        "condition": f"{{ base > {i * 2} and len(tag) < 40 }}",
                        "then": [{"set": {"items": f"{{ [x * {i} for x in range(base % 7)] }}"}}],
                        "else": [{"set": {"items": "{ [] }"}}],
                    }
                },
                {
                    "loop": {
                        "over": "{ items }",
                        "as": "entry",
                        "max": 100,
                        "do": [{"set": {"last": f"{{ entry + {i} }}"}}],
                    }
                },
            ],
            "onError": [
                {"log": f"{{ f'fn{i} failed for {{orderId}}: {{exc}}' }}"},
                {"return": f"{{ {{'error': exc.type, 'fn': {i}}} }}"},
            ],
        }
        if tool:
            fn["description"] = f"Tool number {i}: looks up an order and summarises it."
        if i + 1 < functions and not tool:
            fn["commands"].append({"func": {"name": f"fn{i + 1}", "args": {"orderId": "{ tag }"}}})
        fn["commands"].append({"return": f"{{ {{'fn': {i}, 'result': result, 'items': len(items)}} }}"})
        out[f"fn{i}"] = fn
    return {"name": "big", "functions": out}


async def commands_per_second(rounds: int) -> tuple[float, int, float]:
    agent = load_agent(LOOP_AGENT)
    counted: list[Any] = []
    result = await agent.call("count", run=Run(on_event=counted.append))
    assert result == {"total": 499500, "evens": 500}, result
    commands = sum(1 for e in counted if isinstance(e, CommandStarted))
    for _ in range(3):  # warm-up
        await agent.call("count", run=Run())
    times = []
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        await agent.call("count", run=Run())
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return commands / median, commands, median


def validation_time(rounds: int) -> tuple[float, float, int, int]:
    agent = big_agent()
    assert check_agent(agent) == [], check_agent(agent)[:3]
    expressions = sum(1 for fn in agent["functions"].values() for _ in _strings(fn) if _.startswith("{"))
    cold, warm = [], []
    for _ in range(rounds):
        sandbox._CACHE.clear()
        gc.collect()
        started = time.perf_counter()
        load_agent(agent)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        load_agent(agent)
        warm.append(time.perf_counter() - started)
    return statistics.median(cold), statistics.median(warm), len(agent["functions"]), expressions


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rate, commands, seconds = asyncio.run(commands_per_second(args.rounds))
    print(
        f"interpreter: {commands:,} commands per call (a 1,000-iteration loop) in {seconds * 1000:.1f} ms "
        f"-> {rate:,.0f} commands/s"
    )
    cold, warm, functions, expressions = validation_time(args.rounds)
    print(
        f"validation: {functions} functions, {expressions:,} expressions: {cold * 1000:.1f} ms cold (every "
        f"expression compiled), {warm * 1000:.1f} ms warm"
    )
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
