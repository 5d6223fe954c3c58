"""Sidecar files in real kernels: a map's records past the limit go to the sidecar, its display names it, the
extension is handed the naming, a killed kernel's torn line is survived, and headless runs and nbval replay from it.

Until ``run.map`` exists the cell plays a map's part: it looks each item's record up in ``NotebookStore.for_map``,
keeps the ones it had to make, and displays a final output carrying ``saved_block()`` in its metadata, as a map's
final display does.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.sidecar import read_sidecar
from tests.support.fake_extension import FakeExtension
from tests.support.kernel_harness import started_kernel
from tests.support.nbval import nbval
from tests.support.oracle_notebook import NOTEBOOK_SETTINGS

SIDECAR = "oracle-map.agl.jsonl"

# A stand-in for run.map: 40 items of about 300 bytes each, so past a limit of 4000 bytes the records move.
MAP_CELL = """\
import os
from IPython.display import display
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay.records import StepRecord

items = NotebookStore().for_map("oracle-map")
made = 0
for n in range(40):
    record_id = f"item-{n:04d}"
    if items.get(record_id) is None:
        if os.environ.get("AGL_NOTEBOOK_UNDER_NBVAL"):
            raise RuntimeError(f"{record_id} is not recorded")
        made += 1
        items.put(StepRecord(id=record_id, parts={}, occurrence=0, role="oracle", backend="scripted:x", input=n,
                             result="x" * 200, transcript=()))
display({"text/plain": "a map of 40 items"}, metadata={"agl_notebook": items.saved_block()}, raw=True)
"""


def map_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    nb.cells = [
        nbformat.v4.new_code_cell("%env AGL_NOTEBOOK_SIDECAR_BYTES=4000"),  # type: ignore[no-untyped-call]
        nbformat.v4.new_code_cell(MAP_CELL),  # type: ignore[no-untyped-call]
    ]
    nbformat.write(nb, str(path))  # type: ignore[no-untyped-call]
    return path


def map_block(path: Path) -> Any:
    """The records block the map's output carries in the saved notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    (output,) = nb["cells"][1]["outputs"]
    return output["metadata"][METADATA_KEY]


def test_in_a_kernel_a_large_maps_display_names_its_sidecar_and_the_extension_is_handed_the_naming(
    tmp_path: Path,
) -> None:
    map_notebook(tmp_path / "nb.ipynb")
    with started_kernel(
        tmp_path, f"%env AGL_NOTEBOOK_PATH={tmp_path / 'nb.ipynb'}", "%env AGL_NOTEBOOK_SIDECAR_BYTES=4000"
    ) as kernel:
        msg_id = kernel.execute(MAP_CELL, cell_id="map-cell")
        reply = kernel.wait_reply(msg_id)["content"]
        assert reply["status"] == "ok", reply
        (display,) = [o for o in kernel.final_outputs(msg_id) if o.get("type") == "display_data"]
        block = display["metadata"][METADATA_KEY]
        sent = [
            m["content"]["data"]
            for m in kernel.iopub
            if m["header"]["msg_type"] in ("comm_msg", "comm_open") and m["content"]["data"].get("op") == "sidecar"
        ]
    read = read_sidecar(tmp_path / SIDECAR, key="oracle-map")
    assert len(read.records) == 40 and not read.problems
    assert block["records"] == [] and block["sidecars"][0]["lines"] == 41
    assert sent == [{"op": "sidecar", "cell_id": "map-cell", "sidecar": block["sidecars"][0]}]


KILLED_CELL = """\
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay.records import StepRecord
items = NotebookStore().for_map("oracle-map")
n = 0
while True:  # until the kernel is killed
    items.put(StepRecord(id=f"item-{n}", parts={}, occurrence=0, role="oracle", backend="scripted:x", input=n,
                         result="y" * 3_000_000, transcript=()))
    n += 1
"""


def test_a_kernel_killed_while_appending_leaves_every_whole_line_readable(tmp_path: Path) -> None:
    map_notebook(tmp_path / "nb.ipynb")
    with started_kernel(
        tmp_path, f"%env AGL_NOTEBOOK_PATH={tmp_path / 'nb.ipynb'}", "%env AGL_NOTEBOOK_SIDECAR_BYTES=0"
    ) as kernel:
        kernel.execute(KILLED_CELL)
        sidecar = tmp_path / SIDECAR
        deadline = time.monotonic() + 60
        while (not sidecar.exists() or sidecar.stat().st_size < 20_000_000) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = kernel.km.provisioner.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
    read = read_sidecar(sidecar, key="oracle-map")
    whole = sidecar.read_bytes().count(b"\n") - 1
    assert len(read.records) == whole >= 6
    assert read.problems == ([] if not read.torn else [read.problems[0]]), "at most the torn last line"
    assert list(read.records) == [f"item-{n}" for n in range(whole)]


