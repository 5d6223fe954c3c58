"""Failure records: a map item that failed, that the map's Stop left unrun, or that the budget refused keeps a record
of its failure, which mode ``replay`` replays as the same table and mode ``auto`` runs live again (docs/map.md).

The notebook side (a recorded notebook under real nbval) is tests/notebook/test_failure_records_nbval.py.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, reporting_tool
from agl_notebook.errors import (
    BudgetExceededError,
    ItemNotRunError,
    RecordedItemError,
    ReplayMissError,
    RoleIncompleteError,
)
from agl_notebook.models.base import ModelRequest
from agl_notebook.replay.records import (
    FAILURE_MESSAGE_CHARS,
    StepRecord,
    block_from_json,
    block_to_json,
    record_from_json,
)
from agl_notebook.replay.stores import MemoryStore, merge_records
from agl_notebook.run import MapItemError
from agl_notebook.run._map_state import render_map_html, render_map_text
from tests.run.test_map import ROLE, FakeMapView, Script, item_text, model, texts
from tests.support.steps import Query


def shown(results: Any) -> tuple[str, str]:
    """The map's static view, text and HTML, as its display saves it."""
    state = results._state
    return render_map_text(state), render_map_html(state)


def failures(store: MemoryStore) -> list[StepRecord]:
    return [r for r in store.records() if r.failure is not None]


class Raising:
    """Reports for every text but those in ``raising``, whose tool call... never comes: the model call raises."""

    def __init__(self, raising: dict[str, str]) -> None:
        self.raising = raising
        self.seen: list[str] = []

    async def __call__(self, request: ModelRequest) -> Any:
        text = item_text(request)
        self.seen.append(text)
        if text in self.raising:
            raise ConnectionError(self.raising[text])
        return {"calls": [{"name": "report_answer", "args": {"summary": f"about {text}"}}]}


async def test_a_replay_shows_the_failed_items_as_the_live_run_did_with_no_model_call() -> None:
    store = MemoryStore()
    live = await Run(model=model(Script({"t1", "t4"})), store=store).map(ROLE, texts(6))
    assert [f.index for f in live.failures] == [1, 4]
    kept = failures(store)
    assert [(r.failure.status, r.failure.type) for r in kept if r.failure] == [("failed", "RoleIncompleteError")] * 2
    assert [r.to_json()["kind"] for r in kept] == ["failure", "failure"]

    replayer = Script()
    replayed = await Run(model=model(replayer), store=store, mode="replay").map(ROLE, texts(6))
    assert replayer.seen == [], "mode replay never calls the model"
    assert shown(replayed) == shown(live), "the same deterministic text/plain and text/html"
    assert repr(replayed) == repr(live)
    error = replayed[1]
    assert isinstance(error, MapItemError) and isinstance(error.error, RecordedItemError)
    assert error.error.type_name == "RoleIncompleteError" and error.error.status == "failed"
    assert str(error.error) == str(live[1].error)
    assert repr(error) == repr(live[1])


async def test_mode_auto_runs_a_recorded_failure_live_again_and_its_finished_record_replaces_it() -> None:
    store = MemoryStore()
    await Run(model=model(Script({"t0", "t2"})), store=store).map(ROLE, texts(3))
    assert len(failures(store)) == 2
    retry = Script({"t2"})  # t0 succeeds now, t2 fails again
    results = await Run(model=model(retry), store=store, mode="auto").map(ROLE, texts(3))
    assert sorted(set(retry.seen)) == ["t0", "t2"], "exactly the failed items ran live again"
    assert isinstance(results[2], MapItemError) and isinstance(results[2].error, RoleIncompleteError)
    assert [r.failure is not None for r in store.records()] == [False, False, True]


