"""`NotebookStore`: recordings read from the saved notebook file, plus what this kernel session recorded.

The saved file is read when a run first needs a recording and read again only when it changes on disk; its
recordings come from the notebook metadata and from outputs' metadata (path 2), and from the sidecar files beside
the notebook that they name. New records are kept in this kernel session's memory (so a later cell, or a re-run
before saving, replays them) and reach the file through the step's final display (its output metadata), and through
the frontend extension where it is installed. A map's records are kept by a `NotebookMapStore`: like a step's while
they are small, in the map's sidecar file past `AGL_NOTEBOOK_SIDECAR_BYTES` (docs/recordings.md, "Sidecar files").

Every record kept or found for a step keeps the cell running it (`StepRecord.cells`: its id, and a digest of its
source), so ``agl-notebook gc`` can tell from the notebook alone which cells still use it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import _settings
from ..errors import InputError, warn
from ..payloads import JsonObject
from ..replay.records import FORMAT, CellUse, StepRecord, block_to_json, source_digest, with_cells
from ..replay.sidecar import (
    BLOCK_KEY,
    SidecarNaming,
    SidecarRead,
    SidecarWriter,
    file_name,
    line_text,
    read_sidecar,
    uses_line,
)
from ..replay.stores import MapStore, RecordingWarning, merge_records, scrubbed, write_blob_files
from ..replay.versions import RecordIndex
from . import _kernel
from .frontend import link
from .locate import locate, not_found_message, notebook_path
from .nbfile import NotebookRecords, read_notebook_json, records_in_notebook

SIDECAR_BYTES = 1_000_000
"""How many bytes of records (as sidecar lines) a map keeps in the notebook before moving them to its sidecar file,
unless `AGL_NOTEBOOK_SIDECAR_BYTES` says otherwise."""

HELLO_SECONDS = 1.0
"""How long the first step of a kernel waits for the frontend extension's answer (only once, only in a kernel)."""


@dataclass
class _KernelSession:
    """What every `NotebookStore` of this kernel shares: one kernel runs one notebook session."""

    recorded: dict[str, dict[str, StepRecord]] = field(default_factory=dict)
    """What this kernel session recorded, by notebook path ("" when the notebook is unknown), so a new Run in a
    later cell sees records that are not saved yet."""
    partials: dict[str, dict[str, StepRecord]] = field(default_factory=dict)
    """Partial records of steps waiting for a person (docs/recordings.md, "Partial records"), by notebook path."""
    discarded: set[str] = field(default_factory=set)
    """Ids whose partial records were discarded in this session: a partial copy in the file is not resumed."""
    forgotten: set[str] = field(default_factory=set)
    """Ids forgotten with ``%agl forget``: not replayed until a new record with the same id is kept."""
    told_unlocated: bool = False
    """Whether this kernel said that it cannot tell its notebook (said once per kernel)."""
    sidecars: dict[tuple[Path, SidecarNaming | None], tuple[tuple[int, int, int], SidecarRead | str]] = field(
        default_factory=dict
    )
    """Sidecar files as last read, by path and naming: (inode, size, mtime) then what was read, or why not."""
    warned: set[str] = field(default_factory=set)
    """Sidecar problems already told (each once per kernel)."""
    generation: int = 0
    """Counts the changes to `recorded` and `forgotten`: a notebook's index (`NotebookStore.version_index`)
    made at another count is made again."""
    files: dict[str, tuple[tuple[int, int, int], NotebookRecords]] = field(default_factory=dict)
    """The notebook files as last read, by path: (mtime, size, inode) then their recordings. Every `NotebookStore`
    of the kernel reads them from here: a notebook runs a new `Run` (a new store) in each cell, and each one read and
    parsed the whole file again."""
    merged: dict[str, tuple[tuple[object, ...], dict[str, StepRecord]]] = field(default_factory=dict)
    """By notebook path: the file's records merged with the frontend's unsaved ones and the sidecars', with what
    they were merged from."""
    indexes: dict[str, tuple[dict[str, StepRecord], int, RecordIndex]] = field(default_factory=dict)
    """By notebook path: the index of its records a live step's versions use, with the merged records and the
    `generation` it was made at (made again when either changed)."""
    warned_files: set[tuple[str, int]] = field(default_factory=set)
    """Notebook files (path, mtime) whose unreadable recordings were told: told once per kernel and file version."""


