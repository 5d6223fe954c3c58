"""The event vocabulary: what a step (or a client-tools run) tells its views while it happens.

One vocabulary for every API: the client-tools names (``client.tool.*`` and
``response.output_text.delta``) plus the step events. Each event is a frozen dataclass whose ``type`` string is set
by its class, so consumers can match on ``event.type`` or on the class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._fieldwise import Fieldwise
from ..payloads import JsonObject, JsonValue

# Equality, hash and repr come from `Fieldwise`, not generated per class: cheaper to import (see _fieldwise.py).


@dataclass(frozen=True, eq=False, repr=False)
class StepStarted(Fieldwise):
    """A step began."""

    role: str
    """The role's name."""
    input: JsonValue
    """The step's input, as JSON."""
    model: str
    """The backend: ``anthropic:<model id>`` or ``scripted:<digest>``."""
    label: str = ""
    """A short label telling this step from others of its role (``Run.step``'s ``label``, or drawn from the
    input)."""
    type: Literal["step.started"] = field(default="step.started", init=False)


def input_label(value: JsonValue) -> str:
    """The default label of a step: its string input, or the input's first text (else number) field.

    Whitespace is collapsed and the text kept to `LABEL_SOURCE_LENGTH` characters; views scrub secrets from it
    before they shorten it further.
    """
    if isinstance(value, dict):
        fields = list(value.values())
        value = next(
            (v for v in fields if isinstance(v, str) and v.strip()),
            next((v for v in fields if isinstance(v, int | float) and not isinstance(v, bool)), None),
        )
    if value is None or isinstance(value, list | dict):
        return ""
    return " ".join(str(value)[: LABEL_SOURCE_LENGTH * 2].split())[:LABEL_SOURCE_LENGTH]


LABEL_SOURCE_LENGTH = 400
"""How much of the input a default label keeps (views show less)."""


