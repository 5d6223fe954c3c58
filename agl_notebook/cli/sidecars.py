"""What ``agl-notebook list``, ``gc``, ``clear`` and ``explain`` know of the sidecar files a notebook names.

A sidecar (`agl_notebook.replay.sidecar`, docs/recordings.md "Sidecar files") is read beside the notebook, by the
file name its naming gives, and checked against the naming: ``ok`` (its named beginning is unchanged: appends since
are fine), ``changed`` (cut, rewritten or replaced since it was named), ``missing``, or ``unreadable`` (not a sidecar
of that map). Only ``gc`` and ``clear`` rewrite one, atomically, under the appenders' lock, and then name the new
file in the notebook (every block that named the old one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import InputError
from ..notebook.nbfile import METADATA_KEY, outputs_metadata, records_in_notebook
from ..payloads import JsonObject
from ..replay.sidecar import (
    BLOCK_KEY,
    USES_KIND,
    SidecarLine,
    SidecarNaming,
    SidecarRead,
    SidecarWriter,
    read_sidecar,
    rewrite_sidecar,
    uses_in_line,
)

State = Literal["ok", "changed", "missing", "unreadable"]


@dataclass
class Sidecar:
    """One sidecar file a notebook names, as read beside it."""

    naming: SidecarNaming
    """How the notebook names it (an output's naming wins over the notebook metadata's)."""
    path: Path
    """Where it was looked for: beside the notebook."""
    in_metadata: bool = False
    """Named in the notebook metadata."""
    output_cells: list[int] = field(default_factory=list)
    """Indices of the cells whose outputs name it."""
    read: SidecarRead | None = None
    """The file as read, unless it could not be."""
    problem: str | None = None
    """Why it could not be read."""

    @property
    def state(self) -> State:
        """``ok``, ``changed``, ``missing`` or ``unreadable``."""
        if self.read is None:
            return "missing" if not self.path.exists() else "unreadable"
        return "ok" if self.read.unchanged else "changed"

    def describe(self) -> str:
        """One line for ``list``: the file, its records, its state and where the notebook names it."""
        where = (["the notebook metadata"] if self.in_metadata else []) + [f"cell {i + 1}" for i in self.output_cells]
        named = f"named in {' and '.join(where)}"
        if self.read is None:
            return f"sidecar {self.naming.file}: {self.state} ({named}): {self.problem}"
        count = len(self.read.records)
        extra = len(self.read.lines) - count
        state = {"ok": "checks out", "changed": "CHANGED since it was named"}[self.state]
        lines = f", {extra} other line{'' if extra == 1 else 's'}" if extra else ""
        return f"sidecar {self.naming.file}: {count} record{'' if count == 1 else 's'}{lines}; {state} ({named})"

    def to_json(self) -> JsonObject:
        """The sidecar as ``list --json`` gives it."""
        read = self.read
        return {
            "file": self.naming.file,
            "key": self.naming.key,
            "state": self.state,
            "records": len(read.records) if read is not None else None,
            "lines": len(read.lines) + 1 if read is not None else None,
            "named_lines": self.naming.lines,
            "in_metadata": self.in_metadata,
            "output_cells": [i + 1 for i in self.output_cells],
            "problem": self.problem,
        }


def sidecars_of(nb: dict[str, Any], folder: Path, *, where: str) -> list[Sidecar]:
    """Every sidecar ``nb`` names, read beside it (in ``folder``)."""
    found = records_in_notebook(nb, where=where)
    sidecars: list[Sidecar] = []
    for file, naming in found.sidecars.items():
        sidecar = Sidecar(
            naming, folder / file, file in found.sidecars_in_metadata, list(found.sidecar_cells.get(file, []))
        )
        try:
            sidecar.read = read_sidecar(sidecar.path, naming=naming)
        except InputError as e:
            sidecar.problem = str(e)
        sidecars.append(sidecar)
    return sidecars


@dataclass
class Rewritten:
    """What `drop` took out of one sidecar."""

    sidecar: Sidecar
    records: int = 0
    """Record lines of the chosen ids taken out."""
    replaced: int = 0
    """Record lines a later line of the same id had replaced, taken out."""
    removed_file: bool = False
    """The file held nothing else, so it was removed, and the notebook no longer names it."""
    given: int = 0
    """Record lines given the shared contents a removed record kept for them."""


def drop(
    nb: dict[str, Any],
    sidecar: Sidecar,
    ids: set[str],
    *,
    dry_run: bool,
    copies: Mapping[str, JsonObject] | None = None,
) -> Rewritten:
    """Take the records of ``ids``, and the lines later ones replaced, out of the sidecar, and name it anew in ``nb``.

    Every other line is kept as it is (unreadable lines and other readers' lines too, and whatever was appended
    since it was read), but for a record of ``copies``, which is given those contents: a removed record kept them
    for it (docs/iterating.md). A file left with nothing but its header is removed, and with it the notebook's
    namings.
    """
    read = sidecar.read
    done = Rewritten(sidecar)
    if read is None:
        return done

    last = {line.record.id: line.number for line in read.lines if line.record is not None}
    remaining = set(last) - ids

    def keep(line: SidecarLine) -> bool:
        record = line.record
        if record is None:
            # A "uses" line goes with the last of the records it names; every other line stays.
            return line.kind != USES_KIND or _names_any(line, remaining)
        if record.id in ids:
            done.records += 1
            return False
        if last.get(record.id) != line.number:  # a later line of the id replaced it (lines are only appended)
            done.replaced += 1
            return False
        return True

    def given(line: SidecarLine) -> bytes:
        extra = copies.get(line.record.id) if copies and line.record is not None else None
        if not extra:
            return line.text
        obj = json.loads(line.text)  # patched, not rebuilt: fields a newer version wrote stay as they were
        contents = obj.get("contents")
        obj["contents"] = {**(contents if isinstance(contents, dict) else {}), **extra}
        done.given += 1
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    if dry_run:
        for line in read.lines:
            if keep(line):
                given(line)
        return done
    if not rewrite_sidecar(read, keep, given):
        return done
    left = read_sidecar(read.path, key=read.key)
    if not left.lines:
        read.path.unlink()
        done.removed_file = True
        rename(nb, sidecar.naming.file, None)
    else:
        rename(nb, sidecar.naming.file, SidecarWriter(read.path, read.key).naming())
    return done


def _names_any(line: SidecarLine, ids: set[str]) -> bool:
    """Whether a ``uses`` line names any of ``ids`` (one this version cannot read is kept: True)."""
    try:
        obj = json.loads(line.text)
    except (ValueError, RecursionError):
        return True
    used = uses_in_line(obj) if isinstance(obj, dict) else None
    return used is None or any(record_id in ids for record_id in used[1])


def rename(nb: dict[str, Any], file: str, naming: SidecarNaming | None) -> None:
    """Name ``file`` by ``naming`` wherever ``nb`` names it (None: name it nowhere); a block left empty goes."""
    metadata = nb.get("metadata")
    holders = [metadata] if isinstance(metadata, dict) else []
    holders += [output_metadata for _, _, output_metadata in outputs_metadata(nb)]
    for holder in holders:
        block = holder.get(METADATA_KEY)
        namings = block.get(BLOCK_KEY) if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(namings, list):
            continue
        kept = []
        for item in namings:
            if isinstance(item, dict) and item.get("file") == file:
                if naming is not None:
                    kept.append(naming.to_json())
            else:
                kept.append(item)
        if kept:
            block[BLOCK_KEY] = kept
        else:
            del block[BLOCK_KEY]
            if block.get("records") == [] and holder is not metadata and len(block) == 2:
                del holder[METADATA_KEY]
