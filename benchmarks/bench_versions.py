"""What versions cost (docs/iterating.md), each beside its anchor in one run, as a ratio.

1. A live step (scripted model, the step of ``_step.py``) whose store holds 20 records, its previous version among
   them: with versions (its contents kept, its previous version found, its change made) against the same step with
   ``with_versions`` switched off (what a live step did before). Target: at most 5% more framework time. 1b: the
   same step through the real anthropic client over bench_replay.py's in-process transport (two HTTP requests, SSE
   parsed by the SDK), where the framework's time is what a live step really costs without the network. 1c: the
   same step in a store kept across steps (a notebook's, or a reused Run's: its index made once), of 20 and of 1,000
   records, its own record scrubbed but not kept so that every step runs live; 1 makes a new store per step, so
   each step also makes the store's index (what a store's first live step pays). 1n: a new `Run` per step over a
   new `NotebookStore` of a saved notebook holding the 20 records, as a notebook's every cell makes one: the file as
   read and its index are the kernel's, so a later cell's store makes neither again.
2. A replayed step (the same store): with versions against without (the engine handing the record to the step and
   the view reading its change). Target: no more time (within the noise).
3. Pairing a 10,000-item map with its previous run: the index built from 10,000 previous records, 10,000 lookups,
   and 10,000 change summaries. Target: pairing (index and lookups) under 1 s. Beside it, what the change adds to
   each item's record, in bytes (the map's notebook-growth bound counts the record's bytes, change included).
4. The growth of a notebook whose 50 steps share one 20 KB system text: the records block without contents (before
   versions), with contents kept once (now), and with contents kept in every record (without deduplication).

Timing: one event loop; the variants interleaved within each round; the median over rounds of (batch time / runs),
the fastest round beside it.

Run: ``.venv/bin/python benchmarks/bench_versions.py`` (``--runs N --repeats R``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import dataclasses
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _step import EXPECTED, PROMPT, ROLE, scripted_model

from agl_notebook import Role, Run
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay import MemoryStore
from agl_notebook.replay.records import StepRecord, block_to_json
from agl_notebook.replay.stores import scrubbed
from agl_notebook.replay.versions import ContentIndex, VersionIndex, change_summary
from agl_notebook.run import _engine

SCRIPTED = scripted_model()
EDITED = dataclasses.replace(ROLE, instructions=ROLE.instructions + "\nBe brief.")


def _seed_records() -> list[StepRecord]:
    """20 records of a notebook: the step's previous version (before the edit) and 19 others."""
    store = MemoryStore()

    async def record() -> None:
        await Run(model=SCRIPTED, store=store).step(ROLE, PROMPT)
        for i in range(19):
            other = dataclasses.replace(ROLE, name=f"other{i}")
            await Run(model=SCRIPTED, store=store).step(other, PROMPT)

    asyncio.run(record())
    return list(store.records())


SEED = _seed_records()
REPLAY_STORE = MemoryStore(SEED)
_ORIGINAL = _engine.with_versions
_TELL = _engine._tell_kept


def versions(on: bool) -> None:
    _engine.with_versions = _ORIGINAL if on else (lambda record, mode, context: record)
    _engine._tell_kept = _TELL if on else (lambda unit, record: None)


async def live_step(on: bool) -> None:
    versions(on)
    store = MemoryStore(SEED)  # the notebook's records, read (not kept again)
    result = await Run(model=SCRIPTED, store=store).step(EDITED, PROMPT)
    assert result == EXPECTED
    kept = store.records()[-1]
    assert (kept.change is not None) == on


class _ReadOnlyStore(MemoryStore):
    """A notebook's records kept across steps (its index made once), a step's own record scrubbed but not kept."""

    def put(self, record: StepRecord) -> StepRecord:
        return scrubbed(record)


def _kept_store(records: int) -> _ReadOnlyStore:
    others = [dataclasses.replace(r, id=f"{i:032x}", occurrence=i + 1, contents={}) for i, r in enumerate(SEED)]
    filler = [others[i % len(others)] for i in range(records - len(SEED))]
    filler = [dataclasses.replace(r, id=f"f{i:031x}", occurrence=100 + i) for i, r in enumerate(filler)]
    return _ReadOnlyStore([*SEED, *filler])


