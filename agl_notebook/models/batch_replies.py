"""What comes back from the Message Batches API, in the package's terms: a poll's `BatchStatus`, a reply's events.

A batch's reply is a whole ``Message``; `message_events` turns it into the events the live stream of the same reply
gives (the text of each text block, each tool call, each other block whole as a `RawBlock` after its thinking text,
the stop reason and usage), so the loop cannot tell them apart.
`batch_statuses` and `cancel_batches` tell and cancel the batches of an engine's saved state (what
``agl-notebook batches list | cancel`` shows for a notebook).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, get_args

from ..errors import UpstreamUnexpected
from ..payloads import JsonObject, JsonValue
from ..transcript import RawBlock
from .anthropic import server_tool_counts
from .base import Cited, ModelEvent, StopReason, TextDelta, ThinkingDelta, ToolCall, TurnEnd, Usage
from .batch_state import BatchState

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types.messages import MessageBatch

__all__ = ["BatchStatus", "batch_statuses", "cancel_batches", "message_events", "status_of"]

_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """What one poll of a batch said (for a view of the engine's batches)."""

    batch_id: str
    """The API's batch id."""
    wave: int
    """The wave the batch carries (1 for the first request of each step, ...)."""
    processing_status: str
    """``in_progress``, ``canceling`` or ``ended``."""
    request_counts: dict[str, int]
    """The API's tallies: ``processing``, ``succeeded``, ``errored``, ``canceled``, ``expired``."""
    created_at: str
    """When the batch was created (RFC 3339)."""
    expires_at: str
    """When it expires, 24 hours after creation (RFC 3339)."""
    ended_at: str | None = None
    """When its processing ended, once it has."""


def status_of(batch: MessageBatch, wave: int) -> BatchStatus:
    """The status one poll of ``batch`` (carrying ``wave``) tells."""
    counts = batch.request_counts
    return BatchStatus(
        batch.id,
        wave,
        batch.processing_status,
        {
            "processing": counts.processing,
            "succeeded": counts.succeeded,
            "errored": counts.errored,
            "canceled": counts.canceled,
            "expired": counts.expired,
        },
        batch.created_at.isoformat(),
        batch.expires_at.isoformat(),
        batch.ended_at.isoformat() if batch.ended_at is not None else None,
    )


def message_events(message: JsonValue) -> list[ModelEvent]:
    """The model events of a whole reply (the ``Message`` of a results line, as JSON), as its live stream gives them.

    A block neither text nor a tool call (thinking, redacted thinking, any type this version does not read) is a
    `RawBlock` holding its JSON as the line had it, keys in their order; a thinking block's text comes first as a
    `ThinkingDelta`, as a live stream draws it.

    The results are read as JSON, not as the SDK's models: building those cost some 0.15 ms a line, most of a
    batch map's reading of its results.

    Raises:
        UpstreamUnexpected: The reply is not a message, a block is malformed, a tool call's input is not an object,
            or the stop reason is missing or unknown.
    """
    if not isinstance(message, dict):
        raise UpstreamUnexpected(f"A batch result's message is not an object: {type(message).__name__}.")
    message_id = message.get("id")
    content = message.get("content")
    if not isinstance(content, list):
        raise UpstreamUnexpected(f"The batch reply {message_id} has no list of content blocks.")
    events: list[ModelEvent] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            text = block.get("text")  # type: ignore[union-attr]
            if not isinstance(text, str):
                raise UpstreamUnexpected(f"The batch reply {message_id} has a text block with no text.")
            if text:
                events.append(TextDelta(text))
            cited = block.get("citations")  # type: ignore[union-attr]
            if isinstance(cited, list) and cited:
                events.append(Cited(text, tuple(c for c in cited if isinstance(c, dict))))
        elif kind == "tool_use":
            tool_id, name, tool_input = (block.get(k) for k in ("id", "name", "input"))  # type: ignore[union-attr]
            if not isinstance(tool_id, str) or not isinstance(name, str):
                raise UpstreamUnexpected(f"The batch reply {message_id} has a tool call with no id or name.")
            if not isinstance(tool_input, dict):
                raise UpstreamUnexpected(f"The model's call to tool {name!r} has input that is not an object.")
            events.append(ToolCall(tool_id, name, tool_input))
        elif not isinstance(kind, str) or not kind:
            raise UpstreamUnexpected(f"The batch reply {message_id} has a content block with no type.")
        else:
            # Thinking, redacted thinking, a type not read here: kept whole as the API sent it, to be sent back
            # unchanged on the next turn (the API checks a thinking block's signature against its text).
            kept = RawBlock(cast(JsonObject, block))
            thought = kept.thinking
            if thought:
                events.append(ThinkingDelta(thought))
            events.append(kept)
    stop = message.get("stop_reason")
    if not isinstance(stop, str) or stop not in _STOP_REASONS:
        raise UpstreamUnexpected(f"The batch reply {message_id} ended with an unknown stop reason {stop!r}.")
    usage = message.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    # What was written for an hour is billed at its own rate, as the live stream's usage tells it (docs/cost.md).
    creation = usage.get("cache_creation")
    one_hour = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else None
    counts = server_tool_counts(usage)
    container = message.get("container")
    events.append(
        TurnEnd(
            cast(StopReason, stop),
            Usage(
                _tokens(usage, "input_tokens"),
                _tokens(usage, "output_tokens"),
                _tokens(usage, "cache_creation_input_tokens"),
                _tokens(usage, "cache_read_input_tokens"),
                one_hour if isinstance(one_hour, int) and not isinstance(one_hour, bool) else 0,
                counts.get("web_search_requests", 0),
                counts.get("web_fetch_requests", 0),
            ),
            str(container["id"]) if isinstance(container, dict) and isinstance(container.get("id"), str) else None,
        )
    )
    return events


def _tokens(usage: JsonObject, name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


async def batch_statuses(client: AsyncAnthropic, state: JsonValue) -> list[BatchStatus]:
    """The status of every batch of an engine's saved ``state``, as the API tells it now, in the order created.

    Raises:
        InputError: ``state`` is not an engine's state.
        anthropic.APIStatusError: The API refused to tell (a batch of another workspace is a ``NotFoundError``).
    """
    known = BatchState.from_json(state).batches
    return [status_of(await client.messages.batches.retrieve(b.id), b.wave) for b in known]


async def cancel_batches(client: AsyncAnthropic, state: JsonValue) -> list[BatchStatus]:
    """Cancel every batch of ``state`` still in progress; the statuses of those canceled (``canceling``).

    A canceled batch ends with its unfinished requests ``canceled``; an engine re-attaching to it sends them again in
    its next wave (up to its ``retries``), or live with ``on_expired="live"``.
    """
    canceled: list[BatchStatus] = []
    for known in BatchState.from_json(state).batches:
        batch = await client.messages.batches.retrieve(known.id)
        if batch.processing_status == "in_progress":
            canceled.append(status_of(await client.messages.batches.cancel(known.id), known.wave))
    return canceled
