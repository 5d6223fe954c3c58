"""``make demo`` needs no Node.js; ``make test`` still builds the JupyterLab extension.

The make logic is read from ``make -n`` (what it would run) against a scratch virtual environment folder; the install
the demo runs is then made for real, without Node.js on PATH, in a fresh virtual environment (the package alone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SKIP = "SKIP_JUPYTER_BUILDER=1"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def would_run(target: str, venv: Path) -> list[str]:
    """The commands ``make TARGET`` would run (``make -n``), with the virtual environment in ``venv``."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "MAKEFLAGS"},
    )
    return done.stdout.splitlines()


def installs(commands: list[str]) -> list[str]:
    return [c for c in commands if "pip install" in c and "-e " in c]


def stamps(venv: Path, *names: str) -> None:
    """Setup stamps newer than every file they depend on."""
    venv.mkdir(exist_ok=True)
    later = time.time() + 3600
    for name in names:
        (venv / name).touch()
        os.utime(venv / name, (later, later))


def test_demo_installs_the_package_without_building_the_extension(tmp_path: Path) -> None:
    commands = would_run("demo", tmp_path / "venv")
    (install,) = installs(commands)
    assert install.startswith(SKIP)
    assert commands[-1].endswith("pytest --nbval -p no:cacheprovider -q notebooks/")


def test_only_reliability_report_asks_for_the_reliability_page(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stamps(venv, ".installed", ".installed-python")  # setup is up to date: only the target's own commands remain
    assert [c for c in would_run("test", venv) if "--reliability-report" in c] == []
    (command,) = would_run("reliability-report", venv)
    assert command.endswith("pytest -q -p no:cacheprovider -m reliability --reliability-report")


def test_test_builds_the_extension(tmp_path: Path) -> None:
    (install,) = installs(would_run("test", tmp_path / "venv"))
    assert SKIP not in install


def test_test_builds_the_extension_after_a_demo_setup(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stamps(venv, ".installed-python")
    (install,) = installs(would_run("test", venv))
    assert SKIP not in install
    assert installs(would_run("demo", venv)) == []


def test_demo_after_a_full_setup_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    stamps(venv, ".installed", ".installed-python")
    assert installs(would_run("demo", venv)) == []
    assert installs(would_run("test", venv)) == []


def test_the_package_installs_without_node(tmp_path: Path) -> None:
    """The demo's install, for real, in a fresh virtual environment whose PATH has no node or npm."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    assert shutil.which("npm", path=str(bin_dir)) is None and shutil.which("node", path=str(bin_dir)) is None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=str(bin_dir), SKIP_JUPYTER_BUILDER="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    copy = tmp_path / "src"  # a clean copy: no built extension in it, nothing written into the working tree
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "labextension", ".*_cache"),
    )
    shutil.copytree(
        ROOT / "labextension",
        copy / "labextension",
        ignore=shutil.ignore_patterns("node_modules", "lib", "*.tsbuildinfo"),
    )
    assert not (copy / "agl_notebook" / "labextension").exists()

    done = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(copy)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    imported = subprocess.run(
        [str(bin_dir / "python"), "-c", "import agl_notebook; print(agl_notebook.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert imported.stdout.strip() == str(copy / "agl_notebook" / "__init__.py")
