"""How a step view draws what Anthropic ran for it and the sources its text cites.

A server tool call (a ``server_tool_use`` block, kept as the API sent it) is a row like a client tool call, marked
"run by Anthropic", and its result block (``web_search_tool_result``, ``web_fetch_tool_result``,
``code_execution_tool_result``, ``bash_code_execution_tool_result``, ``text_editor_code_execution_tool_result``, or a
type this version does not know) is drawn inside it: search results as titles and links, a fetched page's title and
URL, code with its output, errors and return code; an error result by its error code.

Cited text carries numbered marks, ``[1]``, each a link to its source; a "Sources" list under the step says what each
number is: a page's title and URL, or a document's title and the location cited. A source is numbered once per step,
in the order it is first cited.

Everything drawn comes from a record a person may not have written (a notebook is data), so every value is scrubbed,
capped and escaped by the view's ``esc``, and only an ``http`` or ``https`` URL becomes a link: ``javascript:``,
``data:`` and every other scheme, and any URL with a space or a control character in it, is shown as text. Opaque
fields (``encrypted_content``, ``encrypted_index``, a fetched page's whole text) are never drawn.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .._secrets import REDACTED
from ..payloads import JsonObject, JsonValue

_Escape = Callable[[str], str]

MAX_RESULTS_SHOWN = 20
"""The most search results drawn per search (the rest are counted)."""

CODE_TOOLS = frozenset({"code_execution", "bash_code_execution", "text_editor_code_execution"})
"""The server tools that run code in Anthropic's container (billed by container time: not priced here)."""


@dataclass
class ServerCallTrace:
    """A call of a tool Anthropic ran, and its result block once it came."""

    id: str
    name: str
    input: JsonObject
    result: JsonObject | None = None


class CitationMark(str):
    """A place in a text item where cited text ended: drawn as its sources' numbers (its text is empty)."""

    numbers: tuple[int, ...]

    def __new__(cls, numbers: tuple[int, ...]) -> CitationMark:  # noqa: D102
        mark = super().__new__(cls, "")
        mark.numbers = numbers
        return mark


@dataclass
class Source:
    """One numbered source: where it is (a URL, or a document), what it is called, and a passage cited from it."""

    number: int
    title: str
    url: str | None
    location: str
    cited_text: str


@dataclass
class Sources:
    """The step's sources, numbered in the order they are first cited."""

    listed: list[Source] = field(default_factory=list)
    _by_key: dict[tuple[str, ...], Source] = field(default_factory=dict)

    def number(self, citation: JsonValue) -> int:
        """The number of ``citation``'s source (a new one when it was not cited before)."""
        key, source = _source(citation, len(self.listed) + 1)
        found = self._by_key.get(key)
        if found is not None:
            return found.number
        self._by_key[key] = source
        self.listed.append(source)
        return source.number


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


def _source(citation: JsonValue, number: int) -> tuple[tuple[str, ...], Source]:
    data = citation if isinstance(citation, dict) else {}
    kind = _text(data.get("type"))
    cited = _text(data.get("cited_text"))
    if kind == "web_search_result_location" or "url" in data:
        url = _text(data.get("url"))
        title = _text(data.get("title")) or url
        return ("url", url), Source(number, title, url, "", cited)
    if kind == "search_result_location":
        source = _text(data.get("source"))
        title = _text(data.get("title")) or source
        return ("search", source, title), Source(number, title, source, "", cited)
    index = data.get("document_index")
    title = _text(data.get("document_title"))
    where = f"document {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else "a document"
    if kind == "page_location":
        start, end = data.get("start_page_number"), data.get("end_page_number")
        location = f"{where}, pages {start}–{end}" if start != end else f"{where}, page {start}"
    elif kind == "char_location":
        location = f"{where}, characters {data.get('start_char_index')}–{data.get('end_char_index')}"
    elif kind == "content_block_location":
        location = f"{where}, blocks {data.get('start_block_index')}–{data.get('end_block_index')}"
    else:
        location = f"{where} ({kind or 'a location of no type'})"
    return ("doc", str(index), title, location), Source(number, title or where, None, location, cited)


def safe_url(url: str) -> str | None:
    """``url`` when it is an ``http(s)`` URL with a host, safe to link to; None for anything else (shown as text)."""
    if not url or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme.lower() in ("http", "https") and parts.netloc else None


