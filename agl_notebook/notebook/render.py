"""What a step looks like: its trace (built from its events) drawn as deterministic text and HTML.

The same trace is drawn live (inside the widget, while the step runs) and final (the static bundle the display is
updated to, which a saved notebook keeps). The final drawing depends only on what the events say, never on times,
ids of widgets or whether the step was live or replayed, so a replay draws exactly what the live run left in the
saved notebook and nbval compares them equal. Everything is escaped, and secrets are scrubbed before drawing
(before anything is shortened, so a cut never keeps part of a secret).

The model's thinking is drawn under its turn, before that turn's text and tool calls, as a collapsed "Thinking"
block (a ``<details>``): live, its text grows as it streams; once its block closes, the kept block alone decides
what is drawn, so a replay (which streams the whole thinking at once) draws what the live run drew. Thinking the API
sent without its text (display "omitted") and redacted thinking are drawn as such; a block of a type this version
does not read is a small chip naming its type. Opaque fields (signatures, encrypted data) are never drawn, and
``text/plain`` leaves thinking out.

Colours read in every theme and every reader: text is never coloured (no colour reads at 4.5:1 on both a light and a
dark background), it inherits the theme's; states are semi-transparent tinted backgrounds and borders, which blend
with whatever is behind them. No ``var(--jp-*)``: JupyterLab's sanitizer strips them from untrusted notebooks, and
GitHub defines none. Long blocks are capped in height and scroll, so a 200-line tool result stays a few lines tall.
"""

from __future__ import annotations

import functools
import html
import json
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .._secrets import scrub_text, secrets_from_environment
from .._view_values import PRE, TABLE, TD, clipped, escaped, scrubbed, shown, value_html
from ..approvals import decision_words
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    ClientToolExecuting,
    ClientToolRequested,
    ClientToolResult,
    ClientToolRoundtrip,
    Event,
    MarkupError,
    ModelRetryWaiting,
    ModelSpent,
    OutputTextDelta,
    PayloadRejected,
    QuestionAnswered,
    QuestionAsked,
    ReasoningTextDelta,
    ReplyBlockKept,
    RunTruncated,
    StepFailed,
    StepFinished,
    StepForked,
    StepReplayed,
    StepReported,
    StepStarted,
    TextCited,
)
from ..functions.events import ApiResponded, ErrorHandled, FunctionCalled, FunctionEvent, FunctionReturned, Logged
from ..media import Media
from ..models.prices import RecordedCost, dollars
from ..payloads import JsonObject, JsonValue
from ..replay.records import VIEWS
from ..transcript import media_of
from .change_view import change_html, change_text
from .media_view import document_words, image_words, media_html, reference_html, references_in
from .server_view import (
    CODE_TOOLS,
    CitationMark,
    ServerCallTrace,
    Sources,
    marks_html,
    server_call_html,
    server_call_text,
    sources_html,
    sources_text,
)

INTERRUPTIONS = ("KeyboardInterrupt", "CancelledError", "StepInterrupted")
"""The errors that mean the person (or a cancelled task) stopped the step, rather than something going wrong."""


@dataclass
class CallTrace:
    """One tool call as the view shows it."""

    id: str
    name: str
    args: JsonObject
    status: Literal[
        "requested",
        "awaiting approval",
        "running",
        "ok",
        "failed",
        "rejected",
        "denied",
        "reported",
        "raised",
        "interrupted",
        "not run",
    ] = "requested"
    result: str | None = None
    problems: tuple[str, ...] = ()
    decided: ApprovalDecided | None = None
    """How the call was approved, edited or denied, if it needed approval."""


@dataclass
class QuestionTrace:
    """One question and, once given, its answer."""

    text: str
    inputs: tuple[str, ...]
    answer: JsonValue = None
    answered: bool = False


@dataclass
class MarkupNote:
    """A tool call written as text markup that could not be read (its span was dropped)."""

    message: str


@dataclass
class ThinkingTrace:
    """One thinking block of a model turn: its text as it streams, then as its kept block says."""

    pieces: list[str] = field(default_factory=list)
    """The thinking's text: the streamed pieces (joined when drawn), then the kept block's text alone."""
    state: Literal["streaming", "kept", "omitted", "redacted"] = "streaming"
    """``streaming``: its block has not closed; ``omitted``: the API sent no text (display "omitted");
    ``redacted``: a redacted_thinking block (encrypted, never readable)."""


@dataclass
class KeptBlockNote:
    """A block of the reply of a type this version does not read, kept as received: drawn by its type only."""

    type: str


