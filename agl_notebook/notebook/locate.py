"""Finding the notebook a kernel runs and the cell it executes.

In order: ``JPY_SESSION_NAME`` (set by jupyter_server 2.1 or later for JupyterLab and Notebook 7), VS Code's
``__vsc_ipynb_file__``, an explicit setting (``AGL_NOTEBOOK_PATH`` or `set_notebook_path`; the nbval plugin,
``agl-notebook execute`` and the papermill engine set it), and last the notebooks in the working directory one of
whose code cells has exactly the executing source (nbclient, nbconvert and ``jupyter execute`` run the kernel in the
notebook's folder).

Headless runners leave copies beside the notebook they run: ``NB.nbconvert.ipynb`` (nbconvert's output) and
papermill's output, written before the kernel starts and naming its input in ``metadata.papermill``. A copy whose
source notebook also holds the code is passed over, so a stale copy never brings back records that were cleared in
the notebook being run. The newest file is not the answer: papermill's output is always the newest, and an old
nbconvert output is newer than a notebook nobody saved since. Nor is any other copy (JupyterLab's Duplicate
``NB-Copy1.ipynb``, a backup, ``jupyter execute --output``'s): two notebooks holding the code are not guessed
between, and a headless kernel that cannot tell runs nothing live that would reach a model (docs/notebooks.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _settings
from .._files import read_json_file
from ..errors import InputError
from . import _kernel

PATH_VARIABLE = _settings.NOTEBOOK_PATH.name
"""The environment variable naming the notebook explicitly."""

NBCONVERT_SUFFIX = ".nbconvert.ipynb"
"""What ``jupyter nbconvert --to notebook`` appends to the name of the notebook it writes a copy of."""

_explicit: Path | None = None


def set_notebook_path(path: str | Path | None) -> None:
    """Name the notebook this kernel runs (None forgets it)."""
    global _explicit
    _explicit = Path(path).resolve() if path is not None else None


@dataclass(frozen=True)
class Location:
    """Where the kernel looked for its notebook, and what it found."""

    path: Path | None
    """The notebook file, or None when it cannot be told."""
    folder: Path | None = None
    """The working folder searched for the executing code (None when something named the notebook)."""
    matches: tuple[Path, ...] = ()
    """The notebooks in ``folder`` holding the executing code (several, or none, when ``path`` is None)."""
    named: str | None = None
    """What ``AGL_NOTEBOOK_PATH`` held when it named no notebook file."""


def notebook_path(
    *,
    environ: Mapping[str, str] | None = None,
    user_ns: Mapping[str, Any] | None = None,
    code: str | None = None,
    cwd: Path | None = None,
) -> Path | None:
    """The notebook file this kernel runs, or None when it cannot be told."""
    return locate(environ=environ, user_ns=user_ns, code=code, cwd=cwd).path


def locate(
    *,
    environ: Mapping[str, str] | None = None,
    user_ns: Mapping[str, Any] | None = None,
    code: str | None = None,
    cwd: Path | None = None,
) -> Location:
    """The notebook file this kernel runs, with what was searched when it cannot be told."""
    ns = _kernel.user_namespace() if user_ns is None else user_ns
    named = _settings.NOTEBOOK_PATH.get(environ) or None
    candidates: list[object] = [_settings.JUPYTER_SESSION.get(environ), ns.get("__vsc_ipynb_file__"), _explicit, named]
    for candidate in candidates:
        if candidate and str(candidate).endswith(".ipynb"):
            path = Path(str(candidate))
            if path.is_file():
                return Location(path)
    source = _kernel.executing_code() if code is None else code
    folder = Path.cwd() if cwd is None else cwd
    if not source.strip():
        return Location(None, folder, named=named)
    matches, metadata = _matching(folder, source)
    return Location(_choose(matches, metadata), folder, matches, named)


def _choose(matches: tuple[Path, ...], metadata: Mapping[Path, Any]) -> Path | None:
    """The one notebook among ``matches`` that is not a runner's copy of another of them; None if not one."""
    if len(matches) == 1:
        return matches[0]
    originals = [p for p in matches if _copied_from(p, metadata.get(p)) not in matches]
    return originals[0] if len(originals) == 1 else None


def _copied_from(path: Path, metadata: Any) -> Path | None:
    """The notebook ``path`` is a headless runner's copy of (nbconvert's or papermill's output), if it is one."""
    if path.name.endswith(NBCONVERT_SUFFIX):
        return path.with_name(path.name[: -len(NBCONVERT_SUFFIX)] + ".ipynb")
    papermill = metadata.get("papermill") if isinstance(metadata, dict) else None
    if not isinstance(papermill, dict):
        return None
    source, output = papermill.get("input_path"), papermill.get("output_path")
    if not isinstance(source, str) or not isinstance(output, str) or not source.endswith(".ipynb"):
        return None
    # Paths as papermill was given them (relative to where it ran, the kernel's folder unless --cwd): a file is
    # a copy when papermill wrote it from a notebook of another name (in place, it is its own source).
    if Path(output).name != path.name or Path(source).name == path.name:
        return None
    return path.with_name(Path(source).name)


def _matching(folder: Path, source: str) -> tuple[tuple[Path, ...], dict[Path, Any]]:
    """The notebooks in ``folder`` with a code cell whose source is ``source``, and their notebook metadata."""
    matches: list[Path] = []
    metadata: dict[Path, Any] = {}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nb = read_json_file(path)
        except InputError:
            continue
        if isinstance(nb, dict) and _has_code_cell(nb, source):
            matches.append(path)
            metadata[path] = nb.get("metadata")
    return tuple(matches), metadata


def _has_code_cell(nb: dict[str, Any], source: str) -> bool:
    cells = nb.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            text = cell.get("source", "")
            if isinstance(text, list):
                text = "".join(t for t in text if isinstance(t, str))
            if text == source:
                return True
    return False


def not_found_message(location: Location) -> str:
    """What to tell a person whose headless kernel cannot tell its notebook (plain text): the candidates, the fix.

    It names every candidate, folder included, so the person can tell which one to name.
    """
    if location.matches:
        shown = location.matches[:5]
        names = ", ".join(p.name for p in shown) + (", ..." if len(location.matches) > len(shown) else "")
        why = f"{len(location.matches)} notebooks in {location.folder} hold the running cell's code ({names})"
    else:
        why = f"no notebook in {location.folder} holds the running cell's code"
    if location.named:
        why = f"{PATH_VARIABLE}={location.named} names no notebook file, and {why}"
    return (
        f"This kernel cannot tell which notebook it runs: {why}, so it reads no recordings. Name the notebook for "
        f"the kernel with {PATH_VARIABLE}=/path/to/notebook.ipynb in the environment the kernel starts with, or "
        f"run it with `agl-notebook execute NOTEBOOK.ipynb`, which names it."
    )
