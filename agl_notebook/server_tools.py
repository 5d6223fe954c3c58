"""Tools Anthropic runs itself: web search, web fetch and code execution, offered with `Role(server_tools=[...])`.

A server tool is not called in the kernel: the model calls it, Anthropic runs it inside the same request, and the
reply holds the call (a ``server_tool_use`` block) and its result (``web_search_tool_result``,
``web_fetch_tool_result``, ``code_execution_tool_result``, ``bash_code_execution_tool_result`` ...) in place. Those
blocks are kept as the API sent them (`agl_notebook.transcript.RawBlock`) and sent back unchanged, so a replay,
a map or a batch carries them like any other reply. Nothing in the kernel can gate a call (it has already run when
the reply arrives), so an approval policy on a server tool is an `InputError`.

Each option object is frozen and checked when built; `ServerTool.to_json` is the tool as the Messages API takes it
(``anthropic.types.WebSearchTool20250305Param`` and its siblings), and it is what a step's fingerprint holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from ._fieldwise import Fieldwise
from .errors import InputError
from .payloads import JsonObject, JsonValue

__all__ = [
    "CodeExecution",
    "ServerTool",
    "UserLocation",
    "WebFetch",
    "WebSearch",
    "check_server_tools",
    "scripted_code_execution",
    "scripted_fetch",
    "scripted_search",
]

APPROVAL_REFUSED = (
    "Anthropic runs server tools inside the model's request, and a call has already run when the reply reaches the "
    "kernel, so nothing can ask a person first. Limit it instead (allowed_domains, blocked_domains, max_uses), or "
    "write a tool of your own with tool(..., approval=...)."
)
"""Why an approval policy on a server tool is refused."""

SERVER_TOOL_NAMES = frozenset({"web_search", "web_fetch", "code_execution"})
"""The names the API offers server tools under (a role's own tool may not take one)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class UserLocation(Fieldwise):
    """Where the user roughly is, so web search results fit (the API's ``user_location``, type ``approximate``)."""

    city: str | None = None
    region: str | None = None
    country: str | None = None
    """The two-letter ISO country code."""
    timezone: str | None = None
    """An IANA time zone, such as ``Europe/Paris``."""

    def __post_init__(self) -> None:
        for name in ("city", "region", "country", "timezone"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"UserLocation({name}=...) takes a non-empty string or None, not {value!r}.")
        if self.country is not None and (len(self.country) != 2 or not self.country.isalpha()):
            raise InputError(f"UserLocation(country=...) takes a two-letter ISO country code, not {self.country!r}.")

    def to_json(self) -> JsonObject:
        """The API's ``user_location``."""
        data: JsonObject = {"type": "approximate"}
        for name in ("city", "region", "country", "timezone"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data


def _domains(tool: str, name: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputError(f"{tool}({name}=...) takes a list of domains such as ['example.com'], not {value!r}.")
    domains = tuple(value)
    for domain in domains:
        if not isinstance(domain, str) or not domain.strip() or any(c.isspace() for c in domain):
            raise InputError(f"{tool}({name}=...): {domain!r} is not a domain.")
    return domains


def _check_domains_and_uses(option: WebSearch | WebFetch, tool: str) -> None:
    """Check and normalise the options web search and web fetch share: the two domain lists and ``max_uses``."""
    _refuse_approval(tool, option.approval)
    allowed = _domains(tool, "allowed_domains", option.allowed_domains)
    blocked = _domains(tool, "blocked_domains", option.blocked_domains)
    if allowed is not None and blocked is not None:
        raise InputError(f"{tool} takes allowed_domains or blocked_domains, not both (the API refuses both).")
    object.__setattr__(option, "allowed_domains", allowed)
    object.__setattr__(option, "blocked_domains", blocked)
    _uses(tool, option.max_uses)


def _domains_and_uses_json(option: WebSearch | WebFetch) -> JsonObject:
    """The tool's JSON as far as the options web search and web fetch share."""
    data: JsonObject = {"type": option.type, "name": option.name}
    if option.allowed_domains is not None:
        data["allowed_domains"] = list(option.allowed_domains)
    if option.blocked_domains is not None:
        data["blocked_domains"] = list(option.blocked_domains)
    if option.max_uses is not None:
        data["max_uses"] = option.max_uses
    return data


def _uses(tool: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InputError(f"{tool}(max_uses=...) takes a whole number >= 1 (or None: no limit), not {value!r}.")


def _refuse_approval(tool: str, approval: object) -> None:
    if approval is not None:
        raise InputError(f"{tool}(approval={approval!r}): {APPROVAL_REFUSED}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WebSearch(Fieldwise):
    """Web search, run by Anthropic; its results come back with citations (billed per search: docs/cost.md).

    Raises:
        InputError: Both ``allowed_domains`` and ``blocked_domains``, a ``max_uses`` under 1, a domain that is not
            one, or any ``approval`` (Anthropic runs the search: nothing in the kernel can gate it).
    """

    allowed_domains: Sequence[str] | None = None
    """Only results from these domains."""
    blocked_domains: Sequence[str] | None = None
    """Never results from these domains."""
    max_uses: int | None = None
    """The most searches in one model request; a Run with a budget needs it (a search is reserved per use)."""
    user_location: UserLocation | None = None
    """Where the user roughly is."""
    approval: None = None
    """Not taken: set, it is an `InputError` saying why (a server tool cannot be gated)."""

    name = "web_search"
    type = "web_search_20250305"

    def __post_init__(self) -> None:
        _check_domains_and_uses(self, "WebSearch")
        if self.user_location is not None and not isinstance(self.user_location, UserLocation):
            raise InputError(f"WebSearch(user_location=...) takes a UserLocation(...), not {self.user_location!r}.")

    def to_json(self) -> JsonObject:
        """The tool as the Messages API takes it (``WebSearchTool20250305Param``)."""
        data = _domains_and_uses_json(self)
        if self.user_location is not None:
            data["user_location"] = self.user_location.to_json()
        return data


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WebFetch(Fieldwise):
    """Fetching a web page or PDF by URL, run by Anthropic (no charge beyond the tokens the page adds).

    Raises:
        InputError: Both domain lists, a ``max_uses`` or ``max_content_tokens`` under 1, or any ``approval``.
    """

    allowed_domains: Sequence[str] | None = None
    """Only URLs on these domains."""
    blocked_domains: Sequence[str] | None = None
    """Never URLs on these domains."""
    max_uses: int | None = None
    """The most fetches in one model request."""
    citations: bool = False
    """Whether the model may cite the fetched pages (off by default, as in the API)."""
    max_content_tokens: int | None = None
    """About how many tokens of a page's text are read."""
    approval: None = None
    """Not taken: set, it is an `InputError` saying why (a server tool cannot be gated)."""

    name = "web_fetch"
    type = "web_fetch_20250910"

    def __post_init__(self) -> None:
        _check_domains_and_uses(self, "WebFetch")
        if not isinstance(self.citations, bool):
            raise InputError(f"WebFetch(citations=...) takes True or False, not {self.citations!r}.")
        tokens = self.max_content_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise InputError(f"WebFetch(max_content_tokens=...) takes a whole number >= 1, not {tokens!r}.")

    def to_json(self) -> JsonObject:
        """The tool as the Messages API takes it (``WebFetchTool20250910Param``)."""
        data = _domains_and_uses_json(self)
        if self.citations:
            data["citations"] = {"enabled": True}
        if self.max_content_tokens is not None:
            data["max_content_tokens"] = self.max_content_tokens
        return data


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CodeExecution(Fieldwise):
    """Code execution in a sandboxed container, run by Anthropic (billed by container time: shown "not priced").

    The reply names its container; every later request of the step sends that id back, so files the code wrote
    are still there.

    Raises:
        InputError: Any ``approval`` (the code runs at Anthropic: nothing in the kernel can gate it).
    """

    approval: None = None
    """Not taken: set, it is an `InputError` saying why (a server tool cannot be gated)."""

    name = "code_execution"
    type = "code_execution_20250825"

    def __post_init__(self) -> None:
        _refuse_approval("CodeExecution", self.approval)

    def to_json(self) -> JsonObject:
        """The tool as the Messages API takes it (``CodeExecutionTool20250825Param``)."""
        return {"type": self.type, "name": self.name}


ServerTool: TypeAlias = WebSearch | WebFetch | CodeExecution
"""A tool Anthropic runs."""


def check_server_tools(role: str, value: object, own_names: Sequence[str]) -> tuple[ServerTool, ...]:
    """A role's ``server_tools`` as a tuple, or an `InputError` naming what is wrong."""
    if isinstance(value, WebSearch | WebFetch | CodeExecution | str) or not isinstance(value, Sequence):
        raise InputError(f"Role {role!r}: server_tools takes a list, server_tools=[WebSearch(max_uses=3)].")
    tools = tuple(value)
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, WebSearch | WebFetch | CodeExecution):
            raise InputError(
                f"Role {role!r}: {tool!r} is not a server tool; offer WebSearch(...), WebFetch(...) or CodeExecution()."
            )
        if tool.name in seen:
            raise InputError(f"Role {role!r}: server_tools offers {tool.name!r} twice.")
        if tool.name in own_names:
            raise InputError(f"Role {role!r}: a tool of its own is named {tool.name!r}, the name of a server tool.")
        seen.add(tool.name)
    return tools


def search_max_uses(tools: Sequence[JsonValue]) -> tuple[bool, int]:
    """Whether a request's server tools hold web search, and the most searches it may make (0: no limit set)."""
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == "web_search":
            uses = tool.get("max_uses")
            return True, uses if isinstance(uses, int) and not isinstance(uses, bool) else 0
    return False, 0


# --- Scripting server tool blocks (ScriptedTurn(blocks=...)), so a notebook runs offline ----------------------------


def scripted_search(
    id: str, query: str, results: Sequence[tuple[str, str]], *, error: str | None = None
) -> list[JsonObject]:
    """A web search call and its result as the API sends them: ``results`` are (title, url) pairs."""
    content: JsonValue = (
        {"type": "web_search_tool_result_error", "error_code": error}
        if error is not None
        else [
            {
                "type": "web_search_result",
                "title": title,
                "url": url,
                "encrypted_content": f"scripted-{i}",
                "page_age": None,
            }
            for i, (title, url) in enumerate(results)
        ]
    )
    return [
        {"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": query}},
        {"type": "web_search_tool_result", "tool_use_id": id, "content": content},
    ]


def scripted_fetch(id: str, url: str, title: str, text: str) -> list[JsonObject]:
    """A web fetch call and its result (the page as a plain-text document) as the API sends them."""
    return [
        {"type": "server_tool_use", "id": id, "name": "web_fetch", "input": {"url": url}},
        {
            "type": "web_fetch_tool_result",
            "tool_use_id": id,
            "content": {
                "type": "web_fetch_result",
                "url": url,
                "retrieved_at": None,
                "content": {
                    "type": "document",
                    "title": title,
                    "citations": None,
                    "source": {"type": "text", "media_type": "text/plain", "data": text},
                },
            },
        },
    ]


def scripted_code_execution(
    id: str, code: str, *, stdout: str = "", stderr: str = "", return_code: int = 0
) -> list[JsonObject]:
    """A code execution call (bash, as code_execution_20250825 runs it) and its output as the API sends them."""
    return [
        {"type": "server_tool_use", "id": id, "name": "bash_code_execution", "input": {"command": code}},
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": id,
            "content": {
                "type": "bash_code_execution_result",
                "stdout": stdout,
                "stderr": stderr,
                "return_code": return_code,
                "content": [],
            },
        },
    ]
