"""What the running Jupyter kernel tells us: whether there is one, its version, and the executing request.

Nothing here imports IPython or ipykernel unless they are already loaded, so calling `in_kernel()` from plain
Python costs nothing.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any


def kernel() -> Any | None:
    """The ipykernel kernel object running this code, or None outside a kernel."""
    if "ipykernel" not in sys.modules or "IPython" not in sys.modules:
        return None
    shell = _get_ipython()()
    return getattr(shell, "kernel", None) if shell is not None else None


@functools.cache
def _get_ipython() -> Callable[[], Any]:
    """IPython's ``get_ipython``, imported once.

    IPython exports it lazily, so ``from IPython import get_ipython`` goes through the import machinery on every call
    (some 50 µs; a batch map in a kernel asks some ten times per item).
    """
    from IPython.core.getipython import get_ipython

    return get_ipython


def in_kernel() -> bool:
    """True inside a Jupyter (ipykernel) kernel."""
    return kernel() is not None


def shutting_down() -> bool:
    """True once the kernel was asked to shut down (or restart).

    ipykernel keeps no public flag; it sets ``_shutdown_message`` when it handles the shutdown request.
    """
    return getattr(kernel(), "_shutdown_message", None) is not None


def ipykernel_version() -> tuple[int, ...]:
    """The ipykernel version as numbers, e.g. (7, 4, 0); () outside a kernel."""
    module = sys.modules.get("ipykernel")
    version = getattr(module, "__version__", "") if module else ""
    numbers: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def parent_request() -> dict[str, Any]:
    """The execute_request being run (its header, metadata and content), or {} when unknown."""
    k = kernel()
    if k is None:
        return {}
    try:
        parent = k.get_parent("shell")
    except Exception:  # older kernels take no channel argument
        parent = k.get_parent()
    return parent if isinstance(parent, dict) else {}


def interactive() -> bool:
    """True when a person's frontend sent the executing request (it allows stdin; nbclient and nbval do not)."""
    content = parent_request().get("content") or {}
    return content.get("allow_stdin") is not False


def execution_id() -> str | None:
    """An id unique to this cell execution (the request's message id)."""
    header = parent_request().get("header") or {}
    msg_id = header.get("msg_id")
    return msg_id if isinstance(msg_id, str) else None


def cell_id() -> str | None:
    """The executing cell's id, when the frontend sends it (JupyterLab 4 and Notebook 7 do; nbclient does not)."""
    metadata = parent_request().get("metadata") or {}
    value = metadata.get("cellId")
    return value if isinstance(value, str) and value else None


def executing_code() -> str:
    """The source of the executing cell."""
    content = parent_request().get("content") or {}
    code = content.get("code")
    return code if isinstance(code, str) else ""


def user_namespace() -> dict[str, Any]:
    """The notebook's global namespace, or {} outside a kernel."""
    if "IPython" not in sys.modules:
        return {}
    shell = _get_ipython()()
    ns = getattr(shell, "user_ns", None)
    return ns if isinstance(ns, dict) else {}


WAKE_SECONDS = 0.1
"""How often the kernel's event loop is woken while a step runs (see `LoopWaker`)."""

# SIGINTs seen while steps ran, and the handler each is passed on to (the running cell's, ipykernel's).
_interrupts = 0
_watching = 0
# Cell executions (request ids) with a step running, how many; and those an interrupt reached (a few ids a session).
_running: dict[str, int] = {}
_interrupted_in: set[str] = set()
_passed_on: Any = None
# One ticker per event loop, shared by the steps running on it: [steps, the pending call_later handle].
_tickers: dict[Any, list[Any]] = {}


class LoopWaker:
    """While a step runs in a kernel: keeps the loop waking, and notes every kernel interrupt.

    ipykernel (7.4) turns SIGINT in an awaiting cell into a loop callback, added with ``call_soon`` from the signal
    handler, that cancels the cell. That callback does not wake a loop asleep in ``select``, so a step awaiting a
    slow model reply or a tool's ``asyncio.sleep`` would notice the interrupt only when something else woke the
    loop: while steps run, one ticker per loop wakes it every `WAKE_SECONDS`. And a step that does not yield to the
    loop after the interrupt (a tool blocking in ``time.sleep``, then no real await) would finish before the
    callback runs, the interrupt lost: `interrupted` tells the step, which then keeps nothing and ends as cancelled.
    """

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self._seen = _interrupts
        self._execution = execution_id()
        if self._execution is not None:
            _running[self._execution] = _running.get(self._execution, 0) + 1
        self._watching = _watch()
        ticker = _tickers.get(loop)
        if ticker is None:
            ticker = _tickers[loop] = [0, None]
            _tick(loop)
        ticker[0] += 1
        self._active = True

    @property
    def interrupted(self) -> bool:
        """True when the step's cell execution was interrupted, even before the step started.

        When the execution is not known: when the kernel was interrupted since the step started.
        """
        if self._execution is not None:
            return self._execution in _interrupted_in
        return _interrupts > self._seen

    def cancel(self) -> None:
        """Stop waking the loop (when no other step on it runs) and watching for interrupts."""
        if not self._active:
            return
        self._active = False
        if self._execution is not None:
            _running[self._execution] -= 1
            if not _running[self._execution]:
                del _running[self._execution]
        ticker = _tickers.get(self._loop)
        if ticker is not None:
            ticker[0] -= 1
            if ticker[0] <= 0:
                del _tickers[self._loop]
                if ticker[1] is not None:
                    ticker[1].cancel()
        if self._watching:
            _unwatch()


def _tick(loop: Any) -> None:
    ticker = _tickers.get(loop)
    if ticker is not None:
        ticker[1] = loop.call_later(WAKE_SECONDS, _tick, loop)


def _on_sigint(signum: int, frame: Any) -> None:
    import signal

    global _interrupts
    _interrupts += 1
    # The execution interrupted: the one whose step runs now (the signal comes in its task's context); when that is
    # not known, every execution with a step running.
    execution = execution_id()
    _interrupted_in.update([execution] if execution in _running else _running)
    if callable(_passed_on):
        _passed_on(signum, frame)
    elif _passed_on != signal.SIG_IGN:  # SIG_DFL, or a handler not set from Python
        raise KeyboardInterrupt


def _watch() -> bool:
    """Note SIGINTs (passing them on); only on the main thread, where signal handlers are set."""
    global _watching, _passed_on
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return False
    # Installed whenever it is not the current handler, not only by the first step: ipykernel sets a handler of its
    # own for each awaiting cell and puts the old one back after it, even while a step of an earlier cell still runs.
    current = signal.getsignal(signal.SIGINT)
    if current is not _on_sigint:
        _passed_on = current
        signal.signal(signal.SIGINT, _on_sigint)
    _watching += 1
    return True


def _unwatch() -> None:
    global _watching, _passed_on
    import signal

    _watching -= 1
    if _watching == 0:
        # Put back what was there, unless the cell already put back its own handler (a step that outlived it).
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, _passed_on)
        _passed_on = None


def wake_for_interrupts() -> LoopWaker | None:
    """In a kernel, a `LoopWaker` on the running loop; None elsewhere (plain Python needs none)."""
    if not in_kernel():
        return None
    import asyncio

    try:
        return LoopWaker(asyncio.get_running_loop())
    except RuntimeError:
        return None