def _held_secret(url: str, esc: _Escape) -> bool:
    """Whether ``url`` holds a secret: one scrubbing changes (live), or a record's scrubbed one (``[REDACTED]``).

    Both are shown as text, never a link, so a replay from the scrubbed record draws what the live run drew.
    """
    return esc(url) != html.escape(url) or REDACTED in url


def link(url: str, text: str, esc: _Escape) -> str:
    """``text`` linking to ``url`` when it is ``http(s)`` (opened in a new tab, no referrer), else both as text."""
    shown = esc(url)
    target = safe_url(url)
    # The href is the scrubbed, escaped URL: a secret in a query string is never in the page, not even in a link.
    if target is None or _held_secret(url, esc):
        label = esc(text) if text and text != url else ""
        return f"{label} <code>{shown}</code>" if label else f"<code>{shown}</code>"
    return f'<a href="{shown}" target="_blank" rel="noopener noreferrer nofollow">{esc(text or url)}</a>'


def marks_html(mark: CitationMark, sources: Sources, esc: _Escape) -> str:
    """A cited passage's source numbers, each a link to its source (or its number alone when it has no link)."""
    drawn = []
    for number in mark.numbers:
        source = sources.listed[number - 1]
        url = safe_url(source.url or "") if source.url is not None else None
        if url is not None and not _held_secret(url, esc):
            drawn.append(
                f'<a class="agl-citation" href="{esc(url)}" target="_blank" rel="noopener noreferrer nofollow" '
                f'title="{esc(source.title)}">[{number}]</a>'
            )
        else:
            drawn.append(f'<span class="agl-citation" title="{esc(source.title)}">[{number}]</span>')
    return f"<sup>{''.join(drawn)}</sup>"


def sources_html(sources: Sources, esc: _Escape) -> str:
    """The numbered list of the step's sources."""
    rows = []
    for source in sources.listed:
        where = link(source.url, source.title, esc) if source.url is not None else f"{esc(source.title)}"
        if source.location and source.url is None and source.title != source.location:
            where += f" · {esc(source.location)}"
        quote = f'<br><span style="opacity:0.8">“{esc(source.cited_text)}”</span>' if source.cited_text else ""
        rows.append(f'<li value="{source.number}">{where}{quote}</li>')
    return (
        f'<div class="agl-sources" style="{_SOURCES}"><b>Sources</b><ol style="margin:2px 0;padding-left:2.2em">'
        f"{''.join(rows)}</ol></div>"
    )


def sources_text(sources: Sources, clip: Callable[[str, int], str]) -> list[str]:
    """The ``text/plain`` lines of the step's sources."""
    lines = []
    for source in sources.listed:
        where = source.url if source.url is not None else source.location
        lines.append(f"  source [{source.number}]: {clip(source.title, 60)} ({clip(where, 100)})")
    return lines


def server_call_text(call: ServerCallTrace, clip: Callable[[str, int], str]) -> str:
    """The ``text/plain`` line of a server tool call."""
    return f"  {clip(call.name, 40)} (run by Anthropic): {_status(call, running=False)[0]}"


def _status(call: ServerCallTrace, *, running: bool) -> tuple[str, str]:
    """The call's status words and tint."""
    if call.result is None:
        return ("running…", "plain") if running else ("no result", "warn")
    error = _error_code(call.result.get("content"))
    if error is not None:
        return f"error: {error}", "bad"
    content = call.result.get("content")
    if isinstance(content, dict) and isinstance(code := content.get("return_code"), int) and code != 0:
        return f"exit code {code}", "bad"
    return "ok", "ok"


def _error_code(content: JsonValue) -> str | None:
    if isinstance(content, dict) and _text(content.get("type")).endswith("_error"):
        return _text(content.get("error_code")) or "unknown error"
    return None


def _summary_detail(call: ServerCallTrace) -> str:
    """What the summary line says besides the name: the query, the URL, or the first line of the code."""
    data = call.input
    for key in ("query", "url", "command", "code", "path"):
        value = data.get(key)
        if isinstance(value, str) and value:
            first = value.strip().splitlines()[0] if value.strip() else value
            return first if len(first) <= 80 else first[:80] + "…"
    return ""


