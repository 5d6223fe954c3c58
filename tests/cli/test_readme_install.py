"""The README's install-and-open path, as a newcomer runs it: a fresh virtual environment, ``pip install '.[lab]'``,
then ``jupyter lab notebooks/``, whose server must answer and list the example notebooks.

The install is real (pip, from the package registry through pip's cache, the package built from a clean copy of the
checkout) but skips the JupyterLab extension's npm build, as ``make demo`` does (``SKIP_JUPYTER_BUILDER=1``): the
extension is not what this path checks, and CI's time is better spent elsewhere. JupyterLab listens on loopback only,
with a token made at run time, and is stopped at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.paths import ROOT

INSTALL_SECONDS = 900
"""The most the install may take: measured at 76 s without writing bytecode (7 minutes with it, on a loaded 2-core
machine), pip's cache warm."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_copy(into: Path) -> Path:
    """The checkout without its git folder, virtual environments, node_modules and built extension."""
    copy = into / "src"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "node_modules", "__pycache__", ".*_cache", "lib", "*.tsbuildinfo", "build"
    )
    shutil.copytree(ROOT, copy, ignore=ignore)
    shutil.rmtree(copy / "agl_notebook" / "labextension", ignore_errors=True)
    return copy


def test_the_readme_install_and_open_path_in_a_new_virtual_environment(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install '.[lab]'" in readme and "jupyter lab notebooks/" in readme, "the README says what this runs"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        SKIP_JUPYTER_BUILDER="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),  # pip's cache, kept
    )
    copy = clean_copy(tmp_path)

    started = time.monotonic()
    # --no-compile: writing bytecode for JupyterLab's thousands of files is a third of the install, and not what the
    # README's path can get wrong (the extra's requirements are).
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-compile", f"{copy}[lab]"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
        check=False,
    )
    took = time.monotonic() - started
    assert install.returncode == 0, install.stderr[-3000:]
    print(f"pip install '.[lab]' into a new virtual environment: {took:.0f} s")
    assert (bin_dir / "jupyter-lab").exists(), "the [lab] extra brings JupyterLab"

    notebooks = copy / "notebooks"
    port, token = free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [
            str(bin_dir / "jupyter"),
            "lab",
            str(notebooks),
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={token}",
            "--allow-root",  # CI runs as root, and JupyterLab refuses to without it
        ],
        cwd=copy,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        listed = wait_for_listing(f"http://127.0.0.1:{port}/api/contents/?token={token}", server)
        content = listed["content"]
        assert isinstance(content, list)
        names = {item["name"] for item in content}
        expected = {p.name for p in notebooks.glob("*.ipynb")}
        assert len(expected) >= 8 and expected <= names, names
        lab = urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30)
        assert lab.status == 200 and b"JupyterLab" in lab.read()
    finally:
        stop(server)
        if server.stderr is not None:
            server.stderr.close()


def stop(server: subprocess.Popen[str]) -> None:
    """Stop JupyterLab and what it started (its own process group), if it still runs."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def wait_for_listing(url: str, server: subprocess.Popen[str], timeout: float = 120) -> dict[str, object]:
    """The server's listing of the notebooks' folder, once it answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"jupyter lab exited with {server.returncode}: {server.stderr.read() if server.stderr else ''}")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return dict(json.load(answer))
        except OSError:
            time.sleep(0.5)
    pytest.fail("jupyter lab did not answer within two minutes")
