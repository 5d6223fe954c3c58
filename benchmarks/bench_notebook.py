"""Notebook-side costs: widget traffic while a reply streams, headless replay time, and bytes per recorded step.

1. Widget messages for a 5,000-delta streamed reply. A real ``python3`` kernel (``tests.support.kernel_harness.Kernel``,
   started in a temporary folder) defines a custom `Model` whose ``stream`` yields 5,000 `TextDelta` pieces with
   ``await asyncio.sleep(0.001)`` between them (so the reply streams for several seconds, as a real model's does),
   then a reporting `ToolCall` and a `TurnEnd`. One async cell runs one step with ``Run(model=ThatModel())``; every
   iopub ``comm_msg`` whose parent is that execution is a widget update and is counted (with its JSON size). The
   model measures its own stream duration (first delta to last) and prints it. Updates per second = comm_msg
   count / stream duration (target: at most ~20 a second, `REDRAWS_PER_SECOND`); the most updates in any one
   second (by the kernel's message timestamps) is printed too. A burst variant streams 5,000
   deltas with no sleep. Each variant checks its model was called exactly once (so the step really ran live).

2. Replay time of a 100-step notebook executed headlessly. A generated notebook has a setup cell (a scripted role:
   ``ScriptedModel`` whose reply is a function of the request, so each input gets its own answer, and a
   ``reporting_tool``), a ``run = Run(model=MODEL)`` cell and 100 cells ``await run.step(role, "question N")``. It is
   recorded with ``agl-notebook execute NB --record`` (timed: the live run), then ``agl-notebook execute NB --mode
   replay --output OTHER`` is timed (the replay). The baseline is the same notebook with the 100 step cells replaced
   by ``x = N``, executed the same way, so process start, kernel start and nbclient's per-cell overhead cancel.
   Every command is a subprocess of the installed ``.venv/bin/agl-notebook``; replay and baseline are run
   ``--repeats`` times interleaved and the fastest of each is used. Printed: replay, baseline, live recording, and
   (replay - baseline) / 100 per step. The replay is checked to make no model call.

3. Bytes per recorded step, from the recorded notebook's ``metadata["agl_notebook"]["records"]``: the mean size of
   ``json.dumps(record)`` versus ``json.dumps(record["transcript"])`` and their ratio (target <= 2x). Measured for
   the 100 tiny steps of part 2 and for 20 longer steps (one ``look_up`` tool call whose result is ~1 KB of text,
   ~500 characters of assistant text, then the report), where fixed per-record fields matter less. The notebook
   file's growth per step over the baseline notebook is printed too (it includes each step's static output).

Run: ``.venv/bin/python benchmarks/bench_notebook.py`` (about a minute).
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from agl_notebook.notebook.locate import PATH_VARIABLE  # noqa: E402
from agl_notebook.replay.modes import BLOCK_VARIABLE, ENV_VAR, NBVAL_VARIABLE  # noqa: E402
from tests.support.kernel_harness import Kernel  # noqa: E402

CLI = Path(sys.executable).parent / "agl-notebook"
METADATA_KEY = "agl_notebook"
# Settings the person's environment may hold that would change what the kernel does: removed at start.
_CLEARED = (ENV_VAR, PATH_VARIABLE, NBVAL_VARIABLE, BLOCK_VARIABLE)

# Part 1 ------------------------------------------------------------------------------------------------------------

STREAM_SETUP = '''
import asyncio, json, time
from dataclasses import dataclass
from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook.models.base import TextDelta, ToolCall, TurnEnd, Usage

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

role = Role(name="streamer", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])

class StreamingModel:
    """Streams `deltas` text pieces, `pause` seconds apart, then reports."""

    def __init__(self, deltas, pause):
        self.deltas, self.pause = deltas, pause
        self.calls = 0
        self.duration = 0.0

    def backend_id(self, model):
        return f"bench:streaming:{self.deltas}:{self.pause}"

    async def stream(self, request):
        self.calls += 1
        started = time.monotonic()
        for i in range(self.deltas):
            yield TextDelta(f"w{i} ")
            if self.pause:
                await asyncio.sleep(self.pause)
        self.duration = time.monotonic() - started
        yield ToolCall("toolu_report", "answer", {"text": "done"})
        yield TurnEnd("tool_use", Usage(input_tokens=10, output_tokens=self.deltas))
'''

STREAM_CELL = """
model = StreamingModel({deltas}, {pause})
result = await Run(model=model).step(role, "stream {label}")
print(json.dumps({{"calls": model.calls, "duration": model.duration, "result": result.text}}))
"""


def bench_streaming(deltas: int) -> None:
    print(f"1. Widget updates for a {deltas:,}-delta streamed reply (real kernel)")
    with tempfile.TemporaryDirectory() as folder:
        k = Kernel(cwd=Path(folder))
        try:
            k.run(STREAM_SETUP)
            # Warm-up: the first step imports ipywidgets and the rendering code.
            k.run(STREAM_CELL.format(deltas=5, pause=0, label="warm-up"), timeout=120)
            for label, pause in (("paced", 0.001), ("burst", 0)):
                msg_id = k.execute(STREAM_CELL.format(deltas=deltas, pause=pause, label=label))
                reply = k.wait_reply(msg_id, timeout=120)["content"]
                if reply["status"] != "ok":
                    raise SystemExit(
                        f"the {label} step failed: {reply.get('ename')}: {reply.get('evalue')}\n{k.stream(msg_id)}"
                    )
                out = json.loads(k.stream(msg_id).strip().splitlines()[-1])
                assert out["calls"] == 1, out
                assert out["result"] == "done", out
                comms = k.messages(msg_id, "comm_msg")
                updates = [m for m in comms if m["content"]["data"].get("method") in ("update", "echo_update")]
                size = sum(len(json.dumps(m["content"])) for m in updates)
                opens = len(k.messages(msg_id, "comm_open"))
                closes = len(k.messages(msg_id, "comm_close"))
                duration = out["duration"]
                pace = "sleep(0.001) between deltas" if pause else "no sleep"
                line = (
                    f"   {label} ({pace}): {deltas:,} deltas streamed in {duration:.2f} s -> {len(comms)} "
                    f"comm_msg ({len(updates)} updates, {size / 1e3:,.0f} kB of update JSON)"
                )
                if duration >= 1:
                    line += (
                        f", {len(comms) / duration:.1f} updates/s, at most {busiest_second(comms)} in any 1 s "
                        "window (target <= ~20/s)"
                    )
                print(line + f"; {opens} comm_open, {closes} comm_close")
        finally:
            k.close()


def busiest_second(messages: list[dict[str, Any]]) -> int:
    """The most messages sent within any one second (by the kernel's header timestamps)."""
    times = sorted(m["header"]["date"].timestamp() for m in messages)
    most, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] >= 1:
            first += 1
        most = max(most, last - first + 1)
    return most


