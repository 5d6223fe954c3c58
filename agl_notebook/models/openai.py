"""`OpenAIModel`: any server that speaks OpenAI's Chat Completions, through the official ``openai`` client, streamed.

OpenAI itself, DeepSeek, Mistral, Groq, Gemini's compatibility endpoint, and the local servers a class can run
without any key (Ollama, vLLM, llama.cpp's server, LM Studio) all speak it (docs/models.md has each one's settings).
The ``openai`` package is an optional extra (``pip install 'agl_notebook[openai]'``), imported only when a reply is
first asked for.

A backend names one model on one server: ``OpenAIModel("gpt-4.1")`` (OpenAI, key from ``OPENAI_API_KEY``),
``OpenAIModel("deepseek-chat", base_url="https://api.deepseek.com", api_key_env="DEEPSEEK_API_KEY")``,
``OpenAIModel("llama3.2", base_url="http://localhost:11434/v1", free=True)`` (Ollama, no key). Its backend id, and so
every fingerprint, is ``openai:<model>@<scheme>://<host>:<port><path>``: a local ``llama3`` and a hosted one never
share records, and no userinfo or query (where some servers take a key) is ever part of it.

Which key is sent: ``api_key=`` when given (registered as a secret, so every exit scrubs it like the environment's);
else the variable ``api_key_env`` names; ``OPENAI_API_KEY`` is read only for OpenAI's own server, so an OpenAI key is
never sent to another host by default. A server with no key gets a placeholder the client needs, never a real key.

What a reply becomes: text deltas stream as `TextDelta`; tool calls are assembled from their argument deltas (by
index, so parallel calls interleave freely; the arguments parsed once the call is whole, so a split anywhere, inside
an escape or a character, is harmless) and yielded when the reply ends; the stop reason is mapped (``tool_calls``,
and ``stop`` from a server that sent calls anyway, are ``tool_use``; ``length`` is ``max_tokens``, or a
`ModelOutputTruncatedError` when a call was being written; ``content_filter`` is ``refusal``). Reasoning text a server
streams in the delta's extra fields (``reasoning_content``: DeepSeek, vLLM; ``reasoning``: Ollama, OpenRouter) is
shown as thinking (`ThinkingDelta`) and kept in the reply and its record as a thinking block (a `RawBlock` with no
signature), never sent back (Chat Completions takes none). Tool calls a model writes as DSML text are turned into
calls below the loop, as for every backend (`agl_notebook.models.markup`).

Usage: input tokens are the prompt tokens minus the cached ones (``prompt_tokens_details.cached_tokens``, counted as
cache reads); the request asks for the usage chunk (``stream_options``). A server that sends none ends the turn with
`UNKNOWN_USAGE`: the Run's account settles the request at its estimate and the record says "usage unknown".

Errors: every failure after the retries is a `ModelServerError` naming the server and the model, with the server's own
message (a model it does not know, tools it refuses, a key it rejects, a server that does not answer); nothing of
the step is recorded. Retries (429, 5xx, 408, 409, connection errors) are made here, as `AnthropicModel` makes them:
each wait capped, shown in the live view, and inside a ``run.map`` paced by the map (`agl_notebook._map_scope`).
Connecting has its own short timeout and a dead server is given up on within `DEAD_SERVER_SECONDS`, not after the
client's ten minutes times its retries.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from .._map_scope import current_pacer
from .._scope import current_scope
from .._secret_logs import scrub_logs
from .._secrets import register_secret
from ..errors import (
    InputError,
    MissingCredentialsError,
    ModelOutputTruncatedError,
    ModelServerError,
    UpstreamUnexpected,
)
from ..events import ModelRetryWaiting
from ..payloads import JsonObject, JsonValue
from ..transcript import THINKING_TYPES, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock
from .anthropic import MAX_RETRY_WAIT, _status_of, sdk_retry_wait
from .base import (
    UNKNOWN_USAGE,
    ModelEvent,
    ModelRequest,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
)

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI, AsyncStream
    from openai.types.chat import ChatCompletionChunk

    from .prices import Rates

__all__ = [
    "MODEL_STRING_PREFIX",
    "OPENAI_BASE_URL",
    "OpenAIModel",
    "backend_id_for",
    "chat_params",
    "default_base_url",
    "model_from_string",
    "parse_model_string",
]

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own server, the default ``base_url``."""
OPENAI_KEY_VARIABLE = "OPENAI_API_KEY"
"""The variable the key for OpenAI's own server is read from by default."""
NO_KEY = "no-key-needed"
"""What is sent as the key to a server that needs none (the client refuses to send a request without one)."""
CONNECT_TIMEOUT = 3.0
"""Seconds to wait for a connection to the server, per attempt."""
READ_TIMEOUT = 600.0
"""Seconds to wait between bytes of a reply (a local model on a CPU may think for minutes before its first token)."""
DEAD_SERVER_SECONDS = 10.0
"""A server that cannot be connected to is given up on once retrying would pass this many seconds."""

