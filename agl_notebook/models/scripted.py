"""`ScriptedModel`: a model whose replies are written down, for offline demos, tests and teaching.

Its replies are either data (a list of turns, or a dict of such lists keyed by role name) or a function of the
request. With data, the turn used is the number of assistant messages already in the conversation, so every step
starts at the first turn, steps run under `asyncio.gather` get the same replies in any order, and no state is kept
between requests.

The digest that goes into step fingerprints (as ``scripted:<digest>``) is the first 16 hex digits of the sha256 of
the canonical JSON of the script (for data), or of the function's source text (for a function; its qualified name
when the source cannot be read). Editing the script therefore makes its recordings miss, as it should.
"""

from __future__ import annotations

import inspect
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._canonical import digest
from .._fieldwise import Fieldwise
from .._settings import CREDENTIALS, has_credentials
from ..errors import InputError, ScriptExhaustedError
from ..payloads import JsonObject, JsonValue
from .base import ModelEvent, ModelRequest, StopReason, TextDelta, ToolCall, TurnEnd, Usage


@dataclass(frozen=True, eq=False, repr=False)
class ScriptedCall(Fieldwise):
    """A tool call in a scripted turn."""

    name: str
    """The tool to call."""
    args: JsonObject = field(default_factory=dict)
    """The arguments, as a model would write them (they are validated like a real model's)."""
    id: str | None = None
    """The call id; by default ``toolu_<turn>_<index>``, unique within the conversation."""


@dataclass(frozen=True, eq=False, repr=False)
class ScriptedTurn(Fieldwise):
    """One scripted reply."""

    text: str = ""
    """The reply's text, streamed word by word."""
    calls: Sequence[ScriptedCall] = ()
    """The tool calls that follow the text."""
    stop_reason: StopReason | None = None
    """The stop reason; by default ``tool_use`` when there are calls, else ``end_turn``."""
    usage: Usage | None = None
    """The usage reported; by default a deterministic estimate (4 characters a token)."""


TurnLike: TypeAlias = "ScriptedTurn | str | Mapping[str, Any]"
"""A turn as a `ScriptedTurn`, a plain string (text only), or a dict ``{"text", "calls": [{"name", "args"}]}``."""
ScriptFunction: TypeAlias = Callable[[ModelRequest], "TurnLike | Awaitable[TurnLike]"]

_KEPT_REQUESTS = 256
_WORDS = re.compile(r"\s*\S+\s*|\s+")


class ScriptedModel:
    """A model whose replies are scripted: turns as data, or a function of the request.

    Examples:
        >>> model = ScriptedModel([
        ...     ScriptedTurn("Let me look.", [ScriptedCall("look_up", {"text": "retries"})]),
        ...     {"calls": [{"name": "report_review", "args": {"issues": []}}]},
        ... ])
    """

    def __init__(self, script: Sequence[TurnLike] | Mapping[str, Sequence[TurnLike]] | ScriptFunction) -> None:
        self._function: ScriptFunction | None = None
        self._turns: dict[str, tuple[ScriptedTurn, ...]] | None = None
        if callable(script):
            self._function = script
            self.digest = digest(_source_of(script))[:16]
        elif isinstance(script, Mapping):
            self._turns = {str(k): _turns(v, f"script[{k!r}]") for k, v in script.items()}
            self.digest = digest({k: [_turn_json(t) for t in v] for k, v in self._turns.items()})[:16]
        elif isinstance(script, Sequence) and not isinstance(script, str):
            self._turns = {"": _turns(script, "script")}
            self.digest = digest([_turn_json(t) for t in self._turns[""]])[:16]
        else:
            raise InputError(
                "ScriptedModel takes a list of turns, a dict of lists keyed by role name, or a "
                f"function of the request, not {type(script).__name__}."
            )
        self.calls = 0
        """How many requests this model was sent (tests count model calls with it)."""
        self.requests: deque[ModelRequest] = deque(maxlen=_KEPT_REQUESTS)
        """The latest requests, oldest first (the last 256, so a long-lived model does not grow without bound)."""

    thinking = True
    """A script may think: its thinking, redacted thinking and other kept blocks are replayed like Claude's."""

    network = False
    """A scripted model reaches no network, so it runs even where model calls are blocked (under nbval)."""

    def backend_id(self, model: str) -> str:
        """``scripted:<digest>``, whatever model id the role named."""
        return f"scripted:{self.digest}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the scripted reply for ``request``."""
        __tracebackhide__ = True  # IPython shows the script function's frames, not these
        self.calls += 1
        self.requests.append(request)
        position = sum(1 for m in request.messages if m.role == "assistant")
        turn = await self._turn(request, position)
        for piece in _WORDS.findall(turn.text):
            yield TextDelta(piece)
        for i, call in enumerate(turn.calls):
            yield ToolCall(call.id or f"toolu_{position:02d}_{i}", call.name, call.args)
        stop: StopReason = turn.stop_reason or ("tool_use" if turn.calls else "end_turn")
        usage = turn.usage or Usage(
            input_tokens=sum(len(m.text) for m in request.messages) // 4 + len(request.system) // 4,
            output_tokens=max(1, len(turn.text) // 4) + 10 * len(turn.calls),
        )
        yield TurnEnd(stop, usage)

    async def _turn(self, request: ModelRequest, position: int) -> ScriptedTurn:
        __tracebackhide__ = True
        if self._function is not None:
            produced = self._function(request)
            if inspect.isawaitable(produced):
                produced = await produced
            return _turn(produced, f"the script function's reply to turn {position}")
        assert self._turns is not None
        turns = self._turns.get(request.role, self._turns.get(""))
        if turns is None:
            raise ScriptExhaustedError(
                f"ScriptedModel has no turns for role {request.role!r}; it has turns for "
                f"{', '.join(map(repr, self._turns))}."
            )
        if position >= len(turns):
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for turn {position + 1} of role {request.role!r} but its script has "
                f"{len(turns)} turn(s). Last message sent: {request.messages[-1].text[:200]!r}"
            )
        return turns[position]

    def __repr__(self) -> str:
        return f"ScriptedModel(digest={self.digest!r})"


