"""In a real kernel told each cell's id (as JupyterLab does): a record names every cell that recorded or replayed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agl_notebook.replay.records import source_digest
from tests.support.kernel_harness import Kernel, started_kernel
from tests.support.oracle_notebook import SETUP, STEP

FIRST = "run = Run(model=MODEL)\n" + STEP
AGAIN = 'again = await run.step(role, "What is six times seven?")\nagain'
REFRESH = 'fresh = Run(model=MODEL, mode="refresh")\nawait fresh.step(role, "What is six times seven?")'


def displayed_record(kernel: Kernel, code: str, cell_id: str) -> dict[str, Any]:
    msg_id = kernel.execute(code, cell_id=cell_id)
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    (record,) = kernel.step_display(msg_id)["metadata"]["agl_notebook"]["records"]
    assert isinstance(record, dict)
    return record


def test_a_record_replayed_by_a_second_cell_and_recorded_again_by_a_third_names_all_three(tmp_path: Path) -> None:
    with started_kernel(tmp_path, SETUP) as kernel:
        first = displayed_record(kernel, FIRST, "first")
        assert first["cells"] == [{"id": "first", "source": source_digest(FIRST)}]

        again = displayed_record(kernel, AGAIN, "again")  # replayed: the same record, now naming both cells
        assert again["id"] == first["id"]
        assert again["cells"] == [*first["cells"], {"id": "again", "source": source_digest(AGAIN)}]

        again_edited = displayed_record(kernel, AGAIN + "  # edited", "again")  # one entry per cell: its last source
        assert [c["id"] for c in again_edited["cells"]] == ["first", "again"]
        assert again_edited["cells"][1]["source"] == source_digest(AGAIN + "  # edited")

        fresh = displayed_record(kernel, REFRESH, "fresh")  # recorded again: the cells that replay it stay
        assert fresh["id"] == first["id"]
        assert [c["id"] for c in fresh["cells"]] == ["first", "again", "fresh"]
