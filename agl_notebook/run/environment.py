"""Where a `Run` gets its defaults: the environment protocol, and the one import of the notebook layer.

Outside a Jupyter kernel a Run has no environment (console questions, a memory store, numbering within the Run);
inside one, `agl_notebook.notebook.environment` supplies widget views, input-widget questions, the notebook store,
cell executions, interrupt handling and widget servicing for synchronous cells. `current_environment` is the only
place the run layer reaches up into the notebook layer, lazily, and only the environment module (the import-linter
contract in pyproject.toml allows exactly that import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..replay.stores import Store
    from ..roles import Role
    from ..terminals import Terminal
    from .occurrences import Occurrences
    from .sync import MessagePump
    from .views import StepView


class InterruptWatch(Protocol):
    """While a step runs: notes an interrupt that came while nothing yielded to the event loop."""

    @property
    def interrupted(self) -> bool:
        """An interrupt came since the step started."""
        ...

    def cancel(self) -> None:
        """The step ended: stop watching."""


class Environment(Protocol):
    """What a `Run` made inside a host (a Jupyter kernel) takes its defaults from."""

    def occurrences(self) -> Occurrences:
        """The numbering identical steps share (the whole kernel's)."""
        ...

    def terminal(self) -> Terminal:
        """Where questions are asked."""
        ...

    def store(self) -> Store:
        """Where recordings are found and kept."""
        ...

    def view(self, role: Role[Any]) -> StepView:
        """A view of one step of ``role``."""
        ...

    def execution_key(self) -> object:
        """What occurrence numbers count within (a cell execution)."""
        ...

    def cell_id(self) -> str | None:
        """The executing cell's id, where known."""
        ...

    def watch_interrupts(self) -> InterruptWatch | None:
        """Start watching for interrupts while a step runs on the current event loop (None: nothing to watch)."""
        ...

    def message_pump(self) -> MessagePump | None:
        """What services the frontend's messages while a synchronous call blocks (None: nothing to service)."""
        ...

    # An environment may also draw maps: ``map_view(role) -> MapView`` (the notebook's does); `run.map` asks for it
    # with getattr, so an environment without it (a test's) still is one.


def current_environment() -> Environment | None:
    """The environment a new Run runs in: the notebook's inside a Jupyter kernel, else None."""
    from ..notebook._kernel import in_kernel  # cheap: imports nothing unless a kernel is running

    if not in_kernel():
        return None
    from ..notebook.environment import NotebookEnvironment

    return NotebookEnvironment()
