"""The notebook terminal: a tool's questions drawn as input widgets inside the running step's view.

Where widgets cannot take the answer, it says so rather than hang: in a headless run (nbclient, nbval: no person,
``allow_stdin`` false) a live question is a `NoAnswerError` naming it; on kernels older than ipykernel 7.4 an
awaiting cell does not receive widget messages (FINDINGS), so the question is asked on the kernel's stdin instead
(``input()``, which JupyterLab and Notebook 7 show as a prompt). ``AGL_NOTEBOOK_QUESTIONS=stdin`` chooses that path
on any kernel.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from .._scope import current_scope
from ..errors import NoAnswerError
from ..screens import Screen
from ..terminals import ConsoleTerminal, Terminal
from . import _kernel

T = TypeVar("T")

QUESTIONS_VARIABLE = "AGL_NOTEBOOK_QUESTIONS"
"""``widgets`` or ``stdin``: how questions are asked in a kernel (default: widgets on ipykernel >= 7.4)."""


def questions_by_stdin() -> bool:
    """True when questions go through the kernel's stdin rather than input widgets."""
    chosen = os.environ.get(QUESTIONS_VARIABLE, "").strip().lower()
    if chosen in ("stdin", "widgets"):
        return chosen == "stdin"
    return _kernel.ipykernel_version() < (7, 4)


class WidgetTerminal(Terminal):
    """Asks in input widgets inside the current step's view (see the module docstring for the fallbacks)."""

    async def ask(self, screen: Screen[T]) -> T:
        """Draw the screen in the step's view and wait for the submitted, validated answer."""
        if not _kernel.interactive():
            raise NoAnswerError(
                f"Nobody can answer {screen.text!r} here: this notebook runs headless (nbclient or nbval). Record "
                "the step where a person can answer (JupyterLab), or pass answers with Run(answers=[...])."
            )
        if questions_by_stdin():
            return await ConsoleTerminal().ask(screen)
        scope = current_scope.get()
        view: Any = scope.view if scope is not None else None
        if view is None or not hasattr(view, "ask"):
            from .view import standalone_ask

            values = await standalone_ask(screen)
        else:
            values = await view.ask(screen)
        return screen.validate(values)
