"""The pytest plugin that makes nbval-run notebooks replay (installed with the package, as ``pytest11``).

Under ``pytest --nbval`` (or ``--nbval-lax``) it sets, in the environment the notebook kernels inherit:
``AGL_NOTEBOOK_UNDER_NBVAL=1`` (the default mode becomes ``replay``), ``AGL_NOTEBOOK_BLOCK_MODELS=1`` (any model
call fails loudly), and, before each notebook's kernel starts, ``AGL_NOTEBOOK_PATH`` (nbval tells the kernel nothing
about its notebook). At the end of the run it says what each notebook's kernel replayed and the model calls made,
then how to open the notebooks in JupyterLab (`agl_notebook._nbval_summary`). Without nbval it does nothing, and it
imports nothing of agl_notebook, so it costs every other pytest run nothing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# Spelled here rather than taken from agl_notebook._settings (the table of every setting), so loading the plugin
# never imports agl_notebook (test_nbval checks they agree).
NBVAL_VARIABLE = "AGL_NOTEBOOK_UNDER_NBVAL"
BLOCK_VARIABLE = "AGL_NOTEBOOK_BLOCK_MODELS"
PATH_VARIABLE = "AGL_NOTEBOOK_PATH"


def _nbval_active(config: pytest.Config) -> bool:
    return bool(config.getoption("nbval", default=False) or config.getoption("nbval_lax", default=False))


def pytest_configure(config: pytest.Config) -> None:
    """Make kernels started by nbval replay and refuse model calls."""
    if _nbval_active(config):
        os.environ[NBVAL_VARIABLE] = "1"
        os.environ[BLOCK_VARIABLE] = "1"
        # What each notebook replayed and the model calls made, said at the end (`make demo`'s last lines).
        from ._nbval_summary import NbvalSummary

        config.pluginmanager.register(NbvalSummary(), "agl_notebook_nbval_summary")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Name the notebook before nbval starts its kernel (that happens in this item's setup)."""
    if type(item).__name__ != "NbCellItem":
        return
    notebook: Any = getattr(item.parent, "path", None)
    if notebook is not None:
        os.environ[PATH_VARIABLE] = str(notebook.resolve())