_sleep = asyncio.sleep  # what a retry waits with (tests replace it rather than wait)
_REASONING_MODEL = re.compile(r"(?:^|/)(?:o\d|gpt-5)", re.IGNORECASE)
_REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek and vLLM; Ollama and OpenRouter
_SECRET_QUERY = re.compile(r"key|token|secret|sig|auth|pass|code|cred", re.IGNORECASE)


class OpenAIModel:
    """One model on one server that speaks OpenAI's Chat Completions, through the ``openai`` client, streamed.

    Args:
        model: The model's name on that server (``"gpt-4.1"``, ``"deepseek-chat"``, ``"llama3.2"``).
        base_url: The server's API root; by default ``OPENAI_BASE_URL`` when set (as the ``openai`` client reads
            it), else OpenAI's own. A query in it (a key some servers take so) is sent, never recorded.
        api_key: The key, given in code: scrubbed from every record, view, log and error like the environment's.
        api_key_env: The environment variable holding the key; ``OPENAI_API_KEY`` for OpenAI's own server, none for
            another unless named (so an OpenAI key never goes to another host by default).
        client: A configured ``openai.AsyncOpenAI`` to send with instead (its base URL names the server).
        http_client: The ``httpx2.AsyncClient`` the backend's own client sends through (a proxy, a test transport).
        max_retries: How many times a failed request is retried (429, 5xx, connection errors); 2 by default.
        max_retry_wait: The longest wait before a retry, in seconds, whatever the server's ``retry-after`` asks.
        connect_timeout: Seconds to wait for a connection, per attempt.
        free: The person says this model costs nothing (a local server): its steps record $0, not "price unknown".
        rates: Its price per million tokens, when the library's table does not know it. Either is kept in each
            step's record (``engine.declared_rates``), so a program in another process prices the step so too.
        max_tokens_field: ``"max_tokens"`` or ``"max_completion_tokens"``; by default the second for OpenAI's
            reasoning models (o-series, gpt-5), which refuse the first, and the first for every other model.
        tools: False for a server or model that cannot take tools: a step that offers any is refused before a
            request.

    Raises:
        InputError: A setting is not of its kind (the message names it).
    """

    accepts: frozenset[str] = frozenset({"text", "tools"})
    """What a request to this backend may hold (`agl_notebook.models.base.model_accepts`): text and tools; no images,
    documents or server tools (a tool's result goes back as text)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        client: AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        max_retry_wait: float = MAX_RETRY_WAIT,
        connect_timeout: float = CONNECT_TIMEOUT,
        free: bool = False,
        rates: Rates | None = None,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
        tools: bool = True,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError(f"OpenAIModel(model=...) takes the model's name on its server, not {model!r}.")
        if client is not None:
            base_url = str(client.base_url)
        elif base_url is None:
            base_url = default_base_url()
        self.server = _Server.parse(base_url)
        """The server, as its backend id names it (no userinfo, no query)."""
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise InputError("OpenAIModel(api_key=...) takes the key as a non-empty string.")
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env.strip()):
            raise InputError(f"OpenAIModel(api_key_env=...) takes a variable's name, not {api_key_env!r}.")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InputError(f"OpenAIModel(max_retries=...) takes an int >= 0, not {max_retries!r}.")
        for name, value in (("max_retry_wait", max_retry_wait), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not (0 <= value < float("inf")):
                raise InputError(f"OpenAIModel({name}=...) takes a number of seconds >= 0, not {value!r}.")
        if max_tokens_field not in (None, "max_tokens", "max_completion_tokens"):
            raise InputError(
                f"OpenAIModel(max_tokens_field=...) takes 'max_tokens' or 'max_completion_tokens', not "
                f"{max_tokens_field!r}."
            )
        if free and rates is not None:
            raise InputError("OpenAIModel takes free=True or rates=..., not both.")
        self.model = model
        """The model every request is sent to."""
        self.max_retries = max_retries
        self.max_retry_wait = float(max_retry_wait)
        self.connect_timeout = float(connect_timeout)
        self.max_tokens_field: str = max_tokens_field or (
            "max_completion_tokens" if _REASONING_MODEL.search(model) else "max_tokens"
        )
        """The field the output limit is sent in."""
        self.tools = bool(tools)
        if api_key is not None:
            register_secret(api_key)
        for secret in self.server.secrets:
            register_secret(secret)
        self._api_key = api_key
        self._api_key_env = (
            api_key_env
            if api_key_env is not None
            else (OPENAI_KEY_VARIABLE if self.server.id == _Server.parse(OPENAI_BASE_URL).id else None)
        )
        self._client = client
        self._http_client = http_client
        self._env_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, AsyncOpenAI]]
        self._env_clients = weakref.WeakKeyDictionary()
        self._unretried: _Unretried | None = None  # the given client's copy with the SDK's retries off
        self._engine: JsonObject | None = None
        if free or rates is not None:
            from .prices import DECLARED_RATES, Rates, declare_rates

            declared = rates if rates is not None else Rates(0, 0, 0, 0, 0)
            declare_rates(self.backend_id(model), declared)
            # Kept in every record of this model, so another process (agl-notebook list, a new kernel) prices it so.
            self._engine = {DECLARED_RATES: declared.to_json()}

    def engine_record(self) -> JsonObject | None:
        """What a step's record keeps besides the backend: the rates the person gave (``free=``, ``rates=``), if any.

        A price is not part of the backend id (a price given later must not make the recordings miss), so it travels
        in the record's ``engine``, unfingerprinted.
        """
        return self._engine

    def backend_id(self, model: str) -> str:
        """``openai:<model>@<scheme>://<host>:<port><path>``: this model on this server, whatever ``model`` says."""
        return backend_id_for(self.model, self.server.id)

    def _key(self) -> str:
        if self._api_key is not None:
            return self._api_key
        if self._api_key_env is None:
            return NO_KEY
        import os  # the variable the person named (OPENAI_API_KEY is agl_notebook._settings.OPENAI_API_KEY)

        key = os.environ.get(self._api_key_env, "")
        if not key:
            raise MissingCredentialsError(
                f"{self._api_key_env} is not set, so this step cannot ask {self.model!r} at {self.server.id}. Set "
                f"it in the environment the kernel or process runs in, or pass OpenAIModel(api_key=...) (scrubbed "
                "from every record); a server that needs no key takes api_key_env=None. To run without it, replay "
                "the step from a recording or run it on a scripted model."
            )
        return key

    async def _client_now(self) -> AsyncOpenAI:
        if self._client is not None:
            return self._client
        key = self._key()  # read now, so a key set later in the session is picked up
        loop = asyncio.get_running_loop()
        cached = self._env_clients.get(loop)
        if cached is not None and cached[0] == key:
            return cached[1]
        import httpx2

        try:
            import openai
        except ImportError:  # an optional extra: a notebook replays without it, a live step needs it
            raise InputError(
                f"{self.model!r} at {self.server.id} runs live through the openai package, which is not installed: "
                "pip install 'agl_notebook[openai]' (recorded steps replay without it)."
            ) from None
        client = openai.AsyncOpenAI(
            api_key=key,
            base_url=self.server.send_url,
            default_query=self.server.query or None,
            max_retries=0,
            timeout=httpx2.Timeout(READ_TIMEOUT, connect=self.connect_timeout),
            http_client=self._http_client,
        )
        self._env_clients[loop] = (key, client)
        if cached is not None:
            await cached[1].close()
        return client

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the server's reply to ``request``: text and reasoning deltas, the tool calls, then `TurnEnd`.

        Raises:
            InputError: The request holds what this backend cannot send (an image, a document, a server tool), or
                tools to a backend made with ``tools=False``; before any request.
            MissingCredentialsError: The key's variable is not set.
            ModelServerError: The server refused the request or could not be reached, after the retries.
            ModelOutputTruncatedError: The reply hit the output limit in the middle of a tool call.
            UpstreamUnexpected: The stream broke its own rules (no stop reason, arguments that are not a JSON object).
        """
        if request.tools and not self.tools:
            raise InputError(
                f"{self.model!r} at {self.server.id} was set up with tools=False, but this step offers tools "
                f"({', '.join(t.name for t in request.tools)}). Give the role a model that can call tools."
            )
        params = chat_params(request, self.model, self.max_tokens_field)
        scrub_logs("openai", "openai._base_client", "httpx2", log.name)  # the client logs request bodies at DEBUG
        client = await self._client_now()
        pacer = current_pacer.get()
        retries = self.max_retries if pacer is None else pacer.retries
        cap = self.max_retry_wait if pacer is None else min(self.max_retry_wait, pacer.max_wait)
        once = self._without_retries(client) if self._client is not None else client
        attempt = ticket = 0
        first = time.monotonic()
        async with AsyncExitStack() as stack:
            while True:
                if pacer is not None:
                    ticket = await pacer.acquire()
                try:
                    # A retry says which it is, as the client's own retries do (the first attempt's 0 it sends itself).
                    headers = {"x-stainless-retry-count": str(attempt)} if attempt else None
                    chunks = await _post_streaming(once, params, headers)
                    break
                except BaseException as e:  # a cancelled attempt gives its slot back too
                    if pacer is not None:
                        pacer.release(ticket, _status_of(e))
                    if not isinstance(e, Exception):
                        raise
                    waiting = _retry_wait(e, attempt, retries, cap)
                    if waiting is not None and _no_response(e):
                        # A server that cannot be reached is given up on in seconds, not after every retry.
                        spent = time.monotonic() - first
                        if spent + waiting.seconds + self.connect_timeout > DEAD_SERVER_SECONDS:
                            waiting = None
                    if waiting is None:
                        raise self._server_error(e, request) from e
                    attempt += 1
                    self._announce(waiting)
                    await _sleep(waiting.seconds)
            stack.push_async_callback(chunks.close)
            if pacer is not None:  # the slot is held until the reply has streamed (or broke off)
                stack.callback(pacer.release, ticket, None)
            reply = _Reply(self.model, self.server.id, self.max_tokens_field, request.max_tokens)
            try:
                async for chunk in chunks:
                    for out in reply.feed(chunk):
                        yield out
            except (ValueError, _transport_errors()) as e:  # JSON and Unicode decoding errors are ValueErrors
                raise UpstreamUnexpected(
                    f"The stream from {self.model!r} at {self.server.id} broke off: {type(e).__name__}: {e}"
                ) from e
            except _api_errors() as e:  # an error sent inside the stream
                raise self._server_error(e, request) from e
            for event in reply.finish_events(len(request.messages)):
                yield event

    def _announce(self, waiting: ModelRetryWaiting) -> None:
        """Tell the running step's views (a live line) and the log that a retry waits."""
        log.info(
            "Retrying the request to %r at %s in %.1f s (%s%s)",
            self.model,
            self.server.id,
            waiting.seconds,
            waiting.reason,
            f"; the server asked for {waiting.asked:.0f} s" if waiting.asked is not None else "",
        )
        scope = current_scope.get()
        if scope is not None:
            scope.emit(waiting)

    def _server_error(self, error: Exception, request: ModelRequest) -> Exception:
        """The one error a failed request ends in: the server's message, naming the server and the model."""
        import openai

        if not isinstance(error, openai.OpenAIError):
            return error
        where = f"{self.model!r} at {self.server.id}"
        status = getattr(error, "status_code", None)
        said = _server_message(error)
        if isinstance(error, openai.APIConnectionError):
            text = f"The server for {where} did not answer ({said}). Is it running, and is base_url right?"
        elif status == 404:
            text = f"The server for {where} does not know that model, or that path (HTTP 404: {said})."
        elif status in (401, 403):
            text = f"The server for {where} refused the key (HTTP {status}: {said})."
        elif request.tools and status in (400, 422, 500) and "tool" in said.lower():
            text = (
                f"The server for {where} refused the tools of this step (HTTP {status}: {said}). This model cannot "
                "call tools there: give the role a model that can (docs/models.md)."
            )
        elif status == 429:
            text = f"The server for {where} is still rate limiting after the retries (HTTP 429: {said})."
        else:
            text = f"The server for {where} refused the request (HTTP {status}: {said})."
        return ModelServerError(
            text, server=self.server.id, model=self.model, status_code=status if isinstance(status, int) else None
        )

    def _without_retries(self, client: AsyncOpenAI) -> AsyncOpenAI:
        """A given ``client`` with the SDK's own retries off, copied once and reused while its settings stay.

        A copy per request runs the SDK's constructor again, and each new copy looks the platform up on a worker
        thread before its first request; a key or URL assigned to the client later still makes a new copy.
        """
        settings = _copied_settings(client)
        kept = self._unretried
        if kept is None or kept.client is not client or kept.settings != settings:
            kept = self._unretried = _Unretried(client, settings, client.with_options(max_retries=0))
        return kept.copy

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.server.id!r})"


