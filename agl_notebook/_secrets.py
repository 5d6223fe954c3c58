"""Secrets: the one scrubber (the one log filter, which uses it, is in `_secret_logs`).

No API key or auth header reaches a record, a view, a log or an error, whatever path it came by. What counts as
a secret: Anthropic keys by their shape, the value of any auth header written out, the values of environment
variables whose names say they hold a secret, and the secrets a caller names (a JSON-function profile's header and
query values while its request is in flight). A known secret is replaced in every spelling it may take on the way:
as written, escaped inside a JSON string, and encoded in a URL.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

from .payloads import JsonValue

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

# A header's value stops at a backslash too: in JSON text (records are scrubbed as JSON) a quote after the value is
# spelled \", and taking its backslash into the match would end the string early and break the record.
_HEADER_VALUE = r"[^\s\"'\\]+"
_KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic API keys and admin keys
    r"|(?i:(?<=authorization: bearer )|(?<=authorization:bearer ))"
    + _HEADER_VALUE
    + r"|(?i:(?<=x-api-key: )|(?<=x-api-key:)|(?<=\"x-api-key\": \")|(?<='x-api-key': ')"
    r"|(?<=\\\"x-api-key\\\": \\\"))"
    + _HEADER_VALUE  # the last lookbehind: as spelled inside a JSON string
    + r"|(?<=Bearer )[A-Za-z0-9._\-]{16,}"  # a bearer token written out
)
# The regex looks behind at every position; these substring checks (in C) skip it for the common text with no key
# in it, which is most of every record.
_MARKERS = ("sk-ant-", "bearer", "x-api-key")
# Whole name segments only: ANTHROPIC_API_KEY, MY_SERVICE_TOKEN, DB_PASSWORD; not GIT_AUTHOR_NAME or SSH_AUTH_SOCK.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET(?:_?KEY)?|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
_MIN_SECRET_LENGTH = 8  # shorter values of secret-named variables ("1", "true") would redact ordinary words


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of environment variables whose names say they hold a secret, longest first."""
    env = os.environ if environ is None else environ
    found = set()
    for name in env:
        if _is_secret_name(name):
            value = env.get(name, "")
            if len(value) >= _MIN_SECRET_LENGTH:
                found.add(value)
    return tuple(sorted(found, key=len, reverse=True))


@functools.lru_cache(maxsize=1024)
def _is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


@functools.lru_cache(maxsize=256)
def _spellings(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """Every spelling of ``secrets``: as written, escaped in a JSON string, encoded in a URL; longest first."""
    found: dict[str, None] = {}
    for secret in secrets:
        if secret:
            for spelling in (
                secret,
                json.dumps(secret, ensure_ascii=False)[1:-1],
                quote(secret, safe=""),
                quote_plus(secret),
            ):
                found[spelling] = None
    return tuple(sorted(found, key=len, reverse=True))


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every spelling of ``secrets`` and every key-shaped string replaced by `REDACTED`.

    JSON text stays JSON unless a secret's spelling ran into its syntax (``json.loads`` then says so).
    """
    return _replace(text, _spellings(tuple(secrets)))


def _replace(text: str, spellings: tuple[str, ...]) -> str:
    for spelling in spellings:
        if spelling in text:
            text = text.replace(spelling, REDACTED)
    lowered = text.lower()
    if any(marker in lowered for marker in _MARKERS):
        return _KEY_SHAPES.sub(REDACTED, text)
    return text


def scrub(value: JsonValue, secrets: Iterable[str] | None = None) -> JsonValue:
    """A copy of a JSON value with secrets scrubbed from every string, keys included.

    Args:
        value: The JSON to scrub.
        secrets: Extra literal secrets, added to those read from the environment.
    """
    return _scrub(value, _spellings((*secrets_from_environment(), *(secrets or ()))))


def _scrub(value: JsonValue, spellings: tuple[str, ...]) -> JsonValue:
    if isinstance(value, str):
        return _replace(value, spellings)
    if isinstance(value, list):
        return [_scrub(v, spellings) for v in value]
    if isinstance(value, dict):
        return {_replace(k, spellings): _scrub(v, spellings) for k, v in value.items()}
    return value
