"""A map against its previous run: each item beside its previous version, counted, and the scores compared.

An item that ran live because its role changed pairs with its previous version by (role, input digest, occurrence),
found through the map's index (`agl_notebook.replay.versions.VersionIndex`), one lookup per item. Its record keeps
what the view needs of that version (``change``: the previous result whole up to a size, or its failure), so a
replay draws the same comparison with no other record kept (docs/iterating.md).

The counts: **newly failing** (the previous version finished, this one failed), **newly passing** (the reverse),
and among items that finished both times, **improved**, **regressed** and **unchanged** by score (unscored maps:
unchanged or **changed** by result). The mean score before and after each carry a 95% interval, and their paired
difference its interval and sentence (`agl_notebook.run._stats`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..payloads import JsonValue
from ._stats import Interval, PairedDifference, averageable, input_scores, mean_interval, paired_difference

if TYPE_CHECKING:
    from ..loop import Reporting


class MapItem(Protocol):
    """What pairing reads of a map's item (`agl_notebook.run._map_state.MapItem`)."""

    @property
    def index(self) -> int: ...
    @property
    def repeat(self) -> int: ...
    @property
    def input_json(self) -> JsonValue: ...
    @property
    def status(self) -> str: ...
    @property
    def result_json(self) -> JsonValue: ...
    @property
    def score(self) -> float | bool | None: ...
    @property
    def previous(self) -> PreviousItem | None: ...


class MapState(Protocol):
    """What the comparison reads of a map's state (`agl_notebook.run._map_state.MapState`)."""

    @property
    def items(self) -> Sequence[MapItem]: ...
    @property
    def inputs(self) -> int: ...
    @property
    def scored(self) -> bool: ...
    def repeats(self, index: int) -> Sequence[MapItem]: ...


Outcome = Literal["improved", "regressed", "unchanged", "changed", "newly failing", "newly passing", "still failing"]
OUTCOMES: tuple[Outcome, ...] = (
    "improved",
    "regressed",
    "unchanged",
    "changed",
    "newly failing",
    "newly passing",
    "still failing",
)


@dataclass(frozen=True, slots=True)
class PreviousItem:
    """What an item's previous version ended with, as its record's change keeps it."""

    failed: bool
    """The previous version failed (its failure record was the previous version)."""
    result_json: JsonValue
    """Its result as JSON (None when it failed, or when it was too long to keep)."""
    error: str | None = None
    """Its error's class name, when it failed."""
    score: float | bool | None = None
    """Its result scored with the map's score now (None: not scored, or the score runs steps)."""


def previous_of(change: JsonValue) -> PreviousItem | None:
    """The previous version a record's change describes, or None (no change, or not a map item's)."""
    if not isinstance(change, dict) or "previous" not in change:
        return None
    failure = change.get("previous_failure")
    if isinstance(failure, dict):
        return PreviousItem(True, None, str(failure.get("type")))
    return PreviousItem(False, change.get("previous_result"))


def scored_previous(
    previous: PreviousItem, value: object, score: Callable[..., Any] | None, reporting: Reporting | None
) -> PreviousItem:
    """``previous`` with its result scored by ``score`` as the map scores results now (a synchronous score only)."""
    if score is None or previous.failed or inspect.iscoroutinefunction(score):
        return previous
    result: object = previous.result_json
    if reporting is not None:
        if not isinstance(previous.result_json, dict):
            return previous
        built, problems = reporting.validate(previous.result_json)
        if problems:
            return previous
        result = built
    try:
        got = score(value, result)
    except Exception:  # a score that cannot take the older result: no previous score, the item still pairs
        return previous
    if inspect.isawaitable(got):
        close = getattr(got, "close", None)
        if close is not None:
            close()
        return previous
    if isinstance(got, bool) or (isinstance(got, int | float) and averageable(got)):
        return PreviousItem(False, previous.result_json, None, got if isinstance(got, bool) else float(got))
    return previous


def outcome(item: MapItem) -> Outcome | None:
    """How an ended item compares with its previous version; None without one."""
    previous = item.previous
    if previous is None or item.status not in ("done", "failed"):
        return None
    now_failed = item.status == "failed"
    if previous.failed:
        return "still failing" if now_failed else "newly passing"
    if now_failed:
        return "newly failing"
    if item.score is not None and previous.score is not None:
        before, after = float(previous.score), float(item.score)
        return "improved" if after > before else "regressed" if after < before else "unchanged"
    return "unchanged" if item.result_json == previous.result_json else "changed"


@dataclass(frozen=True)
class VsPrevious:
    """A map's comparison with its previous run."""

    counts: dict[str, int]
    """How many items had each outcome (`OUTCOMES`), zero counts included."""
    paired: int
    """How many items had a previous version."""
    before: Interval | None
    """The mean previous score (over inputs whose every paired repeat scored), with its interval."""
    after: Interval | None
    """The mean score now, over the same inputs."""
    difference: PairedDifference | None
    """After minus before, paired by input."""

    def line(self) -> str:
        """One line: the counts, then the scores and the sentence."""
        said = [f"{n} {name}" for name, n in self.counts.items() if n or name in ("improved", "regressed")]
        text = f"against the previous run ({self.paired} items paired): " + ", ".join(said)
        if self.before is not None and self.after is not None:
            text += f"; mean score before {self.before.text()}, after {self.after.text()}"
        if self.difference is not None:
            sentence = self.difference.sentence()
            text += f". {sentence[:1].upper()}{sentence[1:]}"
        return text


def vs_previous(state: MapState) -> VsPrevious | None:
    """The comparison, when any item of the map has a previous version."""
    paired = [item for item in state.items if item.previous is not None]
    if not paired:
        return None
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for item in paired:
        got = outcome(item)
        if got is not None:
            counts[got] += 1
    before: Interval | None = None
    after: Interval | None = None
    difference: PairedDifference | None = None
    if state.scored:
        old: list[list[float | None]] = []
        new: list[list[float | None]] = []
        for index in range(state.inputs):
            repeats = [r for r in state.repeats(index) if r.previous is not None]
            old.append(
                [None if r.previous is None or r.previous.score is None else float(r.previous.score) for r in repeats]
            )
            new.append([None if r.score is None else float(r.score) for r in repeats])
        a, b = input_scores(old), input_scores(new)
        both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
        if both:
            before = mean_interval([x for x, _ in both])
            after = mean_interval([y for _, y in both])
            difference = paired_difference("the previous run", a, "this run", b)
    return VsPrevious(counts, len(paired), before, after, difference)


def pairs_frame(items: Sequence[MapItem]) -> Any:
    """The pairs as a pandas DataFrame: a row per item with a previous version."""
    try:
        import pandas as pd  # type: ignore[import-untyped]  # an optional extra, loaded only when asked for
    except ImportError:
        from ..errors import InputError

        raise InputError("results.vs_previous() needs pandas: pip install 'agl_notebook[pandas]'.") from None

    rows = [
        {
            "index": item.index,
            "repeat": item.repeat,
            "input": item.input_json,
            "outcome": outcome(item),
            "previous_result": None if item.previous is None else item.previous.result_json,
            "previous_error": None if item.previous is None else item.previous.error,
            "previous_score": None if item.previous is None else item.previous.score,
            "result": item.result_json,
            "score": item.score,
            "status": item.status,
        }
        for item in items
        if item.previous is not None
    ]
    return pd.DataFrame(
        rows,
        columns=[
            "index",
            "repeat",
            "input",
            "outcome",
            "previous_result",
            "previous_error",
            "previous_score",
            "result",
            "score",
            "status",
        ],
    )