def server_call_html(
    call: ServerCallTrace, esc: _Escape, running: bool, keep: str, chip: Callable[[str, str], str]
) -> str:
    """A server tool call: a collapsed row marked "run by Anthropic", its input and readable result inside."""
    status, tint = _status(call, running=running)
    detail = _summary_detail(call)
    summary = f"<code>{esc(call.name)}</code> · {chip('run by Anthropic', 'anthropic')} · {chip(status, tint)}" + (
        f" · {esc(detail)}" if detail else ""
    )
    body = [_input_html(call, esc)]
    if call.result is not None:
        body.append(_result_html(call.result, esc))
    return (
        f'<details class="agl-server-tool" style="{_ROW}"{keep}><summary>{summary}</summary>{"".join(body)}</details>'
    )


def _input_html(call: ServerCallTrace, esc: _Escape) -> str:
    data = call.input
    if call.name in CODE_TOOLS:
        code = data.get("code") if isinstance(data.get("code"), str) else data.get("command")
        if isinstance(code, str):
            return f'<div><b>Code</b></div><pre style="{_PRE}">{esc(code)}</pre>'
    if isinstance(data.get("query"), str):
        return f"<div><b>Query</b>: {esc(_text(data.get('query')))}</div>"
    if isinstance(data.get("url"), str):
        return f"<div><b>URL</b>: {link(_text(data.get('url')), '', esc)}</div>"
    return f'<div><b>Input</b></div><pre style="{_PRE}">{esc(_json(data))}</pre>'


def _result_html(result: JsonObject, esc: _Escape) -> str:
    content = result.get("content")
    kind = _text(result.get("type"))
    error = _error_code(content)
    if error is not None:
        return f"<div><b>Error</b>: <code>{esc(error)}</code></div>"
    if kind == "web_search_tool_result" and isinstance(content, list):
        rows = []
        for item in content[:MAX_RESULTS_SHOWN]:
            entry = item if isinstance(item, dict) else {}
            url, title = _text(entry.get("url")), _text(entry.get("title"))
            age = _text(entry.get("page_age"))
            rows.append(f"<li>{link(url, title, esc)}{f' · {esc(age)}' if age else ''}</li>")
        more = len(content) - MAX_RESULTS_SHOWN
        extra = f"<div>and {more} more result(s)</div>" if more > 0 else ""
        return f'<div><b>Results</b></div><ol style="margin:2px 0;padding-left:2.2em">{"".join(rows)}</ol>{extra}'
    if kind == "web_fetch_tool_result" and isinstance(content, dict):
        document = content.get("content")
        title = _text(document.get("title")) if isinstance(document, dict) else ""
        url = _text(content.get("url"))
        return f"<div><b>Fetched</b>: {link(url, title or url, esc)}</div>"
    if isinstance(content, dict) and ("stdout" in content or "stderr" in content):
        parts = []
        for name in ("stdout", "stderr"):
            text = _text(content.get(name))
            if text:
                parts.append(f'<div><b>{name}</b></div><pre style="{_PRE}">{esc(text)}</pre>')
        code = content.get("return_code")
        if isinstance(code, int):
            parts.append(f"<div><b>return code</b>: {code}</div>")
        files = content.get("content")
        if isinstance(files, list) and files:
            parts.append(f"<div><b>files written</b>: {len(files)}</div>")
        return "".join(parts) or "<div>No output.</div>"
    if isinstance(content, dict) and _text(content.get("type")).startswith("text_editor_code_execution"):
        return f'<div><b>Result</b></div><pre style="{_PRE}">{esc(_json(content))}</pre>'
    return (
        f'<div><b>Result</b> (<code>{esc(kind)}</code>)</div><pre style="{_PRE}">{esc(_json(_readable(content)))}</pre>'
    )


def _readable(value: JsonValue) -> JsonValue:
    """``value`` without its opaque fields (encrypted content is never drawn)."""
    if isinstance(value, dict):
        return {k: _readable(v) for k, v in value.items() if not k.startswith("encrypted")}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def _json(value: JsonValue) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)


_ROW = "margin:2px 0"
_PRE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0;font-size:12px;max-height:24em;overflow:auto"
_SOURCES = "margin:4px 0;padding:2px 6px;border-left:3px solid rgba(127,127,127,0.5)"
