"""The ``agl-notebook`` command as a person pipes it: ``agl-notebook list NB | head``, and ``--version``.

The reader of the output is gone before the command writes (the pipe's read end is closed when it starts), which is
what ``| head`` does to a long listing: every command must end quietly, with no traceback, and exit 141 (128 +
SIGPIPE, what a shell reports for a command that SIGPIPE ended).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agl_notebook
from tests.support.paths import ROOT

FIRST_STEP = ROOT / "notebooks" / "01_first_step.ipynb"
RUN_COMMAND = "import sys; from agl_notebook.cli import main; sys.exit(main(sys.argv[1:]))"


def run_into_a_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``agl-notebook ARGS`` with its standard output a pipe nobody reads any more."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-c", RUN_COMMAND, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["list", "NB"],
        ["list", "NB", "--json"],
        ["explain", "NB", "9"],
        ["batches", "list", "NB"],
        ["consolidate", "NB"],
        ["gc", "NB", "--dry-run"],
        ["--help"],
        ["list", "--help"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_a_command_whose_reader_went_away_ends_quietly(tmp_path: Path, args: list[str]) -> None:
    notebook = tmp_path / "01_first_step.ipynb"
    shutil.copyfile(FIRST_STEP, notebook)
    before = notebook.read_bytes()

    done = run_into_a_closed_pipe([str(notebook) if a == "NB" else a for a in args], tmp_path)

    assert "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipeError" not in done.stderr, done.stderr
    # argparse writes --help and --version itself and ignores a failed write (so exits 0); every command exits 141.
    assert done.returncode == (0 if args[-1] in ("--help", "--version") else 141), done.stderr
    assert notebook.read_bytes() == before, "a command cut short writes nothing"


def test_a_listing_piped_to_head_shows_its_first_line_and_no_traceback(tmp_path: Path) -> None:
    if shutil.which("head") is None or shutil.which("sh") is None:
        pytest.skip("no sh or head")
    notebook = tmp_path / "01_first_step.ipynb"
    shutil.copyfile(FIRST_STEP, notebook)
    listing = " ".join([sys.executable, "-c", f'"{RUN_COMMAND}"', "list", str(notebook)])
    done = subprocess.run(
        ["sh", "-c", f"{listing} | head -n 1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr, done.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from agl_notebook.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"agl-notebook {agl_notebook.__version__}\n"
