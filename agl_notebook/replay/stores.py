"""Stores: where step records are kept. In memory, in one JSON file, or (agl_notebook.notebook) in a notebook.

Every store scrubs secrets from a record before keeping it, on every path. A store that finds its file corrupt says
what is wrong and where, reads nothing from it, and never writes over it: new records stay in memory until the
person decides what to do with the file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._files import read_json_file, write_atomically
from .._json_text import json_to_search
from .._protocols import implements
from .._secrets import scrub, scrub_text, secrets_from_environment
from ..errors import InputError, warn
from ..media import Media, blob_file_name, kept_in_file, records_folder
from ..payloads import JsonObject, JsonValue
from ..transcript import Block, MediaBlock, Message, RawBlock, TextBlock, ToolResultBlock
from .records import RecordsBlock, StepRecord, block_from_json, block_to_json, record_from_json
from .versions import RecordIndex


class RecordingWarning(UserWarning):
    """Recordings could not be read or saved; the message says which and why."""


@runtime_checkable
class Store(Protocol):
    """Where a Run finds and keeps step records."""

    def get(self, record_id: str) -> StepRecord | None:
        """The record with this id, if any."""
        ...

    def records(self) -> Sequence[StepRecord]:
        """Every readable record, in order."""
        ...

    def put(self, record: StepRecord) -> StepRecord:
        """Keep ``record`` (scrubbed), replacing one with the same id; return what was kept."""
        ...

    async def ready(self) -> None:
        """Awaited before a step's first lookup: a store that must hear from elsewhere first waits here.

        The notebook's waits for the frontend's unsaved recordings; the others return at once.
        """
        ...

    def for_map(self, key: str) -> MapStore:
        """Where the item records of the map ``key`` are found and kept (``run.map``).

        ``key`` names the map (letters, digits, ``_`` and ``-``), not the notebook file. Every store but the
        notebook's keeps them in itself (`InlineMapStore`); the notebook's may move a large map's records to a
        sidecar file beside the notebook.
        """
        ...


@runtime_checkable
class PartialStore(Protocol):
    """A store that keeps partial records: the progress of a step waiting for a person (docs/recordings.md).

    A partial record has the id of the finished record it becomes: `Store.put` of that record replaces it, and
    `Store.get` returns it until then (the engine resumes it, never replays it). It never replaces a finished record
    of the same id (a step waiting in mode ``refresh``): it is kept beside it, and `Store.get` returns the finished one.
    """

    def put_partial(self, record: StepRecord) -> None:
        """Keep the scrubbed partial record, replacing a partial one with the same id (never a finished one)."""
        ...

    def discard_partial(self, record_id: str) -> None:
        """Forget the partial record with this id (the step failed, or the person interrupted it).

        A finished record with the id is left alone.
        """
        ...


@runtime_checkable
class LocatedStore(Protocol):
    """A store that must first find where its records are, and may not be able to (the notebook's, in a kernel)."""

    def unlocated(self) -> str | None:
        """Why its records cannot be read, with the fix, when it cannot tell where they are and no person watches.

        None when it can tell, or a person is there to see what runs. While it says why, the engine runs nothing
        live in mode ``auto`` that would reach a model or a server (that would be live on a guess), and a replay
        miss carries the reason.
        """
        ...


@runtime_checkable
class MapStore(Store, Protocol):
    """The store of one map's item records: a `Store`, and what the map's final display saves of it."""

    def saved_block(self) -> JsonObject:
        """The records block the map's final display carries in its output metadata.

        As a step's display carries its record: the map's records themselves, or (a large map's, in a notebook)
        the sidecar file that holds them.
        """
        ...


def map_store(store: Store, key: str) -> MapStore:
    """``store.for_map(key)``, or the map's records kept in ``store`` itself for a store written before ``for_map``.

    A store a person wrote with ``get``, ``records``, ``put`` and ``ready`` still serves steps; a map keeps its item
    records in it through an `InlineMapStore`.
    """
    offered: object = store  # typed as a Store, a person's store may still lack for_map
    if implements(offered, Store):
        return store.for_map(key)
    return InlineMapStore(store, key)


def merge_records(*layers: Mapping[str, StepRecord]) -> dict[str, StepRecord]:
    """The records of ``layers`` by id, a later layer's winning; a partial or failure record never replaces a finished.

    A step's partial record is always older than its finished record (the finished one replaces it when the step
    ends), but the two can travel by different paths: a map item's partial record reaches the notebook metadata
    through the extension while its finished record travels in the map's output, so whichever layer is read last,
    the finished record is the one that is true. A map item's failure record is never kept over a finished record
    of its id either (docs/map.md), so one found beside it is older.
    """
    merged: dict[str, StepRecord] = {}
    for layer in layers:
        for record_id, record in layer.items():
            if not record.finished:
                held = merged.get(record_id)
                if held is not None and held.finished:
                    continue
            merged[record_id] = record
    return merged


def scrubbed(record: StepRecord, secrets: Iterable[str] = ()) -> StepRecord:
    """The record with every secret scrubbed, the opaque fields of its kept blocks untouched.

    The same record when there was none, else one read back from the scrubbed JSON (what a reader would get). A
    block kept as the API sent it (`RawBlock`, in the transcript or on the tape) is scrubbed on its own, field by
    field (`scrub_kept_block`): its opaque fields (signatures, encrypted data) are never changed, and where its
    readable text did change, the record says so in ``scrubbed_blocks`` (a partial record with any is not resumed).
    A cited text block's citations follow the same rule (their ``encrypted_index`` goes back to the API as it came):
    its text and each citation's readable fields are scrubbed, its opaque fields never. Nothing signs them, so such a
    block is not named in ``scrubbed_blocks``.
    """
    known = (*secrets_from_environment(), *secrets)
    # Most records hold nothing to scrub: their whole text searched at C speed says so, and they are kept as they
    # are. The text is orjson's of the record itself (every string of every field, each dict's keys beside their
    # values; a tenth of the standard encoder's time, and no `to_json`): what it finds is scrubbed as below.
    searched = json_to_search(record)
    if searched is not None and scrub_text(searched, known) == searched:
        return record
    places, tape_places = _kept_places(record)
    if not places and not tape_places:
        return _scrubbed_json(record, known)
    # Scrub the rest with a stand-in in each kept block's place (no string of it can match), then put back each
    # kept block scrubbed field by field.
    stand_in = RawBlock({"type": _STAND_IN})
    transcript = tuple(
        Message(m.role, tuple(stand_in if (i, j) in places else b for j, b in enumerate(m.content)))
        if any((i, j) in places for j in range(len(m.content)))
        else m
        for i, m in enumerate(record.transcript)
    )
    tape = tuple(_tape_entry(entry, _set_aside) for entry in record.tape)
    set_aside = dataclasses.replace(record, transcript=transcript, tape=tape)
    rest = _scrubbed_json(set_aside, known)
    changed: set[tuple[int, int]] = set()
    clean: dict[tuple[int, int], Block] = {}
    cited_changed = False
    for place, block in places.items():
        if isinstance(block, TextBlock):
            clean[place] = _scrubbed_cited(block, known)
            cited_changed = cited_changed or clean[place] is not block
            continue
        data = scrub_kept_block(block.data, known)
        if data is block.data:
            clean[place] = block
        else:
            clean[place] = RawBlock(data)
            changed.add(place)
    tape_clean = [scrub_kept_block(block, known) for block in tape_places]
    if (
        rest is set_aside
        and not changed
        and not cited_changed
        and all(a is b for a, b in zip(tape_clean, tape_places, strict=True))
    ):
        return record  # no secret anywhere: the record as it is
    transcript = tuple(
        Message(m.role, tuple(clean.get((i, j), b) for j, b in enumerate(m.content)))
        for i, m in enumerate(rest.transcript)
    )
    kept_tape = iter(tape_clean)
    tape = tuple(_tape_entry(entry, lambda event: _put_back(event, kept_tape)) for entry in rest.tape)
    scrubbed_blocks = tuple(sorted(changed | set(record.scrubbed_blocks)))
    return dataclasses.replace(rest, transcript=transcript, tape=tape, scrubbed_blocks=scrubbed_blocks)


def scrub_kept_block(block: JsonObject, secrets: Sequence[str]) -> JsonObject:
    """A kept block's JSON with secrets scrubbed from its readable text only; ``block`` itself when there were none.

    Readable: every string of the block (a thinking block's ``thinking``, an unknown type's text and inputs) except
    its ``type``, its keys, and what is under an opaque key at any depth: ``signature``, ``data`` and any key
    starting with ``encrypted`` (a thinking block's signature, a redacted block's data, encrypted content). Those
    are sent back to the API exactly as it sent them, so they are never changed. A plain-text source's ``data`` (a
    fetched page, ``{"type": "text", "media_type": "text/plain", "data": ...}``) is the page's text: readable.
    """
    patterns = tuple(secrets)

    def walk(value: JsonValue, top: bool) -> JsonValue:
        if isinstance(value, str):
            return scrub_text(value, patterns)
        if isinstance(value, list):
            return [walk(v, False) for v in value]
        if isinstance(value, dict):
            text_source = value.get("type") == "text"
            kept = {k for k in value if _opaque_key(k) and not (text_source and k == "data")}
            if top:
                kept.add("type")
            return {k: v if k in kept else walk(v, False) for k, v in value.items()}
        return value

    clean = walk(block, True)
    return block if clean == block else clean  # type: ignore[return-value]


def _scrubbed_cited(block: TextBlock, secrets: Sequence[str]) -> TextBlock:
    """A cited text block with its text and its citations' readable fields scrubbed; ``block`` when none changed."""
    text = scrub_text(block.text, secrets)
    citations = tuple(scrub_kept_block(c, secrets) for c in block.citations)
    if text == block.text and all(a is b for a, b in zip(citations, block.citations, strict=True)):
        return block
    return dataclasses.replace(block, text=text, citations=citations)


def _opaque_key(key: str) -> bool:
    return key in ("signature", "data") or key.startswith("encrypted")


_STAND_IN = "agl_notebook.kept_block"


def _kept_places(record: StepRecord) -> tuple[dict[tuple[int, int], RawBlock | TextBlock], list[JsonObject]]:
    """The record's kept blocks and cited text blocks by (message, block), and the kept blocks on the tape in order."""
    places: dict[tuple[int, int], RawBlock | TextBlock] = {
        (i, j): b
        for i, m in enumerate(record.transcript)
        for j, b in enumerate(m.content)
        if isinstance(b, RawBlock) or (isinstance(b, TextBlock) and b.citations)
    }
    on_tape: list[JsonObject] = []
    for entry in record.tape:
        for event in _tape_kept_events(entry):
            block, citations = event.get("block"), event.get("citations")
            if isinstance(block, dict):
                on_tape.append(block)
            elif isinstance(citations, list):
                on_tape += [c for c in citations if isinstance(c, dict)]
    return places, on_tape


def _tape_kept_events(entry: JsonValue) -> list[JsonObject]:
    """The events of a tape entry that keep what goes back to the API as it came.

    A reply's block (``{"block": ...}``) or a cited passage's citations (``{"cited": ..., "citations": [...]}``).
    """
    events = entry.get("events") if isinstance(entry, dict) else None
    if not isinstance(events, list):
        return []
    return [
        e
        for e in events
        if isinstance(e, dict)
        and (isinstance(e.get("block"), dict) or ("cited" in e and isinstance(e.get("citations"), list)))
    ]


def _tape_entry(entry: JsonValue, replace: Callable[[JsonObject], JsonObject]) -> JsonValue:
    """A tape entry with each event `_tape_kept_events` names replaced by ``replace(event)``; the entry when none."""
    kept = _tape_kept_events(entry)
    if not kept:
        return entry
    assert isinstance(entry, dict)  # events were found in it
    events = entry["events"]
    assert isinstance(events, list)
    places = {id(e) for e in kept}
    return {**entry, "events": [replace(e) if id(e) in places else e for e in events]}  # type: ignore[arg-type]


def _set_aside(event: JsonObject) -> JsonObject:
    """A kept event with a stand-in in place of each kept block or citation (no string of it can match a secret)."""
    if isinstance(event.get("block"), dict):
        return {**event, "block": {"type": _STAND_IN}}
    citations = event["citations"]
    assert isinstance(citations, list)
    return {**event, "citations": [{"type": _STAND_IN} if isinstance(c, dict) else c for c in citations]}


def _put_back(event: JsonObject, kept: Iterator[JsonObject]) -> JsonObject:
    """A set-aside event with each stand-in replaced by the next of ``kept`` (each scrubbed field by field)."""
    if isinstance(event.get("block"), dict):
        return {**event, "block": next(kept)}
    citations = event["citations"]
    assert isinstance(citations, list)
    return {**event, "citations": [next(kept) if isinstance(c, dict) else c for c in citations]}


def write_blob_file(media: Media, folder: Path) -> Path:
    """Write the value's blob file into ``folder`` (once: a file of its digest is never written again).

    Never outside ``folder``: the name is the digest's hex, and a symbolic link in the blob folder's place, or in
    the file's, is refused.
    """
    path = folder / blob_file_name(media)
    for place in (path.parent, path):
        if place.is_symlink():
            raise InputError(f"{place}: a symbolic link; blob files are written only into the notebook's own folder.")
    try:
        if path.exists() and path.stat().st_size == media.size:
            return path  # the same digest: the same bytes
        write_atomically(path, media.data)
    except OSError as e:  # the folder is a file, or cannot be written: say which, not a bare OSError
        raise InputError(
            f"{path}: the blob file of a recorded {media.kind} cannot be written ({e.strerror or type(e).__name__}); "
            f"make {path.parent.name} a folder this process can write."
        ) from e
    return path


def write_blob_files(record: StepRecord, folder: Path) -> None:
    """Write into ``folder`` (the records' own) the blob file of each image or document kept in one.

    A value over `INLINE_BLOB_BYTES` is kept so (docs/images.md). A blob file that cannot be written (the blob folder
    is a file or a link, or cannot be written) is said in a `RecordingWarning` and the record is kept all the same:
    the step's answer, paid for, is never lost to it; a replay that needs the file after a restart names it missing.
    """
    for message in record.transcript:
        for block in message.content:
            values = (
                block.media
                if isinstance(block, ToolResultBlock)
                else (block.media,)
                if isinstance(block, MediaBlock)
                else ()
            )
            for media in values:
                if kept_in_file(media) and media.blob_file is None:
                    try:
                        write_blob_file(media, folder)
                    except InputError as e:
                        warn(
                            f"{e} The step's record is kept without it (its answer is not lost); a replay after a "
                            "restart will say the file is missing: run the cell again once the folder can be written.",
                            RecordingWarning,
                        )


_RECORD_ENCODER = json.JSONEncoder(ensure_ascii=False)  # made once (``json.dumps`` with an option makes one a call)


def _scrubbed_json(record: StepRecord, known: Sequence[str]) -> StepRecord:
    """The record scrubbed as JSON text: the same record when there was no secret, else the scrubbed JSON read back."""
    text = _RECORD_ENCODER.encode(record.to_json())  # the standard spelling, scrubbed and read back
    clean = scrub_text(text, known)
    if clean == text:
        return record
    try:
        data: JsonValue = json.loads(clean)
    except json.JSONDecodeError:  # a secret's spelling ran into JSON syntax: scrub string by string instead
        data = scrub(record.to_json(), known)
    return record_from_json(data, where=f"record {record.id}")


class InlineMapStore:
    """A map's item records kept in its parent store itself; the final display carries every one it kept."""

    def __init__(self, parent: Store, key: str) -> None:
        self.parent = parent
        self.key = key
        self._kept: dict[str, StepRecord] = {}

    def get(self, record_id: str) -> StepRecord | None:
        """The parent's record with this id; a finished one is this map's too (a replayed item's display saves it)."""
        found = self.parent.get(record_id)
        if found is not None and found.partial is None:  # a partial record is resumed, never saved as the map's
            self._kept.setdefault(record_id, found)
        return found

    def records(self) -> Sequence[StepRecord]:
        """The parent's records."""
        return self.parent.records()

    def version_index(self) -> RecordIndex:
        """The parent's records, indexed (`IndexedStore`), or indexed now from a parent that keeps no index."""
        indexed = getattr(self.parent, "version_index", None)
        return indexed() if callable(indexed) else RecordIndex(self.parent.records())

    def put(self, record: StepRecord) -> StepRecord:
        """Keep the record in the parent, and in this map's block."""
        kept = self._kept[record.id] = self.parent.put(record)
        return kept

    async def ready(self) -> None:
        """As ready as the parent."""
        await self.parent.ready()

    def for_map(self, key: str) -> MapStore:
        """A map inside a map keeps its records in the same parent."""
        return InlineMapStore(self.parent, key)

    def saved_block(self) -> JsonObject:
        """Every record this map kept, in the order kept."""
        return block_to_json(tuple(self._kept.values()))

    def __repr__(self) -> str:
        return repr(self.parent)


class MemoryStore:
    """Records in memory: the default outside a notebook, one per `Run`.

    Partial records are kept beside the finished ones (docs/recordings.md, "Partial records"): a step waiting in
    mode ``refresh`` keeps its partial record without overwriting the finished record of the same id, and discarding
    it leaves that record as it was.
    """

    def __init__(self, records: Sequence[StepRecord] = ()) -> None:
        self._records: dict[str, StepRecord] = {}
        self._partials: dict[str, StepRecord] = {}
        self._index: RecordIndex | None = None  # made when a live step first asks, then kept up to date
        # What changed since, told the index when a live step next asks: a store nobody asks again (a `Run` per
        # step) pays a list append per record, not the index's work.
        self._unindexed: list[tuple[StepRecord | None, StepRecord | None, StepRecord | None]] = []
        for record in records:
            self._place(record)

    def _place(self, record: StepRecord) -> None:
        if record.partial is not None:
            if self._index is not None and record.id not in self._records:  # beside a finished one, records() omits it
                self._unindexed.append((record, self._partials.get(record.id), None))
            self._partials[record.id] = record
        else:
            if self._index is not None:
                held = self._records.get(record.id)
                # A finished record in place of its partial one: records() lists it after every finished one now.
                self._unindexed.append((record, held, self._partials.get(record.id) if held is None else None))
            self._records[record.id] = record
            self._partials.pop(record.id, None)  # the finished record replaces its partial one

    def version_index(self) -> RecordIndex:
        """`records`, indexed for a live step's versions (`IndexedStore`)."""
        index = self._index
        if index is None:
            index = self._index = RecordIndex(self.records())
            self._unindexed.clear()
        elif self._unindexed:
            for record, replacing, dropped in self._unindexed:
                if dropped is not None:
                    index.remove(dropped)
                if record is not None:
                    index.put(record, replacing)
            self._unindexed.clear()
        return index

    def get(self, record_id: str) -> StepRecord | None:
        """The finished record with this id, else the partial one (which the engine resumes), if any."""
        found = self._records.get(record_id)
        return found if found is not None else self._partials.get(record_id)

    async def ready(self) -> None:
        """Ready at once."""

    def for_map(self, key: str) -> MapStore:
        """A map's records are kept here too."""
        return InlineMapStore(self, key)

    def records(self) -> Sequence[StepRecord]:
        """Every record `get` finds: the finished ones in the order first kept, then the partial ones of other ids."""
        partials = [r for i, r in self._partials.items() if i not in self._records]
        return (*self._records.values(), *partials)

    def put(self, record: StepRecord) -> StepRecord:
        """Keep the scrubbed record (a finished one in place of its partial one)."""
        kept = scrubbed(record)
        self._place(kept)
        return kept

    def put_partial(self, record: StepRecord) -> None:
        """Keep the scrubbed partial record beside a finished one with its id, if any (never over it)."""
        self.put(record)

    def discard_partial(self, record_id: str) -> None:
        """Forget the partial record with this id; a finished one with the id is left alone."""
        waiting = self._partials.pop(record_id, None)
        if waiting is not None and self._index is not None and record_id not in self._records:
            self._unindexed.append((None, None, waiting))

    def __repr__(self) -> str:
        # Counted, not copied: every miss of a map's live items names its store.
        count = len(self._records) + sum(1 for i in self._partials if i not in self._records)
        return f"MemoryStore({count} records)"


class JsonFileStore(MemoryStore):
    """Records in one JSON file, ``{"version": 1, "records": [...]}``.

    The file is read when first needed and rewritten atomically after each change, taking in first what another
    writer (a second Run, another process) wrote since it was read. Each record's JSON text is kept once written, so
    a rewrite joins texts rather than serialising every record again (2,000 records put one by one: seconds, not
    minutes). The file holds what `records` gives, one record per id: a partial record kept beside a finished one
    (mode ``refresh``) stays in memory only, so the file's finished record is never replaced by it.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        """The file."""
        self.problem: str | None = None
        """Why the file could not be used, if it could not; it is then never written."""
        self._loaded = False
        self._read_at: int | None = None  # the file's mtime when last read
        self._unreadable: tuple[JsonValue, ...] = ()
        # record id -> (the record, its JSON text as written in the file); a new record under the id is written anew
        self._texts: dict[str, tuple[StepRecord, str]] = {}

    def get(self, record_id: str) -> StepRecord | None:
        """The record with this id, if any (as `MemoryStore.get`)."""
        self._load()
        return super().get(record_id)

    def records(self) -> Sequence[StepRecord]:
        """Every readable record."""
        self._load()
        return super().records()

    def put(self, record: StepRecord) -> StepRecord:
        """Keep the scrubbed record and rewrite the file (unless the file is corrupt)."""
        self._take_in_others()
        write_blob_files(record, self.path.parent)
        kept = super().put(record)
        if self.problem is not None:
            warn(
                f"Not saved to {self.path}: {self.problem} The record is kept in memory for this session; fix or "
                "move the file to save recordings again.",
                RecordingWarning,
            )
            return kept
        self._write()
        return kept

    def discard_partial(self, record_id: str) -> None:
        """Forget the partial record with this id and rewrite the file, keeping what other writers put there."""
        self._take_in_others()
        if record_id not in self._partials:
            return
        super().discard_partial(record_id)
        self._texts.pop(record_id, None)
        if self.problem is None:
            self._write()

    def _take_in_others(self) -> None:
        """Read the file again when another writer changed it since, this store's own records winning."""
        self._load()
        if self.problem is None and self._changed_on_disk():
            # Another process (a second Run, another kernel) wrote the file since it was read: take its records
            # in first, so rewriting the file keeps them.
            mine, my_partials = dict(self._records), dict(self._partials)
            self._loaded = False
            self._load()
            self._records.update(mine)
            self._partials.update(my_partials)
            self._index = None  # made again from what the file holds now
            self._unindexed.clear()

    def _write(self) -> None:
        write_atomically(self.path, self._file_text())
        self._read_at = self._mtime()

    def _file_text(self) -> str:
        """The file: what ``json.dumps(block, indent=1)`` writes, joined from each record's kept text."""
        items = [self._text(r) for r in MemoryStore.records(self)]
        items += [_item_text(item) for item in self._unreadable]
        head = json.dumps(block_to_json(()), ensure_ascii=False, indent=1)  # {"version": 1, "records": []}
        if not items:
            return head + "\n"
        opened, _, closed = head.rpartition("[]")
        return f"{opened}[\n" + ",\n".join(items) + f"\n ]{closed}\n"

    def _text(self, record: StepRecord) -> str:
        kept = self._texts.get(record.id)
        if kept is None or kept[0] is not record:
            kept = self._texts[record.id] = (record, _item_text(record.to_json()))
        return kept[1]

    def _mtime(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def _changed_on_disk(self) -> bool:
        return self._mtime() != self._read_at

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._read_at = self._mtime()
        if not self.path.exists():
            return
        folder = records_folder.set(self.path.parent.resolve())  # its blob files are beside it
        try:
            block = read_block_file(self.path)
        except InputError as e:
            self.problem = str(e)
            warn(f"Recordings not read: {e}", RecordingWarning)
            return
        finally:
            records_folder.reset(folder)
        for message in block.problems:
            warn(f"A recording was skipped (kept in the file as it is): {message}", RecordingWarning)
        self._unreadable = block.unreadable
        for record in block.records:
            self._place(record)

    def __repr__(self) -> str:
        return f"JsonFileStore({str(self.path)!r})"


def read_block_file(path: Path) -> RecordsBlock:
    """Read a records file, with an `InputError` saying what is wrong and where."""
    return block_from_json(read_json_file(path), where=str(path))


def _item_text(item: JsonValue) -> str:
    """One item of the records list as ``json.dumps(..., indent=1)`` writes it inside the block (two levels in)."""
    # split("\n"), not splitlines(): that also splits inside strings, at U+2028, U+2029, U+0085 (kept raw by
    # ensure_ascii=False), which would put a line break inside a JSON string.
    return "\n".join("  " + line for line in json.dumps(item, ensure_ascii=False, indent=1).split("\n"))
