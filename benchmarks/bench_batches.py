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
  the Run, the loop, the records, the engine (requests built, encoded and digested, the create body joined, waves,
  results lines read as JSON and turned into events) and the SDK (its requests, retries and streams). Goal: at most
  1 ms.
- Peak memory growth of the framework (a second run, traced by tracemalloc): the highest memory traced outside the
  fake's handler (read as the fake is called, the peak reset as it answers) less what was traced before the map; the
  fake keeps only what a batch in flight needs. It includes the 10,000 records the Run's memory store keeps and
  everything the SDK holds (its copy of a create's requests, the encoded body). Goal: at most 300 MB. The peak
  resident growth of the first run, the fake's parsed batches included, is printed beside it.

With ``--map`` the same inputs run as ``run.map(role, inputs, engine=Batches(...))`` in a notebook's store (outside a
kernel: a notebook file in a temporary folder, the map's sidecar beside it, its headless view's final display
captured): the map's own work (every item's plan before the first wave, the first wave's estimate, the engine's
state written to the sidecar as each batch is created and ends) is counted too, and the notebook's growth (the
display and its records block, which names the sidecar) and the sidecar's size are printed.

With ``--map`` the map also runs inside a real kernel (ipykernel, started through jupyter_client as a frontend
does, the cell sent as a person's JupyterLab sends it: the map's live widget view drawn, its messages read by this
process): the kernel process's CPU time for the map, less the fake's own (the fake runs inside the kernel, timed
apart as above), per item per wave, printed beside the plain process's, with their ratio. Goal: at most 1 ms in the
kernel too. ``--profile FILE`` writes cProfile's statistics of the map inside the kernel to FILE (read them with
``python -m pstats FILE``), so the kernel's side can be told apart.

Run: ``.venv/bin/python benchmarks/bench_batches.py`` (``--items N`` to change the size, ``--map``, ``--profile``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402

from agl_notebook import Run  # noqa: E402
from agl_notebook.loop import LoopOutcome  # noqa: E402
from agl_notebook.models.batches import Batches  # noqa: E402
from agl_notebook.notebook.map_view import NotebookMapView  # noqa: E402
from agl_notebook.notebook.store import NotebookStore  # noqa: E402
from tests.support.anthropic_batches import FakeBatches  # noqa: E402
from tests.support.batch_steps import RESEARCHER, engine_for, inputs, run_batched, three_turns  # noqa: E402
from tests.support.steps import Query  # noqa: E402
from tests.support.widgets import FakeDisplay  # noqa: E402

WAVES = 3
SIZES: dict[str, int] = {}
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
        # No garbage collection inside the fake's time: a collection its allocations set off walks the framework's
        # objects, and taken out with the fake's time it would hide part of the framework's cost (the next
        # collection, in the framework's time, counts it whole).
        collecting = gc.isenabled()
        gc.disable()
        start = time.process_time()
        try:
            return handle(request)
        finally:
            spent[0] += time.process_time() - start
            if collecting:
                gc.enable()
            tracemalloc.reset_peak()

    fake.handle = timed  # type: ignore[method-assign]
    return fake, spent, peaks


def resident() -> int:
    """The process's resident size now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def through_map(engine: Batches, queries: list[Query], folder: Path) -> tuple[int, int, int]:
    """The inputs as one batch map in a notebook's store: its failures, the notebook's growth, the sidecar's size."""
    notebook = folder / "bench.ipynb"
    notebook.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}', encoding="utf-8")
    display = FakeDisplay()
    run = Run(store=NotebookStore(locate=lambda: notebook))
    view = NotebookMapView(RESEARCHER, display=display, live=False)
    results = asyncio.run(run.map(RESEARCHER, queries, engine=engine, view=view))
    ((bundle, metadata),) = display.shown
    growth = len(json.dumps({"data": bundle, "metadata": metadata}, ensure_ascii=False).encode("utf-8"))
    return len(results.failures), growth, (folder / "researcher.agl.jsonl").stat().st_size


async def in_kernel(items: int, folder: str, profile: str | None = None) -> dict[str, float | int]:
    """Inside a kernel (called by the cell `kernel_map` sends): the map as a person's cell runs it, timed.

    The Run is made in the kernel, so the map's view is the kernel's live widget view; its store is the notebook
    file in ``folder`` (a notebook's store located as a kernel started by JupyterLab would locate it).
    """
    fake, spent, _ = timed_fake()
    engine = engine_for(fake)
    queries = inputs(items)
    notebook = Path(folder) / "bench.ipynb"
    notebook.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}', encoding="utf-8")
    run = Run(store=NotebookStore(locate=lambda: notebook))
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    gc.collect()
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    results = await run.map(RESEARCHER, queries, engine=engine)
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    total = time.process_time() - start
    assert not results.failures, f"{len(results.failures)} items failed"
    assert [b.size for b in fake.creations] == [items] * WAVES, [b.size for b in fake.creations]
    return {"total": total, "fake": spent[0], "sidecar": (Path(folder) / "researcher.agl.jsonl").stat().st_size}


