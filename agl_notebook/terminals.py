"""Terminals: where a tool's questions are shown and answered, and its calls approved, edited or denied.

`Terminal.show` builds the screen, tells the current step's view (``question.asked``), waits for a validated answer
and records it (``question.answered``). `Terminal.approve` does the same for a tool call that needs approval
(``approval.requested``, ``approval.decided``). Subclasses implement how one screen is answered (`Terminal.ask`) and
how one call is decided (`Terminal.ask_approval`). One person, one prompt at a time: both take the same lock. The
notebook terminal (widgets) lives in `agl_notebook.notebook`.
"""

from __future__ import annotations

import json
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from . import _settings
from ._scope import Decision, Question, StepScope, current_scope
from .errors import InputError, NoAnswerError, NoDecisionError
from .events import ApprovalRequested, QuestionAnswered, QuestionAsked

# Screens and approvals load with the first question or the first call to approve, not with every Run.
if TYPE_CHECKING:
    import asyncio

    from .approvals import ApprovalRequest, Verdict
    from .screens import Screen

T = TypeVar("T")


class Terminal:
    """Shows screens to the person and returns their answers."""

    def __init__(self) -> None:
        # One question at a time: steps running under gather must not interleave their prompts. A lock belongs
        # to one event loop, and a Run may serve several (the synchronous form runs each step on its own loop).
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def show(self, screen_fn: Callable[..., Screen[T]], /, **kwargs: Any) -> T:
        """Show the screen ``screen_fn(**kwargs)`` and return the answer (a tuple for several inputs).

        In a step resumed from a partial record, a question its call asked before is answered from the record
        without being shown (docs/recordings.md, "Partial records").
        """
        __tracebackhide__ = True  # IPython shows the screen function's and the answering code's frames, not these
        from .screens import Screen

        screen = screen_fn(**kwargs)
        if not isinstance(screen, Screen):
            raise InputError(
                f"{getattr(screen_fn, '__qualname__', screen_fn)!r} must return a Screen, not {type(screen).__name__}."
            )
        scope = current_scope.get()
        labels = tuple(i.label for i in screen.inputs)
        if scope is not None:
            scope.emit(QuestionAsked(screen.text, labels))
        answer: T = _resumed_answer(screen, scope, labels)
        if answer is _NONE:
            import asyncio  # here, not at the top: it costs a quarter of `import agl_notebook` otherwise

            if scope is not None:  # waiting for another step's prompt to be answered is waiting for a person too
                scope.begin_waiting("question", person=self.asks_a_person("question"))
            loop = asyncio.get_running_loop()
            async with self._locks.setdefault(loop, asyncio.Lock()):
                answer = await self.ask(screen)
        as_json = screen.answer_json(answer)
        if scope is not None:
            scope.questions.append(Question(screen.text, labels, as_json))
            scope.emit(QuestionAnswered(screen.text, as_json))
        return answer

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Ask for a decision on a tool call that needs approval; return it checked, and record it in the step."""
        __tracebackhide__ = True
        scope = current_scope.get()
        if scope is not None:
            scope.emit(ApprovalRequested(request.tool, request.tool_call_id, request.arguments))
        import asyncio

        if scope is not None:
            scope.begin_waiting("approval", person=self.asks_a_person("approval"))
        loop = asyncio.get_running_loop()
        async with self._locks.setdefault(loop, asyncio.Lock()):
            decision = await self.ask_approval(request)
        if scope is not None:
            from .approvals import decided_event

            scope.decisions.append(decision)
            scope.emit(decided_event(decision))
        return decision

    def asks_a_person(self, on: Literal["approval", "question"]) -> bool:
        """Whether a person answers a question (or decides a call) here, rather than a script or a setting."""
        return True

    async def ask(self, screen: Screen[T]) -> T:
        """Wait for the person's validated answer to ``screen``."""
        raise NotImplementedError

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Wait for the decision on ``request``, checked (`agl_notebook.approvals.decide`)."""
        raise NotImplementedError


_NONE: Any = object()


def _resumed_answer(screen: Screen[T], scope: StepScope | None, labels: tuple[str, ...]) -> Any:
    """The answer a resumed step's partial record kept for this question, checked again; `_NONE` when there is none.

    A kept answer the screen no longer accepts (its inputs changed) is not given: the question is asked again.
    """
    from .loop import current_tool_call_id

    kept = scope.resumed_answer(current_tool_call_id.get(), screen.text, labels) if scope is not None else None
    if kept is None:
        return _NONE
    values = list(kept.answer) if len(screen.inputs) > 1 and isinstance(kept.answer, list) else [kept.answer]
    try:
        return screen.validate(values)
    except InputError:
        return _NONE


class ConsoleTerminal(Terminal):
    """Asks on standard input, one input at a time, asking again until the answer is valid."""

    async def ask(self, screen: Screen[T]) -> T:
        """Prompt for each input on stdin (in a thread, so the event loop keeps running)."""
        import asyncio

        from ._secrets import scrub_text, secrets_from_environment
        from .screens import ActionInput

        secrets = secrets_from_environment()  # what is printed is scrubbed; the answer is the person's own
        print(scrub_text(screen.text, secrets), flush=True)
        values: list[object] = []
        for item in screen.inputs:
            while True:
                try:
                    raw = await asyncio.to_thread(input, scrub_text(f"{item.label}: ", secrets))
                except EOFError:
                    raise NoAnswerError(
                        f"Nobody can answer {screen.text!r}: standard input is closed. Pass answers with "
                        "Run(answers=[...]) or run it where a person can type."
                    ) from None
                try:
                    values.append(item.parse(raw))
                    break
                except InputError as e:
                    print(scrub_text(str(e), secrets), file=sys.stderr, flush=True)
            if isinstance(item, ActionInput) and values[-1] in item.dismissing:
                break  # declined or cancelled: the other inputs are not asked
        return screen.validate(values)

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Show the call and its arguments; ask approve, always, edit (new arguments as JSON) or deny, until valid."""
        import asyncio

        from ._secrets import scrub_text, secrets_from_environment
        from .approvals import Approve, Deny, Edit, decide

        secrets = secrets_from_environment()  # what is printed is scrubbed; the call keeps its own arguments
        arguments = json.dumps(request.arguments, indent=2, ensure_ascii=False)
        print(scrub_text(f"The agent calls {request.tool} with:\n{arguments}", secrets), flush=True)

        async def read(prompt: str) -> str:
            try:
                return await asyncio.to_thread(input, prompt)
            except EOFError:
                raise NoDecisionError(
                    f"Nobody can approve the call to tool {request.tool!r}: standard input is closed, so it was not "
                    "run. Pass decisions with Run(approvals=[...]), or run it where a person can type."
                ) from None

        while True:
            choice = (await read("Approve? [y]es, [a]lways for this tool, [e]dit, [n]o: ")).strip().lower()
            try:
                if choice in ("y", "yes"):
                    return decide(request, Approve())
                if choice in ("a", "always"):
                    return decide(request, Approve(always=True))
                if choice in ("n", "no"):
                    return decide(request, Deny(await read("Message to the agent (optional): ")))
                if choice in ("e", "edit"):
                    text = await read("The arguments, as one line of JSON: ")
                    try:
                        edited = json.loads(text)
                    except json.JSONDecodeError as e:
                        raise InputError(f"Not JSON: {e.msg} at column {e.colno}.") from None
                    return decide(request, Edit(edited))
            except InputError as e:
                print(scrub_text(str(e), secrets), file=sys.stderr, flush=True)