@dataclass
class ForkNote:
    """Where a forked step's replayed turns end and its live ones begin (docs/forking.md)."""

    forked_from: str
    """The id of the record whose turns were replayed."""
    at_turn: int
    """How many turns were replayed."""


@dataclass
class FunctionNote:
    """A line of a running agent function: a call, its return, a log message, an API response, a handled error."""

    kind: Literal["call", "return", "log", "api", "error"]
    depth: int
    """How deep the function that the line belongs to is nested (0: the top-level call)."""
    text: str
    failed: bool = False


_Drawn = KeptBlockNote | ServerCallTrace


@dataclass
class StepTrace:
    """Everything a view shows about one step, folded from its events."""

    role: str
    input: JsonValue = None
    label: str = ""
    """A short label telling this step from others of the role (from the input, or `Run.step`'s ``label``)."""
    backend: str = ""
    items: list[
        list[str]
        | CallTrace
        | QuestionTrace
        | MarkupNote
        | FunctionNote
        | ThinkingTrace
        | KeptBlockNote
        | ServerCallTrace
        | ForkNote
    ] = field(default_factory=list)
    """Text (kept as its pieces, joined when drawn: appending to one string would copy it per delta; a
    `CitationMark` among them where cited text ended), thinking, other kept blocks, tool calls (Anthropic's too) and
    questions, in order."""
    sources: Sources = field(default_factory=Sources)
    """The sources the step's text cites, numbered (notebook/server_view.py)."""
    roundtrips: int = 0
    max_roundtrips: int = 0
    result: JsonValue = None
    reported_by: str | None = None
    truncated: bool = False
    requests: int = 0
    state: Literal["running", "finished", "failed"] = "running"
    waiting_for_model: bool = True
    """Live only: a request is out and nothing of its reply has arrived yet."""
    error: tuple[str, str] | None = None
    result_descriptions: dict[str, str] = field(default_factory=dict)
    waiting: str | None = None
    """While a retry of a model request waits: what the live view says (never drawn once the step ends)."""
    cost: RecordedCost | None = None
    """What the step's record says it cost when it was recorded (drawn beside its tokens; None: no dollars)."""
    tokens: int = 0
    """The tokens of the step's record (drawn with its cost)."""
    recorded: bool = True
    """False when the step finished and nothing was recorded (mode ``off``): its view says so."""
    spent_now: str | None = None
    """Live only: what the Run has spent so far (never drawn once the step ends, so never saved)."""
    fork_points: tuple[str, int] | None = None
    """A finished step's record id and its model turns: each turn but the last offers the code that forks there."""
    views: int = VIEWS
    """The version of the view that draws it: a step's record's (`StepRecord.views`) once the step ended, so a record
    made by an earlier version replays as it was drawn then."""
    change: JsonObject | None = None
    """What changed since the step's previous version, from its record (docs/iterating.md); None: nothing drawn."""
    _depth: int = field(default=0, init=False, repr=False, compare=False)
    """The depth of the agent function running now (what a log or an API response belongs to)."""

    def apply(self, event: Event | FunctionEvent) -> None:
        """Fold one event into the trace."""
        self.waiting = _waiting_text(event) if isinstance(event, ModelRetryWaiting) else None
        if isinstance(event, FunctionCalled | FunctionReturned | Logged | ApiResponded | ErrorHandled):
            self._function(event)
        elif isinstance(event, OutputTextDelta):
            self.waiting_for_model = False
            last = self.items[-1] if self.items else None
            if isinstance(last, list):
                last.append(event.delta)
            else:
                self.items.append([event.delta])
        elif isinstance(event, ReasoningTextDelta):
            self.waiting_for_model = False
            last = self.items[-1] if self.items else None
            if isinstance(last, ThinkingTrace) and last.state == "streaming":
                last.pieces.append(event.delta)
            else:
                self.items.append(ThinkingTrace([event.delta]))
        elif isinstance(event, ReplyBlockKept):
            self.waiting_for_model = False
            self._kept(event.block)
        elif isinstance(event, TextCited):
            numbers = tuple(dict.fromkeys(self.sources.number(c) for c in event.citations))
            last = self.items[-1] if self.items else None
            if isinstance(last, list):
                last.append(CitationMark(numbers))
            else:
                self.items.append([CitationMark(numbers)])
        elif isinstance(event, ClientToolRequested):
            self.waiting_for_model = False
            self.items.append(CallTrace(event.tool_call_id, event.name, event.args))
        elif isinstance(event, ClientToolExecuting):
            self._call(event.tool_call_id).status = "running"
        elif isinstance(event, PayloadRejected):
            call = self._call(event.tool_call_id)
            call.status, call.problems = "rejected", event.problems
        elif isinstance(event, StepReported):
            self._call(event.tool_call_id).status = "reported"
            self.result, self.reported_by = event.payload, event.name
        elif isinstance(event, ClientToolResult):
            call = self._call(event.tool_call_id)
            call.result = event.result
            if call.status not in ("rejected", "reported", "denied"):
                call.status = "failed" if event.is_error else "ok"
        elif isinstance(event, ApprovalRequested):
            self._call(event.tool_call_id).status = "awaiting approval"
        elif isinstance(event, ApprovalDecided):
            call = self._call(event.tool_call_id)
            call.decided = event
            call.status = "denied" if event.decision == "deny" else "requested"
        elif isinstance(event, ClientToolRoundtrip):
            self.roundtrips, self.max_roundtrips = event.turn, event.max_turns
            self.waiting_for_model = True
        elif isinstance(event, QuestionAsked):
            self.items.append(QuestionTrace(event.text, event.inputs))
        elif isinstance(event, QuestionAnswered):
            for item in reversed(self.items):
                if isinstance(item, QuestionTrace) and not item.answered:
                    item.answer, item.answered = event.answer, True
                    break
        elif isinstance(event, MarkupError):
            self.items.append(MarkupNote(event.message))
        elif isinstance(event, RunTruncated):
            self.truncated = True
        elif isinstance(event, StepStarted):
            self.role, self.input, self.backend, self.label = event.role, event.input, event.model, event.label
        elif isinstance(event, StepReplayed):
            self.backend = event.backend  # what the record claims it was made with
        elif isinstance(event, StepForked):
            self.items.append(ForkNote(event.forked_from, event.at_turn))
        elif isinstance(event, StepFinished):
            self.state, self.requests, self.truncated = "finished", event.requests, event.truncated
        elif isinstance(event, StepFailed):
            self.end_failed(event.error, event.message)
        elif isinstance(event, ModelSpent):
            self.spent_now = f"this Run has spent {dollars(event.run_spent_usd)} so far"

    def take_fork_points(self, record_id: str, turns: int) -> None:
        """Offer the code that forks the finished step's record at each of its turns but the last."""
        self.fork_points = (record_id, turns) if turns >= 2 else None

    @property
    def forked(self) -> ForkNote | None:
        """Where a forked step's live turns began, if it is a fork."""
        return next((item for item in self.items if isinstance(item, ForkNote)), None)

    def take_cost(self, cost: RecordedCost | None, tokens: int) -> None:
        """Draw the step's recorded cost (and tokens): the record's, the same live and replayed."""
        self.cost, self.tokens = cost, tokens

    def end_failed(self, error: str, message: str) -> None:
        """The step failed: every row takes its final state, and the error names the tool whose handler raised."""
        if self.state == "failed":
            return
        interrupted = error in INTERRUPTIONS
        running = [item for item in self.items if isinstance(item, CallTrace) and item.status == "running"]
        for item in self.items:
            if isinstance(item, CallTrace) and item.status in ("requested", "awaiting approval"):
                item.status = "not run"
            elif isinstance(item, CallTrace) and item.status == "running":
                item.status = "interrupted" if interrupted else "raised"
        if interrupted:  # whatever the cancellation said: one line a person reads the same everywhere
            message = "the step was interrupted; nothing was recorded"
        elif len(running) == 1:
            error = f"{error} in the handler of tool {running[0].name}"
        self.state, self.error = "failed", (error, message)

    def _kept(self, block: JsonObject) -> None:
        """A reply block closed: thinking settles the streamed block (its text is the block's, not the deltas')."""
        kind = block.get("type")
        if kind == "thinking":
            text = block.get("thinking")
            text = text if isinstance(text, str) else ""
            last = self.items[-1] if self.items else None
            thinking = last if isinstance(last, ThinkingTrace) and last.state == "streaming" else ThinkingTrace()
            if thinking is not last:
                self.items.append(thinking)
            thinking.pieces, thinking.state = [text], "kept" if text else "omitted"
        elif kind == "redacted_thinking":
            self.items.append(ThinkingTrace(state="redacted"))
        elif kind == "server_tool_use":
            given = block.get("input")
            call_id, name = block.get("id"), block.get("name")
            self.items.append(
                ServerCallTrace(
                    call_id if isinstance(call_id, str) else "",
                    name if isinstance(name, str) and name else "?",
                    given if isinstance(given, dict) else {},
                )
            )
        elif isinstance(kind, str) and kind.endswith("_tool_result") and isinstance(block.get("tool_use_id"), str):
            call = next(
                (i for i in reversed(self.items) if isinstance(i, ServerCallTrace) and i.id == block["tool_use_id"]),
                None,
            )
            if call is None:  # a result whose call is not in the reply: drawn on its own
                call = ServerCallTrace(str(block["tool_use_id"]), "?", {})
                self.items.append(call)
            call.result = block
        else:
            self.items.append(KeptBlockNote(kind if isinstance(kind, str) and kind else "(no type)"))

    def _function(self, event: FunctionCalled | FunctionReturned | Logged | ApiResponded | ErrorHandled) -> None:
        depth = self._depth
        if isinstance(event, FunctionCalled):
            self._depth = event.depth
            self.items.append(FunctionNote("call", event.depth, f"{event.function} {_compact(event.args)}"))
        elif isinstance(event, FunctionReturned):
            self._depth = max(event.depth - 1, 0)
            self.items.append(FunctionNote("return", event.depth, f"{event.function}: {_compact(event.result)}"))
        elif isinstance(event, Logged):
            self.items.append(FunctionNote("log", depth, f"{event.function}: {event.message}"))
        elif isinstance(event, ApiResponded):
            status = str(event.status) if event.status is not None else "no response"
            self.items.append(FunctionNote("api", depth, f"{event.method} {event.url}: {status}", event.is_error))
        else:
            self.items.append(FunctionNote("error", depth, f"{event.error} in {event.function}: {event.message}", True))

    def _call(self, call_id: str) -> CallTrace:
        for item in reversed(self.items):
            if isinstance(item, CallTrace) and item.id == call_id:
                return item
        placeholder = CallTrace(call_id, "?", {})
        self.items.append(placeholder)
        return placeholder


