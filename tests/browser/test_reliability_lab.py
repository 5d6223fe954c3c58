"""JupyterLab with the agl_notebook labextension disabled (kernel faults): nothing is lost without it.

Without the extension nothing moves a record into the notebook metadata, and no unsaved recording can reach a
restarted kernel. What must still hold: the question is answered in the running cell, the record travels in the step
output's metadata (path 2), saving keeps it, a restarted kernel replays it with no model call, the saved file is a
valid notebook holding the record exactly once, and nbval passes on it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import nbformat as _nbformat
import pytest

from tests.browser.harness import (
    ARTIFACTS,
    Jupyter,
    JupyterServer,
    jupyter_for,
    records_anywhere,
    run_nbval,
    saved_output_records,
    serving,
)
from tests.support.planner_notebook import CALLS_CELL, CELLS, FINAL_TABLE, LIVE_CALLS, STEP_CELL
from tests.support.reliability_report import ReliabilityNotes

nbformat: Any = _nbformat  # partly typed: its notebook builders, read and write are not annotated

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

EXTENSION = "agl-notebook"
ACTIVATED = "agl-notebook: activated"
"""What the extension logs to the browser console when JupyterLab activates it."""


@pytest.fixture(scope="module")
def server_without_extension(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    server = JupyterServer(
        tmp_path_factory.mktemp("jupyter-no-ext"),
        ARTIFACTS / "jupyter-server-no-ext.log",
        disabled_extensions=[EXTENSION],
    )
    yield from serving(server)


@pytest.fixture
def jupyter_without_extension(
    request: pytest.FixtureRequest, browser: Any, server_without_extension: JupyterServer
) -> Iterator[Jupyter]:
    yield from jupyter_for(request, browser, server_without_extension)


def test_with_the_extension_disabled_recordings_travel_in_outputs_and_replay(
    jupyter_without_extension: Jupyter,
    reliability: ReliabilityNotes,
) -> None:
    jupyter = jupyter_without_extension
    name = "no_extension.ipynb"
    path = jupyter.server.write_notebook(name, CELLS)
    nb = jupyter.open(name)
    disabled = nb.page.evaluate("""() => JSON.parse(document.getElementById('jupyter-config-data').textContent)
                                    .disabledExtensions ?? []""")
    assert EXTENSION in disabled, f"the page config disables the extension: {disabled}"

    # Live: the first step waits briefly for an extension that never answers, then asks in the running cell.
    started = time.monotonic()
    nb.run_all()
    nb.answer("Friday", cell=STEP_CELL)
    nb.wait_cells_done(what="Run All after the answer was submitted")
    live_seconds = time.monotonic() - started
    nb.shot("answered")
    nb.wait_visible(
        nb.output(STEP_CELL).locator(FINAL_TABLE).filter(has_text="Meet on Friday"),
        "the final view with 'Meet on Friday'",
        30,
    )
    assert nb.output_text(CALLS_CELL).strip() == LIVE_CALLS
    assert not any(ACTIVATED in line for line in jupyter.console), "the extension was activated after all"

    saved = nb.save()
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    assert saved_output_records(saved) == [(STEP_CELL, 0)], "the record travels in the step output's metadata"
    assert "agl_notebook" not in saved["metadata"], "nothing moved it into the notebook metadata"

    # Replay: a restarted kernel finds the record in the saved output metadata; no question, no model call.
    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay from the output metadata)")
    nb.shot("replayed")
    assert "Meet on Friday" in nb.output_text(STEP_CELL)
    assert nb.output_text(CALLS_CELL).strip() == "0", "no model call on replay"
    saved = nb.save()
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    (record,) = records_anywhere(saved)  # exactly once, whole
    assert [q.get("answer") for q in record.get("questions", [])] == ["Friday"]

    result = run_nbval(path)
    jupyter.artifacts.write("nbval.txt", result.stdout + result.stderr)
    assert result.returncode == 0, f"pytest --nbval failed:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    reliability.note(
        "Kernel faults",
        "the frontend extension disabled in JupyterLab (real browser)",
        "the question is answered in the running cell; the record travels in the output metadata; "
        "after save and a kernel restart the step replays with no model call; the saved notebook is "
        "valid and holds the record once; nbval passes",
        records_lost=0,
        notebooks_corrupted=0,
        measured={"Extension disabled: Run All, answer and finish in the browser": f"{live_seconds:.1f} s"},
        how="scripted model; real JupyterLab in headless chromium driven by Playwright; wall time from "
        "Run All to the last cell done, the typed answer included; one run",
    )


BROKEN_BLOCK = '{"version": 1, "records": [{"kind": "step", "format": 1, "id": "0f3a'
"""A records block saved as a string of JSON cut short (a bad merge, a hand edit)."""


@pytest.mark.needs_labextension
def test_a_damaged_records_block_is_left_alone_and_the_notebook_still_runs_and_replays(
    jupyter: Jupyter,
    reliability: ReliabilityNotes,
) -> None:
    name = "damaged_block.ipynb"
    path = jupyter.server.write_notebook(name, CELLS)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metadata"]["agl_notebook"] = BROKEN_BLOCK
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    nb = jupyter.open(name)
    nb.run_all()
    nb.answer("Monday", cell=STEP_CELL)
    nb.wait_cells_done(what="Run All after the answer was submitted")
    nb.shot("answered")
    out = nb.output_text(STEP_CELL)
    assert "could not be read" in out and "agl_notebook" in out, f"the cell warns about the block:\n{out}"
    assert "Meet on Monday" in out
    saved = nb.save()
    assert saved["metadata"]["agl_notebook"] == BROKEN_BLOCK, "the damaged block is left as it was"
    assert [cell for cell, _ in saved_output_records(saved)] == [STEP_CELL], "the record stays in the output"
    assert any("not stored" in line and "unusable" in line for line in jupyter.console), (
        "the extension says why it left the record in the output"
    )

    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done_without_question(what="Run All after the restart (a replay from the output metadata)")
    assert "Meet on Monday" in nb.output_text(STEP_CELL)
    assert nb.output_text(CALLS_CELL).strip() == "0", "replayed with no model call"
    saved = nb.save()
    assert saved["metadata"]["agl_notebook"] == BROKEN_BLOCK
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    reliability.note(
        "Bad recordings",
        "a notebook whose records block is truncated JSON in a string, run in "
        "JupyterLab with the extension (real browser)",
        "the cell warns that the block could not be read; the step runs live and its question is "
        "answered; the extension leaves the block as it was (saying why in the console) and the record "
        "stays in the output; after a restart the step replays from the output with no model call",
        records_lost=0,
        notebooks_corrupted=0,
    )
