"""The notebook terminal: a tool's questions drawn as input widgets inside the running step's view.

Where widgets cannot take the answer, it says so rather than hang: in a headless run (nbclient, nbval: no person,
``allow_stdin`` false) a live question takes the next of the answers given in ``AGL_NOTEBOOK_ANSWERS`` (a JSON list,
what ``agl-notebook execute --answers`` sets; a ``run.map`` item's from the object keyed by map, item and question
given there instead, never in order: docs/map.md) and is a `NoAnswerError` naming it without them; on kernels older
than ipykernel 7.4 an awaiting cell does not receive widget messages (7.4 is the first to dispatch comm messages
while an async cell awaits; 7.0-7.3 do only where JupyterLab routes widget comms over a subshell), so the question
is asked on the kernel's stdin instead (``input()``, which JupyterLab and Notebook 7 show as a prompt).
``AGL_NOTEBOOK_QUESTIONS=stdin`` chooses that path on any kernel.

A tool call that needs approval is drawn the same way (the approval form, in the step's view); headless, it is
decided by ``AGL_NOTEBOOK_APPROVALS`` (approve, deny, or a file of decisions keyed by tool and arguments), and without
it is a `NoDecisionError` naming the tool and the variable, before the tool's handler runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from .. import _settings
from .._map_scope import MapItemContext, current_map_item
from .._scope import Decision, current_scope
from ..approvals import SETTING, ApprovalRequest, decide, setting_verdict
from ..errors import InputError, NoAnswerError, NoDecisionError
from ..run.views import ApprovingView, AskingView
from ..screens import Screen
from ..terminals import ConsoleTerminal, ScriptedTerminal, Terminal
from . import _kernel

T = TypeVar("T")

ANSWERS_VARIABLE = _settings.ANSWERS.name
"""A JSON list of answers for the questions of a headless run, used in order (``agl-notebook execute --answers``)."""

QUESTIONS_VARIABLE = _settings.QUESTIONS.name
"""``widgets`` or ``stdin``: how questions are asked in a kernel (default: widgets on ipykernel >= 7.4)."""


def questions_by_stdin() -> bool:
    """True when questions go through the kernel's stdin rather than input widgets."""
    chosen = _settings.QUESTIONS.text().lower()
    if chosen in ("stdin", "widgets"):
        return chosen == "stdin"
    return _kernel.ipykernel_version() < (7, 4)


_scripted: ScriptedTerminal | None = None
_given = 0  # how many answers the list in AGL_NOTEBOOK_ANSWERS held (said when they run out)


def _headless_runner(variable: str, option: str) -> tuple[str, str]:
    """Which headless runner runs this kernel, as a clause, and how that runner takes ``variable`` (or ``option``).

    Told by ``AGL_NOTEBOOK_RUNNER``, which `agl-notebook execute`, the papermill engine and the nbval plugin set;
    any other runner is nbclient's (nbconvert, ``jupyter execute``, papermill's own engine, a script).
    """
    runner = _settings.RUNNER.text()
    notebook = Path(_settings.NOTEBOOK_PATH.text()).name if _settings.NOTEBOOK_PATH.text() else "NOTEBOOK.ipynb"
    execute = f"agl-notebook execute {notebook} {option} VALUE"
    if runner == "agl-notebook execute":
        return "`agl-notebook execute` runs this notebook headless", (
            f"pass {option} VALUE (it sets {variable} for the kernel)"
        )
    if runner == "papermill":
        return "papermill runs this notebook headless", (
            f"set {variable}=VALUE in papermill's environment (its kernel inherits it), or run it with `{execute}`"
        )
    if runner == "nbval":
        return "nbval runs this notebook headless, and this step runs live", (
            f"record it with them first (`{execute} --record`), or set {variable}=VALUE in pytest's environment "
            "(nbval's kernels inherit it)"
        )
    return "a headless runner (nbclient: jupyter nbconvert --execute, jupyter execute, a script) runs this notebook", (
        f"set {variable}=VALUE in the environment the kernel starts with, or run it with `{execute}`"
    )


def no_answer_message(screen: Screen[Any], *, used: int | None = None) -> str:
    """A live question in a headless run with no answer for it: the runner in use, and its way to give answers.

    ``used``: how many answers ``AGL_NOTEBOOK_ANSWERS`` gave, all taken by earlier questions (None: it gave none).
    """
    runs, fix = _headless_runner(ANSWERS_VARIABLE, "--answers")
    example = json.dumps(["<answer>"] * ((used or 0) + 1))
    if used is None:
        given = ""
    elif used == 0:
        given = f", and {ANSWERS_VARIABLE} holds no answer"
    else:
        taken = "answer {} gave was taken by an earlier question" if used == 1 else "answers {} gave were all taken"
        given = f", and the {'one' if used == 1 else used} {taken.format(ANSWERS_VARIABLE)}"
    return (
        f"Nobody can answer {screen.text!r} here: {runs}{given}. Give the answers as VALUE, a JSON list used in "
        f"order (here {example}): {fix}. Or record the step where a person can answer (JupyterLab), or pass "
        "Run(answers=[...]) in the notebook."
    )


