"""The transcript of a step: messages made of text, tool_use and tool_result blocks, and blocks kept as received.

The shape is the Anthropic Messages API's on purpose: it is what every backend is sent (the whole history each
turn, no server-held threads), what a record stores, and what `RoleIncompleteError` carries. Every tool_use block
of an assistant message is answered by a tool_result block with the same id in the next user message.

Any other block of a reply (thinking, redacted thinking, a block type this version does not know) is a `RawBlock`:
its JSON exactly as the API sent it, sent back unchanged on every later turn (the API refuses thinking whose
signature does not match), kept in records as it is, and read back as it is.

An image or a document (`agl_notebook.media`) is a `MediaBlock`: in a user message beside the input's JSON, or inside a
tool_result beside its text (`ToolText`). The API is sent its bytes as base64 (or its URL); a record keeps a reference
to its digest and the bytes once, in the record's ``blobs`` (`messages_to_json` with ``blobs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from ._families import InputError
from ._fieldwise import Fieldwise
from .media import Document, Image, Media, blob_file_name, kept_in_file
from .payloads import JsonObject, JsonValue


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TextBlock(Fieldwise):
    """Text written by the model or sent to it."""

    text: str
    """The text."""
    type: Literal["text"] = "text"
    citations: tuple[JsonObject, ...] = ()
    """The sources this text cites, each as the API sent it (``web_search_result_location``, ``char_location``,
    ``page_location``, ...); sent back and recorded only when there are some."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolUseBlock(Fieldwise):
    """A tool call written by the model."""

    id: str
    """The call's id; its result carries the same id."""
    name: str
    """The tool the model called."""
    input: JsonObject
    """The arguments, as the model wrote them."""
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolResultBlock(Fieldwise):
    """What a tool call returned, sent back to the model."""

    tool_use_id: str
    """The id of the call this answers."""
    content: str
    """What the model reads back."""
    is_error: bool = False
    """True when the call failed, was rejected, or was not run."""
    type: Literal["tool_result"] = "tool_result"
    media: tuple[Media, ...] = ()
    """The images (or documents) the tool returned beside its text, sent inside the tool_result."""


class ToolText(str):
    """A tool result's text that carries the images a handler returned beside it.

    Every path that passes a result's text on (a live handler, a replayed or resumed result, a denial) passes this
    string unchanged, so the images reach the tool_result block without a second channel.
    """

    __slots__ = ("media",)
    media: tuple[Media, ...]

    def __new__(cls, text: str, media: tuple[Media, ...] = ()) -> ToolText:
        """The text ``text`` carrying ``media``."""
        made = super().__new__(cls, text)
        made.media = tuple(media)
        return made


def result_text(block: ToolResultBlock) -> str:
    """A recorded result's text, carrying its images (`ToolText`) when it has any: what a replay answers with."""
    return ToolText(block.content, block.media) if block.media else block.content


def media_of(text: str) -> tuple[Media, ...]:
    """The images a tool result's text carries (`ToolText`), if any."""
    return text.media if isinstance(text, ToolText) else ()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MediaBlock(Fieldwise):
    """An image or a document sent to the model (`agl_notebook.media`)."""

    media: Media
    """The value: its bytes (read once, base64 made once) or its URL."""
    label: str = ""
    """What the JSON beside it calls it (``Photo.image``): the text block before it says so."""

    @property
    def type(self) -> str:
        """``image`` or ``document``."""
        return self.media.kind


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RawBlock(Fieldwise):
    """A block of a reply kept exactly as the API sent it, and sent back unchanged.

    Thinking (``{"type": "thinking", "thinking": ..., "signature": ...}``), redacted thinking
    (``{"type": "redacted_thinking", "data": ...}``) and every block type this version does not read are kept so:
    their opaque fields (signatures, encrypted data) are never changed, cut or scrubbed. Never mutate ``data``.
    """

    data: JsonObject
    """The block's JSON as received, ``type`` included."""

    @property
    def type(self) -> str:
        """The block's ``type`` (``thinking``, ``redacted_thinking``, ...)."""
        kind = self.data.get("type")
        return kind if isinstance(kind, str) else ""

    @property
    def thinking(self) -> str | None:
        """The readable thinking text of a thinking block ("" when the API omitted it), else None."""
        if self.type != "thinking":
            return None
        text = self.data.get("thinking")
        return text if isinstance(text, str) else ""


THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
"""The block types that are the model's thinking."""


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock | RawBlock | MediaBlock


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Message(Fieldwise):
    """One message of the conversation."""

    role: Literal["user", "assistant"]
    """Who wrote it."""
    content: tuple[Block, ...]
    """Its blocks, in order."""

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls in this message, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def text(self) -> str:
        """The message's text blocks joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def raw_blocks(self) -> tuple[RawBlock, ...]:
        """The blocks kept as received (thinking and the rest), in order."""
        return tuple(b for b in self.content if isinstance(b, RawBlock))


def user_text(text: str) -> Message:
    """A user message holding one text block."""
    return Message("user", (TextBlock(text),))


def block_to_json(block: Block, blobs: dict[str, JsonValue] | None = None) -> JsonObject:
    """The Messages API JSON of a block (a `RawBlock`'s own JSON, as received: the same object, not a copy).

    ``blobs``: write a record's JSON instead, each image or document a reference to its digest, its base64 put in
    ``blobs`` once.
    """
    if isinstance(block, RawBlock):
        return block.data
    if isinstance(block, TextBlock):
        if block.citations:
            return {"type": "text", "text": block.text, "citations": list(block.citations)}
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, MediaBlock):
        return _media_json(block.media, blobs)
    content: JsonValue = block.content
    if block.media:
        content = [{"type": "text", "text": block.content}] if block.content else []
        content.extend(_media_json(m, blobs) for m in block.media)
    result: JsonObject = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content}
    if block.is_error:
        result["is_error"] = True
    return result


def _media_json(media: Media, blobs: dict[str, JsonValue] | None) -> JsonObject:
    if blobs is None or media.url is not None:
        return media.block()
    if media.digest not in blobs:
        # A large value is named, not held: its bytes are in a blob file beside the notebook (`write_blob_file`).
        kept: JsonValue = None
        if media.blob_file is not None:  # read from a blob file: named again as it was, the file never read
            kept = {"file": media.blob_file, "bytes": media.size}
        elif media.media_type == "text/plain":  # as text, so the record's scrubbing reads it like any other text
            kept = {"text": media.text, "bytes": media.size}  # the size sent: the text may lose a secret
        elif kept_in_file(media):
            kept = {"file": blob_file_name(media), "bytes": media.size}
        else:
            kept = media.base64
        blobs[media.digest] = kept
    block: JsonObject = {
        "type": media.kind,
        "source": {"type": "blob", "digest": media.digest, "media_type": media.media_type},
    }
    if media.title:
        block["title"] = media.title
    return block


def message_to_json(message: Message, blobs: dict[str, JsonValue] | None = None) -> JsonObject:
    """The Messages API JSON of a message (a record's, with ``blobs``: `block_to_json`)."""
    return {"role": message.role, "content": [block_to_json(b, blobs) for b in message.content]}


def messages_to_json(
    messages: tuple[Message, ...] | list[Message], blobs: dict[str, JsonValue] | None = None
) -> list[JsonValue]:
    """The Messages API JSON of a conversation (a record's, with ``blobs``: `block_to_json`)."""
    return [message_to_json(m, blobs) for m in messages]


def message_from_json(
    data: JsonValue,
    *,
    where: str = "message",
    blobs: Mapping[str, JsonValue] | None = None,
    folder: Path | None = None,
) -> Message:
    """Read a message back from its JSON, with an `InputError` naming what is wrong.

    ``blobs``: a record's blobs by digest, which its images' and documents' references name; ``folder``: where
    its blob files are (None: the working folder, a kernel's being its notebook's).
    """
    if not isinstance(data, dict) or data.get("role") not in ("user", "assistant"):
        raise InputError(f"{where}: expected an object with role 'user' or 'assistant'.")
    content = data.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InputError(f"{where}.content: expected a list of blocks.")
    role: Literal["user", "assistant"] = "user" if data["role"] == "user" else "assistant"
    return Message(
        role, tuple(_block_from_json(b, f"{where}.content[{i}]", blobs, folder) for i, b in enumerate(content))
    )


def _block_from_json(
    data: JsonValue, where: str, blobs: Mapping[str, JsonValue] | None = None, folder: Path | None = None
) -> Block:
    if isinstance(data, dict):
        kind = data.get("type")
        if kind in ("image", "document") and isinstance(data.get("source"), dict):
            return MediaBlock(_media_from_json(data, where, blobs, folder))
        if kind == "text" and isinstance(data.get("text"), str):
            cited = data.get("citations")
            if isinstance(cited, list) and cited:
                if not all(isinstance(c, dict) for c in cited):
                    raise InputError(f"{where}.citations: expected a list of objects.")
                return TextBlock(str(data["text"]), citations=tuple(c for c in cited if isinstance(c, dict)))
            return TextBlock(str(data["text"]))
        tool_input = data.get("input")
        if (
            kind == "tool_use"
            and isinstance(data.get("id"), str)
            and isinstance(data.get("name"), str)
            and isinstance(tool_input, dict)
        ):
            return ToolUseBlock(str(data["id"]), str(data["name"]), tool_input)
        if kind == "tool_result" and isinstance(data.get("tool_use_id"), str) and isinstance(data.get("content"), str):
            return ToolResultBlock(str(data["tool_use_id"]), str(data["content"]), data.get("is_error") is True)
        listed = data.get("content")
        if kind == "tool_result" and isinstance(data.get("tool_use_id"), str) and isinstance(listed, list):
            parts = [_block_from_json(b, f"{where}.content[{i}]", blobs, folder) for i, b in enumerate(listed)]
            text = "".join(p.text for p in parts if isinstance(p, TextBlock))
            media = tuple(p.media for p in parts if isinstance(p, MediaBlock))
            return ToolResultBlock(str(data["tool_use_id"]), text, data.get("is_error") is True, media=media)
        if isinstance(kind, str) and kind and kind not in _READ_TYPES:
            return RawBlock(data)  # kept as it came: thinking, and any block type this version does not read
    raise InputError(f"{where}: not a text, tool_use or tool_result block, nor a block of another type kept as is.")


_READ_TYPES = frozenset({"text", "tool_use", "tool_result"})


def _media_from_json(data: JsonObject, where: str, blobs: Mapping[str, JsonValue] | None, folder: Path | None) -> Media:
    make = Image if data.get("type") == "image" else Document
    source = data["source"]
    assert isinstance(source, dict)
    title = data.get("title")
    kind, media_type = source.get("type"), source.get("media_type")
    media_type = media_type if isinstance(media_type, str) else None
    made: Media
    if kind == "url" and isinstance(source.get("url"), str):
        made = make(str(source["url"]))
    elif kind == "text" and isinstance(source.get("data"), str):
        made = Document(str(source["data"]).encode("utf-8"), media_type="text/plain")
    elif kind == "blob" and isinstance(kept := (blobs or {}).get(str(source.get("digest"))), dict):
        if isinstance(kept.get("text"), str):
            size = kept.get("bytes")
            made = Document.from_recorded_text(
                str(kept["text"]),
                digest=str(source.get("digest")),
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            )
            made.title = title if isinstance(title, str) else None
            return made
        name = kept.get("file")
        if not isinstance(name, str):
            raise InputError(f"{where}: the record's blob {source.get('digest')} names no file.")
        size = kept.get("bytes")
        made = make.from_blob_file(
            name,
            digest=str(source.get("digest")),
            media_type=media_type,
            folder=folder,
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )
    elif kind in ("base64", "blob"):
        b64 = source.get("data") if kind == "base64" else (blobs or {}).get(str(source.get("digest")))
        if not isinstance(b64, str):
            raise InputError(
                f"{where}: the {data.get('type')}'s bytes ({source.get('digest')}) are not among the record's blobs."
            )
        made = make.from_base64(b64, media_type=media_type, where=where)
    else:
        raise InputError(f"{where}.source: expected a base64, blob, text or url source.")
    if isinstance(made, Document) and isinstance(title, str):
        made.title = title
    return made