@dataclass(frozen=True, eq=False, repr=False)
class OutputTextDelta(Fieldwise):
    """A piece of the model's streamed text."""

    delta: str
    """The new text."""
    type: Literal["response.output_text.delta"] = field(default="response.output_text.delta", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ReasoningTextDelta(Fieldwise):
    """A piece of the model's readable thinking, as it streams (drawn live only; the block that ends it is kept)."""

    delta: str
    """The new thinking text."""
    type: Literal["response.reasoning_text.delta"] = field(default="response.reasoning_text.delta", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ReplyBlockKept(Fieldwise):
    """A block of the model's reply kept as the API sent it: thinking, redacted thinking, or a type not read here.

    Views draw a thinking block (collapsed), a redacted one as redacted, and any other type by its name; its opaque
    fields (signatures, encrypted data) are never drawn.
    """

    block: JsonObject
    """The block's JSON as received."""
    type: Literal["response.content_block.kept"] = field(default="response.content_block.kept", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class TextCited(Fieldwise):
    """The text just streamed cites these sources (its block's citations, as the API sent them).

    Views number each source once per step and link it (an ``http(s)`` URL only; anything else is shown as text).
    """

    text: str
    """The cited text (the end of what has streamed)."""
    citations: tuple[JsonObject, ...]
    """Each citation's JSON: ``web_search_result_location`` (url, title), ``char_location`` (document), ..."""
    type: Literal["response.output_text.cited"] = field(default="response.output_text.cited", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ClientToolRequested(Fieldwise):
    """The model asked for a tool call."""

    name: str
    """The tool's name."""
    args: JsonObject
    """The arguments as the model wrote them."""
    tool_call_id: str
    """The call's id."""
    type: Literal["client.tool.requested"] = field(default="client.tool.requested", init=False)

    @property
    def id(self) -> str:
        """The call's id (the seed's name for `tool_call_id`)."""
        return self.tool_call_id


@dataclass(frozen=True, eq=False, repr=False)
class ClientToolExecuting(Fieldwise):
    """A tool's handler is about to run."""

    name: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    type: Literal["client.tool.executing"] = field(default="client.tool.executing", init=False)

    @property
    def id(self) -> str:
        """The call's id."""
        return self.tool_call_id


@dataclass(frozen=True, eq=False, repr=False)
class ClientToolResult(Fieldwise):
    """A tool call's result, as the model will read it."""

    name: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    result: str
    """What the model reads back."""
    is_error: bool
    """True when the call failed, was rejected, or was not run."""
    type: Literal["client.tool.result"] = field(default="client.tool.result", init=False)

    @property
    def id(self) -> str:
        """The call's id."""
        return self.tool_call_id


@dataclass(frozen=True, eq=False, repr=False)
class ClientToolRoundtrip(Fieldwise):
    """Tool results went back to the model: round trip ``turn`` of at most ``max_turns``."""

    turn: int
    """How many round trips have been made, this one included."""
    max_turns: int
    """The round-trip limit."""
    type: Literal["client.tool.roundtrip"] = field(default="client.tool.roundtrip", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class PayloadRejected(Fieldwise):
    """The model's arguments (or report) did not fit the payload; the problems go back to it."""

    name: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    args: JsonObject
    """The arguments as the model wrote them."""
    problems: tuple[str, ...]
    """Each problem, naming its field path."""
    type: Literal["payload.rejected"] = field(default="payload.rejected", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class StepReported(Fieldwise):
    """The agent reported the step's result through the reporting tool."""

    name: str
    """The reporting tool's name."""
    tool_call_id: str
    """The call's id."""
    payload: JsonValue
    """The reported payload, as JSON."""
    type: Literal["step.reported"] = field(default="step.reported", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class RunTruncated(Fieldwise):
    """The round-trip limit was reached while the model still asked for tools; those calls were not run."""

    turn: int
    """The round trips made."""
    max_turns: int
    """The limit."""
    unanswered: tuple[str, ...]
    """The names of the calls that were not run (each got an error result)."""
    type: Literal["run.truncated"] = field(default="run.truncated", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class QuestionAsked(Fieldwise):
    """A tool asked the person a question."""

    text: str
    """The screen's text."""
    inputs: tuple[str, ...]
    """The labels of its inputs."""
    type: Literal["question.asked"] = field(default="question.asked", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class QuestionAnswered(Fieldwise):
    """The person answered."""

    text: str
    """The screen's text."""
    answer: JsonValue
    """The answer: one value, or a list for a screen of several inputs."""
    type: Literal["question.answered"] = field(default="question.answered", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ApprovalRequested(Fieldwise):
    """A tool call whose arguments passed validation waits for a decision before its handler runs."""

    name: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    args: JsonObject
    """The validated arguments, as JSON (defaults filled in)."""
    type: Literal["approval.requested"] = field(default="approval.requested", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ApprovalDecided(Fieldwise):
    """A tool call was approved, edited or denied (by a person, the tool's policy, or a headless setting)."""

    name: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    decision: Literal["approve", "edit", "deny"]
    """What was decided."""
    by: str = "person"
    """Who decided: ``person``, ``policy`` or ``setting`` (``AGL_NOTEBOOK_APPROVALS``)."""
    always: bool = False
    """Every later call of this tool in the same Run is approved without asking."""
    changed: tuple[str, ...] = ()
    """For an edit: the argument paths it changed."""
    arguments: JsonObject | None = None
    """For an edit: the arguments the handler runs with."""
    message: str = ""
    """For a denial: the message the agent gets, if any."""
    type: Literal["approval.decided"] = field(default="approval.decided", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class MarkupError(Fieldwise):
    """A tool call written as text markup could not be read; that span was dropped."""

    message: str
    """What was wrong."""
    text: str
    """The span, shortened."""
    type: Literal["markup.error"] = field(default="markup.error", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class StepFinished(Fieldwise):
    """A step ended normally."""

    role: str
    """The role's name."""
    result: JsonValue
    """The reported payload as JSON, or None for a role without a reporting tool."""
    requests: int
    """How many model requests the step made."""
    truncated: bool = False
    """True when the round-trip limit cut the step short."""
    type: Literal["step.finished"] = field(default="step.finished", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class StepFailed(Fieldwise):
    """A step stopped on an error or an interrupt; its work was wiped."""

    role: str
    """The role's name."""
    error: str
    """The exception's type name."""
    message: str
    """The exception's message."""
    type: Literal["step.failed"] = field(default="step.failed", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class StepReplayed(Fieldwise):
    """A step was answered from a recording: no model, no tool, no question."""

    role: str
    """The role's name."""
    record_id: str
    """The id of the record replayed."""
    backend: str
    """The backend the record says it was made with."""
    type: Literal["step.replayed"] = field(default="step.replayed", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class StepForked(Fieldwise):
    """A forked step's replayed turns are done: from here its replies come from the model (docs/forking.md).

    Told at the same point live and replayed, right before the first reply that was not taken from the record forked.
    """

    role: str
    """The role's name."""
    forked_from: str
    """The id of the record whose turns were replayed."""
    at_turn: int
    """How many of its model turns were replayed."""
    type: Literal["step.forked"] = field(default="step.forked", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ModelRetryWaiting(Fieldwise):
    """The model's API failed in a way worth retrying; the step waits this long first (drawn live, never kept)."""

    seconds: float
    """How long the step waits before the retry."""
    reason: str
    """What failed: ``HTTP 429``, ``the connection failed``, ..."""
    asked: float | None
    """What the server's ``retry-after`` asked for, when that was more than the cap (else None)."""
    retry: int
    """Which retry this wait comes before (1 for the first)."""
    max_retries: int
    """The retries allowed."""
    type: Literal["model.retry_waiting"] = field(default="model.retry_waiting", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class ModelSpent(Fieldwise):
    """A model request finished and was paid for: what it cost and what the Run has spent now (drawn live only).

    Never part of a final view or a record: a replay spends nothing, and a saved view shows the recorded cost.
    """

    usd: float | None
    """What the request cost, in dollars (None: the model has no price)."""
    run_spent_usd: float
    """What the Run has spent on requests so far, in dollars (priced requests only)."""
    type: Literal["model.spent"] = field(default="model.spent", init=False)


StepEvent: TypeAlias = (
    StepStarted
    | OutputTextDelta
    | ReasoningTextDelta
    | ReplyBlockKept
    | TextCited
    | ClientToolRequested
    | ClientToolExecuting
    | ClientToolResult
    | ClientToolRoundtrip
    | PayloadRejected
    | StepReported
    | RunTruncated
    | QuestionAsked
    | QuestionAnswered
    | ApprovalRequested
    | ApprovalDecided
    | MarkupError
    | StepFinished
    | StepFailed
    | StepReplayed
    | StepForked
    | ModelRetryWaiting
    | ModelSpent
)
"""Any event of a step or a client-tools run."""

STEP_EVENT_TYPES: tuple[type[StepEvent], ...] = (
    StepStarted,
    OutputTextDelta,
    ReasoningTextDelta,
    ReplyBlockKept,
    TextCited,
    ClientToolRequested,
    ClientToolExecuting,
    ClientToolResult,
    ClientToolRoundtrip,
    PayloadRejected,
    StepReported,
    RunTruncated,
    QuestionAsked,
    QuestionAnswered,
    ApprovalRequested,
    ApprovalDecided,
    MarkupError,
    StepFinished,
    StepFailed,
    StepReplayed,
    StepForked,
    ModelRetryWaiting,
    ModelSpent,
)

if TYPE_CHECKING:
    # Re-exported: the names resolve at run time through __getattr__ below.
    from .functions import (
        ApiRequested as ApiRequested,
    )
    from .functions import (
        ApiResponded as ApiResponded,
    )
    from .functions import (
        CommandStarted as CommandStarted,
    )
    from .functions import (
        ErrorHandled as ErrorHandled,
    )
    from .functions import (
        FunctionCalled as FunctionCalled,
    )
    from .functions import (
        FunctionEvent as FunctionEvent,
    )
    from .functions import (
        FunctionReturned as FunctionReturned,
    )
    from .functions import (
        Logged as Logged,
    )

    Event: TypeAlias = StepEvent | FunctionEvent
    """Any event."""

    EVENT_TYPES: tuple[type[Event], ...]
    """Every event class."""


def __getattr__(name: str) -> Any:
    # The JSON functions' events, and the vocabulary that includes them, load when first asked for (functions.py).
    if name in _FUNCTION_EVENTS:
        from . import functions

        value = getattr(functions, name)
    elif name == "Event":
        from .functions import FunctionEvent

        value = StepEvent | FunctionEvent
    elif name == "EVENT_TYPES":
        from . import functions

        value = STEP_EVENT_TYPES + functions.FUNCTION_EVENT_TYPES
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


_FUNCTION_EVENTS = (
    "FunctionCalled",
    "FunctionReturned",
    "CommandStarted",
    "Logged",
    "ErrorHandled",
    "ApiRequested",
    "ApiResponded",
    "FunctionEvent",
)