KEPT_STORES = {20: _kept_store(20), 1000: _kept_store(1000)}


async def live_step_kept_store(on: bool, records: int) -> None:
    """The live step of 1 in a store kept across steps (a notebook's): ``records`` records, its previous among them."""
    versions(on)
    assert await Run(model=SCRIPTED, store=KEPT_STORES[records]).step(EDITED, PROMPT) == EXPECTED


class _ReadOnlyNotebookStore(NotebookStore):
    """A notebook's store, its step's own record scrubbed but not kept (so that every step runs live)."""

    def put(self, record: StepRecord, *, older: StepRecord | None = None) -> StepRecord:
        return scrubbed(record)


def _saved_notebook() -> Path:
    """A saved notebook holding the 20 records, in a folder of its own (removed when the benchmark ends)."""
    folder = Path(tempfile.mkdtemp(prefix="bench_versions_"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "versions.ipynb"
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"agl_notebook": block_to_json(SEED)}}
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


NOTEBOOK = _saved_notebook()


async def live_step_new_notebook_store(on: bool) -> None:
    """The live step of 1 by a new `Run` over a new notebook store, as a notebook's every cell makes one."""
    versions(on)
    store = _ReadOnlyNotebookStore(locate=lambda: NOTEBOOK)
    assert await Run(model=SCRIPTED, store=store).step(EDITED, PROMPT) == EXPECTED


async def live_http_step(on: bool) -> None:
    """The same live step through the real anthropic client over an in-process transport (bench_replay.py's)."""
    from bench_replay import BACKEND

    versions(on)
    store = MemoryStore(SEED)
    assert await Run(model=BACKEND, store=store).step(EDITED, PROMPT) == EXPECTED
    assert (store.records()[-1].change is not None) == on


async def replayed_step(on: bool) -> None:
    versions(on)
    before = SCRIPTED.calls
    assert await Run(model=SCRIPTED, store=REPLAY_STORE).step(ROLE, PROMPT) == EXPECTED
    assert SCRIPTED.calls == before


async def timed(variants: dict[str, Callable[[], Awaitable[None]]], runs: int, repeats: int) -> dict[str, list[float]]:
    for run in variants.values():
        for _ in range(20):
            await run()
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            started = time.perf_counter()
            for _ in range(runs):
                await run()
            rounds[name].append((time.perf_counter() - started) / runs * 1e6)
    versions(True)
    return rounds


def report(title: str, rounds: dict[str, list[float]], new: str, old: str, target: str) -> None:
    print(title)
    for name, times in rounds.items():
        print(f"  {name:34} median {statistics.median(times):8.1f} µs   fastest {min(times):8.1f} µs")
    ratio = statistics.median(rounds[new]) / statistics.median(rounds[old])
    fastest = min(rounds[new]) / min(rounds[old])
    print(f"  ratio {new} / {old}: {ratio:.3f} (fastest rounds {fastest:.3f}); target {target}")


def pairing(items: int) -> None:
    previous = [
        StepRecord(
            id=f"{i:032x}",
            parts={"role": "r", "instructions": "a", "input": f"in{i:05d}"},
            occurrence=0,
            role="labeller",
            backend="scripted:x",
            input={"text": f"review {i}"},
            result={"sentiment": "positive", "reason": f"The review is positive overall: review {i}"},
            transcript=(),
            contents={"instructions": "Say positive or negative."} if i == 0 else {},
        )
        for i in range(items)
    ]
    now = [
        dataclasses.replace(
            r,
            id=f"{i + items:032x}",
            parts={**r.parts, "instructions": "b"},
            result={"sentiment": "mixed", "reason": f"It praises one thing and complains of another: review {i}"},
            contents={"instructions": "Say positive, negative or mixed."} if i == 0 else {},
        )
        for i, r in enumerate(previous)
    ]
    started = time.perf_counter()
    index = VersionIndex(previous)
    found = [index.previous("labeller", r.parts["input"], 0, r.id) for r in now]
    paired = time.perf_counter() - started
    assert all(f is not None for f in found)
    contents = ContentIndex(previous + now)
    started = time.perf_counter()
    changes = [change_summary(f, r, contents, keep_result=True) for f, r in zip(found, now, strict=True)]  # type: ignore[arg-type]
    summarised = time.perf_counter() - started
    added = statistics.mean(len(json.dumps({"change": c})) for c in changes)
    record = statistics.mean(len(json.dumps(r.to_json())) for r in now)
    print(f"Pairing a {items:,}-item map with its previous run")
    print(f"  index and {items:,} lookups: {paired * 1000:.1f} ms (target < 1000 ms)")
    print(f"  {items:,} change summaries: {summarised * 1000:.1f} ms")
    print(f"  a change adds {added:.0f} bytes to an item's record of {record:.0f} bytes ({added / record:.0%})")