@dataclass(frozen=True)
class _Unretried:
    """A client's copy with the SDK's retries off, and the client's settings it was made with."""

    client: AsyncOpenAI
    settings: tuple[object, ...]
    copy: AsyncOpenAI


def _copied_settings(client: AsyncOpenAI) -> tuple[object, ...]:
    """What of ``client`` a person may assign after making it, which its copy must follow."""
    return (client.api_key, client.organization, client.project, client.base_url, client.timeout)


def backend_id_for(model: str, server: str) -> str:
    """The backend id of ``model`` on ``server`` (``scheme://host:port/path``)."""
    return f"openai:{model}@{server}"


def default_base_url() -> str:
    """Where a backend that names no server sends: ``OPENAI_BASE_URL`` when set, else OpenAI's own server."""
    from .._settings import OPENAI_BASE_URL as BASE_URL_SETTING

    return BASE_URL_SETTING.text() or OPENAI_BASE_URL


# --- A model named by a string --------------------------------------------------------------------------------------

MODEL_STRING_PREFIX = "openai:"
"""What starts a model string naming an OpenAI-compatible model: ``"openai:<model>"`` or ``"openai:<model>@<url>"``."""

_SERVER_AFTER_AT = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")  # the "@" a server URL (with its scheme) follows
_HOST_LIKE = re.compile(r"^(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9.-]+:\d+)(?:/|$)")
_by_string: dict[tuple[str, str], OpenAIModel] = {}


