"""`ScriptedModel`: a model whose replies are written down, for offline demos, tests and teaching.

Its replies are either data (a list of turns, or a dict of such lists keyed by role name) or a function of the
request. With data, the turn used is the number of assistant messages already in the conversation, so every step
starts at the first turn, steps run under `asyncio.gather` get the same replies in any order, and no state is kept
between requests.

A turn may think (docs/thinking.md): its ``thinking`` streams as thinking deltas and is kept as a thinking block
with a deterministic signature, ``redacted=True`` adds a redacted thinking block, and ``blocks`` adds any other
blocks, each kept whole and sent back unchanged like Claude's, all before the turn's text.

The digest that goes into step fingerprints (as ``scripted:<digest>``) is the first 16 hex digits of the sha256 of
the canonical JSON of the script (for data), or of the function's source text (for a function; its qualified name
when the source cannot be read). Editing the script therefore makes its recordings miss, as it should. A turn's
thinking, redacted and blocks enter that JSON only when set, so a script that uses none of them keeps the digest it
had before they existed (and its recordings).
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
from ..transcript import RawBlock
from .base import Cited, ModelEvent, ModelRequest, StopReason, TextDelta, ThinkingDelta, ToolCall, TurnEnd, Usage


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
    """The usage reported; by default a deterministic estimate (4 characters a token, thinking included)."""
    thinking: str = ""
    """The model's thinking before it answers: streamed as thinking deltas, then kept as a thinking block with a
    deterministic signature (its text left out, as Claude does, when the request's display is ``omitted``)."""
    redacted: bool = False
    """Whether the reply holds a redacted thinking block (encrypted thinking, shown only as redacted)."""
    blocks: Sequence[JsonObject] = ()
    """Other blocks of the reply (``{"type": ..., ...}``), each kept whole and sent back unchanged, in order: server
    tool calls and their results among them (`agl_notebook.server_tools.scripted_search` and its siblings)."""
    cited: Sequence[Mapping[str, Any]] = ()
    """Cited text after the turn's text: ``{"text": ..., "citations": [...]}`` each, a citation as the API sends it
    (``{"type": "web_search_result_location", "url": ..., "title": ..., "cited_text": ...}``)."""
    container: str | None = None
    """The code execution container the reply names (later requests of the step send it back)."""


TurnLike: TypeAlias = "ScriptedTurn | str | Mapping[str, Any]"
"""A turn as a `ScriptedTurn`, a plain string (text only), or a dict ``{"text", "calls": [{"name", "args"}]}``
(with ``stop_reason``, ``thinking``, ``redacted`` and ``blocks`` as in `ScriptedTurn`)."""
_TURN_KEYS = ("text", "calls", "stop_reason", "thinking", "redacted", "blocks", "cited", "container")
# Blocks the loop reads itself rather than keeping whole: a script writes them as text and calls.
_NOT_KEPT = frozenset({"text", "tool_use", "tool_result"})
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
        if turn.thinking:
            shown = request.thinking is None or request.thinking.display != "omitted"
            if shown:
                for piece in _WORDS.findall(turn.thinking):
                    yield ThinkingDelta(piece)
            yield RawBlock(
                {
                    "type": "thinking",
                    "thinking": turn.thinking if shown else "",
                    "signature": _opaque("signature", turn.thinking, request.role, position),
                }
            )
        if turn.redacted:
            yield RawBlock({"type": "redacted_thinking", "data": _opaque("redacted", "", request.role, position)})
        for block in turn.blocks:
            yield RawBlock(dict(block))
        for piece in _WORDS.findall(turn.text):
            yield TextDelta(piece)
        for cited in turn.cited:
            for piece in _WORDS.findall(cited["text"]):
                yield TextDelta(piece)
            yield Cited(cited["text"], tuple(dict(c) for c in cited["citations"]))
        for i, call in enumerate(turn.calls):
            yield ToolCall(call.id or f"toolu_{position:02d}_{i}", call.name, call.args)
        stop: StopReason = turn.stop_reason or ("tool_use" if turn.calls else "end_turn")
        thought = (max(1, len(turn.thinking) // 4) if turn.thinking else 0) + (10 if turn.redacted else 0)
        used = [b.get("name") for b in turn.blocks if b.get("type") == "server_tool_use"]
        usage = turn.usage or Usage(
            input_tokens=sum(len(m.text) for m in request.messages) // 4 + len(request.system) // 4,
            output_tokens=max(1, len(turn.text) // 4) + 10 * len(turn.calls) + thought,  # thinking is output
            web_search_requests=used.count("web_search"),
            web_fetch_requests=used.count("web_fetch"),
        )
        yield TurnEnd(stop, usage, turn.container)

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
        return _checked(turn, where)
    if isinstance(turn, str):
        return ScriptedTurn(turn)
    if isinstance(turn, Mapping):
        unknown = set(turn) - set(_TURN_KEYS)
        if unknown:
            keys = f"{', '.join(_TURN_KEYS[:-1])} and {_TURN_KEYS[-1]}"
            raise InputError(f"{where}: unknown keys {sorted(unknown)}; a turn has {keys}.")
        calls = []
        for i, c in enumerate(turn.get("calls", ())):
            if isinstance(c, ScriptedCall):
                calls.append(c)
            elif isinstance(c, Mapping) and isinstance(c.get("name"), str) and isinstance(c.get("args", {}), dict):
                calls.append(ScriptedCall(c["name"], dict(c.get("args", {})), c.get("id")))
            else:
                raise InputError(f"{where}.calls[{i}]: expected {{'name': str, 'args': dict}}.")
        built = ScriptedTurn(
            str(turn.get("text", "")),
            tuple(calls),
            turn.get("stop_reason"),
            thinking=turn.get("thinking", ""),
            redacted=turn.get("redacted", False),
            blocks=turn.get("blocks", ()),
            cited=turn.get("cited", ()),
            container=turn.get("container"),
        )
        return _checked(built, where)
    raise InputError(f"{where}: a turn is a ScriptedTurn, a string or a dict, not {type(turn).__name__}.")


def _checked(turn: ScriptedTurn, where: str) -> ScriptedTurn:
    """``turn``, its thinking, redacted and blocks checked (an `InputError` naming what is wrong)."""
    if not isinstance(turn.thinking, str):
        raise InputError(f"{where}: thinking is the thinking's text, not {turn.thinking!r}.")
    if not isinstance(turn.redacted, bool):
        raise InputError(f"{where}: redacted takes True or False, not {turn.redacted!r}.")
    if isinstance(turn.blocks, str | Mapping) or not isinstance(turn.blocks, Sequence):
        raise InputError(f"{where}: blocks is a list of blocks ({{'type': ..., ...}}), not {turn.blocks!r}.")
    for i, block in enumerate(turn.blocks):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(kind, str) or not kind:
            raise InputError(f"{where}.blocks[{i}]: a block is a dict with a 'type', not {block!r}.")
        if kind in _NOT_KEPT:
            raise InputError(
                f"{where}.blocks[{i}]: a {kind!r} block is written as the turn's text or calls, not as a kept block."
            )
        try:
            digest(dict(block))
        except (TypeError, ValueError) as e:
            raise InputError(f"{where}.blocks[{i}]: a kept block must be JSON ({e}).") from None
    if isinstance(turn.cited, str | Mapping) or not isinstance(turn.cited, Sequence):
        raise InputError(f"{where}: cited is a list of {{'text': ..., 'citations': [...]}}, not {turn.cited!r}.")
    for i, cited in enumerate(turn.cited):
        citations = cited.get("citations") if isinstance(cited, Mapping) else None
        if (
            not isinstance(cited, Mapping)
            or not isinstance(cited.get("text"), str)
            or not cited["text"]
            or not isinstance(citations, Sequence)
            or isinstance(citations, str)
            or not citations
            or not all(isinstance(c, Mapping) and isinstance(c.get("type"), str) for c in citations)
        ):
            raise InputError(
                f"{where}.cited[{i}]: expected {{'text': non-empty text, 'citations': [{{'type': ..., ...}}, ...]}}."
            )
    if turn.container is not None and (not isinstance(turn.container, str) or not turn.container):
        raise InputError(f"{where}: container is a container id, not {turn.container!r}.")
    return turn


def _turn_json(turn: ScriptedTurn) -> JsonValue:
    data: dict[str, JsonValue] = {
        "text": turn.text,
        "calls": [{"name": c.name, "args": c.args, "id": c.id} for c in turn.calls],
        "stop_reason": turn.stop_reason,
    }
    # Only when set: a script without them keeps the digest (and the recordings) it had before they existed.
    if turn.thinking:
        data["thinking"] = turn.thinking
    if turn.redacted:
        data["redacted"] = True
    if turn.blocks:
        data["blocks"] = [dict(b) for b in turn.blocks]
    if turn.cited:
        data["cited"] = [{"text": c["text"], "citations": [dict(x) for x in c["citations"]]} for c in turn.cited]
    if turn.container is not None:
        data["container"] = turn.container
    return data


def _opaque(kind: str, text: str, role: str, position: int) -> str:
    """A deterministic stand-in for a signature or encrypted data: the same script signs the same way every run."""
    return f"scripted-{kind}-" + digest({"kind": kind, "text": text, "role": role, "turn": position})[:32]


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
