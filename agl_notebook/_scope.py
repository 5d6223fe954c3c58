"""The running step, reachable from anywhere inside it through a context variable.

Tools ask questions through `run.terminal`, which has no handle on the step it is called from; the scope is how a
question (or a decision on a tool call) reaches the current step's view and record, and how a step's undo work is
registered. A context variable (not a Run attribute) keeps concurrent steps under `asyncio.gather` apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._fieldwise import Fieldwise
from .payloads import JsonObject, JsonValue

if TYPE_CHECKING:
    from .events import Event

CANCELLED_BY_INTERRUPT = "agl_notebook: interrupted by the person"
"""The message of the cancellation `Run.run_sync` sends the running step on a kernel interrupt: a deliberate one,
so a step waiting for a person keeps nothing (docs/recordings.md, "Partial records")."""


@dataclass(frozen=True, eq=False, repr=False)
class Question(Fieldwise):
    """A question asked during a step and its answer, as recorded."""

    text: str
    """The screen's text."""
    inputs: tuple[str, ...]
    """The labels of its inputs."""
    answer: JsonValue
    """The validated answer as JSON."""


DecisionKind = Literal["approve", "edit", "deny"]
"""What was decided on a tool call that needed approval."""


@dataclass(frozen=True, eq=False, repr=False)
class Decision(Fieldwise):
    """A decision on one tool call that needed approval, as recorded (docs/roles-and-tools.md, "Approvals")."""

    tool_call_id: str
    """The call decided on."""
    tool: str
    """The tool's name."""
    decision: DecisionKind
    """Approved as it was, run with edited arguments, or denied."""
    always: bool = False
    """The person also chose to approve every later call of this tool in the same Run without asking."""
    arguments: JsonObject | None = None
    """For an edit: the arguments the handler ran with, as JSON."""
    message: str = ""
    """For a denial: what the agent is told, if anything was said."""
    by: str = "person"
    """Who decided: ``person`` (a person, or answers scripted for one), ``policy`` (the tool's callable policy) or
    ``setting`` (``AGL_NOTEBOOK_APPROVALS`` in a headless run)."""
    changed: tuple[str, ...] = ()
    """For an edit: the argument paths whose values the edit changed (``city``, ``address.zip``)."""


@dataclass
class StepScope:
    """What the running step offers the code inside it.

    "Work" that a failed or interrupted step wipes: its result, its transcript and record (never written), the
    answers and decisions it collected, its scratch folder, and anything registered with `on_undo`.
    """

    role: str
    """The role's name."""
    emit: Callable[[Event], None] = field(repr=False)
    """Sends an event to the step's views."""
    questions: list[Question] = field(default_factory=list)
    """The questions asked so far, with their answers."""
    decisions: list[Decision] = field(default_factory=list)
    """The decisions on tool calls that needed approval, so far."""
    on_waiting: Callable[[], object] | None = field(default=None, repr=False)
    """Called right before the step waits for a person (a question, an approval); None does nothing."""
    waiting: Literal["approval", "question"] | None = None
    """What the step waits for (or last waited for): set by `begin_waiting` before it calls `on_waiting`."""
    person_waits: bool = True
    """Whether a person (not a script, not a headless setting) answers what the step waits for, as the terminal said
    in `begin_waiting`: only then does a step keep a partial record (docs/recordings.md, "Partial records")."""
    resumed: dict[str, list[Question]] = field(default_factory=dict, repr=False)
    """A resumed step's answers from its partial record, by the id of the tool call that asked them: given again,
    in order, when the handler asks the same questions once more."""
    view: Any = field(default=None, repr=False)
    """The step's view, where a terminal that draws inside it (the notebook's) shows questions."""
    usage_unknown: bool = False
    """Whether a server answered one of the step's requests without saying its usage (its record says so)."""
    _undo: list[Callable[[], object]] = field(default_factory=list, repr=False)
    _scratch: Path | None = field(default=None, repr=False)

    def on_undo(self, undo: Callable[[], object]) -> None:
        """Register work to undo if the step fails or is interrupted (run newest first)."""
        self._undo.append(undo)

    def begin_waiting(self, on: Literal["approval", "question"] = "question", *, person: bool = True) -> None:
        """The step is about to wait for ``on`` (answered by a person unless ``person`` is False): tell `on_waiting`."""
        self.waiting, self.person_waits = on, person
        if self.on_waiting is not None:
            self.on_waiting()

    def resumed_answer(self, tool_call_id: str | None, text: str, inputs: tuple[str, ...]) -> Question | None:
        """The next answer the partial record kept for this call's question, if it is the same question.

        Another question (the handler changed, or asks in another order) ends the recorded answers of the call:
        it and every later one are asked again.
        """
        kept = self.resumed.get(tool_call_id) if tool_call_id is not None else None
        if not kept:
            return None
        if (kept[0].text, kept[0].inputs) != (text, inputs):
            kept.clear()
            return None
        return kept.pop(0)

    def scratch_dir(self) -> Path:
        """A folder for this step's files, created on first use and removed if the step fails."""
        if self._scratch is None:
            import shutil  # here: these two (and the compression modules shutil loads) cost 3 ms at import
            import tempfile

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
        self.decisions.clear()
        return errors


current_scope: ContextVar[StepScope | None] = ContextVar("agl_notebook_step", default=None)
