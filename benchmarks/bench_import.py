"""Import cost: what ``import agl_notebook`` adds to a fresh interpreter, and which heavy modules it pulls in.

What is measured:

- wall time: ``python -c "import agl_notebook"`` versus ``python -c "pass"``, each in ~15 fresh interpreters, all
  run alternately; the cost is the difference of the medians. Budget: 150 ms.
  Measured twice: with bytecode caches (the usual case; written to a temporary ``PYTHONPYCACHEPREFIX`` during one
  unmeasured warm-up, so the repository is not touched), and with ``PYTHONDONTWRITEBYTECODE=1`` (agl_notebook compiled
  from source in every interpreter unless a ``__pycache__`` already exists, as in environments that set that variable,
  this one included). The budget applies to the cached figure.
- ``-X importtime`` (cached): the cumulative time the interpreter reports for ``agl_notebook`` (median over the same
  number of interpreters), and the modules with the largest own ("self") time in the median run.
- forbidden modules: after ``import agl_notebook``, none of anthropic, ipywidgets, nbformat, httpx2, httpx, pydantic
  may be in ``sys.modules`` (they are imported lazily, when a backend or widget is used).

Exit status: 1 when a forbidden module was imported, 2 when the cached import cost is over budget, else 0.

Run: ``.venv/bin/python benchmarks/bench_import.py`` (``--runs N`` to change the number of interpreters).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_MS = 150.0
FORBIDDEN = ("anthropic", "ipywidgets", "nbformat", "httpx2", "httpx", "pydantic")
Env = dict[str, str]


def wall_seconds(code: str, env: Env) -> float:
    """Seconds for a fresh interpreter to run ``code`` and exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def import_costs_ms(envs: list[Env], runs: int) -> list[tuple[float, float]]:
    """Per env, median milliseconds of ``pass`` and of ``import agl_notebook``; all interpreters run alternately."""
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in envs]
    for _ in range(runs):
        for env, (bare, loaded) in zip(envs, times, strict=True):
            bare.append(wall_seconds("pass", env))
            loaded.append(wall_seconds("import agl_notebook", env))
    return [(statistics.median(bare) * 1e3, statistics.median(loaded) * 1e3) for bare, loaded in times]


def importtime(env: Env) -> tuple[int, list[tuple[int, str]]]:
    """One ``-X importtime`` run: agl_notebook's cumulative µs, and (self µs, module) for every module imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import agl_notebook"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    cumulative = 0
    own: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[len("import time:") :].split("|"))
        own.append((int(self_us), name))
        if name == "agl_notebook":
            cumulative = int(cumulative_us)
    return cumulative, own


def imported_forbidden(env: Env) -> list[str]:
    """The forbidden top-level packages in ``sys.modules`` after ``import agl_notebook`` in a fresh interpreter."""
    code = (
        "import json, sys, agl_notebook; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(FORBIDDEN)!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    found: list[str] = json.loads(done.stdout)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="agl-pycache-") as prefix:
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        cached: Env = {**base, "PYTHONPYCACHEPREFIX": prefix}
        uncached: Env = {**base, "PYTHONDONTWRITEBYTECODE": "1"}  # the standard library's own caches still read
        for env in (cached, uncached):  # warm-up: caches written (cached only), files in the page cache
            wall_seconds("import agl_notebook", env)
            wall_seconds("pass", env)
        (bare_ms, loaded_ms), (bare_nc_ms, loaded_nc_ms) = import_costs_ms([cached, uncached], args.runs)
        traces = sorted((importtime(cached) for _ in range(args.runs)), key=lambda t: t[0])
        forbidden = imported_forbidden(cached)

    cost_ms = loaded_ms - bare_ms
    median_trace = traces[len(traces) // 2]
    print(f"Python {sys.version.split()[0]} ({sys.executable}); median over {args.runs} fresh interpreters each")
    print(f"{'':34}{'bytecode cached':>17}{'DONTWRITEBYTECODE':>19}")
    print(f"{'python -c pass':<34}{bare_ms:>14.1f} ms{bare_nc_ms:>16.1f} ms")
    print(f"{'python -c import agl_notebook':<34}{loaded_ms:>14.1f} ms{loaded_nc_ms:>16.1f} ms")
    print(f"{'import cost (difference)':<34}{cost_ms:>14.1f} ms{loaded_nc_ms - bare_nc_ms:>16.1f} ms")
    print(f"budget {BUDGET_MS:.0f} ms (cached): {'within' if cost_ms <= BUDGET_MS else 'OVER'}")
    print(
        f"-X importtime, agl_notebook cumulative (cached, importtime's overhead included): "
        f"{median_trace[0] / 1e3:.1f} ms; largest own times in that run:"
    )
    for self_us, name in sorted(median_trace[1], reverse=True)[:8]:
        print(f"  {self_us / 1e3:6.1f} ms  {name}")
    print(
        f"forbidden modules imported: {', '.join(forbidden) if forbidden else 'none'} (checked: {', '.join(FORBIDDEN)})"
    )
    if forbidden:
        return 1
    return 2 if cost_ms > BUDGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
