"""The running step, reachable from anywhere inside it through a context variable.

Tools ask questions through `run.terminal`, which has no handle on the step it is called from; the scope is how a
question reaches the current step's view and record, and how a step's undo work is registered. A context variable
(not a Run attribute) keeps concurrent steps under `asyncio.gather` apart.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .events import Event
from .payloads import JsonValue


@dataclass(frozen=True)
class Question:
    """A question asked during a step and its answer, as recorded."""

    text: str
    """The screen's text."""
    inputs: tuple[str, ...]
    """The labels of its inputs."""
    answer: JsonValue
    """The validated answer as JSON."""


@dataclass
class StepScope:
    """What the running step offers the code inside it.

    "Work" that a failed or interrupted step wipes: its result, its transcript and record (never written), the
    answers it collected, its scratch folder, and anything registered with `on_undo`.
    """

    role: str
    """The role's name."""
    emit: Callable[[Event], None] = field(repr=False)
    """Sends an event to the step's views."""
    questions: list[Question] = field(default_factory=list)
    """The questions asked so far, with their answers."""
    view: Any = field(default=None, repr=False)
    """The step's view, where a terminal that draws inside it (the notebook's) shows questions."""
    _undo: list[Callable[[], object]] = field(default_factory=list, repr=False)
    _scratch: Path | None = field(default=None, repr=False)

    def on_undo(self, undo: Callable[[], object]) -> None:
        """Register work to undo if the step fails or is interrupted (run newest first)."""
        self._undo.append(undo)

    def scratch_dir(self) -> Path:
        """A folder for this step's files, created on first use and removed if the step fails."""
        if self._scratch is None:
            # A role's name may hold characters a file name can't (a "/" would point into a missing folder).
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.role)[:40]
            self._scratch = Path(tempfile.mkdtemp(prefix=f"agl-{safe}-"))
            scratch = self._scratch
            self.on_undo(lambda: shutil.rmtree(scratch, ignore_errors=True))
        return self._scratch

    def wipe(self) -> list[BaseException]:
        """Run the undo work, newest first; return what went wrong rather than hide the step's own error."""
        errors: list[BaseException] = []
        while self._undo:
            try:
                self._undo.pop()()
            except Exception as e:  # an undo failing must not mask why the step failed
                errors.append(e)
        self.questions.clear()
        return errors


current_scope: ContextVar[StepScope | None] = ContextVar("agl_notebook_step", default=None)
