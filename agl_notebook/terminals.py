"""Terminals: where a tool's questions are shown and answered.

`Terminal.show` builds the screen, tells the current step's view (``question.asked``), waits for a validated answer
and records it (``question.answered``). Subclasses only implement `Terminal.ask`: how one screen is answered.
The notebook terminal (input widgets) lives in `agl_notebook.notebook`.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._scope import Question, current_scope
from .errors import InputError, NoAnswerError
from .events import QuestionAnswered, QuestionAsked
from .screens import Screen

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


class Terminal:
    """Shows screens to the person and returns their answers."""

    def __init__(self) -> None:
        # One question at a time: steps running under gather must not interleave their prompts. A lock belongs
        # to one event loop, and a Run may serve several (the synchronous form runs each step on its own loop).
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def show(self, screen_fn: Callable[..., Screen[T]], /, **kwargs: Any) -> T:
        """Show the screen ``screen_fn(**kwargs)`` and return the answer (a tuple for several inputs)."""
        __tracebackhide__ = True  # IPython shows the screen function's and the answering code's frames, not these
        screen = screen_fn(**kwargs)
        if not isinstance(screen, Screen):
            raise InputError(
                f"{getattr(screen_fn, '__qualname__', screen_fn)!r} must return a Screen, not {type(screen).__name__}."
            )
        scope = current_scope.get()
        labels = tuple(i.label for i in screen.inputs)
        if scope is not None:
            scope.emit(QuestionAsked(screen.text, labels))
        import asyncio  # here, not at the top: it costs a quarter of `import agl_notebook` otherwise

        loop = asyncio.get_running_loop()
        async with self._locks.setdefault(loop, asyncio.Lock()):
            answer = await self.ask(screen)
        as_json = screen.answer_json(answer)
        if scope is not None:
            scope.questions.append(Question(screen.text, labels, as_json))
            scope.emit(QuestionAnswered(screen.text, as_json))
        return answer

    async def ask(self, screen: Screen[T]) -> T:
        """Wait for the person's validated answer to ``screen``."""
        raise NotImplementedError


class ConsoleTerminal(Terminal):
    """Asks on standard input, one input at a time, asking again until the answer is valid."""

    async def ask(self, screen: Screen[T]) -> T:
        """Prompt for each input on stdin (in a thread, so the event loop keeps running)."""
        import asyncio

        print(screen.text, flush=True)
        values: list[object] = []
        for item in screen.inputs:
            while True:
                try:
                    raw = await asyncio.to_thread(input, f"{item.label}: ")
                except EOFError:
                    raise NoAnswerError(
                        f"Nobody can answer {screen.text!r}: standard input is closed. Pass answers with "
                        "Run(answers=[...]) or run it where a person can type."
                    ) from None
                try:
                    values.append(item.parse(raw))
                    break
                except InputError as e:
                    print(e, file=sys.stderr, flush=True)
        return screen.validate(values)


class ScriptedTerminal(Terminal):
    """Answers from a list used in order, or from a function of the screen (`Run(answers=...)`).

    An entry is the value for a one-input screen, or a list or tuple of values for a screen of several.
    """

    def __init__(self, answers: Sequence[object] | Callable[[Screen[Any]], object]) -> None:
        super().__init__()
        self._answers = answers
        self._used = 0

    async def ask(self, screen: Screen[T]) -> T:
        """Take the next scripted answer and validate it like a typed one."""
        __tracebackhide__ = True  # IPython shows an answers function's frames, not these
        if callable(self._answers):
            answer = self._answers(screen)
        elif self._used < len(self._answers):
            answer = self._answers[self._used]
            self._used += 1
        else:
            raise NoAnswerError(f"No scripted answer left for {screen.text!r} ({self._used} were used).")
        values = list(answer) if len(screen.inputs) > 1 and isinstance(answer, list | tuple) else [answer]
        return screen.validate(values)
