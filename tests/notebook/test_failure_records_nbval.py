"""A notebook whose map had failed, unrun (Stop) and budget-refused items, and whose compare had a failed item,
recorded headlessly (``agl-notebook execute --record``, a real kernel), passes real ``pytest --nbval``: each item's
failure record replays the failure the saved output shows. Mode auto runs exactly those items again."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from tests.support.nbval import nbval
from tests.support.oracle_notebook import load, nbformat, v4

SETUP = """import os
from dataclasses import dataclass
from agl_notebook import Claude, Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Note:
    text: str = describe("The note.")

@dataclass(frozen=True)
class Summary:
    title: str = describe("A title.")

SEEN = []  # every note a scripted model was asked about (none under nbval)

def reply(request):
    note = request.messages[0].text.split('"text": "')[1].split('"')[0]
    SEEN.append(note)
    if note.startswith("bad"):
        return {"text": "I will not report."}  # the agent never reports: RoleIncompleteError
    if note.startswith("boom"):
        raise ConnectionError("the backend refused the token " + os.environ.get("FAILURE_NB_TOKEN", "?"))
    return {"calls": [{"name": "report_summary", "args": {"title": "about " + note}}]}

def strict(request):
    note = request.messages[0].text.split('"text": "')[1].split('"')[0]
    SEEN.append(note)
    if note == "a":
        return {"text": "No."}
    return {"calls": [{"name": "report_summary", "args": {"title": "strictly " + note}}]}

report = reporting_tool("report_summary", "Hand back the summary.", Summary)
role = Role("summarizer", "Summarize the note.", tools=[report], model=ScriptedModel(reply), reminders=0)
strict_role = Role("summarizer", "Summarize the note.", tools=[report], model=ScriptedModel(strict), reminders=0)
priced = Role("priced", "Summarize the note.", tools=[report], model=Claude.OPUS, max_tokens=256)

