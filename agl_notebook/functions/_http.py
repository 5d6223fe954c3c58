"""The ``api`` command's HTTP: one request through a profile, with httpx2 (the client the anthropic SDK brings).

Secrets: a profile names environment variables for its secret headers and query values; they are read when a live
request is made (from the environment the agent was given) and go only into that request to the profile's own
server (paths are relative, redirects are not followed). Everything that comes back, the body and any error
message, is scrubbed of them before anything else sees it (in every spelling, JSON escapes included, whether or not
the body parses), so a server that echoes a token cannot put it in a variable, a log, a view, a recording or an
error. The public URL (without the secret query values) is what
events and the tape show.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode

from .._canonical import digest
from .._secret_logs import LOG_FILTER, scrub_logs
from .._secrets import scrub_text
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
from .spec import ROUTING_HEADERS, EnvValue, Profile, header_text_problem

_DECODINGS = 4  # a path still changing after this many percent-decodings is refused
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
MIN_SECRET = 4
"""A profile's secret shorter than this is not scrubbed (it is no secret, and scrubbing it would mangle text)."""
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
    profile: Profile,
    method: str,
    path: Any,
    query: Any,
    headers: Mapping[str, Any],
    body: Any,
    timeout: float | None,
    *,
    where: str = "",
) -> ApiRequest:
    """Check the evaluated parts of a request; ``where`` names the command in the errors.

    Raises:
        ApiError: A request that would leave its profile (a path outside the base path, a header that routes it
            elsewhere) or that HTTP cannot carry (a header with a line break, a non-ASCII character, no name).
    """
    command = f"the api command at {where}" if where else "the api command"
    if path is None:
        path = ""
    if not isinstance(path, str):
        raise ApiError(f"{command}: the path must be a string, not {type(path).__name__}.")
    path = _path_in_profile(path, command)
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
    header_pairs = [(name, _header_value(name, value, command)) for name, value in headers.items()]
    return ApiRequest(
        profile,
        method,
        path,
        tuple(pairs),
        tuple(header_pairs),
        body,
        timeout if timeout is not None else profile.timeout,
    )


def _path_in_profile(path: str, command: str) -> str:
    r"""``path`` with its ``.`` and ``..`` segments resolved, checked to stay under the profile's base path.

    The check reads the path as a server might: percent-decoded (again while anything decodes: ``%252e``), with
    ``\`` as a separator too, and no prefix may climb above the base path. What is sent, shown and recorded is the
    path with its literal dot segments resolved (an encoded one is sent as written: the check covered both
    readings). A ``?`` or ``#`` is refused: the query comes only from ``query``, so what is sent is what is shown.
    """
    refused = f"{command}: the path {path[:80]!r}"
    if "://" in path or path.startswith("//") or "\\" in path:
        raise ApiError(
            f"{refused} must be relative to the profile's baseUrl: requests go only to the profile's server."
        )
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise ApiError(f"{refused} holds a control character (a line break, a tab, NUL); a path cannot carry one.")
    if "?" in path or "#" in path:
        raise ApiError(
            f"{refused} holds {'?' if '?' in path else '#'}: give query values in the command's query (so what is "
            "sent is what is shown and recorded); a fragment is never sent."
        )
    decoded = path
    for _ in range(_DECODINGS):
        once = unquote(decoded)
        if once == decoded:
            break
        decoded = once
    else:
        raise ApiError(f"{refused} is percent-encoded over and over; send it decoded.")
    depth = 0
    for segment in re.split(r"[/\\]", decoded):
        if segment == "..":
            depth -= 1
            if depth < 0:
                raise ApiError(
                    f"{refused} climbs above the profile's base path ({'..'} segments, also percent-encoded); "
                    "requests go only under the profile's baseUrl."
                )
        elif segment not in ("", "."):
            depth += 1
    return _without_dot_segments(path)


def _without_dot_segments(path: str) -> str:
    """``path`` with its literal ``.`` and ``..`` segments resolved (RFC 3986's remove_dot_segments, relative)."""
    segments = path.split("/")
    if not any(s in (".", "..") for s in segments):
        return path
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out and out != [""]:  # the leading "" of "/a" is where the path starts, never removed
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")  # "a/b/.." is "a/", a folder
    return "/".join(out)


def _header_value(name: Any, value: Any, command: str) -> str:
    """A command's header value as sent, or an `ApiError` naming the header and what HTTP cannot carry."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        raise ApiError(f"{command}: {str(name)[:80]!r} is not an HTTP header name.")
    if name.lower() in ROUTING_HEADERS:
        raise ApiError(
            f"{command}: the header {name!r} is refused: it would route the request, or frame it, other than to "
            "the profile's server as the profile says."
        )
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ApiError(f"{command}: the header {name!r} must be text or a number, not {type(value).__name__}.")
    text = str(value)
    problem = header_text_problem(text)
    if problem:
        raise ApiError(f"{command}: the header {name!r} {problem}.")
    return text


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
                problem = header_text_problem(secret) if target is headers else ""
                if problem:  # said without the value, which is a secret
                    raise ApiError(
                        f"the profile {profile.name!r} sends the environment variable {value.variable} in the "
                        f"header {name!r}, and its value {problem}."
                    )
                if len(secret) >= MIN_SECRET:
                    to_scrub.append(secret)
            else:
                target[name] = value
    return headers, query, to_scrub


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

    base = request.profile.base_url
    url = base if not request.path else base.rstrip("/") + "/" + request.path.lstrip("/")
    _check_target(request, httpx2.URL(url), httpx2.URL(base))  # before any secret is read or attached
    secret_headers, query, secrets = secrets_of(request.profile, environ)
    headers = {**secret_headers, **dict(request.headers)}
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


def _check_target(request: ApiRequest, target: Any, base: Any) -> None:
    """Refuse a URL that, as the HTTP client reads it, is not on the profile's scheme, host and port, under its path."""
    base_path = base.path.rstrip("/")
    if (
        (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port)
        or not (target.path == base.path or target.path.startswith(base_path + "/"))
        or target.query
        or target.fragment
    ):
        raise ApiError(
            f"{request.method} {request.public_url} would leave the profile {request.profile.name!r} "
            f"({request.profile.base_url}); requests go only under its baseUrl."
        )


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
        "text": scrub_text(text, secrets),
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