def test_a_map_recorded_headlessly_replays_under_nbval_and_from_a_copy_beside_it_with_the_sidecar_committed(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = map_notebook(tmp_path / "nb.ipynb")
    assert main(["execute", str(path)]) == 0
    block = map_block(path)
    assert block["records"] == [] and block["sidecars"][0]["file"] == SIDECAR
    sidecar = tmp_path / SIDECAR
    assert len(read_sidecar(sidecar, key="oracle-map").records) == 40
    before = sidecar.read_bytes()

    done = nbval(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sidecar.read_bytes() == before, "a replay appends nothing"

    capsys.readouterr()
    assert main(["explain", str(path), "2"]) == 0
    assert (
        "cell 2: map 'oracle-map' replays from its sidecar oracle-map.agl.jsonl (40 records)."
        in capsys.readouterr().out
    )

    # The repository as committed, cloned elsewhere: the notebook and its sidecar, nothing else.
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copy(path, clone / "nb.ipynb")
    shutil.copy(sidecar, clone / SIDECAR)
    shutil.copy(path, clone / "nb.nbconvert.ipynb")  # a runner's copy beside it names the same file
    for name in ("nb.ipynb", "nb.nbconvert.ipynb"):
        done = nbval(clone / name)
        assert done.returncode == 0, name + done.stdout + done.stderr

    if importlib.util.find_spec("papermill") is not None:  # papermill writes its output beside the notebook
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGL_NOTEBOOK_")}
        done = subprocess.run(
            [sys.executable, "-m", "papermill", "-k", "python3", "nb.ipynb", "nb.out.ipynb"],
            cwd=clone, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert map_block(clone / "nb.out.ipynb")["sidecars"][0]["file"] == SIDECAR, "replayed, and names its file"
    assert (clone / SIDECAR).read_bytes() == before, "nothing was appended: every item replayed"

    (clone / SIDECAR).unlink()
    done = nbval(clone / "nb.ipynb")
    assert done.returncode != 0 and "item-0000 is not recorded" in done.stdout, "without the sidecar nothing replays"
    assert {k for k in os.environ if k in NOTEBOOK_SETTINGS} == set()


TWO_KERNELS_CELL = """\
import pathlib, time
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay.records import StepRecord
items = NotebookStore().for_map("oracle-map")
while not pathlib.Path("go").exists():  # both kernels start appending together
    time.sleep(0.005)
for n in range(1000):
    items.put(StepRecord(id=f"{NAME}-{n}", parts={}, occurrence=0, role="oracle", backend="scripted:x", input=n,
                         result="z" * 20_000, transcript=()))
naming = items.saved_block()["sidecars"][0]
"""


def test_two_kernels_appending_to_one_sidecar_at_once_lose_nothing_and_interleave_whole_lines(tmp_path: Path) -> None:
    map_notebook(tmp_path / "nb.ipynb")
    setup = (f"%env AGL_NOTEBOOK_PATH={tmp_path / 'nb.ipynb'}", "%env AGL_NOTEBOOK_SIDECAR_BYTES=0")
    with (
        started_kernel(tmp_path, *setup, "NAME = 'one'") as one,
        started_kernel(tmp_path, *setup, "NAME = 'two'") as two,
    ):
        sent = [(kernel, kernel.execute(TWO_KERNELS_CELL)) for kernel in (one, two)]
        time.sleep(1)
        (tmp_path / "go").touch()
        for kernel, msg_id in sent:
            assert kernel.wait_reply(msg_id, timeout=120)["content"]["status"] == "ok"
    read = read_sidecar(tmp_path / SIDECAR, key="oracle-map")
    assert not read.problems and len(read.lines) == 2000
    assert sorted(read.records) == sorted(f"{name}-{n}" for name in ("one", "two") for n in range(1000))
    for name in ("one", "two"):  # each kernel's own records in the order it kept them
        mine = [r.id for r in read.records.values() if r.id.startswith(name)]
        assert mine == [f"{name}-{n}" for n in range(1000)]
    writers = [line.text[line.text.index(b'"id":"') + 6 :][:3] for line in read.lines]
    assert sum(a != b for a, b in itertools.pairwise(writers)) > 1, "the two kernels appended at once"


def test_a_new_kernel_reads_the_sidecar_the_extension_hands_back_unsaved(tmp_path: Path) -> None:
    path = map_notebook(tmp_path / "nb.ipynb")  # saved before the map ran: the file names no sidecar
    setup = (f"%env AGL_NOTEBOOK_PATH={path}", "%env AGL_NOTEBOOK_SIDECAR_BYTES=4000")
    with started_kernel(tmp_path, *setup) as first:
        extension = FakeExtension(first, path.name)
        msg_id = first.execute(MAP_CELL, cell_id="map-cell")
        extension.wait_for(lambda: msg_id in first.replies and any(d["op"] == "sidecar" for d in extension.received))
    unsaved = extension.block
    assert unsaved is not None and unsaved["sidecars"][0]["file"] == SIDECAR and unsaved["records"] == []
    with started_kernel(tmp_path, *setup) as second:  # the page hands its unsaved metadata to a new kernel
        extension = FakeExtension(second, path.name)
        extension.block = unsaved
        msg_id = second.execute(LOOKUP_CELL)
        extension.wait_for(lambda: msg_id in second.replies)
        second.pump(0.3)
        assert second.stream(msg_id) == "found item-0003: True\n"


LOOKUP_CELL = """\
from agl_notebook.notebook.store import NotebookStore
store = NotebookStore()
await store.ready()  # the extension's answer: its unsaved block names the sidecar
print("found item-0003:", store.get("item-0003") is not None)
"""
