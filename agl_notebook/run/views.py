"""What a step is drawn on and told about: `StepView`, the views that can do more, and `EventSink`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from .._protocols import implements
from ..replay.records import StepRecord

if TYPE_CHECKING:
    from .._scope import Decision
    from ..approvals import ApprovalRequest
    from ..events import Event
    from ..replay.explain import Miss
    from ..roles import Role
    from ..screens import Screen

EventSink: TypeAlias = "Callable[[Event], None]"
"""Anything that takes events: a view, a printer, a list's ``append``."""


@runtime_checkable
class StepView(Protocol):
    """What draws one step: told whether it replays, then every event, then how it ended."""

    def begin(self, *, replaying: bool) -> None:
        """The step starts; ``replaying`` says it is answered from a recording."""

    def event(self, event: Event) -> None:
        """One event of the step."""

    def finish(self, record: StepRecord | None) -> None:
        """The step finished; ``record`` is what was kept (None in mode ``off``)."""

    def fail(self, error: BaseException) -> None:
        """The step failed or was interrupted; its work was wiped."""


@runtime_checkable
class MissView(StepView, Protocol):
    """A view that also shows why a step runs live (the recording it missed), before its model call."""

    def show_miss(self, miss: Miss) -> None:
        """Show the miss."""


@runtime_checkable
class AskingView(StepView, Protocol):
    """A view that draws a step's questions inside itself (the notebook's) and returns the raw answer values."""

    async def ask(self, screen: Screen[Any]) -> list[object]:
        """Draw ``screen``'s inputs and wait for the submitted values (validated by the caller)."""
        ...


@runtime_checkable
class ApprovingView(StepView, Protocol):
    """A view that draws a tool call waiting for approval inside itself (the notebook's) and returns the decision."""

    async def ask_approval(self, request: ApprovalRequest) -> Decision:
        """Show the call (approve, edit, deny, always) and wait for the person's checked decision."""
        ...


ViewFactory = Callable[["Role[Any]"], StepView]
"""Makes the view of one step of a role."""


def emit_to(view: StepView, rest: EventSink) -> EventSink:
    """A sink sending each event to ``view``, then to ``rest``."""

    def emit(event: Event) -> None:
        __tracebackhide__ = True
        view.event(event)
        rest(event)

    return emit


def show_miss(view: StepView | None, miss: Miss) -> None:
    """Tell a view that can show it why a step runs live."""
    if view is not None and implements(view, MissView):
        view.show_miss(miss)
