"""`NotebookStore`: recordings read from the saved notebook file, plus what this kernel session recorded.

The saved file is read when a run first needs a recording and read again only when it changes on disk; its
recordings come from the notebook metadata and from outputs' metadata (path 2). New records are kept in this kernel
session's memory (so a later cell, or a re-run before saving, replays them) and reach the file through the step's
final display (its output metadata), and through the frontend extension where it is installed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, warn
from ..replay.records import StepRecord
from ..replay.stores import InlineMapStore, MapStore, RecordingWarning, scrubbed
from . import _kernel
from .frontend import link
from .locate import locate, not_found_message, notebook_path
from .nbfile import NotebookRecords, read_notebook_json, records_in_notebook

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


_kernel_session = _KernelSession()


class NotebookStore:
    """The recordings of the notebook this kernel runs."""

    def __init__(self, *, locate: Callable[[], Path | None] = notebook_path) -> None:
        self._locate = locate
        self._found: Path | None = None
        self._looked_in: str | None = "never"
        if _frontend_may_answer():  # headless runners (nbclient, nbval) have no frontend extension to greet
            link().open()  # greet it now: its answer (unsaved recordings) arrives before long
        self._read: tuple[Path, int, dict[str, StepRecord]] | None = None
        self._warned: set[tuple[str, int]] = set()

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

    async def ready(self) -> None:
        """Before the first lookup: give the frontend extension a moment to hand over unsaved recordings.

        Headless runs (nbclient, nbval: no stdin allowed) have no frontend extension to wait for.
        """
        if _frontend_may_answer():
            await link().wait_for_hello(HELLO_SECONDS)

    def get(self, record_id: str) -> StepRecord | None:
        """The record with this id: this session's first, then the saved file's."""
        if record_id in _kernel_session.forgotten:
            return None
        path = self._where()
        if path is None:
            _tell_unlocated()
        found = self._session_records(path).get(record_id)
        if found is None:
            found = _kernel_session.partials.get(_key(path), {}).get(record_id)
        if found is None:
            found = self._from_file(path).get(record_id)
            if found is not None and found.partial is not None and record_id in _kernel_session.discarded:
                return None
        return found

    def records(self) -> Sequence[StepRecord]:
        """Every readable record, the file's then this session's (which win on the same id)."""
        path = self._where()
        merged = dict(self._from_file(path))
        merged.update(self._session_records(path))
        return tuple(r for r in merged.values() if r.id not in _kernel_session.forgotten)

    def for_map(self, key: str) -> MapStore:
        """Where the records of the map ``key`` are kept: in this kernel session, and saved by its final display."""
        return InlineMapStore(self, key)

    def put(self, record: StepRecord) -> StepRecord:
        """Keep the scrubbed record in this kernel session's memory (in place of its partial record, if any)."""
        kept = scrubbed(record)
        _kernel_session.forgotten.discard(kept.id)
        _kernel_session.recorded.setdefault(_key(self._where()), {})[kept.id] = kept
        for partials in _kernel_session.partials.values():
            partials.pop(kept.id, None)
        return kept

    def put_partial(self, record: StepRecord) -> None:
        """Keep a waiting step's partial record in this session and hand it to the frontend extension at once.

        The extension writes it into the notebook metadata (the notebook becomes dirty; a save, autosave included,
        keeps it), and hands it back to a restarted kernel. A headless run keeps no partial record.
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
        found = self._saved(path)
        frontend = link()
        unsaved = frontend.unsaved  # what the frontend's notebook model held, saved or not (the extension's answer)
        merged = {**found, **unsaved} if unsaved else found
        if frontend.answered and any(r.partial is not None and i not in unsaved for i, r in found.items()):
            # The frontend's model is newer than the file: a partial record it no longer holds was finished or
            # discarded since the file was saved.
            merged = {i: r for i, r in merged.items() if r.partial is None or i in unsaved}
        return merged

    def _saved(self, path: Path | None) -> dict[str, StepRecord]:
        if path is None:
            return {}
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return {}
        if self._read is not None and self._read[0] == path and self._read[1] == mtime:
            return self._read[2]
        found = self._read_file(path, mtime)
        self._read = (path, mtime, found.records)
        return found.records

    def _read_file(self, path: Path, mtime: int) -> NotebookRecords:
        try:
            found = records_in_notebook(read_notebook_json(path), where=str(path))
        except InputError as e:
            found = NotebookRecords(problems=[str(e)])
        if found.problems and (str(path), mtime) not in self._warned:
            self._warned.add((str(path), mtime))
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
            stream.write(not_found_message(locate()) + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed stderr: nothing to tell it to
            pass


def _key(path: Path | None) -> str:
    return str(path.resolve()) if path else ""


def forget(record_ids: Iterable[str]) -> None:
    """Stop replaying these records in this kernel session (``%agl forget``)."""
    for record_id in record_ids:
        _kernel_session.forgotten.add(record_id)
        for records in _kernel_session.recorded.values():
            records.pop(record_id, None)
