"""Evaluations: repeats (``epochs``), judge scorers, and the intervals and sentences a map and a comparison show."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import InputError, JudgeCase, Role, Run, ScriptedModel, Verdict, describe, judge, reporting_tool
from agl_notebook._map_scope import current_map_item
from agl_notebook.models.base import ModelRequest
from agl_notebook.replay.stores import MemoryStore
from tests.support.steps import Answer, Query

ROLE: Role[Answer] = Role(
    "answerer",
    instructions="Answer the question.",
    accepts=(Query,),
    tools=[reporting_tool("report_answer", "Report what you found.", Answer)],
)


def item_text(request: ModelRequest) -> str:
    return str(json.loads(request.messages[0].text.split("\n", 1)[1])["text"])


class Repeating:
    """Answers "a<i>" for q<i>; on every input whose number is a multiple of 5, its repeat 1 answers "other"."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    async def __call__(self, request: ModelRequest) -> Any:
        text = item_text(request)
        item = current_map_item.get()
        repeat = item.repeat if item is not None else -1
        self.seen.append((text, repeat))
        disagrees = int(text[1:]) % 5 == 0 and repeat == 1
        return {"calls": [{"name": "report_answer", "args": {"summary": "other" if disagrees else "a" + text[1:]}}]}


def questions(n: int) -> list[Query]:
    return [Query(f"q{i}") for i in range(n)]


def right(query: Query, answer: Answer) -> bool:
    return answer.summary == "a" + query.text[1:]


async def test_epochs_3_over_50_inputs_keeps_150_records_replays_them_and_counts_consistency() -> None:
    store = MemoryStore()
    script = Repeating()
    results = await Run(model=ScriptedModel(script.__call__), store=store).map(
        ROLE, questions(50), epochs=3, score=right
    )
    assert len(store.records()) == 150 and all(r.finished for r in store.records())
    assert sorted(r.occurrence for r in store.records()) == sorted([0, 1, 2] * 50)
    assert sorted(script.seen) == sorted((f"q{i}", r) for i in range(50) for r in range(3))
    assert len(results) == 50 and results.epochs == 3
    assert [r.summary for r in results] == [f"a{i}" for i in range(50)]  # results[i]: input i's first repeat
    assert [len(r) for r in results.repeats] == [3] * 50
    assert results.repeats[5][1].summary == "other"
    disagreeing = {i for i in range(50) if i % 5 == 0}
    assert results.consistency == [2 / 3 if i in disagreeing else 1.0 for i in range(50)]
    assert results.scores == [pytest.approx(2 / 3) if i in disagreeing else 1.0 for i in range(50)]
    assert results.repeat_scores[10] == (True, False, True)
    assert results.mean_score == pytest.approx((40 + 10 * 2 / 3) / 50)
    text = repr(results)
    assert "50 inputs x 3 repeats: 150 done, 0 failed" in text
    assert "every repeat agrees on 40 of 50 inputs" in text
    assert " | agree | status" in text
    assert "5 | q5 | a5 | 0.667 | 2/3 | done" in text and "6 | q6 | a6 | 1 | 3/3 | done" in text
    frame = results.to_pandas()
    assert len(frame) == 150 and list(frame.index.names) == ["index", "repeat"]
    assert frame.loc[(5, 1), "summary"] == "other"

    again = Repeating()
    replayed = await Run(model=ScriptedModel(again.__call__), store=store, mode="replay").map(
        ROLE, questions(50), epochs=3, score=right
    )
    assert again.seen == []  # no request
    assert repr(replayed) == text and replayed._repr_html_() == results._repr_html_()


async def test_a_map_without_repeats_keeps_repeat_0_s_record() -> None:
    store = MemoryStore()
    await Run(model=ScriptedModel(Repeating().__call__), store=store).map(ROLE, questions(4))
    more = Repeating()
    results = await Run(model=ScriptedModel(more.__call__), store=store).map(ROLE, questions(4), epochs=2)
    assert sorted(more.seen) == [(f"q{i}", 1) for i in range(4)]  # repeat 0 replayed the first map's records
    assert len(results.to_pandas()) == 8


@pytest.mark.parametrize("epochs", [0, -1, True, 1.5, "3"])
async def test_epochs_under_1_or_not_an_int_is_an_input_error_before_anything_runs(epochs: Any) -> None:
    script = Repeating()
    run = Run(model=ScriptedModel(script.__call__))
    with pytest.raises(InputError, match=r"epochs=\.\.\.\) takes how many times each input runs"):
        await run.map(ROLE, questions(3), epochs=epochs)
    with pytest.raises(InputError, match="epochs"):
        await run.compare({"a": ROLE, "b": ROLE}, questions(3), epochs=epochs)
    assert script.seen == []


# --- Judges -------------------------------------------------------------------------------------------------------


def judge_role(model: ScriptedModel, name: str = "judge") -> Role[Verdict]:
    return Role(
        name,
        instructions="Judge the answer by the rubric.",
        tools=[reporting_tool("report_verdict", "Report your verdict.", Verdict)],
        model=model,
    )


