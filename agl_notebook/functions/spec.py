"""An agent as the interpreter runs it: functions, commands, templates and profiles, built by `validate`.

Nothing here checks anything; `agl_notebook.functions.validate` builds these only from an agent file with no
problems, so the interpreter can rely on every field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..payloads import JsonValue
from .argtypes import TypeSpec

Env = dict[str, Any]


@dataclass(frozen=True, eq=False)
class Template:
    """A JSON value in which strings of the form ``"{ expr }"`` are expressions; lists and objects are walked."""

    raw: JsonValue
    """The value as written in the agent file."""
    render: Callable[[Env], Any] = field(repr=False)
    """Evaluates it with the given variables."""
    reads: tuple[tuple[str, frozenset[str]], ...] = ()
    """Each expression's JSON path and the variables it reads."""

    @property
    def constant(self) -> bool:
        """True when it holds no expression."""
        return not self.reads


@dataclass(frozen=True)
class Arg:
    """An argument of a function, or a field of an ``llm`` command's output."""

    name: str
    type: TypeSpec | None
    description: str | None
    required: bool = True


ROUTING_HEADERS = frozenset(
    {
        # where the request goes: another virtual host behind the same address, or a proxy's rewrite
        "host",
        "forwarded",
        "x-forwarded-host",
        "x-forwarded-server",
        "x-forwarded-proto",
        "x-forwarded-port",
        "x-forwarded-prefix",
        "x-original-url",
        "x-rewrite-url",
        "x-original-host",
        "x-host",
        # how it is framed and carried, which the client decides (a wrong one splits or smuggles a request)
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
    }
)
"""Header names (lower case) no profile or ``api`` command may set: they route or frame the request."""


def header_text_problem(text: str) -> str:
    """What stops ``text`` from being an HTTP header's value (a line break, a control or non-ASCII character), or ""."""
    if "\r" in text or "\n" in text:
        return "may not hold a line break"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
        return "may not hold a control character"
    if not text.isascii():
        return "may hold only ASCII characters (HTTP sends header values as bytes)"
    return ""


@dataclass(frozen=True)
class EnvValue:
    """A header or query value read from an environment variable when a request is made (a secret)."""

    variable: str
    """The environment variable's name."""
    prefix: str = ""
    """Written before the value (``"Bearer "``)."""


@dataclass(frozen=True)
class Profile:
    """Where ``api`` commands send requests: a base URL, headers and query values (secrets from the environment)."""

    name: str
    base_url: str
    headers: tuple[tuple[str, str | EnvValue], ...] = ()
    query: tuple[tuple[str, str | EnvValue], ...] = ()
    timeout: float = 30.0
    max_response_bytes: int = 4_000_000

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment variables it reads."""
        return tuple(v.variable for _, v in (*self.headers, *self.query) if isinstance(v, EnvValue))


@dataclass(frozen=True)
class Command:
    """One command: its kind, where it is, its arguments (a per-kind record) and its own error handler."""

    kind: str
    path: str
    args: Any
    on_error: tuple[Command, ...] | None = None


Block = tuple[Command, ...]


@dataclass(frozen=True)
class SetArgs:
    """``set``: variables to assign, in order."""

    assignments: tuple[tuple[str, Template], ...]


@dataclass(frozen=True)
class ValueArgs:
    """``log``, ``return`` and ``end``: one value."""

    value: Template


@dataclass(frozen=True)
class FuncArgs:
    """``func``: the function to call and its arguments."""

    target: str
    args: tuple[tuple[str, Template], ...] = ()


@dataclass(frozen=True)
class AskArgs:
    """``ask``: the question and its input."""

    text: Template
    input: str = "text"
    label: str = "Answer"
    options: Template | None = None
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class ApiArgs:
    """``api``: the request, relative to a profile."""

    profile: str
    method: str = "GET"
    path: Template | None = None
    query: tuple[tuple[str, Template], ...] | Template = ()
    headers: tuple[tuple[str, Template], ...] = ()
    body: Template | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class LlmArgs:
    """``llm``: the prompt, the tools offered and the typed output, if any."""

    prompt: Template
    system: Template | None = None
    tools: tuple[str, ...] = ()
    output: tuple[Arg, ...] | None = None
    model: str | None = None
    max_tool_roundtrips: int = 25
    max_tokens: int = 4096


@dataclass(frozen=True)
class IfArgs:
    """``if``: a condition and two blocks."""

    condition: Template
    then: Block
    orelse: Block = ()


@dataclass(frozen=True)
class LoopArgs:
    """``loop``: the list, the variables, the bound and the body."""

    over: Template
    do: Block
    item: str = "item"
    index: str | None = None
    max: int = 1000


@dataclass(frozen=True)
class Function:
    """One function of an agent."""

    name: str
    path: str
    args: tuple[Arg, ...]
    commands: Block
    on_error: Block | None = None
    description: Template | None = None

    @property
    def is_tool(self) -> bool:
        """A function with a description is a tool: the model may call it (docs/functions.md, "Functions")."""
        return self.description is not None


@dataclass(frozen=True)
class AgentSpec:
    """A validated agent."""

    name: str
    functions: dict[str, Function]
    profiles: dict[str, Profile]
    model: str | None
    raw_functions: dict[str, JsonValue] = field(repr=False)
    """Each function as written (duplicate keys kept), for fingerprints."""
    raw_profiles: dict[str, JsonValue] = field(repr=False)
    """Each profile as written, for fingerprints."""
    calls: dict[str, tuple[str, ...]] = field(repr=False)
    """The functions each function may call, through ``func`` or as an ``llm`` command's tools."""


def walk_commands(block: Block) -> list[Command]:
    """Every command of a block, nested ones and handlers included, in order."""
    out: list[Command] = []
    for command in block:
        out.append(command)
        args = command.args
        if isinstance(args, IfArgs):
            out.extend(walk_commands(args.then) + walk_commands(args.orelse))
        elif isinstance(args, LoopArgs):
            out.extend(walk_commands(args.do))
        if command.on_error:
            out.extend(walk_commands(command.on_error))
    return out
