"""run.map in a real kernel, through the real anthropic client against the fake Messages API (inside the kernel).

Interrupted halfway, the map keeps the records of the items that finished; running the cell again sends requests
for the unfinished items only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kernel_harness import WIDGET_MIME, Kernel, started_kernel

SETUP = """
import asyncio, json
import anthropic, httpx2
from agl_notebook import Role, Run, reporting_tool
from agl_notebook.models.anthropic import AnthropicModel
from tests.support.anthropic_api import BASE_URL, KEY, reply, stream_response, use
from tests.support.steps import Answer, Query

SEEN = []    # the item of every request the fake API was sent
HANG = set()  # items whose request never gets an answer (until the kernel is interrupted)

async def handle(request):
    body = json.loads(request.content)
    text = json.loads(body["messages"][0]["content"][0]["text"].split("\\n", 1)[1])["text"]
    SEEN.append(text)
    if text in HANG:
        await asyncio.sleep(3600)
    args = json.dumps({"summary": "about " + text})
    return stream_response(reply(use("toolu_1", "report_answer", args), stop_reason="tool_use"))

client = anthropic.AsyncAnthropic(
    api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
)
summarizer = Role(
    "summarizer",
    instructions="Summarize the text.",
    model="claude-opus-5-5",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)
INPUTS = [Query(f"t{i}") for i in range(20)]
HANG.update(f"t{i}" for i in range(10, 20))
"""

CELL = "run = Run(model=AnthropicModel(client=client))\nresults = await run.map(summarizer, INPUTS, concurrency=4)"


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    with started_kernel(tmp_path, SETUP) as k:
        yield k


def live_html(kernel: Kernel) -> str:
    htmls = [state.get("html", "") for state in kernel.widgets.values() if state.get("_model_name") == "AnyModel"]
    return htmls[0] if htmls else ""


def test_an_interrupted_map_keeps_its_finished_items_and_a_re_run_requests_only_the_rest(kernel: Kernel) -> None:
    first = kernel.execute(CELL, cell_id="map-cell")
    kernel.wait_for(lambda: "10 done, 0 failed, 4 running, 6 queued" in live_html(kernel), timeout=60)
    kernel.km.interrupt_kernel()
    reply = kernel.wait_reply(first)["content"]
    assert reply["status"] == "error" and reply["ename"] == "StepInterrupted", reply
    assert "the 10 items that finished keep their records" in reply["evalue"]
    final = kernel.step_display(first)
    assert WIDGET_MIME not in final["data"]
    assert "(interrupted)" in final["data"]["text/plain"]
    assert len(final["metadata"]["agl_notebook"]["records"]) == 10
    assert kernel.widgets == {}, "no live widget is left behind"

    kernel.run("SEEN.clear(); HANG.clear()")
    second = kernel.execute(CELL, cell_id="map-cell")
    kernel.wait_reply(second)
    check = kernel.execute("print(sorted(SEEN, key=lambda t: int(t[1:])), len(results.failures))")
    kernel.wait_reply(check)
    assert kernel.stream(check) == str([f"t{i}" for i in range(10, 20)]) + " 0\n"  # only the unfinished items
    final = kernel.step_display(second)
    assert final["data"]["text/plain"].startswith("map 'summarizer' of role 'summarizer': 20 items: 20 done")
    assert len(final["metadata"]["agl_notebook"]["records"]) == 20


HEADLESS = """
from agl_notebook import Role, Run, ScriptedModel, Screen, TextInput, ToolResult, reporting_tool, tool
from tests.support.steps import Answer, Query

async def ask_day(query):
    day = await run.terminal.ask(Screen(f"Which day for {query.text}?", [TextInput("Day")]))
    return ToolResult(day)

asker = Role(
    "asker",
    instructions="Ask, then report.",
    accepts=(Query,),
    tools=[tool("ask_day", "Ask which day.", Query, ask_day), reporting_tool("report_answer", "Report.", Answer)],
)

def script(request):
    if len(request.messages) == 1:
        text = request.messages[0].text.split('"text": "')[1].split('"')[0]
        return {"calls": [{"name": "ask_day", "args": {"text": text}}]}
    return {"calls": [{"name": "report_answer", "args": {"summary": "on " + request.messages[-1].content[0].content}}]}

