"""Secret scrubbing: no API key or auth header reaches a record, whatever path it came by.

Applied to every string of a record when it is written (every store calls it), with filters that add to the
defaults rather than replace them. What counts as a secret: Anthropic keys by their shape, the values of
environment variables whose names say they hold a secret, and the value of any auth header written out.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping

from ..payloads import JsonValue

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

# A header's value stops at a backslash too: in JSON text (records are scrubbed as JSON) a quote after the value is
# spelled \", and taking its backslash into the match would end the string early and break the record.
_HEADER_VALUE = r"[^\s\"'\\]+"
_KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"                                        # Anthropic API keys and admin keys
    r"|(?i:(?<=authorization: bearer )|(?<=authorization:bearer ))" + _HEADER_VALUE +
    r"|(?i:(?<=x-api-key: )|(?<=x-api-key:)|(?<=\"x-api-key\": \")|(?<='x-api-key': ')"
    r"|(?<=\\\"x-api-key\\\": \\\"))" + _HEADER_VALUE +  # the last lookbehind: as spelled inside a JSON string
    r"|(?<=Bearer )[A-Za-z0-9._\-]{16,}"                               # a bearer token written out
)
# Whole name segments only: ANTHROPIC_API_KEY, MY_SERVICE_TOKEN, DB_PASSWORD; not GIT_AUTHOR_NAME or SSH_AUTH_SOCK.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET(?:_?KEY)?|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
_MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would redact ordinary words


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


def scrub_json_text(text: str, secrets: Iterable[str] = ()) -> str:
    """JSON text with secrets scrubbed, also where JSON escaping changed how a secret is spelled."""
    for secret in secrets:
        escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
        for spelling in {secret, escaped}:
            if spelling in text:
                text = text.replace(spelling, REDACTED)
    return _key_shapes(text)


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret and key-shaped string replaced by `REDACTED`."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _key_shapes(text)


def _key_shapes(text: str) -> str:
    # The regex looks behind at every position; these substring checks (in C) skip it for the common text with no
    # key in it, which is most of every record.
    lowered = text.lower()
    if any(marker in lowered for marker in _MARKERS):
        return _KEY_SHAPES.sub(REDACTED, text)
    return text


_MARKERS = ("sk-ant-", "bearer", "x-api-key")

def scrub(value: JsonValue, secrets: Iterable[str] | None = None) -> JsonValue:
    """A copy of a JSON value with secrets scrubbed from every string, keys included.

    Args:
        value: The JSON to scrub.
        secrets: Extra literal secrets, added to those read from the environment.
    """
    known = tuple(secrets_from_environment()) + tuple(secrets or ())
    return _scrub(value, known)


def _scrub(value: JsonValue, secrets: tuple[str, ...]) -> JsonValue:
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub_text(k, secrets): _scrub(v, secrets) for k, v in value.items()}
    return value