# --------------------------------------------------------------------------------------------------------------


_Escape = Callable[[str], str]
_Draw = Callable[[JsonValue], str]
_FUNCTION_WORDS = {"call": "call", "return": "returned", "log": "log", "api": "api", "error": "handled"}
_STATUS_WORDS = {
    "requested": "requested",
    "awaiting approval": "awaiting approval…",
    "denied": "denied",
    "running": "running…",
    "ok": "ok",
    "failed": "failed",
    "rejected": "arguments rejected",
    "reported": "reported",
    "raised": "raised an error",
    "interrupted": "interrupted",
    "not run": "not run",
}
_STATUS_TINT = {
    "awaiting approval": "warn",
    "denied": "bad",
    "ok": "ok",
    "reported": "ok",
    "failed": "bad",
    "raised": "bad",
    "rejected": "warn",
    "interrupted": "warn",
}
LABEL_LENGTH = 40
"""How long a step's label may be, in characters."""
TEXT_VALUE_LENGTH = 200
"""How long a value may be in the ``text/plain`` summary (the HTML view shows it up to
`agl_notebook._view_values.VIEW_VALUE_BYTES`, in a block capped in height)."""


def render_text(trace: StepTrace, secrets: tuple[str, ...] | None = None) -> str:
    """The deterministic ``text/plain`` summary of a step, scrubbed of ``secrets`` (default: the environment's).

    Each value is scrubbed before it is shortened or capped (`agl_notebook._view_values`).
    """
    secrets = secrets_from_environment() if secrets is None else secrets

    def clip(text: str, limit: int) -> str:  # scrub, then shorten: a cut must never keep part of a secret
        return clipped(text, secrets, limit)

    def show(text: str) -> str:
        return shown(text, secrets)

    label = f" on {clip(trace.label, LABEL_LENGTH)!r}" if trace.label else ""
    head = f"role {show(trace.role)!r}{label}, {show(_state_text(trace))}, {show(_provenance(trace))}"
    lines = [f"agl_notebook step: {head}"]
    for item in trace.items:
        if isinstance(item, CallTrace):
            decided = f" ({_decided_words(item.decided, lambda m: clip(m, 60))})" if item.decided else ""
            lines.append(f"  tool {show(item.name)}: {_STATUS_WORDS[item.status]}{decided}")
            lines.extend(f"    returned {show(_media_words(m))}" for m in media_of(item.result or ""))
        elif isinstance(item, MarkupNote):
            lines.append(f"  markup error: {show(item.message)}")
        elif isinstance(item, KeptBlockNote):  # thinking is left out of the text; a block of another type is named
            lines.append(f"  kept block: {clip(item.type, LABEL_LENGTH)}")
        elif isinstance(item, ServerCallTrace):
            lines.append(server_call_text(item, clip))
        elif isinstance(item, FunctionNote):
            lines.append(f"  {'  ' * item.depth}{_FUNCTION_WORDS[item.kind]} {clip(item.text, 100)}")
        elif isinstance(item, QuestionTrace):
            width = 60 if _labelled(item, trace.views) is None else 200  # a screen's answer names its inputs
            answer = clip(_answer_text(item, trace.views, secrets), width) if item.answered else _unanswered(trace)
            lines.append(f"  question {clip(item.text, 60)!r}: {answer}")
        elif isinstance(item, ForkNote):
            lines.append(f"  {show(_fork_words(item))}")
    lines.extend(sources_text(trace.sources, clip))
    if trace.reported_by is not None:
        lines.append(f"  result ({show(trace.reported_by)}):")
        fields = trace.result.items() if isinstance(trace.result, dict) else [("value", trace.result)]
        lines.extend(
            f"    {show(name)}: {clip(_compact(scrubbed(value, secrets)), TEXT_VALUE_LENGTH)}" for name, value in fields
        )
    if trace.error is not None:
        lines.append(f"  error: {show(trace.error[0])}: {show(trace.error[1])}")
    if trace.cost is not None:
        lines.append(f"  cost: {_cost_text(trace)}")
    if trace.change is not None:
        lines.extend(change_text(trace.change, secrets))
    return scrub_text("\n".join(lines), secrets)  # a net: every value above is scrubbed already