# The person's Stop, pressed once five items ended, while recording only (the variable is unset under nbval).
from agl_notebook.notebook.map_view import NotebookMapView
_pressed = NotebookMapView.stop_requested
NotebookMapView.stop_requested = property(
    lambda view: _pressed.fget(view) or (
        "STOP_AFTER" in os.environ and view._state.done + view._state.failed >= int(os.environ["STOP_AFTER"])
    )
)"""
MAP = """notes = [Note(t) for t in ("a", "bad 1", "b", "boom", "c", "d", "e")]
results = await Run().map(role, notes, concurrency=1)"""
TABLE = "results"
ITEM = "results[3]"
BUDGET = "refused = await Run(budget_usd=0.0).map(priced, [Note('x'), Note('y')], concurrency=1)\nrefused"
COMPARE = "await Run().compare({'plain': role, 'strict': strict_role}, [Note('a'), Note('bad 2'), Note('f')])"
SEEN_CELL = "# NBVAL_IGNORE_OUTPUT\nprint(sorted(set(SEEN)))"
NO_CALLS = 'if os.environ.get("AGL_NOTEBOOK_UNDER_NBVAL") == "1":\n    assert SEEN == [], SEEN'
CELLS = (SETUP, MAP, TABLE, ITEM, BUDGET, COMPARE, SEEN_CELL, NO_CALLS)


def text_of(output: dict[str, Any], mime: str = "text/plain") -> str:
    return "".join(output["data"][mime])


def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cells: tuple[str, ...] = CELLS) -> tuple[Path, str]:
    notebook = tmp_path / "failures.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), notebook)
    token = "ft" + secrets.token_hex(10)  # a secret only this run knows, planted in an exception's message
    monkeypatch.setenv("FAILURE_NB_TOKEN", token)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-" + "not-a-real-key")  # the budget refuses before any request
    monkeypatch.setenv("STOP_AFTER", "5")
    assert main(["execute", str(notebook), "--record"]) == 0
    monkeypatch.delenv("STOP_AFTER")
    return notebook, token


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    return record(tmp_path, monkeypatch)


def test_a_recorded_notebook_with_failed_unrun_and_refused_items_passes_nbval(recorded: tuple[Path, str]) -> None:
    notebook, token = recorded
    saved = load(notebook)
    cells = saved["cells"]
    table = text_of(cells[2]["outputs"][0])
    assert "7 items (stopped): 3 done, 2 failed, 2 not run" in table
    assert "failed: RoleIncompleteError" in table and "failed: ConnectionError" in table
    assert "RecordedItemError" not in json.dumps(saved)
    assert "failed: BudgetExceededError" in text_of(cells[4]["outputs"][0])
    assert "failed: RoleIncompleteError" in text_of(cells[5]["outputs"][0], "text/html")
    assert token not in notebook.read_text(encoding="utf-8"), "the planted secret is scrubbed everywhere"
    kinds = [r["failure"]["status"] for r in saved["metadata"]["agl_notebook"]["records"] if r["kind"] == "failure"]
    assert sorted(kinds) == ["failed"] * 6 + ["not_run"] * 2  # 2 + 2 refused + 2 in the compare; 2 not run

    result = nbval(notebook, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CELLS)} passed" in result.stdout

    # Without the failure records (as before them), the replay cannot show the failures: nbval fails.
    stripped = load(notebook)
    block = stripped["metadata"]["agl_notebook"]
    block["records"] = [r for r in block["records"] if r["kind"] != "failure"]
    notebook.write_text(json.dumps(stripped), encoding="utf-8")
    failed = nbval(notebook, {})
    assert failed.returncode != 0 and "ReplayMissError" in failed.stdout


def test_a_large_map_s_failure_records_live_in_its_sidecar_and_nbval_replays_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook, token = record(tmp_path, monkeypatch, ("%env AGL_NOTEBOOK_SIDECAR_BYTES=0\n" + SETUP, *CELLS[1:]))
    block = load(notebook)["metadata"]["agl_notebook"]
    assert not [r for r in block["records"] if r["kind"] == "failure"], "every map's records moved to its sidecar"
    lines = [json.loads(line) for line in (tmp_path / "summarizer.agl.jsonl").read_text(encoding="utf-8").splitlines()]
    statuses = [line["failure"]["status"] for line in lines if line["kind"] == "failure"]
    assert sorted(statuses) == ["failed", "failed", "not_run", "not_run"]
    assert token not in (tmp_path / "summarizer.agl.jsonl").read_text(encoding="utf-8")
    result = nbval(notebook, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CELLS)} passed" in result.stdout


def test_mode_auto_runs_exactly_the_failed_and_unrun_items_again(recorded: tuple[Path, str]) -> None:
    notebook, _ = recorded
    assert main(["execute", str(notebook)]) == 0  # mode auto, no Stop this time
    seen = "".join(load(notebook)["cells"][6]["outputs"][0]["text"])
    # The failed (bad 1, boom), the unrun (d, e) and the compare's failed items ran live; the finished ones replayed.
    assert seen == str(sorted({"a", "bad 1", "boom", "d", "e", "bad 2"})) + "\n", seen
    table = text_of(load(notebook)["cells"][2]["outputs"][0])
    assert "7 items: 5 done, 2 failed" in table and "not run" not in table


def test_list_shows_failure_records_and_counts_no_cost_for_them(
    recorded: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    notebook, token = recorded
    capsys.readouterr()
    assert main(["list", str(notebook)]) == 0
    listed = capsys.readouterr()
    shown = listed.out + listed.err
    assert "(not run)" in shown and "(failed: BudgetExceededError)" in shown
    assert "8 of them are failure records" in shown
    assert main(["list", "--json", str(notebook)]) == 0
    as_json = json.loads(capsys.readouterr().out)
    failures = [r for r in as_json["recordings"] if "failure" in r]
    assert len(failures) == 8 and all(r["tokens"] == 0 and r["cost_usd"] is None for r in failures)
    assert as_json["cost"]["recorded_missing"] == 0, "a refused item's failure record is not a missing cost"
    assert token not in shown