def _headless_answers() -> ScriptedTerminal | None:
    """The answers given to a headless run, shared by every terminal of the kernel (used once each, in order)."""
    global _scripted, _given
    if _scripted is None:
        raw = _settings.ANSWERS.text()
        if not raw:
            return None
        try:
            answers = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InputError(
                f"{ANSWERS_VARIABLE} must be a JSON list of answers: {e.msg} at column {e.colno}."
            ) from None
        if isinstance(answers, dict):
            raise NoAnswerError(
                f"{ANSWERS_VARIABLE} is an object, which answers the questions of run.map items (keyed by map, "
                "item and question); a single step's questions take a JSON list of answers, used in order."
            )
        if not isinstance(answers, list):
            raise InputError(f"{ANSWERS_VARIABLE} must be a JSON list of answers, not {type(answers).__name__}.")
        _scripted, _given = ScriptedTerminal(answers), len(answers)
    return _scripted


def keyed_answer(screen: Screen[T], item: MapItemContext) -> T:
    """A map item's headless answer: ``AGL_NOTEBOOK_ANSWERS[map key][item index][question text]`` (docs/map.md)."""
    example = json.dumps({item.map_key: {str(item.index): {screen.text: "..."}}}, ensure_ascii=False)
    where = f"item {item.index} of the map {item.map_key!r}"
    raw = _settings.ANSWERS.text()
    try:
        given = json.loads(raw) if raw else None
    except json.JSONDecodeError as e:
        raise InputError(f"{ANSWERS_VARIABLE} must be JSON: {e.msg} at column {e.colno}.") from None
    if not isinstance(given, dict):
        runs, fix = _headless_runner(ANSWERS_VARIABLE, "--answers")
        raise NoAnswerError(
            f"Nobody can answer {screen.text!r} of {where} here: {runs}, and a map's items run in no fixed "
            f"order, so their answers are keyed by map, item and question, not taken from a list. Give them as "
            f"VALUE, a JSON object such as {example}: {fix}. Or record the map where a person can answer (JupyterLab)."
        )
    answers = given.get(item.map_key)
    answers = answers.get(str(item.index)) if isinstance(answers, dict) else None
    if not isinstance(answers, dict) or screen.text not in answers:
        raise NoAnswerError(f"{ANSWERS_VARIABLE} has no answer to {screen.text!r} of {where}: add it as {example}.")
    answer = answers[screen.text]
    values = list(answer) if len(screen.inputs) > 1 and isinstance(answer, list | tuple) else [answer]
    return screen.validate(values)


class WidgetTerminal(Terminal):
    """Asks in input widgets inside the current step's view (see the module docstring for the fallbacks)."""

    def asks_a_person(self, on: Literal["approval", "question"]) -> bool:
        """A person answers unless the notebook runs headless (answers and decisions then come from settings)."""
        return _kernel.interactive()

    async def ask(self, screen: Screen[T]) -> T:
        """Draw the screen in the step's view and wait for the submitted, validated answer."""
        if not _kernel.interactive():
            item = current_map_item.get()
            if item is not None:  # items run in no fixed order: their answers are keyed, never taken in order
                return keyed_answer(screen, item)
            scripted = _headless_answers()
            if scripted is None:
                raise NoAnswerError(no_answer_message(screen))
            try:
                return await scripted.ask(screen)
            except NoAnswerError:  # every answer given was used: say so in the runner's terms
                raise NoAnswerError(no_answer_message(screen, used=_given)) from None
        if questions_by_stdin():
            return await ConsoleTerminal().ask(screen)
        scope = current_scope.get()
        view: Any = scope.view if scope is not None else None
        if not isinstance(view, AskingView):
            from .view import standalone_ask

            values = await standalone_ask(screen)
        else:
            values = await view.ask(screen)
        return screen.validate(values)

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Draw the call in the step's view (approve, edit, deny, always) and wait for the person's decision."""
        if not _kernel.interactive():
            verdict = setting_verdict(request)
            if verdict is None:
                runs, fix = _headless_runner(SETTING, "--approvals")
                raise NoDecisionError(
                    f"Nobody can approve the call to tool {request.tool!r} here: {runs}, so the call was not run. "
                    f"Decide it as VALUE, approve, deny or a JSON file of decisions: {fix}. Or record the step "
                    "where a person can approve it (JupyterLab)."
                )
            return decide(request, verdict, by="setting")
        if questions_by_stdin():
            return await ConsoleTerminal().ask_approval(request)
        scope = current_scope.get()
        view: Any = scope.view if scope is not None else None
        if isinstance(view, ApprovingView):
            return await view.ask_approval(request)
        from .view import standalone_approval

        return await standalone_approval(request)
