"""The one small interface every model backend implements.

A backend is given a `ModelRequest` (system text, the whole conversation, tool specs) and streams `ModelEvent`s:
text deltas, complete tool calls, and one `TurnEnd` with the stop reason and usage. Backends hold no conversation
state, so any request can be replayed or retried as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, cast, runtime_checkable

from .._fieldwise import Fieldwise
from .._protocols import implements
from ..payloads import JsonObject
from ..transcript import Message

StopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded"
]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolSpec(Fieldwise):
    """A tool as the model is shown it."""

    name: str
    """The name the model calls it by."""
    description: str
    """What the model reads to decide to call it."""
    input_schema: JsonObject
    """The JSON Schema of its arguments."""


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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Usage(Fieldwise):
    """Tokens spent by one or more turns."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    """The part of ``cache_creation_input_tokens`` written with a 1-hour lifetime (billed at another rate)."""

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


ModelEvent: TypeAlias = TextDelta | ToolCall | TurnEnd


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

    A fingerprint names the backend a live run would use; a replay needs that name, not the backend.
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
