"""The tape: every effect of one top-level call, in the order it happened, so the call can replay without them.

A call is deterministic given its effects: the model's replies, the API responses and the person's answers. Live,
each effect is appended to the tape as JSON (its ``key``, a digest of what was asked, and what came back, or the
error that came instead); replaying, the interpreter runs again and each effect is taken from the tape in order,
after checking that the same thing is being asked. So a replayed call emits the same events and returns the same
result, and reaches no model, no server and no person. Nothing secret is ever put on a tape: API requests are keyed
by their public part, and responses are scrubbed of the profile's secrets before they are kept.

The tape is what `Run.unit` records for a unit of work (see `agl_notebook.functions.interpreter`). It is bounded
as a whole (`MAX_TAPE_BYTES` of JSON, ``load_agent(..., max_recording_bytes=...)``): an API response that would
pass the bound is kept as the error it becomes instead, so the call replays the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._canonical import digest
from .._secrets import scrub
from ..errors import ReplayMissError
from ..models.base import (
    Cited,
    Model,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    TurnEnd,
    Usage,
    model_intercepts_markup,
)
from ..payloads import JsonObject, JsonValue
from ..transcript import RawBlock, messages_to_json
from .errors import CommandError, ReplayedError

MAX_TAPE_BYTES = 32_000_000
"""The most bytes of JSON one call's tape may take (every model reply, API response and answer it keeps)."""


def entry_size(entry: JsonValue) -> int:
    """The bytes an entry takes in a recording, at most (JSON with ASCII escapes, which no encoding exceeds)."""
    return len(json.dumps(entry))


class Tape:
    """The effects of one call: recording (``recorded`` is None) or replaying ``recorded``.

    Args:
        recorded: The entries of a recording to replay; None to record.
        max_bytes: The most bytes the entries recorded may take (`entry_size`); see `fits`.
    """

    def __init__(self, recorded: Sequence[JsonValue] | None = None, *, max_bytes: int = MAX_TAPE_BYTES) -> None:
        self.replaying = recorded is not None
        """True when effects come from a recording."""
        self.entries: list[JsonValue] = list(recorded) if recorded is not None else []
        """The entries, in order."""
        self.max_bytes = max_bytes
        """The bound on the bytes of the entries recorded."""
        self.size = 0
        """The bytes of the entries recorded so far."""
        self._position = 0

    def fits(self, size: int) -> bool:
        """Whether an entry of ``size`` bytes fits the tape's bound.

        An API response that does not becomes an error; model replies and answers, bounded on their own, are always
        kept.
        """
        return self.size + size <= self.max_bytes

    def record(self, entry: JsonObject, size: int | None = None) -> None:
        """Append an effect (live); ``size`` is its `entry_size`, when the caller measured it already."""
        self.size += entry_size(entry) if size is None else size
        self.entries.append(entry)

    def take(self, kind: str, key: str, what: str) -> JsonObject:
        """The next recorded effect, which must be of ``kind`` and for ``key`` (replaying)."""
        position = self._position
        if position >= len(self.entries):
            raise ReplayMissError(
                f"The recording of this call ends before {what}: the agent now does more than "
                "when it was recorded. Run the call in mode 'refresh' to record it again.",
                nearest=None,
                differing=(),
            )
        entry = self.entries[position]
        if not isinstance(entry, dict) or entry.get("kind") != kind or entry.get("key") != key:
            found = entry.get("kind") if isinstance(entry, dict) else type(entry).__name__
            raise ReplayMissError(
                f"The recording of this call diverges at effect {position + 1}: it expected "
                f"{what}, and the recording has a different {found} there. Run the call in "
                "mode 'refresh' to record it again.",
                nearest=None,
                differing=(),
            )
        self._position += 1
        return entry

    def finish(self) -> None:
        """Check that a replay used every recorded effect."""
        if self.replaying and self._position != len(self.entries):
            raise ReplayMissError(
                f"The call replayed using {self._position} of the {len(self.entries)} effects of "
                "its recording: it is damaged or the agent changed. Run the call in mode "
                "'refresh' to record it again.",
                nearest=None,
                differing=(),
            )


def error_entry(error: BaseException) -> JsonObject:
    """An error as a tape keeps it."""
    name = error.type_name if isinstance(error, ReplayedError) else type(error).__name__
    entry: JsonObject = {"type": name, "message": str(error)}
    status = getattr(error, "status", None)
    if isinstance(status, int):
        entry["status"] = status
    return entry


