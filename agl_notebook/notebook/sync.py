"""Running a step from a synchronous cell.

The step runs on a worker thread with its own event loop, while the kernel's main thread keeps servicing widget
messages.

Why (FINDINGS): a synchronous cell blocks the kernel's main thread, so the widget messages that carry an answer
are never handled; nest_asyncio hangs or breaks ipykernel >= 7.1, and jupyter-ui-poll breaks 7.4. Instead the step
runs on its own loop in a worker thread (with the cell's context, so its displays land in this cell), and the main
thread reads widget messages from the kernel's shell channel itself and dispatches them, handing every other
message back, in order, when the step is done. That reading uses ipykernel 7's private internals
(``shell_channel_thread.manager``): it is tested against the ipykernel this package pins, and where they are not
found the worker still runs, and a question then falls back to the kernel's stdin.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from . import _kernel

T = TypeVar("T")

_COMM_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def run_sync(make: Callable[[], Coroutine[Any, Any, T]], *, poll_interval: float = 0.02) -> T:
    """Run the coroutine ``make()`` to completion on a worker thread, servicing widget messages meanwhile.

    A KeyboardInterrupt (the kernel's interrupt) cancels the step, waits for it to wipe its work, and re-raises.
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
            loop.close()

    worker = threading.Thread(target=context.run, args=(work,), name="agl-notebook-step", daemon=True)
    poller = _CommPoller.for_kernel()
    worker.start()
    try:
        try:
            while worker.is_alive():
                if poller is not None:
                    poller.poll()
                worker.join(poll_interval)
        except KeyboardInterrupt:
            started.wait()
            loop, task = box.get("loop"), box.get("task")
            if loop is not None and task is not None and not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
            while worker.is_alive():
                if poller is not None:
                    poller.poll()
                worker.join(poll_interval)
            raise
    finally:
        if poller is not None:
            poller.close()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


class _CommPoller:
    """Reads the kernel's shell messages while the main thread is blocked.

    Comm messages are dispatched at once; the rest are given back, in order, when closed (ipykernel 7 internals).
    """

    def __init__(self, kernel: Any) -> None:
        import zmq

        self._zmq = zmq
        self.kernel = kernel
        pair = kernel.shell_channel_thread.manager._shell_channel_to_main
        self.socket = pair.to_socket
        self.stream = pair.to_stream
        self.deferred: list[Any] = []

    @classmethod
    def for_kernel(cls) -> _CommPoller | None:
        k = _kernel.kernel()
        if k is None or getattr(k, "shell_channel_thread", None) is None:
            return None
        try:
            return cls(k)
        except (AttributeError, ImportError):
            return None

    def poll(self, most: int = 20) -> None:
        k = self.kernel
        for _ in range(most):
            if not self.socket.poll(0, self._zmq.POLLIN):
                return
            frames = self.socket.recv_multipart(copy=False)
            idents, rest = k.session.feed_identities(frames, copy=False)
            header = k.session.deserialize(rest, content=False, copy=False)["header"]
            if header["msg_type"] not in _COMM_MESSAGES:
                self.deferred.append(frames)
                continue
            message = k.session.deserialize(rest, content=True, copy=False)
            parent = k.get_parent("shell")
            ident = k._get_shell_context_var(k._shell_parent_ident)
            try:
                k.shell_handlers[header["msg_type"]](None, idents, message)
            except Exception:  # a widget callback's error must not end the step; ipywidgets logs it
                k.log.exception("agl_notebook: a widget message failed")
            finally:
                k.set_parent(ident, parent, channel="shell")

    def close(self) -> None:
        callback = self.stream._recv_callback
        for frames in self.deferred:
            self.stream._run_callback(callback, frames)
        self.deferred = []
        # The stream's socket is edge-triggered: make it look again for what arrived while we were reading.
        self.stream.io_loop.add_callback(self.stream._handle_events, self.socket, self._zmq.POLLIN)


