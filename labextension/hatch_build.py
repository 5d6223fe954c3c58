"""Build function for hatch-jupyter-builder: builds the JupyterLab extension only when it is out of date.

pyproject.toml names it as ``labextension.hatch_build.build`` (hatch-jupyter-builder imports it from the project
root). The extension is up to date when its build output is newer than every input (the TypeScript sources,
package.json, package-lock.json, tsconfig.json, .npmrc); then nothing runs, not even npm. Otherwise:

- ``npm ci`` (from the lockfile, ``--prefer-offline``: the npm cache answers when it can) when node_modules is
  missing or older than package-lock.json;
- ``npm run build:prod``: ``tsc``, then ``@jupyter/builder`` writes ``agl_notebook/labextension``.

Set ``SKIP_JUPYTER_BUILDER=1`` to install without building (and without Node.js).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("agl_notebook.labextension")

INPUTS = ("src", "package.json", "package-lock.json", "tsconfig.json", ".npmrc")
"""What the build reads, relative to the extension folder."""


def _newest(paths: list[Path]) -> float:
    newest = 0.0
    for path in paths:
        if path.is_dir():
            for parent, _, files in os.walk(path):
                for name in files:
                    newest = max(newest, (Path(parent) / name).stat().st_mtime)
        elif path.exists():
            newest = max(newest, path.stat().st_mtime)
    return newest


def up_to_date(ext: Path, out: Path) -> bool:
    """Whether ``out`` holds a complete build that is newer than every input in ``ext``."""
    manifest = out / "package.json"
    try:
        load = json.loads(manifest.read_text(encoding="utf-8"))["jupyterlab"]["_build"]["load"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not (out / load).is_file():
        return False
    # The builder empties the output folder and writes package.json first, after tsc has read the sources.
    return _newest([ext / name for name in INPUTS]) <= manifest.stat().st_mtime


def _run(cmd: list[str], cwd: Path) -> None:
    log.info("> %s (in %s)", " ".join(cmd), cwd)
    subprocess.run(cmd, cwd=cwd, check=True)


def build(target_name: str, version: str, path: str = "labextension", build_dir: str = "agl_notebook/labextension",
          build_cmd: str = "build:prod") -> None:
    """Build the extension in ``path`` into ``build_dir`` unless it is up to date."""
    ext = Path(path).resolve()
    out = Path(build_dir).resolve()
    if up_to_date(ext, out):
        log.info("The JupyterLab extension in %s is up to date.", out)
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "Building agl_notebook's JupyterLab extension needs Node.js (>= 20) and npm on PATH. Install them, or "
            "set SKIP_JUPYTER_BUILDER=1 to install agl_notebook without its JupyterLab extension (as `make demo` "
            "does: everything else works, and JupyterLab keeps recordings through outputs' metadata).")
    installed = ext / "node_modules" / ".package-lock.json"  # npm writes it after every install
    if not installed.exists() or installed.stat().st_mtime < (ext / "package-lock.json").stat().st_mtime:
        _run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"], ext)
    _run([npm, "run", build_cmd], ext)
