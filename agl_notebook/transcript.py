"""The transcript of a step: messages made of text, tool_use and tool_result blocks, and blocks kept as received.

The shape is the Anthropic Messages API's on purpose: it is what every backend is sent (the whole history each
turn, no server-held threads), what a record stores, and what `RoleIncompleteError` carries. Every tool_use block
of an assistant message is answered by a tool_result block with the same id in the next user message.

Any other block of a reply (thinking, redacted thinking, a block type this version does not know) is a `RawBlock`:
its JSON exactly as the API sent it, sent back unchanged on every later turn (the API refuses thinking whose
signature does not match), kept in records as it is, and read back as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._families import InputError
from ._fieldwise import Fieldwise
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


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock | RawBlock


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


def block_to_json(block: Block) -> JsonObject:
    """The Messages API JSON of a block (a `RawBlock`'s own JSON, as received: the same object, not a copy)."""
    if isinstance(block, RawBlock):
        return block.data
    if isinstance(block, TextBlock):
        if block.citations:
            return {"type": "text", "text": block.text, "citations": list(block.citations)}
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    result: JsonObject = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content}
    if block.is_error:
        result["is_error"] = True
    return result


def message_to_json(message: Message) -> JsonObject:
    """The Messages API JSON of a message."""
    return {"role": message.role, "content": [block_to_json(b) for b in message.content]}


def messages_to_json(messages: tuple[Message, ...] | list[Message]) -> list[JsonValue]:
    """The Messages API JSON of a conversation."""
    return [message_to_json(m) for m in messages]


def message_from_json(data: JsonValue, *, where: str = "message") -> Message:
    """Read a message back from its JSON, with an `InputError` naming what is wrong."""
    if not isinstance(data, dict) or data.get("role") not in ("user", "assistant"):
        raise InputError(f"{where}: expected an object with role 'user' or 'assistant'.")
    content = data.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InputError(f"{where}.content: expected a list of blocks.")
    role: Literal["user", "assistant"] = "user" if data["role"] == "user" else "assistant"
    return Message(role, tuple(_block_from_json(b, f"{where}.content[{i}]") for i, b in enumerate(content)))


def _block_from_json(data: JsonValue, where: str) -> Block:
    if isinstance(data, dict):
        kind = data.get("type")
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
        if isinstance(kind, str) and kind and kind not in _READ_TYPES:
            return RawBlock(data)  # kept as it came: thinking, and any block type this version does not read
    raise InputError(f"{where}: not a text, tool_use or tool_result block, nor a block of another type kept as is.")


_READ_TYPES = frozenset({"text", "tool_use", "tool_result"})
