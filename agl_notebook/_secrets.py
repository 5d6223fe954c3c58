"""Secrets: the one scrubber (the one log filter, which uses it, is in `_secret_logs`).

No API key or auth header reaches a record, a view, a log or an error, whatever path it came by. What counts as
a secret: Anthropic keys by their shape, the value of any auth header written out, the values of environment
variables whose names say they hold a secret, and the secrets a caller names (a JSON-function profile's header and
query values while its request is in flight). A known secret is replaced in every spelling it may take on the way:
as written, and with any of its characters escaped as a JSON string, Python's repr, an HTML text or a URL escapes
them (mixed freely, the backslash escapes at any depth of nesting), whether or not the text around it parses.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping

from .payloads import JsonValue

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

# A header's value stops at a backslash too: in JSON text (records are scrubbed as JSON) a quote after the value is
# spelled \", and taking its backslash into the match would end the string early and break the record.
_HEADER_VALUE = re.compile(r"[^\s\"'\\]+")
# Key shapes with a literal start, which `re` finds by a fast scan for the literal.
_ANTHROPIC_KEY = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")  # Anthropic API keys and admin keys
_BEARER_TOKEN = re.compile(r"Bearer [A-Za-z0-9._\-]{16,}")  # a bearer token written out
# An auth header written out: each lowercase marker, with the spellings of the header's name that may end right
# before it and the text between the marker and the value. A regex with these as case-insensitive lookbehinds tried
# them at every character (25 ms for a 200 KB text); the markers are found by `str.find` and the rest checked there.
_HEADERS = (
    ("bearer", ("authorization: ", "authorization:"), " "),
    ("x-api-key", ("",), ": "),
    ("x-api-key", ("",), ":"),
    ("x-api-key", ('"',), '": "'),
    ("x-api-key", ('"',), '":"'),  # compact JSON (a record is searched as compact JSON: `_json_text`)
    ("x-api-key", ("'",), "': '"),
    ("x-api-key", ('\\"',), '\\": \\"'),  # as spelled inside a JSON string
    ("x-api-key", ('\\"',), '\\":\\"'),  # the same, compact
)
_MARKERS = ("sk-ant-", "bearer", "x-api-key")
# Whole name segments only: ANTHROPIC_API_KEY, MY_SERVICE_TOKEN, DB_PASSWORD; not GIT_AUTHOR_NAME or SSH_AUTH_SOCK.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET(?:_?KEY)?|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
_MIN_SECRET_LENGTH = 8  # shorter values of secret-named variables ("1", "true") would redact ordinary words


_REGISTERED: set[str] = set()  # keys given in code (`register_secret`), scrubbed for the rest of the process


def register_secret(value: str) -> None:
    """Scrub ``value`` wherever the environment's secrets are scrubbed, from now on in this process.

    For a key given in code rather than the environment (``OpenAIModel(api_key=...)``, a key in a server's URL): every
    exit that scrubs asks `secrets_from_environment`, which then names it too.
    """
    if isinstance(value, str) and len(value) >= _MIN_SECRET_LENGTH:  # shorter would redact ordinary words
        _REGISTERED.add(value)


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of environment variables whose names say they hold a secret, longest first.

    Read from the process's environment (no ``environ`` given), the keys given in code (`register_secret`) too. The
    process's own environment is read again only once it changed (or a key was registered since): every record kept
    and every view drawn asks, and reading every variable (each decoded from bytes) cost a recorded step a fifth of
    what recording adds.
    """
    global _from_environment
    if environ is not None:
        return _secrets_in(environ)
    seen = _environment_now()
    kept = _from_environment
    # Keys are only ever added to _REGISTERED, so its size tells whether it changed.
    if seen is not None and kept is not None and kept[0] == seen and kept[1] == len(_REGISTERED):
        return kept[2]
    found = _secrets_in(os.environ, _REGISTERED)
    if seen is not None:
        _from_environment = (dict(seen), len(_REGISTERED), found)  # a copy: ``seen`` changes in place
    return found


_from_environment: tuple[dict[object, object], int, tuple[str, ...]] | None = None
"""The process environment's variables as last read (`_environment_now`, a copy), how many keys were registered
then, and the secrets found."""


def _environment_now() -> dict[object, object] | None:
    """Every variable of ``os.environ`` as stored (encoded, unread), to tell at C speed whether it changed.

    CPython's ``os.environ`` keeps them in ``_data``, which every write through ``os.environ`` changes
    (``os.environ[name] = ...``, ``del``, ``update``, ``monkeypatch.setenv``); None where there is no such dict
    (the environment is then read every time). A bare ``os.putenv`` is not seen, as it never was. The dict itself:
    compared with the copy kept, its values are mostly the very same objects, so ``==`` costs a tenth of building
    a tuple of its items (40 variables: 0.3 µs against 3 µs, asked by every record kept and every view drawn).
    """
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else None


def _secrets_in(env: Mapping[str, str], registered: set[str] | None = None) -> tuple[str, ...]:
    found = set(registered or ())
    for name in env:
        if _is_secret_name(name):
            value = env.get(name, "")
            if len(value) >= _MIN_SECRET_LENGTH:
                found.add(value)
    return tuple(sorted(found, key=len, reverse=True))


@functools.lru_cache(maxsize=1024)
def _is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


# How a character may be spelled besides itself, each form a regex: escaped in a JSON string (``\u0041``, and
# ``\/`` ``\"`` ``\\`` ``\n``...) or a Python string's repr (``\'``, ``\x41``: an error message quoting a value
# with ``!r``), as an HTML character reference, percent-encoded in a URL. A JSON escape may
# sit in a string that was itself put in JSON (a record's text kept in a record), so its backslash may be doubled
# any number of times: each form takes the whole run of backslashes. The forms mix freely within one secret, as
# encoders do (PHP writes ``/`` as ``\/``, ``ensure_ascii`` only the non-ASCII characters, a server any it likes).
_JSON_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_REPR_SHORT = {"'": "'", "\a": "a", "\v": "v"}  # what Python's repr escapes besides the JSON short forms
_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}


