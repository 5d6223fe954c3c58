"""`AnthropicModel`: Claude through the real `anthropic` SDK, streamed, with prompt caching and the SDK's retries.

Configuration is the SDK's own: ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``, or an SDK credentials profile)
and ``ANTHROPIC_BASE_URL`` are read by ``anthropic.AsyncAnthropic``; or pass a configured client with
``AnthropicModel(client=...)``. The SDK is imported only when a reply is first asked for, so ``import agl_notebook``
stays fast.

Each turn sends the whole conversation (backends hold no state), the system text and the tools, with a prompt-caching
mark on the system text block, on the last tool and on the conversation's last block written here, so the unchanging
prefix of a step is read from the cache on every turn after the first.

What is sent, only when set (a request without them is byte for byte what it was before they existed): the request's
``thinking`` (`Thinking.to_json()`, its ``display`` always explicit), ``output_config: {"effort": ...}``, and
``"strict": true`` on a tool whose `ToolSpec` is strict.

What is kept: a reply's blocks as the API sent them. Text streams as `TextDelta`s and a tool_use block becomes a
`ToolCall` (the loop rebuilds those two); every other block (``thinking``, ``redacted_thinking``, and any type this
backend does not read, ``server_tool_use`` and block types newer than this code included) is yielded whole as a
`RawBlock` when it closes, its JSON exactly as streamed: the content_block_start object, keys in the order the API
sent them, each delta the SDK's own accumulator knows filling the field it fills there (``thinking_delta`` appends to
``thinking``, ``signature_delta`` sets ``signature``, ``text_delta`` appends to ``text``, ``citations_delta`` to
``citations``, ``input_json_delta`` pieces are read into ``input`` when the block closes). A thinking block's text also
streams as `ThinkingDelta`s for the live view. A delta of a type not listed is not applied (the SDK drops it too) and
is logged as a warning. The loop sends each `RawBlock` back unchanged on every later turn and never puts a cache mark
on one, so a thinking block's signature goes back as it came. A kept block still open when the reply ends is an
`UpstreamUnexpected`, unless ``max_tokens`` cut it: then it is dropped (it has no signature to send back). Usage is the
API's: ``output_tokens`` (the last ``message_delta``'s) already counts the thinking tokens, so nothing is added.

The stream is read from the SDK's own server-sent-event decoder (``AsyncStream.raw_events``), each event's JSON as the
API sent it, not from its typed events: those are pydantic models whose dump puts a block's keys in field order
(``signature`` before ``thinking``), and a block of a type the SDK does not know is built as its first variant (a
``TextBlock``, whose dump warns), so neither gives back the block as it came.

Errors, by whose move it was:

- The API said no (``anthropic.APIStatusError`` and its subclasses: ``BadRequestError`` for a 400, a thinking mode
  or effort the model does not take included,
  ``AuthenticationError``, ``RateLimitError`` or ``OverloadedError`` once the retries are spent, and so on), or the
  connection failed (``anthropic.APIConnectionError``): the SDK's error propagates unchanged. Its message carries the
  API's own error text (``error.message``, also on ``.api_message``) and it keeps ``.status_code`` and
  ``.request_id``; wrapping it would only hide the type people already catch. The step fails with it, and `Run.step`
  re-raises it.
- Retries follow the SDK's rules (408, 409, 429 and 5xx, 529 "overloaded" included, and connection errors, with its
  backoff and its ``x-should-retry`` header; ``max_retries`` is the client's, the SDK's default 2 unless given), but
  are made here, each attempt sent with the SDK's retries off: the SDK honours a ``retry-after`` of up to 49 days,
  so one hostile or broken 429 could stall a step for hours. A wait is capped at ``max_retry_wait`` (60 s), and
  while it lasts the step's live view says so (a `ModelRetryWaiting` event, never part of the final view). Inside
  a ``run.map`` item the map's pacer (`agl_notebook._map_scope`) takes over: it says how often to retry and how
  long a wait may be, and every attempt waits for its slot and tells it the outcome (docs/map.md).
- What the stream itself gets wrong is an `UpstreamUnexpected`: tool input that is not a JSON object, a stream that
  ends without ``message_stop``, a missing or unknown stop reason. Output cut off by ``max_tokens`` inside a tool call
  is a `ModelOutputTruncatedError` naming the tool.
- No credentials at all is a `MissingCredentialsError`, raised before any request, saying how to get them or how to
  run without them. The key never appears in a message or a log.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, get_args

from .._map_scope import current_pacer
from .._scope import current_scope
from .._secret_logs import scrub_logs
from .._settings import anthropic_configuration
from ..errors import InputError, MissingCredentialsError, ModelOutputTruncatedError, UpstreamUnexpected
from ..events import ModelRetryWaiting
from ..payloads import JsonObject, JsonValue
from ..transcript import RawBlock, messages_to_json
from .base import (
    Cited,
    ModelEvent,
    ModelRequest,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
    resolve_backend_id,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel", "request_params"]

log = logging.getLogger(__name__)

_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))

NO_CREDENTIALS_MESSAGE = (
    "No Anthropic credentials were found, so this step cannot ask Claude. Either set ANTHROPIC_API_KEY (create a "
    "key at https://console.anthropic.com/settings/keys) or ANTHROPIC_AUTH_TOKEN in the environment the kernel or "
    "process runs in, or pass AnthropicModel(client=anthropic.AsyncAnthropic(...)). To run without credentials, "
    "replay the step from a recording (a notebook that already holds its recordings, with AGL_NOTEBOOK_MODE=replay) "
    "or run it on a scripted model: Run(model=ScriptedModel([...]))."
)
"""What `MissingCredentialsError` says."""

MAX_RETRY_WAIT = 60.0
"""The longest wait before a retry by default, in seconds, whatever the server's ``retry-after`` asks."""

