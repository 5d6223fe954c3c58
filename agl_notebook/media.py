"""Images and documents: payload field types that reach the model as content blocks, never as JSON text.

An `Image` (PNG, JPEG, GIF, WebP) or a `Document` (PDF, plain text) is made from a path, bytes or a URL. It is read
lazily: a step checks every one of its input's media before any request (`check`), so a path that cannot be read,
a media type the API does not take, or a value over the API's limits is an `InputError` naming the field. What the
model is sent is a content block beside the JSON of the rest of the input (base64, or a URL source the API fetches);
what a record and the fingerprint keep is the reference JSON (`reference`): the SHA-256 digest of the bytes, or
the URL. So one changed pixel is a different input, and a changed image behind the same URL is not.

The API's handling, stated (docs/images.md): an image whose base64 is over 5 MB, or over 8000 px on a side, is
refused (2000 px when a request holds more than 20 images); one whose long edge is over 1568 px, or that is over about
1600 tokens, is scaled down by the API keeping its aspect ratio (the bytes sent and kept here are the originals); a
PDF is refused over 100 pages or a base64 of 32 MB (the request limit). Each is checked here first.

The base64 text of a value's bytes is made once, the first time a request needs it, and reused by every later
request of every step that sends the same value.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import stat
import struct
import weakref
from contextvars import ContextVar
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from ._families import InputError
from ._secrets import scrub_text, secrets_from_environment
from .payloads import Attachment, JsonObject, JsonValue, dump

IMAGE_MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image media types the Messages API takes."""
DOCUMENT_MEDIA_TYPES = ("application/pdf", "text/plain")
"""The document media types the Messages API takes (a base64 PDF, or plain text)."""

IMAGE_MAX_BYTES = 5 * 1024 * 1024
"""The API refuses an image whose base64 is over 5 MB (it measures the base64 sent, not the file: a file of at most
three quarters of it, `IMAGE_MAX_FILE_BYTES`)."""
IMAGE_MAX_FILE_BYTES = IMAGE_MAX_BYTES * 3 // 4
"""The largest image file whose base64 is within `IMAGE_MAX_BYTES` (3.75 MB)."""
IMAGE_MAX_SIDE = 8000
"""The API refuses an image over 8000 px on a side."""
IMAGE_MAX_SIDE_MANY = 2000
"""... and over 2000 px on a side when one request holds more than `MANY_IMAGES` images."""
MANY_IMAGES = 20
IMAGE_SCALED_SIDE = 1568
"""The API scales down (keeping the aspect ratio) an image whose long edge is over this many pixels."""
IMAGE_MAX_TOKENS = 1600
"""... or that is over about this many tokens; so an image costs at most about this many."""
PIXELS_PER_TOKEN = 750
"""Anthropic's estimate: an image of width x height pixels costs about width * height / 750 tokens."""
DOCUMENT_MAX_BYTES = 32 * 1024 * 1024
"""A document over 32 MB as sent cannot fit in a request (the Messages API's request limit): a text document's text,
a PDF's base64 (so a PDF file of at most 24 MB)."""
PDF_MAX_PAGES = 100
"""The API refuses a PDF of more than 100 pages (in a request to a model of a 200k-token context)."""
TOKENS_PER_PDF_PAGE = 3000
"""What a PDF page is estimated to cost before a request: its text and its page image (Anthropic says 1500-3000)."""

INLINE_BLOB_BYTES = 32 * 1024
"""A record keeps a value of at most this many bytes inline (base64 in its ``blobs``); a larger one in a blob file
beside the notebook (or the records file), ``agl_blobs/<sha256 hex>.<ext>``, named in the record."""
BLOB_FOLDER = "agl_blobs"
"""The folder, beside the notebook, of the blob files."""

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
}

_PATH_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/plain",
    ".csv": "text/plain",
}


_KNOWN: weakref.WeakValueDictionary[str, Media] = weakref.WeakValueDictionary()


def known(digest: str) -> Media | None:
    """The value of this digest, while this process holds it (an input, a record's transcript): what a view draws."""
    return _KNOWN.get(digest)


