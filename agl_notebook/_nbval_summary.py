"""What `make demo` says at its end: what each notebook replayed, the model calls made, how to open them.

`pytest --nbval notebooks/` alone prints dots and "43 passed". Under nbval, the pytest plugin registers
`NbvalSummary`, which asks each notebook's kernel, after its last cell and before nbval stops it, for the counts the
library kept while the cells ran (`agl_notebook._tally`: every unit the engine ended, replayed or live; every request
sent to a model that reaches the network; every call refused because model calls are blocked). At the end it prints
one line per notebook that used agl_notebook, then the command that opens the notebooks in JupyterLab, as the last
lines of the run:

    What each notebook did, counted in its kernel (model calls are blocked under nbval):
      01_first_step.ipynb: 1 step replayed from its recordings; 0 model calls
      08_map.ipynb: 21 map items replayed from its recordings; 0 model calls
    43 passed in 40.12s
    Open them in JupyterLab:
      .venv/bin/jupyter lab notebooks/

The kernel is asked the way nbval's own coverage support asks it (an execute request on its shell channel), with a
``user_expressions`` entry and ``silent`` set, so nothing is displayed and no output of the notebook changes. A
kernel that never imported agl_notebook is not asked anything of it (nothing is imported there).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shlex
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import pytest

from . import _tally

ASK_TIMEOUT = 30.0
"""Seconds to wait for a kernel's counts (it has just gone idle after the notebook's last cell)."""

# Evaluated in the kernel: None where agl_notebook was never imported, "" where nothing of it counted yet.
_EXPRESSION = (
    "(lambda m: None if 'agl_notebook' not in m else "
    f"(m[{_tally.__name__!r}].snapshot() if {_tally.__name__!r} in m else ''))(__import__('sys').modules)"
)

_KINDS: tuple[_tally.Kind, ...] = ("step", "map item", "JSON-function call", "client-tools run")
_PLURALS = {"step": "steps", "map item": "map items", "JSON-function call": "JSON-function calls",
            "client-tools run": "client-tools runs"}  # fmt: skip
_HOW: dict[str, str] = {
    "replayed": "replayed from its recordings",
    "offline": "run on the scripted model",
    "live": "run live",
    "missed": "not replayed (a replay miss)",
    "failed": "ended in an error",
}


@dataclass
class Counts:
    """What one notebook's kernel counted (`agl_notebook._tally.snapshot`)."""

    units: dict[tuple[str, str], int] = field(default_factory=dict)
    """(kind, how) -> how many units ended so."""
    model_requests: int = 0
    """Requests sent to a model that reaches the network."""
    blocked: int = 0
    """Calls refused because model calls are blocked."""

    @classmethod
    def from_snapshot(cls, text: str) -> Counts:
        """The counts of a snapshot's JSON ("" when nothing was counted)."""
        if not text:
            return cls()
        data = json.loads(text)
        units = {(str(kind), str(how)): int(n) for kind, how, n in data["units"]}
        return cls(units, int(data["model_requests"]), int(data["blocked"]))

    def line(self) -> str:
        """What the notebook did, in words: each kind of unit by how it ended, then the model calls."""
        parts = [
            f"{n} {kind if n == 1 else _PLURALS.get(kind, kind)} {_HOW.get(how, how)}"
            for how in _HOW
            for kind in (*_KINDS, *sorted({k for k, _ in self.units} - set(_KINDS)))
            if (n := self.units.get((kind, how), 0))
        ]
        return f"{', '.join(parts) or 'nothing run through agl_notebook'}; {self.model_calls()}"

    def model_calls(self) -> str:
        """What the model calls come to: "0 model calls", or how many were made and how many were refused.

        A refused call is one `refuse_blocked_call` stopped: a step's, or a JSON function's ``llm`` or ``api``.
        """
        calls = self.model_requests + self.blocked
        said = f"{calls} model call{'' if calls == 1 else 's'}"
        blocked = "model and network calls are blocked here"
        if self.blocked and self.model_requests:
            return f"{said} ({self.model_requests} made, {self.blocked} refused: {blocked})"
        if self.blocked:
            return f"{said} (refused: {blocked}, so its cell failed)"
        return said


