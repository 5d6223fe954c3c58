"""The statistics of a 10,000-input comparison of two variants: what the cell pays to show them.

Two variants scored right (1) or wrong (0) on 10,000 inputs (accuracies 0.70 and 0.75, drawn from a fixed seed),
as `run.compare` hands them to its `Comparison`: timed is everything the cell's display computes from the scores,
the two means with their 95% intervals, the paired difference with its interval and the sentence, each a bootstrap
of `agl_notebook.run._stats.RESAMPLES` resamples (``Comparison._repr_mimebundle_``, text and HTML). Each repeat
builds a fresh `Comparison` (its numbers are cached per object). Also timed: the same with ``epochs=3`` (each
input's score the mean of three repeats, so seven distinct paired differences, not three), and a map's interval
over 10,000 scores.

Measured: CPU seconds (``time.process_time``) and wall seconds, the best and the median of ``--repeats`` runs, in
this one process. Goal: under 200 ms in the cell for the two-variant comparison.

Run: ``.venv/bin/python benchmarks/bench_stats.py`` (``--inputs N``, ``--repeats R``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agl_notebook.run._compare import Comparison, VariantResults  # noqa: E402
from agl_notebook.run._stats import RESAMPLES, input_scores, mean_interval  # noqa: E402

GOAL_SECONDS = 0.200


def scores(n: int, accuracy: float, rng: random.Random, epochs: int = 1) -> list[float | None]:
    repeats = [[1.0 if rng.random() < accuracy else 0.0 for _ in range(epochs)] for _ in range(n)]
    return input_scores(repeats)


def comparison(a: list[float | None], b: list[float | None]) -> Comparison:
    n = len(a)
    empty: list[None] = [None] * n
    return Comparison(
        [f"input {i}" for i in range(n)],
        [VariantResults("A", empty, empty, a), VariantResults("B", empty, empty, b)],
    )


def timed(label: str, work: object, repeats: int) -> float:
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        work()  # type: ignore[operator]
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    print(
        f"{label:58s} CPU best {min(cpu) * 1000:6.1f} ms, median {statistics.median(cpu) * 1000:6.1f} ms; "
        f"wall best {min(wall) * 1000:6.1f} ms, median {statistics.median(wall) * 1000:6.1f} ms"
    )
    return statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n = args.inputs
    rng = random.Random(2026)
    a, b = scores(n, 0.70, rng), scores(n, 0.75, rng)
    a3, b3 = scores(n, 0.70, rng, 3), scores(n, 0.75, rng, 3)
    print(f"{n:,} inputs, two variants, {RESAMPLES} resamples per interval")

    def shown(x: list[float | None], y: list[float | None]) -> None:
        grid = comparison(x, y)
        grid._repr_mimebundle_()

    median = timed("compare, shown (2 means, 1 difference, the sentence)", lambda: shown(a, b), args.repeats)
    timed("compare with epochs=3, shown", lambda: shown(a3, b3), args.repeats)
    timed("one map's mean score with its interval", lambda: mean_interval(a), args.repeats)
    print(comparison(a, b).sentences[0])
    verdict = "met" if median < GOAL_SECONDS else "NOT met"
    print(f"goal: under {GOAL_SECONDS * 1000:.0f} ms of CPU for the two-variant comparison: {verdict}")


if __name__ == "__main__":
    main()
