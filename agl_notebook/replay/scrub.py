"""Secret scrubbing: no API key or auth header reaches a record, whatever path it came by.

Applied to every string of a record when it is written (every store calls it), with filters that add to the
defaults rather than replace them. What counts as a secret: Anthropic keys by their shape, the values of
environment variables whose names say they hold a secret, and the value of any auth header written out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from ..payloads import JsonValue

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"                                        # Anthropic API keys and admin keys
    r"|(?i:(?<=authorization: bearer )|(?<=authorization:bearer ))[^\s\"']+"
    r"|(?i:(?<=x-api-key: )|(?<=x-api-key:)|(?<=\"x-api-key\": \")|(?<='x-api-key': '))[^\s\"']+"
    r"|(?i:(?<=bearer ))[A-Za-z0-9._\-]{16,}"
)
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would redact ordinary words


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of environment variables whose names say they hold a secret, longest first."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LENGTH}
    return tuple(sorted(found, key=len, reverse=True))


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret and key-shaped string replaced by `REDACTED`."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)


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
