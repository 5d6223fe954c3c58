"""`run.map` outside a notebook: order, failures, scores, records and resuming, inputs, options, the Stop seam."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import InputError, Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.errors import ItemNotRunError, RoleIncompleteError
from agl_notebook.models.base import ModelRequest
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.explain import recent_misses
from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run import MapItemError
from agl_notebook.run._map_state import MapItem, MapState
from agl_notebook.run.views import StepView
from tests.support.steps import Answer, Query

ROLE: Role[Answer] = Role(
    "summarizer",
    instructions="Summarize the text.",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)


def item_text(request: ModelRequest) -> str:
    import json

    return str(json.loads(request.messages[0].text.split("\n", 1)[1])["text"])


class Script:
    """Reports "about <text>" for each item, except the texts in ``failing`` (the agent never reports)."""

    def __init__(self, failing: set[str] = frozenset(), *, jitter: bool = False) -> None:  # type: ignore[assignment]
        self.failing = set(failing)
        self.jitter = jitter
        self.running = 0
        self.most_running = 0
        self.seen: list[str] = []

    async def __call__(self, request: ModelRequest) -> Any:
        text = item_text(request)
        self.seen.append(text)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.jitter:
                await asyncio.sleep(random.random() / 200)
            if text in self.failing:
                return "I will not report."
            return {"calls": [{"name": "report_answer", "args": {"summary": f"about {text}"}}]}
        finally:
            self.running -= 1


def texts(n: int) -> list[Query]:
    return [Query(f"t{i}") for i in range(n)]


# The digest comes from the source of Script.__call__, so every Script is the same backend: records carry over.
def model(script: Script) -> ScriptedModel:
    return ScriptedModel(script.__call__)


async def test_results_come_back_in_input_order_at_most_concurrency_at_once() -> None:
    script = Script(jitter=True)
    results = await Run(model=model(script)).map(ROLE, texts(30), concurrency=4)
    assert [r.summary for r in results] == [f"about t{i}" for i in range(30)]
    assert script.most_running == 4
    assert len(results) == 30 and not results.failures


async def test_a_failed_item_is_an_error_value_with_its_transcript_and_the_others_finish() -> None:
    results = await Run(model=model(Script({"t1", "t3"}))).map(ROLE, texts(5))
    assert [isinstance(r, MapItemError) for r in results] == [False, True, False, True, False]
    failure = results[1]
    assert failure.index == 1 and failure.input == Query("t1")
    assert isinstance(failure.error, RoleIncompleteError)
    assert failure.transcript and failure.transcript[0].role == "user"
    assert [f.index for f in results.failures] == [1, 3]


async def test_a_failure_outside_the_agent_keeps_what_the_model_was_sent() -> None:
    async def broken(request: ModelRequest) -> Any:
        raise ConnectionError("the backend went away")

    results = await Run(model=ScriptedModel(broken)).map(ROLE, texts(2))
    assert [type(f.error) for f in results.failures] == [ConnectionError, ConnectionError]
    assert "t0" in results.failures[0].transcript[0].text


async def test_on_error_raise_raises_the_first_failure_in_input_order_after_every_item_ended() -> None:
    script = Script({"t4", "t2"}, jitter=True)
    with pytest.raises(RoleIncompleteError) as raised:
        await Run(model=model(script)).map(ROLE, texts(6), on_error="raise")
    assert "summarizer" in str(raised.value)
    assert sorted(set(script.seen)) == [f"t{i}" for i in range(6)]  # every item ran before the raise


async def test_finished_items_replay_and_only_the_failed_ones_run_again() -> None:
    store = MemoryStore()
    first = Script({"t2", "t5"})
    await Run(model=model(first), store=store).map(ROLE, texts(8))
    # Failed items keep failure records only (docs/map.md), which mode auto runs live again.
    assert [r.failure is not None for r in store.records()] == [i in (2, 5) for i in range(8)]
    again = Script()
    results = await Run(model=model(again), store=store).map(ROLE, texts(8))
    assert sorted(set(again.seen)) == ["t2", "t5"]  # exactly the failed ones ran
    assert not results.failures
    assert all(r.finished for r in store.records()), "their finished records replaced the failure records"


async def test_an_item_is_the_step_run_step_would_be() -> None:
    store = MemoryStore()
    await Run(model=model(Script()), store=store).map(ROLE, texts(3))
    replayed = Script()
    run = Run(model=model(replayed), store=store)
    assert await run.step(ROLE, Query("t1")) == Answer("about t1")
    assert replayed.seen == []


async def test_identical_inputs_are_numbered_in_input_order() -> None:
    store = MemoryStore()
    same = [Query("x"), Query("x"), Query("y"), Query("x")]
    await Run(model=model(Script(jitter=True)), store=store).map(ROLE, same)
    assert sorted(r.occurrence for r in store.records()) == [0, 0, 1, 2]
    again = Script()
    await Run(model=model(again), store=store).map(ROLE, same)
    assert again.seen == []


async def test_scores_per_item_and_their_mean() -> None:
    def score(query: Query, answer: Answer) -> float:
        return 1.0 if query.text in ("t0", "t1") else 0.5

    results = await Run(model=model(Script({"t3"}))).map(ROLE, texts(4), score=score)
    assert results.scores == [1.0, 1.0, 0.5, None]
    assert results.mean_score == pytest.approx(2.5 / 3)
    booleans = await Run(model=model(Script())).map(ROLE, texts(4), score=lambda q, a: q.text == "t0")
    assert booleans.scores == [True, False, False, False] and booleans.mean_score == 0.25


async def test_a_score_that_is_not_a_number_fails_the_item_but_its_record_stays() -> None:
    store = MemoryStore()

    def wrong(query: Query, answer: Answer) -> Any:
        return "good"

    results = await Run(model=model(Script()), store=store).map(ROLE, texts(2), score=wrong)
    assert [type(f.error) for f in results.failures] == [InputError, InputError]
    assert "must return a number or a bool" in str(results.failures[0].error)
    again = Script()
    fixed = await Run(model=model(again), store=store).map(ROLE, texts(2), score=lambda q, a: 1)
    assert again.seen == [] and fixed.scores == [1.0, 1.0]


async def test_a_dataframe_s_columns_name_the_payload_s_fields() -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"text": ["a", "b", "c"]})
    results = await Run(model=model(Script())).map(ROLE, frame)
    assert [r.summary for r in results] == ["about a", "about b", "about c"]
    table = results.to_pandas()
    assert list(table["summary"]) == ["about a", "about b", "about c"]
    assert list(table["status"]) == ["done"] * 3
    with pytest.raises(InputError, match=r"columns \['txt'\] are not fields of Query"):
        await Run(model=model(Script())).map(ROLE, pandas.DataFrame({"txt": ["a"]}))
    with pytest.raises(InputError, match="row 1 of the DataFrame is not a Query"):
        await Run(model=model(Script())).map(ROLE, pandas.DataFrame({"text": ["a", 3]}))


@dataclass(frozen=True)
class Other:
    name: str = describe("A name.")


@pytest.mark.parametrize(
    ("inputs", "options", "message"),
    [
        ("abc", {}, "takes a list of inputs or a pandas DataFrame, not str"),
        ([Query("a"), Other("b")], {}, r"inputs\[1\]: Role 'summarizer' accepts Query, not Other"),
        ([Query("a")], {"concurrency": 0}, "must be from 1 to 64"),
        ([Query("a")], {"concurrency": 65}, "must be from 1 to 64"),
        ([Query("a")], {"retries": -1}, "retries"),
        ([Query("a")], {"on_error": "stop"}, "'keep' or 'raise'"),
        ([Query("a")], {"name": "!!"}, "needs a letter or a digit"),
    ],
)
async def test_bad_input_is_a_clear_error_before_anything_runs(inputs: Any, options: Any, message: str) -> None:
    script = Script()
    with pytest.raises(InputError, match=message):
        await Run(model=model(script)).map(ROLE, inputs, **options)
    assert script.seen == []


class FakeMapView:
    """A map view that asks to stop once ``stop_after`` items ended, and keeps what it was given."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.stop_after = stop_after
        self.state: MapState | None = None
        self.saved: JsonObject | None = None
        self.changes = 0

    def begin(self, state: MapState) -> None:
        self.state = state

    def item_view(self, item: MapItem) -> StepView | None:
        return None

    def changed(self, item: MapItem) -> None:
        self.changes += 1

    def finish(self, saved: JsonObject) -> None:
        self.saved = saved

    @property
    def stop_requested(self) -> bool:
        assert self.state is not None
        return self.stop_after is not None and self.state.done >= self.stop_after


