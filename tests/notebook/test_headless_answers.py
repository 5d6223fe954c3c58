"""A live question in a headless run with no answer: the `NoAnswerError` names the runner in use and its way to give
answers (``--answers`` or ``AGL_NOTEBOOK_ANSWERS``). nbconvert's and papermill's are in
tests/cli/test_headless_runners.py, nbval's in tests/cli/test_nbval.py; here `agl-notebook execute`'s and a kernel
driven directly (as nbclient does)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agl_notebook.cli import main
from tests.support.kernel_harness import Kernel
from tests.support.oracle_notebook import nbformat, v4
from tests.support.planner_notebook import CELLS, SETUP


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGL_NOTEBOOK_"):
            monkeypatch.delenv(name)


def planner(path: Path) -> Path:
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in CELLS]), path)
    return path


def test_agl_notebook_execute_names_its_answers_option(
    tmp_path: Path, clean: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = planner(tmp_path / "meeting.ipynb")

    assert main(["execute", str(notebook)]) == 1

    err = capsys.readouterr().err
    assert "NoAnswerError" in err
    assert "Nobody can answer 'Which day suits you?' here: `agl-notebook execute` runs this notebook headless" in err
    assert "pass --answers VALUE (it sets AGL_NOTEBOOK_ANSWERS for the kernel)" in err
    assert "nbclient or nbval" not in err
    # The fix it names works.
    assert main(["execute", str(notebook), "--answers", '["Friday"]']) == 0
    assert "Meet on Friday" in notebook.read_text(encoding="utf-8")


def test_agl_notebook_execute_says_when_the_answers_given_ran_out(
    tmp_path: Path, clean: None, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = planner(tmp_path / "meeting.ipynb")
    data = json.loads(notebook.read_text(encoding="utf-8"))
    data["cells"].append(v4.new_code_cell('again = await run.step(planner, "Plan another meeting")'))
    notebook.write_text(json.dumps(data), encoding="utf-8")

    assert main(["execute", str(notebook), "--answers", '["Monday"]']) == 1

    err = capsys.readouterr().err
    assert "and the one answer AGL_NOTEBOOK_ANSWERS gave was taken by an earlier question" in err
    assert '(here ["<answer>", "<answer>"])' in err and "--answers VALUE" in err


@pytest.mark.parametrize("answers", [None, "[]"])
def test_a_kernel_nbclient_runs_names_the_variable_and_agl_notebook_execute(
    tmp_path: Path, clean: None, answers: str | None
) -> None:
    k = Kernel(cwd=tmp_path, env={} if answers is None else {"AGL_NOTEBOOK_ANSWERS": answers})
    try:
        k.run(SETUP)
        msg_id = k.execute('run = Run(model=MODEL)\nawait run.step(planner, "Plan a meeting")', allow_stdin=False)
        reply = k.wait_reply(msg_id)["content"]
    finally:
        k.close()
    assert reply["ename"] == "NoAnswerError"
    said = reply["evalue"]
    assert "a headless runner (nbclient: jupyter nbconvert --execute, jupyter execute, a script)" in said
    assert "set AGL_NOTEBOOK_ANSWERS=VALUE in the environment the kernel starts with" in said
    assert "`agl-notebook execute NOTEBOOK.ipynb --answers VALUE`" in said
    assert ("holds no answer" in said) == (answers == "[]")