# Part 2 and 3 ------------------------------------------------------------------------------------------------------

TINY_SETUP = """from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

def script(request):
    question = request.messages[0].text
    return {"calls": [{"name": "answer", "args": {"text": f"the answer to {question}"}}]}

MODEL = ScriptedModel(script)
role = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])"""

LONG_SETUP = """from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Lookup:
    topic: str = describe("What to look up.")

@dataclass(frozen=True)
class Answer:
    summary: str = describe("A short summary of what was found.")
    count: int = describe("How many sources were used.")

PARAGRAPH = ("Retries with exponential backoff and full jitter spread load after an outage; a client should cap "
             "the number of attempts, honour Retry-After headers, and never retry non-idempotent requests "
             "blindly. ")

async def look_up(query: Lookup) -> ToolResult:
    text = f"Notes on {query.topic}:\\n" + PARAGRAPH * 6  # about 1 KB
    return ToolResult(text=text[:1024])

def script(request):
    question = request.messages[0].text
    if len(request.messages) == 1:
        text = (f"To answer {question!r} I will look up what the notes say about retry policies, because the "
                "answer depends on how the client backs off, how many attempts it makes, whether it honours "
                "Retry-After, and which requests are safe to repeat. Once I have the notes I will summarise "
                "the relevant points in a sentence or two and report how many sources I relied on, so the "
                "reader can judge how well supported the summary is. Looking it up now.")
        return {"text": text[:500], "calls": [{"name": "look_up", "args": {"topic": question}}]}
    return {"text": "The notes cover it.",
            "calls": [{"name": "answer", "args": {"summary": f"For {question}: back off with jitter, cap attempts, "
                                                             "honour Retry-After.", "count": 1}}]}

MODEL = ScriptedModel(script)
role = Role(name="researcher", instructions="Answer using the notes.",
            tools=[tool("look_up", "Look a topic up in the notes.", Lookup, look_up),
                   reporting_tool("answer", "Report the answer.", Answer)])"""