async def test_stop_keeps_finished_items_and_does_not_start_queued_ones() -> None:
    store = MemoryStore()
    view = FakeMapView(stop_after=3)
    results = await Run(model=model(Script()), store=store).map(ROLE, texts(10), concurrency=1, view=view)
    assert [r.summary for r in results[:3]] == ["about t0", "about t1", "about t2"]
    assert all(isinstance(r, MapItemError) and isinstance(r.error, ItemNotRunError) for r in results[3:])
    # The 3 finished items are recorded; the 7 not started keep failure records (status not_run) beside them.
    assert [r.failure.status if r.failure else "done" for r in store.records()] == ["done"] * 3 + ["not_run"] * 7
    assert view.state is not None and view.state.state == "stopped" and view.state.stopped == 7
    assert view.saved is not None and len(view.saved["records"]) == 10  # type: ignore[arg-type]


async def test_the_map_key_names_its_records_and_two_maps_of_one_key_are_numbered() -> None:
    run = Run(model=model(Script()))
    first, second = await run.map(ROLE, texts(1)), await run.map(ROLE, texts(1))
    named = await run.map(ROLE, texts(1), name="eval: v2 / dev")
    assert (first.key, second.key, named.key) == ("summarizer", "summarizer-2", "eval-v2-dev")