class NbvalSummary:
    """The pytest plugin object that counts each nbval notebook's work and prints it at the end of the run."""

    def __init__(self) -> None:
        self.notebooks: dict[Path, Counts | None] = {}
        """Each notebook that used agl_notebook, in the order run: its counts, or None when they could not be read."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After a notebook's last cell, before nbval stops its kernel (in this teardown), ask it for its counts."""
        notebook = item.parent
        kernel = getattr(notebook, "kernel", None)
        path = getattr(notebook, "path", None)
        if kernel is None or path is None or not hasattr(kernel, "kc"):
            return  # not an nbval cell, or its kernel never started
        if nextitem is not None and nextitem.parent is notebook:
            return
        counts: Counts | None
        try:
            if not kernel.is_alive():
                raise RuntimeError("its kernel had stopped")
            answer = _ask(kernel)
            if answer is None:
                return  # the notebook never imported agl_notebook: nothing to say of it
            counts = Counts.from_snapshot(answer)
        except (Empty, RuntimeError, OSError, ValueError, KeyError, TypeError):
            counts = None  # a cell timed out or crashed the kernel: said as "not counted", never guessed
        self.notebooks[Path(path)] = counts

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """One line per notebook that used agl_notebook."""
        if not self.notebooks:
            return
        write = terminalreporter.write_line
        write("What each notebook did, counted in its kernel (model calls are blocked under nbval):", bold=True)
        for path, counts in self.notebooks.items():
            said = counts.line() if counts is not None else "not counted (its kernel had stopped)"
            write(f"  {path.name}: {said}")

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """After pytest's own last line ("43 passed"), the command that opens the notebooks in JupyterLab."""
        result = yield
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if self.notebooks and reporter is not None:
            for line in open_in_jupyterlab(list(self.notebooks)):
                reporter.write_line(line)
        return result


def _ask(kernel: Any) -> str | None:
    """The kernel's snapshot of its counts ("" when agl_notebook counted nothing), or None without agl_notebook."""
    client = kernel.kc
    msg_id = client.execute("", silent=True, store_history=False, user_expressions={"tally": _EXPRESSION})
    deadline = time.monotonic() + ASK_TIMEOUT
    while True:
        reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    found = reply["content"].get("user_expressions", {}).get("tally", {})
    if found.get("status") != "ok":
        raise RuntimeError(f"the kernel could not tell its counts: {found.get('ename')}: {found.get('evalue')}")
    value = ast.literal_eval(found["data"]["text/plain"])  # the repr of a str, or None
    if value is not None and not isinstance(value, str):
        raise ValueError(f"the kernel's counts are not a text: {value!r}")
    return value


def open_in_jupyterlab(notebooks: list[Path]) -> list[str]:
    """The lines that end the run: the command opening the notebooks' folder in this environment's JupyterLab.

    When JupyterLab is not installed here, the install command comes first (the ``[lab]`` extra, from the checkout
    when the run is in one).
    """
    scripts = Path(sys.executable).parent
    folder = Path(os.path.commonpath([p.resolve().parent for p in notebooks]))
    lines = ["Open them in JupyterLab:"]
    if importlib.util.find_spec("jupyterlab") is None:
        lines[0] = "Open them in JupyterLab (not installed in this environment yet):"
        extra = ".[lab]" if Path("pyproject.toml").is_file() else "agl_notebook[lab]"
        lines.append(f"  {shlex.quote(_shown(scripts / 'pip'))} install {shlex.quote(extra)}")
    lines.append(f"  {shlex.quote(_shown(scripts / 'jupyter'))} lab {shlex.quote(_shown(folder) + os.sep)}")
    return lines


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (".venv/bin/jupyter"), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