records_folder: ContextVar[Path | None] = ContextVar("agl_notebook_records_folder", default=None)
"""The folder of the records being read (a records file's, a notebook's), where their blob files are; None: the
working folder (a kernel's is its notebook's)."""

_BLOB_NAME = re.compile(BLOB_FOLDER + r"/[0-9a-f]{64}\.(png|jpg|gif|webp|pdf|txt)")


def blob_file_name(media: Media) -> str:
    """The blob file a recorded value over `INLINE_BLOB_BYTES` is kept in, relative to its records' folder."""
    if media.blob_file is not None:
        return media.blob_file
    return f"{BLOB_FOLDER}/{media.digest.removeprefix('sha256:')}{_EXTENSIONS.get(media.media_type or '', '.bin')}"


def kept_in_file(media: Media) -> bool:
    """Whether a record keeps this value in a blob file rather than inline.

    A text document is always inline, as text, so a secret in it is scrubbed as in any other text of the record.
    """
    if media.blob_file is not None:
        return True
    return media.url is None and media.size > INLINE_BLOB_BYTES and media.media_type != "text/plain"


def sniffed_type(data: bytes) -> str | None:
    """The media type the bytes' signature says (PNG, JPEG, GIF, WebP, PDF), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


class Media(Attachment):
    """What an `Image` and a `Document` share: the source, read lazily, checked once, its digest."""

    kind: ClassVar[str]
    """``image`` or ``document``: the content block's type."""
    accepted: ClassVar[tuple[str, ...]]
    max_bytes: ClassVar[int]
    """The most bytes the API takes of one: a file is refused from its size over it, before it is read."""

    __slots__ = (
        "__weakref__",
        "_b64",
        "_blob",
        "_data",
        "_digest",
        "_media_type",
        "_path",
        "_read",
        "_size",
        "title",
        "url",
    )

    def __init__(self, source: str | os.PathLike[str] | bytes, *, media_type: str | None = None) -> None:
        self._data: bytes | None = None
        self._path: Path | None = None
        self._b64: str | None = None
        self._digest: str | None = None
        self._read = False
        self._blob: str | None = None  # a recorded value's blob file name, relative to the folder of its records
        self._size: int | None = None  # a recorded value's size, known without reading its blob file
        self.url: str | None = None
        """The URL the API fetches the value from (a URL source), or None."""
        self.title: str | None = None
        if isinstance(source, bytes | bytearray | memoryview):
            self._data = bytes(source)
            self._read = True
        elif isinstance(source, str) and re.match(r"https?://", source):
            self.url = source
        elif isinstance(source, str | os.PathLike):
            self._path = Path(source)
        else:
            raise InputError(
                f"{type(self).__name__}(...) takes a path, bytes or an http(s) URL, not {type(source).__name__}."
            )
        if media_type is not None and media_type not in self.accepted:
            raise InputError(
                f"{type(self).__name__}(media_type={media_type!r}): the API takes {', '.join(self.accepted)}."
            )
        self._media_type = media_type

    @classmethod
    def from_base64(cls, b64: str, *, media_type: str | None, where: str) -> Media:
        """The value a record keeps as base64 (its text kept, so it is not encoded again)."""
        try:
            data = base64.b64decode(b64, validate=True)
        except ValueError as e:
            raise InputError(f"{where}: the {cls.kind}'s bytes are not valid base64.") from e
        made = cls(data, media_type=media_type if media_type in cls.accepted else None)
        made._b64 = b64
        return made

    # --- reading and checking -----------------------------------------------------------------------------------

    def check(self, where: str) -> None:
        """Read the value and check it against the API's limits, or raise an `InputError` naming ``where``."""
        if self.url is not None:
            self._check_url(where)
            return
        data = self._bytes(where)
        media_type = self.media_type_at(where)
        found = sniffed_type(data)
        is_pdf = media_type == "application/pdf" and b"%PDF-" in data[:1024]  # a PDF may start after some bytes
        if media_type != "text/plain" and found != media_type and not is_pdf:
            # A suffix or media_type= does not make the bytes one: the API would refuse the block.
            raise InputError(
                f"{where}: the {self.kind} is given as {media_type}, but its bytes are {found or 'not one'}; the API "
                "refuses a block whose bytes are not its media type."
            )
        self._check_limits(data, media_type, where)

    def _check_url(self, where: str) -> None:
        assert self.url is not None
        try:
            parts = urlsplit(self.url)
            host = parts.hostname
        except ValueError as e:
            raise InputError(f"{where}: the URL {self._shown(self.url)!r} cannot be read ({e}).") from e
        if "@" in parts.netloc:  # never repeated: the password would be in the error
            raise InputError(
                f"{where}: the URL holds a user name or password; it would be sent to Anthropic, and kept in the "
                f"record and the notebook. Give the {self.kind}'s bytes instead."
            )
        if not host:
            raise InputError(f"{where}: the URL {self._shown(self.url)!r} has no host.")

    @staticmethod
    def _shown(text: str) -> str:
        """``text`` as an error may say it: scrubbed of secrets (a path or a URL may hold one)."""
        return scrub_text(text, secrets_from_environment())

    @classmethod
    def from_blob_file(
        cls, name: str, *, digest: str, media_type: str | None, folder: Path | None, size: int | None = None
    ) -> Media:
        """A recorded value kept in a blob file (``agl_blobs/<hex>.<ext>``), read when its bytes are first needed.

        The name must be a blob file's name (nothing that leads outside the folder); the bytes read must have the
        recorded digest. Its digest, media type and size are the record's, so writing the record again (a command
        that rewrites a notebook) never reads the file.
        """
        if not _BLOB_NAME.fullmatch(name) or f"sha256:{name.split('/')[1].split('.')[0]}" != digest:
            raise InputError(f"A record names the blob file {name!r}, which is not a blob file of the digest {digest}.")
        root = folder or records_folder.get() or Path.cwd()
        made = cls(root / name, media_type=media_type if media_type in cls.accepted else None)
        made._blob, made._digest, made._size = name, digest, size
        return made

    @property
    def blob_file(self) -> str | None:
        """The blob file a recorded value is read from, relative to its records' folder (None: not one)."""
        return self._blob

    def _bytes(self, where: str) -> bytes:
        if not self._read:
            assert self._path is not None
            if self._blob is not None:
                return self._blob_bytes()
            try:
                data = self._read_file(self.max_bytes, where)
            except (OSError, ValueError) as e:  # ValueError: a path with a NUL character in it
                reason = (e.strerror if isinstance(e, OSError) else str(e)) or type(e).__name__
                raise InputError(  # not chained: the OSError repeats the path, which may hold a secret
                    f"{where}: cannot read the {self.kind} at {self._shown(str(self._path))!r} ({reason})."
                ) from None
            if isinstance(data, int):
                raise self._too_large(data, where)
            self._data, self._read = data, True
        assert self._data is not None
        return self._data

    def _read_file(self, limit: int, where: str) -> bytes | int:
        """The file's bytes; for a file over ``limit`` bytes, only its size, its bytes never read.

        The cost is measured before it is paid: a path that is not a regular file (a FIFO, a device) is refused before
        it is opened, since reading one may never end.
        """
        assert self._path is not None
        info = self._path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{where}: {self._shown(str(self._path))!r} is not a regular file.")
        if info.st_size > limit:
            return info.st_size
        with self._path.open("rb") as file:
            data = file.read(limit + 1)  # one more: a file that grew since is seen to be over
        return len(data) if len(data) > limit else data

    def _too_large(self, size: int, where: str) -> InputError:
        raise NotImplementedError

    def _blob_bytes(self) -> bytes:
        assert self._path is not None
        assert self._digest is not None
        try:
            # The recorded size bounds the read: a larger file is not the recorded one.
            read = self._read_file(self._size or self.max_bytes, f"The blob file of the recorded {self.kind}")
        except OSError as e:
            raise InputError(
                f"The recorded {self.kind} {self._digest} is kept in the blob file {str(self._path)!r}, which cannot "
                f"be read ({e.strerror or type(e).__name__}): put the file back beside the notebook, or run the step "
                "in mode 'refresh' to record it again."
            ) from e
        if isinstance(read, int) or "sha256:" + hashlib.sha256(read).hexdigest() != self._digest:
            raise InputError(
                f"The blob file {str(self._path)!r} no longer holds the recorded {self.kind} {self._digest} (it was "
                "changed): put the recorded file back, or run the step in mode 'refresh' to record it again."
            )
        self._data, self._read = read, True
        return read

    def media_type_at(self, where: str) -> str:
        """The value's media type (declared, else from its bytes' signature, else from its path's suffix)."""
        if self._media_type is not None:
            return self._media_type
        data = self._bytes(where)
        found = sniffed_type(data)
        if found is None and self._path is not None:
            found = _PATH_TYPES.get(self._path.suffix.lower())
        if found is None or found not in self.accepted:
            said = found or "an unknown type"
            raise InputError(
                f"{where}: the {self.kind} is {said}; the API takes {', '.join(self.accepted)}"
                + (" (give media_type='text/plain' for text)." if self.kind == "document" else ".")
            )
        self._media_type = found
        return found

    def _check_limits(self, data: bytes, media_type: str, where: str) -> None:
        raise NotImplementedError

    @property
    def media_type(self) -> str | None:
        """The media type (None for a URL source, which the API reads)."""
        if self.url is not None:
            return self._media_type
        return self.media_type_at(type(self).__name__)

    @property
    def data(self) -> bytes:
        """The bytes (read on first use). A URL source has none."""
        if self.url is not None:
            raise InputError(
                f"{type(self).__name__}({self.url!r}) is a URL source: the API reads it, not this process."
            )
        return self._bytes(type(self).__name__)

    @property
    def size(self) -> int:
        """The number of bytes (0 for a URL source)."""
        if self._size is not None:
            return self._size
        return 0 if self.url is not None else len(self.data)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the bytes, or of the URL for a URL source: what the fingerprint covers."""
        if self._digest is None:
            raw = self.url.encode() if self.url is not None else self.data
            self._digest = "sha256:" + hashlib.sha256(raw).hexdigest()
            _KNOWN[self._digest] = self
        return self._digest

    @property
    def base64(self) -> str:
        """The bytes as base64, made once and kept."""
        if self._b64 is None:
            self._b64 = base64.b64encode(self.data).decode("ascii")
        return self._b64

    # --- JSON ------------------------------------------------------------------------------------------------------

    def reference(self) -> JsonObject:
        """What a record and the fingerprint keep of the value: its digest and type, or its URL."""
        if self.url is not None:
            return {self.kind: "url", "url": self.url}
        return {self.kind: self.digest, "media_type": self.media_type, "bytes": self.size}

    def block(self) -> JsonObject:
        """The Messages API content block (``ImageBlockParam`` or ``DocumentBlockParam``)."""
        media_type = self._media_type or self.media_type  # read once, then kept: every request asks
        if self.url is not None:
            source: JsonObject = {"type": "url", "url": self.url}
        elif media_type == "text/plain":
            source = {"type": "text", "media_type": "text/plain", "data": self.text}
        else:
            source = {"type": "base64", "media_type": media_type, "data": self._b64 or self.base64}
        block: JsonObject = {"type": self.kind, "source": source}
        if self.title:
            block["title"] = self.title
        return block

    @property
    def text(self) -> str:
        """A text document's text."""
        return self.data.decode("utf-8")

    @property
    def estimated_tokens(self) -> int:
        """What the value is estimated to cost in input tokens, before a request."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Media) and type(other) is type(self) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.digest))

    def __repr__(self) -> str:
        if self.url is not None:
            return f"{type(self).__name__}({self.url!r})"
        if self._path is not None:
            return f"{type(self).__name__}({str(self._path)!r})"
        return f"{type(self).__name__}(<{self.size} bytes, {self.digest[:19]}>)"


class Image(Media):
    """An image for the model: PNG, JPEG, GIF or WebP, from a path, bytes or an http(s) URL.

    Args:
        source: A path to the file, its bytes, or an ``http://``/``https://`` URL the API fetches.
        media_type: The media type, when the bytes' signature should not decide it.
    """

    kind = "image"
    accepted = IMAGE_MEDIA_TYPES
    max_bytes = IMAGE_MAX_FILE_BYTES
    __slots__ = ("_size_px",)

    def __init__(self, source: str | os.PathLike[str] | bytes, *, media_type: str | None = None) -> None:
        super().__init__(source, media_type=media_type)
        self._size_px: tuple[int, int] | None = None

    def _too_large(self, size: int, where: str) -> InputError:
        return InputError(
            f"{where}: the image is {size:,} bytes, {base64_size(size):,} as base64; the API refuses an image whose "
            f"base64 is over {IMAGE_MAX_BYTES:,} bytes (5 MB: a file of at most {IMAGE_MAX_FILE_BYTES:,} bytes). "
            "Scale or compress it first."
        )

    def _check_limits(self, data: bytes, media_type: str, where: str) -> None:
        if len(data) > IMAGE_MAX_FILE_BYTES:
            raise self._too_large(len(data), where)
        width, height = self.pixels_at(where)
        if max(width, height) > IMAGE_MAX_SIDE:
            raise InputError(
                f"{where}: the image is {width}x{height} px; the API refuses an image over {IMAGE_MAX_SIDE} px on a "
                "side. Scale it down first."
            )

    def pixels_at(self, where: str) -> tuple[int, int]:
        """The image's width and height in pixels, read from its header."""
        if self._size_px is None:
            found = image_size(self._bytes(where), self.media_type_at(where))
            if found is None:
                raise InputError(f"{where}: the image's {self.media_type_at(where)} header cannot be read.")
            self._size_px = found
        return self._size_px

    @property
    def pixels(self) -> tuple[int, int] | None:
        """Width and height in pixels (None for a URL source)."""
        return None if self.url is not None else self.pixels_at("Image")

    @property
    def estimated_tokens(self) -> int:
        """Anthropic's formula after the API's scaling: width * height / 750, at most about 1600 tokens."""
        if self.url is not None:
            return IMAGE_MAX_TOKENS  # unknown before the API fetches it: the most a scaled image costs
        width, height = self.pixels_at("Image")
        scale = min(1.0, IMAGE_SCALED_SIDE / max(width, height, 1))
        return min(IMAGE_MAX_TOKENS, math.ceil(width * scale * height * scale / PIXELS_PER_TOKEN))


