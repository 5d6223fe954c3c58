"""Sidecar files: a large map's records as JSON lines in a file beside the notebook (docs/recordings.md).

The file ``<key>.agl.jsonl`` is named for the map, never for the notebook (headless runners copy notebooks). Its
first line is the header ``{"kind": "agl_notebook.sidecar", "format": 1, "key": <key>}``; every later line is one
JSON object with a ``kind``: ``"step"`` is a record (`StepRecord.to_json`), and so is ``"failure"`` (a map item's
failure record, never appended after a finished record of its id); any other kind belongs to another reader and is
kept as it is, but for ``"uses"``: a cell that replayed records of the file without being among their cells
(`StepRecord.cells`), ``{"kind": "uses", "cell": {"id"?, "source"}, "ids": [record id, ...]}``, read as that cell
added to each record's. Lines are only ever appended, each by one write under an exclusive ``flock``, so two kernels
appending at once interleave whole lines only; a later line wins over an earlier one with the same record id.

A records block names the file with `SidecarNaming` (``"sidecars": [...]`` beside ``"records"``): the file's name,
the map's key, and the number of lines, bytes and SHA-256 of the file's beginning when it was named. Appends keep
that beginning, so the naming still checks out after them; a file rewritten, cut or replaced does not.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .._families import InputError
from .._files import write_atomically
from ..payloads import JsonObject, JsonValue
from .records import RECORD_KINDS, CellUse, StepRecord, record_from_json, with_cells

try:  # POSIX; elsewhere appends are single writes without a lock
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".agl.jsonl"
"""What a sidecar file's name ends with, after the map's key."""

HEADER_KIND = "agl_notebook.sidecar"
"""The ``kind`` of a sidecar's first line."""

FORMAT = 1
"""The sidecar format this version writes and reads."""

USES_KIND = "uses"
"""The ``kind`` of a line naming a cell that replayed some of the file's records (`uses_line`)."""

BLOCK_KEY = "sidecars"
"""The key, in a records block, of the list of sidecar namings."""

_KEY = re.compile(r"[A-Za-z0-9_-]{1,100}")

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""Opening a sidecar never follows a symbolic link (POSIX; elsewhere `refuse_link` alone refuses one)."""


def file_name(key: str) -> str:
    """The sidecar file name of the map ``key``; an `InputError` for a key that could not name a file safely."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InputError(f"map key {key!r}: expected 1 to 100 letters, digits, '_' or '-' (it names a file).")
    return key + SUFFIX


def line_text(record: StepRecord) -> str:
    """A record as one sidecar line, without its newline (compact JSON; ``json`` escapes every line break)."""
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))


def uses_line(use: CellUse, ids: Sequence[str]) -> str:
    """A line saying the cell ``use`` replayed the records ``ids``, without its newline."""
    return json.dumps({"kind": USES_KIND, "cell": use.to_json(), "ids": list(ids)}, separators=(",", ":"))


def uses_in_line(obj: dict[str, JsonValue]) -> tuple[CellUse, list[str]] | None:
    """The cell and record ids of a ``uses`` line, or None when it is not one this version reads."""
    cell, ids = obj.get("cell"), obj.get("ids")
    source = cell.get("source") if isinstance(cell, dict) else None
    cell_id = cell.get("id") if isinstance(cell, dict) else None
    if not isinstance(source, str) or not (cell_id is None or isinstance(cell_id, str)) or not isinstance(ids, list):
        return None
    return CellUse(cell_id or None, source), [i for i in ids if isinstance(i, str)]


def header_text(key: str) -> str:
    """The first line of the sidecar of the map ``key``, without its newline."""
    return json.dumps({"kind": HEADER_KIND, "format": FORMAT, "key": key}, separators=(",", ":"))


@dataclass(frozen=True)
class SidecarNaming:
    """How a records block names a sidecar: the file, and what of its beginning must still check out."""

    file: str
    """The file's name, in the notebook's folder (never a path)."""
    key: str
    """The map's key."""
    lines: int
    """Complete lines the digest covers (the header included)."""
    bytes: int
    """Bytes the digest covers: the file's first ``bytes`` bytes, ending at a newline."""
    sha256: str
    """SHA-256 (hex) of those bytes."""

    def to_json(self) -> JsonObject:
        """The naming as it stands in a block's ``sidecars`` list."""
        return {"file": self.file, "key": self.key, "lines": self.lines, "bytes": self.bytes, "sha256": self.sha256}