# The SDK's backoff when the server names no wait (anthropic._constants): 0.5 s doubling per retry, at most 8 s,
# less up to a quarter of it at random.
_INITIAL_RETRY_DELAY = 0.5
_MAX_BACKOFF = 8.0
_sleep = asyncio.sleep  # what a retry waits with (tests replace it rather than wait)


class AnthropicModel:
    """Claude, through the ``anthropic`` SDK's streaming Messages API.

    Args:
        client: A configured ``anthropic.AsyncAnthropic`` to send requests with. Without one, a client is made
            from the environment (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``) once
            per event loop and reused, so its connections are kept between turns.
        model: A model id that overrides the one each request names (`Claude.OPUS`, any id string). Without it,
            the role's model is used.
        max_retries: How many times a failed request is retried (429, 529, other 5xx, connection errors); the
            client's own setting (the SDK's default, 2) when not given.
        max_retry_wait: The longest wait before a retry, in seconds, whatever the server's ``retry-after`` asks.

    Raises:
        InputError: ``model`` is an empty string, ``max_retries`` is not a non-negative int, or
            ``max_retry_wait`` is not a number of seconds >= 0.

    Examples:
        >>> run = Run(model=AnthropicModel(model=Claude.HAIKU))  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        client: AsyncAnthropic | None = None,
        model: str | None = None,
        max_retries: int | None = None,
        max_retry_wait: float = MAX_RETRY_WAIT,
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise InputError(f"AnthropicModel(model=...) takes a model id such as Claude.OPUS, not {model!r}.")
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
        ):
            raise InputError(f"AnthropicModel(max_retries=...) takes an int >= 0, not {max_retries!r}.")
        if (
            isinstance(max_retry_wait, bool)
            or not isinstance(max_retry_wait, int | float)
            or not (0 <= max_retry_wait < float("inf"))
        ):
            raise InputError(
                f"AnthropicModel(max_retry_wait=...) takes a number of seconds >= 0, not {max_retry_wait!r}."
            )
        self.max_retry_wait = float(max_retry_wait)
        """The longest wait before a retry, in seconds."""
        self.model: str | None = str(model) if model is not None else None
        """The model id every request is sent to, or None to use each request's own."""
        self.max_retries = max_retries
        """The SDK's retry count for this backend, or None for the SDK's default."""
        if client is not None and max_retries is not None:
            client = client.with_options(max_retries=max_retries)
        self._client = client
        # Clients made from the environment, one per event loop (a client's connection pool belongs to the loop it
        # first ran on) and per configuration, so a key set later in the session is picked up.
        self._env_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[tuple[str, ...], AsyncAnthropic]]
        self._env_clients = weakref.WeakKeyDictionary()
        self._unretried: _Unretried | None = None  # the last client's copy with the SDK's retries off

    async def _environment_client(self) -> AsyncAnthropic:
        loop = asyncio.get_running_loop()
        config = anthropic_configuration()
        cached = self._env_clients.get(loop)
        if cached is not None and cached[0] == config:
            return cached[1]
        client = await _client_from_environment(self.max_retries)
        self._env_clients[loop] = (config, client)
        if cached is not None:
            await cached[1].close()
        return client

    @classmethod
    def for_model(cls, model_id: str) -> AnthropicModel:
        """A backend for ``model_id``, configured from the environment.

        Args:
            model_id: The Claude model id (`Claude.OPUS`, or any id string the API accepts).

        Returns:
            A backend that sends every request to ``model_id``.
        """
        return cls(model=model_id)

    thinking = True
    """Claude takes thinking, effort and strict tools (sent when a role sets them)."""

    def backend_id(self, model: str) -> str:
        """``anthropic:<model id>``: the model this backend would actually use for a request naming ``model``."""
        return resolve_backend_id(self.model or model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream Claude's reply to ``request``: text deltas, tool calls, thinking, kept blocks, then `TurnEnd`.

        Args:
            request: The system text, the whole conversation, the tools, the output token limit, and the thinking
                and effort settings (sent only when set).

        Yields:
            `TextDelta` for each streamed piece of text, a complete `ToolCall` when each tool_use block closes,
            `ThinkingDelta` for each piece of readable thinking, a `RawBlock` (the block's JSON as the API sent it)
            when each other block closes, and a final `TurnEnd` with the stop reason (``pause_turn`` and
            ``refusal`` included) and the usage.

        Raises:
            MissingCredentialsError: No client was given and the environment holds no credentials.
            ModelOutputTruncatedError: The reply hit ``max_tokens`` in the middle of a tool call.
            UpstreamUnexpected: The stream broke its own rules (invalid tool input, no ``message_stop``, no or an
                unknown stop reason, a block left open).
            anthropic.APIStatusError: The API refused the request (e.g. ``BadRequestError`` with the API's message),
                after the retries for the retryable statuses (each wait at most ``max_retry_wait``).
            anthropic.APIConnectionError: The API could not be reached, after the retries.
        """
        model = self.model or request.model
        if not model:
            raise InputError(
                "AnthropicModel was given no model id: name one with @role(model=Claude.OPUS) or "
                "AnthropicModel(model=...)."
            )
        params = request_params(request, model)
        scrub_logs("anthropic", "anthropic._base_client", "httpx2", log.name)  # the SDK logs request bodies at DEBUG
        async with AsyncExitStack() as stack:
            client = self._client or await self._environment_client()
            # A caller that owns the retries (run.map) paces every attempt and says how often to retry.
            pacer = current_pacer.get()
            retries = client.max_retries if pacer is None else pacer.retries
            cap = self.max_retry_wait if pacer is None else min(self.max_retry_wait, pacer.max_wait)
            once = self._without_retries(client)  # retried here, where the wait can be capped and shown
            attempt = ticket = 0
            while True:
                if pacer is not None:
                    ticket = await pacer.acquire()
                try:
                    events = await once.messages.create(
                        model=model,
                        max_tokens=request.max_tokens,
                        messages=cast(Any, params["messages"]),
                        system=cast(Any, params.get("system", _omit())),
                        tools=cast(Any, params.get("tools", _omit())),
                        thinking=cast(Any, params.get("thinking", _omit())),
                        output_config=cast(Any, params.get("output_config", _omit())),
                        container=cast(Any, params.get("container", _omit())),
                        stream=True,
                        extra_headers={"x-stainless-retry-count": str(attempt)},  # as the SDK's own retries send
                    )
                    break
                except BaseException as e:  # a cancelled attempt gives its slot back too
                    if pacer is not None:
                        pacer.release(ticket, _status_of(e))
                    if not isinstance(e, Exception):
                        raise
                    waiting = _retry_wait(e, attempt, retries, cap)
                    if waiting is None:
                        raise
                    attempt += 1
                    _announce(waiting)
                    await _sleep(waiting.seconds)
            stack.push_async_callback(events.close)
            if pacer is not None:  # the slot is held until the reply has streamed (or broke off)
                stack.callback(pacer.release, ticket, None)
            reply = _Reply(request.max_tokens)
            try:
                async for event in _stream_json(events):
                    for out in reply.feed(event):
                        yield out
            except (ValueError, _transport_errors()) as e:  # JSON and Unicode decoding errors are ValueErrors
                raise UpstreamUnexpected(f"The Anthropic stream broke off: {type(e).__name__}: {e}") from e
            yield reply.finish()

    def _without_retries(self, client: AsyncAnthropic) -> AsyncAnthropic:
        """``client`` with the SDK's own retries off, copied once and reused while the client's settings stay.

        A copy per request cost a step 0.3 ms of CPU: the SDK's constructor reads a dozen settings, and each new
        client looks its platform up on a worker thread before its first request. A key, token, URL or timeout
        assigned to the client later is sent from the next request on, as with a copy per request.
        """
        settings = _copied_settings(client)
        kept = self._unretried
        if kept is None or kept.client is not client or kept.settings != settings:
            kept = self._unretried = _Unretried(client, settings, client.with_options(max_retries=0))
        return kept.copy

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self.model!r}, client={'given' if self._client else 'from environment'})"


@dataclass(frozen=True)
class _Unretried:
    """A client's copy with the SDK's retries off, and the client's settings it was made with."""

    client: AsyncAnthropic
    settings: tuple[object, ...]
    copy: AsyncAnthropic


def _copied_settings(client: AsyncAnthropic) -> tuple[object, ...]:
    """What of ``client`` a person may assign after making it, which its copy must follow."""
    return (client.api_key, client.auth_token, client.base_url, client.timeout, client.credentials)


def _retry_wait(error: Exception, attempt: int, retries: int, cap: float) -> ModelRetryWaiting | None:
    """How long to wait before retrying after ``error`` (the SDK's rules, the wait capped), or None: do not retry."""
    import anthropic

    return sdk_retry_wait(anthropic, error, attempt, retries, cap)


def sdk_retry_wait(sdk: Any, error: Exception, attempt: int, retries: int, cap: float) -> ModelRetryWaiting | None:
    """The retry rules of a Stainless SDK (``anthropic``, ``openai``: the same error classes and headers) for ``error``.

    How long to wait before retry ``attempt + 1`` (the server's ``retry-after`` capped at ``cap``, else the SDK's
    backoff), or None: do not retry.
    """
    if attempt >= retries:
        return None
    asked: float | None = None
    if isinstance(error, sdk.APIStatusError):
        status = error.status_code
        should = error.response.headers.get("x-should-retry")
        if should == "false" or (should != "true" and status not in (408, 409, 429) and status < 500):
            return None
        reason = f"HTTP {status}"
        asked = _retry_after(error.response.headers)
    elif isinstance(error, sdk.APITimeoutError):
        reason = "the request timed out"
    elif isinstance(error, sdk.APIConnectionError):
        reason = "the connection failed"
    else:
        return None
    if asked is not None and asked > 0:
        seconds = min(asked, cap)
    else:
        asked = None
        seconds = min(_INITIAL_RETRY_DELAY * 2.0 ** min(attempt, 100), _MAX_BACKOFF, cap) * (1 - 0.25 * random.random())
    return ModelRetryWaiting(
        seconds=seconds,
        reason=reason,
        asked=asked if asked is not None and asked > cap else None,
        retry=attempt + 1,
        max_retries=retries,
    )


def _status_of(error: BaseException) -> int:
    """The HTTP status of a failed attempt, for a pacer: 0 when no response came."""
    status = getattr(error, "status_code", 0)
    return status if isinstance(status, int) else 0


def _retry_after(headers: Any) -> float | None:
    """The wait the server asks for, in seconds: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name))
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            return value / scale
    text = headers.get("retry-after")
    when = email.utils.parsedate_tz(text) if isinstance(text, str) else None
    return float(email.utils.mktime_tz(when) - time.time()) if when is not None else None


def _announce(waiting: ModelRetryWaiting) -> None:
    """Tell the running step's views (a live line) and the log that a retry waits."""
    log.info(
        "Retrying the Anthropic request in %.1f s (%s%s)",
        waiting.seconds,
        waiting.reason,
        f"; the server asked for {waiting.asked:.0f} s" if waiting.asked is not None else "",
    )
    scope = current_scope.get()
    if scope is not None:
        scope.emit(waiting)


def request_params(request: ModelRequest, model: str) -> dict[str, JsonValue]:
    """The Messages API parameters for ``request`` (without ``stream``), as JSON.

    The system text becomes one text block; the system text, the last tool and the last block of the conversation
    written here (text, tool_use or tool_result: a block kept as received is sent back unchanged, with no mark)
    carry the prompt-caching mark (``cache_control: {"type": "ephemeral"}``: three of the four the API
    allows); an empty system text or tool list is left out. ``thinking`` (the role's `Thinking`, its ``display``
    explicit), ``output_config`` (``{"effort": ...}``) and a tool's ``"strict": true`` are sent only when set, so a
    request without them is the same, byte for byte, as before they existed.

    Args:
        request: The request to send.
        model: The model id to send it to.

    Returns:
        ``model``, ``max_tokens``, ``messages`` and, when set, ``system``, ``tools`` (the role's server tools after
        its own), ``thinking``, ``output_config`` and ``container`` (the id an earlier reply of the step named).
    """
    messages = messages_to_json(request.messages)
    # The conversation only grows within a step: marking its last block caches everything before it, so each
    # turn of a tool loop reads the earlier turns from the cache instead of paying for them again. A kept block
    # (thinking, a type not read here) never gets the mark: it goes back exactly as it came, and the API takes no
    # cache mark on thinking; the mark goes on the last block written here before it (a paused reply may hold none).
    _mark_last_written_block(request, messages)
    params: dict[str, JsonValue] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
    if request.tools or request.server_tools:
        # Server tools go after the client tools, copied (a role's tool JSON is never changed), and the cache mark on
        # the last tool of all, so the whole tool list stays one cached prefix.
        tools: list[JsonValue] = [*map(_tool_json, request.tools), *(dict(t) for t in request.server_tools)]
        last = cast(JsonObject, tools[-1])
        last["cache_control"] = {"type": "ephemeral"}
        params["tools"] = tools
    if request.container is not None:
        params["container"] = request.container
    if request.thinking is not None:
        params["thinking"] = request.thinking.to_json()
    if request.effort is not None:
        params["output_config"] = {"effort": request.effort}
    return params


def _mark_last_written_block(request: ModelRequest, messages: list[JsonValue]) -> None:
    """Put the cache mark on the conversation's last block that is not a kept one.

    The marked block is a copy: the transcript's blocks are never changed.
    """
    for message, sent in zip(reversed(request.messages), reversed(messages), strict=True):
        blocks = sent.get("content") if isinstance(sent, dict) else None
        if not isinstance(blocks, list):
            continue
        for i in reversed(range(len(message.content))):
            block = blocks[i]
            if not isinstance(message.content[i], RawBlock) and isinstance(block, dict):
                blocks[i] = {**block, "cache_control": {"type": "ephemeral"}}
                return


def _tool_json(spec: ToolSpec) -> JsonObject:
    tool: JsonObject = {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
    if spec.strict:
        tool["strict"] = True
    return tool


def _omit() -> Any:
    import anthropic

    return anthropic.omit


def _transport_errors() -> type[Exception]:
    import httpx2

    return httpx2.TransportError


async def _client_from_environment(max_retries: int | None) -> AsyncAnthropic:
    """A client configured by the SDK from the environment, or `MissingCredentialsError` when it found none."""
    import anthropic

    client = anthropic.AsyncAnthropic() if max_retries is None else anthropic.AsyncAnthropic(max_retries=max_retries)
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        await client.close()
        raise MissingCredentialsError(NO_CREDENTIALS_MESSAGE)
    return client


async def _stream_json(events: Any) -> AsyncIterator[JsonObject]:
    """The JSON of each event of a streamed reply, exactly as the API sent it (keys in its order).

    Read from the SDK's own server-sent-event decoder (``AsyncStream.raw_events``) rather than its typed events: the
    SDK builds those as pydantic models, whose dump puts a block's keys in the model's field order (``signature``
    before ``thinking``), and it builds a block of a type it does not know as its first variant (a ``TextBlock``
    whose dump warns), so neither gives back the block as it came. Pings and nameless or empty events are skipped,
    and an ``error`` event raises ``anthropic.APIStatusError`` with the API's error, as the SDK's own stream does.
    """
    import anthropic

    async for sse in anthropic.AsyncStream.raw_events(events.response):
        if sse.event in ("ping", None) or not sse.data:
            continue
        if sse.event == "error":
            try:
                body: object = sse.json()
                message = f"{body}"
            except ValueError:
                body, message = sse.data, sse.data
            raise anthropic.APIStatusError(message, response=events.response, body=body)
        data = sse.json()
        if not isinstance(data, dict):
            raise UpstreamUnexpected(f"The Anthropic stream sent a {sse.event!r} event that is not a JSON object.")
        yield cast(JsonObject, data)


def _object(event: JsonObject, name: str) -> JsonObject:
    value = event.get(name)
    if not isinstance(value, dict):
        raise UpstreamUnexpected(f"The Anthropic stream sent a {event.get('type')!r} event without its {name!r}.")
    return value


def _index(event: JsonObject) -> int:
    value = event.get("index")
    if not isinstance(value, int) or isinstance(value, bool):
        raise UpstreamUnexpected(f"The Anthropic stream sent a {event.get('type')!r} event without a block index.")
    return value


@dataclass
class _ToolBlock:
    id: str
    name: str
    start_input: JsonObject
    parts: list[str] = field(default_factory=list)


@dataclass
class _KeptBlock:
    """A block kept as the API sent it (thinking, redacted thinking, a type not read here), while it streams.

    ``data`` is the block's JSON from content_block_start, the very object, and its deltas are applied to it in
    place, so its keys stay in the order the API sent them. Each delta type the SDK's own accumulator knows fills
    the field it fills there: ``thinking_delta`` appends to ``thinking``, ``text_delta`` to ``text``,
    ``signature_delta`` sets ``signature``, ``citations_delta`` appends its citation to ``citations`` (a field the
    block lacks starts empty), and the ``partial_json`` of ``input_json_delta``s is joined and read into ``input``
    when the block closes. A delta of any other type, or one whose field holds a value of another kind, is not
    applied (the SDK's accumulator drops an unknown delta too) and is logged as a warning, so a reply the API later
    refuses can be traced to it.
    """

    data: JsonObject
    json_parts: list[str] = field(default_factory=list)

    def apply(self, delta: JsonObject) -> list[ModelEvent]:
        """Add ``delta`` to the block; the thinking text it adds, for the live view."""
        kind = delta.get("type")
        if kind in _APPENDED and isinstance(piece := delta.get(_APPENDED[kind]), str):
            field_name = _APPENDED[kind]
            held = self.data.get(field_name, "")
            if isinstance(held, str):
                self.data[field_name] = held + piece
                return [ThinkingDelta(piece)] if kind == "thinking_delta" and piece else []
        elif kind == "signature_delta" and isinstance(signature := delta.get("signature"), str):
            self.data["signature"] = signature
            return []
        elif kind == "citations_delta" and "citation" in delta:
            held_citations = self.data.get("citations")
            if held_citations is None or isinstance(held_citations, list):
                self.data["citations"] = [*(held_citations or []), delta["citation"]]
                return []
        elif kind == "input_json_delta" and isinstance(part := delta.get("partial_json"), str):
            self.json_parts.append(part)
            return []
        log.warning(
            "A %r delta for a %r block of the reply was not applied (this version does not know how); the block is "
            "kept as the API sent it otherwise.",
            kind,
            self.data.get("type"),
        )
        return []

    def finish(self) -> RawBlock:
        """The whole block, its streamed tool input read into ``input``."""
        raw = "".join(self.json_parts)
        if raw.strip():
            try:
                self.data["input"] = json.loads(raw)
            except (ValueError, RecursionError) as e:
                raise UpstreamUnexpected(
                    f"The input of the reply's {self.data.get('type')!r} block is not valid JSON: "
                    f"{raw if len(raw) <= 200 else raw[:200] + '...'!r}"
                ) from e
        return RawBlock(self.data)


_APPENDED = {"thinking_delta": "thinking", "text_delta": "text"}
"""The delta types whose text is appended to a kept block's field of that name (the delta's field of that name)."""


class _Reply:
    """Assembles one streamed reply, from each event's JSON as sent: open blocks by index, stop reason and usage.

    Text streams as `TextDelta`s and a tool_use block becomes a `ToolCall` when it closes (as they always did);
    every other block is kept as the API sent it and yielded whole as a `RawBlock` when it closes, a thinking
    block's text streaming first as `ThinkingDelta`s for the live view.
    """

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.tools: dict[int, _ToolBlock] = {}
        self.kept: dict[int, _KeptBlock] = {}
        self.unreadable: tuple[str, str] | None = None  # (tool name, why) of a tool_use block whose input is bad
        self.stop_reason: str | None = None
        self.stopped = False
        self.usage: dict[str, int] = {}
        self.texts: dict[int, _TextBlock] = {}  # open text blocks: their text and the citations streamed onto them
        self.container: str | None = None

    def feed(self, event: JsonObject) -> list[ModelEvent]:
        """The events to yield for one stream event (none once a tool call could not be read)."""
        out: list[ModelEvent] = []
        kind = event.get("type")
        if kind == "message_start":
            message = _object(event, "message")
            self._take_usage(message.get("usage"))
            self._take_container(message.get("container"))
        elif kind == "content_block_start":
            index, block = _index(event), _object(event, "content_block")
            block_type = block.get("type")
            if block_type == "tool_use":
                start_input = block.get("input")
                self.tools[index] = _ToolBlock(
                    str(block.get("id")),
                    str(block.get("name")),
                    dict(start_input) if isinstance(start_input, dict) else {},
                )
            elif block_type == "text":
                piece = block.get("text")
                piece = piece if isinstance(piece, str) else ""
                cited = block.get("citations")
                self.texts[index] = _TextBlock(
                    [piece], [c for c in cited if isinstance(c, dict)] if isinstance(cited, list) else []
                )
                if piece:
                    out.append(TextDelta(piece))
            else:
                self.kept[index] = _KeptBlock(block)
                if block_type == "thinking" and isinstance(piece := block.get("thinking"), str) and piece:
                    out.append(ThinkingDelta(piece))
        elif kind == "content_block_delta":
            index, delta = _index(event), _object(event, "delta")
            if index in self.kept:
                out.extend(self.kept[index].apply(delta))
            elif delta.get("type") == "text_delta":
                if isinstance(piece := delta.get("text"), str) and piece:
                    out.append(TextDelta(piece))
                    if index in self.texts:
                        self.texts[index].pieces.append(piece)
            elif delta.get("type") == "citations_delta" and index in self.texts:
                citation = delta.get("citation")
                if isinstance(citation, dict):
                    self.texts[index].citations.append(citation)
            elif (
                delta.get("type") == "input_json_delta"
                and index in self.tools
                and isinstance(part := delta.get("partial_json"), str)
            ):
                self.tools[index].parts.append(part)
        elif kind == "content_block_stop":
            index = _index(event)
            tool = self.tools.pop(index, None)
            if tool is not None:
                call = self._call(tool)
                if call is not None:
                    out.append(call)
            kept = self.kept.pop(index, None)
            if kept is not None:
                out.append(kept.finish())
            text = self.texts.pop(index, None)
            if text is not None and text.citations:
                out.append(Cited("".join(text.pieces), tuple(text.citations)))
        elif kind == "message_delta":
            message_delta = _object(event, "delta")
            stop_reason = message_delta.get("stop_reason")
            if stop_reason is not None:
                self.stop_reason = str(stop_reason)
            self._take_container(message_delta.get("container"))
            self._take_usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return [] if self.unreadable is not None else out

    def _call(self, tool: _ToolBlock) -> ToolCall | None:
        raw = "".join(tool.parts)
        if not raw.strip():
            return ToolCall(tool.id, tool.name, tool.start_input)
        try:
            args = json.loads(raw)
        except (ValueError, RecursionError) as e:  # a number of over 4,300 digits is a plain ValueError
            excerpt = raw if len(raw) <= 200 else raw[:200] + "..."
            reason = (
                f"{e.msg} at character {e.pos}"
                if isinstance(e, json.JSONDecodeError)
                else "nested too deeply"
                if isinstance(e, RecursionError)
                else "a number too long to read"
            )
            self.unreadable = (tool.name, f"its input is not valid JSON ({reason}): {excerpt!r}")
            return None
        if not isinstance(args, dict):
            self.unreadable = (tool.name, f"its input is JSON but not an object: {raw[:200]!r}")
            return None
        return ToolCall(tool.id, tool.name, cast(JsonObject, args))

    def _take_usage(self, usage: JsonValue) -> None:
        if not isinstance(usage, dict):
            return
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                # message_delta's figures are cumulative, so the last one counts; output_tokens already counts the
                # thinking tokens, so nothing is added for thinking.
                self.usage[name] = value
        # What was written for an hour is billed at its own rate (docs/cost.md); message_start breaks it down.
        cache_creation = usage.get("cache_creation")
        one_hour = cache_creation.get("ephemeral_1h_input_tokens") if isinstance(cache_creation, dict) else None
        if isinstance(one_hour, int) and not isinstance(one_hour, bool):
            self.usage["cache_creation_1h_input_tokens"] = one_hour
        self.usage.update(server_tool_counts(usage))

    def _take_container(self, container: JsonValue) -> None:
        """The code execution container the reply names (``{"id": ..., "expires_at": ...}``), sent back later."""
        if isinstance(container, dict) and isinstance(container.get("id"), str) and container["id"]:
            self.container = str(container["id"])

    def finish(self) -> TurnEnd:
        """The `TurnEnd` of a reply whose stream has ended, or the error that the reply cannot be used."""
        cut = [t.name for t in self.tools.values()] + ([self.unreadable[0]] if self.unreadable else [])
        if self.stop_reason == "max_tokens" and cut:
            raise ModelOutputTruncatedError(
                f"The model ran out of output tokens (max_tokens={self.max_tokens}) in the middle of its call to "
                f"tool {cut[0]!r}, so the call cannot be read. Raise the role's max_tokens, or ask for smaller "
                "arguments."
            )
        if not self.stopped:
            raise UpstreamUnexpected(
                "The Anthropic stream ended before message_stop, so the reply is incomplete "
                "(the connection was probably cut)."
            )
        if self.unreadable is not None:
            raise UpstreamUnexpected(
                f"The model's call to tool {self.unreadable[0]!r} could not be read: {self.unreadable[1]}."
            )
        if cut:
            raise UpstreamUnexpected(
                f"The model's reply ended with its call to tool {cut[0]!r} still open (no "
                f"content_block_stop), with stop reason {self.stop_reason!r}."
            )
        # A kept block cut by max_tokens is dropped: it never got its signature, so the API would refuse it back.
        open_kept = [k.data.get("type") for k in self.kept.values()]
        if open_kept and self.stop_reason != "max_tokens":
            raise UpstreamUnexpected(
                f"The model's reply ended with its {open_kept[0]!r} block still open (no content_block_stop), with "
                f"stop reason {self.stop_reason!r}."
            )
        if self.stop_reason is None:
            raise UpstreamUnexpected("The Anthropic stream ended without a stop reason.")
        if self.stop_reason not in _STOP_REASONS:
            raise UpstreamUnexpected(f"The Anthropic stream ended with an unknown stop reason {self.stop_reason!r}.")
        return TurnEnd(cast(StopReason, self.stop_reason), Usage(**self.usage), self.container)


def server_tool_counts(usage: JsonObject) -> dict[str, int]:
    """The searches and fetches Anthropic ran, from a usage's ``server_tool_use`` (none when it says none)."""
    server = usage.get("server_tool_use")
    if not isinstance(server, dict):
        return {}
    return {
        name: value
        for name in ("web_search_requests", "web_fetch_requests")
        if isinstance(value := server.get(name), int) and not isinstance(value, bool) and value >= 0
    }


@dataclass
class _TextBlock:
    """A text block while it streams: its pieces, and the citations ``citations_delta``s added to it."""

    pieces: list[str]
    citations: list[JsonObject]