def _json_escape(code: int) -> str:
    return rf"\\\\*(?i:u{code:04x})"


def _char_forms(char: str) -> str:
    """A regex matching ``char`` as written or in any of its escaped spellings."""
    code = ord(char)
    forms = [re.escape(char)]
    if code > 0xFFFF:  # a JSON string escapes it as a surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(_json_escape(high) + _json_escape(low))
        forms.append(rf"\\\\*U(?i:{code:08x})")  # Python's repr of a character it cannot print
    else:
        forms.append(_json_escape(code))
    if code <= 0xFF:
        forms.append(rf"\\\\*x(?i:{code:02x})")  # Python's repr of a control or unprintable Latin-1 character
    references = [f"&#0*{code};", f"&#(?i:x0*{code:x});"]  # as an HTML text spells it
    if char in _HTML_NAMED:
        references.append(f"&{_HTML_NAMED[char]};")
    short = _JSON_SHORT.get(char, _REPR_SHORT.get(char))
    if short == char:  # a quote (or / or \) escaped by a backslash, maybe then HTML-escaped: repr's \' in an export
        forms.append(r"\\\\*(?:" + "|".join([re.escape(char), *references]) + ")")
    elif short is not None:
        forms.append(r"\\\\*" + re.escape(short))
    forms += references
    forms.append("".join(f"%(?i:{byte:02x})" for byte in char.encode("utf-8", "surrogatepass")))
    if char == " ":
        forms.append(r"\+")  # a query string's space
    return "(?:" + "|".join(forms) + ")"


class _Spellings:
    """One secret and the regex matching its every spelling (a plain class: nothing to generate at import)."""

    __slots__ = ("escapes", "pattern", "secret")

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.pattern = re.compile("".join(_char_forms(c) for c in secret))
        # The characters that begin an escaped spelling of a character (`_char_forms`): a text holding none of them
        # can hold the secret only as written, which ``str.replace`` finds, five times faster than the regex.
        self.escapes = ("\\", "&", "%", "+") if " " in secret else ("\\", "&", "%")

    def sub(self, text: str) -> str:
        """``text`` with every spelling of the secret replaced by `REDACTED`."""
        if any(escape in text for escape in self.escapes):
            return self.pattern.sub(REDACTED, text)
        return text.replace(self.secret, REDACTED) if self.secret in text else text


@functools.lru_cache(maxsize=256)
def _patterns(secrets: tuple[str, ...]) -> tuple[_Spellings, ...]:
    """A regex per secret matching its every spelling, longest first (so a secret inside another goes whole).

    One regex each, not one for all: a regex whose first character is one of a few lets ``re`` skip ahead to the
    next place it could start (the forms' first characters: the character itself, a backslash, ``&``, ``%``), and
    an alternation of secrets would try every secret at every character (ten times slower on a record).
    """
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    return tuple(_Spellings(secret) for secret in ordered)


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every spelling of ``secrets`` and every key-shaped string replaced by `REDACTED`.

    A spelling is the secret as written, or with any of its characters escaped as JSON, HTML or a URL escapes them,
    whether or not ``text`` parses as JSON (a body with a byte-order mark in front or a notice after it is still
    read). JSON text stays JSON unless a secret's spelling ran into its syntax (``json.loads`` then says so).
    """
    return _replace(text, _patterns(tuple(secrets)))


def _replace(text: str, patterns: tuple[_Spellings, ...]) -> str:
    for spellings in patterns:
        text = spellings.sub(text)
    lowered = text.lower()
    if not any(marker in lowered for marker in _MARKERS):
        return text
    text = _replace_header_values(text, lowered)
    if "sk-ant-" in text:
        text = _ANTHROPIC_KEY.sub(REDACTED, text)
    if "Bearer " in text:
        text = _BEARER_TOKEN.sub("Bearer " + REDACTED, text)
    return text


def _replace_header_values(text: str, lowered: str) -> str:
    """``text`` with the value of every auth header written out replaced (any case, as `_HEADERS` spells them)."""
    values: list[tuple[int, int]] = []
    for marker, names, between in _HEADERS:
        at = lowered.find(marker)
        while at != -1:
            after = at + len(marker)
            if lowered.startswith(between, after) and any(lowered.endswith(name, 0, at) for name in names):
                value = _HEADER_VALUE.match(text, after + len(between))
                if value is not None:
                    values.append(value.span())
            at = lowered.find(marker, after)
    if not values:
        return text
    pieces, end = [], 0
    for start, stop in sorted(values):
        if start >= end:  # one value found through two spellings (``x-api-key: `` and ``x-api-key:``) goes once
            pieces += [text[end:start], REDACTED]
            end = stop
    return "".join(pieces) + text[end:]


def scrub(value: JsonValue, secrets: Iterable[str] | None = None) -> JsonValue:
    """A copy of a JSON value with secrets scrubbed from every string, keys included.

    Args:
        value: The JSON to scrub.
        secrets: Extra literal secrets, added to those read from the environment.
    """
    return _scrub(value, _patterns((*secrets_from_environment(), *(secrets or ()))))


def _scrub(value: JsonValue, patterns: tuple[_Spellings, ...]) -> JsonValue:
    if isinstance(value, str):
        return _replace(value, patterns)
    if isinstance(value, list):
        return [_scrub(v, patterns) for v in value]
    if isinstance(value, dict):
        return {_replace(k, patterns): _scrub(v, patterns) for k, v in value.items()}
    return value