def naming_from_json(data: JsonValue, *, where: str) -> SidecarNaming:
    """Read a naming, checking every field (a crafted one must not name a file outside the notebook's folder)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object naming a sidecar file.")
    key = data.get("key")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InputError(f"{where}.key: expected a map key (letters, digits, '_', '-'), got {key!r}.")
    if data.get("file") != file_name(key):
        raise InputError(
            f"{where}.file: expected {file_name(key)!r} (the file of map {key!r}), got {data.get('file')!r}."
        )
    counts = {name: data.get(name) for name in ("lines", "bytes")}
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{where}.{name}: expected a whole number >= 0, got {value!r}.")
    digest = data.get("sha256")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise InputError(f"{where}.sha256: expected 64 hex digits.")
    return SidecarNaming(file_name(key), key, int(data["lines"]), int(data["bytes"]), digest)  # type: ignore[arg-type]


def namings_in_block(block: JsonValue, *, where: str) -> tuple[list[SidecarNaming], list[str]]:
    """The sidecars a records block names (none when it names none), and what could not be read."""
    raw = block.get(BLOCK_KEY) if isinstance(block, dict) else None
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{where}.{BLOCK_KEY}: expected a list of sidecar namings."]
    namings: list[SidecarNaming] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        try:
            namings.append(naming_from_json(item, where=f"{where}.{BLOCK_KEY}[{i}]"))
        except InputError as e:
            problems.append(str(e))
    return namings, problems


def with_naming(block: JsonObject, naming: SidecarNaming) -> JsonObject:
    """``block`` (not modified) naming ``naming``'s file by it: in place of a naming of the same file, else last."""
    current = block.get(BLOCK_KEY)
    items: list[JsonValue] = list(current) if isinstance(current, list) else []
    new = naming.to_json()
    at = next((i for i, item in enumerate(items) if isinstance(item, dict) and item.get("file") == naming.file), None)
    if at is None:
        items.append(new)
    else:
        items[at] = new
    return {**block, BLOCK_KEY: items}


# Reading -----------------------------------------------------------------------------------------------------------


@dataclass
class SidecarLine:
    """One line of a sidecar as read."""

    number: int
    """Its 1-based line number."""
    text: bytes
    """Its bytes, without the newline."""
    record: StepRecord | None = None
    """The record it holds, when it is a readable ``step`` line."""
    kind: str | None = None
    """Its ``kind``, when it is a JSON object with a string kind."""


@dataclass
class SidecarRead:
    """A sidecar file as read: its records (a later line winning), its lines, and what was wrong."""

    path: Path
    key: str
    lines: list[SidecarLine] = field(default_factory=list)
    """Every line after the header, in order (a torn last line included)."""
    records: dict[str, StepRecord] = field(default_factory=dict)
    """Readable records by id; the last line of an id wins."""
    problems: list[str] = field(default_factory=list)
    """What could not be read, with the file and line."""
    torn: bool = False
    """The last line was cut short (a kernel stopped while writing it)."""
    unchanged: bool | None = None
    """Whether the beginning the naming covers checks out (None when read without a naming)."""

    def latest(self, kind: str) -> dict[str, JsonValue] | None:
        """The last line of ``kind`` as an object (another reader's state, appended whole each time), if any."""
        for line in reversed(self.lines):
            if line.kind == kind:
                return _json_object(line.text)
        return None


