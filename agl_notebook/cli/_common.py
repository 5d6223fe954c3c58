"""What every command shares: exit codes, the checks of a notebook file and its records block, messages."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..errors import InputError
from ..notebook.nbfile import METADATA_KEY, read_notebook_json
from ..replay.records import block_from_json
from .report import (
    Scan,
    printable,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Failed(Exception):
    """The execution failed; the message says where and why (exit code 1)."""


# Checks ------------------------------------------------------------------------------------------------------------


def _existing_notebook_file(path: Path) -> Path:
    if not path.exists():
        raise InputError(f"{path}: no such file.")
    if not path.is_file():
        raise InputError(f"{path}: not a file.")
    return path.resolve()


def _output_path(output: Path) -> Path:
    if output.is_dir():
        raise InputError(f"--output {output}: is a folder; give the path of the notebook file to write.")
    folder = output.resolve().parent
    if not folder.is_dir():
        raise InputError(f"--output {output}: the folder {folder} does not exist.")
    return output.resolve()


def _metadata_block_problems(data: dict[str, Any], path: Path) -> list[str]:
    """What makes the notebook metadata's records block unusable as a whole (each record is checked elsewhere)."""
    metadata = data.get("metadata")
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        return [f"{path}: the notebook metadata is not an object."]
    if METADATA_KEY not in metadata:
        return []
    try:
        block_from_json(metadata[METADATA_KEY], where=f"{path}: metadata[{METADATA_KEY!r}]")
    except InputError as e:
        return [str(e)]
    return []


def _check_metadata_block(
    data: dict[str, Any], path: Path, *, refusal: str = "so the notebook was not written (that would replace the block)"
) -> None:
    """Refuse a notebook whose records block is corrupt: rewriting it would lose the recordings it holds."""
    problems = _metadata_block_problems(data, path)
    if problems:
        raise InputError(
            f"{problems[0]}\nThe recordings block is corrupt, {refusal}. Fix "
            f"metadata[{METADATA_KEY!r}] by hand, or remove it to record again."
        )


def _read_v4(path: Path) -> dict[str, Any]:
    """The notebook's JSON; an `InputError` unless it is an nbformat 4 notebook (what nbclient and writing need)."""
    data = read_notebook_json(path)
    if data.get("nbformat") != 4:
        raise InputError(
            f"{path}: nbformat {data.get('nbformat')!r} is not supported; open and save it with a "
            "current Jupyter to convert it to nbformat 4."
        )
    return data


def _cell_index(data: dict[str, Any], cell: str, path: Path) -> int:
    """The 0-based index of the code cell named by its 1-based number or its id."""
    cells: list[Any] = data["cells"]
    index = int(cell) - 1 if cell.isdigit() and 1 <= int(cell) <= len(cells) else None
    if index is None:
        index = next((i for i, c in enumerate(cells) if isinstance(c, dict) and c.get("id") == cell), None)
    if index is None:
        raise InputError(f"{path}: no cell {cell!r}: give a cell number from 1 to {len(cells)}, or a cell id.")
    chosen = cells[index]
    if not isinstance(chosen, dict) or chosen.get("cell_type") != "code":
        kind = chosen.get("cell_type") if isinstance(chosen, dict) else None
        raise InputError(
            f"{path}: cell {index + 1} is a {kind or 'malformed'} cell, not a code cell: no step runs there."
        )
    if not _executes(chosen):
        raise InputError(
            f"{path}: cell {index + 1} is not executed headlessly (it has no code, or is tagged "
            "skip-execution): no step runs there."
        )
    return index


def _warn_unreadable(found: Scan) -> None:
    for problem in found.problems:
        _warn(f"{problem} Left as it is.")


# Messages ----------------------------------------------------------------------------------------------------------


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _say(text: str, *, file: TextIO | None = None) -> None:
    """Print ``text`` made `printable` line by line: whatever a notebook holds reaches the terminal inert."""
    print("\n".join(printable(line, keep="\t") for line in text.split("\n")), file=file or sys.stdout)


def _error(message: str) -> None:
    _say(f"agl-notebook: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    _say(f"agl-notebook: warning: {message}", file=sys.stderr)


def _executes(cell: Any) -> bool:
    """Whether nbclient executes this cell (its rule: a non-empty code cell not tagged ``skip-execution``)."""
    tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell.get("metadata"), Mapping) else []
    return bool(
        cell.get("cell_type") == "code"
        and _source(cell).strip()
        and "skip-execution" not in (tags if isinstance(tags, list) else [])
    )


def _source(cell: Mapping[str, Any]) -> str:
    """A cell's source as one string (a saved notebook may hold it as a list of lines)."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""