_kernel_session = _KernelSession()


class NotebookStore:
    """The recordings of the notebook this kernel runs."""

    def __init__(self, *, locate: Callable[[], Path | None] = notebook_path) -> None:
        self._locate = locate
        self._found: Path | None = None
        self._looked_in: str | None = "never"
        self._unlocated: tuple[str | None, str] | None = None  # (cell execution, why the notebook is not known)
        if _frontend_may_answer():  # headless runners (nbclient, nbval) have no frontend extension to greet
            link().open()  # greet it now: its answer (unsaved recordings) arrives before long
        self._cell: tuple[str | None, CellUse | None] | None = None  # the running cell, by cell execution

    def _where(self) -> Path | None:
        # Found once, then kept: locating may read every notebook in the folder (the nbclient fallback). While it
        # is not found, it is looked for again only once per cell execution (a later cell's source may tell).
        if self._found is None:
            execution = _kernel.execution_id()
            if execution != self._looked_in:
                self._looked_in = execution
                self._found = self._locate()
        return self._found

    @property
    def path(self) -> Path | None:
        """The notebook file, when it can be found."""
        return self._where()

    def unlocated(self) -> str | None:
        """Why a headless kernel reads no recordings (it cannot tell its notebook), and the fix; None otherwise."""
        if not _kernel.in_kernel() or _kernel.interactive() or self._where() is not None:
            return None
        # Said once per cell execution, as the notebook is looked for: a map's every refused item asks again, and
        # telling it reads every notebook in the folder.
        if self._unlocated is None or self._unlocated[0] != self._looked_in:
            self._unlocated = (self._looked_in, not_found_message(locate()))
        return self._unlocated[1]

    async def ready(self) -> None:
        """Before the first lookup: give the frontend extension a moment to hand over unsaved recordings.

        Headless runs (nbclient, nbval: no stdin allowed) have no frontend extension to wait for.
        """
        if _frontend_may_answer():
            await link().wait_for_hello(HELLO_SECONDS)

    def get(self, record_id: str) -> StepRecord | None:
        """The record with this id: this session's first, then the saved file's; a finished one before a partial one.

        A partial record kept beside a finished one (a step waiting in mode ``refresh``) is never found over it. A
        finished record found is asked for by a step of the running cell, so it gains that cell (`used_here`).
        """
        if record_id in _kernel_session.forgotten:
            return None
        path = self._where()
        if path is None:
            _tell_unlocated()
        found = self._session_records(path).get(record_id)
        if found is not None:
            return self.used_here(found)
        filed = self._from_file(path).get(record_id)
        if filed is not None and filed.partial is not None and record_id in _kernel_session.discarded:
            filed = None
        if filed is not None and filed.partial is None:
            return self.used_here(filed)
        waiting = _kernel_session.partials.get(_key(path), {}).get(record_id)
        return waiting if waiting is not None else filed

    def records(self) -> Sequence[StepRecord]:
        """Every readable record, the file's then this session's (which win on the same id)."""
        path = self._where()
        merged = dict(self._from_file(path))
        merged.update(self._session_records(path))
        return tuple(r for r in merged.values() if r.id not in _kernel_session.forgotten)

    def version_index(self) -> RecordIndex:
        """`records`, indexed for a live step's versions (`IndexedStore`): made again only when they changed."""
        path = self._where()
        filed = self._from_file(path)
        session = _kernel_session
        held = session.indexes.get(str(path or ""))
        if held is not None and held[0] is filed and held[1] == session.generation:
            return held[2]  # made by this store or by an earlier cell's
        index = RecordIndex(self.records())
        session.indexes[str(path or "")] = (filed, session.generation, index)
        return index

    def _recorded(self, record: StepRecord) -> None:
        """Keep ``record`` in this kernel session, telling the notebook's index when it was up to date."""
        session = _kernel_session
        path = self._where()
        held = session.indexes.get(str(path or ""))
        current = held is not None and held[1] == session.generation
        returning = record.id in session.forgotten  # listed again, in its old place: the index is made again
        session.forgotten.discard(record.id)
        session.recorded.setdefault(_key(path), {})[record.id] = record
        session.generation += 1
        if current and not returning and held is not None:
            held[2].put(record)
            session.indexes[str(path or "")] = (held[0], session.generation, held[2])

    def for_map(self, key: str) -> MapStore:
        """Where the records of the map ``key`` are kept: like a step's, or past a size in its sidecar file."""
        return NotebookMapStore(self, key)

    def this_cell(self) -> CellUse | None:
        """The cell running now: its id and a digest of its source; None outside a kernel's cell.

        A headless kernel is told no cell id: the saved notebook's one code cell with the running source is the cell
        (none when several have it: the digest alone then tells them).
        """
        execution = _kernel.execution_id()
        if self._cell is not None and self._cell[0] == execution and execution is not None:
            return self._cell[1]
        code = _kernel.executing_code() if _kernel.in_kernel() else ""
        use: CellUse | None = None
        if code.strip():
            digest = source_digest(code)
            cell_id = _kernel.cell_id()
            if cell_id is None:
                ids = set(self._saved(self._where()).code_cells.get(digest, ()))
                cell_id = ids.pop() if len(ids) == 1 else None
            use = CellUse(cell_id, digest)
        self._cell = (execution, use)
        return use

    def used_here(self, record: StepRecord) -> StepRecord:
        """``record`` with the running cell among its cells, kept so in this session when that is new.

        Its step's final display and the frontend extension then save it with that cell: a record replayed by a
        second cell names both, and survives the first one's deletion.
        """
        use = self.this_cell() if record.partial is None else None
        if use is None:
            return record
        stamped = with_cells(record, [use])
        if stamped is not record:
            self._recorded(stamped)
        return stamped

    def with_cells_of(self, record: StepRecord, older: StepRecord | None) -> StepRecord:
        """A new ``record`` with the running cell and the cells of the record it replaces (``older``, or the kept one).

        A cell that replays a record keeps using it after another cell records it again (mode ``refresh``).
        """
        if record.partial is not None:
            return record
        if older is None:
            path = self._where()
            older = self._session_records(path).get(record.id) or self._from_file(path).get(record.id)
        if older is not None and older.partial is None and older.cells:
            record = with_cells(record, older.cells, dropped=older.cells_dropped)
        use = self.this_cell()
        return with_cells(record, [use]) if use is not None else record

    def put(self, record: StepRecord, *, older: StepRecord | None = None) -> StepRecord:
        """Keep the scrubbed record in this kernel session's memory (in place of its partial record, if any).

        It keeps the cells of the record of its id it replaces (``older``, else the one this store holds), and gains
        the running cell.
        """
        where = self._where()
        write_blob_files(record, where.parent if where is not None else Path.cwd())  # large images beside it
        kept = self.with_cells_of(scrubbed(record), older)
        self._recorded(kept)
        had_partial = False
        for partials in _kernel_session.partials.values():
            had_partial = partials.pop(kept.id, None) is not None or had_partial
        if had_partial:
            # A step's finished record replaces its partial one in the extension when its view hands it over; a map
            # item's travels in the map's output instead, so the metadata's partial copy is dropped by name.
            link().discard_partial(kept.id)
        return kept

    def put_partial(self, record: StepRecord) -> None:
        """Keep a waiting step's partial record in this session and hand it to the frontend extension at once.

        The extension writes it into the notebook metadata (the notebook becomes dirty; a save, autosave included,
        keeps it), and hands it back to a restarted kernel; but never over a finished record of the same id (a step
        waiting in mode ``refresh``): that one it keeps, and the partial record lives in this session only. A
        headless run keeps no partial record.
        """
        if not _frontend_may_answer():
            return
        kept = scrubbed(record)
        _kernel_session.discarded.discard(kept.id)
        _kernel_session.partials.setdefault(_key(self._where()), {})[kept.id] = kept
        link().send_record(kept, kept.cell_id)

    def discard_partial(self, record_id: str) -> None:
        """Forget a partial record here, in what the frontend handed over, and in the notebook metadata."""
        for partials in _kernel_session.partials.values():
            partials.pop(record_id, None)
        _kernel_session.discarded.add(record_id)
        frontend = link()
        held = frontend.unsaved.get(record_id)
        if held is not None and held.partial is not None:
            frontend.unsaved = {k: v for k, v in frontend.unsaved.items() if k != record_id}
        frontend.discard_partial(record_id)

    def _session_records(self, path: Path | None) -> dict[str, StepRecord]:
        # Records kept before the notebook was found (under "") belong to it as well.
        recorded = _kernel_session.recorded
        unplaced = recorded.get("", {})
        if path is None or not unplaced:
            return recorded.get(_key(path), {})
        return {**unplaced, **recorded.get(_key(path), {})}

    def _from_file(self, path: Path | None) -> dict[str, StepRecord]:
        saved = self._saved(path)
        frontend = link()
        unsaved = frontend.unsaved  # what the frontend's notebook model held, saved or not (the extension's answer)
        # Worked out again only when one of its inputs changed (each is replaced, never changed in place): a map of
        # 10,000 items looks each one up, and the sidecars' records are many.
        inputs = (saved, unsaved, frontend.unsaved_sidecars, frontend.answered)
        held = _kernel_session.merged.get(str(path or ""))
        if held is not None and all(a is b for a, b in zip(held[0], inputs, strict=True)):
            return held[1]
        found = saved.records
        merged = merge_records(found, unsaved) if unsaved else found
        if frontend.answered and any(r.partial is not None and i not in unsaved for i, r in found.items()):
            # The frontend's model is newer than the file: a partial record it no longer holds was finished or
            # discarded since the file was saved.
            merged = {i: r for i, r in merged.items() if r.partial is None or i in unsaved}
        namings = {**saved.sidecars, **frontend.unsaved_sidecars}
        if path is not None and namings:
            beside: dict[str, StepRecord] = {}
            for naming in namings.values():
                read = sidecar(path.parent / naming.file, naming=naming)
                if read is not None:
                    beside.update(read.records)
            merged = merge_records(beside, merged)  # the notebook's own records win over a sidecar's
        _kernel_session.merged[str(path or "")] = (inputs, merged)
        return merged

    def _saved(self, path: Path | None) -> NotebookRecords:
        if path is None:
            return NotebookRecords()
        try:
            stat = path.stat()
        except OSError:
            return NotebookRecords()
        version = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        held = _kernel_session.files.get(str(path))
        if held is not None and held[0] == version:
            return held[1]  # read by this store or an earlier cell's: the file has not changed since
        found = self._read_file(path, stat.st_mtime_ns)
        _kernel_session.files[str(path)] = (version, found)
        return found

    def release(self, record_ids: Iterable[str]) -> None:
        """Stop keeping these records in this kernel session (a map's that moved to its sidecar file)."""
        for records in _kernel_session.recorded.values():
            for record_id in record_ids:
                records.pop(record_id, None)
        _kernel_session.generation += 1

    def _read_file(self, path: Path, mtime: int) -> NotebookRecords:
        try:
            found = records_in_notebook(read_notebook_json(path), where=str(path))
        except InputError as e:
            found = NotebookRecords(problems=[str(e)])
        warned = _kernel_session.warned_files
        if found.problems and (str(path), mtime) not in warned:
            warned.add((str(path), mtime))
            listed = "\n".join(f"- {p}" for p in found.problems)
            warn(
                f"Some recordings in {path.name} could not be read; those steps run live where they can, and "
                f"nothing in the notebook is changed:\n{listed}",
                RecordingWarning,
            )
        return found

    def __repr__(self) -> str:
        path = self._where()
        return f"the notebook {path.name}" if path else "this kernel session (the notebook file was not found)"


