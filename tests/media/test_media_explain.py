"""`agl-notebook explain` (what `%agl explain` says in a kernel) on notebook 13 with one pixel of its photo changed:
the step would not replay, and the nearest recording differs in its input (issue 28, item 4). A real kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agl_notebook.cli import main
from tests.support.media import png

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
STEP_CELL = "15-06"  # the cell that runs the inspector's step


def test_one_changed_pixel_makes_explain_say_the_input_differs(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = tmp_path / "15_images_and_documents.ipynb"
    shutil.copy(NOTEBOOKS / notebook.name, notebook)
    shutil.copytree(NOTEBOOKS / "media", tmp_path / "media")
    assert (tmp_path / "media" / "gauge.png").read_bytes() == png(96, 64, shade=30)  # how the photo was made

    assert main(["explain", str(notebook), STEP_CELL]) == 0
    assert "replays from recording" in capsys.readouterr().out

    (tmp_path / "media" / "gauge.png").write_bytes(png(96, 64, shade=30, changed=(40, 30)))
    assert main(["explain", str(notebook), STEP_CELL]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "would not replay" in out[0] and "differs in: input." in out[0]
    assert out[1].endswith("differs in: input")