class Judging:
    """A judge that passes answers "a<i>" with i even and says why, naming the answer it judged."""

    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.seen: list[str] = []
        self.failing = set(failing)

    async def __call__(self, request: ModelRequest) -> Any:
        case = json.loads(request.messages[0].text.split("\n", 1)[1])
        answer = json.loads(case["answer"])["summary"]
        self.seen.append(answer)
        if answer in self.failing:
            return "I refuse to judge."
        passed = answer.startswith("a") and int(answer[1:]) % 2 == 0
        args = {"reasoning": f"{answer} is {'even' if passed else 'odd'}", "score": 1 if passed else 0}
        return {"calls": [{"name": "report_verdict", "args": args}]}


async def test_a_judge_scores_each_item_records_its_verdicts_with_the_map_and_replays_them() -> None:
    store = MemoryStore()
    judging = Judging()
    scorer = judge(judge_role(ScriptedModel(judging.__call__)), "Even answers pass.")
    script = Repeating()
    results = await Run(model=None, store=store).map(
        _with_model(ScriptedModel(script.__call__)), questions(20), score=scorer, concurrency=8
    )
    assert sorted(judging.seen) == sorted(f"a{i}" for i in range(20))
    assert results.scores == [float(i % 2 == 0) for i in range(20)]
    assert results.reasonings == [f"a{i} is {'even' if i % 2 == 0 else 'odd'}" for i in range(20)]
    assert len(store.records()) == 40  # 20 items and 20 verdicts, all in the map's store
    text = repr(results)
    assert " | score | verdict | status" in text and "3 | q3 | a3 | 0 | a3 is odd | done" in text

    again = Judging()
    replayed = await Run(model=None, store=store, mode="replay").map(
        _with_model(ScriptedModel(Repeating().__call__)),
        questions(20),
        score=judge(judge_role(ScriptedModel(again.__call__)), "Even answers pass."),
    )
    assert again.seen == []
    assert replayed.reasonings == results.reasonings and repr(replayed) == text


async def test_judge_verdicts_are_numbered_by_item_and_repeat_not_by_finishing_order() -> None:
    # Every repeat of an input gives the same answer, so the judge is asked the same question three times per input:
    # only the (map, item, repeat) numbering tells the verdicts apart. Here the judge answers by the repeat.
    def by_repeat(request: ModelRequest) -> Any:
        item = current_map_item.get()
        assert item is not None
        args = {"reasoning": f"repeat {item.repeat} of item {item.index}", "score": item.repeat / 2}
        return {"calls": [{"name": "report_verdict", "args": args}]}

    async def same(request: ModelRequest) -> Any:
        item = current_map_item.get()
        assert item is not None
        await asyncio.sleep((3 - item.repeat) * 0.02)  # live, later repeats finish (and are judged) first
        return {"calls": [{"name": "report_answer", "args": {"summary": "same"}}]}

    store = MemoryStore()
    model = ScriptedModel(same)
    scorer = judge(judge_role(ScriptedModel(by_repeat)), "Anything.")
    results = await Run(store=store).map(_with_model(model), questions(6), epochs=3, score=scorer)
    assert results.repeat_scores == [(0.0, 0.5, 1.0)] * 6
    replayed = await Run(store=store, mode="replay").map(_with_model(model), questions(6), epochs=3, score=scorer)
    assert replayed.repeat_scores == [(0.0, 0.5, 1.0)] * 6
    assert [i.reasoning for i in replayed.items] == [f"repeat {r} of item {i}" for i in range(6) for r in range(3)]


async def test_a_failed_judge_fails_the_score_and_the_item_s_own_record_stays() -> None:
    store = MemoryStore()
    judging = Judging(failing={"a2"})
    script = Repeating()
    results = await Run(store=store).map(
        _with_model(ScriptedModel(script.__call__)),
        questions(4),
        score=judge(judge_role(ScriptedModel(judging.__call__)), "r"),
    )
    assert [f.index for f in results.failures] == [2]
    assert type(results.failures[0].error).__name__ == "RoleIncompleteError"
    assert "judge" in str(results.failures[0].error)
    # The item's record stays: run again in mode replay, the item replays and the judge's failure is replayed too.
    again = Repeating()
    replayed = await Run(store=store, mode="replay").map(
        _with_model(ScriptedModel(again.__call__)),
        questions(4),
        score=judge(judge_role(ScriptedModel(judging.__call__)), "r"),
    )
    assert again.seen == [] and [f.index for f in replayed.failures] == [2]
    assert replayed.failures[0].error.type_name == "RoleIncompleteError"  # type: ignore[attr-defined]