class NotebookMapStore:
    """The records of one map in a notebook: kept like a step's while small, in its sidecar file past a size.

    Inline, each record is kept in the kernel session and the saved block lists them. Once the map's records pass
    `AGL_NOTEBOOK_SIDECAR_BYTES` (or when the map's sidecar file is already there), they are appended to the sidecar
    beside the notebook, ``<key>.agl.jsonl``, as each item finishes, and the saved block names the file instead.
    """

    def __init__(self, parent: NotebookStore, key: str) -> None:
        self.parent = parent
        self.key = key
        self.file = file_name(key)
        """The sidecar's file name."""
        self.limit = sidecar_bytes()
        """Bytes of records kept inline before they move to the sidecar."""
        self._kept: dict[str, StepRecord] = {}
        self._size = 0
        self._writer: SidecarWriter | None = None
        self._inline_only = False  # the sidecar cannot be used (said once): every record stays inline
        self._file_records: dict[str, StepRecord] | None = None  # the sidecar file's, read once
        self._replayed_from_file = False  # a record was found in the sidecar: the saved block names it
        self._appended: set[str] = set()  # ids this map appended to the sidecar
        self._uses: dict[CellUse, list[str]] = {}  # sidecar records this cell replayed but the file does not name it

    def unlocated(self) -> str | None:
        """Why a headless kernel reads no recordings for this map (it cannot tell its notebook); None otherwise."""
        return self.parent.unlocated()

    def _path(self) -> Path | None:
        notebook = self.parent.path
        return notebook.parent / self.file if notebook is not None else None

    def _in_file(self) -> dict[str, StepRecord]:
        # Read once: what this map appends later is in its own memory, so a map never reads its file per item.
        if self._file_records is None:
            path = self._path()
            if path is None:
                return {}
            read = sidecar(path, key=self.key, missing_ok=True)
            self._file_records = read.records if read is not None else {}
        return self._file_records

    def get(self, record_id: str) -> StepRecord | None:
        """The map's record with this id: kept now, the notebook's, or its sidecar file's."""
        if record_id in _kernel_session.forgotten:
            return None
        found = self._kept.get(record_id)
        if found is not None:
            return found
        # Its own file before the notebook's records: once a map has a sidecar, every record it keeps goes there.
        found = self._in_file().get(record_id)
        if found is not None:
            self._replayed_from_file = True
            use = self.parent.this_cell() if found.partial is None else None
            stamped = with_cells(found, [use]) if use is not None else found
            if use is not None and stamped is not found:
                # Said in the file when the map ends (`saved_block`): one line for all of them, not a record each.
                self._uses.setdefault(use, []).append(record_id)
                self._in_file()[record_id] = stamped
            return stamped
        found = self.parent.get(record_id)
        if found is not None and found.partial is None:
            # Found, it is this map's too: a replayed item's record is saved again by its display. A partial one is
            # resumed, never saved as the map's (its finished record is, once the item ends).
            self._kept.setdefault(record_id, found)
        return found

    def records(self) -> Sequence[StepRecord]:
        """The notebook's records, then the sidecar file's and this map's that it does not hold."""
        merged = merge_records(self._in_file(), self._kept, {r.id: r for r in self.parent.records()})
        return tuple(r for r in merged.values() if r.id not in _kernel_session.forgotten)

    def put(self, record: StepRecord) -> StepRecord:
        """Keep the scrubbed record: in the kernel session while the map is small, else appended to its sidecar."""
        if self._writer is None:
            kept = self._kept[record.id] = self.parent.put(record)
            if not self._inline_only:
                self._size += len(line_text(kept).encode("utf-8")) + 1
                path = self._path()
                if path is not None and (self._size > self.limit or path.exists()):
                    self._move(path)
            return kept
        write_blob_files(record, self._writer.path.parent)  # large images beside the sidecar, as the notebook's
        kept = self._kept[record.id] = self.parent.with_cells_of(scrubbed(record), self._in_file().get(record.id))
        _kernel_session.forgotten.discard(kept.id)
        _kernel_session.generation += 1
        for partials in _kernel_session.partials.values():  # the finished record replaces its partial one
            partials.pop(kept.id, None)
        if self._in_file().get(kept.id) == kept:
            return kept  # the file holds it already (a replayed item kept again): the file does not grow
        try:
            self._writer.append([line_text(kept)])
            self._appended.add(kept.id)
        except (OSError, InputError) as e:
            warn(f"Not saved to {self._writer.path}: {e}. The record is kept in this kernel session.", RecordingWarning)
        return kept

    def _move(self, path: Path) -> None:
        """Append every record kept so far to the sidecar file, and keep appending there."""
        writer = SidecarWriter(path, self.key)
        problem: str | None = None
        if path.exists() or path.is_symlink():  # a dangling link is refused, never written through
            try:
                read_sidecar(path, key=self.key)
            except InputError as e:
                problem = str(e)
        if problem is None:
            try:
                in_file = self._in_file()
                for record_id, record in list(self._kept.items()):  # each keeps the cells the file's copy names
                    older = in_file.get(record_id)
                    if older is not None and older.cells and record.partial is None and older.partial is None:
                        self._kept[record_id] = with_cells(record, older.cells, dropped=older.cells_dropped)
                moving = [r for r in self._kept.values() if in_file.get(r.id) != r]
                writer.append([line_text(r) for r in moving])
                self._appended.update(r.id for r in moving)
            except OSError as e:
                problem = f"{path}: cannot be written ({e})."
            except InputError as e:  # made a link meanwhile
                problem = str(e)
        if problem is not None:
            self._inline_only = True
            warn(
                f"The records of map {self.key!r} stay in the notebook: {problem} Nothing in the file was changed.",
                RecordingWarning,
            )
            return
        self._writer = writer
        self.parent.release(self._kept)

    def keep_line(self, kind: str, data: JsonObject) -> bool:
        """Append ``data`` as one line of ``kind`` to the map's sidecar file, made now if missing.

        A reader of its own keeps its state there (the Message Batches engine's); the map's records follow it into
        the file. False when the notebook is not found or the file cannot be written (said in a warning).
        """
        path = self._path()
        if path is None or self._inline_only:
            return False
        if self._writer is None and (path.exists() or path.is_symlink()):
            try:
                read_sidecar(path, key=self.key)  # never a line appended to a file that is not this map's sidecar
            except InputError as e:
                self._inline_only = True
                warn(
                    f"The map {self.key!r} keeps nothing beside the notebook: {e} Nothing in it was changed.",
                    RecordingWarning,
                )
                return False
        try:
            (self._writer or SidecarWriter(path, self.key)).append(
                [json.dumps({**data, "kind": kind}, separators=(",", ":"))]
            )
        except (OSError, InputError) as e:
            warn(
                f"Not saved to {path}: {e}. The map goes on; what it wrote there is kept in this session only.",
                RecordingWarning,
            )
            return False
        if self._writer is None:
            self._move(path)
        return True

    def latest_line(self, kind: str) -> JsonObject | None:
        """The last line of ``kind`` in the map's sidecar file (`keep_line`'s), or None."""
        path = self._path()
        read = sidecar(path, key=self.key, missing_ok=True) if path is not None else None
        return read.latest(kind) if read is not None else None

    def put_partial(self, record: StepRecord) -> None:
        """A waiting item's partial record is kept as a step's (never in the sidecar: it is small and soon replaced)."""
        self.parent.put_partial(record)

    def discard_partial(self, record_id: str) -> None:
        """Forget an item's partial record, as a step's (and here, were the map holding it)."""
        held = self._kept.get(record_id)
        if held is not None and held.partial is not None:
            del self._kept[record_id]
        self.parent.discard_partial(record_id)

    async def ready(self) -> None:
        """As ready as the notebook's store."""
        await self.parent.ready()

    def for_map(self, key: str) -> MapStore:
        """A map inside a map has its own records and sidecar."""
        return NotebookMapStore(self.parent, key)

    def saved_block(self) -> JsonObject:
        """The map's records inline (those it kept and those it found), or the naming of its sidecar as it stands.

        The sidecar is named once the map keeps its records there, or when it replayed from it.

        Naming the file also hands the naming to the frontend extension, which keeps it in the notebook metadata (as
        it keeps a step's record).
        """
        if self._writer is None and self._replayed_from_file and (path := self._path()) is not None:
            self._writer = SidecarWriter(path, self.key)  # naming the file it replayed from writes nothing
        if self._writer is None:
            return block_to_json(tuple(self._kept.values()))
        self._keep_uses(self._writer)
        try:
            naming = self._writer.naming()
        except (OSError, InputError) as e:  # the file went away meanwhile: the records this map kept are listed instead
            warn(f"The sidecar of map {self.key!r} cannot be named: {e}. Its records are listed.", RecordingWarning)
            return block_to_json(tuple(self._kept.values()))
        if _frontend_may_answer():
            link().send_sidecar(naming, _kernel.cell_id())
        # Beside the naming, the map's records the file does not hold (found in the notebook, from before the map had
        # a sidecar): the map's display saves every record it used, as a step's does.
        in_file = self._in_file()
        elsewhere = [r for r in self._kept.values() if r.id not in self._appended and in_file.get(r.id) != r]
        return {"version": FORMAT, "records": [r.to_json() for r in elsewhere], BLOCK_KEY: [naming.to_json()]}

    def _keep_uses(self, writer: SidecarWriter) -> None:
        """Append a line naming the running cell for the sidecar's records it replayed that did not name it yet."""
        uses, self._uses = self._uses, {}
        try:
            writer.append([uses_line(use, ids) for use, ids in uses.items()])
        except (OSError, InputError) as e:
            warn(
                f"Not saved to {writer.path}: {e}. Its records replayed; the file does not say this cell used them.",
                RecordingWarning,
            )

    def __repr__(self) -> str:
        return f"map {self.key!r} of {self.parent!r}"


