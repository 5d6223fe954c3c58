"""`MCPServer`: how to reach one MCP server, and which of its tools a role offers (docs/mcp.md).

A description only: nothing here starts a process or imports the `mcp` SDK. The session that uses it lives in
`agl_notebook.mcp._sessions`, one per server per event loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._canonical import digest
from .._fieldwise import Fieldwise
from ..errors import InputError

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds one tool call may take before the step fails and the server is started again on next use."""
DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server may take to start, answer ``initialize`` and list its tools."""
DEFAULT_CONCURRENCY = 8
"""How many calls one session runs at once; the steps and map items sharing it wait their turn beyond that."""


@dataclass(frozen=True, eq=False, repr=False)
class MCPServer(Fieldwise):
    """An MCP server whose tools a role offers: give it to a role as ``Role(..., mcp=[server])``.

    Build it with `MCPServer.stdio` (a command this machine starts) or `MCPServer.http` (a streamable-HTTP URL).
    ``name`` identifies it in records, errors and views; the command, URL, environment and headers never reach a
    record or a fingerprint, so a notebook replays on a machine where the server is not even installed.
    """

    name: str
    """Identifies the server in records, the fingerprint and errors; unique within a role."""
    transport: Literal["stdio", "http"]
    """How it is reached."""
    command: str = ""
    """stdio: the program to start."""
    args: tuple[str, ...] = ()
    """stdio: its arguments."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """stdio: variables added to its environment (never recorded, never shown)."""
    cwd: str | None = None
    """stdio: its working directory (None: the current one)."""
    url: str = ""
    """http: the streamable-HTTP endpoint."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """http: headers sent with every request (never recorded, never shown)."""
    include: tuple[str, ...] | None = None
    """The server's tool names to offer (None: all), before the prefix."""
    exclude: tuple[str, ...] = ()
    """The server's tool names never to offer, before the prefix."""
    prefix: str = ""
    """Put before every tool's name as the model sees it (``"notes_"``), so two servers' tools cannot collide."""
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds one call may take (see `DEFAULT_CALL_TIMEOUT`)."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    """Seconds the server may take to start and list its tools."""
    concurrency: int = DEFAULT_CONCURRENCY
    """Calls one session runs at once."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _SERVER_NAME.fullmatch(self.name):
            raise InputError(
                f"MCPServer name {self.name!r}: use 1 to 64 letters, digits, '_' or '-' (it names the server in "
                "records and errors)."
            )
        what = f"MCPServer {self.name!r}"
        if self.transport == "stdio" and not (isinstance(self.command, str) and self.command.strip()):
            raise InputError(f"{what}: a stdio server needs a command to start.")
        if self.transport == "http" and not (
            isinstance(self.url, str) and self.url.startswith(("http://", "https://"))
        ):
            raise InputError(f"{what}: a streamable-HTTP server needs an http:// or https:// URL, not {self.url!r}.")
        lists: tuple[tuple[str, object], ...] = (
            ("args", self.args),
            ("exclude", self.exclude),
            ("include", self.include),
        )
        for label, values in lists:
            if values is None and label == "include":
                continue
            if isinstance(values, str) or not isinstance(values, tuple) or not all(isinstance(v, str) for v in values):
                raise InputError(f"{what}: {label} must be a list of strings.")
        for label, mapping in (("env", self.env), ("headers", self.headers)):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in dict(mapping).items()):
                raise InputError(f"{what}: {label} must map strings to strings.")
        if not isinstance(self.prefix, str) or (self.prefix and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", self.prefix)):
            raise InputError(f"{what}: the prefix may use only letters, digits, '_' and '-', at most 32 characters.")
        for label, seconds in (("call_timeout", self.call_timeout), ("start_timeout", self.start_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
                raise InputError(f"{what}: {label} must be a positive number of seconds, not {seconds!r}.")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise InputError(f"{what}: concurrency must be a whole number >= 1, not {self.concurrency!r}.")

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        prefix: str = "",
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> MCPServer:
        """A server this machine starts as a subprocess and talks to over its stdin and stdout.

        Args:
            name: Identifies it in records and errors (letters, digits, '_', '-').
            command: The program (``sys.executable``, ``"npx"``, ``"uvx"``).
            args: Its arguments.
            env: Variables added to the environment it inherits; never recorded.
            cwd: Its working directory.
            include: Offer only these of its tools (names before the prefix).
            exclude: Never offer these.
            prefix: Put before each tool's name as the model sees it.
            call_timeout: Seconds one call may take.
            start_timeout: Seconds it may take to start and list its tools.
            concurrency: Calls its session runs at once.
        """
        return cls(
            name,
            "stdio",
            command=command,
            args=_strings(args),
            env=dict(env or {}),
            cwd=cwd,
            include=None if include is None else _strings(include),
            exclude=_strings(exclude),
            prefix=prefix,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            concurrency=concurrency,
        )

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        prefix: str = "",
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``http://127.0.0.1:8765/mcp``).

        ``headers`` (an ``Authorization`` header, say) go with every request and are never recorded; the other
        arguments are `MCPServer.stdio`'s.
        """
        return cls(
            name,
            "http",
            url=url,
            headers=dict(headers or {}),
            include=None if include is None else _strings(include),
            exclude=_strings(exclude),
            prefix=prefix,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            concurrency=concurrency,
        )

    @property
    def choice(self) -> dict[str, object]:
        """Which of its tools a role offers, and under which names: part of every step's fingerprint."""
        return {
            "server": self.name,
            "prefix": self.prefix,
            "include": None if self.include is None else sorted(self.include),
            "exclude": sorted(self.exclude),
        }

    @property
    def connection_key(self) -> str:
        """What one session serves: descriptions alike in every field share a session on an event loop.

        The name and the tool choice are part of it, since a session keeps the tools as one description offers them.
        """
        return digest(
            {
                **self.choice,  # type: ignore[dict-item]
                "call_timeout": self.call_timeout,
                "start_timeout": self.start_timeout,
                "concurrency": self.concurrency,
                "transport": self.transport,
                "command": self.command,
                "args": list(self.args),
                "env": dict(self.env),
                "cwd": self.cwd,
                "url": self.url,
                "headers": dict(self.headers),
            }
        )

    def secrets(self) -> tuple[str, ...]:
        """What nothing the server sends back may say: its ``env`` and header values (a bearer token alone too).

        Shorter values (``"1"``, ``"true"``) would redact ordinary words, so they are left out.
        """
        values = [*self.env.values(), *self.headers.values()]
        values += [v.split(" ", 1)[1] for v in self.headers.values() if v.lower().startswith("bearer ")]
        return tuple(v for v in values if len(v) >= 8)

    def __repr__(self) -> str:
        where = f"{self.command} {' '.join(self.args)}".strip() if self.transport == "stdio" else self.url
        return f"MCPServer.{self.transport}({self.name!r}: {where})"


def _strings(values: Sequence[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        raise InputError(f"expected a list of strings, not the string {values!r}.")
    return tuple(values)