run = Run(model=ScriptedModel(script))
results = await run.map(asker, [Query("alpha"), Query("beta"), Query("gamma")], concurrency=3)
print([r.summary if hasattr(r, "summary") else type(r.error).__name__ for r in results])
"""


def _run_headless(tmp_path: Path, answers: object) -> str:
    import json

    import nbclient
    import nbformat as typed_nbformat

    from agl_notebook._settings import ANSWERS, set_for_kernels

    nbformat: Any = typed_nbformat  # its notebook builders are not annotated
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(HEADLESS)]
    with set_for_kernels({ANSWERS.name: json.dumps(answers)}):
        executed = nbclient.NotebookClient(nb, timeout=60, resources={"metadata": {"path": str(tmp_path)}}).execute()
    streams = [o for o in executed.cells[0].outputs if o.get("output_type") == "stream"]
    return "".join(o["text"] for o in streams)


def test_headless_answers_of_map_items_are_keyed_by_map_item_and_question(tmp_path: Path) -> None:
    keyed = {
        "asker": {
            "2": {"Which day for gamma?": "Sunday"},
            "0": {"Which day for alpha?": "Monday"},
            "1": {"Which day for beta?": "Friday"},
        }
    }
    assert _run_headless(tmp_path, keyed) == "['on Monday', 'on Friday', 'on Sunday']\n"
    # An ordered list is for single steps: a map item's question is then a NoAnswerError, and so is a missing key.
    assert _run_headless(tmp_path, ["Monday", "Friday", "Sunday"]) == str(["NoAnswerError"] * 3) + "\n"
    del keyed["asker"]["1"]
    assert _run_headless(tmp_path, keyed) == "['on Monday', 'NoAnswerError', 'on Sunday']\n"


def test_a_saved_map_replays_in_a_fresh_kernel_with_no_request_and_the_same_view(tmp_path: Path) -> None:
    import nbclient
    import nbformat as typed_nbformat

    from agl_notebook._settings import NOTEBOOK_PATH, set_for_kernels

    nbformat: Any = typed_nbformat  # its notebook builders are not annotated
    path = tmp_path / "map.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + "HANG.clear()"),
        nbformat.v4.new_code_cell(CELL),
        nbformat.v4.new_code_cell("print(len(SEEN))"),
    ]
    nbformat.write(nb, path)
    outputs = []
    for _ in range(2):  # record (a kernel of its own), save; then a fresh kernel runs the saved notebook
        with set_for_kernels({NOTEBOOK_PATH.name: str(path)}):
            executed = nbclient.NotebookClient(
                nbformat.read(path, as_version=4), timeout=120, resources={"metadata": {"path": str(tmp_path)}}
            ).execute()
        nbformat.write(executed, path)
        outputs.append([cell.get("outputs", []) for cell in executed.cells])
    recorded, replayed = outputs
    assert recorded[2][0]["text"] == "20\n" and replayed[2][0]["text"] == "0\n"  # no request the second time
    assert replayed[1][0]["data"] == recorded[1][0]["data"]
    assert replayed[1][0]["data"]["text/plain"].startswith("map 'summarizer' of role 'summarizer': 20 items: 20 done")


def test_map_sync_runs_from_a_synchronous_cell_with_its_live_view(kernel: Kernel) -> None:
    kernel.run("HANG.clear()")
    msg_id = kernel.execute(
        "run = Run(model=AnthropicModel(client=client))\n"
        "results = run.map_sync(summarizer, INPUTS[:5], concurrency=2)\n"
        "print([r.summary for r in results])",
        cell_id="sync-cell",
    )
    reply = kernel.wait_reply(msg_id)["content"]
    assert reply["status"] == "ok", reply
    assert kernel.stream(msg_id) == str([f"about t{i}" for i in range(5)]) + "\n"
    final = kernel.step_display(msg_id)
    assert WIDGET_MIME not in final["data"] and len(final["metadata"]["agl_notebook"]["records"]) == 5
    assert kernel.widgets == {}


def test_a_map_as_the_cells_last_expression_shows_its_table_once(kernel: Kernel) -> None:
    kernel.run("HANG.clear(); run = Run(model=AnthropicModel(client=client))")
    cell = kernel.execute("await run.map(summarizer, INPUTS[:3], name='last')", cell_id="last-expression")
    assert kernel.wait_reply(cell)["content"]["status"] == "ok", kernel.stream(cell)
    outputs = kernel.final_outputs(cell)
    view, result = (o for o in outputs if o["type"] in ("display_data", "execute_result"))
    assert view["type"] == "display_data" and "t2" in view["data"]["text/plain"], "the view draws the table"
    # The result is the cell's last expression: one line, not the table a second time.
    assert result["type"] == "execute_result"
    line = result["data"]["text/plain"]
    assert line.startswith("map 'last' of role 'summarizer': 3 items: 3 done, 0 failed"), line
    assert line.endswith("(the table is above)") and "t2" not in line and "\n" not in line
    assert "t2" not in result["data"]["text/html"]
    # Shown from a later cell, the results are the table again.
    later = kernel.execute("_")
    kernel.wait_reply(later)
    (shown,) = (o for o in kernel.final_outputs(later) if o["type"] == "execute_result")
    assert "t2" in shown["data"]["text/plain"] and "(the table is above)" not in shown["data"]["text/plain"]