class Document(Media):
    """A document for the model: a PDF, or plain text, from a path, bytes or an http(s) URL (a PDF).

    Args:
        source: A path to the file, its bytes, or an ``http://``/``https://`` URL of a PDF the API fetches.
        media_type: ``application/pdf`` or ``text/plain`` (a text file's bytes have no signature to read).
        title: The document's title, sent with it.
    """

    kind = "document"
    accepted = DOCUMENT_MEDIA_TYPES
    max_bytes = DOCUMENT_MAX_BYTES
    __slots__ = ("_pages",)

    def __init__(
        self,
        source: str | os.PathLike[str] | bytes,
        *,
        media_type: str | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__(source, media_type=media_type)
        self.title = title
        self._pages: int | None = None

    @classmethod
    def from_recorded_text(cls, text: str, *, digest: str, size: int | None) -> Document:
        """A text document a record keeps as text, scrubbed of secrets, named by the record's digest and size.

        Those are of the text as it was sent, so the document is drawn as it was drawn live, and written again under
        the same digest, although a secret was scrubbed out of the text.
        """
        made = cls(text.encode("utf-8"), media_type="text/plain")
        made._digest = digest
        made._size = size if size is not None and size >= 0 else None
        return made

    def _too_large(self, size: int, where: str) -> InputError:
        return InputError(
            f"{where}: the document is {size:,} bytes; a request holds at most {DOCUMENT_MAX_BYTES:,} bytes "
            "(32 MB). Split it first."
        )

    def _check_limits(self, data: bytes, media_type: str, where: str) -> None:
        if len(data) > DOCUMENT_MAX_BYTES:
            raise self._too_large(len(data), where)
        if media_type == "application/pdf" and base64_size(len(data)) > DOCUMENT_MAX_BYTES:  # a PDF is sent as base64
            raise InputError(
                f"{where}: the document is {len(data):,} bytes, {base64_size(len(data)):,} as base64; a request holds "
                f"at most {DOCUMENT_MAX_BYTES:,} bytes (32 MB: a PDF of at most 24 MB). Split it first."
            )
        if media_type == "text/plain":
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{where}: the text document is not UTF-8 ({e.reason} at byte {e.start}).") from e
            return
        pages = self.pages_at(where)
        if pages > PDF_MAX_PAGES:
            raise InputError(
                f"{where}: the PDF has {pages} pages; the API refuses a PDF of more than {PDF_MAX_PAGES}. "
                "Split it first."
            )

    def pages_at(self, where: str) -> int:
        """A PDF's page count, from its page objects (at least 1); 0 for a text document."""
        if self._pages is None:
            if self.media_type_at(where) != "application/pdf":
                self._pages = 0
            else:
                self._pages = max(1, len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", self._bytes(where))))
        return self._pages

    @property
    def pages(self) -> int | None:
        """A PDF's page count (None for a URL source; 0 for text)."""
        return None if self.url is not None else self.pages_at("Document")

    @property
    def estimated_tokens(self) -> int:
        """A PDF by pages (`TOKENS_PER_PDF_PAGE` each), text at four characters a token."""
        if self.url is not None:
            return PDF_MAX_PAGES * TOKENS_PER_PDF_PAGE
        if self.media_type == "text/plain":
            return math.ceil(len(self.text) / 4)
        return self.pages_at("Document") * TOKENS_PER_PDF_PAGE


def base64_size(size: int) -> int:
    """The length of the base64 of ``size`` bytes (what the API measures of a base64 source)."""
    return 4 * math.ceil(size / 3)


def image_size(data: bytes, media_type: str) -> tuple[int, int] | None:
    """Width and height from an image's header (PNG, GIF, WebP, JPEG), or None when it cannot be read."""
    try:
        if media_type == "image/png" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if media_type == "image/gif":
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if media_type == "image/webp":
            return _webp_size(data)
        if media_type == "image/jpeg":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


def media_in(value: object, where: str) -> list[tuple[str, Media]]:
    """Every `Media` inside a payload value, with its field path (``Photo.image``, ``Album.pages[2]``), in order."""
    found: list[tuple[str, Media]] = []
    _walk(value, where, found)
    return found


def _walk(value: object, path: str, found: list[tuple[str, Media]]) -> None:
    # A module-level function, not a closure that calls itself: that would be a reference cycle every step.
    import dataclasses

    if isinstance(value, Media):
        found.append((path, value))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), f"{path}.{f.name}", found)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", found)


def check_media(value: object, where: str) -> list[tuple[str, Media]]:
    """Check every `Media` inside ``value`` before any request, each error naming its field; return them."""
    found = media_in(value, where)
    for path, media in found:
        media.check(path)
    images = [m for _, m in found if isinstance(m, Image) and m.url is None]
    if len(images) > MANY_IMAGES:
        for path, media in found:
            if isinstance(media, Image) and media.url is None:
                width, height = media.pixels_at(path)
                if max(width, height) > IMAGE_MAX_SIDE_MANY:
                    raise InputError(
                        f"{path}: the image is {width}x{height} px; with more than {MANY_IMAGES} images in one request "
                        f"the API refuses an image over {IMAGE_MAX_SIDE_MANY} px on a side."
                    )
    return found


def labelled_json(value: object, labels: dict[int, str]) -> JsonValue:
    """The JSON of a payload as the model reads it: each `Media` (by ``id``) as its label, the rest as `dump` makes."""
    import dataclasses

    if isinstance(value, Media):
        return labels[id(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: labelled_json(getattr(value, f.name), labels) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [labelled_json(v, labels) for v in value]
    return dump(value)
