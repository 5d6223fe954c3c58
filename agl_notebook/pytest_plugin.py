"""The pytest plugin that makes nbval-run notebooks replay (installed with the package, as ``pytest11``).

Under ``pytest --nbval`` (or ``--nbval-lax``) it sets, in the environment the notebook kernels inherit:
``AGL_NOTEBOOK_UNDER_NBVAL=1`` (the default mode becomes ``replay``), ``AGL_NOTEBOOK_BLOCK_MODELS=1`` (any model
call fails loudly), ``AGL_NOTEBOOK_RUNNER=nbval`` (what a headless error names as the runner), and, before each
notebook's kernel starts, ``AGL_NOTEBOOK_PATH`` (nbval tells the kernel nothing about its notebook). At the end
of the run it says what each notebook's kernel replayed and the model calls made, then how to open the notebooks
in JupyterLab (`agl_notebook._nbval_summary`). Without nbval it does nothing, and it imports nothing of
agl_notebook, so it costs every other pytest run nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Spelled here rather than taken from agl_notebook._settings (the table of every setting), so loading the plugin
# never imports agl_notebook (test_nbval checks they agree).
NBVAL_VARIABLE = "AGL_NOTEBOOK_UNDER_NBVAL"
BLOCK_VARIABLE = "AGL_NOTEBOOK_BLOCK_MODELS"
PATH_VARIABLE = "AGL_NOTEBOOK_PATH"
RUNNER_VARIABLE = "AGL_NOTEBOOK_RUNNER"

_PERSONS_PATH = pytest.StashKey[str | None]()
"""``AGL_NOTEBOOK_PATH`` as it was before the plugin set it: given back to the items that are not notebook cells."""


def _nbval_active(config: pytest.Config) -> bool:
    return bool(config.getoption("nbval", default=False) or config.getoption("nbval_lax", default=False))


def pytest_configure(config: pytest.Config) -> None:
    """Make kernels started by nbval replay and refuse model calls."""
    if _nbval_active(config):
        os.environ[NBVAL_VARIABLE] = "1"
        os.environ[BLOCK_VARIABLE] = "1"
        os.environ[RUNNER_VARIABLE] = "nbval"
        config.stash[_PERSONS_PATH] = os.environ.get(PATH_VARIABLE)
        # What each notebook replayed and the model calls made, said at the end (`make demo`'s last lines).
        from ._nbval_summary import NbvalSummary

        config.pluginmanager.register(NbvalSummary(), "agl_notebook_nbval_summary")


def notebook_of(item: pytest.Item) -> Path | None:
    """The notebook file ``item`` tests, from the path pytest gives every item (nbval's cells have their file's).

    Told by the path, not by nbval's class names, which change between nbval versions (0.11 calls its items
    ``IPyNbCell``).
    """
    path = getattr(item, "path", None)
    return Path(path) if path is not None and str(path).endswith(".ipynb") else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Name the notebook before nbval starts its kernel (that happens in the setup of the notebook's first cell).

    Run first, so it comes before pytest's own setup, which sets up the notebook's collector and so starts the
    kernel. Every other item gets back the ``AGL_NOTEBOOK_PATH`` the person had, so a test after a notebook
    does not run with the last notebook named.
    """
    if _PERSONS_PATH not in item.config.stash:  # nbval is not on
        return
    notebook = notebook_of(item)
    if notebook is not None:
        os.environ[PATH_VARIABLE] = str(notebook.resolve())
        return
    persons = item.config.stash[_PERSONS_PATH]
    if persons is None:
        os.environ.pop(PATH_VARIABLE, None)
    else:
        os.environ[PATH_VARIABLE] = persons