def kernel_map(items: int, profile: str | None) -> tuple[float, float, int]:
    """The map in a real kernel (jupyter_client): the kernel's CPU for it, the fake's, and the sidecar's size."""
    from tests.support.kernel_harness import Kernel

    with tempfile.TemporaryDirectory() as folder:
        kernel = Kernel(
            cwd=Path(folder), env={"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        )
        try:
            code = (
                f"import json, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                "from benchmarks.bench_batches import in_kernel\n"
                f"measured = await in_kernel({items}, {folder!r}, {profile!r})\n"
                "print('MEASURED', json.dumps(measured))\n"
            )
            msg_id = kernel.execute(code, cell_id="bench-cell")
            reply = kernel.wait_reply(msg_id, timeout=3600)["content"]
            out = kernel.stream(msg_id)
            assert reply["status"] == "ok", f"{reply.get('ename')}: {reply.get('evalue')}\n{out}"
        finally:
            kernel.close()
    measured = json.loads(out.split("MEASURED", 1)[1])
    return measured["total"], measured["fake"], measured["sidecar"]


def one_map(items: int, *, trace: bool, via_map: bool = False) -> tuple[float, float, float]:
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
    failed = 0
    if via_map:
        with tempfile.TemporaryDirectory() as folder:
            failed, growth, sidecar = through_map(engine, queries, Path(folder))
        SIZES.update(notebook=growth, sidecar=sidecar)
    else:
        outcomes = asyncio.run(run_batched(engine, queries))[0]
        failed = sum(not isinstance(o, LoopOutcome) for o in outcomes)
    total = time.process_time() - start
    if trace:
        peak = max([*peaks, tracemalloc.get_traced_memory()[1]])
        tracemalloc.stop()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    assert failed == 0, f"{failed} items failed"
    assert [b.size for b in fake.creations] == [items] * WAVES, [b.size for b in fake.creations]
    return total, spent[0], (peak - before) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--map", action="store_true", help="through run.map(..., engine=...) in a notebook's store")
    parser.add_argument("--profile", help="with --map: write cProfile's statistics of the map in the kernel here")
    parser.add_argument("--kernel-only", action="store_true", help="with --map: only the run in a kernel")
    args = parser.parse_args()
    items = args.items
    if args.map:
        k_total, k_fake, k_sidecar = kernel_map(items, str(Path(args.profile).resolve()) if args.profile else None)
        k_per = (k_total - k_fake) / (items * WAVES) * 1e3
        print(
            f"in a kernel: CPU {k_total:.2f} s, the fake's own {k_fake:.2f} s, the framework {k_total - k_fake:.2f} s"
        )
        print(f"in a kernel: {k_per:.3f} ms per item per wave (goal <= {CPU_GOAL_MS} ms)")
        print(f"in a kernel: sidecar {k_sidecar / 1e6:.1f} MB")
        if args.kernel_only:
            sys.exit(1 if k_per > CPU_GOAL_MS else 0)
    total, fake, resident_growth = one_map(items, trace=False, via_map=args.map)
    framework = total - fake
    per = framework / (items * WAVES) * 1e3
    _, _, memory = one_map(items, trace=True, via_map=args.map)
    how = "run.map in a notebook's store" if args.map else "steps under asyncio.gather"
    print(f"{items} items, {WAVES} waves, {WAVES} batches of {items} requests ({how})")
    if args.map:
        print(f"notebook growth:         {SIZES['notebook'] / 1e3:8.1f} KB (goal <= 100 KB)")
        print(f"sidecar:                 {SIZES['sidecar'] / 1e6:8.1f} MB (records and engine states)")
    print(f"CPU, whole map:          {total:8.2f} s")
    print(f"CPU, the fake's own:     {fake:8.2f} s")
    print(f"CPU, the framework:      {framework:8.2f} s = {per:.3f} ms per item per wave (goal <= {CPU_GOAL_MS} ms)")
    print(f"peak memory, framework:  {memory:8.1f} MB (goal <= {MEMORY_GOAL_MB:.0f} MB)")
    print(f"peak resident, all:      {resident_growth:8.1f} MB (the fake's parsed batches included)")
    if args.map:
        kernel_framework = k_total - k_fake
        print(f"CPU, in a kernel:        {kernel_framework:8.2f} s = {k_per:.3f} ms per item per wave (goal <= 1 ms)")
        print(f"kernel / plain process:  {k_per / per:8.2f}")
        per = max(per, k_per)
    if per > CPU_GOAL_MS or memory > MEMORY_GOAL_MB:
        print("over a goal", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
