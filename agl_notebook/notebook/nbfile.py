"""Recordings inside a notebook file: in its metadata (their home) and in outputs' metadata (path 2).

Works on the notebook as plain JSON (a dict), so reading recordings in a kernel needs neither nbformat nor
anything that executes. Both places use the same block, ``{"version": 1, "records": [...]}``, under the key
``agl_notebook``; readers drop duplicates by id, preferring the copy in an output (the newer one: an output copy is
removed once it has been moved into the notebook metadata), each keeping the cells every copy names. A block may
also name sidecar files beside the notebook
(``"sidecars": [...]``, `agl_notebook.replay.sidecar`), which hold a large map's records; an output's naming of a
file wins over the notebook metadata's, as its records do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import read_json_file
from ..errors import InputError
from ..payloads import JsonValue
from ..replay.records import CellUse, StepRecord, block_from_json, block_to_json, source_digest, with_cells
from ..replay.sidecar import BLOCK_KEY, SidecarNaming, namings_in_block, with_naming

METADATA_KEY = "agl_notebook"
"""The key of the records block in notebook metadata and in output metadata."""

LIVE_VIEW_KEY = "agl_notebook_live"
"""Output metadata marking a live display (a running step's widget view, or a question's form).

Its widget view is dead once the kernel is gone, so the frontend extension saves such an output with its static
placeholder only. Its value: ``{"version": 1}``.
"""

PROVENANCE_KEY = "agl_notebook_provenance"
"""Output metadata of a finished step's final display: how this display came to be (the extension draws it as a badge).

``{"version": 1, "source": "live" | "replayed", "model_requests": <made now>, "recorded_at": <the record's time, or
null when nothing was recorded>, "record_id": <id or null>, "backend": <what the record claims>}``, plus, for a live
step whose recording no longer matched, ``"miss"`` (the explanation) and ``"differing"`` (the fingerprint parts).
Output metadata is not compared by nbval, so this may differ between a live run and a replay; the static bundle never
does.
"""


@dataclass
class NotebookRecords:
    """The recordings found in one notebook."""

    records: dict[str, StepRecord] = field(default_factory=dict)
    """Readable records by id."""
    in_metadata: set[str] = field(default_factory=set)
    """Ids of records found in the notebook metadata."""
    in_outputs: set[str] = field(default_factory=set)
    """Ids of records found in output metadata."""
    unreadable: list[JsonValue] = field(default_factory=list)
    """Records of the notebook metadata that could not be read, kept verbatim."""
    problems: list[str] = field(default_factory=list)
    """What could not be read, and where."""
    metadata_block_problem: str | None = None
    """Why the notebook metadata's block as a whole could not be read, if it could not."""
    sidecars: dict[str, SidecarNaming] = field(default_factory=dict)
    """The sidecar files the blocks name, by file name (an output's naming wins over the notebook metadata's)."""
    sidecars_in_metadata: set[str] = field(default_factory=set)
    """Names of the sidecar files the notebook metadata names."""
    sidecar_cells: dict[str, list[int]] = field(default_factory=dict)
    """By file name, the indices of the cells whose outputs name the file."""
    code_cells: dict[str, list[str]] = field(default_factory=dict)
    """By `source_digest`, the ids of the code cells with that source (a headless kernel, told no cell id, finds
    the cell it runs here)."""


def read_notebook_json(path: Path) -> dict[str, Any]:
    """Read a notebook file as JSON, with an `InputError` naming the file and what is wrong."""
    data = read_json_file(path, kind="notebook")
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "nbformat" not in data:
        raise InputError(f"{path}: not a notebook (no 'cells' list and 'nbformat' number).")
    return data


def records_in_notebook(nb: dict[str, Any], *, where: str = "notebook") -> NotebookRecords:
    """Every recording in ``nb``: the notebook metadata's, then each output's (which win on the same id).

    A record keeps the cells every copy of its id names, and gains the cell of each output that displays it.
    """
    found = NotebookRecords(code_cells=code_cells(nb))
    metadata = nb.get("metadata")
    block = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    if block is not None:
        try:
            read = block_from_json(block, where=f"{where} metadata[{METADATA_KEY!r}]")
        except InputError as e:
            found.problems.append(str(e))
            found.metadata_block_problem = str(e)
        else:
            found.problems.extend(read.problems)
            found.unreadable.extend(read.unreadable)
            for record in read.records:
                _keep(found, record)
                found.in_metadata.add(record.id)
            namings, problems = namings_in_block(block, where=f"{where} metadata[{METADATA_KEY!r}]")
            found.problems.extend(problems)
            for naming in namings:
                found.sidecars[naming.file] = naming
                found.sidecars_in_metadata.add(naming.file)
    for index, number, output_metadata in outputs_metadata(nb):
        block = output_metadata.get(METADATA_KEY)
        if block is not None:
            place = f"{where} cell {index + 1} output {number + 1}"
            try:
                read = block_from_json(block, where=place)
            except InputError as e:
                found.problems.append(str(e))
                continue
            found.problems.extend(read.problems)
            cell_id = _cell_id(nb, index)
            shown_by = _use(nb, index)
            for record in read.records:
                # A headless run sends no cell id; the output a record travels in names its cell.
                if record.cell_id is None and cell_id is not None:
                    record = dataclasses.replace(record, cell_id=cell_id)
                if shown_by is not None and record.partial is None:
                    record = with_cells(record, [shown_by])  # the cell displayed it: it uses it
                _keep(found, record)
                found.in_outputs.add(record.id)
            namings, problems = namings_in_block(block, where=place)
            found.problems.extend(problems)
            for naming in namings:
                found.sidecars[naming.file] = naming
                cells = found.sidecar_cells.setdefault(naming.file, [])
                if index not in cells:
                    cells.append(index)
    return found


