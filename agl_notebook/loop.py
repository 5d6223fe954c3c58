"""The tool loop: one step of one agent, from the first request to the report (or the last reply).

It knows nothing of notebooks, records or roles' Python types: it is given the tools as `LoopTool`s (a spec and
an async call) and, optionally, the reporting tool's validator, and it emits events as it goes.

Roles (`agl_notebook.roles`), client tools (`agl_notebook.client_tools`) and the ``llm`` command of JSON-function
agents (`agl_notebook.functions`) all run through it. A tool's exception propagates (roles re-raise it); an API
whose handler errors become error results (client tools) wraps its handlers. Every reply passes through
`model_events`, where tool calls written as text markup become ordinary calls (`agl_notebook.models.markup`). The
rules it keeps:

- Every tool_use gets exactly one tool_result with its id, in the next user message, in call order: run, rejected
  (validation problems), denied (its gate), not offered (the guard), skipped (after the report), or not run
  (round-trip limit).
- A tool's gate (approvals, `agl_notebook.run._approvals`) sees the validated payload before the handler runs: it
  may deny the call (its result is the gate's) or change the payload (its note precedes the handler's result).
- The guard is computed per turn from the tools offered in that turn's request and fails closed: a name not
  offered never reaches a handler, also when no tools are offered at all.
- ``max_tool_roundtrips=N`` allows N tool round trips, so N+1 model requests; tool calls in the reply that would
  need one more are answered "not run" and the run is truncated (``run.truncated``). A valid report needs no
  further request, so it is accepted even then.
- Calls before the reporting call run; calls after the first valid report get "skipped" results.
- A reply without a tool call, from an agent that must report, gets up to ``reminders`` framed reminders before
  `RoleIncompleteError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._fieldwise import Fieldwise
from .errors import (
    ContextWindowExceededError,
    ModelOutputTruncatedError,
    ModelRefusedError,
    RoleIncompleteError,
    UpstreamUnexpected,
)
from .events import (
    ClientToolExecuting,
    ClientToolRequested,
    ClientToolResult,
    ClientToolRoundtrip,
    OutputTextDelta,
    PayloadRejected,
    ReasoningTextDelta,
    ReplyBlockKept,
    RunTruncated,
    StepReported,
    TextCited,
)
from .models.base import (
    NO_USAGE,
    Cited,
    Effort,
    Model,
    ModelEvent,
    ModelRequest,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    TurnEnd,
    Usage,
    model_intercepts_markup,
)
from .models.markup import MarkupDropped, intercept
from .payloads import JsonObject, JsonValue
from .transcript import Block, Message, RawBlock, TextBlock, ToolResultBlock, ToolText, ToolUseBlock, media_of

if TYPE_CHECKING:
    from .events import Event

DEFAULT_MAX_TOOL_ROUNDTRIPS = 25
"""The default round-trip limit in every API."""

_MAX_PAUSES = 10  # `pause_turn` replies resent in a row before the step gives up

CallTool = Callable[[Any, str], Awaitable[tuple[str, bool]]]
"""Runs one call: given the built payload (or the raw arguments) and the call id, returns (content, is_error)."""
Validate = Callable[[JsonObject], tuple[Any, tuple[str, ...]]]
"""Builds a payload from the model's arguments, or returns the problems (each naming its field path)."""


@dataclass(frozen=True, eq=False, repr=False)
class Gated(Fieldwise):
    """What a tool's gate decided about one call."""

    payload: Any = None
    """The payload to run the call with: the validated one, or an edited one."""
    result: tuple[str, bool] | None = None
    """The result to give without running the call (a denial), or None to run it."""
    note: str = ""
    """Text put before the handler's result (what an edit changed)."""


Gate = Callable[[Any, str], Awaitable[Gated]]
"""Decides on one call, given the validated payload and the call id, before its handler runs."""

current_tool_call_id: ContextVar[str | None] = ContextVar("agl_notebook_tool_call_id", default=None)
"""The id of the tool call whose `LoopTool.call` is running, for code inside it that is not handed the id."""


@dataclass(frozen=True, eq=False, repr=False)
class LoopTool(Fieldwise):
    """A tool as the loop sees it: what the model is shown, and how a call runs."""

    spec: ToolSpec
    """What the model is shown."""
    call: CallTool
    """Runs a call. What it raises stops the loop and propagates unchanged."""
    validate: Validate | None = None
    """Checks the arguments before the call; None passes them on as they came."""
    gate: Gate | None = None
    """Decides, after validation, whether and with what payload the call runs; None runs every call."""


