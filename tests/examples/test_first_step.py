"""The plain-Python example the README points to runs, and its second step replays."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "first_step.py"


def test_the_first_step_example_runs_offline_and_replays() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True)
    assert "[payload.rejected] name='look_up'" in done.stdout
    assert "[step.replayed] role='reviewer'" in done.stdout
    assert done.stdout.rstrip().endswith("model calls during the replay: 0")


def test_the_example_says_how_to_run_it_with_a_command_that_runs_it() -> None:
    # `make demo` replays the notebooks and never ran this file: the docstring names the command that does.
    doc = EXAMPLE.read_text(encoding="utf-8").split('"""')[1]
    assert "python examples/first_step.py" in doc
    assert "Run it with ``make demo``" not in doc