def _keep(found: NotebookRecords, record: StepRecord) -> None:
    """Keep ``record`` (the newer copy) in ``found``, with every cell an older copy of its id names."""
    older = found.records.get(record.id)
    if older is not None and older.cells and record.partial is None and older.partial is None:
        record = with_cells(record, older.cells, dropped=older.cells_dropped)
    found.records[record.id] = record


def code_cells(nb: dict[str, Any]) -> dict[str, list[str]]:
    """By `source_digest`, the ids of the notebook's code cells with code (a cell without an id is left out)."""
    by_source: dict[str, list[str]] = {}
    cells = nb.get("cells")
    for index in range(len(cells) if isinstance(cells, list) else 0):
        use = _use(nb, index)
        if use is not None and use.cell_id is not None:
            by_source.setdefault(use.source, []).append(use.cell_id)
    return by_source


def cell_source(cell: Any) -> str | None:
    """A code cell's source as one string, or None for any other cell (or a damaged one)."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else None


def _use(nb: dict[str, Any], index: int) -> CellUse | None:
    """The code cell at ``index`` as a `CellUse` (None when it is not a code cell with code)."""
    cells = nb.get("cells")
    source = cell_source(cells[index]) if isinstance(cells, list) and index < len(cells) else None
    if source is None or not source.strip():
        return None
    return CellUse(_cell_id(nb, index), source_digest(source))


def _cell_id(nb: dict[str, Any], index: int) -> str | None:
    cells = nb.get("cells")
    cell = cells[index] if isinstance(cells, list) and index < len(cells) else None
    value = cell.get("id") if isinstance(cell, dict) else None
    return value if isinstance(value, str) and value else None


def outputs_metadata(nb: dict[str, Any]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(cell index, output index, output metadata) of every output.

    Whatever is not shaped as nbformat says is skipped: a damaged notebook is read as far as it can be.
    """
    cells = nb.get("cells")
    for index, cell in enumerate(cells if isinstance(cells, list) else []):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for number, output in enumerate(outputs if isinstance(outputs, list) else []):
            metadata = output.get("metadata") if isinstance(output, dict) else None
            if isinstance(metadata, dict):
                yield index, number, metadata


def consolidate(nb: dict[str, Any]) -> int:
    """Move every output-metadata record, and every sidecar naming, into the notebook metadata; remove the copies.

    Same-id records are replaced, and so is a naming of the same sidecar file; unreadable records and namings are
    kept where they are. Returns how many records and namings were moved.

    Raises:
        InputError: The notebook metadata's records block is unreadable: writing it would lose what it holds.
    """
    found = records_in_notebook(nb)
    moved_namings = [n for file, n in found.sidecars.items() if file in found.sidecar_cells]
    if not found.in_outputs and not moved_namings:
        return 0
    if found.metadata_block_problem is not None:
        raise InputError(
            f"Not consolidated, so nothing is lost: {found.metadata_block_problem} Fix or remove the "
            "notebook's agl_notebook metadata first."
        )
    metadata = nb.setdefault("metadata", {})
    old = metadata.get(METADATA_KEY)
    if moved_namings and isinstance(old, dict) and not isinstance(old.get(BLOCK_KEY, []), list):
        raise InputError(
            f"Not consolidated, so nothing is lost: the notebook's agl_notebook metadata has a {BLOCK_KEY!r} that "
            "is not a list of sidecar namings. Fix or remove it first."
        )
    block = block_to_json(list(found.records.values()), found.unreadable)
    if isinstance(old, dict):  # every other key of the block is kept (the namings this version cannot read too)
        block = {**old, **block}
    for naming in moved_namings:
        block = with_naming(block, naming)
    metadata[METADATA_KEY] = block
    for _, _, output_metadata in outputs_metadata(nb):
        if METADATA_KEY not in output_metadata:
            continue
        output_block = output_metadata[METADATA_KEY]
        try:
            read = block_from_json(output_block, where="output")
        except InputError:
            continue  # unreadable as a whole: leave it for the person to see
        _, naming_problems = namings_in_block(output_block, where="output")
        if read.unreadable or naming_problems:  # keep what this version cannot read (a newer format, say) there
            kept = block_to_json([], read.unreadable)
            if naming_problems:
                kept[BLOCK_KEY] = output_block[BLOCK_KEY]
            output_metadata[METADATA_KEY] = kept
        else:
            del output_metadata[METADATA_KEY]
    return len(found.in_outputs) + len(moved_namings)
