"""The notebook integration, kernel side (the notebook layer of docs/architecture.md).

Views, the widget terminal, the notebook store, locating the notebook and the cell, and running steps
synchronously in a cell.
"""

from .locate import notebook_path, set_notebook_path

__all__ = ["notebook_path", "set_notebook_path"]
