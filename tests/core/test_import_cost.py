"""``import agl_notebook`` must not pull in the heavy optional dependencies (checked in a fresh interpreter)."""

import json
import subprocess
import sys

from tests.support.paths import ROOT

HEAVY = ("anthropic", "ipywidgets", "nbformat", "httpx2")


def test_import_does_not_load_heavy_dependencies() -> None:
    code = (
        "import json, sys, agl_notebook; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], f"import agl_notebook imported {done.stdout.strip()}"
