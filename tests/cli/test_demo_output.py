"""What ``make demo`` prints: each notebook, what its kernel replayed, the model calls made, and how to open them.

The demo's own command (the last one ``make -n demo`` names) runs for real over the repository's notebooks/, and
its output is read. The counts it must print are derived here from the notebooks themselves, not from the run:
each saved display of a recorded unit (its output metadata's provenance names a record) is one unit that replays,
unless its cell asks for mode ``refresh`` or ``off`` (those run live on the scripted model); a record that no
display names is a map item's (a map's display names none of its items), and replays as one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat as _nbformat

from agl_notebook import Role, Run, ScriptedModel, _tally, reporting_tool
from agl_notebook.notebook.nbfile import METADATA_KEY, PROVENANCE_KEY
from tests.cli.test_makefile import would_run
from tests.support.nbval import nbval
from tests.support.paths import ROOT

nbformat: Any = _nbformat  # partly typed; its notebook builders are not

HEADING = "What each notebook did, counted in its kernel (model calls are blocked under nbval):"
REPLAYED = re.compile(r"(\d+) (steps?|map items?|JSON-function calls?|client-tools runs?) replayed from its recordings")
LIVE_MODE = re.compile(r"""mode=["'](refresh|off)["']""")


def expected_replays(notebook: dict[str, Any]) -> dict[str, int]:
    """How many units the notebook replays under nbval: in all, map items, JSON-function calls (see the docstring).

    A JSON-function call's record keeps its tape; a map item's record is named by no display, nor by another record
    as its previous version.
    """
    records = {record["id"]: record for record in notebook["metadata"].get(METADATA_KEY, {}).get("records", [])}
    named: set[str] = set()
    replays: list[str] = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        ids = [
            provenance["record_id"]
            for output in cell.get("outputs", [])
            if isinstance(provenance := output.get("metadata", {}).get(PROVENANCE_KEY), dict)
            and provenance.get("record_id")
        ]
        named.update(ids)
        if not LIVE_MODE.search("".join(cell["source"])):
            replays += ids
    # A record another one names as its previous version (docs/iterating.md) is kept, not replayed.
    previous = {r["change"]["previous"] for r in records.values() if isinstance(r.get("change"), dict)}
    map_items = sum(1 for record_id in records if record_id not in named and record_id not in previous)
    calls = sum(1 for record_id in replays if "tape" in records.get(record_id, {}))
    return {"all": len(replays) + map_items, "map items": map_items, "JSON-function calls": calls}


def summary(stdout: str) -> dict[str, str]:
    """The summary's line of each notebook, by file name."""
    lines = stdout.splitlines()
    assert HEADING in lines, stdout
    found: dict[str, str] = {}
    for line in lines[lines.index(HEADING) + 1 :]:
        if not line.startswith("  "):
            break
        name, _, said = line.strip().partition(": ")
        found[name] = said
    return found


def replayed(said: str) -> dict[str, int]:
    """How many units of each kind (singular: "map item") the line says were replayed."""
    return {kind.removesuffix("s"): int(n) for n, kind in REPLAYED.findall(said)}


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def test_make_demo_says_what_each_notebook_replayed_with_no_model_call_and_ends_with_how_to_open_them(
    tmp_path: Path,
) -> None:
    venv = Path(sys.prefix)
    command = would_run("demo", venv)[-1]  # the demo's own command, as the Makefile spells it
    assert command == f"{venv}/bin/pytest --nbval -p no:cacheprovider -q notebooks/"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGL_NOTEBOOK_", "PYTEST_"))}

    done = subprocess.run(
        shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr
    said = summary(done.stdout)
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 8
    assert list(said) == [path.name for path in notebooks]
    for path in notebooks:
        line = said[path.name]
        expected = expected_replays(json.loads(path.read_text(encoding="utf-8")))
        counts = replayed(line)
        assert sum(counts.values()) == expected["all"], (path.name, line, expected)
        assert counts.get("map item", 0) == expected["map items"], line
        assert counts.get("JSON-function call", 0) == expected["JSON-function calls"], line
        if expected["all"] == 0:  # no recordings (testing with the scripted model): it says what ran instead
            assert "run on the scripted model" in line, line
        assert line.endswith("; 0 model calls"), line
    assert sum(sum(replayed(line).values()) for line in said.values()) >= 30
    assert done.stdout.rstrip("\n").splitlines()[-2:] == [
        "Open them in JupyterLab:",
        f"  {shown(venv / 'bin' / 'jupyter')} lab notebooks/",
    ]


BLOCKED_CELL = """from dataclasses import dataclass
from agl_notebook import Role, Run, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

role = Role(name="oracle", instructions="Answer.", model="claude-haiku-4-5",
            tools=[reporting_tool("answer", "Give the answer.", Answer)])
await Run().step(role, "What is six times seven?", mode="off")"""


def test_a_model_call_under_nbval_is_counted_and_said(tmp_path: Path) -> None:
    folder = tmp_path / "nbs"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BLOCKED_CELL)]), folder / "calls.ipynb")
    plain = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7")])
    nbformat.write(plain, folder / "plain.ipynb")  # never imports agl_notebook: no line of its own

    done = nbval(folder)

    assert done.returncode != 0  # the call was refused, so its cell failed
    assert "ModelCallBlockedError" in done.stdout
    said = summary(done.stdout)
    assert said == {
        "calls.ipynb": "1 step ended in an error; 1 model call (refused: model and network calls are blocked here, "
        "so its cell failed)"
    }
    assert done.stdout.rstrip("\n").splitlines()[-1].endswith(" lab nbs/")


def test_a_run_of_notebooks_without_agl_notebook_prints_no_summary(tmp_path: Path) -> None:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7")]), tmp_path / "plain.ipynb")
    done = nbval(tmp_path / "plain.ipynb")
    assert done.returncode == 0, done.stdout
    assert HEADING not in done.stdout and "JupyterLab" not in done.stdout


@dataclass(frozen=True)
class Answer:
    text: str


def test_a_request_to_a_model_that_reaches_the_network_is_counted() -> None:
    class NetworkModel(ScriptedModel):
        network = True  # as a real backend declares: its requests are model calls

    model = NetworkModel([{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}])
    answer = reporting_tool("answer", "Give the answer.", Answer)
    role: Role[Answer] = Role(name="oracle", instructions="Answer.", tools=[answer])
    before = json.loads(_tally.snapshot())

    Run(model=model, mode="off").step_sync(role, "What is six times seven?")

    after = json.loads(_tally.snapshot())
    assert after["model_requests"] - before["model_requests"] == 1
    assert after["blocked"] == before["blocked"]