def render_html(trace: StepTrace, secrets: tuple[str, ...] | None = None, *, live: bool = False) -> str:
    """The deterministic ``text/html`` view of a step: collapsible thinking and tool calls, the result as a table.

    Each value is scrubbed, then capped at `agl_notebook._view_values.VIEW_VALUE_BYTES`, then escaped. ``live``: the
    drawing of the live widget, whose collapsible blocks carry a ``data-agl-keep`` key (their place in the trace)
    so the widget keeps each one open or closed as the person left it across redraws; never in a saved drawing.
    """
    secrets = secrets_from_environment() if secrets is None else secrets

    def esc(text: str) -> str:
        return escaped(text, secrets)

    def val(value: JsonValue) -> str:
        return value_html(value, secrets)

    shown_label = clipped(trace.label, secrets, LABEL_LENGTH)
    label = f' · <span title="The step\'s input">{html.escape(shown_label)}</span>' if trace.label else ""
    parts = [
        f'<div class="agl-step agl-{trace.state}" style="{_BOX}">',
        f'<div style="{_HEAD}"><b>{esc(trace.role)}</b>{label} · {esc(_state_text(trace))}'
        f' · <span title="What the recording says it was made with">{esc(_provenance(trace))}</span>'
        "</div>",
    ]

    def keep(key: str) -> str:  # live only: the widget's script keeps this block open or closed across redraws
        return f' data-agl-keep="{key}"' if live else ""

    if trace.input is not None:
        parts.append(f"<details{keep('input')}><summary>Input</summary>{val(trace.input)}</details>")
        parts.append(_media_strip([reference_html(r, secrets) for r in references_in(trace.input)]))
    streaming = len(trace.items) - 1 if live and trace.state == "running" else -1  # the item text streams into
    boxed = trace.forked is not None and trace.forked.at_turn > 0
    if boxed:  # the replayed turns are drawn in a marked box, up to where the live ones begin
        parts.append(f'<div class="agl-replayed" style="{_REPLAYED}" title="{_REPLAYED_TITLE}">')

    def held(text: str, index: int) -> str:  # the start of a secret still streaming in is not drawn yet
        return _without_secret_start(text, secrets) if index == streaming else text

    for index, item in enumerate(trace.items):
        if isinstance(item, list):
            if any(isinstance(piece, CitationMark) for piece in item):
                parts.append(_cited_html(item, functools.partial(_held_at, held, index), esc, trace.sources))
                continue
            text = held("".join(item), index)
            if text.strip():
                parts.append(f'<div style="{_TEXT}">{esc(text)}</div>')
        elif isinstance(item, ServerCallTrace):
            parts.append(server_call_html(item, esc, trace.state == "running", keep(f"item-{index}"), _chip))
        elif isinstance(item, ThinkingTrace):
            if item.state == "streaming":
                item = ThinkingTrace([held("".join(item.pieces), index)])
            parts.append(_thinking_html(item, trace.state == "running", esc, keep(f"item-{index}")))
        elif isinstance(item, KeptBlockNote):
            kind = clipped(item.type, secrets, LABEL_LENGTH)
            parts.append(
                f'<div style="{_CALL}" title="A block of the reply of a type this version does not draw, kept as'
                f' received and sent back unchanged">{_chip(f"block: {kind}", "plain")}</div>'
            )
        elif isinstance(item, CallTrace):
            parts.append(_call_html(item, esc, val, keep(f"item-{index}")))
            parts.append(_media_strip([media_html(m, secrets) for m in media_of(item.result or "")]))
        elif isinstance(item, MarkupNote):
            parts.append(f'<div style="{_ERROR}">A tool call written as text was dropped: {esc(item.message)}</div>')
        elif isinstance(item, FunctionNote):
            tint = f"background:{_TINTS['bad']};" if item.failed else ""
            parts.append(
                f'<div style="{_FUNCTION}padding-left:{12 * item.depth}px;{tint}">'
                f"<b>{esc(_FUNCTION_WORDS[item.kind])}</b> <code>{esc(item.text)}</code></div>"
            )
        elif isinstance(item, ForkNote):
            close = "</div>" if boxed else ""
            parts.append(f'{close}<div class="agl-forked" style="{_NOTE}">{esc(_fork_words(item))}</div>')
        else:
            answer = _answer_html(item, trace.views, val, esc) if item.answered else f"<i>{_unanswered(trace)}</i>"
            parts.append(
                f'<div style="{_QUESTION}"><b>Question:</b> <span style="white-space:pre-wrap">'
                f"{esc(item.text)}</span><br><b>Answer:</b> {answer}</div>"
            )
    if trace.sources.listed:
        parts.append(sources_html(trace.sources, esc))
    if trace.roundtrips:
        parts.append(
            f'<div style="{_NOTE}">tool round trips: {trace.roundtrips} of at most '
            f"{trace.max_roundtrips}{' (limit reached)' if trace.truncated else ''}</div>"
        )
    if trace.reported_by is not None:
        parts.append(_result_html(trace, esc, val))
    if trace.error is not None:
        parts.append(f'<div style="{_ERROR}"><b>{esc(trace.error[0])}</b>: {esc(trace.error[1])}</div>')
    if trace.waiting is not None and trace.state == "running":
        parts.append(f'<div style="{_NOTE}">{esc(trace.waiting)}</div>')
    if trace.spent_now is not None and trace.state == "running":
        parts.append(f'<div style="{_NOTE}">{esc(trace.spent_now)}</div>')
    if trace.cost is not None:
        parts.append(
            f'<div style="{_NOTE}" title="What the step cost when it was recorded, at the rates of that day">'
            f"{esc(_cost_text(trace))}</div>"
        )
    if trace.fork_points is not None and trace.state == "finished":
        parts.append(_fork_here_html(trace.role, *trace.fork_points, esc=esc))
    if trace.change is not None:
        parts.append(change_html(trace.change, esc))
    parts.append("</div>")
    return "".join(parts)