def sidecar_bytes() -> int:
    """`AGL_NOTEBOOK_SIDECAR_BYTES` as a number of bytes (`SIDECAR_BYTES` when unset)."""
    text = _settings.SIDECAR_BYTES.text()
    if not text:
        return SIDECAR_BYTES
    if not text.isdigit():
        raise InputError(f"{_settings.SIDECAR_BYTES.name}={text!r}: expected a whole number of bytes, e.g. 1000000.")
    return int(text)


def sidecar(
    path: Path, *, naming: SidecarNaming | None = None, key: str | None = None, missing_ok: bool = False
) -> SidecarRead | None:
    """The sidecar file as read (cached while it is unchanged), or None when it cannot be; each problem told once."""
    try:
        stat = path.lstat()  # a dangling link is not "missing": reading it is refused, and said
        state = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    except OSError:
        state = (0, -1, 0)
    cached = _kernel_session.sidecars.get((path, naming))
    if cached is None or cached[0] != state:
        try:
            found: SidecarRead | str = read_sidecar(path, naming=naming, key=key)
        except InputError as e:
            found = str(e)
        cached = _kernel_session.sidecars[(path, naming)] = (state, found)
    read = cached[1]
    if isinstance(read, str):
        if not (missing_ok and state[1] < 0):
            _tell(f"Recordings not read: {read} The steps it holds run live where they can; nothing in it is changed.")
        return None
    for problem in read.problems:
        _tell(f"A sidecar's recording was not read: {problem}")
    return read


