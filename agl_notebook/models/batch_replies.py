"""What comes back from the Message Batches API, in the package's terms: a poll's `BatchStatus`, a reply's events.

A batch's reply is a whole ``Message``; `message_events` turns it into the events the live stream of the same reply
gives (the text of each text block, each tool call, the stop reason and usage), so the loop cannot tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, get_args

from ..errors import UpstreamUnexpected
from ..payloads import JsonObject
from .base import ModelEvent, StopReason, TextDelta, ToolCall, TurnEnd, Usage

if TYPE_CHECKING:
    from anthropic.types import Message
    from anthropic.types.messages import MessageBatch

__all__ = ["BatchStatus", "message_events", "status_of"]

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


def message_events(message: Message) -> list[ModelEvent]:
    """The model events of a whole reply, as the live stream of the same reply gives them.

    Raises:
        UpstreamUnexpected: A tool call's input is not an object, or the stop reason is missing or unknown.
    """
    events: list[ModelEvent] = []
    for block in message.content:
        if block.type == "text":
            if block.text:
                events.append(TextDelta(block.text))
        elif block.type == "tool_use":
            if not isinstance(block.input, dict):
                raise UpstreamUnexpected(f"The model's call to tool {block.name!r} has input that is not an object.")
            events.append(ToolCall(block.id, block.name, cast(JsonObject, dict(block.input))))
    stop = message.stop_reason
    if stop is None or stop not in _STOP_REASONS:
        raise UpstreamUnexpected(f"The batch reply {message.id} ended with an unknown stop reason {stop!r}.")
    usage = message.usage
    events.append(
        TurnEnd(
            stop,
            Usage(
                usage.input_tokens or 0,
                usage.output_tokens or 0,
                usage.cache_creation_input_tokens or 0,
                usage.cache_read_input_tokens or 0,
            ),
        )
    )
    return events