def _labelled(item: QuestionTrace, views: int) -> list[tuple[str, JsonValue]] | None:
    """A screen's answer as (label, value) pairs, drawn from view version 3 on; None: drawn as one value.

    A screen whose first answer dismissed it (an MCP server's Decline or Cancel) is that word alone: the fields it
    left empty say nothing.
    """
    answer = item.answer
    if views < 3 or not isinstance(answer, list) or len(answer) != len(item.inputs) or len(answer) < 2:
        return None
    if answer[0] in ("Decline", "Cancel") and all(v is None for v in answer[1:]):
        return [(item.inputs[0], answer[0])]
    return list(zip(item.inputs, answer, strict=True))


def _answer_html(item: QuestionTrace, views: int, val: Callable[[JsonValue], str], esc: _Escape) -> str:
    pairs = _labelled(item, views)
    if pairs is None:
        return val(item.answer)
    return "".join(
        f"<br>{esc(label)}: {val(value)}" if i else f"{esc(label)}: {val(value)}"
        for i, (label, value) in enumerate(pairs)
    )


def _answer_text(item: QuestionTrace, views: int, secrets: tuple[str, ...]) -> str:
    pairs = _labelled(item, views)
    if pairs is None:
        return _compact(scrubbed(item.answer, secrets))
    return "; ".join(f"{label}: {_compact(scrubbed(value, secrets))}" for label, value in pairs)