def _turns(script: Sequence[TurnLike], where: str) -> tuple[ScriptedTurn, ...]:
    if isinstance(script, str) or not isinstance(script, Sequence):
        raise InputError(f"{where}: expected a list of turns.")
    return tuple(_turn(t, f"{where}[{i}]") for i, t in enumerate(script))


def _turn(turn: object, where: str) -> ScriptedTurn:
    if isinstance(turn, ScriptedTurn):
        return turn
    if isinstance(turn, str):
        return ScriptedTurn(turn)
    if isinstance(turn, Mapping):
        unknown = set(turn) - {"text", "calls", "stop_reason"}
        if unknown:
            raise InputError(f"{where}: unknown keys {sorted(unknown)}; a turn has text, calls and stop_reason.")
        calls = []
        for i, c in enumerate(turn.get("calls", ())):
            if isinstance(c, ScriptedCall):
                calls.append(c)
            elif isinstance(c, Mapping) and isinstance(c.get("name"), str) and isinstance(c.get("args", {}), dict):
                calls.append(ScriptedCall(c["name"], dict(c.get("args", {})), c.get("id")))
            else:
                raise InputError(f"{where}.calls[{i}]: expected {{'name': str, 'args': dict}}.")
        return ScriptedTurn(str(turn.get("text", "")), tuple(calls), turn.get("stop_reason"))
    raise InputError(f"{where}: a turn is a ScriptedTurn, a string or a dict, not {type(turn).__name__}.")


def _turn_json(turn: ScriptedTurn) -> JsonValue:
    return {
        "text": turn.text,
        "calls": [{"name": c.name, "args": c.args, "id": c.id} for c in turn.calls],
        "stop_reason": turn.stop_reason,
    }


def _source_of(function: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', repr(function))}"


CREDENTIAL_VARIABLES = tuple(setting.name for setting in CREDENTIALS)


def scripted_unless_credentials(
    script: Sequence[TurnLike] | Mapping[str, Sequence[TurnLike]] | ScriptFunction,
    *,
    environ: Mapping[str, str] | None = None,
) -> ScriptedModel | None:
    """The scripted model for ``script``, unless Anthropic credentials are set; then None.

    For notebooks that run anywhere: ``Run(model=scripted_unless_credentials(SCRIPT))`` replays the recordings made
    with the script when no key is set, and runs every role live on its own Claude model when
    ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) is set. Those recordings then miss, as they should: they
    were made with another backend.
    """
    if has_credentials(environ):
        return None
    return ScriptedModel(script)
