"""Saved views in real notebooks run by ``agl-notebook execute`` (nbclient, a real kernel) and checked by nbval.

A 2 MB tool result is cut in the saved view (the record keeps it whole, and ``run.outcomes`` shows it on request);
a planted secret holding ``& ' " < >`` is in no saved output of a map, its items, or a comparison, nor in the notebook
exported to HTML by nbconvert.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat as _nbformat
import pytest

from agl_notebook._view_values import VIEW_VALUE_BYTES
from agl_notebook.cli import main
from agl_notebook.notebook.nbfile import METADATA_KEY
from tests.notebook.test_saved_views import leaked, planted_secret
from tests.support.nbval import nbval

nbformat: Any = _nbformat  # partly typed; its notebook builders are not
v4: Any = _nbformat.v4
RESULT_BYTES = 2_000_000

BIG_SETUP = f"""import hashlib
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Query:
    text: str = describe("What to fetch.")

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

async def fetch(query: Query) -> ToolResult:
    page = "".join(f"line {{i:07d}} of a big page\\n" for i in range({RESULT_BYTES} // 26 + 1))
    return ToolResult(page[:{RESULT_BYTES}])

MODEL = ScriptedModel([{{"calls": [{{"name": "fetch", "args": {{"text": "big"}}}}]}},
                       {{"calls": [{{"name": "answer", "args": {{"text": "done"}}}}]}}])
role = Role(name="fetcher", instructions="Fetch.", tools=[tool("fetch", "Fetch a page.", Query, fetch),
            reporting_tool("answer", "Give the answer.", Answer)])
run = Run(model=MODEL)"""

# "The live view may show more on request": the step's outcome (and its record) keep the tool result whole.
WHOLE = """whole = [block.content for message in run.outcomes[-1].transcript for block in message.content
         if block.type == "tool_result"][0]
print(len(whole.encode()), hashlib.sha256(whole.encode()).hexdigest())"""


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def outputs(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for cell in nb["cells"] for o in cell.get("outputs", [])]


def test_a_2_mb_tool_result_is_cut_in_the_saved_view_and_kept_whole_in_its_record(tmp_path: Path) -> None:
    path = tmp_path / "big.ipynb"
    cells = [BIG_SETUP, 'answer = await run.step(role, "fetch it")', WHOLE]
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), path)
    assert cli("execute", path) == 0
    size = path.stat().st_size
    nb = json.loads(path.read_text(encoding="utf-8"))
    (view,) = [o for o in outputs(nb) if METADATA_KEY in o.get("metadata", {})]
    printed = "".join(next(o["text"] for o in outputs(nb) if o["output_type"] == "stream")).split()
    length, sha = int(printed[0]), printed[1]
    assert length == RESULT_BYTES
    page = "".join(view["data"]["text/html"])
    assert f"[cut: {length:,} bytes in full, sha256 {sha}; the record keeps it whole]" in page
    assert len(page.encode()) < VIEW_VALUE_BYTES + 10_000
    (record,) = view["metadata"][METADATA_KEY]["records"]
    kept = [b["content"] for m in record["transcript"] for b in m["content"] if b["type"] == "tool_result"]
    assert hashlib.sha256(kept[0].encode()).hexdigest() == sha  # the record keeps everything
    # Before the cap the saved notebook held the result twice (4.97 MB): in the record and in the HTML.
    assert size < RESULT_BYTES * 1.1, size
    # Run again (replayed from the record): the same view and size; and nbval compares it equal.
    assert cli("execute", path) == 0
    again = json.loads(path.read_text(encoding="utf-8"))
    assert [o.get("data") for o in outputs(again)] == [o.get("data") for o in outputs(nb)]
    assert abs(path.stat().st_size - size) < 100
    checked = nbval(path)
    assert checked.returncode == 0, checked.stdout[-3000:]


LEAKY_SETUP = """import json, os
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

PLANTED = os.environ["AGL_TEST_SERVICE_PASSWORD"]

@dataclass(frozen=True)
class Query:
    text: str = describe("What to find.")

@dataclass(frozen=True)
class Details:
    cause: str = describe("Why.")
    lines: list[int] = describe("Where.")

@dataclass(frozen=True)
class Finding:
    title: str = describe("A title.")
    details: Details | None = describe("What was found.", default=None)
    notes: list[str] | None = describe("Loose notes.", default=None)

async def look_up(query: Query) -> ToolResult:
    if query.text.startswith("bad"):
        raise RuntimeError(f"{'the login failed ' * 9}for {PLANTED} and more")
    return ToolResult(f"found it for {PLANTED}")

def script(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"]
    if len(request.messages) == 1:  # the planted value streamed in two deltas (split at its space), then a call
        return {"text": f"I see {PLANTED} here", "calls": [{"name": "look_up", "args": {"text": text}}]}
    args = {"title": f"{'a long title ' * 4}{PLANTED}", "details": {"cause": PLANTED, "lines": [1]},
            "notes": [PLANTED, json.dumps(PLANTED)]}
    return {"calls": [{"name": "report_finding", "args": args}]}

role = Role("finder", instructions="Find.", accepts=(Query,), tools=[tool("look_up", "Look.", Query, look_up),
            reporting_tool("report_finding", "Report.", Finding)])
INPUTS = [Query(f"good {PLANTED}"), Query(f"bad {PLANTED}"), Query(f"{'padding ' * 6}{PLANTED}")]
run = Run(model=ScriptedModel(script))"""


@pytest.fixture(scope="module")
def leaky_notebook(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The notebook with a map, a comparison and a step over a planted secret, run by ``agl-notebook execute``."""
    secret = planted_secret()
    path = tmp_path_factory.mktemp("leaky") / "leaky.ipynb"
    cells = [
        LEAKY_SETUP,
        "results = await run.map(role, INPUTS)",
        "results",
        'grid = await run.compare({"a": role, "b": role}, INPUTS)\ngrid',
        "finding = await run.step(role, INPUTS[0])  # its view only: the payload's own repr is the person's",
    ]
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)  # the kernel inherits it: its scrubber learns it
        assert cli("execute", path) == 0
    return path, secret


def test_a_planted_secret_with_html_characters_is_in_no_saved_view_nor_the_html_export(
    leaky_notebook: tuple[Path, str],
) -> None:
    path, secret = leaky_notebook
    nb = json.loads(path.read_text(encoding="utf-8"))
    shown = [
        "".join(o["data"][mime])
        for o in outputs(nb)
        for mime in ("text/plain", "text/html")
        if mime in o.get("data", {})
    ]
    assert len(shown) >= 8 and any("agl-grid" in s for s in shown) and any("agl-map" in s for s in shown)
    assert any("[REDACTED]" in s and "RuntimeError" in s for s in shown)
    exported = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-nbconvert"), "--to", "html", "--stdout", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "agl-grid" in exported
    for output in outputs(nb):  # the saved file, but for the records its views carry (below)
        output.get("metadata", {}).pop(METADATA_KEY, None)
    texts = [*shown, exported, json.dumps(nb, ensure_ascii=False), json.dumps(nb)]
    assert not leaked(texts, secret), leaked(texts, secret)


def test_the_saved_records_keep_no_json_escaped_echo_of_the_planted_secret(leaky_notebook: tuple[Path, str]) -> None:
    path, secret = leaky_notebook
    assert not leaked([path.read_text(encoding="utf-8")], secret)


def test_a_large_maps_sidecar_keeps_no_planted_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The map's and the comparison's records in sidecar files (every record, a failure record too) hold no secret."""
    secret = planted_secret()
    path = tmp_path / "leaky.ipynb"
    cells = [
        "%env AGL_NOTEBOOK_SIDECAR_BYTES=0\n" + LEAKY_SETUP,  # every map keeps its records in a sidecar file
        "results = await run.map(role, INPUTS)",
        'grid = await run.compare({"a": role, "b": role}, INPUTS)\ngrid',
    ]
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), path)
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    assert cli("execute", path) == 0
    sidecars = sorted(tmp_path.glob("*.agl.jsonl"))
    assert len(sidecars) >= 2, sorted(p.name for p in tmp_path.iterdir())
    texts = [p.read_text(encoding="utf-8") for p in sidecars]
    assert any('"failure"' in t for t in texts), "the failed item's failure record is in a sidecar too"
    assert any("[REDACTED]" in t for t in texts), "the planted value reached the records, scrubbed"
    every_file = [p.read_text(encoding="utf-8", errors="replace") for p in tmp_path.iterdir() if p.is_file()]
    assert not leaked(every_file, secret), leaked(every_file, secret)
