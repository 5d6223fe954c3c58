"""run.map past the sidecar limit, end to end: recorded headlessly in a real kernel, then replayed by nbval from the
sidecar committed beside the notebook (docs/recordings.md, "Sidecar files")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat

from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.sidecar import naming_from_json, read_sidecar
from tests.support.fake_extension import FakeExtension
from tests.support.kernel_harness import started_kernel
from tests.support.nbval import nbval

SIDECAR = "summaries.agl.jsonl"

SETUP = """\
%env AGL_NOTEBOOK_SIDECAR_BYTES=4000
import json
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Text:
    text: str = describe("What to summarize.")

@dataclass(frozen=True)
class Summary:
    summary: str = describe("The summary.")

def script(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"]
    return {"calls": [{"name": "report_summary", "args": {"summary": "about " + text}}]}

summarizer = Role("summarizer", instructions="Summarize the text.", accepts=(Text,),
                  tools=[reporting_tool("report_summary", "Report the summary.", Summary)])
run = Run(model=ScriptedModel(script))
"""

MAP = 'results = await run.map(summarizer, [Text(f"text number {i}") for i in range(30)], name="summaries"'
RESULT = "print(len(results), results[29].summary)"


def map_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    nb.cells = [nbformat.v4.new_code_cell(code) for code in (SETUP, MAP + ")", RESULT)]  # type: ignore[no-untyped-call]
    nbformat.write(nb, str(path))  # type: ignore[no-untyped-call]
    return path


def map_block(path: Path) -> Any:
    nb = json.loads(path.read_text(encoding="utf-8"))
    blocks = [o["metadata"][METADATA_KEY] for o in nb["cells"][1]["outputs"] if METADATA_KEY in o.get("metadata", {})]
    assert len(blocks) == 1, nb["cells"][1]["outputs"]
    return blocks[0]


def test_a_map_past_the_limit_keeps_its_records_in_the_sidecar_and_nbval_replays_from_it(
    tmp_path: Path, clean_environment: None
) -> None:
    path = map_notebook(tmp_path / "map.ipynb")
    assert main(["execute", str(path)]) == 0
    block = map_block(path)
    assert block["records"] == [], "30 records are past 4,000 bytes: none stays in the notebook"
    naming = naming_from_json(block["sidecars"][0], where="block")
    sidecar = tmp_path / SIDECAR
    read = read_sidecar(sidecar, naming=naming)
    assert read.unchanged and len(read.records) == 30 and not read.problems
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert "30 about text number 29" in json.dumps(nb["cells"][2]["outputs"])
    assert path.stat().st_size < 40_000, "the notebook holds the naming, not the records"
    before = sidecar.read_bytes()

    clone = tmp_path / "clone"  # the notebook and its sidecar as committed, elsewhere
    clone.mkdir()
    shutil.copy(path, clone / path.name)
    shutil.copy(sidecar, clone / SIDECAR)
    done = nbval(clone / path.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (clone / SIDECAR).read_bytes() == before, "the replay made no record"

    (clone / SIDECAR).unlink()
    done = nbval(clone / path.name)
    assert done.returncode != 0, "without its sidecar the map does not replay"
    assert "MapItemError" in done.stdout and "Unexpected output fields from running code: {'stderr'}" in done.stdout


KERNEL_SETUP = (
    SETUP.replace("def script(request):", "async def script(request):").replace(
        "    return {",
        """    SEEN.append(text)
    if text in HANG:
        await asyncio.sleep(3600)
    return {""",
    )
    + """
import asyncio
SEEN = []     # the item of every request the scripted model was sent
HANG = set()  # items whose request never gets an answer (until the kernel is interrupted)
"""
)


def test_an_interrupted_map_past_the_limit_keeps_its_finished_items_in_the_sidecar_and_a_re_run_adds_the_rest(
    tmp_path: Path,
) -> None:
    path = map_notebook(tmp_path / "map.ipynb")
    sidecar = tmp_path / SIDECAR
    with started_kernel(tmp_path, f"%env AGL_NOTEBOOK_PATH={path}", KERNEL_SETUP) as kernel:
        extension = FakeExtension(kernel, path.name)
        kernel.run("HANG.update(f'text number {i}' for i in range(20, 30))")
        first = kernel.execute(MAP + ", concurrency=4)", cell_id="map-cell")
        extension.wait_for(lambda: sidecar.exists() and sidecar.read_bytes().count(b"\n") == 21, timeout=60)
        kernel.km.interrupt_kernel()
        extension.wait_for(lambda: first in kernel.replies)
        assert kernel.replies[first]["content"]["ename"] == "StepInterrupted"
        block = kernel.step_display(first)["metadata"][METADATA_KEY]
        assert block["records"] == [] and block["sidecars"][0]["lines"] == 21, "20 items finished, all in the sidecar"

        kernel.run("SEEN.clear(); HANG.clear()")
        second = kernel.execute(MAP + ", concurrency=4)", cell_id="map-cell")
        extension.wait_for(lambda: second in kernel.replies)
        seen = kernel.execute("print(sorted(SEEN, key=lambda t: int(t.split()[-1])))")
        extension.wait_for(lambda: seen in kernel.replies)
        kernel.pump(0.3)
        assert kernel.stream(seen) == str([f"text number {i}" for i in range(20, 30)]) + "\n", "only the rest ran"
        block = kernel.step_display(second)["metadata"][METADATA_KEY]
    read = read_sidecar(sidecar, naming=naming_from_json(block["sidecars"][0], where="block"))
    assert read.unchanged and len(read.records) == 30 and len(read.lines) == 30, "every item once"
    assert extension.block is not None and extension.block["sidecars"] == [block["sidecars"][0]]
