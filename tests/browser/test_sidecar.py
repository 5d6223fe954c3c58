"""A large map in JupyterLab: its records go to the sidecar file, the extension keeps the file's naming in the
notebook metadata (and takes the copy out of the map's output), and after a restart the map replays from the file.
"""

from __future__ import annotations

import pytest

from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.sidecar import naming_from_json, read_sidecar
from tests.browser.harness import Jupyter
from tests.notebook.test_sidecar_map import MAP, SETUP, SIDECAR

NAME = "sidecar_map.ipynb"
COUNTED = SETUP.replace("def script(request):", "CALLS = []\n\ndef script(request):\n    CALLS.append(1)")
CELLS = [COUNTED, MAP + ", concurrency=4)", "print(len(CALLS))"]


@pytest.mark.needs_labextension
def test_the_extension_keeps_a_large_maps_sidecar_naming_and_the_map_replays_from_the_file(jupyter: Jupyter) -> None:
    path = jupyter.server.write_notebook(NAME, CELLS)
    (path.parent / SIDECAR).unlink(missing_ok=True)
    nb = jupyter.open(NAME)
    nb.run_all()
    nb.wait_cells_done(what="Run All: the map, live")
    assert nb.output_text(2).strip() == "30"
    saved = nb.save()
    nb.shot("map-saved")
    block = saved["metadata"][METADATA_KEY]
    assert block["records"] == [] and [n["file"] for n in block["sidecars"]] == [SIDECAR], block
    read = read_sidecar(path.parent / SIDECAR, naming=naming_from_json(block["sidecars"][0], where="metadata"))
    assert read.unchanged and len(read.records) == 30
    outputs = saved["cells"][1]["outputs"]
    assert all("sidecars" not in o.get("metadata", {}).get(METADATA_KEY, {}) for o in outputs), "its copy was moved"

    nb.restart_kernel()
    nb.run_all()
    nb.wait_cells_done(what="Run All after the restart: the map replays")
    nb.shot("map-replayed")
    assert nb.output_text(2).strip() == "0", "no model call: every item replayed from the sidecar"
