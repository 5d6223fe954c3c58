"""`StepInterrupted`: how a step stopped by the kernel's interrupt ends.

Kept apart from `agl_notebook.errors` because it is an ``asyncio.CancelledError``, and ``import agl_notebook`` does
not load asyncio.
"""

from __future__ import annotations

import asyncio


class StepInterrupted(asyncio.CancelledError):
    """The kernel was interrupted while a step ran: its work was wiped and nothing was recorded.

    A cancellation, so code that cleans up on ``asyncio.CancelledError`` still does, and a step's task under
    ``asyncio.gather`` ends cancelled rather than stopping the kernel (as a ``KeyboardInterrupt`` in a task would).
    IPython shows it as its one-line message: the frames of an interrupt say nothing the person needs.
    """

    def _render_traceback_(self) -> list[str]:
        """What IPython shows in the cell instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


def interrupted_message(name: str) -> str:
    """The message of an interrupted step of ``name``."""
    return f"The step of {name!r} was interrupted; nothing was recorded."
