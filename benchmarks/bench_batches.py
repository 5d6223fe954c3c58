"""The Message Batches engine: CPU time per item per wave, and peak memory growth, for 10,000 steps.

The step is the three-turn role of ``tests/support/batch_steps.py`` (two look-ups, then the report; its handler
yields to the event loop 0 to 9 times, as handlers that take a while do), run on 10,000 inputs under
``asyncio.gather``, each step inside a participant of one `agl_notebook.models.batches.Batches` engine, through the
real ``anthropic`` client against the fake batch endpoints of ``tests/support/anthropic_batches.py`` (each batch ends
at its second poll, the engine's polls do not wait). Every run is checked: three batch creations of 10,000 requests
each, every step reported.

Reported:

- CPU time per item per wave for the framework: the process's CPU time for the whole map, less the fake's own (its
  request handling is timed apart: parsing create bodies, building results), divided by items x waves. It covers
  the Run, the loop, the records, the engine (requests built, encoded and digested, waves, results turned into
  events) and the SDK (request building and encoding, JSON-lines decoding). Goal: at most 1 ms.
- Peak memory growth of the framework (a second run, traced by tracemalloc): the highest memory traced outside the
  fake's handler (read as the fake is called, the peak reset as it answers) less what was traced before the map; the
  fake keeps only what a batch in flight needs. It includes the 10,000 records the Run's memory store keeps and
  everything the SDK holds (its copy of a create's requests, the encoded body). Goal: at most 300 MB. The peak
  resident growth of the first run, the fake's parsed batches included, is printed beside it.

Run: ``.venv/bin/python benchmarks/bench_batches.py`` (``--items N`` to change the size).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402

from agl_notebook.loop import LoopOutcome  # noqa: E402
from tests.support.anthropic_batches import FakeBatches  # noqa: E402
from tests.support.batch_steps import engine_for, inputs, run_batched, three_turns  # noqa: E402

WAVES = 3
CPU_GOAL_MS = 1.0
MEMORY_GOAL_MB = 300.0


def timed_fake() -> tuple[FakeBatches, list[float], list[int]]:
    """A forgetful fake; its own CPU time is added up in the first list, and the second gets, each time it is called
    (while tracemalloc traces), the peak memory traced since it last answered: the framework's, not the fake's."""
    fake = FakeBatches(three_turns, polls=1, forget=True)
    spent = [0.0]
    peaks: list[int] = []
    handle = fake.handle

    def timed(request: httpx2.Request) -> httpx2.Response:
        peaks.append(tracemalloc.get_traced_memory()[1])
        start = time.process_time()
        try:
            return handle(request)
        finally:
            spent[0] += time.process_time() - start
            tracemalloc.reset_peak()

    fake.handle = timed  # type: ignore[method-assign]
    return fake, spent, peaks


def resident() -> int:
    """The process's resident size now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_map(items: int, *, trace: bool) -> tuple[float, float, float]:
    """Run the map once: its CPU time, the fake's, and the peak memory growth in MB.

    Traced (tracemalloc), the growth is the framework's alone: the highest memory traced outside the fake's handler,
    less what was traced before. Not traced, it is the process's peak resident size less its size before, the fake
    included.
    """
    fake, spent, peaks = timed_fake()
    engine = engine_for(fake)
    queries = inputs(items)
    gc.collect()
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else resident()
    start = time.process_time()
    outcomes, _ = asyncio.run(run_batched(engine, queries))
    total = time.process_time() - start
    if trace:
        peak = max([*peaks, tracemalloc.get_traced_memory()[1]])
        tracemalloc.stop()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    assert all(isinstance(o, LoopOutcome) for o in outcomes), [o for o in outcomes if not isinstance(o, LoopOutcome)]
    assert [b.size for b in fake.creations] == [items] * WAVES, [b.size for b in fake.creations]
    return total, spent[0], (peak - before) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    args = parser.parse_args()
    items = args.items
    total, fake, resident_growth = one_map(items, trace=False)
    framework = total - fake
    per = framework / (items * WAVES) * 1e3
    _, _, memory = one_map(items, trace=True)
    print(f"{items} items, {WAVES} waves, {WAVES} batches of {items} requests")
    print(f"CPU, whole map:          {total:8.2f} s")
    print(f"CPU, the fake's own:     {fake:8.2f} s")
    print(f"CPU, the framework:      {framework:8.2f} s = {per:.3f} ms per item per wave (goal <= {CPU_GOAL_MS} ms)")
    print(f"peak memory, framework:  {memory:8.1f} MB (goal <= {MEMORY_GOAL_MB:.0f} MB)")
    print(f"peak resident, all:      {resident_growth:8.1f} MB (the fake's parsed batches included)")
    if per > CPU_GOAL_MS or memory > MEMORY_GOAL_MB:
        print("over a goal", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
