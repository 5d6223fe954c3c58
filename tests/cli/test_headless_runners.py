"""papermill, nbconvert and ``jupyter execute`` replay a recorded notebook: real runners in subprocesses, real kernels.

Each notebook is the oracle notebook (tests/support/oracle_notebook.py): a scripted oracle, one step, then a cell
printing how many requests the scripted model served (0 on a replay).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from agl_notebook.notebook.locate import PATH_VARIABLE, locate
from agl_notebook.notebook.nbfile import records_in_notebook
from tests.support.loopback_messages import CLAUDE_SETUP, CLAUDE_STEP, Served, fake_key, messages_server
from tests.support.oracle_notebook import NOTEBOOK_SETTINGS, load, make_notebook, nbformat, printed_calls, v4
from tests.support.paths import ROOT
from tests.support.planner_notebook import CELLS as PLANNER_CELLS

pytest.importorskip("papermill")


@pytest.fixture(scope="module")
def runner_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a runner: no agl_notebook settings, and papermill sees the package's engine entry point.

    The entry point is declared in pyproject.toml; an editable install made before it was added lacks it, so it is
    provided here, exactly as declared, in a distribution-info folder of its own on PYTHONPATH.
    """
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    engines = declared["project"]["entry-points"]["papermill.engine"]
    info = tmp_path_factory.mktemp("entry") / "agl_notebook_papermill_entry-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agl-notebook-papermill-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[papermill.engine]\n" + "".join(f"{name} = {target}\n" for name, target in engines.items())
    )
    env = {k: v for k, v in os.environ.items() if k not in NOTEBOOK_SETTINGS}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(info.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def recorded(path: Path) -> Path:
    """The test notebook at ``path``, executed live once (the scripted model serves 1 request) and saved."""
    make_notebook(path)
    assert main(["execute", str(path)]) == 0
    assert printed_calls(load(path)) == "1"
    return path


def all_outputs_text(nb: dict[str, Any]) -> str:
    return json.dumps([c.get("outputs", []) for c in nb["cells"]])


def test_the_engine_entry_point_is_declared() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert declared["project"]["entry-points"]["papermill.engine"] == {"agl-notebook": "agl_notebook.papermill_engine"}
    assert any(dep.startswith("papermill") for dep in declared["project"]["optional-dependencies"]["test"])


def test_papermill_replays_with_its_output_beside_the_notebook(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    notebook = recorded(tmp_path / "oracle.ipynb")
    before = notebook.read_bytes()

    done = run(["papermill", "-k", "python3", "oracle.ipynb", "oracle.out.ipynb"], tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "oracle.out.ipynb")) == "0"
    assert notebook.read_bytes() == before
    assert PATH_VARIABLE not in done.stderr  # found: no warning


def test_papermill_from_the_parent_folder_replays(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    (tmp_path / "nbs").mkdir()
    (tmp_path / "out").mkdir()
    recorded(tmp_path / "nbs" / "oracle.ipynb")

    run(["papermill", "-k", "python3", "nbs/oracle.ipynb", "out/oracle.ipynb"], tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "out" / "oracle.ipynb")) == "0"


def test_papermill_with_another_working_folder_replays(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    recorded(tmp_path / "oracle.ipynb")

    run(["papermill", "-k", "python3", "--cwd", "elsewhere", "oracle.ipynb", "out.ipynb"], tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "out.ipynb")) == "0"


def test_a_notebook_recorded_under_papermill_in_place_replays_under_papermill(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    make_notebook(tmp_path / "oracle.ipynb")

    run(["papermill", "-k", "python3", "oracle.ipynb", "oracle.ipynb"], tmp_path, runner_env)
    first = load(tmp_path / "oracle.ipynb")
    assert printed_calls(first) == "1"
    assert len(records_in_notebook(first).records) == 1

    # papermill clears the outputs, where the record travels, and writes over the notebook before the kernel starts.
    run(["papermill", "-k", "python3", "oracle.ipynb", "oracle.ipynb"], tmp_path, runner_env)

    again = load(tmp_path / "oracle.ipynb")
    assert printed_calls(again) == "0"
    assert records_in_notebook(again).records.keys() == records_in_notebook(first).records.keys()


def test_nbconvert_replays_on_a_second_run_beside_its_first_output(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    make_notebook(tmp_path / "oracle.ipynb")
    nbconvert = ["jupyter", "nbconvert", "--to", "notebook", "--execute", "oracle.ipynb"]
    run(nbconvert, tmp_path, runner_env)
    assert printed_calls(load(tmp_path / "oracle.nbconvert.ipynb")) == "1"  # nothing recorded in oracle.ipynb
    recorded(tmp_path / "oracle.ipynb")

    done = run(nbconvert, tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "oracle.nbconvert.ipynb")) == "0"
    assert PATH_VARIABLE not in done.stderr


def test_a_stale_nbconvert_copy_does_not_bring_back_cleared_records(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    recorded(tmp_path / "oracle.ipynb")
    nbconvert = ["jupyter", "nbconvert", "--to", "notebook", "--execute", "oracle.ipynb"]
    run(nbconvert, tmp_path, runner_env)
    stale = load(tmp_path / "oracle.nbconvert.ipynb")
    assert printed_calls(stale) == "0"
    assert len(records_in_notebook(stale).records) == 1

    assert main(["clear", str(tmp_path / "oracle.ipynb"), "--all"]) == 0
    run(nbconvert, tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "oracle.nbconvert.ipynb")) == "1"  # ran live: the records were cleared


def test_jupyter_execute_replays(tmp_path: Path, clean_environment: None, runner_env: dict[str, str]) -> None:
    recorded(tmp_path / "oracle.ipynb")
    (tmp_path / "oracle.nbconvert.ipynb").write_bytes((tmp_path / "oracle.ipynb").read_bytes())  # a copy beside it

    run(["jupyter", "execute", "oracle.ipynb", "--output", "replayed"], tmp_path, runner_env)

    assert printed_calls(load(tmp_path / "replayed.ipynb")) == "0"


def test_a_kernel_that_cannot_tell_its_notebook_says_so_once_on_the_runners_stderr(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str]
) -> None:
    recorded(tmp_path / "oracle.ipynb")
    (tmp_path / "oracle copy.ipynb").write_bytes((tmp_path / "oracle.ipynb").read_bytes())  # two equal notebooks

    done = run(["jupyter", "nbconvert", "--to", "notebook", "--execute", "oracle.ipynb"], tmp_path, runner_env)

    assert done.stderr.count("cannot tell which notebook it runs") == 1, done.stderr
    assert "2 notebooks" in done.stderr and "oracle copy.ipynb" in done.stderr
    assert f"{PATH_VARIABLE}=" in done.stderr
    executed = load(tmp_path / "oracle.nbconvert.ipynb")
    assert printed_calls(executed) == "1"  # ran live, as the warning says
    assert "cannot tell" not in all_outputs_text(executed)  # nothing of it in a saved output


# A kernel that cannot tell its notebook never goes live on a guess ----------------------------------------------
# The notebook's role runs on Claude; the kernel has a key-like value and the address of a counting loopback server,
# so a step that went live would show as a request there. Recorded once, the notebook then gets a copy beside it.


@pytest.fixture
def claude(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Served, dict[str, str]]]:
    """The counting server, and a runner environment with a planted key and the server's address."""
    with messages_server() as served:
        planted = {"ANTHROPIC_API_KEY": fake_key(), "ANTHROPIC_BASE_URL": served.url}
        for name, value in planted.items():
            monkeypatch.setenv(name, value)  # for `agl-notebook execute`, in this process, when recording
        yield served, runner_env | planted