def parse_model_string(text: str) -> tuple[str, str]:
    """The model and the base URL a model string names.

    ``"openai:<model>"``: the server ``OPENAI_BASE_URL`` names, else OpenAI's. ``"openai:<model>@<http(s) URL>"``:
    that server (the backend id's own form, so an id `agl-notebook list` shows names its backend again).

    A key has no place in a string (a role's model is shown and kept in code): a URL with userinfo or a query is
    refused, naming neither; `OpenAIModel` takes ``api_key=``, ``api_key_env=`` and such a URL.

    Raises:
        InputError: ``text`` is not of that form (the message names it, and the form).
    """
    form = "'openai:<model>' or 'openai:<model>@<server URL>', such as 'openai:llama3.2@http://localhost:11434/v1'"
    rest = text.removeprefix(MODEL_STRING_PREFIX)
    found = _SERVER_AFTER_AT.search(rest)
    model, url = (rest[: found.start()], rest[found.end() :]) if found else (rest, None)
    if not model.strip() or model != model.strip() or any(c.isspace() for c in model):
        named = "names no model" if not model.strip() else "has white space in its model name"
        raise InputError(f"The model string {text!r} {named}: write {form}.")
    if url is None:
        server = model.rpartition("@")[2] if "@" in model else ""
        if model.endswith("@") or (server and _HOST_LIKE.match(server)):
            raise InputError(
                f"The model string {text!r} names its server without a scheme: after '@' comes the server's whole "
                f"URL, http:// or https:// included; write {form}."
            )
        return model, default_base_url()
    try:
        parts = urlsplit(url)
        _ = parts.port  # a bad port is found here
    except ValueError:
        raise InputError(f"The model string for {model!r} names a server that is not a URL: write {form}.") from None
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise InputError(
            f"The model string for {model!r} holds a key or other settings in its server URL (userinfo, a query or "
            "a fragment), which a role's model must not show: give the role OpenAIModel(model, base_url=..., "
            "api_key=... or api_key_env=...) instead (docs/models.md)."
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"The model string {text!r} names no http or https server after '@': write {form}.")
    return model, url


