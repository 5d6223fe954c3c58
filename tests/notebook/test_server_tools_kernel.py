"""A notebook whose server tool results hold a secret, recorded headlessly in a real kernel and replayed under nbval
(issue 29): the saved notebook holds no spelling of the secret, and the replay draws what the live run drew although
it draws from the scrubbed record (a URL that held the secret is text live, so it is text replayed too)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from agl_notebook.cli import main
from tests.notebook.test_view_thinking import planted
from tests.support.nbval import nbval
from tests.support.oracle_notebook import nbformat, v4

SETUP = """\
import os
from dataclasses import dataclass
from agl_notebook import CodeExecution, Role, Run, ScriptedModel, WebFetch, WebSearch, describe, reporting_tool
from agl_notebook.server_tools import scripted_code_execution, scripted_fetch, scripted_search

S = os.environ["AGL_TEST_PLANTED_TOKEN"]

@dataclass(frozen=True)
class Finding:
    answer: str = describe("The answer.")

SCRIPT = [{
    "blocks": [
        *scripted_search("s1", "q " + S, [("Title " + S, "https://t.example/" + S), ("Plain", "https://t.example/p")]),
        *scripted_fetch("s2", "https://t.example/p", "Page " + S, "page text " + S),
        *scripted_code_execution("s3", "echo " + S, stdout="out " + S),
    ],
    "cited": [{"text": "Cited.", "citations": [{"type": "web_search_result_location", "url": "https://t.example/" + S,
                                                "title": "T", "cited_text": "c " + S, "encrypted_index": "idx"}]}],
    "calls": [{"name": "report", "args": {"answer": "done"}}],
}]
role = Role(name="researcher", instructions="Go.", tools=[reporting_tool("report", "Report.", Finding)],
            server_tools=[WebSearch(max_uses=2), WebFetch(citations=True), CodeExecution()])"""


def test_a_secret_in_server_tool_results_is_in_no_saved_output_and_the_replay_equals_the_live_run(
    tmp_path: Path, clean_environment: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    path = tmp_path / "researcher.ipynb"
    step = 'await Run(model=ScriptedModel(SCRIPT)).step(role, "go")'
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(SETUP), v4.new_code_cell(step)]), path)
    assert main(["execute", str(path), "--record"]) == 0

    saved = path.read_text()
    for spelled in (secret, json.dumps(secret)[1:-1], html.escape(secret), secret[8:20]):
        assert spelled not in saved
    assert "page text [REDACTED]" in saved, "the fetched page is kept, scrubbed"

    done = nbval(path, {"AGL_TEST_PLANTED_TOKEN": secret})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 model calls" in done.stdout
