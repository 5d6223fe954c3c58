"""What a view shows of one value: scrubbed once, then capped at `VIEW_VALUE_BYTES`, then escaped and drawn.

Every view a notebook keeps (a step's ``text/plain`` and ``text/html``, a map's table, a comparison's grid, a map
item's step) draws its values through here, so one order holds everywhere: secrets are scrubbed from the whole value
first, then it is cut, then escaped. A cut never keeps part of a secret, and an escape never hides one from the
scrubber (a secret holding ``&`` or ``<`` is found before it becomes ``&amp;`` or ``&lt;``).

The cap bounds what a saved notebook pays for one value (a 2 MB tool result was embedded whole in its HTML). The
record keeps every value whole; a cut value ends in a placeholder giving its full size and the sha256 of its whole
scrubbed text (`whole_text`), which a person can check against the record (docs/notebooks.md, "Long values").

A value is drawn as a person reads it, the same in every view: text with its line breaks, a list as a numbered list,
an object as rows of its keys (sorted), ``None`` as ``null`` in code type; deeper levels as indented JSON.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable

from ._secrets import scrub_text
from .payloads import JsonValue

VIEW_VALUE_BYTES = 32 * 1024
"""The most bytes (UTF-8) of one value that a view draws: a tool's result or arguments, a reported field, an input,
an answer, a block of text, an error message, a cell of a map's table or a comparison's grid. The rest is cut (after
scrubbing) and replaced by a placeholder with the whole value's size and sha256. Records are never cut."""


def whole_text(value: JsonValue) -> str:
    """The text of a value that a view cuts, and that a cut's sha256 is of.

    A string is itself; any other value is its compact JSON: sorted keys, no spaces, Unicode unescaped (the spelling
    of ``agl_notebook._canonical.canonical_json``).
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def scrubbed(value: JsonValue, secrets: tuple[str, ...]) -> JsonValue:
    """``value`` with every string (keys too) scrubbed of ``secrets``.

    Scrubbed before it is written as JSON, whose escapes (of a quote, twice over for a string that holds JSON) would
    hide a secret from a scrubber of the text.
    """
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub_text(k, secrets): scrubbed(v, secrets) for k, v in value.items()}
    return value


def capped(text: str, limit: int = VIEW_VALUE_BYTES) -> str:
    """``text`` (scrubbed already) whole, or its first ``limit`` bytes and a placeholder saying what was cut."""
    if len(text) * 4 <= limit:  # no character takes more than 4 bytes: short text needs no encoding
        return text
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")  # a character cut in two is left out whole
    sha = hashlib.sha256(data).hexdigest()
    return f"{kept}… [cut: {len(data):,} bytes in full, sha256 {sha}; the record keeps it whole]"


def shown(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` scrubbed of ``secrets``, then capped: what a view may draw of it."""
    return capped(scrub_text(text, secrets))


def clipped(text: str, secrets: tuple[str, ...], length: int) -> str:
    """``text`` scrubbed, then shortened to ``length`` characters (a one-line summary, a table's text cell)."""
    text = scrub_text(text, secrets)
    return text if len(text) <= length else text[: length - 1] + "…"


def escaped(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` scrubbed, capped, then escaped for HTML (quotes included)."""
    return html.escape(shown(text, secrets), quote=True)


def value_html(value: JsonValue, secrets: tuple[str, ...], *, scroll: str | None = None) -> str:
    """``value`` drawn as HTML: scrubbed, capped as a whole at `VIEW_VALUE_BYTES`, each text escaped.

    ``scroll``: the style of the block a long value scrolls in (default: 24 lines tall).
    """
    box = _SCROLL if scroll is None else scroll
    value = scrubbed(value, secrets)
    whole = whole_text(value)
    cut = capped(whole)
    if cut is not whole:  # too big to draw as rows: its text, cut, in a scrolling block
        return f'<div style="{box}"><pre style="{PRE}">{html.escape(cut, quote=True)}</pre></div>'
    if isinstance(value, str):
        inner = f'<span style="{_WRAP}">{html.escape(whole, quote=True)}</span>'
        return f'<div style="{box}">{inner}</div>' if _is_long(whole) else inner

    def esc(text: str) -> str:  # scrubbed already
        return html.escape(text, quote=True)

    inner = _nested(value, esc, 0)
    return f'<div style="{box}">{inner}</div>' if isinstance(value, list | dict) and value else inner


def _nested(value: JsonValue, esc: Callable[[str], str], depth: int) -> str:
    if isinstance(value, str):
        return f'<span style="{_WRAP}">{esc(value)}</span>'
    if isinstance(value, list) and value and depth < 2:
        items = "".join(f"<li>{_nested(v, esc, depth + 1)}</li>" for v in value)
        return f'<ol style="{_LIST}">{items}</ol>'
    if isinstance(value, dict) and value and depth < 2:
        # Sorted: a live call's arguments come in the model's order, a replayed one's in the record's (canonical).
        rows = "".join(
            f'<tr><td style="{TD}"><code>{esc(k)}</code></td><td style="{TD}">{_nested(v, esc, depth + 1)}</td></tr>'
            for k, v in sorted(value.items())
        )
        return f'<table style="{TABLE}">{rows}</table>'
    if isinstance(value, list | dict):
        return f'<pre style="{PRE}">{esc(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))}</pre>'
    return f"<code>{esc(json.dumps(value, ensure_ascii=False))}</code>"


def _is_long(text: str) -> bool:
    return len(text) > 600 or text.count("\n") > 12


PRE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0;font-size:12px"
TD = "text-align:left;vertical-align:top;padding:2px 8px"
TABLE = "border-collapse:collapse;margin:2px 0"
_SCROLL = "max-height:24em;overflow:auto"
_LIST = "margin:0;padding-left:2.2em"
_WRAP = "white-space:pre-wrap;overflow-wrap:anywhere"
