"""A notebook recorded live (the real anthropic client in a real kernel, against a local fake Messages API that
reports usage) shows each step's recorded dollars; replayed under nbval after a rate in the price table changed,
every saved output is still equal."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agl_notebook.cli import main
from agl_notebook.models.prices import PRICES
from tests.support.anthropic_api import reply, sse, use
from tests.support.nbval import nbval
from tests.support.oracle_notebook import nbformat, v4

SETUP = """from dataclasses import dataclass
from agl_notebook import Claude, Role, Run, describe, reporting_tool

@dataclass(frozen=True)
class Summary:
    title: str = describe("A title.")

role = Role("summarizer", "Summarize the note.", tools=[reporting_tool("report_summary", "Hand it back.", Summary)],
            model=Claude.OPUS, max_tokens=256)
run = Run(budget_usd=1.0)"""
STEP = "summary = await run.step(role, 'A note about prices.')"
SHOW = "print(summary.title)"


class UsageAPI(BaseHTTPRequestHandler):
    """Answers every POST /v1/messages with a report, and usage: 1,200 input tokens, 300 written to the cache."""

    requests: ClassVar[int] = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        UsageAPI.requests += 1
        events = reply(
            use("toolu_1", "report_summary", json.dumps({"title": "Prices"})),
            stop_reason="tool_use",
            input_tokens=1200,
            output_tokens=80,
            cache_creation=300,
        )
        body = sse(events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_api() -> Iterator[str]:
    UsageAPI.requests = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), UsageAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_replay_after_a_price_change_leaves_every_saved_output_equal(
    tmp_path: Path, fake_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = tmp_path / "costs.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in (SETUP, STEP, SHOW)]), notebook)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-" + "not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api)
    assert main(["execute", str(notebook)]) == 0
    assert UsageAPI.requests == 1

    saved = json.loads(notebook.read_text(encoding="utf-8"))
    (output,) = saved["cells"][1]["outputs"]
    opus = PRICES.rates_for("claude-opus-5-5")
    assert opus is not None
    usd = (1200 * opus.input + 300 * opus.cache_write_5m + 80 * opus.output) / 1_000_000
    cost = f"cost: 1,580 tokens, ${usd:.4f} (rates of {PRICES.as_of})"
    assert cost in "".join(output["data"]["text/plain"])
    assert cost.removeprefix("cost: ") in "".join(output["data"]["text/html"])
    assert "spent" not in json.dumps(output["data"]), "what the Run spent now is never saved"

    # Every rate of the model is changed (and the day): the replay's outputs stay what was saved.
    rates = {"input": 40, "output": 200, "cache_write_5m": 50, "cache_write_1h": 80, "cache_read": 2}
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"as_of": "2027-06-01", "rates": {"claude-opus-5-5": rates}}), encoding="utf-8")
    result = nbval(notebook, {"AGL_NOTEBOOK_PRICES": str(table)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert UsageAPI.requests == 1, "the replay made no model call"

    # And nbval does see a changed output: the saved one edited by a cent fails it.
    edited = json.loads(notebook.read_text(encoding="utf-8"))
    plain = edited["cells"][1]["outputs"][0]["data"]["text/plain"]
    edited["cells"][1]["outputs"][0]["data"]["text/plain"] = [line.replace(f"${usd:.4f}", "$9.9999") for line in plain]
    notebook.write_text(json.dumps(edited), encoding="utf-8")
    assert nbval(notebook, {"AGL_NOTEBOOK_PRICES": str(table)}).returncode != 0