def test_map_sync_outside_a_kernel() -> None:
    results = Run(model=model(Script())).map_sync(ROLE, texts(3))
    assert [r.summary for r in results] == ["about t0", "about t1", "about t2"]


async def test_the_table_is_deterministic_text_and_html() -> None:
    results = await Run(model=model(Script({"t1"}))).map(ROLE, texts(3), score=lambda q, a: 1)
    text = repr(results)
    assert (
        text.splitlines()[0]
        == "map 'summarizer' of role 'summarizer': 3 items: 2 done, 1 failed, mean score 1 (95% CI 1 to 1), "
        + text.splitlines()[0].split("mean score 1 (95% CI 1 to 1), ")[1]
    )
    assert "0 | t0 | about t0 | 1 | done" in text
    assert "1 | t1 |  |  | failed: RoleIncompleteError" in text
    again = await Run(model=model(Script({"t1"}))).map(ROLE, texts(3), score=lambda q, a: 1)
    assert repr(again) == text and again._repr_html_() == results._repr_html_()
    assert "<table" in results._repr_html_() and "about t0" in results._repr_html_()


async def test_ordered_scripted_answers_are_refused_inside_a_map() -> None:
    from agl_notebook import Screen, TextInput, ToolResult, tool

    async def ask(query: Query) -> ToolResult:
        answer: str = await active[0].terminal.ask(Screen("Which day?", [TextInput("Day")]))
        return ToolResult(answer)

    asker: Role[Answer] = Role(
        "asker",
        instructions="Ask, then report.",
        accepts=(Query,),
        tools=[tool("ask", "Ask.", Query, ask), reporting_tool("report_answer", "Report.", Answer)],
    )
    script = ScriptedModel([{"calls": [{"name": "ask", "args": {"text": "x"}}]}, "done"])
    active = [Run(model=script, answers=["Monday", "Friday"])]
    results = await active[0].map(asker, texts(2))
    assert [type(f.error) for f in results.failures] == [InputError, InputError]
    assert "a map's items ask in no fixed order" in str(results.failures[0].error)
    active[0] = Run(model=script, answers=lambda screen: "Monday")  # a function of the screen is fine
    assert not [f for f in (await active[0].map(asker, texts(1))).failures if isinstance(f.error, InputError)]


