"""Tool calls written as text markup, turned into ordinary tool calls below the loop, for every model.

Some models write a tool call as text instead of using native function calling::

    <｜DSML｜tool_call>{"name": "get_weather", "arguments": {"city": "Sydney"}}</｜DSML｜tool_call>

(the bars are U+FF5C, FULLWIDTH VERTICAL LINE). `intercept` sits between a backend's stream and the loop (it is
applied by `agl_notebook.loop.model_events`, so every step and every client-tools run gets it) and turns each such
span into a `ToolCall`; the text around it streams on as usual and nothing downstream ever sees the markup.

How a reply's text is read, whatever the deltas it arrives in (the result depends only on the whole text):

- Outside a call, only a possible beginning of the open tag is held back (at most its length minus one character,
  always starting with its only ``<``), never the text after it. A delta without ``<`` passes through untouched:
  that is the fast path, one substring test per delta.
- Inside a call, the JSON body is scanned for strings, so a close tag inside a JSON string is not a close. The body
  is ``{"name": ..., "arguments": {...}}``; ``args`` is accepted for ``arguments``, and the arguments may be a JSON
  string holding the object. Missing or null arguments are ``{}``.
- A span that cannot be read (bad JSON, no name, arguments that are not an object) is dropped alone, as a
  `MarkupDropped` (its `MarkupError` and its raw text); the text and calls after it are read as if it had not been
  there. The loop emits the error and keeps the raw text in the reply's transcript (what the model wrote) but never in
  the streamed text, so a recording replays through this same interceptor to the same events. A span whose body grows
  past `MAX_SPAN_CHARS` is dropped too: its text is no longer kept, only scanned for its close tag (so its raw text is
  not in the transcript either, and a replay of it has no error event).
- A span still open when the text ends (the reply ends, or a native event interrupts the text) is dropped with an
  error; if its body holds a close tag that the scan took to be inside a string (unbalanced quotes), the span ends
  at the first such tag instead and the text after it is read again, so a broken quote loses one call, not the rest
  of the reply.
- Call ids are ``markup_<turn>_<n>``: the reply's position in the conversation and the call's number in the reply,
  so they are deterministic (a recording replays with the same ids) and unique within a conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from .._fieldwise import Fieldwise
from ..events import MarkupError
from .base import ModelEvent, ModelRequest, TextDelta, ToolCall, TurnEnd

DSML_TOOL_CALL_OPEN = "<\uff5cDSML\uff5ctool_call>"
"""The tag that opens a tool call written as text: ``<｜DSML｜tool_call>`` (full-width bars, U+FF5C)."""
DSML_TOOL_CALL_CLOSE = "</\uff5cDSML\uff5ctool_call>"
"""The tag that closes it: ``</｜DSML｜tool_call>``."""

MAX_SPAN_CHARS = 1_000_000
"""The longest call body kept (in characters); a longer span is dropped with a `MarkupError`."""

_OPEN, _CLOSE = DSML_TOOL_CALL_OPEN, DSML_TOOL_CALL_CLOSE
_FIRST = _OPEN[0]  # "<": the open tag's only "<", so a held-back prefix always starts at the text's last "<"
_OUTSIDE_STRING = re.compile(r'["<]')
_INSIDE_STRING = re.compile(r'["\\]')
_SHOWN = 200  # characters of a dropped span shown in its error


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MarkupDropped(Fieldwise):
    """A span that could not be read: the error to emit, and the text the model wrote for it."""

    error: MarkupError
    """What was wrong, for the run's events."""
    raw: str
    """The span as written, tags included, for the reply's transcript ("" when it was too long to keep)."""


Read: TypeAlias = TextDelta | ToolCall | MarkupDropped
"""What the parser reads a reply's text into."""