def growth(steps: int) -> None:
    system = "Follow the house style for every answer. " * 500  # 20,500 characters
    role: Role[object] = Role("writer", system, ROLE.tools)
    store = MemoryStore()

    async def record() -> None:
        run = Run(model=SCRIPTED, store=store)
        for i in range(steps):
            await run.step(role, f"{PROMPT} ({i})")

    asyncio.run(record())
    records = list(store.records())
    index = ContentIndex(records)
    full = [
        dataclasses.replace(
            r, contents={p: index.content(r, p)[1] for p in ("instructions", "tools", "reporting", "settings")}
        )
        for r in records
    ]
    bare = [dataclasses.replace(r, contents={}) for r in records]
    sizes = {
        "without contents (before versions)": len(json.dumps(block_to_json(bare))),
        "contents kept once (now)": len(json.dumps(block_to_json(records))),
        "contents in every record": len(json.dumps(block_to_json(full))),
    }
    print(f"A notebook of {steps} steps sharing one {len(system):,}-character system text: its records block")
    for name, size in sizes.items():
        print(f"  {name:36} {size:>10,} bytes")
    extra = sizes["contents kept once (now)"] - sizes["without contents (before versions)"]
    print(f"  versions add {extra:,} bytes: {extra / steps:,.0f} per step (the text once, then its digest's reference)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    live = asyncio.run(
        timed(
            {"live step, versions": lambda: live_step(True), "live step, without versions": lambda: live_step(False)},
            args.runs,
            args.repeats,
        )
    )
    report(
        "1. A live step (store of 20 records)", live, "live step, versions", "live step, without versions", "<= 1.05"
    )
    for records in (20, 1000):
        kept = asyncio.run(
            timed(
                {
                    "live step, versions": lambda r=records: live_step_kept_store(True, r),  # type: ignore[misc]
                    "live step, without versions": lambda r=records: live_step_kept_store(False, r),  # type: ignore[misc]
                },
                args.runs,
                args.repeats,
            )
        )
        report(
            f"1c. The live step in a store of {records:,} records kept across steps",
            kept,
            "live step, versions",
            "live step, without versions",
            "<= 1.05",
        )
    notebook = asyncio.run(
        timed(
            {
                "live step, versions": lambda: live_step_new_notebook_store(True),
                "live step, without versions": lambda: live_step_new_notebook_store(False),
            },
            args.runs,
            args.repeats,
        )
    )
    report(
        "1n. The live step by a new Run per step over the notebook's store (20 records, a Run per cell)",
        notebook,
        "live step, versions",
        "live step, without versions",
        "<= 1.05",
    )
    http = asyncio.run(
        timed(
            {
                "live HTTP step, versions": lambda: live_http_step(True),
                "live HTTP step, without": lambda: live_http_step(False),
            },
            args.runs,
            args.repeats,
        )
    )
    report(
        "1b. The same live step through the anthropic client",
        http,
        "live HTTP step, versions",
        "live HTTP step, without",
        "<= 1.05",
    )
    replay = asyncio.run(
        timed(
            {
                "replayed step, versions": lambda: replayed_step(True),
                "replayed step, without versions": lambda: replayed_step(False),
            },
            args.runs,
            args.repeats,
        )
    )
    report("2. A replayed step", replay, "replayed step, versions", "replayed step, without versions", "1.00 (noise)")
    pairing(10_000)
    growth(50)


if __name__ == "__main__":
    main()
