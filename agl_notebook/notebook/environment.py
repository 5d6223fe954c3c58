"""What a `Run` created inside a Jupyter kernel uses by default: its `agl_notebook.run.environment.Environment`.

It meets that protocol structurally, without importing it: `agl_notebook.run.environment` imports this module (the
run layer's one import of the notebook layer), and an import back would close a loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..replay.stores import Store
from ..roles import Role
from ..run.occurrences import Occurrences
from ..terminals import Terminal
from . import _kernel

if TYPE_CHECKING:
    from ..run.views import StepView
    from ._kernel import LoopWaker
    from .map_view import NotebookMapView
    from .sync import CommPoller
    from .view import DisplayOrder

_occurrences: Occurrences | None = None
_display_order: tuple[object, Any] = (None, None)


class NotebookEnvironment:
    """The notebook's defaults: widget views, the widget terminal, the notebook store, cell executions."""

    def occurrences(self) -> Occurrences:
        """One numbering for the whole kernel: two Runs in one cell share the notebook's recordings."""
        global _occurrences
        if _occurrences is None:
            _occurrences = Occurrences()
        return _occurrences

    def terminal(self) -> Terminal:
        """Questions in input widgets."""
        from .terminal import WidgetTerminal

        return WidgetTerminal()

    def store(self) -> Store:
        """Recordings from the notebook file and this kernel session."""
        from .store import NotebookStore

        return NotebookStore()

    def view(self, role: Role[Any]) -> StepView:
        """A live widget view of one step."""
        from .frontend import link
        from .view import NotebookView

        cell = _kernel.cell_id()
        interactive = _kernel.interactive()  # headless runners have neither a person watching nor an extension
        if interactive:
            return NotebookView(role, send_record=lambda record: link().send_record(record, cell))
        # Headless, a cell's views are displayed when their steps end, held back to the order the steps started in.
        return NotebookView(role, live=False, order=_headless_order())

    def map_view(self, role: Role[Any]) -> NotebookMapView:
        """The one view of a ``run.map``: live with a person watching, else its final bundle in the cell's order."""
        from .map_view import NotebookMapView

        if _kernel.interactive():
            return NotebookMapView(role)
        return NotebookMapView(role, live=False, order=_headless_order())

    def execution_key(self) -> object:
        """Occurrence numbers count within one cell execution."""
        return _kernel.execution_id()

    def cell_id(self) -> str | None:
        """The executing cell's id, where the frontend sends it."""
        return _kernel.cell_id()

    def watch_interrupts(self) -> LoopWaker | None:
        """A `LoopWaker` on the running loop: it wakes the loop, so an interrupt ends a step at once."""
        return _kernel.wake_for_interrupts()

    def message_pump(self) -> CommPoller | None:
        """The kernel's widget messages, read while a synchronous cell waits."""
        from .sync import message_pump

        return message_pump()


def _headless_order() -> DisplayOrder:
    """The display order of this cell execution's headless views (steps and maps)."""
    from .view import DisplayOrder

    global _display_order
    execution = _kernel.execution_id()
    if _display_order[0] != execution or _display_order[1] is None:
        _display_order = (execution, DisplayOrder())
    order: DisplayOrder = _display_order[1]
    return order