ScriptedApprovals: TypeAlias = "str | Sequence[object] | Callable[[ApprovalRequest], object]"
"""Scripted decisions: ``"approve"`` or ``"deny"`` for every call, a list used in order, or a function of the
`ApprovalRequest`; each decision ``"approve"``, ``"always"``, ``"deny"``, or an `Approve`, `Edit` or `Deny`."""


class ScriptedTerminal(Terminal):
    """Scripted answers (`Run(answers=...)`) and decisions on tool calls (`Run(approvals=...)`).

    Answers are a list used in order, or a function of the screen; an answer is the value for a one-input screen, or a
    list or tuple of values for a screen of several. What is not scripted (answers or decisions left as None) goes to
    ``inner``, the terminal a person would use.
    """

    def __init__(
        self,
        answers: Sequence[object] | Callable[[Screen[Any]], object] | None = None,
        *,
        approvals: ScriptedApprovals | None = None,
        inner: Terminal | None = None,
    ) -> None:
        super().__init__()
        self._answers = answers
        self._approvals = approvals
        self._inner = inner
        self._used = 0
        self._decided = 0

    def asks_a_person(self, on: Literal["approval", "question"]) -> bool:
        """A person answers only what is not scripted, on the inner terminal."""
        scripted = self._answers if on == "question" else self._approvals
        return scripted is None and self._inner is not None and self._inner.asks_a_person(on)

    async def ask(self, screen: Screen[T]) -> T:
        """Take the next scripted answer and validate it like a typed one."""
        __tracebackhide__ = True  # IPython shows an answers function's frames, not these
        if self._answers is None:
            if self._inner is None:
                raise NoAnswerError(f"No answers were scripted for {screen.text!r}; pass Run(answers=[...]).")
            return await self._inner.ask(screen)
        if callable(self._answers):
            answer = self._answers(screen)
        elif _in_map_item():
            raise InputError(
                f"Run(answers=[...]) answers in order, but a map's items ask in no fixed order, so "
                f"{screen.text!r} cannot be answered from the list: pass answers as a function of the screen "
                "(agl_notebook._map_scope.current_map_item says which item asks; docs/map.md)."
            )
        elif self._used < len(self._answers):
            answer = self._answers[self._used]
            self._used += 1
        else:
            raise NoAnswerError(f"No scripted answer left for {screen.text!r} ({self._used} were used).")
        values = list(answer) if len(screen.inputs) > 1 and isinstance(answer, list | tuple) else [answer]
        return screen.validate(values)

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Take the next scripted decision and check it like a person's."""
        __tracebackhide__ = True
        scripted = self._approvals
        if scripted is None:
            if self._inner is None:
                raise NoDecisionError(
                    f"No decisions were scripted for the call to tool {request.tool!r}, so it was not run; pass "
                    f"Run(approvals=[...]) (or set {_settings.APPROVALS.name} for a headless notebook)."
                )
            return await self._inner.ask_approval(request)
        said: object
        if isinstance(scripted, str):
            said = scripted
        elif callable(scripted):
            said = scripted(request)
        elif _in_map_item():
            raise InputError(
                f"Run(approvals=[...]) decides in order, but a map's items ask in no fixed order, so the call to "
                f"tool {request.tool!r} cannot be decided from the list: pass 'approve', 'deny' or a function of "
                "the request (docs/map.md)."
            )
        elif self._decided < len(scripted):
            said = scripted[self._decided]
            self._decided += 1
        else:
            raise NoDecisionError(
                f"No scripted decision left for the call to tool {request.tool!r} ({self._decided} were used), so "
                "it was not run."
            )
        from .approvals import as_verdict, decide

        verdict: Verdict = as_verdict(said, f"Run(approvals=...), for the call to tool {request.tool!r}")
        return decide(request, verdict)


def _in_map_item() -> bool:
    """Whether an item of a `run.map` asks (the map's scope loads with the first map, not with every Run)."""
    from ._map_scope import current_map_item

    return current_map_item.get() is not None
