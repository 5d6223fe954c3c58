"""The labextension's own unit tests (``labextension/test``, ``node --test``) run with the rest of the suite.

They test the records-block logic the extension applies to a notebook model (lib/records.js, compiled from
src/records.ts): placing a record, leaving an unusable block alone, and which notebook a record belongs to when
several share a kernel. The package's build hook installed node_modules and compiled lib/ (``make setup``).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.paths import ROOT

EXTENSION = ROOT / "labextension"


def test_the_labextensions_unit_tests_pass() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to run the labextension's unit tests (and to build it): install Node.js >= 20.")
    if not (EXTENSION / "node_modules").is_dir():
        pytest.fail(f"{EXTENSION / 'node_modules'} is missing: run `make setup` (the build hook runs `npm ci`).")
    done = subprocess.run([npm, "test"], cwd=EXTENSION, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"npm test failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert "# fail 0" in done.stdout and "# pass " in done.stdout, done.stdout[-2000:]
