"""Finding the notebook a kernel runs and the cell it executes.

In order (FINDINGS): ``JPY_SESSION_NAME`` (set by jupyter_server for JupyterLab and Notebook 7), VS Code's
``__vsc_ipynb_file__``, an explicit setting (``AGL_NOTEBOOK_PATH`` or `set_notebook_path`; the nbval plugin and
``agl-notebook execute`` set it), and last a notebook in the working directory one of whose code cells has exactly
the executing source (nbclient and nbval run the kernel in the notebook's folder).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import _kernel

PATH_VARIABLE = "AGL_NOTEBOOK_PATH"
"""The environment variable naming the notebook explicitly."""

_explicit: Path | None = None


def set_notebook_path(path: str | Path | None) -> None:
    """Name the notebook this kernel runs (None forgets it)."""
    global _explicit
    _explicit = Path(path).resolve() if path is not None else None


def notebook_path(*, environ: Mapping[str, str] | None = None, user_ns: Mapping[str, Any] | None = None,
                  code: str | None = None, cwd: Path | None = None) -> Path | None:
    """The notebook file this kernel runs, or None when it cannot be told."""
    env = os.environ if environ is None else environ
    ns = _kernel.user_namespace() if user_ns is None else user_ns
    candidates: list[object] = [env.get("JPY_SESSION_NAME"), ns.get("__vsc_ipynb_file__"), _explicit,
                                env.get(PATH_VARIABLE)]
    for candidate in candidates:
        if candidate and str(candidate).endswith(".ipynb"):
            path = Path(str(candidate))
            if path.is_file():
                return path
    source = _kernel.executing_code() if code is None else code
    if not source.strip():
        return None
    folder = Path.cwd() if cwd is None else cwd
    matches = [p for p in sorted(folder.glob("*.ipynb")) if _has_code_cell(p, source)]
    return matches[0] if len(matches) == 1 else None


def _has_code_cell(path: Path, source: str) -> bool:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            text = cell.get("source", "")
            if isinstance(text, list):
                text = "".join(t for t in text if isinstance(t, str))
            if text == source:
                return True
    return False