@dataclass(frozen=True, eq=False, repr=False)
class Reporting(Fieldwise):
    """The reporting tool as the loop sees it."""

    spec: ToolSpec
    """What the model is shown."""
    validate: Validate
    """Builds the payload, or returns the problems."""
    dump: Callable[[Any], JsonValue]
    """The payload as JSON, for events and records."""


@dataclass(frozen=True, eq=False, repr=False)
class LoopOutcome(Fieldwise):
    """How a loop ended."""

    result: Any
    """The reported payload, or None."""
    result_json: JsonValue
    """The reported payload as JSON, or None."""
    transcript: tuple[Message, ...]
    """Every message, the first user message included."""
    usage: Usage
    """Tokens over every request."""
    requests: int
    """Model requests made."""
    truncated: bool
    """True when the round-trip limit cut the run short."""
    request_usages: tuple[Usage, ...] = ()
    """Each request's own usage, in order (adding up to `usage`): a model priced by prompt length bills by each."""
    containers: tuple[tuple[int, str], ...] = ()
    """Each code execution container a reply named, where it was first named: (the messages of the request that
    reply answered, the container's id). A record keeps them, so a resumed or forked step sends the container again."""

    @property
    def text(self) -> str:
        """The text of the last assistant reply."""
        for m in reversed(self.transcript):
            if m.role == "assistant":
                return m.text
        return ""


@dataclass
class Progress:
    """How far a running loop has got, kept up to date as it goes: what a step waiting for a person keeps."""

    transcript: list[Message] = field(default_factory=list)
    """Every message so far: the loop's own list, the reply whose calls are running included."""
    results: list[Block] = field(default_factory=list)
    """The results of the calls of the latest reply that have finished (the next user message, so far)."""
    usage: Usage = NO_USAGE
    """Tokens over the requests so far."""
    containers: list[tuple[int, str]] = field(default_factory=list)
    """The code execution containers named so far (`LoopOutcome.containers`): the loop's own list."""


def not_offered(name: str) -> str:
    """The guard's result text for a call to a tool that was not offered this turn."""
    return f"Tool not offered this turn: {name}"


