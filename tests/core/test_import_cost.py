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


# What only a map, a comparison or a batch needs: loaded when first used (a notebook of plain steps never does).
ON_FIRST_USE = (
    "asyncio",
    "pandas",
    "agl_notebook.run._map_state",
    "agl_notebook.run._compare",
    "agl_notebook.run._map",
)


def test_import_leaves_what_only_maps_need_for_their_first_use() -> None:
    code = f"import json, sys, agl_notebook; print(json.dumps(sorted(set(sys.modules) & set({list(ON_FIRST_USE)!r}))))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], f"import agl_notebook loaded {done.stdout.strip()}"
    uses = "from agl_notebook import MapItemError, MapResults; from agl_notebook.run import Comparison; print('ok')"
    done = subprocess.run([sys.executable, "-c", uses], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