def write_notebook(path: Path, setup: str, cells: list[str]) -> Path:
    v4: Any = nbformat.v4
    nb = v4.new_notebook(
        cells=[
            v4.new_code_cell(setup),
            v4.new_code_cell("run = Run(model=MODEL)"),
            *map(v4.new_code_cell, cells),
            v4.new_code_cell("print('model calls:', MODEL.calls)"),
        ]
    )
    nbformat.write(nb, path)  # type: ignore[no-untyped-call]  # unannotated in nbformat
    return path


def cli(*args: str) -> float:
    """Run the installed command; returns its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run([str(CLI), *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"agl-notebook {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed


def model_calls(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "".join(nb["cells"][-1]["outputs"][0]["text"]).strip()


def records(path: Path) -> list[dict[str, Any]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = nb["metadata"][METADATA_KEY]["records"]
    return found


def record_sizes(label: str, found: list[dict[str, Any]]) -> None:
    whole = [len(json.dumps(r)) for r in found]
    transcript = [len(json.dumps(r["transcript"])) for r in found]
    mean_whole, mean_transcript = statistics.mean(whole), statistics.mean(transcript)
    others = sorted(
        ((statistics.mean(len(json.dumps(r[k])) for r in found), k) for k in found[0] if k != "transcript"),
        reverse=True,
    )
    print(
        f"   {label}: {len(found)} records, mean record {mean_whole:,.0f} B, "
        f"mean transcript {mean_transcript:,.0f} B, ratio {mean_whole / mean_transcript:.2f}x (target <= 2x)"
    )
    print("      largest other fields (value JSON): " + ", ".join(f"{k} {n:,.0f} B" for n, k in others[:5]))


def _spread(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


def bench_notebooks(steps: int, repeats: int) -> None:
    print(f"2. Replay of a {steps}-step notebook, headless (agl-notebook execute, subprocess)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        steps_nb = write_notebook(
            folder / "steps.ipynb", TINY_SETUP, [f'await run.step(role, "question {i}")' for i in range(steps)]
        )
        base_nb = write_notebook(folder / "baseline.ipynb", TINY_SETUP, [f"x = {i}" for i in range(steps)])
        base_size = base_nb.stat().st_size

        live = cli("execute", str(steps_nb), "--record")
        assert model_calls(steps_nb) == f"model calls: {steps}", model_calls(steps_nb)
        recorded = records(steps_nb)
        assert len(recorded) == steps, len(recorded)

        replays, baselines = [], []
        replayed = folder / "replayed.ipynb"
        for _ in range(repeats):
            replays.append(cli("execute", str(steps_nb), "--mode", "replay", "--output", str(replayed)))
            baselines.append(cli("execute", str(base_nb), "--output", str(folder / "baseline-out.ipynb")))
        assert model_calls(replayed) == "model calls: 0", model_calls(replayed)
        replay, baseline = min(replays), min(baselines)
        print(f"   replay   {replay:6.2f} s  (runs: {_spread(replays)})")
        print(f"   baseline {baseline:6.2f} s  (runs: {_spread(baselines)}; {steps} cells of `x = N`)")
        print(f"   live recording (--record) {live:.2f} s")
        print(
            f"   replay per step: (replay - baseline) / {steps} = {(replay - baseline) / steps * 1e3:.1f} ms;"
            f" live per step: {(live - baseline) / steps * 1e3:.1f} ms"
        )

        print("3. Bytes per recorded step (notebook metadata records)")
        record_sizes("tiny step (one report call)", recorded)
        print(
            f"      notebook file growth over the baseline: {(steps_nb.stat().st_size - base_size) / steps:,.0f} B"
            " per step (record + static output, nbformat layout)"
        )

        long_steps = 20
        long_nb = write_notebook(
            folder / "long.ipynb",
            LONG_SETUP,
            [f'await run.step(role, "question {i} about retries")' for i in range(long_steps)],
        )
        cli("execute", str(long_nb), "--record")
        assert model_calls(long_nb) == f"model calls: {2 * long_steps}", model_calls(long_nb)
        long_records = records(long_nb)
        assert len(long_records) == long_steps
        record_sizes("longer step (~500-char text, ~1 KB tool result, report)", long_records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not CLI.exists():
        raise SystemExit(f"{CLI} not found: install the package with its scripts (pip install -e .)")
    for name in _CLEARED:
        os.environ.pop(name, None)
    started = time.perf_counter()
    bench_streaming(args.deltas)
    bench_notebooks(args.steps, args.repeats)
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
