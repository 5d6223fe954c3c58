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


# What only some notebooks use, loaded when first used (docs/architecture.md, "Import time"): a map, a comparison or
# a batch; approvals; the screens of questions; the JSON functions' events; the price table; a step's scratch
# folder; a record's time.
ON_FIRST_USE = (
    "asyncio",
    "datetime",
    "shutil",
    "tempfile",
    "pandas",
    "agl_notebook.run._map_state",
    "agl_notebook.run._compare",
    "agl_notebook.run._map",
    "agl_notebook.approvals",
    "agl_notebook.screens",
    "agl_notebook.events.functions",
    "agl_notebook.models.prices",
    "agl_notebook._map_scope",
)


def test_import_leaves_what_only_some_notebooks_use_for_its_first_use() -> None:
    code = f"import json, sys, agl_notebook; print(json.dumps(sorted(set(sys.modules) & set({list(ON_FIRST_USE)!r}))))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], f"import agl_notebook loaded {done.stdout.strip()}"
    uses = (
        "from agl_notebook import MapItemError, MapResults; from agl_notebook.run import Comparison; "
        "from agl_notebook import Approve, Deny, Edit, Event, Screen, TextInput; "
        "from agl_notebook.events import EVENT_TYPES, Logged, StepStarted; "
        "assert Logged in EVENT_TYPES and StepStarted in Event.__args__ and Logged in Event.__args__; "
        "import agl_notebook; assert agl_notebook.Approve is Approve; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", uses], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
