"""Old code against new, interleaved: ``python benchmarks/bench_interleaved.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]``.

Each checkout is a folder holding an ``agl_notebook`` package and ``benchmarks/_step.py`` (a ``git worktree add`` of
the old commit, and this repository). The two are run alternately, ROUNDS times each (default 8), each run in a
fresh interpreter that measures the CPU time of a live step (mode ``off``, a new `Run` per step) and of a replayed
one, as medians of 5 rounds of 1,000 steps; and the cost of ``import agl_notebook``, two ways. "import" is what a
person waits for (`bench_import`'s figure): the wall time of the statement in a fresh interpreter with bytecode
cached, the median of 5 interpreters per run. "import, -X importtime" is the interpreter's own cumulative figure,
which adds a profiler's cost to every module imported and so weighs a package of more, smaller modules more. Medians
of the runs are printed with the change. Interleaving spreads this machine's drift (it is noisy) over both sides.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

MEASURE = """
import asyncio, statistics, sys, time
root = sys.argv[1]
sys.path[:0] = [root, root + "/benchmarks"]
import agl_notebook
assert agl_notebook.__file__.startswith(root), agl_notebook.__file__
from agl_notebook import Run
from agl_notebook.replay.stores import MemoryStore
import _step as S

async def main():
    model, store = S.scripted_model(), MemoryStore()
    await Run(model=model, store=store).step(S.ROLE, S.PROMPT)
    live, replay = [], []
    for _ in range(5):
        t = time.process_time()
        for _ in range(1000):
            await Run(model=model, mode="off").step(S.ROLE, S.PROMPT)
        live.append((time.process_time() - t) * 1000)
        t = time.process_time()
        for _ in range(1000):
            await Run(model=model, store=store, mode="replay").step(S.ROLE, S.PROMPT)
        replay.append((time.process_time() - t) * 1000)
    print(statistics.median(live), statistics.median(replay))

asyncio.run(main())
"""


IMPORT = "import time; t = time.perf_counter(); import agl_notebook; print(time.perf_counter() - t)"


def python(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter on ``root`` with only ``PYTHONPATH`` set (bytecode written and reused in the checkout)."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        timeout=600,
        env={"PYTHONPATH": str(root)},
    )


def run_once(root: Path) -> tuple[float, float, float, float]:
    """Live µs, replay µs, import ms and ``-X importtime`` ms of fresh interpreters on ``root``."""
    live, replay = map(float, python(root, "-c", MEASURE, str(root)).stdout.split())
    importtime = python(root, "-X", "importtime", "-c", "import agl_notebook").stderr
    cumulative_us = int(importtime.strip().splitlines()[-1].split("|")[1])
    walls = [float(python(root, "-c", IMPORT).stdout) for _ in range(5)]
    return live, replay, statistics.median(walls) * 1000, cumulative_us / 1000


def main() -> int:
    """Run both sides alternately and print the medians."""
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    results: dict[Path, list[tuple[float, float, float, float]]] = {old: [], new: []}
    for _ in range(rounds):
        for side in (old, new):
            results[side].append(run_once(side))
    names = ("live step (CPU µs)", "replayed step (CPU µs)", "import (ms)", "import, -X importtime (ms)")
    for i, name in enumerate(names):
        before = statistics.median(r[i] for r in results[old])
        after = statistics.median(r[i] for r in results[new])
        print(f"{name:26} old {before:8.1f}  new {after:8.1f}  change {100 * (after / before - 1):+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
