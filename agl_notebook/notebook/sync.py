"""Servicing widget messages while a synchronous cell waits for a step (`agl_notebook.run.sync` runs the step).

The step runs on a worker thread with its own event loop, while the kernel's main thread keeps servicing widget
messages.

Why (docs/architecture.md): a sync cell blocks the kernel's main thread, so the widget messages that carry an answer
are never handled; nest_asyncio hangs or breaks ipykernel >= 7.1, and jupyter-ui-poll breaks 7.4. Instead the step
runs on its own loop in a worker thread (with the cell's context, so its displays land in this cell), and the main
thread reads widget messages from the kernel's shell channel itself and dispatches them, handing every other
message back, in order, when the step is done. That reading uses ipykernel 7's private internals
(``shell_channel_thread.manager``): it is tested against the ipykernel this package pins, and where they are not
found the worker still runs, and a question then falls back to the kernel's stdin.
"""

from __future__ import annotations

from typing import Any

from . import _kernel

_COMM_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def message_pump() -> CommPoller | None:
    """What reads this kernel's widget messages while its main thread is blocked, where ipykernel allows it."""
    return CommPoller.for_kernel()


class CommPoller:
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
    def for_kernel(cls) -> CommPoller | None:
        """A poller on the running kernel's shell channel; None where ipykernel's internals are not as expected."""
        k = _kernel.kernel()
        if k is None or getattr(k, "shell_channel_thread", None) is None:
            return None
        try:
            return cls(k)
        except (AttributeError, ImportError):
            return None

    def poll(self, most: int = 20) -> None:
        """Dispatch the comm messages that arrived (at most ``most``); keep the others for `close`."""
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
        """Hand back the kept messages, in order."""
        callback = self.stream._recv_callback
        for frames in self.deferred:
            self.stream._run_callback(callback, frames)
        self.deferred = []
        # The stream's socket is edge-triggered: make it look again for what arrived while we were reading.
        self.stream.io_loop.add_callback(self.stream._handle_events, self.socket, self._zmq.POLLIN)
