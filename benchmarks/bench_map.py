"""run.map over 10,000 items versus pydantic-ai's ``Agent.run`` under ``asyncio.gather`` with a semaphore.

Every item is the step of ``_step.py`` (request 1 calls ``look_up``, request 2 reports an ``Answer``) on its own
input (``"<prompt> #i"``). Side by side, each variant in a fresh child process (so CPU time and peak memory are its
own), in one run of this script:

- ``agl_notebook map``: ``await Run(model=ScriptedModel(...)).map(ROLE, inputs, concurrency=8)`` in mode auto
  (every item looked up, run live and recorded in the Run's memory store), drawn by the notebook's map view
  (`NotebookMapView`, live, on a fake display) with every widget's comm replaced by one that counts messages.
- ``agl_notebook map, replayed``: the same map again on the store the first one filled (every item replays).
- ``pydantic-ai gather``: ``Agent(TestModel(...), output_type=Answer)`` and ``await agent.run(prompt)`` per item
  under ``asyncio.gather``, at most 8 at once (``asyncio.Semaphore(8)``).

Measured per variant: CPU seconds of the process during the map (``time.process_time``) per item, wall time, the
peak resident memory growth over the process's size before the map (``ru_maxrss``), and for the agl view the widget
messages sent and their rate (messages / wall seconds). Goals (this 2-core machine): at most 1 ms of CPU an item
for agl_notebook, records and view included; at most 200 MB of peak memory growth; at most 2 widget messages a
second.

``--notebook`` also measures how much a notebook grows when a cell with that map runs through nbclient (its
records travel in the map display's output metadata while small, then in the map's sidecar file beside it).

Run: ``.venv/bin/python benchmarks/bench_map.py`` (``--items N``; ``--notebook`` adds the nbclient part).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _step import ANSWER_ARGS, EXPECTED, INSTRUCTIONS, PROMPT, ROLE, Answer, Lookup, scripted_model  # noqa: E402

CONCURRENCY = 8
GOAL_CPU_MS = 1.0
GOAL_MEMORY_MB = 200.0
GOAL_MESSAGES_PER_SECOND = 2.0


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _count_widget_messages() -> list[int]:
    """Replace every comm (so every widget's) with one that counts what it would send."""
    import comm
    from comm.base_comm import BaseComm

    counted = [0, 0]  # comm_msg, every message

    class CountingComm(BaseComm):
        def publish_msg(
            self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
        ) -> None:
            counted[1] += 1
            if msg_type == "comm_msg":
                counted[0] += 1

    comm.create_comm = lambda *a, **k: CountingComm(*a, **k)
    return counted


class _Display:
    """Stands in for IPython's display: keeps the last bundle."""

    def __init__(self) -> None:
        self.last: tuple[dict[str, Any], dict[str, Any]] | None = None

    def __call__(self, bundle: dict[str, Any], *, raw: bool, metadata: Any = None, display_id: bool = False) -> Any:
        self.last = (bundle, metadata or {})
        return self if display_id else None

    def update(self, bundle: dict[str, Any], *, raw: bool, metadata: Any = None) -> None:
        self.last = (bundle, metadata or {})


async def look_up(payload: Lookup) -> str:
    """Look a topic up."""
    return f"{payload.topic}:{payload.limit}"


def _agl(items: int, replay: bool, out: Any) -> None:
    from agl_notebook import Run
    from agl_notebook.notebook.map_view import NotebookMapView
    from agl_notebook.replay.stores import MemoryStore

    counted = _count_widget_messages()
    inputs = [f"{PROMPT} #{i}" for i in range(items)]
    model, store = scripted_model(), MemoryStore()

    async def once() -> tuple[Any, NotebookMapView, _Display]:
        display = _Display()
        view = NotebookMapView(ROLE, display=display)
        results = await Run(model=model, store=store).map(ROLE, inputs, concurrency=CONCURRENCY, view=view)
        return results, view, display

    loop = asyncio.new_event_loop()
    if replay:
        loop.run_until_complete(once())  # record them first
    calls_before, counted[0], counted[1] = model.calls, 0, 0
    rss, cpu, wall = _rss_mb(), time.process_time(), time.perf_counter()
    results, view, display = loop.run_until_complete(once())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert len(results) == items
    assert not results.failures
    assert all(r == EXPECTED for r in results)
    assert model.calls - calls_before == (0 if replay else 2 * items)
    assert display.last is not None
    bundle, metadata = display.last
    out.put(
        {
            "cpu": cpu,
            "wall": wall,
            "memory": _rss_mb() - rss,
            "messages": counted[0],
            "all_messages": counted[1],
            "redraws": view.redraws,
            "static_bytes": len(bundle["text/plain"]) + len(bundle["text/html"]),
            "metadata_bytes": len(json.dumps(metadata)),
        }
    )


def _pydantic_ai(items: int, out: Any) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agent = Agent(
        TestModel(call_tools=["look_up"], custom_output_args=ANSWER_ARGS), output_type=Answer, instructions=INSTRUCTIONS
    )
    agent.tool_plain(look_up)

    async def gather() -> list[Any]:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(i: int) -> Any:
            async with gate:
                return (await agent.run(f"{PROMPT} #{i}")).output

        return await asyncio.gather(*(one(i) for i in range(items)))

    loop = asyncio.new_event_loop()
    rss, cpu, wall = _rss_mb(), time.process_time(), time.perf_counter()
    results = loop.run_until_complete(gather())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert results == [EXPECTED] * items
    out.put({"cpu": cpu, "wall": wall, "memory": _rss_mb() - rss})


def _in_child(target: Any, *args: Any) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    process = context.Process(target=target, args=(*args, out))
    process.start()
    while True:
        try:
            found: dict[str, Any] = out.get(timeout=1)
            break
        except Exception:
            if not process.is_alive():
                raise RuntimeError(f"{target.__name__} failed (exit code {process.exitcode})") from None
    process.join()
    return found


NOTEBOOK_SETUP = """
from _step import PROMPT, ROLE, scripted_model
from agl_notebook import Run
MODEL = scripted_model()
INPUTS = [f"{PROMPT} #{i}" for i in range(ITEMS)]
"""


def _notebook_growth(items: int) -> tuple[int, int, float]:
    """(bytes before, bytes after, seconds): a notebook whose one cell maps ``items`` items, run through nbclient."""
    import nbclient
    import nbformat as typed_nbformat

    nbformat: Any = typed_nbformat  # its notebook builders and write are not annotated
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "map.ipynb"
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell(
                f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\nITEMS = {items}" + NOTEBOOK_SETUP
            ),
            nbformat.v4.new_code_cell("results = await Run(model=MODEL).map(ROLE, INPUTS)"),
        ]
        nbformat.write(nb, path)
        before = path.stat().st_size
        started = time.perf_counter()
        executed = nbclient.NotebookClient(nb, timeout=1800, resources={"metadata": {"path": folder}}).execute()
        seconds = time.perf_counter() - started
        nbformat.write(executed, path)
        return before, path.stat().st_size, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--notebook", action="store_true", help="also measure a notebook's growth through nbclient")
    args = parser.parse_args()
    n = args.items
    sys.path.insert(0, str(ROOT / "benchmarks"))
    figures = {
        "agl_notebook map": _in_child(_agl, n, False),
        "agl_notebook map, replayed": _in_child(_agl, n, True),
        "pydantic-ai gather": _in_child(_pydantic_ai, n),
    }
    print(f"Python {sys.version.split()[0]}; {n} items, concurrency {CONCURRENCY}; each variant in a fresh process.")
    print(f"{'variant':<30}{'CPU ms/item':>12}{'wall s':>9}{'peak MB':>9}{'widget msgs':>12}{'msgs/s':>8}")
    for name, f in figures.items():
        messages = f.get("messages")
        rate = f"{messages / f['wall']:.2f}" if messages is not None else "-"
        print(
            f"{name:<30}{f['cpu'] / n * 1000:>12.3f}{f['wall']:>9.2f}{f['memory']:>9.1f}"
            f"{messages if messages is not None else '-':>12}{rate:>8}"
        )
    live = figures["agl_notebook map"]
    cpu_ms = live["cpu"] / n * 1000
    rate = live["messages"] / live["wall"]
    print()
    print(
        f"CPU per item (live, records and view included): {cpu_ms:.3f} ms (goal <= {GOAL_CPU_MS} ms: "
        f"{'met' if cpu_ms <= GOAL_CPU_MS else 'NOT met'})"
    )
    print(
        f"peak memory growth: {live['memory']:.1f} MB (goal <= {GOAL_MEMORY_MB:.0f} MB: "
        f"{'met' if live['memory'] <= GOAL_MEMORY_MB else 'NOT met'})"
    )
    print(
        f"widget messages: {live['messages']} updates in {live['wall']:.2f} s = {rate:.2f}/s (goal <= "
        f"{GOAL_MESSAGES_PER_SECOND:.0f}/s: {'met' if rate <= GOAL_MESSAGES_PER_SECOND else 'NOT met'}); "
        f"{live['all_messages']} messages in all (opening and closing the widgets)"
    )
    ratio = figures["pydantic-ai gather"]["cpu"] / live["cpu"]
    print(f"pydantic-ai / agl_notebook CPU: {ratio:.2f}x")
    print(
        f"the final static view: {live['static_bytes']} bytes; its output metadata (the records): "
        f"{live['metadata_bytes']} bytes"
    )
    if args.notebook:
        before, after, seconds = _notebook_growth(n)
        grown = (after - before) / 1024
        print(
            f"notebook through nbclient: {before} -> {after} bytes (+{grown:.0f} KB) in {seconds:.1f} s (goal <= "
            f"+100 KB: {'met' if grown <= 100 else 'NOT met'}; past AGL_NOTEBOOK_SIDECAR_BYTES the records are in "
            "the map's sidecar file beside the notebook)"
        )


if __name__ == "__main__":
    main()
