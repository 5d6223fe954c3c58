"""JupyterLab with the agl_notebook labextension disabled (issue 9, kernel faults): nothing is lost without it.

Without the extension nothing moves a record into the notebook metadata, and no unsaved recording can reach a
restarted kernel. What must still hold: the question is answered in the running cell, the record travels in the step
output's metadata (path 2), saving keeps it, a restarted kernel replays it with no model call, the saved file is a
valid notebook holding the record exactly once, and nbval passes on it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from tests.browser.harness import (
    ARTIFACTS,
    Artifacts,
    Jupyter,
    JupyterServer,
    records_anywhere,
    run_nbval,
    saved_output_records,
)
from tests.browser.notebooks import CALLS_CELL, CELLS, FINAL_TABLE, LIVE_CALLS, STEP_CELL
from tests.reliability_report import ReliabilityNotes

EXTENSION = "agl-notebook"
ACTIVATED = "agl-notebook: activated"
"""What the extension logs to the browser console when JupyterLab activates it."""


@pytest.fixture(scope="module")
def server_without_extension(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    server = JupyterServer(tmp_path_factory.mktemp("jupyter-no-ext"), ARTIFACTS / "jupyter-server-no-ext.log",
                           disabled_extensions=[EXTENSION])
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def jupyter_without_extension(request: pytest.FixtureRequest, browser: Any,
                              server_without_extension: JupyterServer) -> Iterator[Jupyter]:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    helper = Jupyter(server_without_extension, browser, Artifacts(ARTIFACTS / name))
    yield helper
    report = getattr(request.node, "rep_call", None)
    helper.close(failed=report is None or report.failed)


def test_with_the_extension_disabled_recordings_travel_in_outputs_and_replay(
    jupyter_without_extension: Jupyter, reliability: ReliabilityNotes,
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
    nb.wait_visible(nb.output(STEP_CELL).locator(FINAL_TABLE).filter(has_text="Meet on Friday"),
                    "the final view with 'Meet on Friday'", 30)
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
    reliability.note("Kernel faults", "the frontend extension disabled in JupyterLab (real browser)",
                     "the question is answered in the running cell; the record travels in the output metadata; "
                     "after save and a kernel restart the step replays with no model call; the saved notebook is "
                     "valid and holds the record once; nbval passes", records_lost=0, notebooks_corrupted=0,
                     measured={"Extension disabled: Run All, answer and finish in the browser":
                               f"{live_seconds:.1f} s"})
