"""What this process's units of work did: replayed, run live, failed; and the model calls made or refused.

The engine counts every unit it ends (`count`), `MeteredModel` every request it sends to a model that reaches the
network (`model_request`) and `modes.refuse_blocked_call` every call it refuses (`blocked`). Nothing here is shown
in a notebook: the nbval summary (`agl_notebook._nbval_summary`) reads `snapshot()` from each notebook's kernel
after its last cell, so `make demo` can say what each notebook replayed and that no model was called, from what
really happened rather than from what the displays say.

The counts are per process (a kernel runs one notebook); a lock keeps them whole when `step_sync` runs a step on
a worker thread.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Literal

Kind = Literal["step", "map item", "JSON-function call", "client-tools run"]
"""What a unit of work was started as."""

How = Literal["replayed", "live", "offline", "missed", "failed"]
"""How a unit ended: replayed from its record (a map item's recorded failure included), run live on a model that
reaches the network, run live on one that does not (the scripted model), found no recording to replay in mode
``replay`` (`ReplayMissError`), or failed otherwise (a refused model call, an error, an interrupt)."""

VERSION = 1
"""The version of `snapshot`'s JSON."""

_lock = threading.Lock()
_units: Counter[tuple[Kind, How]] = Counter()
_model_requests = 0
_blocked = 0

_claimed: ContextVar[Kind | None] = ContextVar("agl_notebook_unit_kind", default=None)


@contextmanager
def counted_as(kind: Kind) -> Iterator[None]:
    """Count the next unit the engine starts in this context as ``kind`` (a client-tools run is a step)."""
    token = _claimed.set(kind)
    try:
        yield
    finally:
        _claimed.reset(token)


def claim_kind(default: Kind) -> tuple[Kind, Token[Kind | None]]:
    """The kind the caller asked the next unit to be counted as (else ``default``), and a token to `release`.

    Claimed once: units that this one starts (a step in a tool's handler) are counted by their own callers.
    """
    kind = _claimed.get()
    return kind or default, _claimed.set(None)


def release(token: Token[Kind | None]) -> None:
    """Give back what `claim_kind` took, when the unit ends."""
    _claimed.reset(token)


def count(kind: Kind, how: How) -> None:
    """One unit of ``kind`` ended ``how``."""
    with _lock:
        _units[kind, how] += 1


def model_request() -> None:
    """One request was sent to a model that reaches the network."""
    global _model_requests
    with _lock:
        _model_requests += 1


def blocked() -> None:
    """One call to a model or a server was refused because such calls are blocked here."""
    global _blocked
    with _lock:
        _blocked += 1


def snapshot() -> str:
    """The counts so far, as JSON: ``{"version", "units": [[kind, how, n], ...], "model_requests", "blocked"}``."""
    with _lock:
        units = [[kind, how, n] for (kind, how), n in sorted(_units.items())]
        return json.dumps(
            {"version": VERSION, "units": units, "model_requests": _model_requests, "blocked": _blocked},
            sort_keys=True,
        )


def reset() -> None:
    """Forget every count (for tests)."""
    global _model_requests, _blocked
    with _lock:
        _units.clear()
        _model_requests = _blocked = 0
