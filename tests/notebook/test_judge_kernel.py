"""A judge scorer over a 20-item map, through the real ``anthropic`` client against the fake Messages API (inside the
kernel): recorded headlessly in a real kernel (20 judge requests), then restarted and run again (0 requests, each item
its own verdict), and real ``pytest --nbval`` passes on the saved notebook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_notebook.cli import main
from tests.support.kernel_harness import Kernel
from tests.support.nbval import nbval
from tests.support.oracle_notebook import load, nbformat, v4

SETUP = """import asyncio, json, os, random
import anthropic, httpx2
from agl_notebook import Role, Run, ScriptedModel, Verdict, judge, reporting_tool
from agl_notebook.models.anthropic import AnthropicModel
from tests.support.anthropic_api import BASE_URL, KEY, reply, stream_response, use
from tests.support.steps import Answer, Query

JUDGED = []  # the answer of every request the fake API was sent (none on a replay)

async def handle(request):
    body = json.loads(request.content)
    case = json.loads(body["messages"][0]["content"][0]["text"].split("\\n", 1)[1])
    answer = json.loads(case["answer"])["summary"]
    JUDGED.append(answer)
    await asyncio.sleep(random.random() / 50)  # verdicts finish in no fixed order
    number = int(answer.split()[-1][1:])
    verdict = {"reasoning": f"{answer!r} is about an {'even' if number % 2 == 0 else 'odd'} text",
               "score": 1 if number % 2 == 0 else 0}
    return stream_response(reply(use("toolu_1", "report_verdict", json.dumps(verdict)), stop_reason="tool_use"))

client = anthropic.AsyncAnthropic(
    api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
)
grader = Role("grader", "Judge the answer by the rubric.", model=AnthropicModel(client=client, model="claude-opus-5-5"),
              tools=[reporting_tool("report_verdict", "Report your verdict.", Verdict)])

def answer(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"]
    return {"calls": [{"name": "report_answer", "args": {"summary": "about " + text}}]}

summarizer = Role("summarizer", "Summarize the text.", accepts=(Query,), model=ScriptedModel(answer),
                  tools=[reporting_tool("report_answer", "Report what you found.", Answer)])"""
MAP = """texts = [Query(f"t{i}") for i in range(20)]
results = await Run().map(summarizer, texts, score=judge(grader, "Even texts pass."))
results"""
VERDICTS = "for i, reasoning in enumerate(results.reasonings):\n    print(i, results.scores[i], reasoning)"
COUNT = "# NBVAL_IGNORE_OUTPUT\nprint('judge requests:', len(JUDGED))"
NO_CALLS = 'if os.environ.get("AGL_NOTEBOOK_UNDER_NBVAL") == "1":\n    assert JUDGED == [], JUDGED'
CELLS = (SETUP, MAP, VERDICTS, COUNT, NO_CALLS)
EXPECTED = "\n".join(
    f"{i} {float(i % 2 == 0)} 'about t{i}' is about an {'even' if i % 2 == 0 else 'odd'} text" for i in range(20)
)


def test_a_judge_over_20_items_records_20_verdicts_replays_them_after_a_restart_and_passes_nbval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = tmp_path / "judged.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in CELLS]), notebook)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["execute", str(notebook), "--record"]) == 0
    saved = load(notebook)
    cells = saved["cells"]
    outputs = [
        ("".join(o.get("text", "")) or "".join(o.get("data", {}).get("text/plain", "")))
        for o in (out for cell in cells for out in cell["outputs"])
    ]
    assert "judge requests: 20" in "\n".join(outputs)
    assert "".join(cells[2]["outputs"][0]["text"]).strip() == EXPECTED
    table = "".join(cells[1]["outputs"][0]["data"]["text/plain"])
    assert "20 items: 20 done, 0 failed, mean score 0.50 (95% CI " in table
    assert "| verdict | status" in table and "'about t3' is about an odd text" in table
    records = saved["metadata"]["agl_notebook"]["records"]
    assert sorted(r["role"] for r in records) == ["grader"] * 20 + ["summarizer"] * 20

    # Restart and run all: every cell again in a new kernel, mode auto: nothing is asked of the API.
    kernel = Kernel(cwd=tmp_path, env={"AGL_NOTEBOOK_PATH": str(notebook)})
    try:
        for source in (SETUP, MAP):
            kernel.run(source, timeout=120)
        verdicts = kernel.execute(VERDICTS)
        kernel.wait_reply(verdicts)
        assert kernel.stream(verdicts).strip() == EXPECTED  # each item its own verdict
        count = kernel.execute("print(len(JUDGED), sum(i.replayed for i in results.items))")
        kernel.wait_reply(count)
        assert kernel.stream(count).strip() == "0 20"
    finally:
        kernel.close()

    result = nbval(notebook, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CELLS)} passed" in result.stdout
    assert json.loads(notebook.read_text(encoding="utf-8")) == saved, "nbval changed nothing"