def _fork_words(note: ForkNote) -> str:
    turns = "turn 1" if note.at_turn == 1 else f"turns 1-{note.at_turn}"
    replayed = f"{turns} replayed as recorded (under the instructions of then)" if note.at_turn else "nothing replayed"
    return (
        f"forked from record {note.forked_from} at turn {note.at_turn}: {replayed}, live from turn {note.at_turn + 1}"
    )


def fork_code(role: str, record_id: str, at_turn: int) -> str:
    """The code that forks a step's record at a turn (the role named by its name, the Run ``run``)."""
    name = role if role.isidentifier() and not keyword.iskeyword(role) else "role"  # "class" is no variable
    return f'await run.step({name}, fork_from="{record_id}", at_turn={at_turn})'


def _fork_here_html(role: str, record_id: str, turns: int, *, esc: _Escape) -> str:
    """Each turn but the last, with the code that forks the step there (the extension adds a button to each).

    The code is scrubbed and escaped like every other value (a role's name is the person's text).
    """
    rows = "".join(
        f'<div class="agl-fork-turn">after turn {k} of {turns}:'
        f'<pre class="agl-fork-code" style="{PRE}">{esc(fork_code(role, record_id, k))}</pre></div>'
        for k in range(1, turns)
    )
    return (
        f'<details class="agl-fork" style="{_CALL}"><summary>Fork this step at a turn</summary>'
        f'<div style="{_NOTE}">The turns up to the one chosen are replayed from this record, the rest asked live with '
        f"the role as it is then.</div>{rows}</details>"
    )