def _tell(message: str) -> None:
    if message not in _kernel_session.warned:
        _kernel_session.warned.add(message)
        warn(message, RecordingWarning)


def _frontend_may_answer() -> bool:
    """A person's frontend (which may run the extension) sent the executing request; never outside a kernel."""
    return _kernel.in_kernel() and _kernel.interactive()


def _tell_unlocated() -> None:
    """Once per headless kernel, before its first step runs live for want of its notebook: say why, and the fix.

    Written to the kernel process's own stderr (the runner's terminal or log), never to the cell's: a saved output
    must not differ between runs.
    """
    if _kernel_session.told_unlocated or not _kernel.in_kernel() or _kernel.interactive():
        return
    _kernel_session.told_unlocated = True
    stream = sys.__stderr__
    if stream is not None:
        try:
            stream.write(
                f"agl_notebook: {not_found_message(locate())} Until then a step that would call a model or a server "
                "fails rather than run live on a guess; the others run live in mode auto, as with no recordings.\n"
            )
            stream.flush()
        except (OSError, ValueError):  # a closed stderr: nothing to tell it to
            pass


def _key(path: Path | None) -> str:
    """The notebook's session key: its resolved path (empty when not found).

    Resolving walks every part of the path (an lstat each), and a map looks its notebook's key up several times per
    item: the key is kept per path, and kept only while the path still names the same file (one stat), so a path
    whose symlink now points elsewhere, or a file put in its place, is resolved again.
    """
    if not path:
        return ""
    text = str(path)
    try:
        status = os.stat(text)
    except OSError:
        return str(path.resolve())
    same_file = (status.st_dev, status.st_ino)
    known = _resolved.get(text)
    if known is not None and known[0] == same_file:
        return known[1]
    if len(_resolved) >= _RESOLVED_MOST:
        _resolved.clear()
    key = str(path.resolve())
    _resolved[text] = (same_file, key)
    return key


_resolved: dict[str, tuple[tuple[int, int], str]] = {}  # a path as given: the file it named, its resolved path
_RESOLVED_MOST = 64  # a kernel works with a few notebooks; past this many paths the cache starts again


def forget(record_ids: Iterable[str]) -> None:
    """Stop replaying these records in this kernel session (``%agl forget``)."""
    for record_id in record_ids:
        _kernel_session.forgotten.add(record_id)
        for records in _kernel_session.recorded.values():
            records.pop(record_id, None)
    _kernel_session.generation += 1
