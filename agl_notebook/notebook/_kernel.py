"""What the running Jupyter kernel tells us: whether there is one, its version, and the executing request.

Nothing here imports IPython or ipykernel unless they are already loaded, so calling `in_kernel()` from plain
Python costs nothing.
"""

from __future__ import annotations

import sys
from typing import Any


def kernel() -> Any | None:
    """The ipykernel kernel object running this code, or None outside a kernel."""
    if "ipykernel" not in sys.modules or "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def in_kernel() -> bool:
    """True inside a Jupyter (ipykernel) kernel."""
    return kernel() is not None


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
    from IPython import get_ipython

    shell = get_ipython()
    ns = getattr(shell, "user_ns", None)
    return ns if isinstance(ns, dict) else {}
