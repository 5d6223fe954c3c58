"""The example notebooks: with a key set they run live against the Messages API (here a local fake on 127.0.0.1),
and the scripted recordings they carry miss, as they should: they were made with another backend."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agl_notebook.cli import main
from tests.support.anthropic_api import reply, sse, text, use
from tests.support.paths import ROOT

NOTEBOOKS = ROOT / "notebooks"
REPORT = json.dumps({"title": "Live from the fake", "key_points": ["It answered over HTTP."]})


class FakeMessagesAPI(BaseHTTPRequestHandler):
    """Answers every POST /v1/messages with a streamed reply that reports a summary."""

    bodies: ClassVar[list[dict[str, Any]]] = []
    keys: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        FakeMessagesAPI.bodies.append(json.loads(self.rfile.read(length)))
        FakeMessagesAPI.keys.append(" ".join(f"{k}={v}" for k, v in self.headers.items()))
        body = sse(reply(text("Summarising."), use("toolu_live_1", "report_summary", REPORT), stop_reason="tool_use"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_api() -> Iterator[str]:
    FakeMessagesAPI.bodies, FakeMessagesAPI.keys = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeMessagesAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_with_a_key_the_first_notebook_runs_live_against_the_messages_api(
    tmp_path: Path, fake_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = tmp_path / "01_first_step.ipynb"
    shutil.copy(NOTEBOOKS / "01_first_step.ipynb", notebook)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api)
    assert main(["execute", str(notebook), "--output", str(tmp_path / "live.ipynb")]) == 0

    assert len(FakeMessagesAPI.bodies) == 1, "the scripted recording missed, so the step ran live"
    sent = FakeMessagesAPI.bodies[0]
    assert sent["model"] == "claude-sonnet-5-5"
    assert [t["name"] for t in sent["tools"]] == ["report_summary"]
    assert "sk-test-not-a-real-key" in FakeMessagesAPI.keys[0], "sent with the key from the environment"
    live = json.loads((tmp_path / "live.ipynb").read_text(encoding="utf-8"))
    step_output = next(o for o in live["cells"][8]["outputs"] if "text/html" in o.get("data", {}))
    assert "recorded with anthropic:claude-sonnet-5-5" in "".join(step_output["data"]["text/plain"])
    printed = "".join(live["cells"][10]["outputs"][0]["text"])
    assert printed == "Live from the fake\n- It answered over HTTP.\n"
    record = step_output["metadata"]["agl_notebook"]["records"][0]
    assert "sk-test-not-a-real-key" not in json.dumps(record), "the key never reaches a recording"
