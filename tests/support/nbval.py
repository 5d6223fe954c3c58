"""nbval on one notebook in a child pytest, with none of this process's agl_notebook settings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def nbval(
    notebook: Path, settings: Mapping[str, str] | None = None, *, cwd: Path | None = None, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run nbval on ``notebook`` (a file or a folder) from ``cwd`` (default: its folder), with pytest's ``args``.

    ``settings`` are the only agl_notebook variables its kernel sees.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGL_NOTEBOOK_")} | dict(settings or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", *args, str(notebook)],
        cwd=notebook.parent if cwd is None else cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