def model_from_string(text: str) -> OpenAIModel:
    """The backend a model string names (`parse_model_string`), one per model and server.

    So its client and connections are reused by every step. The key is the one `OpenAIModel` reads:
    ``OPENAI_API_KEY`` for OpenAI's own server only; another server is sent none (one that needs a key takes an
    `OpenAIModel` with ``api_key_env=``).
    """
    model, url = parse_model_string(text)
    found = _by_string.get((model, url))
    if found is None:
        found = _by_string[model, url] = OpenAIModel(model, base_url=url)
    return found


def backend_id_of_string(text: str) -> str:
    """The backend id `model_from_string` gives ``text``'s backend, without making it."""
    model, url = parse_model_string(text)
    return backend_id_for(model, _Server.parse(url).id)


@dataclass(frozen=True)
class _Server:
    """A base URL taken apart: what identifies the server, what is sent, and what must never be shown."""

    id: str
    """``scheme://host:port/path``: no userinfo, no query, no fragment; the port always written."""
    send_url: str = field(repr=False)
    """The URL the client is given (userinfo kept, the query apart)."""
    query: dict[str, str] = field(repr=False)
    """The base URL's query, sent with every request as the client's default query."""
    secrets: tuple[str, ...] = field(repr=False)
    """The userinfo's password and the query's values: scrubbed wherever they might appear."""

    @classmethod
    def parse(cls, url: str) -> _Server:
        if not isinstance(url, str) or not url.strip():
            raise InputError(f"OpenAIModel(base_url=...) takes the server's URL, such as {OPENAI_BASE_URL!r}.")
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as e:
            raise InputError(f"OpenAIModel(base_url=...) is not a URL ({e}).") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(
                "OpenAIModel(base_url=...) takes an http or https URL with a host, such as "
                f"'http://localhost:11434/v1'; {parts.scheme or 'no scheme'}://{parts.hostname or ''} is not one."
            )
        host = parts.hostname.lower()
        shown_host = f"[{host}]" if ":" in host else host
        port = port if port is not None else (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        # A value that may be a key (named so, or long enough), never a short setting such as an API version.
        secrets = [v for k, v in query.items() if len(v) >= 8 and (_SECRET_QUERY.search(k) or len(v) >= 16)]
        if parts.password:
            secrets.append(unquote(parts.password))
        netloc = parts.netloc.rsplit("@", 1)
        send = f"{parts.scheme}://{netloc[0] + '@' if len(netloc) == 2 else ''}{shown_host}:{port}{path}"
        return cls(f"{parts.scheme}://{shown_host}:{port}{path}", send, query, tuple(secrets))


async def _post_streaming(
    client: AsyncOpenAI, params: dict[str, JsonValue], headers: dict[str, str] | None
) -> AsyncStream[ChatCompletionChunk]:
    """``client.chat.completions.create(**params, stream=True)``, sent through the client's ``post``.

    ``create`` walks every parameter through the SDK's type-driven transform (aliases, dates, files) before sending:
    about 0.2 ms of CPU a request for a step's small body, more than the rest of agl_notebook's work on it, and a
    no-op here, since `chat_params` builds the body as the API's JSON already. ``post`` is the client's documented
    way to send a body as it is (its README, "Undocumented requests"); the request is otherwise the very one
    ``create`` makes: the same path, the key as a bearer token and only that (``security`` as ``create`` sets it),
    retries and timeouts from the client, the reply read as ``AsyncStream[ChatCompletionChunk]``.
    """
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    options: dict[str, object] = {"security": {"bearer_auth": True}}
    if headers:
        options["headers"] = headers
    return await client.post(
        "/chat/completions",
        body={**params, "stream": True},
        cast_to=ChatCompletion,
        options=cast(Any, options),
        stream=True,
        stream_cls=AsyncStream[ChatCompletionChunk],
    )


def chat_params(request: ModelRequest, model: str, max_tokens_field: str = "max_tokens") -> dict[str, JsonValue]:
    """The Chat Completions parameters for ``request`` (without ``stream``), as JSON.

    The system text is the first message; a user message's tool results are ``tool`` messages (before its text, as
    the API wants them right after the assistant's calls); an assistant message's tool calls are ``tool_calls`` with
    their arguments as JSON text. Blocks Chat Completions has no place for (a reply's thinking) are left out.

    Raises:
        InputError: A message holds a block this backend cannot send (an image, a document).
    """
    messages: list[JsonValue] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for i, message in enumerate(request.messages):
        messages.extend(_message_json(message, i, model))
    params: dict[str, JsonValue] = {
        "model": model,
        "messages": messages,
        max_tokens_field: request.max_tokens,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [_tool_json(t) for t in request.tools]
    return params


def _message_json(message: Message, index: int, model: str) -> list[JsonValue]:
    texts: list[str] = []
    calls: list[JsonValue] = []
    results: list[JsonValue] = []
    blocks: tuple[object, ...] = message.content  # other kinds of block are coming (images, documents)
    for block in blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append({"id": block.id, "type": "function", "function": {"name": block.name, "arguments": arguments}})
        elif isinstance(block, ToolResultBlock):
            if block.media:  # never dropped without a word: the agent would answer about images it never saw
                raise InputError(
                    f"Message {index} holds the result of tool call {block.tool_use_id} with {len(block.media)} "
                    f"image(s), which OpenAIModel ({model!r}) cannot send: Chat Completions here takes text only."
                )
            content = f"Error: {block.content}" if block.is_error else block.content
            results.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        elif isinstance(block, RawBlock) and block.type in THINKING_TYPES:
            continue  # Chat Completions takes no reasoning back (DeepSeek refuses it)
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise InputError(
                f"Message {index} holds a {kind!r} block, which OpenAIModel ({model!r}) cannot send: Chat "
                "Completions here takes text and tool calls only (no images, documents or server tools)."
            )
    out: list[JsonValue] = list(results)
    if message.role == "assistant":
        reply: JsonObject = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            reply["tool_calls"] = calls
        out.append(reply)
    elif texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _tool_json(spec: ToolSpec) -> JsonObject:
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.input_schema},
    }