async def run_loop(
    *,
    model: Model,
    model_id: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[LoopTool],
    reporting: Reporting | None,
    emit: Callable[[Event], None],
    max_tool_roundtrips: int = DEFAULT_MAX_TOOL_ROUNDTRIPS,
    reminders: int = 1,
    max_tokens: int = 4096,
    role: str = "",
    progress: Progress | None = None,
    thinking: Thinking | None = None,
    effort: Effort | None = None,
    server_tools: tuple[JsonObject, ...] = (),
) -> LoopOutcome:
    """Run the loop until the agent reports, stops calling tools, or the round-trip limit is reached.

    ``progress``, when given, is kept up to date as the loop goes (its transcript is the loop's own list).

    Raises:
        RoleIncompleteError: ``reporting`` is set and the agent never reported (after its reminders).
        ModelRefusedError: The model refused.
        Exception: Whatever a tool's call raised, unchanged.
    """
    __tracebackhide__ = True  # IPython shows the person's frames (a handler's, a model's), not the loop's
    transcript = list(messages)
    containers: list[tuple[int, str]] = []
    if progress is not None:
        progress.transcript, progress.results, progress.containers = transcript, [], containers
    by_name = {t.spec.name: t for t in tools}
    specs = tuple(t.spec for t in tools) + ((reporting.spec,) if reporting else ())
    usage = NO_USAGE
    per_request: list[Usage] = []
    requests = roundtrips = pauses = 0
    reminders_left = reminders
    container: str | None = None  # the code execution container a reply named: every later request sends it back
    while True:
        request = ModelRequest(
            model_id, system, tuple(transcript), specs, max_tokens, role, thinking, effort, server_tools, container
        )
        # The guard's list comes from the request actually sent, so it is right for this turn by construction.
        offered = {s.name for s in request.tools}
        content, end = await _one_reply(model, request, emit)
        stop, turn_usage = end.stop_reason, end.usage
        if end.container and end.container != container:  # where it was named: a resume or a fork names it there
            containers.append((len(request.messages), end.container))
            container = end.container
        requests += 1
        usage += turn_usage
        per_request.append(turn_usage)
        if progress is not None:
            progress.usage = usage
        if stop == "refusal":
            raise ModelRefusedError(f"The model refused to continue the step of {role or 'the agent'!r}.")
        if stop == "max_tokens" and content and isinstance(content[-1], ToolUseBlock):
            raise ModelOutputTruncatedError(
                f"The model ran out of output tokens (max_tokens={max_tokens}) inside its call to "
                f"{content[-1].name!r} in the step of {role or 'the agent'!r}, so the call cannot be read; raise the "
                "role's max_tokens."
            )
        if stop == "model_context_window_exceeded":
            raise ContextWindowExceededError(
                f"The conversation of the step of {role or 'the agent'!r} no longer fits the model's context window "
                f"after {requests} request(s); shorten the tool results or split the work into several steps."
            )
        if content:
            transcript.append(Message("assistant", content))
        calls = [b for b in content if isinstance(b, ToolUseBlock)]
        # A paused turn is resent as it is, unless it already holds tool calls: those are answered like any others,
        # so no tool_use is ever left without its result.
        if stop == "pause_turn" and not calls:
            pauses += 1
            if pauses > _MAX_PAUSES:
                raise UpstreamUnexpected(f"The model paused its turn {pauses} times in a row.")
            continue
        pauses = 0
        if not calls:
            if reporting is None:
                return LoopOutcome(
                    None, None, tuple(transcript), usage, requests, False, tuple(per_request), tuple(containers)
                )
            if reminders_left > 0:
                reminders_left -= 1
                transcript.append(Message("user", (TextBlock(_reminder(reporting.spec.name)),)))
                continue
            raise RoleIncompleteError(
                f"The agent of {role or 'the step'!r} stopped without calling its reporting tool "
                f"{reporting.spec.name!r} (after {reminders} reminder(s)); its work was wiped. The transcript is on "
                "this error's .transcript.",
                role=role,
                transcript=transcript,
            )
        # A valid report needs no further request, so a reply that holds one is never cut short by the limit: the
        # calls before it run, as in any other turn.
        at_limit = roundtrips >= max_tool_roundtrips and not _holds_valid_report(calls, reporting)
        results: list[Block] = []
        if progress is not None:
            progress.results = results
        report: tuple[Any, JsonValue] | None = None
        unanswered: list[str] = []
        for call in calls:
            emit(ClientToolRequested(call.name, call.input, call.id))
            if report is not None:
                text, is_error = "Skipped: the step already reported its result.", True
            elif reporting is not None and call.name == reporting.spec.name:
                payload, problems = reporting.validate(call.input)
                if problems:
                    emit(PayloadRejected(call.name, call.id, call.input, problems))
                    text, is_error = _problems_text(call.name, problems), True
                else:
                    report = (payload, reporting.dump(payload))
                    emit(StepReported(call.name, call.id, report[1]))
                    text, is_error = "Reported. Your work on this step is done.", False
            elif call.name not in offered or call.name not in by_name:
                text, is_error = not_offered(call.name), True
            elif at_limit:
                unanswered.append(call.name)
                text, is_error = (f"Not run: the limit of {max_tool_roundtrips} tool round trips was reached.", True)
            else:
                text, is_error = await _run_tool(by_name[call.name], call, emit)
            results.append(ToolResultBlock(call.id, text, is_error, media=media_of(text)))
            emit(ClientToolResult(call.name, call.id, text, is_error))
        transcript.append(Message("user", tuple(results)))
        if progress is not None:
            progress.results = []
        if report is not None:
            return LoopOutcome(
                report[0], report[1], tuple(transcript), usage, requests, False, tuple(per_request), tuple(containers)
            )
        if at_limit:
            emit(RunTruncated(roundtrips, max_tool_roundtrips, tuple(unanswered)))
            if reporting is not None:
                raise RoleIncompleteError(
                    f"The agent of {role or 'the step'!r} did not report within {max_tool_roundtrips} tool round "
                    "trips; its work was wiped. The transcript is on this error's .transcript.",
                    role=role,
                    transcript=transcript,
                )
            return LoopOutcome(
                None, None, tuple(transcript), usage, requests, True, tuple(per_request), tuple(containers)
            )
        roundtrips += 1
        emit(ClientToolRoundtrip(roundtrips, max_tool_roundtrips))


