"""Notebook 11's live code, run as a person would run it, in a real kernel (nbclient), then replayed by nbval.

The notebook shows, in a markdown cell, the code that runs its comparison on Claude, on OpenAI and on a local model.
Here that code is a cell of a copy of the notebook, run by ``agl-notebook execute`` against three local fakes reached
the way a person's settings reach the real servers: Claude through ``ANTHROPIC_BASE_URL`` (the real ``anthropic``
client), ``OpenAIModel("gpt-4.1")`` through ``OPENAI_BASE_URL`` (the real ``openai`` client), and the local model at
the fake's URL in place of Ollama's ``http://localhost:11434/v1`` (the one edit made to the code). gpt-4.1 off OpenAI's
host is priced by a price table file (``AGL_NOTEBOOK_PRICES``), as a person would price it, so the live code's budget
holds. Then nbval replays the saved notebook: it passes, and no fake is asked anything more.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agl_notebook.cli import main
from agl_notebook.models.openai import NO_KEY
from agl_notebook.models.prices import PRICES
from agl_notebook.notebook.nbfile import METADATA_KEY
from tests.support import anthropic_api
from tests.support.loopback_messages import fake_key as anthropic_fake_key
from tests.support.loopback_messages import messages_server
from tests.support.nbval import nbval
from tests.support.openai_api import call, chat_server, reply
from tests.support.openai_api import fake_key as openai_fake_key
from tests.support.paths import ROOT

NOTEBOOK = ROOT / "notebooks" / "11_models_side_by_side.ipynb"
OLLAMA = "http://localhost:11434/v1"


def is_spam(request: dict[str, Any]) -> bool:
    """What the fakes judge: an email with a prize or a price in it is spam."""
    sent = json.dumps(request.get("messages", []))
    return "PRIZE" in sent or "$120" in sent


def claude(request: dict[str, Any]) -> bytes:
    verdict = json.dumps({"spam": is_spam(request)})
    return anthropic_api.sse(
        anthropic_api.reply(anthropic_api.use("toolu_1", "report_verdict", verdict), stop_reason="tool_use")
    )


def hosted(request: dict[str, Any]) -> list[str]:
    return reply(calls=(call(0, "call_1", "report_verdict", json.dumps({"spam": is_spam(request)})),))


def local(_request: dict[str, Any]) -> list[str]:
    return reply(calls=(call(0, "call_1", "report_verdict", '{"spam": false}'),))  # the local model trusts all


def kept_records(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record the notebook keeps, in its metadata and in its outputs' metadata, as JSON."""
    blocks = [notebook["metadata"].get(METADATA_KEY)]
    blocks += [o.get("metadata", {}).get(METADATA_KEY) for c in notebook["cells"] for o in c.get("outputs", [])]
    return [record for block in blocks if block for record in block.get("records", [])]


def live_code() -> str:
    """The notebook's live code: the Python block of its markdown cell, as the notebook ships it."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    blocks = [
        found.group(1)
        for cell in cells
        if cell["cell_type"] == "markdown"
        for found in [re.search(r"```python\n(.*?)```", "".join(cell["source"]), re.DOTALL)]
        if found
    ]
    (code,) = blocks
    return code


def test_notebook_11_s_live_code_runs_on_the_three_wires_in_a_kernel_then_replays_with_no_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = live_code()
    assert OLLAMA in code and 'OpenAIModel("gpt-4.1")' in code and "Claude.HAIKU" in code
    anthropic_key, openai_key = anthropic_fake_key(), openai_fake_key()
    with messages_server(claude) as anthropic, chat_server(hosted) as openai, chat_server(local) as ollama:
        notebook = tmp_path / NOTEBOOK.name
        saved = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
        live: dict[str, Any] = {
            "cell_type": "code",
            "id": "live",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
        shown: dict[str, Any] = {
            "cell_type": "code",
            "id": "shown",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
        live["source"] = code.replace(OLLAMA, ollama.url)
        shown["source"] = "grid"
        saved["cells"] += [live, shown]
        notebook.write_text(json.dumps(saved), encoding="utf-8")

        prices = tmp_path / "prices.json"
        gpt = PRICES.rates_for("openai:gpt-4.1@https://api.openai.com:443/v1")
        assert gpt is not None
        table = {"as_of": PRICES.as_of, "rates": {f"openai:gpt-4.1@{openai.url}": gpt.to_json()}}
        prices.write_text(json.dumps(table), encoding="utf-8")
        settings = {
            "ANTHROPIC_API_KEY": anthropic_key,
            "ANTHROPIC_BASE_URL": anthropic.url,
            "OPENAI_API_KEY": openai_key,  # a person's OpenAI key: it must reach no server here (none is OpenAI's)
            "OPENAI_BASE_URL": openai.url,
            "AGL_NOTEBOOK_PRICES": str(prices),
        }
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        assert main(["execute", str(notebook)]) == 0

        assert (anthropic.requests, openai.requests, ollama.requests) == (4, 4, 4)
        assert {b["model"] for b in anthropic.bodies} == {"claude-haiku-5-5"}
        assert set(openai.authorizations) == set(ollama.authorizations) == {f"Bearer {NO_KEY}"}
        text = notebook.read_text(encoding="utf-8")
        assert anthropic_key not in text and openai_key not in text
        data = json.loads(text)
        kept = kept_records(data)
        backends: dict[str, list[Any]] = {}
        for record in kept:
            backends.setdefault(record["backend"], []).append(record)
        claude_id, gpt_id, local_id = (
            "anthropic:claude-haiku-5-5",
            f"openai:gpt-4.1@{openai.url}",
            f"openai:llama3.2@{ollama.url}",
        )
        assert {len(backends[b]) for b in (claude_id, gpt_id, local_id)} == {4}
        assert all(r["cost"]["usd"] is not None for b in (claude_id, gpt_id) for r in backends[b])
        assert all(r["cost"]["usd"] == 0 and "declared_rates" in r["engine"] for r in backends[local_id])
        grid = "".join(data["cells"][-1]["outputs"][0]["data"]["text/plain"])
        for variant in ("claude_haiku", "gpt_4_1", "llama_local"):
            assert variant in grid
        assert "price unknown" not in grid and "usage unknown" not in grid
        dollars = {line.split()[0]: line.split()[2] for line in grid.splitlines()[2:5]}
        assert dollars == {"claude_haiku": "$0.0000", "gpt_4_1": "$0.0002", "llama_local": "$0.0000"}, grid
        assert "agreement on spam: 50%" in grid  # the local model trusts the two spams the others flag

        # nbval in a new kernel: every step replays (the live cell's too), and no fake is asked anything.
        replay = {"OPENAI_BASE_URL": openai.url}  # so "gpt-4.1" names the same server, as the records say
        result = nbval(notebook, replay)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert (anthropic.requests, openai.requests, ollama.requests) == (4, 4, 4)
