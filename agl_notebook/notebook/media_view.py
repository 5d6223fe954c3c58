"""How a step's view draws an image or a document: a thumbnail, a chip, or a placeholder over the cap.

A thumbnail is the original bytes as a ``data:`` URI scaled by CSS (``max-width``/``max-height``): nothing is
decoded or encoded again, so a replay draws the same bytes and the same HTML. An image over `THUMBNAIL_BYTES`, or
one whose bytes this process does not hold (a URL source, which the view never fetches), is a placeholder saying
its media type, size and digest; a document is a chip (PDF and pages, or text, its size and title). Every text in
it (a URL, a title) is scrubbed, then escaped. The saved notebook so grows by at most `THUMBNAIL_BYTES` (as base64,
four thirds of it) per image drawn.
"""

from __future__ import annotations

import html

from .._view_values import escaped
from ..errors import InputError
from ..media import Document, Image, Media, known
from ..payloads import JsonObject, JsonValue

THUMBNAIL_BYTES = 64 * 1024
"""The most bytes of an image drawn as a thumbnail; a larger one is a placeholder with its size and digest."""

_THUMB = "max-width:160px;max-height:120px;object-fit:contain;border:1px solid rgba(127,127,127,0.45);border-radius:3px"
_CHIP = "display:inline-block;background:rgba(127,127,127,0.16);padding:1px 6px;border-radius:3px;margin:2px 4px 2px 0"
_FIGURE = "display:inline-block;margin:2px 6px 2px 0;vertical-align:top;font-size:11px"


def media_html(media: Media, secrets: tuple[str, ...]) -> str:
    """One image's thumbnail (or placeholder), or one document's chip."""
    if isinstance(media, Document):
        return f'<span class="agl-doc" style="{_CHIP}">{escaped(document_words(media), secrets)}</span>'
    words = escaped(image_words(media), secrets)
    if media.url is not None or media.size > THUMBNAIL_BYTES:
        return f'<span class="agl-image-placeholder" style="{_CHIP}">{words}</span>'
    try:  # a recorded image in a blob file (over 32 KB) is drawn as it was live: its file is read
        data = media.base64
        media_type = media.media_type
        if isinstance(media, Image):
            media.pixels_at("Image")  # a record's bytes that are no image of their type are not drawn as one
    except InputError:  # its blob file is missing, or its bytes are no image: the words say so
        return f'<span class="agl-image-placeholder" style="{_CHIP}">{words}</span>'
    return (
        f'<figure class="agl-thumb" style="{_FIGURE}"><img src="data:{media_type};base64,{data}" '
        f'alt="{words}" title="{words}" style="{_THUMB}"><figcaption>{words}</figcaption></figure>'
    )


def image_words(media: Media) -> str:
    """What the view says of an image: its type, pixels, size and digest, or its URL (deterministic)."""
    if media.url is not None:
        return f"image at {media.url}"
    try:
        media_type = media.media_type
        pixels = media.pixels if isinstance(media, Image) else None
    except InputError:  # the placeholder says why, the view stands
        if media.blob_file is not None:  # a recorded image whose blob file is missing
            said = _recorded_type(media)
            return f"{said}, {media.size:,} bytes, {media.digest[:19]}, its blob file {media.blob_file} missing"
        # A record's bytes that are no image of a type the API takes (a record is data anyone may have written).
        return f"{media.size:,} bytes that cannot be read as an image, {media.digest[:19]}"
    size = f"{pixels[0]}x{pixels[1]} px, " if pixels else ""
    over = f", over the {THUMBNAIL_BYTES // 1024} KB view cap" if media.size > THUMBNAIL_BYTES else ""
    return f"{media_type}, {size}{media.size:,} bytes, {media.digest[:19]}{over}"


def _recorded_type(media: Media) -> str:
    """The media type a record gives, without reading the bytes (a missing blob file's), else the kind."""
    try:
        return media.media_type or media.kind
    except InputError:  # no type recorded: it would be read from the bytes, which are missing
        return media.kind


def document_words(media: Media) -> str:
    """What the view says of a document: PDF and its pages, or text; its size, digest and title."""
    title = f"{media.title}: " if media.title else ""
    if media.url is not None:
        return f"document {title}at {media.url}"
    try:
        pages = media.pages if isinstance(media, Document) and media.media_type == "application/pdf" else None
        kind = f"PDF, {pages} pages" if pages is not None else "text"
    except InputError:  # the chip says why, the view stands
        if media.blob_file is not None:  # a recorded PDF whose blob file is missing
            kind = f"PDF, its blob file {media.blob_file} missing"
        else:  # a record's bytes that are no document of a type the API takes
            kind = "bytes that cannot be read as a document"
    return f"{title}{kind}, {media.size:,} bytes, {media.digest[:19]}"


def reference_html(reference: JsonObject, secrets: tuple[str, ...]) -> str:
    """What a record's reference draws: the value when this process holds its bytes, else a placeholder."""
    kind = "image" if "image" in reference else "document"
    digest = reference.get(kind)
    if reference.get(kind) == "url":
        url = str(reference.get("url", ""))
        return f'<span style="{_CHIP}">{escaped(f"{kind} at {url}", secrets)}</span>'
    held = known(digest) if isinstance(digest, str) else None
    if held is not None:
        return media_html(held, secrets)
    size = reference.get("bytes")
    words = (
        f"{kind}: {reference.get('media_type')}, {size:,} bytes, {str(digest)[:19]}" if isinstance(size, int) else kind
    )
    return f'<span class="agl-image-placeholder" style="{_CHIP}">{html.escape(words)}</span>'


def references_in(value: JsonValue) -> list[JsonObject]:
    """The image and document references inside a payload's JSON (`agl_notebook.media.Media.reference`), in order."""
    found: list[JsonObject] = []
    _walk(value, found)
    return found


def _walk(value: JsonValue, found: list[JsonObject]) -> None:
    # A module-level function, not a closure that calls itself: that would be a reference cycle every drawing.
    if isinstance(value, dict):
        if _is_reference(value):
            found.append(value)
            return
        for item in value.values():
            _walk(item, found)
    elif isinstance(value, list):
        for item in value:
            _walk(item, found)


def _is_reference(v: JsonObject) -> bool:
    keys = set(v)
    return keys in ({"image", "media_type", "bytes"}, {"document", "media_type", "bytes"}) or keys in (
        {"image", "url"},
        {"document", "url"},
    )
