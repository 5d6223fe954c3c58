"""Running a coroutine to its end from synchronous code (a synchronous cell or script).

It runs on a worker thread with its own event loop. Meanwhile the calling thread, which in a notebook owns the
kernel's messages, runs the environment's `MessagePump` (so a question's widget can be answered in the same cell).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class MessagePump(Protocol):
    """While a synchronous call blocks the thread that owns the frontend's messages: handles them meanwhile."""

    def poll(self) -> None:
        """Handle the messages that arrived (a widget's answer), keeping the rest for later."""

    def close(self) -> None:
        """The call ended: hand back every message kept, in order."""


def run_sync(
    make: Callable[[], Coroutine[Any, Any, T]], *, pump: MessagePump | None = None, poll_interval: float = 0.02
) -> T:
    """Run the coroutine ``make()`` to completion on a worker thread, running ``pump`` meanwhile.

    A KeyboardInterrupt (the kernel's interrupt) cancels the coroutine, waits for it to wipe its work, and
    re-raises.
    """
    __tracebackhide__ = True  # IPython shows the step's frames and the person's, not these (unless %xmode --show)
    context = contextvars.copy_context()
    box: dict[str, Any] = {}
    started = threading.Event()

    def work() -> None:
        __tracebackhide__ = True
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        try:
            task = loop.create_task(make())
            box["task"] = task
            started.set()
            # Waited for, then asked: what the step raised comes without asyncio's frames in its traceback.
            loop.run_until_complete(asyncio.wait((task,)))
            box["result"] = task.result()
        except BaseException as e:  # handed to the calling thread as it is
            box["error"] = e
        finally:
            started.set()
            _close_sessions(loop)
            loop.close()

    worker = threading.Thread(target=context.run, args=(work,), name="agl-notebook-step", daemon=True)
    worker.start()
    try:
        try:
            while worker.is_alive():
                if pump is not None:
                    pump.poll()
                worker.join(poll_interval)
        except KeyboardInterrupt:
            started.wait()
            loop, task = box.get("loop"), box.get("task")
            if loop is not None and task is not None and not loop.is_closed():
                from .._scope import CANCELLED_BY_INTERRUPT  # a deliberate interrupt: a waiting step keeps nothing

                loop.call_soon_threadsafe(task.cancel, CANCELLED_BY_INTERRUPT)
            while worker.is_alive():
                if pump is not None:
                    pump.poll()
                worker.join(poll_interval)
            raise
    finally:
        if pump is not None:
            pump.close()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def _close_sessions(loop: asyncio.AbstractEventLoop) -> None:
    """Stop the MCP servers this loop started (docs/mcp.md): a loop closed with them running would leave them."""
    import sys

    sessions = sys.modules.get("agl_notebook.mcp._sessions")  # loaded only once a server was started
    if sessions is not None:
        import contextlib

        # The step's own outcome is what the caller gets; a server not stopped here is stopped at exit.
        with contextlib.suppress(Exception):
            loop.run_until_complete(sessions.close_loop(loop))
