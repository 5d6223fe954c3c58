"""What comes back from the Message Batches API, in the package's terms: a poll's `BatchStatus`, a reply's events.

A batch's reply is a whole ``Message``; `message_events` turns it into the events the live stream of the same reply
gives (the text of each text block, each tool call, the stop reason and usage), so the loop cannot tell them apart.
`batch_statuses` and `cancel_batches` tell and cancel the batches of an engine's saved state (what
``agl-notebook batches list | cancel`` shows for a notebook).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, get_args

from ..errors import UpstreamUnexpected
from ..payloads import JsonObject, JsonValue
from .base import ModelEvent, StopReason, TextDelta, ToolCall, TurnEnd, Usage
from .batch_state import BatchState

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message
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
    # What was written for an hour is billed at its own rate, as the live stream's usage tells it (docs/cost.md).
    one_hour = getattr(usage.cache_creation, "ephemeral_1h_input_tokens", None)
    events.append(
        TurnEnd(
            stop,
            Usage(
                usage.input_tokens or 0,
                usage.output_tokens or 0,
                usage.cache_creation_input_tokens or 0,
                usage.cache_read_input_tokens or 0,
                one_hour if isinstance(one_hour, int) else 0,
            ),
        )
    )
    return events


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