def claude_notebook(path: Path, served: Served) -> Path:
    """A notebook with one step on Claude, recorded live once (one request to the server)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(CLAUDE_SETUP), v4.new_code_cell(CLAUDE_STEP)]), path)
    assert main(["execute", str(path)]) == 0
    assert served.requests == 1
    return path


def attempt(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A runner's run that may fail."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


NBCONVERT = ["jupyter", "nbconvert", "--to", "notebook", "--execute"]


@pytest.mark.parametrize(
    ("copy", "runner"),
    [
        ("claude-Copy1.ipynb", [*NBCONVERT, "claude.ipynb"]),  # JupyterLab's Duplicate
        (".~claude.ipynb", ["jupyter", "execute", "claude.ipynb"]),  # an editor's backup
        ("claude.bak.ipynb", ["papermill", "--engine", "nbclient", "-k", "python3", "claude.ipynb", "out.ipynb"]),
    ],
)
def test_a_headless_run_with_two_candidate_notebooks_makes_no_model_request(
    tmp_path: Path, claude: tuple[Served, dict[str, str]], copy: str, runner: list[str]
) -> None:
    served, env = claude
    notebook = claude_notebook(tmp_path / "claude.ipynb", served)
    (tmp_path / copy).write_bytes(notebook.read_bytes())
    before = notebook.read_bytes()

    done = attempt(runner, tmp_path, env)

    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert served.requests == 1, "no model request was made"
    assert "ModelCallBlockedError" in said
    # papermill's output is a third (a runner's copy, which gives way, but is named).
    assert re.search(r"cannot tell which notebook it runs: [23] notebooks in", said), said
    assert copy in said and "claude.ipynb" in said
    assert f"{PATH_VARIABLE}=/path/to/notebook.ipynb" in said
    assert notebook.read_bytes() == before

    # Named, the same run replays, still with no request.
    run(runner, tmp_path, env | {PATH_VARIABLE: str(notebook)})
    assert served.requests == 1


def test_a_jupyter_execute_output_copy_beside_the_notebook_in_a_subfolder_makes_no_model_request(
    tmp_path: Path, claude: tuple[Served, dict[str, str]]
) -> None:
    served, env = claude
    claude_notebook(tmp_path / "nbs" / "claude.ipynb", served)
    # The first run is alone in its folder: it replays, and leaves its copy beside the notebook.
    run(["jupyter", "execute", "nbs/claude.ipynb", "--output", "claude-run"], tmp_path, env)
    assert (tmp_path / "nbs" / "claude-run.ipynb").is_file()
    assert served.requests == 1

    done = attempt([*NBCONVERT, "nbs/claude.ipynb"], tmp_path, env)

    assert done.returncode != 0
    assert served.requests == 1
    assert "claude-run.ipynb" in done.stderr and PATH_VARIABLE in done.stderr


def test_papermill_with_its_engine_replays_with_a_copy_beside_the_notebook(
    tmp_path: Path, claude: tuple[Served, dict[str, str]]
) -> None:
    served, env = claude
    notebook = claude_notebook(tmp_path / "claude.ipynb", served)
    (tmp_path / "claude-Copy1.ipynb").write_bytes(notebook.read_bytes())

    run(["papermill", "-k", "python3", "claude.ipynb", "out.ipynb"], tmp_path, env)

    assert served.requests == 1
    assert "forty-two" in all_outputs_text(load(tmp_path / "out.ipynb"))


def test_in_mode_replay_a_kernel_that_cannot_tell_its_notebook_names_the_candidates(
    tmp_path: Path, claude: tuple[Served, dict[str, str]]
) -> None:
    served, env = claude
    notebook = claude_notebook(tmp_path / "claude.ipynb", served)
    (tmp_path / "claude (1).ipynb").write_bytes(notebook.read_bytes())

    done = attempt([*NBCONVERT, "claude.ipynb"], tmp_path, env | {"AGL_NOTEBOOK_MODE": "replay"})

    assert done.returncode != 0
    assert served.requests == 1
    said = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", done.stderr)  # a traceback's colours
    # The error itself says it, not only the kernel's line on stderr.
    assert re.search(r"ReplayMissError: [^\n]*claude \(1\)\.ipynb[^\n]*AGL_NOTEBOOK_PATH=", said), said


# A live question nobody can answer names the runner and its way to give answers ---------------------------------


@pytest.mark.parametrize(
    ("runner", "runs", "fix"),
    [
        (
            ["papermill", "-k", "python3", "meeting.ipynb", "out.ipynb"],
            "papermill runs this notebook headless",
            "set AGL_NOTEBOOK_ANSWERS=VALUE in papermill's environment (its kernel inherits it), or run it with "
            "`agl-notebook execute meeting.ipynb --answers VALUE`",
        ),
        (
            [*NBCONVERT, "meeting.ipynb"],
            "a headless runner (nbclient: jupyter nbconvert --execute, jupyter execute, a script) runs this notebook",
            "set AGL_NOTEBOOK_ANSWERS=VALUE in the environment the kernel starts with, or run it with "
            "`agl-notebook execute NOTEBOOK.ipynb --answers VALUE`",
        ),
    ],
)
def test_a_live_question_headless_names_the_runner_and_its_way_to_give_answers(
    tmp_path: Path, clean_environment: None, runner_env: dict[str, str], runner: list[str], runs: str, fix: str
) -> None:
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in PLANNER_CELLS]), tmp_path / "meeting.ipynb")

    done = attempt(runner, tmp_path, runner_env)

    assert done.returncode != 0
    said = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", done.stdout + done.stderr)  # a traceback's colours
    assert "NoAnswerError" in said
    assert f"Nobody can answer 'Which day suits you?' here: {runs}. Give the answers as VALUE" in said
    assert fix in said
    assert "nbclient or nbval" not in said

    run(runner, tmp_path, runner_env | {"AGL_NOTEBOOK_ANSWERS": '["Sunday"]'})  # the fix named works


# Choosing among the notebooks of the working folder, without a kernel -------------------------------------------


def notebook_file(path: Path, code: str, metadata: dict[str, Any] | None = None) -> Path:
    path.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": code, "metadata": {}, "outputs": [], "execution_count": None}
                ],
                "metadata": metadata or {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("copy", "metadata"),
    [
        ("nb.nbconvert.ipynb", None),
        ("nb.out.ipynb", {"papermill": {"input_path": "nb.ipynb", "output_path": "nb.out.ipynb"}}),
        ("nb.out.ipynb", {"papermill": {"input_path": "../nbs/nb.ipynb", "output_path": "nb.out.ipynb"}}),
    ],
)
def test_a_runners_copy_gives_way_to_its_notebook(tmp_path: Path, copy: str, metadata: dict[str, Any] | None) -> None:
    original = notebook_file(tmp_path / "nb.ipynb", "x = 1")
    notebook_file(tmp_path / copy, "x = 1", metadata)  # written after the notebook: the newer file

    found = locate(environ={}, user_ns={}, code="x = 1", cwd=tmp_path)

    assert found.path == original
    assert len(found.matches) == 2


def test_a_copy_alone_is_the_notebook(tmp_path: Path) -> None:
    copy = notebook_file(tmp_path / "nb.nbconvert.ipynb", "x = 1")
    notebook_file(tmp_path / "other.ipynb", "y = 2")

    assert locate(environ={}, user_ns={}, code="x = 1", cwd=tmp_path).path == copy


def test_papermill_in_place_is_not_a_copy(tmp_path: Path) -> None:
    original = notebook_file(
        tmp_path / "nb.ipynb", "x = 1", {"papermill": {"input_path": "nb.ipynb", "output_path": "nb.ipynb"}}
    )
    notebook_file(
        tmp_path / "nb.out.ipynb", "x = 1", {"papermill": {"input_path": "nb.ipynb", "output_path": "nb.out.ipynb"}}
    )

    assert locate(environ={}, user_ns={}, code="x = 1", cwd=tmp_path).path == original


def test_two_notebooks_neither_a_copy_are_not_guessed_between(tmp_path: Path) -> None:
    notebook_file(tmp_path / "a.ipynb", "x = 1")
    notebook_file(tmp_path / "b.ipynb", "x = 1")

    found = locate(environ={PATH_VARIABLE: str(tmp_path / "gone.ipynb")}, user_ns={}, code="x = 1", cwd=tmp_path)

    assert found.path is None
    assert [p.name for p in found.matches] == ["a.ipynb", "b.ipynb"]
    assert found.named == str(tmp_path / "gone.ipynb")
