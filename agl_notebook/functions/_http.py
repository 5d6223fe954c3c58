"""The ``api`` command's HTTP: one request through a profile, with httpx2 (the client the anthropic SDK brings).

Secrets: a profile names environment variables for its secret headers and query values; they are read when a live
request is made (from the environment the agent was given) and go only into that request to the profile's own
server (paths are relative, redirects are not followed). Everything that comes back, the body and any error
message, is scrubbed of them before anything else sees it (a JSON body also in its decoded strings, where escapes
can hide a secret from the raw text), so a server that echoes a token cannot put it in a variable, a log, a view,
a recording or an error. The public URL (without the secret query values) is what
events and the tape show.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from .._canonical import digest
from .._secret_logs import LOG_FILTER, scrub_logs
from .._secrets import scrub, scrub_text
from ..payloads import JsonObject
from ._tape import Tape, entry_size, error_entry
from .errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    CommandError,
    ExpressionError,
    MissingSecretError,
    ReplayedError,
)
from .expressions import Limits, measure
from .spec import EnvValue, Profile

_MIN_SECRET = 4  # a shorter value is no secret, and scrubbing it would mangle ordinary text
# httpx2 logs every request's URL (query included) at INFO: the secrets of requests in flight are scrubbed from
# these loggers' records before any handler sees them.
_HTTP_LOGGERS = (
    "httpx2",
    "httpcore2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
)


@dataclass(frozen=True)
class ApiRequest:
    """One request, as the ``api`` command built it (nothing secret in it yet)."""

    profile: Profile
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: Any
    timeout: float

    @property
    def public_url(self) -> str:
        """The URL without the profile's secret query values: what events, errors and the tape show."""
        base = self.profile.base_url
        url = base if not self.path else base.rstrip("/") + "/" + self.path.lstrip("/")
        plain = [(k, v) for k, v in self.profile.query if isinstance(v, str)] + list(self.query)
        return f"{url}?{urlencode(plain)}" if plain else url

    def key(self) -> str:
        """A digest of what is asked, for the tape."""
        return digest(
            {
                "method": self.method,
                "url": self.public_url,
                "headers": [list(h) for h in self.headers],
                "body": self.body,
            }
        )[:24]