def read_sidecar(path: Path, *, naming: SidecarNaming | None = None, key: str | None = None) -> SidecarRead:
    """Read a sidecar file: every line kept, the records read, each problem named with the file and line.

    Raises:
        InputError: The file is missing, cannot be read, is a link, or is not a sidecar (of the map ``key`` or the
            naming's).
    """
    want = naming.key if naming is not None else key
    refuse_link(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: the sidecar file is missing.") from None
    except OSError as e:
        raise InputError(f"{path}: the sidecar file cannot be read ({e}).") from None
    first, _, rest = data.partition(b"\n")
    header = _json_object(first)
    if header is None or header.get("kind") != HEADER_KIND:
        raise InputError(f"{path}: not an agl_notebook sidecar file (its first line is not the sidecar header).")
    if header.get("format") != FORMAT:
        raise InputError(f"{path}: sidecar format {header.get('format')!r}; this version reads format {FORMAT}.")
    found_key = header.get("key")
    if not isinstance(found_key, str) or (want is not None and found_key != want):
        raise InputError(f"{path}: the sidecar of map {found_key!r}, not of map {want!r}.")
    read = SidecarRead(path, found_key)
    if naming is not None:
        covered = data[: naming.bytes]
        read.unchanged = (
            len(covered) == naming.bytes
            and hashlib.sha256(covered).hexdigest() == naming.sha256
            and covered.count(b"\n") == naming.lines
        )
        if not read.unchanged:
            read.problems.append(
                f"{path}: its first {naming.lines} lines are not those the notebook named (the file was cut, "
                "rewritten or replaced since); its records are read as they are."
            )
    pieces = rest.split(b"\n")
    uses: list[tuple[CellUse, list[str]]] = []
    for offset, text in enumerate(pieces):
        number = offset + 2
        last = offset == len(pieces) - 1
        if last and not text:
            break  # the file ends with a newline
        line = SidecarLine(number, text)
        read.lines.append(line)
        obj = _json_object(text)
        if obj is None:
            if last:
                read.torn = True
                read.problems.append(
                    f"{path} line {number}: cut short (a kernel stopped while writing it); skipped, and the "
                    "rest is kept."
                )
            elif text.strip():
                read.problems.append(f"{path} line {number}: not a JSON object; skipped, kept as it is.")
            continue
        kind = obj.get("kind")
        line.kind = kind if isinstance(kind, str) else None
        if kind == USES_KIND and (used := uses_in_line(obj)) is not None:
            uses.append(used)
        if kind not in RECORD_KINDS:  # a step's record, or a map item's failure record
            continue  # another reader's line (docs/recordings.md, "Sidecar files")
        try:
            line.record = record_from_json(obj, where=f"{path} line {number}")
        except InputError as e:
            read.problems.append(f"{e} Skipped, kept as it is.")
            continue
        read.records.pop(line.record.id, None)  # a later line wins, and takes the later place
        read.records[line.record.id] = line.record
    for use, ids in uses:
        for record_id in ids:
            record = read.records.get(record_id)
            if record is not None and record.partial is None:
                read.records[record_id] = with_cells(record, [use])
    return read


def _json_object(text: bytes) -> dict[str, JsonValue] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def refuse_link(path: Path) -> None:
    """Refuse a sidecar path that is a link, symbolic (dangling or not) or hard: it would reach outside the folder.

    A hard link's other names may be anywhere on the file system, and an append writes to all of them.

    Raises:
        InputError: It is one; nothing was read or written.
    """
    if path.is_symlink():
        raise InputError(
            f"{path}: a symbolic link, not a sidecar file; a map's records are read and written only in a plain file "
            "in the notebook's folder. Nothing was read or written through it: replace it with the file itself, or "
            "remove it."
        )
    try:
        found = path.stat()
    except OSError:
        return  # missing or unreadable: the caller's open says so
    if found.st_nlink > 1 and not _being_made(path, found):
        raise InputError(
            f"{path}: a file with {found.st_nlink} hard links, not a plain sidecar file; appending to it would write "
            "to every other name it has, which may be outside the notebook's folder. Nothing was read or written "
            "through it: replace it with a copy (cp) of itself, or remove it."
        )


def _being_made(path: Path, found: os.stat_result) -> bool:
    """Whether the second name of ``path``'s file is the temporary file `_create` is linking it from, right now."""
    if found.st_nlink != 2:
        return False
    for sibling in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if os.path.samestat(sibling.stat(), found):
                return True
    return False


# Writing -----------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path, key: str) -> Iterator[IO[bytes]]:
    """The sidecar opened for appending under an exclusive lock, made with its header when missing.

    The lock is taken on the file the path names after locking: a file replaced meanwhile (``gc`` rewrote it) is
    opened again, so no line goes to a file no longer in the folder. A symbolic link is refused (`refuse_link`).
    """
    while True:
        refuse_link(path)  # a dangling link would make every open fail and every link exist: a loop forever
        try:  # never O_CREAT: a file made here would have no header; never through a link
            f = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | _NOFOLLOW), "ab")
        except FileNotFoundError:
            _create(path, key)
            continue
        except OSError as e:
            if path.is_symlink():  # made a link since it was checked
                refuse_link(path)
            raise e from None
        try:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                same = os.path.samestat(os.fstat(f.fileno()), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                refuse_link(path)  # a hard link made before the lock: checked on the file now locked
                yield f
                return
        finally:
            f.close()  # closing releases the lock


def _create(path: Path, key: str) -> None:
    """Make the file with its header in one step: linked into place whole, so no appender sees it headless."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(header_text(key) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        try:
            os.link(temporary, path)
        except FileExistsError:  # another kernel made it first: append to theirs
            pass
        except OSError:  # a file system without hard links: made exclusively, then the header written at once
            with contextlib.suppress(FileExistsError):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                with os.fdopen(fd, "wb") as made:
                    made.write((header_text(key) + "\n").encode("utf-8"))
    finally:
        Path(temporary).unlink(missing_ok=True)


def _write_all(f: IO[bytes], data: bytes) -> None:
    fd = f.fileno()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class SidecarWriter:
    """Appends lines to the sidecar of one map, and names it as it stands (`naming`)."""

    def __init__(self, path: Path, key: str) -> None:
        file_name(key)
        self.path = path
        """The file."""
        self.key = key
        self._digest = hashlib.sha256()
        self._hashed = 0  # bytes of the file the digest covers
        self._lines = 0
        self._inode: tuple[int, int] | None = None
        self._end: int | None = None  # the file's size after this writer's last append (it ended with a newline)

    def append(self, lines: Sequence[str]) -> None:
        """Append whole lines (no newline inside any), in one write under the lock.

        A last line cut short by a kernel that stopped is ended first with a newline, so it stays a line of its
        own (readers skip it with a warning) and nothing is written into it.
        """
        if not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        with _locked(self.path, self.key) as f:
            size = os.fstat(f.fileno()).st_size
            if size and size != self._end and _last_byte(self.path, size) != b"\n":
                data = b"\n" + data
            _write_all(f, data)
            self._end = size + len(data)

    def naming(self) -> SidecarNaming:
        """The naming of the file as it stands: every complete line now in it (a digest kept up as it grows)."""
        refuse_link(self.path)
        with os.fdopen(os.open(self.path, os.O_RDONLY | _NOFOLLOW), "rb") as f:
            stat = os.fstat(f.fileno())
            inode = (stat.st_dev, stat.st_ino)
            if inode != self._inode or stat.st_size < self._hashed:  # a new or rewritten file: hash it anew
                self._digest, self._hashed, self._lines, self._inode = hashlib.sha256(), 0, 0, inode
            f.seek(self._hashed)
            grown = f.read()
        complete = grown[: grown.rfind(b"\n") + 1]
        self._digest.update(complete)
        self._hashed += len(complete)
        self._lines += complete.count(b"\n")
        return SidecarNaming(self.path.name, self.key, self._lines, self._hashed, self._digest.hexdigest())


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1)


def rewrite_sidecar(
    read: SidecarRead, keep: Callable[[SidecarLine], bool], change: Callable[[SidecarLine], bytes] | None = None
) -> int:
    """Rewrite the file atomically with the lines ``keep`` keeps; how many were dropped or changed (0: not written).

    Each kept line is as ``change`` gives it (default: as it is).

    Done under the appenders' lock, so no line appended meanwhile is lost: lines appended since ``read`` are kept.
    A torn last line is kept too (ended with a newline): only ``keep`` drops anything, only ``change`` changes it.
    """
    with _locked(read.path, read.key):
        current = read_sidecar(read.path, key=read.key)
        known = {line.text for line in read.lines}
        kept = [line for line in current.lines if line.text not in known or keep(line)]
        texts = [change(line) if change is not None and line.text in known else line.text for line in kept]
        touched = len(current.lines) - len(kept) + sum(new != line.text for new, line in zip(texts, kept, strict=True))
        if touched:
            head = (header_text(read.key) + "\n").encode("utf-8")
            write_atomically(read.path, head + b"".join(text + b"\n" for text in texts))
    return touched
