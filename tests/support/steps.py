"""What many step tests share: payload classes, the scripted calls that fill them, and small event helpers.

A payload here is the same class in every test that uses it, so its schema, its description texts and the
fingerprints of steps taking it are the same everywhere; a test whose payload differs defines its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agl_notebook import Screen, TextInput, describe
from agl_notebook.events import Event


@dataclass(frozen=True)
class Query:
    text: str = describe("What to look up.")


@dataclass(frozen=True)
class Request:
    text: str = describe("What to review.")


@dataclass(frozen=True)
class Review:
    issues: list[str] = describe("Every problem you found.")


@dataclass(frozen=True)
class Answer:
    summary: str = describe("What you found.")


class Boom(Exception):
    """The error a test's handler raises, to see where it ends up."""


def look(text: str) -> dict[str, Any]:
    """A scripted call of the ``look_up`` tool (its payload: `Query`)."""
    return {"name": "look_up", "args": {"text": text}}


def report(issues: Any) -> dict[str, Any]:
    """A scripted call of the ``report_review`` reporting tool (its payload: `Review`; any value, to test checks)."""
    return {"name": "report_review", "args": {"issues": issues}}


def which(text: str) -> Screen[str]:
    """A question with one text answer."""
    return Screen(text, [TextInput("Answer")])


def types(events: Sequence[Event]) -> list[str]:
    return [e.type for e in events]


LIFECYCLE = ("step.started", "step.replayed", "step.finished", "step.failed")
"""The event types of a step's (or a unit's) own lifecycle."""


def visible(events: Sequence[Event]) -> list[Event]:
    """What a view draws: every event but the step lifecycle (a replay adds step.replayed)."""
    return [e for e in events if e.type not in LIFECYCLE]
