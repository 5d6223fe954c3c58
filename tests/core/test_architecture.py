"""The package's import structure: no import loop at all, and the layers of docs/architecture.md.

Loops count every import: at module level, inside a function (lazy) and under ``TYPE_CHECKING`` (type-only). The
layers are the import-linter contract in pyproject.toml, which `make lint` checks too; here it is also shown to
catch an import that goes the wrong way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

from tests.support.paths import ROOT


def import_loops(package: str) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a loop (strongly connected components)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                loops.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return loops


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root``, with the contract of ``root``'s pyproject.toml."""
    command = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(command), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def test_no_module_of_the_package_imports_itself_round_a_loop() -> None:
    assert import_loops("agl_notebook") == []


def test_the_layers_contract_is_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


def test_an_import_against_the_layers_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "agl_notebook", tmp_path / "agl_notebook", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    engine = tmp_path / "agl_notebook" / "run" / "_engine.py"
    reversed_import = "\n\ndef _reversed() -> None:\n    from ..client_tools import Runner  # noqa: F401\n"
    engine.write_text(engine.read_text() + reversed_import)
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "agl_notebook.run is not allowed to import agl_notebook.client_tools" in result.stdout
    assert "agl_notebook.run._engine -> agl_notebook.client_tools" in result.stdout