async def test_an_empty_map_returns_no_results() -> None:
    results = await Run(model=model(Script())).map(ROLE, [])
    assert len(results) == 0 and results.mean_score is None
    assert repr(results).startswith("map 'summarizer' of role 'summarizer': 0 items: 0 done, 0 failed")


def test_the_static_table_caps_its_rows_and_failures() -> None:
    from agl_notebook.run._map_state import FAILURES, ROWS, render_map_html, render_map_text

    items = [MapItem(i, Query(f"t{i}"), {"text": f"t{i}"}) for i in range(200)]
    state = MapState("m", "summarizer", items, fields=("summary",), state="finished")
    for item in items:
        if item.index % 5 == 4:
            item.status, item.error = "failed", RoleIncompleteError("gave up", role="summarizer", transcript=())
            state.failed += 1
            state.failures.append(item)
        else:
            item.status, item.result_json = "done", {"summary": "x" * 100}
            state.done += 1
    text = render_map_text(state)
    rows = [line for line in text.splitlines() if line.split(" | ")[0].isdigit()]
    assert len(rows) == ROWS and all(len(cell) <= 60 for line in rows for cell in line.split(" | "))
    listed = [line for line in text.splitlines() if line.split(":")[0].isdigit()]
    assert len(listed) == FAILURES and listed[0].startswith("54: failed: RoleIncompleteError: gave up")
    assert text.endswith(f"... and {30 - FAILURES} more failures")
    assert f"and {30 - FAILURES} more failures" in render_map_html(state)


async def test_a_live_map_reads_its_stores_records_a_bounded_number_of_times_and_a_miss_still_explains() -> None:
    """A map's live items do not each copy every record of the store (that was O(N²): a 10,000-item map paid 1.2 s);
    an item's miss, asked later, still names what its recording differs in."""

    class Counting(MemoryStore):
        reads = 0

        def records(self) -> Sequence[StepRecord]:
            Counting.reads += 1
            return super().records()

    store = Counting()
    await Run(model=model(Script()), store=store).map(ROLE, texts(40))
    edited = dataclasses.replace(ROLE, instructions="Summarize the text in one line.")
    Counting.reads = 0
    results = await Run(model=model(Script()), store=store).map(edited, texts(40))
    assert [r.summary for r in results] == [f"about t{i}" for i in range(40)]
    assert Counting.reads <= 3, f"the store's records were read {Counting.reads} times for 40 live items"
    miss = recent_misses()[-1]
    assert "differs in: instructions." in miss.explain()
    assert Counting.reads <= 4


async def test_an_item_run_again_after_its_failure_explains_that_only_a_failure_record_was_there() -> None:
    """A failed item's failure record, run live again in mode auto: its miss, explained afterwards (when the store
    holds the item's new finished record under the same id), still says what there was when it missed."""
    store = MemoryStore()
    await Run(model=model(Script({"t1"})), store=store).map(ROLE, texts(2))
    assert [r.failure is not None for r in store.records()] == [False, True]
    await Run(model=model(Script()), store=store).map(ROLE, texts(2))
    assert [r.failure is not None for r in store.records()] == [False, False]
    explained = recent_misses()[-1].explain()
    assert "holds only a failure record of this step of role 'summarizer'" in explained, explained
