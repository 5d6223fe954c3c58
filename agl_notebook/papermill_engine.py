"""A papermill engine that names the notebook to its kernel, so agl_notebook steps replay under papermill.

papermill runs the kernel in its own working folder (or ``--cwd``) and tells it nothing of the notebook; before the
kernel starts it writes its output copy, with every code cell's outputs cleared, which for ``papermill NB.ipynb
NB.ipynb`` overwrites the records the notebook kept in its outputs. This engine, papermill's own nbclient engine
otherwise, sets ``AGL_NOTEBOOK_PATH`` to the input notebook for the kernel (and ``AGL_NOTEBOOK_RUNNER`` to
``papermill``, so a headless error speaks of papermill) and, when the output overwrites the
input, first moves the records in outputs' metadata into the notebook metadata, where the copy keeps them.

The ``papermill.engine`` entry point names this module, which papermill imports when it starts: the module is the
engine ``agl-notebook`` (its functions are an engine's), and it makes `NotebookPathEngine` papermill's default
engine while that is still papermill's own, so plain ``papermill NB.ipynb OUT.ipynb`` replays (``--engine
nbclient`` runs without it). The entry point names the module rather than the class because papermill loads entry
points while it is being imported: a module imported before papermill is only half made when papermill asks for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from papermill.engines import NBClientEngine, papermill_engines

from ._settings import NOTEBOOK_PATH, RUNNER, set_for_kernels

PAPERMILL_RUNNER = "papermill"
"""What `AGL_NOTEBOOK_RUNNER` says in the kernels papermill starts through this engine (a headless error names
papermill's way to give answers)."""


class NotebookPathEngine(NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine, with ``AGL_NOTEBOOK_PATH`` naming the input notebook for the kernel."""

    @classmethod
    def execute_notebook(cls, nb: Any, kernel_name: str, output_path: str | None = None, **kwargs: Any) -> Any:
        """Execute as papermill's nbclient engine does, the kernel told which notebook it runs."""
        source = _local_file(kwargs.get("input_path"))
        if source is not None and output_path is not None and _local_file(output_path, exists=False) == source:
            from .notebook.nbfile import consolidate

            consolidate(nb)
        named = {} if source is None or NOTEBOOK_PATH.get() else {NOTEBOOK_PATH.name: str(source)}  # the person's wins
        with set_for_kernels({**named, RUNNER.name: PAPERMILL_RUNNER}):
            return super().execute_notebook(nb, kernel_name, output_path=output_path, **kwargs)


def _local_file(path: object, *, exists: bool = True) -> Path | None:
    """``path`` as an absolute local notebook path (None for a URL, a notebook object, or a missing file)."""
    if not isinstance(path, str | os.PathLike) or "://" in str(path) or not str(path).endswith(".ipynb"):
        return None
    # papermill resolves the paths it was given against its working folder before --cwd, which its local file
    # handler keeps; the engine itself runs inside --cwd.
    from papermill.iorw import papermill_io

    try:
        base = getattr(papermill_io.get_handler("local"), "_cwd", None) or os.getcwd()
    except Exception:  # no local handler registered: the paths are taken as given
        base = os.getcwd()
    resolved = (Path(base) / path).resolve()
    return resolved if resolved.is_file() or not exists else None


def execute_notebook(nb: Any, kernel_name: str, **kwargs: Any) -> Any:
    """The engine's entry (papermill calls it on the registered engine)."""
    return NotebookPathEngine.execute_notebook(nb, kernel_name, **kwargs)


def nb_kernel_name(nb: Any, name: str | None = None) -> Any:
    """The kernel name papermill uses, as its nbclient engine tells it."""
    return NotebookPathEngine.nb_kernel_name(nb, name)


def nb_language(nb: Any, language: str | None = None) -> Any:
    """The notebook's language, as papermill's nbclient engine tells it."""
    return NotebookPathEngine.nb_language(nb, language)


if papermill_engines.get_engine(None) is NBClientEngine:
    papermill_engines.register(None, NotebookPathEngine)