def build_request(
    profile: Profile, method: str, path: Any, query: Any, headers: Mapping[str, Any], body: Any, timeout: float | None
) -> ApiRequest:
    """Check the evaluated parts of a request."""
    if path is None:
        path = ""
    if not isinstance(path, str):
        raise CommandError(f"the path must be a string, not {type(path).__name__}.")
    if "://" in path or path.startswith("//") or "\\" in path or any(c in path for c in "\r\n"):
        raise CommandError(
            f"the path {path[:80]!r} must be relative to the profile's baseUrl: requests go only to "
            "the profile's server."
        )
    pairs: list[tuple[str, str]] = []
    if query is not None:
        if not isinstance(query, Mapping):
            raise CommandError(f"query must be an object of name → value, not {type(query).__name__}.")
        for name, value in query.items():
            for item in value if isinstance(value, list | tuple) else [value]:
                if item is None:
                    continue
                if not isinstance(item, str | int | float | bool):
                    raise CommandError(f"the query value {name!r} must be text or a number, not {type(item).__name__}.")
                pairs.append((str(name), _text(item)))
    header_pairs: list[tuple[str, str]] = []
    for name, value in headers.items():
        if not isinstance(value, str | int | float):
            raise CommandError(f"the header {name!r} must be text or a number, not {type(value).__name__}.")
        text = str(value)
        if "\r" in text or "\n" in text:
            raise CommandError(f"the header {name!r} may not hold a line break.")
        header_pairs.append((name, text))
    return ApiRequest(
        profile,
        method,
        path,
        tuple(pairs),
        tuple(header_pairs),
        body,
        timeout if timeout is not None else profile.timeout,
    )


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def secrets_of(profile: Profile, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The profile's secret headers and query values read from ``environ``, and the values to scrub."""
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    to_scrub: list[str] = []
    for target, items in ((headers, profile.headers), (query, profile.query)):
        for name, value in items:
            if isinstance(value, EnvValue):
                secret = environ.get(value.variable)
                if not secret:
                    raise MissingSecretError(
                        f"the profile {profile.name!r} reads the environment variable "
                        f"{value.variable}, which is not set; set it and run again."
                    )
                target[name] = value.prefix + secret
                if len(secret) >= _MIN_SECRET:
                    to_scrub.append(secret)
            else:
                target[name] = value
    return headers, query, to_scrub


def _scrub_decoded(text: str, secrets: list[str]) -> str:
    r"""JSON text scrubbed of secrets in its decoded strings too, re-encoded only when that changed something.

    JSON can spell a secret in ways the raw text does not show (``\/`` for ``/``, as PHP writes by default, or
    ``\u`` escapes), and the body is decoded before anything uses it, so the decoded values are what must be clean.
    """
    if not secrets or text.lstrip()[:1] not in ("{", "[", '"'):
        return text
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return text  # not JSON: nothing decodes it, so the raw text was all there was to scrub
    clean = scrub(decoded, secrets)
    return text if clean == decoded else json.dumps(clean, ensure_ascii=False)


async def send(
    request: ApiRequest, *, client: Callable[[], Any], tape: Tape, environ: Mapping[str, str], limits: Limits
) -> tuple[int, Any]:
    """Send the request live (keeping the response on the tape) or take it from the tape; return status and body.

    Raises:
        ApiError: An error status, a timeout, a connection failure, a body that is too large or not JSON.
    """
    what = f"the response to {request.method} {request.public_url}"
    if tape.replaying:
        entry = tape.take("api", request.key(), what)
        error = entry.get("error")
        if isinstance(error, dict):
            raise _error_from(error)
    else:
        try:
            entry = await _live(request, client(), environ)
            size = entry_size(entry)
            if not tape.fits(size):
                # Kept as the error it becomes, so the call replays the same way: every response of a call is
                # kept for its recording, and 150 responses under their own bound took 2.25 GB here.
                raise ApiError(
                    f"the response to {request.method} {request.public_url} ({len(str(entry.get('text'))):,} "
                    f"characters) would make this call's recording larger than {tape.max_bytes:,} bytes (the "
                    f"responses and replies before it take {tape.size:,}); raise load_agent's max_recording_bytes "
                    "or ask for less.",
                    status=status if isinstance(status := entry.get("status"), int) else None,
                )
        except ApiError as e:
            tape.record(
                {"kind": "api", "key": request.key(), "request": _request_json(request), "error": error_entry(e)}
            )
            raise
        tape.record(entry, size)
    return _body(request, entry, limits)


def _request_json(request: ApiRequest) -> JsonObject:
    return {"profile": request.profile.name, "method": request.method, "url": request.public_url}


async def _live(request: ApiRequest, client: Any, environ: Mapping[str, str]) -> JsonObject:
    import httpx2

    secret_headers, query, secrets = secrets_of(request.profile, environ)
    headers = {**secret_headers, **dict(request.headers)}
    base = request.profile.base_url
    url = base if not request.path else base.rstrip("/") + "/" + request.path.lstrip("/")
    params = list(query.items()) + list(request.query)
    body = {} if request.body is None else {"json": request.body}
    try:
        scrub_logs(*_HTTP_LOGGERS)
        with LOG_FILTER.holding(secrets):
            return await _exchange(request, client, url, params, headers, body, secrets)
    except ApiError:
        raise
    except (TimeoutError, httpx2.TimeoutException):
        raise ApiTimeoutError(
            f"no response from {request.method} {request.public_url} within {request.timeout:g} s."
        ) from None
    except (httpx2.HTTPError, OSError) as e:
        detail = scrub_text(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__, secrets)
        raise ApiConnectionError(f"{request.method} {request.public_url} failed: {detail}") from None


async def _exchange(
    request: ApiRequest,
    client: Any,
    url: str,
    params: list[tuple[str, str]],
    headers: dict[str, str],
    body: dict[str, Any],
    secrets: list[str],
) -> JsonObject:
    limit = request.profile.max_response_bytes
    async with asyncio.timeout(request.timeout):
        async with client.stream(
            request.method, url, params=params, headers=headers, timeout=request.timeout, **body
        ) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ApiError(
                        f"the response to {request.method} {request.public_url} is larger than "
                        f"{limit:,} bytes (the profile's maxResponseBytes).",
                        status=response.status_code,
                    )
                chunks.append(chunk)
            encoding = response.encoding or "utf-8"
            try:
                text = b"".join(chunks).decode(encoding, errors="replace")
            except LookupError:
                text = b"".join(chunks).decode("utf-8", errors="replace")
            status = int(response.status_code)
            reason = str(response.reason_phrase or "")
            content_type = str(response.headers.get("content-type", ""))
    return {
        "kind": "api",
        "key": request.key(),
        "request": _request_json(request),
        "status": status,
        "reason": scrub_text(reason, secrets),
        "contentType": content_type,
        "text": _scrub_decoded(scrub_text(text, secrets), secrets),
    }


def _body(request: ApiRequest, entry: JsonObject, limits: Limits) -> tuple[int, Any]:
    status = entry.get("status")
    text = entry.get("text")
    content_type = str(entry.get("contentType", ""))
    if not isinstance(status, int) or not isinstance(text, str):
        raise ReplayedError("ApiError", "the recorded response is damaged.")
    body: Any = text
    if not text:
        body = None
    elif "json" in content_type.lower():
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            if status < 300:
                raise ApiError(
                    f"the response to {request.method} {request.public_url} says it is JSON but is not.",
                    status=status,
                    body=text[:2000],
                ) from None
    try:
        measure(body, limits)
    except ExpressionError:
        raise ApiError(
            f"the response to {request.method} {request.public_url} is too large or too deeply nested to use.",
            status=status,
        ) from None
    if status >= 300:
        reason = f" {entry.get('reason')}" if entry.get("reason") else ""
        raise ApiError(
            f"HTTP {status}{reason} from {request.method} {request.public_url}"
            f"{' (redirects are not followed)' if status < 400 else ''}.",
            status=status,
            body=body,
        )
    return status, body


def _error_from(error: dict[str, Any]) -> Exception:
    kinds: dict[str, type[ApiError]] = {
        cls.__name__: cls for cls in (ApiError, ApiTimeoutError, ApiConnectionError, MissingSecretError)
    }
    cls = kinds.get(str(error.get("type")))
    status = error.get("status")
    if cls is not None:
        return cls(str(error.get("message")), status=status if isinstance(status, int) else None)
    return ReplayedError(str(error.get("type")), str(error.get("message")))
