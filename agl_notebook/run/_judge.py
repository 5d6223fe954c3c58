"""Judges: a score computed by a model, as steps of a judge role run inside the map item they score.

A map's ``score`` may be ``async``; while it runs, `current_scoring` names the item it scores. A step started then
(by `judge`'s scorer, or by ``await run.step(judge_role, ...)`` in a score of your own) is not numbered by the order
steps start or finish in the cell: its fingerprint gets a ``judged`` part naming the map, the item and the repeat, so
its record id is the same however the items' scores interleave, and a replay gives each verdict back to its item.
It is kept in the map's store, beside the item's own record (the map's records block or its sidecar file), and is
replayed with it. A judge step that fails keeps a failure record as a map item does, so mode ``replay`` shows the
same failed score; the item's own record stays. See docs/evaluating.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._canonical import digest
from .._map_scope import current_scoring
from ..errors import InputError
from ..payloads import describe, dump
from ..replay.fingerprint import Fingerprint
from ..replay.modes import Mode, resolve_mode
from ..roles import Role
from ._engine import Context, run_unit
from ._stats import MAX_SCORE, averageable

if TYPE_CHECKING:
    from ..models.base import Model
    from ._step import StepPlan


@dataclass(frozen=True)
class JudgeCase:
    """What a judge role is given: the rubric, the item's input and the answer to judge (each as text)."""

    rubric: str = describe("How to judge the answer: what makes it right, and what makes it wrong.")
    input: str = describe("The input the answer was given for (JSON, or its text).")
    answer: str = describe("The answer to judge (JSON).")


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict: a payload a judge role can report, and what a judge scorer gives a map."""

    reasoning: str = describe("Why the answer earns its score, in a few sentences.")
    score: float = describe("The score, from 0 (wrong) to 1 (right).")


@dataclass(frozen=True)
class Scoring:
    """The map item a score is being computed for, and how its steps run (see the module docstring)."""

    map_key: str
    index: int
    repeat: int
    mode: Mode
    context: Context
    model: Callable[[Role[Any]], tuple[Model, str]]
    plan: Callable[[Role[Any], object, tuple[Model, str], Any], StepPlan]

    async def step(self, role: Role[Any], value: object, mode: Mode | None) -> Any:
        """Run (or replay) one step of ``role`` on ``value``, numbered by (map, item, repeat); its outcome."""
        __tracebackhide__ = True
        plan = self.plan(role, value, self.model(role), None)
        parts = dict(plan.fingerprint.parts)
        parts["judged"] = digest({"map": self.map_key, "item": self.index, "repeat": self.repeat})[:16]
        plan.fingerprint = Fingerprint(parts, digest(parts)[:32])  # type: ignore[arg-type]
        return await run_unit(plan, resolve_mode(step=mode, run=self.mode), self.context)


class Judge:
    """A scorer made by `judge`: each item's answer judged by one step of a judge role (see `judge`)."""

    def __init__(self, role: Role[Any], rubric: str) -> None:
        self.role = role
        self.rubric = rubric

    async def __call__(self, input: object, result: object) -> Verdict:
        __tracebackhide__ = True
        scoring = current_scoring.get()
        if scoring is None:
            raise InputError("A judge scorer scores the items of run.map(score=...) or run.compare(score=...).")
        case = JudgeCase(self.rubric, _text(input), _text(result))
        outcome = await scoring.step(self.role, case, None)
        reported = outcome.result
        score = getattr(reported, "score", None)
        if score is None and isinstance(reported, dict):
            score = reported.get("score")
        reasoning = getattr(reported, "reasoning", None)
        if reasoning is None and isinstance(reported, dict):
            reasoning = reported.get("reasoning")
        if isinstance(score, bool):
            score = 1.0 if score else 0.0
        if not isinstance(score, int | float):
            from .._secrets import scrub_text, secrets_from_environment

            said = scrub_text(repr(reported), secrets_from_environment())[:80]  # scrubbed before it is cut
            raise InputError(f"The judge {self.role.name!r} reported no number or bool as its score: {said}")
        if not averageable(score):  # NaN, infinite, or an int too large to be a float
            raise InputError(
                f"The judge {self.role.name!r} reported the score {score!r:.40}: a score is a finite number of at most "
                f"{MAX_SCORE:g} either way."
            )
        return Verdict("" if reasoning is None else str(reasoning), float(score))

    def __repr__(self) -> str:
        return f"judge({self.role.name!r}, {self.rubric!r:.60})"


def judge(role: Role[Any], rubric: str) -> Judge:
    """A score function (for ``run.map(score=...)`` and ``run.compare``) that asks ``role`` to judge each answer.

    Each item's score is one step of ``role`` on a `JudgeCase` (the rubric, the item's input and its answer as
    JSON); the role reports its verdict with its reporting tool, whose payload has a ``score`` (a number or a bool)
    and, to be shown in the map's table, a ``reasoning`` (`Verdict` is such a payload). The steps are recorded with
    the map's items and replayed with them.

    Raises:
        InputError: ``role`` is not a role, has no reporting tool, its reported payload has no ``score`` field, it
            does not accept a `JudgeCase`, or ``rubric`` is empty: before anything runs.
    """
    if not isinstance(role, Role):
        raise InputError(f"judge(role, rubric) takes a Role, not {role!r:.60}.")
    if not isinstance(rubric, str) or not rubric.strip():
        raise InputError(f"judge({role.name!r}, rubric): the rubric is the text the judge judges by, not {rubric!r}.")
    reporting = role.reporting_tool
    if reporting is None:
        raise InputError(
            f"judge({role.name!r}, ...): the role has no reporting tool, so it could never give a verdict; give it "
            "tools=[reporting_tool('report_verdict', 'Report your verdict.', Verdict)]."
        )
    properties = reporting.input_schema.get("properties")
    if not isinstance(properties, dict) or "score" not in properties:
        raise InputError(
            f"judge({role.name!r}, ...): its reporting tool {reporting.name!r} reports no 'score' field; report a "
            "payload with a score (a number or a bool), such as agl_notebook.Verdict."
        )
    if role.accepts and JudgeCase not in role.accepts:
        raise InputError(f"judge({role.name!r}, ...): the role must accept JudgeCase, the case it is given to judge.")
    return Judge(role, rubric)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(dump(value), ensure_ascii=False, sort_keys=True)
    except Exception:
        return repr(value)