def _without_secret_start(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without a tail that begins a secret (as written, JSON- or HTML-escaped) the next piece may complete.

    The scrubber finds a secret only once it is whole; a live redraw between the two pieces of a secret split across
    deltas would otherwise draw its first part. Held back, that tail is drawn with the next piece, scrubbed.
    """
    cut = 0
    for secret in secrets:
        for spelled in (secret, json.dumps(secret)[1:-1], html.escape(secret)):
            for length in range(min(len(spelled) - 1, len(text)), cut, -1):  # the longest first
                if text.endswith(spelled[:length]):
                    cut = length
                    break
    return text[: len(text) - cut]


def _held_at(held: Callable[[str, int], str], index: int, text: str) -> str:
    return held(text, index)


def _cited_html(item: list[str], held: Callable[[str], str], esc: _Escape, sources: Sources) -> str:
    """A text item with cited passages: each run of text escaped, each `CitationMark` drawn as its sources' numbers."""
    drawn: list[str] = []
    run: list[str] = []
    for piece in item:
        if isinstance(piece, CitationMark):
            drawn.append(esc("".join(run)))
            drawn.append(marks_html(piece, sources, esc))
            run = []
        else:
            run.append(piece)
    if run:  # the text after the last mark may still be streaming: a secret's start is held back
        drawn.append(esc(held("".join(run))))
    return f'<div style="{_TEXT}">{"".join(drawn)}</div>'


def _thinking_html(item: ThinkingTrace, running: bool, esc: _Escape, keep: str) -> str:
    """A thinking block, collapsed: its text (scrubbed, capped, escaped), or what the API sent instead of it."""
    if item.state == "redacted":
        summary = "Thinking (redacted)"
        body = "The API sent this thinking encrypted: it is kept and sent back as it came, never shown."
    elif item.state == "omitted":
        summary = "Thinking (omitted by the API)"
        body = "The API sent this thinking without its text (display omitted): its signature is kept and sent back."
    else:
        summary = "Thinking" if item.state == "kept" else "Thinking…" if running else "Thinking (cut short)"
        body = "".join(item.pieces)
    return (
        f'<details class="agl-thinking" style="{_THINKING}"{keep}><summary>{summary}</summary>'
        f'<div style="{_TEXT}">{esc(body)}</div></details>'
    )


def _call_html(call: CallTrace, esc: _Escape, val: _Draw, keep: str = "") -> str:
    body = [val(call.args)]
    decided = ""
    if call.decided is not None:
        # The summary names the decision; the message and what the call ran with are inside.
        decided = f" · {esc(_decided_words(call.decided, lambda _: ''))}"
        words = _decided_words(call.decided, lambda m: m, beside_status=False)
        body.append(f"<div><b>Approval</b>: {esc(words)}</div>")
        if call.decided.arguments is not None:
            body.append(f"<div><b>Ran with</b></div>{val(call.decided.arguments)}")
    if call.problems:
        body.append("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in call.problems) + "</ul>")
    if call.result is not None:
        body.append(f'<div><b>Result</b></div><div style="{_SCROLL}"><pre style="{PRE}">{esc(call.result)}</pre></div>')
    return (
        f'<details style="{_CALL}"{keep}><summary><code>{esc(call.name)}</code> · '
        f"{_chip(_STATUS_WORDS[call.status], _STATUS_TINT.get(call.status, 'plain'))}{decided}</summary>"
        f"{''.join(body)}</details>"
    )


def _result_html(trace: StepTrace, esc: _Escape, val: _Draw) -> str:
    rows = []
    fields = trace.result.items() if isinstance(trace.result, dict) else [("", trace.result)]
    for name, value in fields:
        description = trace.result_descriptions.get(name, "")
        rows.append(
            f'<tr><td style="{TD}"><code>{esc(name)}</code></td><td style="{TD}">'
            f'{val(value)}</td><td style="{TD}">{esc(description)}</td></tr>'
        )
    return (
        f'<div style="{_HEAD}">Result, reported with <code>{esc(trace.reported_by or "")}</code></div>'
        f'<table class="agl-result" style="{TABLE}"><thead><tr><th style="{TD}">field</th>'
        f'<th style="{TD}">value</th><th style="{TD}">description</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _decided_words(event: ApprovalDecided, message: Callable[[str], str], *, beside_status: bool = True) -> str:
    words = decision_words(
        event.decision, by=event.by, always=event.always, changed=event.changed, message=message(event.message)
    )
    # Beside the status "denied" the verb would say it twice: "denied · by a person".
    return words.removeprefix("denied ") if beside_status and event.decision == "deny" else words


def _media_words(media: Media) -> str:
    return document_words(media) if media.kind == "document" else image_words(media)


def _media_strip(drawn: list[str]) -> str:
    """The images and documents of an input or a tool's result, drawn in a row (notebook/media_view.py)."""
    return f'<div class="agl-media" style="margin:2px 0">{"".join(drawn)}</div>' if drawn else ""


def _chip(text: str, tint: str) -> str:
    return f'<span style="background:{_TINTS[tint]};padding:0 4px;border-radius:3px">{html.escape(text)}</span>'


def _waiting_text(event: ModelRetryWaiting) -> str:
    seconds = f"{event.seconds:.0f}" if event.seconds >= 10 else f"{event.seconds:.1f}"
    asked = f"; the server asked for {event.asked:.0f} s" if event.asked is not None else ""
    return f"waiting {seconds} s before retrying ({event.reason}{asked}; retry {event.retry} of {event.max_retries})"


def _state_text(trace: StepTrace) -> str:
    if trace.state == "running":
        return f"waiting for {trace.backend}" if trace.waiting_for_model and trace.backend else "running"
    if trace.state == "failed":
        return "failed, nothing was recorded"
    requests = f"{trace.requests} model request{'s' if trace.requests != 1 else ''}"
    return f"finished ({requests}{', truncated' if trace.truncated else ''})"


def _cost_text(trace: StepTrace) -> str:
    cost = trace.cost
    assert cost is not None
    ran_code = any(isinstance(i, ServerCallTrace) and i.name in CODE_TOOLS for i in trace.items)
    # Code execution is billed by container time, which no usage reports: say so rather than under-count.
    code = "; code execution not priced (billed by container time)" if ran_code else ""
    return f"{trace.tokens:,} tokens, {cost.words()} (rates of {cost.rates_as_of}){code}"


def _provenance(trace: StepTrace) -> str:
    # What the recording claims (a record's backend is data from the notebook, not a verified fact); a step that is
    # running or failed has no recording, nor has one that finished in mode "off".
    if trace.state == "finished" and not trace.recorded:
        return f"with {trace.backend}, not recorded (mode 'off')"
    return f"{'recorded with' if trace.state == 'finished' else 'with'} {trace.backend}"


def _unanswered(trace: StepTrace) -> str:
    return "waiting for an answer…" if trace.state == "running" else "not answered"


def _compact(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)


# Tints blend with the theme behind them (light or dark); text keeps the theme's colour.
_TINTS = {
    "ok": "rgba(26,127,55,0.18)",
    "bad": "rgba(209,36,47,0.18)",
    "warn": "rgba(191,135,0,0.22)",
    "plain": "rgba(127,127,127,0.16)",
    "anthropic": "rgba(204,120,92,0.22)",
}
_BOX = "border:1px solid rgba(127,127,127,0.45);border-radius:6px;padding:6px 10px;margin:4px 0;font-size:13px"
_HEAD = "margin:2px 0 6px 0"
_SCROLL = "max-height:24em;overflow:auto"
_TEXT = "white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0;max-height:24em;overflow:auto"
_CALL = "margin:2px 0"
_THINKING = "margin:4px 0;padding:2px 6px;background:rgba(130,80,223,0.10);border-left:3px solid rgba(130,80,223,0.55)"
_FUNCTION = "margin:2px 0;white-space:pre-wrap;"
_QUESTION = "margin:4px 0;padding:4px 6px;background:rgba(127,127,127,0.14);border-left:3px solid rgba(127,127,127,0.5)"
_NOTE = "opacity:0.8;margin:4px 0"
_REPLAYED = "border-left:3px dashed rgba(127,127,127,0.6);padding-left:6px;margin:2px 0"
_REPLAYED_TITLE = "Replayed from the record forked: written under the instructions it was recorded with"
_ERROR = f"margin:4px 0;padding:4px 6px;background:{_TINTS['bad']};border-left:3px solid rgba(209,36,47,0.7)"
