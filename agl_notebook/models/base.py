"""The one small interface every model backend implements.

A backend is given a `ModelRequest` (system text, the whole conversation, tool specs, the thinking and effort
settings) and streams `ModelEvent`s: text deltas, complete tool calls, thinking deltas (for the live view), every
other block of the reply whole as a `RawBlock` (as the API sent it), and one `TurnEnd` with the stop reason and
usage. Backends hold no conversation state, so any request can be replayed or retried as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

from .._families import InputError
from .._fieldwise import Fieldwise
from .._protocols import implements
from ..payloads import JsonObject
from ..transcript import Message, RawBlock

StopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded"
]


Effort: TypeAlias = Literal["low", "medium", "high", "xhigh", "max"]
"""How much effort the model puts into a reply (the Messages API's ``output_config.effort``)."""

EFFORTS: tuple[Effort, ...] = get_args(Effort)
"""Every effort level, lowest first."""

ThinkingMode: TypeAlias = Literal["adaptive", "enabled", "disabled", "between_tools"]
ThinkingDisplay: TypeAlias = Literal["summarized", "omitted"]

THINKING_MODES: tuple[ThinkingMode, ...] = get_args(ThinkingMode)
THINKING_DISPLAYS: tuple[ThinkingDisplay, ...] = get_args(ThinkingDisplay)
MIN_THINKING_BUDGET = 1024
"""The smallest ``budget_tokens`` the Messages API takes for ``Thinking.enabled``."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Thinking(Fieldwise):
    """How the model thinks before it answers (the Messages API's ``thinking``): one setting per step.

    Build it with `Thinking.adaptive()` (the model decides how much), `Thinking.enabled(budget_tokens)` (at most
    that many thinking tokens), `Thinking.between_tools()` or `Thinking.disabled()`. ``display`` is always sent
    for the modes that take it: ``summarized`` (the thinking's text comes back) or ``omitted`` (only its signature).

    Raises:
        InputError: An unknown mode or display, a budget under 1,024 or on a mode other than ``enabled``, a display
            on ``between_tools`` or ``disabled``: checked when it is built, before any request.
    """

    mode: ThinkingMode
    """The API's ``type``."""
    budget_tokens: int | None = None
    """The most thinking tokens (``enabled`` only)."""
    display: ThinkingDisplay | None = None
    """Whether the thinking's text comes back (``adaptive`` and ``enabled`` only; ``summarized`` when not given)."""

    def __post_init__(self) -> None:
        built = f"Thinking({self.mode!r}, budget_tokens={self.budget_tokens!r}, display={self.display!r})"
        if not isinstance(self.mode, str) or self.mode not in THINKING_MODES:
            raise InputError(
                f"{built}: {self.mode!r} is not a thinking mode; use Thinking.adaptive(), "
                "Thinking.enabled(budget_tokens), Thinking.between_tools() or Thinking.disabled()."
            )
        budget = self.budget_tokens
        if self.mode == "enabled":
            if isinstance(budget, bool) or not isinstance(budget, int):
                raise InputError(f"{built}: budget_tokens takes a whole number of tokens, not {budget!r}.")
            if budget < MIN_THINKING_BUDGET:
                raise InputError(
                    f"{built}: the API takes a thinking budget of at least {MIN_THINKING_BUDGET} tokens, not {budget}."
                )
        elif budget is not None:
            raise InputError(f"{built}: only Thinking.enabled takes a budget_tokens; {self.mode!r} takes none.")
        if self.mode in ("adaptive", "enabled"):
            if self.display is None:  # sent explicitly: a model's default display differs from model to model
                object.__setattr__(self, "display", "summarized")
            elif not isinstance(self.display, str) or self.display not in THINKING_DISPLAYS:
                raise InputError(f"{built}: display takes 'summarized' or 'omitted', not {self.display!r}.")
        elif self.display is not None:
            raise InputError(f"{built}: {self.mode!r} thinking takes no display.")

    @classmethod
    def adaptive(cls, *, display: ThinkingDisplay = "summarized") -> Thinking:
        """The model decides when and how much to think."""
        return cls("adaptive", None, display)

    @classmethod
    def enabled(cls, budget_tokens: int, *, display: ThinkingDisplay = "summarized") -> Thinking:
        """The model thinks, using at most ``budget_tokens`` (at least 1,024, and under the role's ``max_tokens``)."""
        return cls("enabled", budget_tokens, display)

    @classmethod
    def between_tools(cls) -> Thinking:
        """The model thinks between tool calls only."""
        return cls("between_tools")

    @classmethod
    def disabled(cls) -> Thinking:
        """No thinking (said explicitly, for a model that thinks by default)."""
        return cls("disabled")

    def to_json(self) -> JsonObject:
        """The Messages API's ``thinking`` parameter."""
        data: JsonObject = {"type": self.mode}
        if self.budget_tokens is not None:
            data["budget_tokens"] = self.budget_tokens
        if self.display is not None:
            data["display"] = self.display
        return data


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolSpec(Fieldwise):
    """A tool as the model is shown it."""

    name: str
    """The name the model calls it by."""
    description: str
    """What the model reads to decide to call it."""
    input_schema: JsonObject
    """The JSON Schema of its arguments."""
    strict: bool = False
    """Whether the API guarantees arguments that fit the schema (strict tool use); sent only when True."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ModelRequest(Fieldwise):
    """Everything one model turn is given."""

    model: str
    """The model id the role asked for (a backend may be fixed to one model and ignore it)."""
    system: str
    """The system text."""
    messages: tuple[Message, ...]
    """The whole conversation so far; the last message is the user's."""
    tools: tuple[ToolSpec, ...]
    """The tools offered this turn."""
    max_tokens: int
    """The most output tokens for the reply."""
    role: str = ""
    """The name of the role whose step this is (for scripted models keyed by role; not sent to the API)."""
    thinking: Thinking | None = None
    """How the model thinks, or None: the model's default (nothing sent)."""
    effort: Effort | None = None
    """How much effort the reply takes, or None: the model's default (nothing sent)."""
    server_tools: tuple[JsonObject, ...] = ()
    """Tools Anthropic runs, as the API takes them (`agl_notebook.server_tools`); sent after ``tools``."""
    container: str | None = None
    """The code execution container an earlier reply of the step named, sent back so its files are still there."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Usage(Fieldwise):
    """Tokens spent by one or more turns."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    """The part of ``cache_creation_input_tokens`` written with a 1-hour lifetime (billed at another rate)."""
    web_search_requests: int = 0
    """Web searches Anthropic ran (``usage.server_tool_use.web_search_requests``), billed per search."""
    web_fetch_requests: int = 0
    """Web fetches Anthropic ran (no charge beyond the tokens the pages add)."""

    @property
    def tokens(self) -> int:
        """Every token counted: input, output, and those written to and read from the cache."""
        return self.input_tokens + self.output_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        # Adding nothing gives the other side: both are immutable, and a step adds to `NO_USAGE` first.
        if other is NO_USAGE:
            return self
        if self is NO_USAGE:
            return other
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_1h_input_tokens + other.cache_creation_1h_input_tokens,
            self.web_search_requests + other.web_search_requests,
            self.web_fetch_requests + other.web_fetch_requests,
        )


NO_USAGE = Usage()
"""No tokens: the shared start of every sum and the default of every record (a `Usage` never changes)."""

UNKNOWN_USAGE = Usage()
"""The usage of a reply whose server said none (no usage chunk): told apart by identity, counted as no tokens. A
Run's account settles such a request at its estimate, and the step's record says "usage unknown"."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TextDelta(Fieldwise):
    """A piece of streamed text."""

    text: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ThinkingDelta(Fieldwise):
    """A piece of the model's readable thinking, streamed for the live view.

    Only shown: the thinking is kept by the `RawBlock` that follows when its block closes, as the API sent it.
    """

    text: str


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolCall(Fieldwise):
    """A complete tool call: streamed arguments are assembled by the backend before it yields this."""

    id: str
    name: str
    args: JsonObject


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TurnEnd(Fieldwise):
    """The end of one model reply."""

    stop_reason: StopReason
    usage: Usage = NO_USAGE
    container: str | None = None
    """The code execution container the reply ran in (its id), which later requests of the step send back."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cited(Fieldwise):
    """The citations of the text block that just closed (its text came as `TextDelta`s before this).

    ``text`` is that block's whole text, so the loop keeps the cited text a block of its own, its citations
    (each as the API sent it: a ``web_search_result_location``, ``char_location``, ...) with it.
    """

    text: str
    citations: tuple[JsonObject, ...]


ModelEvent: TypeAlias = TextDelta | ToolCall | TurnEnd | ThinkingDelta | RawBlock | Cited
"""What a backend streams. A `RawBlock` is a whole block of the reply (not text, not a tool call) as the API sent it:
the loop keeps it in the reply, in order, and sends it back unchanged. A backend that yields only text, tool calls
and its `TurnEnd` still works."""


@runtime_checkable
class Model(Protocol):
    """A model backend.

    Besides these two methods a backend may declare capabilities as attributes, read only through `model_network`,
    `model_intercepts_markup` and `model_batched` (each has a default, so a backend written before them, or one
    that needs none, still is a `Model`):

    - ``network: bool`` (default True): a reply reaches the network. False (a `ScriptedModel`) lets a step run live
      where model calls are blocked.
    - ``intercept_markup: bool`` (default True): tool calls the model writes as text markup are turned into calls.
    - ``batched: bool`` (default False): its requests go through the Message Batches
      API, so a Run's account reserves and settles them at the batch price.
    - ``thinking: bool`` (default False): it sends a request's ``thinking`` and ``effort`` (and strict tools), and
      streams thinking back; a role with any of them on a backend without it is refused before any request.

    And a method, read through `model_engine_record` (default None): ``engine_record() -> JsonObject | None``, what
    answered the running step besides the backend, kept in its record and never fingerprinted; its ``live_usage``
    says what of the step's usage was not answered at the batch price (`agl_notebook.models.prices.batched_usage`).
    """

    def backend_id(self, model: str) -> str:
        """The backend recorded for a request for ``model``.

        ``anthropic:<model id>`` or ``scripted:<digest>``; it is part of every step's fingerprint.
        """
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one reply to ``request``; the last event is a `TurnEnd`."""
        ...


def is_model(value: object) -> bool:
    """Whether ``value`` is a `Model` (checked once per class: see `agl_notebook._protocols`)."""
    return implements(value, Model)


def model_network(model: object) -> bool:
    """Whether ``model``'s replies reach the network (its declared ``network`` capability; True by default)."""
    return bool(getattr(model, "network", True))


def model_engine_record(model: object) -> JsonObject | None:
    """What answered the running step through ``model``, besides the backend: its ``engine_record()``, or None.

    The Message Batches engine names the batches that answered; the step's record keeps it, unfingerprinted.
    """
    engine_record = getattr(model, "engine_record", None)
    found = engine_record() if callable(engine_record) else None
    return cast(JsonObject, found) if isinstance(found, dict) else None


def model_batched(model: object) -> bool:
    """Whether ``model``'s requests are billed at the batch price (its declared ``batched``; False by default)."""
    return bool(getattr(model, "batched", False))


def model_thinks(model: object) -> bool:
    """Whether ``model`` takes thinking, effort and strict tools (its declared ``thinking``; False by default)."""
    return bool(getattr(model, "thinking", False))


def model_intercepts_markup(model: object) -> bool:
    """Whether tool calls ``model`` writes as markup become calls (``intercept_markup``; True by default)."""
    return bool(getattr(model, "intercept_markup", True))


class ModelWrapper:
    """A model passed through another: the same backend and every declared capability of the wrapped one.

    Subclasses (the Run's account, a map item's tap) override `stream`; whatever the wrapped model declares, a
    wrapper declares too, so no capability is lost on the way (the batch engine's ``batched`` and engine record).
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        """The model wrapped."""

    @property
    def network(self) -> bool:
        """The wrapped model's ``network`` capability."""
        return model_network(self.model)

    @property
    def intercept_markup(self) -> bool:
        """The wrapped model's ``intercept_markup`` capability."""
        return model_intercepts_markup(self.model)

    @property
    def batched(self) -> bool:
        """The wrapped model's ``batched`` capability."""
        return model_batched(self.model)

    @property
    def thinking(self) -> bool:
        """The wrapped model's ``thinking`` capability."""
        return model_thinks(self.model)

    def backend_id(self, model: str) -> str:
        """The wrapped model's backend (so a step's fingerprint is the same through the wrapper)."""
        return self.model.backend_id(model)

    def engine_record(self) -> JsonObject | None:
        """What answered besides the backend, as the wrapped model says (the batch engine's batches)."""
        return model_engine_record(self.model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The wrapped model's reply."""
        return self.model.stream(request)


def resolve_backend_id(model_id: str) -> str:
    """The backend id `agl_notebook.models.resolve_model` gives for ``model_id``, without loading that backend.

    A fingerprint names the backend a live run would use; a replay needs that name, not the backend. This is
    Claude's; `agl_notebook.models.resolve_backend_id` also knows an ``"openai:..."`` string.
    """
    return f"anthropic:{model_id}"


def model_accepts(model: object, kind: str) -> bool:
    """Whether a request to ``model`` may hold ``kind`` (``"images"``, ``"documents"``, ``"server_tools"``, ...).

    A backend that declares ``accepts: frozenset[str]`` takes only those kinds; one that declares nothing takes any.
    A wrapper (the Run's account, a map item's tap) is asked through the model it wraps.
    """
    for _ in range(16):  # wrappers nest a few deep at most
        accepts = getattr(model, "accepts", None)
        if isinstance(accepts, frozenset):
            return kind in accepts
        inner = getattr(model, "model", None)
        if inner is None or isinstance(inner, str):
            return True
        model = inner
    return True
