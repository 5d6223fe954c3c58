"""``agl-notebook list`` over records made through the real ``openai`` client against the local fake.

A server that sent no usage ("usage unknown") and a model the price table does not know ("price unknown") are two
different things: the table, the totals and ``--json`` each tell them apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agl_notebook
from agl_notebook import Run
from agl_notebook.cli import main
from agl_notebook.models.openai import OPENAI_BASE_URL, OpenAIModel
from agl_notebook.models.prices import PRICES, Rates, declared_rates
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.replay.stores import MemoryStore
from tests.models_openai.test_openai_backend import researcher
from tests.support.openai_api import FakeChat, call, chat, reply, usage_json
from tests.support.oracle_notebook import nbformat, v4

LOCAL = "http://127.0.0.1:9/v1"


def report(summary: str, *, send_usage: bool = True, usage: dict[str, Any] | None = None) -> list[str]:
    return reply(calls=(call(0, "c", "report", json.dumps({"summary": summary})),), send_usage=send_usage, usage=usage)


def look_up(*, send_usage: bool = True) -> list[str]:
    return reply(calls=(call(0, "l", "look_up", '{"text": "x"}'),), send_usage=send_usage)


async def recorded(model: OpenAIModel, text: str) -> StepRecord:
    """The record of one live step of the researcher on ``model``."""
    store = MemoryStore()
    await Run(model=model, store=store).step(researcher(), text)
    (record,) = list(store.records())
    return record


def notebook(path: Path, records: list[StepRecord]) -> Path:
    """One code cell that ran every step; the notebook metadata keeps their records."""
    cell = v4.new_code_cell("await run.step(researcher, text)")
    cell["id"] = "ask"
    kept = [r.to_json() | {"cell_id": "ask"} for r in records]
    metadata = {METADATA_KEY: {"version": 1, "records": kept}}
    nbformat.write(v4.new_notebook(cells=[cell], metadata=metadata), path)
    return path


def listed_in_another_process(path: Path) -> dict[str, Any]:
    """``agl-notebook list --json`` of ``path`` in a new Python process (which never made the test's models)."""
    code = "import sys; from agl_notebook.cli import main; sys.exit(main(['list', '--json', sys.argv[1]]))"
    root = str(Path(agl_notebook.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, env=env)
    listed: dict[str, Any] = json.loads(out.stdout)
    return listed


async def test_list_tells_usage_unknown_from_price_unknown_in_the_table_totals_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    silent = chat(report("s", send_usage=False))  # a free local model whose server says no usage
    half_silent = chat(look_up(), report("h", send_usage=False))  # the first request said its usage, the second not
    unpriced = chat(report("u"))  # a local model nobody priced: its usage is known
    hosted = chat(report("p", usage=usage_json(1_000_000, 1_000_000)))  # gpt-4.1 on OpenAI's own host: priced
    fakes: list[tuple[FakeChat, OpenAIModel]] = [
        (silent, OpenAIModel("silent-model", client=silent.client(base_url=LOCAL), free=True)),
        (half_silent, OpenAIModel("half-silent", client=half_silent.client(base_url=LOCAL), free=True)),
        (unpriced, OpenAIModel("unpriced-model", client=unpriced.client(base_url=LOCAL))),
        (hosted, OpenAIModel("gpt-4.1", client=hosted.client(base_url=OPENAI_BASE_URL))),
    ]
    records = [await recorded(model, f"question {n}") for n, (_, model) in enumerate(fakes)]
    assert not any(fake.responses for fake, _ in fakes)  # every reply was asked for
    path = notebook(tmp_path / "models.ipynb", records)

    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[2:6]}
    by_model = {r.backend.split("@")[0].removeprefix("openai:"): rows[r.id[:12]] for r in records}
    assert "unknown" in by_model["silent-model"].split() and "usage unknown" in by_model["silent-model"]
    assert "price unknown" not in by_model["silent-model"]
    # The first request's 15 tokens are known, the second's not: at least 15.
    assert "15+" in by_model["half-silent"].split() and "usage unknown" in by_model["half-silent"]
    assert "15" in by_model["unpriced-model"].split() and "price unknown" in by_model["unpriced-model"]
    assert "usage unknown" not in by_model["unpriced-model"]
    assert "2000000" in by_model["gpt-4.1"].split() and "$10.00" in by_model["gpt-4.1"].split()
    assert out[-2] == "recorded cost: $10.00, and 2 with usage unknown, and 1 with price unknown."
    assert out[-1] == (
        f"re-recording every step today: $10.00 at the rates of {PRICES.as_of} (2 with usage unknown and 1 on "
        "models with no price left out)."
    )

    assert main(["list", "--json", str(path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["cost"] == {
        "recorded_usd": 10.0,
        "recorded_unknown": 1,
        "recorded_missing": 0,
        "today_usd": 10.0,
        "today_unknown": 1,
        "today_rates": PRICES.as_of,
        "usage_unknown": 2,
    }
    flags = {r["backend"].split("@")[0]: (r.get("usage_unknown", False), r["cost_usd"]) for r in listed["recordings"]}
    assert flags == {
        "openai:silent-model": (True, None),
        "openai:half-silent": (True, None),
        "openai:unpriced-model": (False, None),
        "openai:gpt-4.1": (False, 10.0),
    }


async def test_the_rates_a_person_gave_are_kept_in_the_record_and_priced_so_by_another_process(
    tmp_path: Path,
) -> None:
    million = usage_json(1_000_000, 1_000_000)
    free, rated, undeclared = chat(report("f", usage=million)), chat(report("r", usage=million)), chat(report("u"))
    given = Rates(1, 2, 1, 1, 0.5)
    records = [
        await recorded(OpenAIModel("local-free", client=free.client(base_url=LOCAL), free=True), "a"),
        await recorded(OpenAIModel("local-rated", client=rated.client(base_url=LOCAL), rates=given), "b"),
        await recorded(OpenAIModel("local-undeclared", client=undeclared.client(base_url=LOCAL)), "c"),
    ]
    zero = {"input": 0, "output": 0, "cache_write_5m": 0, "cache_write_1h": 0, "cache_read": 0}
    assert [r.engine for r in records] == [{"declared_rates": zero}, {"declared_rates": given.to_json()}, None]
    assert [r.cost.words() if r.cost else None for r in records] == ["$0.0000", "$3.00", "price unknown"]
    again = [record_from_json(json.loads(json.dumps(r.to_json()))) for r in records]
    assert [declared_rates(r.engine) for r in again] == [Rates(0, 0, 0, 0, 0), given, None]

    # The step replays with no request on a model made without the rates (the engine is never fingerprinted).
    store = MemoryStore()
    store.put(records[1])
    nothing = chat()
    replayed = await Run(
        model=OpenAIModel("local-rated", client=nothing.client(base_url=LOCAL)), store=store, mode="replay"
    ).step(researcher(), "b")
    assert replayed.summary == "r" and not nothing.requests

    # Another process, which never made these models: it prices each step as the person said, from the record.
    path = notebook(tmp_path / "declared.ipynb", records)
    cost = listed_in_another_process(path)["cost"]
    assert cost["recorded_usd"] == 3.0 and cost["recorded_unknown"] == 1
    assert cost["today_usd"] == 3.0 and cost["today_unknown"] == 1  # $0 + $3 today; the undeclared one unknown
