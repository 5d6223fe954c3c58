"""nbval on one notebook in a child pytest, with none of this process's agl_notebook settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def nbval(notebook: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGL_NOTEBOOK_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", str(notebook)],
        cwd=notebook.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