def _retry_wait(error: Exception, attempt: int, retries: int, cap: float) -> ModelRetryWaiting | None:
    """How long to wait before retrying after ``error`` (the client's rules, as Claude's backend), or None."""
    import openai

    return sdk_retry_wait(openai, error, attempt, retries, cap)


def _no_response(error: Exception) -> bool:
    import openai

    return isinstance(error, openai.APIConnectionError)


def _server_message(error: Exception) -> str:
    """The server's own words: ``error.message`` of its JSON, or its body, short."""
    body = getattr(error, "body", None)
    said: object = None
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        said = inner.get("message") if isinstance(inner, Mapping) else inner
    if not isinstance(said, str) or not said.strip():
        said = getattr(error, "message", None) or str(error)
    if isinstance(error, Exception) and error.__cause__ is not None and not isinstance(body, Mapping):
        said = f"{said}: {type(error.__cause__).__name__}"
    text = str(said).strip()
    return text if len(text) <= 500 else text[:500] + "..."


def _transport_errors() -> type[Exception]:
    import httpx2

    return httpx2.TransportError


def _api_errors() -> type[Exception]:
    import openai

    return openai.APIError


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


class _Reply:
    """Assembles one streamed reply: tool calls by index, the stop reason and the usage."""

    def __init__(self, model: str, server: str, max_tokens_field: str, max_tokens: int) -> None:
        self.where = f"{model!r} at {server}"
        self.limit = f"{max_tokens_field}={max_tokens}"
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.refused = False
        self.usage: Usage | None = None
        self.reasoning: list[str] = []

    def feed(self, chunk: ChatCompletionChunk) -> list[ModelEvent]:
        """The events to yield for one chunk (text and reasoning at once; calls wait for the end)."""
        out: list[ModelEvent] = []
        if chunk.usage is not None:  # the last chunk's, or every chunk's running total on some servers
            self.usage = _usage(chunk.usage)
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue  # one reply is asked for (n=1)
            delta = choice.delta
            if delta is not None:
                extra = delta.model_extra
                if extra:  # most servers send no field beyond the SDK's: nothing to look for then
                    for name in _REASONING_FIELDS:
                        reasoning = extra.get(name)
                        if isinstance(reasoning, str) and reasoning:
                            self.reasoning.append(reasoning)
                            out.append(ThinkingDelta(reasoning))
                if self.reasoning and (delta.content or delta.refusal or delta.tool_calls):
                    out.extend(self._close_reasoning())
                if delta.content:
                    out.append(TextDelta(delta.content))
                if delta.refusal:
                    self.refused = True
                    out.append(TextDelta(delta.refusal))
                for position, piece in enumerate(delta.tool_calls or ()):
                    index = piece.index if isinstance(piece.index, int) else len(self.calls) + position
                    call = self.calls.setdefault(index, _Call())
                    if piece.id:
                        call.id = piece.id
                    function = piece.function
                    if function is not None:
                        if function.name:
                            call.name = function.name  # a few servers repeat the name on every piece
                        if function.arguments:
                            call.parts.append(function.arguments)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        return out

    def finish_events(self, turn: int) -> list[ModelEvent]:
        """The calls and the `TurnEnd` of a reply whose stream ended, or why the reply cannot be used.

        ``turn`` (the reply's place in the conversation) names a call the server gave no id.
        """
        ordered = [self.calls[i] for i in sorted(self.calls)]
        reason = self.finish_reason
        if reason == "length" and ordered:
            raise ModelOutputTruncatedError(
                f"{self.where} ran out of output tokens ({self.limit}) in the middle of its call to tool "
                f"{ordered[-1].name or '?'!r}, so the call cannot be read. Raise the role's max_tokens, or ask for "
                "smaller arguments."
            )
        if reason is None:
            raise UpstreamUnexpected(
                f"The stream from {self.where} ended without a finish reason, so the reply is incomplete (the "
                "connection was probably cut)."
            )
        events: list[ModelEvent] = [*self._close_reasoning()]
        events += [self._call(turn, n, call) for n, call in enumerate(ordered)]
        stop: StopReason
        if ordered:
            stop = "tool_use"  # "tool_calls"; also "stop" from a server that sent calls anyway
        elif reason == "length":
            stop = "max_tokens"
        elif reason == "content_filter" or self.refused:
            stop = "refusal"
        elif reason in ("stop", "tool_calls", "function_call", "eos", "end_turn"):
            stop = "end_turn"
        else:
            raise UpstreamUnexpected(f"The stream from {self.where} ended with an unknown finish reason {reason!r}.")
        events.append(TurnEnd(stop, self.usage if self.usage is not None else UNKNOWN_USAGE))
        return events

    def _close_reasoning(self) -> list[ModelEvent]:
        """The reasoning streamed so far as one thinking block (none when there is none).

        It is kept in the reply, and so its record, before what follows it.
        """
        if not self.reasoning:
            return []
        text = "".join(self.reasoning)
        self.reasoning.clear()
        return [RawBlock({"type": "thinking", "thinking": text})]

    def _call(self, turn: int, n: int, call: _Call) -> ToolCall:
        if not call.name:
            raise UpstreamUnexpected(f"{self.where} sent a tool call with no name (call {n + 1} of its reply).")
        raw = "".join(call.parts)
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            excerpt = raw if len(raw) <= 200 else raw[:200] + "..."
            raise UpstreamUnexpected(
                f"{self.where}'s call to tool {call.name!r} could not be read: its arguments are not JSON: {excerpt!r}."
            ) from None
        if not isinstance(args, dict):
            raise UpstreamUnexpected(
                f"{self.where}'s call to tool {call.name!r} could not be read: its arguments are JSON but not an "
                f"object: {raw[:200]!r}."
            )
        return ToolCall(call.id or f"call_{turn}_{n}", call.name, cast(JsonObject, args))


def _usage(usage: Any) -> Usage:
    """The API's usage as the library counts it: the cached prompt tokens apart from the rest of the input."""
    prompt = usage.prompt_tokens if isinstance(usage.prompt_tokens, int) else 0
    output = usage.completion_tokens if isinstance(usage.completion_tokens, int) else 0
    details = usage.prompt_tokens_details
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    cached = cached if isinstance(cached, int) and 0 <= cached <= prompt else 0
    return Usage(input_tokens=prompt - cached, output_tokens=output, cache_read_input_tokens=cached)