def request_key(request: ModelRequest) -> str:
    """A digest of everything a model request asks, scrubbed of secrets as its recording is.

    A request holds the replies before it: live as the model sent them, replayed as the recording kept them, scrubbed
    (a secret in a reply's text). Scrubbed, the two ask the same.
    """
    return digest(
        scrub(
            {
                "model": request.model,
                "system": request.system,
                "messages": messages_to_json(request.messages),
                "tools": [
                    {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                    for t in request.tools
                ],
                "max_tokens": request.max_tokens,
            }
        )
    )[:24]


class TapeModel:
    """A model that records the replies of ``inner`` on the tape, or replays them from it."""

    def __init__(self, inner: Model | None, backend: str, tape: Tape, *, max_depth: int = 100) -> None:
        self._inner = inner
        self._backend = backend
        self._tape = tape
        self._max_depth = max_depth

    @property
    def intercept_markup(self) -> bool:
        """As the inner model says (tool calls written as markup are turned into calls for every model)."""
        return model_intercepts_markup(self._inner)

    def backend_id(self, model: str) -> str:
        """The backend the call's fingerprint names."""
        return self._backend

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the inner model's reply, keeping it on the tape; or replay it from the tape."""
        key = request_key(request)
        if self._tape.replaying:
            entry = self._tape.take("model", key, "a model reply")
            for event in _events(entry.get("events")):
                yield event
            error = entry.get("error")
            if isinstance(error, dict):
                raise ReplayedError(str(error.get("type")), str(error.get("message")))
            return
        assert self._inner is not None, "a live call has a model"
        kept: list[JsonValue] = []
        try:
            async for event in self._inner.stream(request):
                if isinstance(event, ToolCall):
                    _check_input_depth(event, self._max_depth)
                kept.append(_event_json(event))
                yield event
        except Exception as e:
            self._tape.record({"kind": "model", "key": key, "events": kept, "error": error_entry(e)})
            raise
        self._tape.record({"kind": "model", "key": key, "events": kept})


def _check_input_depth(call: ToolCall, limit: int) -> None:
    """Refuse a tool call whose input nests deeper than any value may (before anything walks it recursively)."""
    levels: list[Any] = [iter((call.args,))]
    while levels:
        for value in levels[-1]:
            if isinstance(value, dict | list):
                if len(levels) > limit:
                    raise CommandError(
                        f"the model called the tool {call.name!r} with input nested more than {limit} levels deep; "
                        "it was refused."
                    )
                levels.append(iter(value.values() if isinstance(value, dict) else value))
                break
        else:
            levels.pop()


def _event_json(event: ModelEvent) -> JsonValue:
    if isinstance(event, TextDelta):
        return {"text": event.text}
    if isinstance(event, ToolCall):
        return {"call": {"id": event.id, "name": event.name, "args": event.args}}
    if isinstance(event, ThinkingDelta):
        return {"thinking": event.text}
    if isinstance(event, RawBlock):
        return {"block": event.data}  # kept as the API sent it, to be sent back unchanged
    if isinstance(event, Cited):
        return {"cited": event.text, "citations": list(event.citations)}
    usage = event.usage
    end: JsonObject = {
        "end": event.stop_reason,
        "usage": [
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens,
        ],
    }
    if event.container is not None:  # the code execution container the reply named, as a step's record keeps it
        end["container"] = event.container
    return end


def _events(data: Any) -> list[ModelEvent]:
    events: list[ModelEvent] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        if "text" in item:
            events.append(TextDelta(str(item["text"])))
        elif "call" in item and isinstance(item["call"], dict):
            call = item["call"]
            args = call.get("args")
            events.append(ToolCall(str(call.get("id")), str(call.get("name")), args if isinstance(args, dict) else {}))
        elif "thinking" in item:
            events.append(ThinkingDelta(str(item["thinking"])))
        elif "block" in item and isinstance(item["block"], dict):
            events.append(RawBlock(item["block"]))
        elif "cited" in item and isinstance(item.get("citations"), list):
            cited = tuple(c for c in item["citations"] if isinstance(c, dict))
            events.append(Cited(str(item["cited"]), cited))
        elif "end" in item:
            counts = item.get("usage")
            usage = Usage(*counts) if isinstance(counts, list) and len(counts) == 4 else Usage()
            container = item.get("container")
            events.append(TurnEnd(item["end"], usage, container if isinstance(container, str) else None))
    return events
