"""The two families of errors (see `agl_notebook.errors`, which names every error agl_notebook raises).

Their roots live here, in a module that imports nothing of the package, so the modules `agl_notebook.errors`
refers to (transcripts, records, payloads) can raise them without an import loop.

In IPython (a notebook's kernel) an error of either family is shown with the person's frames only: the cell's line,
and any of their own code between, never the library's. IPython hides a frame whose locals set
``__tracebackhide__`` except the last one, and the last one is where the library raised; so the families render
their own traceback (`_render_traceback_`, which IPython asks for) from their frames minus the library's.
"""

from __future__ import annotations

import os
from types import FrameType, TracebackType
from typing import Any

# The package's folder as a frame's file name may spell it (absolute, or as the import path had it), and the
# machinery that runs a step's code without being the person's (an event loop's callbacks, a worker thread's start).
_PACKAGE = tuple(
    dict.fromkeys(
        os.path.join(folder, "") for folder in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(__file__))
    )
)
_STDLIB = os.path.dirname(os.path.abspath(os.__file__))
_MACHINERY = (
    os.path.join(_STDLIB, "asyncio", ""),
    os.path.join(_STDLIB, "concurrent", ""),
    os.path.join(_STDLIB, "threading.py"),
)


def persons_traceback(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without the library's frames, the event loop's and threads' machinery, and frames marked hidden."""
    kept: list[TracebackType] = []
    while tb is not None:
        if not _librarys(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out: TracebackType | None = None
    for each in reversed(kept):
        out = TracebackType(out, each.tb_frame, each.tb_lasti, each.tb_lineno)
    return out


def _librarys(frame: FrameType) -> bool:
    """Whether ``frame`` is the library's (or machinery's, or hidden), not the person's code."""
    code = frame.f_code
    if code.co_filename.startswith(_PACKAGE + _MACHINERY) or frame.f_locals.get("__tracebackhide__"):
        return True
    # A method dataclasses wrote for one of the library's classes (`Role.__init__`): compiled from a string.
    owner = frame.f_locals.get("self")
    return code.co_filename == "<string>" and type(owner).__module__.startswith("agl_notebook.")


class _PersonsTraceback(Exception):
    """What IPython shows for an error of the library: the person's frames and the message."""

    def _render_traceback_(self) -> list[str]:
        """The traceback IPython shows in the cell, without the library's frames.

        IPython's own formatter draws it (colours, the cell's lines); ``%xmode`` with hidden frames shown
        (``InteractiveTB.skip_hidden`` False) shows every frame, as for any error.
        """
        from IPython import get_ipython  # only IPython calls this, so it is loaded

        shell: Any = get_ipython()
        formatter = shell.InteractiveTB
        tb = self.__traceback__
        if getattr(formatter, "skip_hidden", True):
            tb = persons_traceback(tb)
        return list(formatter.structured_traceback(type(self), self, tb))


class InputError(_PersonsTraceback, ValueError):
    """Something given to agl_notebook is not usable; the message says what, where, and how to fix it."""


class UpstreamUnexpected(_PersonsTraceback, RuntimeError):
    """The model or another upstream service did something the step cannot continue from."""