class _Span:
    """The body of an open call, and where the scan of its JSON is."""

    __slots__ = ("dropping", "escaped", "head", "in_string", "partial", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.head = ""  # the first characters, kept for the error once the body itself is no longer kept
        self.in_string = False
        self.escaped = False
        self.partial = ""  # a possible beginning of the close tag at the end of the text so far (outside strings)
        self.dropping = False

    def keep(self, piece: str, limit: int) -> None:
        if not piece:
            return
        if len(self.head) < _SHOWN:
            self.head += piece[: _SHOWN - len(self.head)]
        self.size += len(piece)
        if self.dropping:
            return
        self.parts.append(piece)
        if self.size > limit:
            self.dropping, self.parts = True, []


class MarkupParser:
    """Reads one reply's text, delta by delta, into text, tool calls and errors.

    Args:
        turn: The reply's position in the conversation (the number of assistant messages before it), for ids.
        limit: The longest body kept, in characters.

    Examples:
        >>> parser = MarkupParser(0)
        >>> out = parser.feed('Sure.<｜DSML｜tool_call>{"name": "f", "args": {"x": 1}}</｜DS')
        >>> out += parser.feed("ML｜tool_call> Done.") + parser.finish()
        >>> out
        [TextDelta(text='Sure.'), ToolCall(id='markup_00_0', name='f', args={'x': 1}), TextDelta(text=' Done.')]
    """

    def __init__(self, turn: int, *, limit: int = MAX_SPAN_CHARS) -> None:
        self.turn = turn
        self.limit = limit
        self.calls = 0
        """How many calls were read so far."""
        self._pending = ""
        self._span: _Span | None = None

    @property
    def idle(self) -> bool:
        """True when nothing is held back: the next delta may take the fast path."""
        return self._span is None and not self._pending

    def feed(self, text: str) -> list[Read]:
        """Read the next delta; returns what it completes, in order."""
        out: list[Read] = []
        self._read(text, out)
        return out

    def finish(self) -> list[Read]:
        """The text ends here: release what is held back, and drop a span left open (with its error)."""
        out: list[Read] = []
        while self._span is not None:
            span, self._span = self._span, None
            if span.dropping:
                out.append(
                    _dropped(
                        f"The tool call written as text has no close tag and is longer than "
                        f"{self.limit} characters; it was dropped.",
                        span.head,
                        "",
                    )
                )
                break
            body = "".join(span.parts) + span.partial
            close = body.find(_CLOSE)
            if close < 0:
                out.append(
                    _dropped(
                        "The tool call written as text has no close tag before the text ends; it was dropped.",
                        body,
                        _OPEN + body,
                    )
                )
                break
            # The scan put this close tag inside a string: the quotes do not balance. End the span there.
            out.append(self._parse(body[:close]))
            self._read(body[close + len(_CLOSE) :], out)
        if self._pending:
            out.append(TextDelta(self._pending))
            self._pending = ""
        return out

    def _read(self, text: str, out: list[Read]) -> None:
        while text:
            if self._span is not None:
                text = self._read_span(text, out)
                continue
            if self._pending:
                text, self._pending = self._pending + text, ""
            start = text.find(_OPEN)
            if start >= 0:
                if start:
                    out.append(TextDelta(text[:start]))
                self._span = _Span()
                text = text[start + len(_OPEN) :]
                continue
            last = text.rfind(_FIRST)
            if last >= 0 and len(text) - last < len(_OPEN) and _OPEN.startswith(text[last:]):
                if last:
                    out.append(TextDelta(text[:last]))
                self._pending = text[last:]
            else:
                out.append(TextDelta(text))
            return

    def _read_span(self, text: str, out: list[Read]) -> str:
        """Scan ``text`` as the span's body; returns the text after its close tag ("" when still open)."""
        span = self._span
        assert span is not None
        if span.partial:
            text, span.partial = span.partial + text, ""
        pos, end = 0, len(text)
        while pos < end:
            if span.escaped:
                span.escaped, pos = False, pos + 1
                continue
            if span.in_string:
                found = _INSIDE_STRING.search(text, pos)
                if found is None:
                    break
                if found.group() == '"':
                    span.in_string = False
                else:
                    span.escaped = True
                pos = found.end()
                continue
            found = _OUTSIDE_STRING.search(text, pos)
            if found is None:
                break
            at = found.start()
            if text[at] == '"':
                span.in_string, pos = True, at + 1
            elif text.startswith(_CLOSE, at):
                span.keep(text[:at], self.limit)
                self._span = None
                if span.dropping:
                    out.append(
                        _dropped(
                            f"The tool call written as text is longer than {self.limit} characters; it was dropped.",
                            span.head,
                            "",
                        )
                    )
                else:
                    out.append(self._parse("".join(span.parts)))
                return text[at + len(_CLOSE) :]
            elif end - at < len(_CLOSE) and _CLOSE.startswith(text[at:]):
                span.keep(text[:at], self.limit)
                span.partial = text[at:]
                return ""
            else:
                pos = at + 1
        span.keep(text, self.limit)
        return ""

    def _parse(self, body: str) -> ToolCall | MarkupDropped:
        def error(message: str) -> MarkupDropped:
            return _dropped(message, body, _OPEN + body + _CLOSE)

        try:
            data = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            return error(f"The tool call written as text is not valid JSON ({_reason(e)}); it was dropped.")
        if not isinstance(data, dict):
            return error(
                'The tool call written as text must be a JSON object with "name" and "arguments"; it was dropped.'
            )
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            return error('The tool call written as text has no "name"; it was dropped.')
        args: Any = data["arguments"] if "arguments" in data else data.get("args")
        if args is None:
            args = {}
        elif isinstance(args, str):
            try:
                args = json.loads(args, parse_constant=_no_constant) if args.strip() else {}
            except (ValueError, RecursionError) as e:
                return error(
                    f"The arguments of the tool call {name!r} written as text are a string that is not "
                    f"valid JSON ({_reason(e)}); it was dropped."
                )
        if not isinstance(args, dict):
            return error(
                f"The arguments of the tool call {name!r} written as text are not a JSON object; it was dropped."
            )
        call = ToolCall(f"markup_{self.turn:02d}_{self.calls}", name, args)
        self.calls += 1
        return call


async def intercept(
    events: AsyncIterator[ModelEvent], request: ModelRequest
) -> AsyncIterator[ModelEvent | MarkupDropped]:
    """``events`` with tool calls written as text markup turned into `ToolCall`s, and the spans dropped reported.

    Text streams through unchanged while it holds no ``<`` (the fast path); a native event ends the text, so a span
    left open by it is dropped. A reply whose only calls were written as text and that stopped with ``end_turn``
    ends with ``tool_use``, as it would have with native calls (and as its recording replays).
    """
    __tracebackhide__ = True  # IPython shows a script function's frames, not these
    parser: MarkupParser | None = None
    async for event in events:
        if isinstance(event, TextDelta):
            if (parser is None or parser.idle) and _FIRST not in event.text:
                yield event
                continue
            if parser is None:
                parser = MarkupParser(sum(1 for m in request.messages if m.role == "assistant"))
            for item in parser.feed(event.text):
                yield item
            continue
        if parser is not None:
            for item in parser.finish():
                yield item
            if isinstance(event, TurnEnd) and parser.calls and event.stop_reason == "end_turn":
                event = TurnEnd("tool_use", event.usage, event.container)
        yield event
    if parser is not None:  # a stream that ended without its TurnEnd: the loop reports that; release the text
        for item in parser.finish():
            yield item


def _dropped(message: str, body: str, raw: str) -> MarkupDropped:
    shown = body if len(body) <= _SHOWN else body[:_SHOWN] + "…"
    return MarkupDropped(MarkupError(message, shown), raw)


def _reason(error: BaseException) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at character {error.pos}"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