async def test_stop_s_unrun_items_replay_as_not_run_and_the_map_as_stopped() -> None:
    store = MemoryStore()
    view = FakeMapView(stop_after=2)
    live = await Run(model=model(Script({"t1"})), store=store).map(ROLE, texts(7), concurrency=1, view=view)
    assert live._state.state == "stopped" and live._state.stopped == 4 and live._state.failed == 1
    assert [r.failure.status for r in failures(store) if r.failure] == ["failed"] + ["not_run"] * 4

    replayer = Script()
    replayed = await Run(model=model(replayer), store=store, mode="replay").map(ROLE, texts(7), view=FakeMapView())
    assert replayer.seen == []
    assert replayed._state.state == "stopped" and replayed._state.stopped == 4 and replayed._state.failed == 1
    assert shown(replayed) == shown(live)
    assert "4 not run" in shown(replayed)[0] and "(stopped)" in shown(replayed)[0]
    last = replayed[6]
    assert isinstance(last, MapItemError) and isinstance(last.error, RecordedItemError)
    assert last.error.type_name == "ItemNotRunError" and last.error.status == "not_run"

    # Mode auto runs them: a re-run of the cell runs the rest, as before.
    runner = Script()
    again = await Run(model=model(runner), store=store).map(ROLE, texts(7))
    assert sorted(set(runner.seen)) == ["t1", "t3", "t4", "t5", "t6"] and not again.failures


async def test_identical_inputs_keep_their_input_order_numbers_when_one_fails() -> None:
    # With concurrency 1 the failed first item used to give its occurrence number back, so the second took it: the
    # failure record and the finished record then shared one id.
    store = MemoryStore()
    calls = {"n": 0}

    async def first_fails(request: ModelRequest) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("the first one breaks")
        return {"calls": [{"name": "report_answer", "args": {"summary": "same"}}]}

    live = await Run(model=ScriptedModel(first_fails), store=store).map(ROLE, [Query("x")] * 3, concurrency=1)
    assert [isinstance(r, MapItemError) for r in live] == [True, False, False]
    assert [r.occurrence for r in store.records()] == [0, 1, 2]
    replayed = await Run(model=ScriptedModel(first_fails), store=store, mode="replay").map(
        ROLE, [Query("x")] * 3, concurrency=1
    )
    assert shown(replayed) == shown(live)


async def test_budget_refused_items_replay_with_the_budget_s_message() -> None:
    from agl_notebook import Claude
    from tests.run.test_budget import WIDE, Note, summarizer
    from tests.support.anthropic_api import CountingAPI

    store = MemoryStore()
    fake = CountingAPI()
    live = await Run(model=fake.model(), store=store, budget_usd=0.05).map(
        summarizer(), [Note(f"{i}: {WIDE}") for i in range(6)], concurrency=1
    )
    refused = [f for f in live.failures if isinstance(f.error, BudgetExceededError)]
    assert refused and len(refused) < 6
    assert {r.failure.type for r in failures(store) if r.failure} == {"BudgetExceededError"}
    asked = len(fake.costs)

    replayed = await Run(model=fake.model(), store=store, mode="replay", budget_usd=0.0).map(
        summarizer(), [Note(f"{i}: {WIDE}") for i in range(6)], concurrency=1
    )
    assert len(fake.costs) == asked, "the replay made no request"
    assert shown(replayed) == shown(live)
    assert "BudgetExceededError" in shown(replayed)[0] and "RecordedItemError" not in shown(replayed)[1]
    record = failures(store)[0]
    assert record.cost is None and "cost" not in record.to_json() and "usage" not in record.to_json()
    assert Claude.OPUS  # the budgeted model is a priced one


async def test_the_failure_record_s_message_is_scrubbed_before_it_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "zq" + secrets.token_hex(12)  # a value only this run knows, in a secret-named variable
    monkeypatch.setenv("AGL_FAILURE_TEST_TOKEN", secret)
    # The secret straddles the cut: cut first, its head would survive where the scrubber no longer sees it.
    long = "x" * (FAILURE_MESSAGE_CHARS - 6) + secret + " and more"
    store = MemoryStore()
    live = await Run(model=ScriptedModel(Raising({"t0": f"denied for {secret}", "t1": long})), store=store).map(
        ROLE, texts(2)
    )
    assert len(live.failures) == 2
    written = json.dumps(block_to_json(store.records()))
    assert secret[:6] not in written, "no part of the secret is recorded"
    short, cut = (r.failure for r in failures(store))
    assert short is not None and cut is not None
    assert short.message.startswith("denied for ") and secret not in short.message
    assert len(cut.message) < FAILURE_MESSAGE_CHARS + 60 and "more characters not recorded" in cut.message
    replayed = await Run(model=ScriptedModel(Raising({})), store=store, mode="replay").map(ROLE, texts(2))
    assert secret[:6] not in repr(replayed) + repr(replayed[0]) + repr(replayed[1])