async def test_an_async_score_of_your_own_may_run_a_judge_step_through_the_run() -> None:
    store = MemoryStore()
    judging = Judging()
    judge_it = judge_role(ScriptedModel(judging.__call__))
    run = Run(store=store)

    async def score(query: Query, answer: Answer) -> float:
        from agl_notebook import JudgeCase

        verdict = await run.step(
            judge_it, JudgeCase("Even answers pass.", query.text, json.dumps({"summary": answer.summary}))
        )
        return verdict.score

    results = await run.map(_with_model(ScriptedModel(Repeating().__call__)), questions(6), score=score)
    assert results.scores == [float(i % 2 == 0) for i in range(6)]
    judged = [r for r in store.records() if r.role == "judge"]
    assert len(judged) == 6 and {r.occurrence for r in judged} == {0}


@dataclass(frozen=True)
class Grade:
    label: str = describe("A label.")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: judge(Role("j", "Judge.", model=ScriptedModel([])), "r"), "has no reporting tool"),
        (
            lambda: judge(
                Role("j", "Judge.", tools=[reporting_tool("report_grade", "Grade.", Grade)], model=ScriptedModel([])),
                "r",
            ),
            "reports no 'score' field",
        ),
        (lambda: judge(judge_role(ScriptedModel([])), "  "), "the rubric is the text"),
        (lambda: judge("judge", "r"), "takes a Role"),  # type: ignore[arg-type]
    ],
)
def test_a_judge_that_cannot_give_a_verdict_is_an_input_error_before_anything_runs(make: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        make()


async def test_a_score_that_returns_something_else_fails_its_item() -> None:
    results = await Run().map(_with_model(ScriptedModel(Repeating().__call__)), questions(2), score=lambda q, a: "yes")
    assert [type(f.error) for f in results.failures] == [InputError, InputError]

    async def later(query: Query, answer: Answer) -> Any:
        return None

    results = await Run().map(_with_model(ScriptedModel(Repeating().__call__)), questions(2), score=later)
    assert "must return a number or a bool, not None" in str(results.failures[0].error)


def _with_model(model: ScriptedModel) -> Role[Answer]:
    return Role(ROLE.name, ROLE.instructions, accepts=(Query,), tools=list(ROLE.tools), model=model)


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e308, -1e308, 10**400])
async def test_a_score_that_is_infinite_or_too_large_to_average_fails_its_item(value: Any) -> None:
    results = await Run().map(_with_model(ScriptedModel(Repeating().__call__)), questions(3), score=lambda q, a: value)
    assert [type(f.error) for f in results.failures] == [InputError] * 3
    assert "a finite number" in str(results.failures[0].error)
    assert results.mean_score is None and results.score_interval is None
    assert "score" in repr(results) and "<" in results._repr_html_()


@dataclass
class WholeVerdict:
    score: int = describe("The score, a whole number.")


async def test_a_judge_reporting_a_score_too_large_for_a_float_fails_the_item_with_an_input_error() -> None:
    huge = {"calls": [{"name": "report_verdict", "args": {"score": 10**400}}]}
    grader: Role[WholeVerdict] = Role(
        "grader",
        "Judge.",
        accepts=(JudgeCase,),
        tools=[reporting_tool("report_verdict", "Report.", WholeVerdict)],
        model=ScriptedModel(lambda request: huge),
    )
    role = _with_model(ScriptedModel(Repeating().__call__))
    results = await Run().map(role, questions(2), score=judge(grader, "Right?"))
    assert [type(f.error) for f in results.failures] == [InputError] * 2
    assert "a finite number" in str(results.failures[0].error)


@dataclass
class WordVerdict:
    reasoning: str = describe("Why.")
    score: str = describe("A word, not a number.")


async def test_a_judge_reporting_no_number_is_refused_without_a_piece_of_a_secret_it_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refusal quotes the payload cut short: a secret across the cut is scrubbed before it."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    said = {"calls": [{"name": "report_verdict", "args": {"reasoning": "w" * 30 + secret, "score": "good"}}]}
    grader: Role[WordVerdict] = Role(
        "grader",
        "Judge.",
        accepts=(JudgeCase,),
        tools=[reporting_tool("report_verdict", "Report.", WordVerdict)],
        model=ScriptedModel(lambda request: said),
    )
    store = MemoryStore()
    role = _with_model(ScriptedModel(Repeating().__call__))
    results = await Run(store=store).map(role, questions(1), score=judge(grader, "Right?"))
    (failure,) = results.failures
    assert "reported no number or bool as its score" in str(failure.error)
    texts = [
        str(failure.error),
        repr(results),
        results._repr_html_(),
        *(json.dumps(r.to_json()) for r in store.records()),
    ]
    assert not leaked(texts, secret), leaked(texts, secret)


async def test_a_score_returning_text_is_refused_without_a_piece_of_a_secret_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    role = _with_model(ScriptedModel(Repeating().__call__))
    results = await Run().map(role, questions(1), score=lambda q, a: "y" * 40 + secret)
    (failure,) = results.failures
    texts = [str(failure.error), repr(results), results._repr_html_()]
    assert "must return a number or a bool" in texts[0]
    assert not leaked(texts, secret), leaked(texts, secret)
