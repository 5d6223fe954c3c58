"""The notebook store's session key (the notebook's resolved path): resolved once per path, again once the path
names another file (a symlink pointed elsewhere, another folder for a relative path, a file put in its place)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agl_notebook.notebook import store


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    store._resolved.clear()


@pytest.fixture
def resolves(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every `Path.resolve` call, counted."""
    made: list[Path] = []
    real = Path.resolve

    def counted(self: Path, strict: bool = False) -> Path:
        made.append(self)
        return real(self, strict)

    monkeypatch.setattr(Path, "resolve", counted)
    return made


def notebook(folder: Path, name: str = "n.ipynb") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("{}")
    return path


@pytest.mark.parametrize("lookups", [2, 10, 5_000])
def test_a_notebooks_key_is_resolved_once_however_often_it_is_asked(
    tmp_path: Path, resolves: list[Path], lookups: int
) -> None:
    # A batch map asked five times per item, and each resolve walks every part of the path (an lstat each).
    path = notebook(tmp_path / "a" / "b")
    keys = {store._key(path) for _ in range(lookups)}
    assert keys == {str(path.resolve())}
    assert len(resolves) == 2  # the first lookup's, and the assertion's own


def test_a_symlink_pointed_at_another_notebook_gives_that_notebooks_key(tmp_path: Path) -> None:
    first, second = notebook(tmp_path / "one"), notebook(tmp_path / "two")
    link = tmp_path / "link.ipynb"
    link.symlink_to(first)
    assert store._key(link) == str(first.resolve())
    link.unlink()
    link.symlink_to(second)
    assert store._key(link) == str(second.resolve())


def test_a_folder_symlink_pointed_elsewhere_gives_the_new_folders_notebook(tmp_path: Path) -> None:
    notebook(tmp_path / "one"), notebook(tmp_path / "two")
    folder = tmp_path / "current"
    folder.symlink_to(tmp_path / "one", target_is_directory=True)
    path = folder / "n.ipynb"
    assert store._key(path) == str((tmp_path / "one" / "n.ipynb").resolve())
    folder.unlink()
    folder.symlink_to(tmp_path / "two", target_is_directory=True)
    assert store._key(path) == str((tmp_path / "two" / "n.ipynb").resolve())


def test_a_relative_path_follows_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook(tmp_path / "one"), notebook(tmp_path / "two")
    relative = Path("n.ipynb")
    monkeypatch.chdir(tmp_path / "one")
    assert store._key(relative) == str((tmp_path / "one" / "n.ipynb").resolve())
    monkeypatch.chdir(tmp_path / "two")
    assert store._key(relative) == str((tmp_path / "two" / "n.ipynb").resolve())


def test_a_missing_notebook_is_resolved_each_time_and_none_has_no_key(tmp_path: Path, resolves: list[Path]) -> None:
    missing = tmp_path / "gone" / "n.ipynb"
    assert store._key(missing) == store._key(missing) == str(tmp_path.resolve() / "gone" / "n.ipynb")
    assert store._resolved == {}
    assert store._key(None) == ""


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    paths = [notebook(tmp_path, f"n{i}.ipynb") for i in range(store._RESOLVED_MOST * 2 + 3)]
    for path in paths:
        assert store._key(path) == str(path.resolve())
    assert len(store._resolved) <= store._RESOLVED_MOST
    assert all(os.path.isabs(key) for _, key in store._resolved.values())