def _holds_valid_report(calls: Sequence[ToolUseBlock], reporting: Reporting | None) -> bool:
    if reporting is None:
        return False
    return any(c.name == reporting.spec.name and not reporting.validate(c.input)[1] for c in calls)


async def _run_tool(tool: LoopTool, call: ToolUseBlock, emit: Callable[[Event], None]) -> tuple[str, bool]:
    __tracebackhide__ = True
    payload: Any = call.input
    if tool.validate is not None:
        payload, problems = tool.validate(call.input)
        if problems:
            emit(PayloadRejected(call.name, call.id, call.input, problems))
            return _problems_text(call.name, problems), True
    note = ""
    if tool.gate is not None:
        gated = await tool.gate(payload, call.id)
        if gated.result is not None:
            return gated.result
        payload, note = gated.payload, gated.note
    emit(ClientToolExecuting(call.name, call.id))
    token = current_tool_call_id.set(call.id)
    try:
        text, is_error = await tool.call(payload, call.id)
    finally:
        current_tool_call_id.reset(token)
    if not note:
        return text, is_error  # as it came: a `ToolText` keeps the images it carries
    return (ToolText(note + text, media_of(text)) if media_of(text) else note + text), is_error


def error_text(error: BaseException) -> str:
    """What the model reads for a handler's exception: its type and message (the type alone if it has none)."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


async def _one_reply(
    model: Model, request: ModelRequest, emit: Callable[[Event], None]
) -> tuple[tuple[Block, ...], TurnEnd]:
    """Stream one reply, emitting text and thinking deltas, and assemble its blocks in order.

    Text is joined into text blocks and tool calls become tool_use blocks; every other block comes whole as a
    `RawBlock` and is kept as it came, between the text before and after it. Cited text (a `Cited` after its
    deltas) is a text block of its own, its citations with it.
    """
    __tracebackhide__ = True
    blocks: list[Block] = []
    text: list[str] = []
    end: TurnEnd | None = None
    async for event in model_events(model, request):
        if isinstance(event, TextDelta):
            if event.text:
                text.append(event.text)
                emit(OutputTextDelta(event.text))
        elif isinstance(event, ToolCall):
            if text:
                blocks.append(TextBlock("".join(text)))
                text.clear()
            blocks.append(ToolUseBlock(event.id, event.name, event.args))
        elif isinstance(event, ThinkingDelta):
            if event.text:
                emit(ReasoningTextDelta(event.text))
        elif isinstance(event, Cited):
            joined = "".join(text)
            # The cited block's text streamed last; what came before it is a block of its own, with no citations.
            before = joined[: -len(event.text)] if event.text and joined.endswith(event.text) else ""
            if before:
                blocks.append(TextBlock(before))
            blocks.append(TextBlock(joined[len(before) :], citations=event.citations))
            text.clear()
            emit(TextCited(event.text, event.citations))
        elif isinstance(event, RawBlock):
            if text:
                blocks.append(TextBlock("".join(text)))
                text.clear()
            blocks.append(event)
            emit(ReplyBlockKept(event.data))
        elif isinstance(event, MarkupDropped):
            # The consumer never sees the span; the transcript keeps what the model wrote, so a replay drops it again.
            emit(event.error)
            if event.raw:
                text.append(event.raw)
        else:
            end = event
    if text:
        blocks.append(TextBlock("".join(text)))
    if end is None:
        raise UpstreamUnexpected("The model's reply ended without a stop reason.")
    return tuple(blocks), end


def model_events(model: Model, request: ModelRequest) -> AsyncIterator[ModelEvent | MarkupDropped]:
    """The events of one reply, with tool calls written as text markup turned into `ToolCall`s.

    Every reply of every model passes through here, so every streaming path gets the interceptor; a model may opt
    out with a false ``intercept_markup`` attribute. A span that cannot be read comes as a `MarkupDropped`: the loop
    emits its `MarkupError` and keeps its raw text in the transcript only.
    """
    if not model_intercepts_markup(model):
        return model.stream(request)
    return intercept(model.stream(request), request)


def _reminder(report_tool: str) -> str:
    return (
        "[agl_notebook] Your last reply did not call a tool. This step ends only when you call "
        f"`{report_tool}` with your result: call it now."
    )


def _problems_text(name: str, problems: tuple[str, ...]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return f"The arguments for `{name}` do not fit its schema:\n{listed}\nFix these and call `{name}` again."