async def test_refresh_never_replaces_a_finished_record_with_a_failure() -> None:
    store = MemoryStore()
    await Run(model=model(Script()), store=store).map(ROLE, texts(2))
    refreshed = await Run(model=model(Script({"t1"})), store=store, mode="refresh").map(ROLE, texts(2))
    assert isinstance(refreshed[1], MapItemError)
    assert all(r.finished for r in store.records()), "the person's recording of t1 stays"


async def test_a_lone_step_never_replays_a_map_item_s_failure_record() -> None:
    store = MemoryStore()
    await Run(model=model(Script({"t0"})), store=store).map(ROLE, texts(1))
    with pytest.raises(ReplayMissError, match="failure record"):
        await Run(model=model(Script()), store=store, mode="replay").step(ROLE, Query("t0"))
    runner = Script()
    assert (await Run(model=model(runner), store=store).step(ROLE, Query("t0"))).summary == "about t0"
    assert runner.seen == ["t0"], "mode auto runs it live"


async def test_a_compare_with_a_failed_item_replays_the_same_grid() -> None:
    def variant(failing: set[str]) -> Role[Any]:
        return Role(
            "summarizer",
            "Summarize the text.",
            accepts=(Query,),
            tools=[reporting_tool("report_answer", "Report what you found.", ROLE.reporting_tool.payload)],  # type: ignore[union-attr]
            model=model(Script(failing)),
        )

    store = MemoryStore()
    live = await Run(store=store).compare({"a": variant(set()), "b": variant({"t2"})}, texts(4))
    assert "failed: RoleIncompleteError" in live.render_html()
    replayed = await Run(store=store, mode="replay").compare({"a": variant(set()), "b": variant(set())}, texts(4))
    assert replayed.render_text() == live.render_text()
    assert replayed.render_html() == live.render_html()
    assert replayed._repr_mimebundle_() == live._repr_mimebundle_()


def test_old_records_still_read_and_the_block_stays_version_1() -> None:
    old: dict[str, Any] = {
        "kind": "step",
        "format": 1,
        "id": "abc",
        "parts": {"role": "r"},
        "occurrence": 0,
        "role": "r",
        "backend": "scripted:x",
        "input": "hi",
        "result": None,
        "transcript": [],
        "recorded_at": "",
    }
    assert record_from_json(old).to_json() == old
    failure: dict[str, Any] = {
        **{k: old[k] for k in ("id", "parts", "occurrence", "role", "backend", "input", "recorded_at")},
        "kind": "failure",
        "format": 1,
        "failure": {"status": "failed", "type": "ConnectionError", "message": "gone"},
    }
    read = record_from_json(failure)
    assert read.failure is not None and not read.finished and read.to_json() == failure
    block = block_from_json(block_to_json([read]), where="b")
    assert block.records == (read,) and block_to_json([read])["version"] == 1
    # A failure record of a later format is kept aside, unread, as any record this version cannot read.
    later = block_from_json({"version": 1, "records": [old, {**failure, "format": 2}]}, where="b")
    assert len(later.records) == 1 and len(later.unreadable) == 1 and "format" in later.problems[0]
    bad = block_from_json({"version": 1, "records": [{**failure, "failure": {"status": "lost"}}]}, where="b")
    assert bad.unreadable and "failure.status" in bad.problems[0]


def test_a_failure_record_never_replaces_a_finished_one_when_layers_merge() -> None:
    names: dict[str, Any] = {"id": "a", "parts": {}, "occurrence": 0, "role": "r", "backend": "b"}
    finished = record_from_json({"kind": "step", "format": 1, **names, "result": 1, "transcript": []})
    failure: dict[str, Any] = {"status": "failed", "type": "E", "message": "m"}
    failed = record_from_json({"kind": "failure", "format": 1, **names, "failure": failure})
    assert merge_records({"a": finished}, {"a": failed}) == {"a": finished}
    assert merge_records({"a": failed}, {"a": finished}) == {"a": finished}


def test_item_not_run_error_is_what_a_stopped_item_records() -> None:
    from agl_notebook.replay.records import recorded_failure

    failure = recorded_failure("not_run", ItemNotRunError("stopped"))
    assert (failure.status, failure.type, failure.message) == ("not_run", "ItemNotRunError", "stopped")
    again = recorded_failure("failed", RecordedItemError("BudgetExceededError", "over"))
    assert again.type == "BudgetExceededError", "a replayed failure records the type it carries"
