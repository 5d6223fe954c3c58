"""Sessions with MCP servers: one per server per event loop, owned by one task on that loop (docs/mcp.md).

The `mcp` SDK's transports and `ClientSession` are anyio task groups, which must be entered and left by one task.
So each `Connection` runs an owner task that starts the server (or connects to it), initializes the session, lists
its tools once, and then waits to be closed; steps and map items on that loop call tools through the session from
their own tasks, at most `MCPServer.concurrency` at a time. A `step_sync` runs on a loop of its own, which gets its
own session, closed before that loop is (`close_loop`, asked by `agl_notebook.run.sync`).

A server that crashes, hangs past the call timeout or answers something that is not MCP ends its connection: the
step fails with an `MCPServerError` naming the server, the tool and the tail of the server's stderr, and the next
use starts a new one. Every stdio server started is also remembered by its process id, and killed (its whole
process group) when the interpreter exits, so a kernel's shutdown or restart leaves no server behind; a kernel
killed outright closes the servers' stdin, which ends any server that reads it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import dataclasses
import os
import signal
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import IO, TYPE_CHECKING, Any

from .._secrets import scrub_text, secrets_from_environment
from ..errors import MCPServerError
from ..payloads import JsonObject
from .listing import ServerTools, offered_tools
from .servers import MCPServer

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

STDERR_TAIL_CHARS = 2_000
"""How much of a failed server's stderr its error quotes (the end of it)."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line a stdio server may write (one JSON-RPC message): room for a listing page or a result with an
image, and a bound on what the SDK holds while it waits for the line's end (it keeps the line as one string)."""
_PID_MARK = "agl_notebook-mcp-pid "
# POSIX: a shell tells the server's process id (on its stderr, which we keep) and then becomes the server.
_SHELL_LAUNCH = 'echo "agl_notebook-mcp-pid $$" >&2; exec "$0" "$@"'
# Linux: Python does the same, and first asks the kernel to kill the server when the thread that started it dies
# (PR_SET_PDEATHSIG, kept across exec), so a kernel killed outright (SIGKILL, no exit hook) takes its servers along.
_LINUX_LAUNCH = (
    "import ctypes, os, signal, sys\n"
    "sys.stderr.write('agl_notebook-mcp-pid %d\\n' % os.getpid()); sys.stderr.flush()\n"
    "try:\n    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\nexcept Exception:\n    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n    os._exit(1)\n"  # the parent died before the signal was asked for
    "try:\n    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    sys.stderr.write('cannot start %r: %s\\n' % (sys.argv[2], e.strerror)); os._exit(127)\n"
)

# How the SDK's ClientSession.validate_tool_result begins the RuntimeError it raises for a result that breaks (or
# lacks) the tool's output schema; any other error during a call ends the connection.
_OUTPUT_SCHEMA_REFUSALS = ("Invalid structured content returned by tool ", "Invalid schema for tool ")
_NO_STRUCTURED_CONTENT = " has an output schema but did not return structured content"

Ask = Callable[[Any, tuple[str, ...]], Coroutine[Any, Any, Any]]
"""How a tool call answers a server's request for input made during it: given the request's params (`mcp.types`)
and the ids of the other calls then running on the session, returns an ElicitResult (or ErrorData). Run in the
calling step's context (its scope, its tool call id, its map item), with the call's timeout paused."""


@dataclasses.dataclass(eq=False)
class _InFlight:
    """A tool call running on a session: whose it is, how it answers a request for input, its deadline."""

    call_id: str
    context: contextvars.Context
    ask: Ask | None
    tool: str = ""
    deadline: asyncio.Timeout | None = None
    paused: int = 0
    left: float = 0.0
    asked: int = 0
    """How many of the server's questions this call asked."""
    asking: set[asyncio.Task[Any]] = dataclasses.field(default_factory=set)

    def pause(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop the call's clock while a person answers (a person's time is not the server's)."""
        self.paused += 1
        when = self.deadline.when() if self.deadline is not None else None
        if self.paused == 1 and self.deadline is not None and when is not None:
            self.left = max(0.0, when - loop.time())
            with contextlib.suppress(RuntimeError):  # the call has just ended: nothing to pause
                self.deadline.reschedule(None)

    def resume(self, loop: asyncio.AbstractEventLoop) -> None:
        self.paused -= 1
        if self.paused == 0 and self.deadline is not None:
            with contextlib.suppress(RuntimeError):  # the call ended while its question was open
                self.deadline.reschedule(loop.time() + self.left)


class Connection:
    """One session with one server on one event loop."""

    def __init__(self, server: MCPServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop
        self.tools: ServerTools | None = None
        """The server's tools as the role offers them, listed when the session starts and again after the server
        says they changed (notifications/tools/list_changed), before the next step takes them."""
        self._listed_again = True
        """False from the server's notice that its tools changed until they are listed again."""
        self.session: ClientSession | None = None
        self.pid: int | None = None
        self.failure: MCPServerError | None = None
        """Why the connection ended, if it did: every later call fails with it, and the next use starts anew."""
        self.in_flight: dict[int, _InFlight] = {}
        """The tool calls running on the session, by a counter (in the order they started)."""
        self._next = 0
        self._slots = asyncio.Semaphore(server.concurrency)
        self._ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        # The server's stderr goes to a file of ours, whose tail an error quotes (closed with the session).
        self._stderr: IO[bytes] | None = tempfile.TemporaryFile() if server.transport == "stdio" else None  # noqa: SIM115
        if self._stderr is not None:  # readable for an error's tail until the connection itself is gone
            weakref.finalize(self, self._stderr.close)
        self._task = loop.create_task(self._own(), name=f"agl_notebook MCP session {server.name}")

    @property
    def alive(self) -> bool:
        return self.failure is None and not self._task.done()

    async def ready(self) -> ServerTools:
        """Wait until the server is started, initialized and listed; its tools."""
        if self._ready.done() and self.failure is None and self.tools is not None and self._listed_again:
            return self.tools  # every call asks: no waiting machinery once it is ready
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.server.start_timeout)
        except TimeoutError:
            self._end(self._error(f"did not start and list its tools within {self.server.start_timeout:g} s"))
        except MCPServerError:
            raise
        if self.failure is not None:
            raise self.failure
        if not self._listed_again and self.session is not None:
            await self._list_again(self.session)
        assert self.tools is not None
        return self.tools

    async def _list_again(self, session: ClientSession) -> None:
        self._listed_again = True
        try:
            self.tools = offered_tools(self.server, await _listing(session))
        except MCPServerError as e:  # the new listing breaks a limit: the connection ends, as at the start
            raise self._end(e) from None
        except Exception as e:
            raise self._end(self._error(f"failed to list its tools again: {_describe(e, self._secrets())}")) from None

    async def call(self, name: str, arguments: JsonObject, call_id: str, ask: Ask | None = None) -> CallToolResult:
        """Call the server's tool ``name`` (its own name for it) within the call timeout.

        A request for input the server makes meanwhile goes to ``ask``, run in the caller's context, the timeout
        paused until it is answered (`_elicit`).

        Raises:
            MCPServerError: The server crashed, hung past the timeout or answered garbage; the connection ends.
            RuntimeError: The SDK refused the result (it breaks the tool's output schema); the connection stays.
        """
        await self.ready()
        async with self._slots:
            if self.failure is not None:
                raise self.failure
            session = self.session
            assert session is not None
            self._next += 1
            ticket = self._next
            flight = self.in_flight[ticket] = _InFlight(call_id, contextvars.copy_context(), ask, name)
            try:
                async with asyncio.timeout(self.server.call_timeout) as flight.deadline:
                    return await session.call_tool(name, arguments)
            except TimeoutError:
                raise self._end(
                    self._error(f"did not answer within {self.server.call_timeout:g} s (call_timeout)", tool=name)
                ) from None
            except Exception as e:
                from mcp import MCPError

                if self.failure is not None:
                    raise self.failure from None
                if isinstance(e, MCPError):
                    if e.code == -32000 or not self.alive:  # CONNECTION_CLOSED: the server is gone
                        raise self._end(self._error("closed the connection during the call", tool=name)) from None
                    raise self._error(f"answered the call with an error: {e.message}", tool=name, end=False) from None
                said = str(e)
                refused = said.startswith(_OUTPUT_SCHEMA_REFUSALS) or said.endswith(_NO_STRUCTURED_CONTENT)
                if isinstance(e, RuntimeError) and refused and self.alive:
                    raise  # the SDK's check of the result against the output schema: the caller says so
                raise self._end(self._error(f"failed during the call: {type(e).__name__}: {e}", tool=name)) from None
            finally:
                self.in_flight.pop(ticket, None)
                for task in flight.asking:  # a call ended (interrupted, timed out): its question is no longer asked
                    task.cancel()

    async def close(self) -> None:
        """End the session and stop the server; waits for the owner task."""
        self._stop.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self._task), 10)
        if not self._task.done():
            self._task.cancel()
        _forget(self)

    def stderr_tail(self) -> str:
        """The end of what the server wrote to its stderr, without our launch line, scrubbed."""
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            start = max(0, size - 4 * STDERR_TAIL_CHARS)
            self._stderr.seek(start)
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        # A window that began inside a line may have begun inside a secret, which is then no longer one to scrub.
        lines = text.splitlines()[1:] if start else text.splitlines()
        lines = [line for line in lines if not line.startswith(_PID_MARK)]
        return scrub_text("\n".join(lines), self._secrets())[-STDERR_TAIL_CHARS:]

    def _secrets(self) -> list[str]:
        """What no error may say: the server's ``env`` and header values, and the kernel's own secrets."""
        return [*self.server.secrets(), *secrets_from_environment()]

    def _error(self, what: str, *, tool: str | None = None, end: bool = True) -> MCPServerError:
        tail = self.stderr_tail()
        call = f" (calling its tool {tool!r})" if tool else ""
        said = f"\nThe end of its stderr:\n{tail}" if tail else ""
        after = " It is started again on its next use." if end else ""
        message = scrub_text(f"The MCP server {self.server.name!r}{call} {what}.{after}{said}", self._secrets())
        return MCPServerError(message, server=self.server.name, tool=tool, stderr=tail)

    def _end(self, error: MCPServerError) -> MCPServerError:
        if self.failure is None:
            self.failure = error
        if not self._ready.done():
            self._ready.set_exception(self.failure)
            self._ready.exception()  # retrieved: a failed start nobody waits for is not logged as lost
        self._stop.set()
        _forget(self)
        if not self._task.done() and asyncio.current_task() is not self._task:
            self._task.cancel()  # a transport stuck on a hung server: its shutdown (shielded) still stops it
        return self.failure

    async def _own(self) -> None:
        refused: MCPServerError | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    _form_only_session()(
                        read, write, message_handler=self._on_message, elicitation_callback=self._elicit
                    )
                )
                await session.initialize()
                self.pid = self._launched_pid()
                listed = await _listing(session)
                try:
                    self.tools = offered_tools(self.server, listed)
                except MCPServerError as e:  # raised out of the SDK's task groups, it would come wrapped
                    refused = e
                else:
                    self.session = session
                    self._ready.set_result(None)
                    await self._stop.wait()
            if refused is not None:
                self._end(refused)
        except asyncio.CancelledError:
            self._end(self.failure or self._error("was stopped"))
            raise
        except BaseException as e:  # an ExceptionGroup from the SDK's task groups, a spawn error
            self._end(self._error(f"ended: {_describe(e, self._secrets())}"))
        finally:
            self.session = None
            if self.pid is not None:  # the transport stopped it (and its process group) as it closed
                with _lock:
                    _started.pop(self.pid, None)

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        server = self.server
        _scrub_sdk_logs()
        if server.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            return _http(streamable_http_client, create_mcp_http_client(headers=dict(server.headers)), server.url)
        from mcp import StdioServerParameters, stdio_client

        _bound_stdio_lines()

        command, args = server.command, list(server.args)
        if sys.platform == "linux":
            launch = ["-S", "-c", _LINUX_LAUNCH, str(os.getpid())]
            command, args = sys.executable, [*launch, server.command, *server.args]
        elif os.name == "posix":
            command, args = "/bin/sh", ["-c", _SHELL_LAUNCH, server.command, *server.args]
        params = StdioServerParameters(command=command, args=args, env=dict(server.env) or None, cwd=server.cwd)
        _register_exit_hook()
        _too_long.set(self._line_too_long)  # the owner task's context: the SDK spawns the server from it
        return stdio_client(params, errlog=self._stderr)  # type: ignore[arg-type]  # a binary file has a fileno too

    def _line_too_long(self) -> None:
        tools = sorted({f.tool for f in self.in_flight.values() if f.tool})
        what = f"wrote a line of over {MAX_LINE_BYTES // (1024 * 1024)} MiB on stdout without ending it"
        self._end(self._error(f"{what} (one MCP message may not be that long)", tool=", ".join(tools) or None))

    def _launched_pid(self) -> int | None:
        if self._stderr is None:
            return None
        self._stderr.flush()
        self._stderr.seek(0)
        first = self._stderr.readline().decode("utf-8", "replace")
        self._stderr.seek(0, os.SEEK_END)
        if first.startswith(_PID_MARK) and first[len(_PID_MARK) :].strip().isdigit():
            pid = int(first[len(_PID_MARK) :])
            with _lock:
                _started[pid] = self.server.name
            return pid
        return None

    async def _on_message(self, message: object) -> None:
        if isinstance(message, Exception):  # the transport could not read what the server sent
            self._end(self._error(f"sent something that is not MCP JSON-RPC: {_describe(message, self._secrets())}"))
        elif getattr(message, "method", None) == "notifications/tools/list_changed":
            self._listed_again = False  # the next step lists them again (`ready`); a step running keeps its own

    async def _elicit(self, context: Any, params: Any) -> Any:
        """A server's request for input: asked by the call that caused it, in that call's context, its clock paused.

        Nothing in the request says which call caused it (over stdio the protocol carries no link), so with one
        call running it is that one's; with several, the one that asked fewest questions so far and is not waiting
        on one, the oldest among equals (docs/mcp.md, "Elicitation").
        """
        from mcp.types import INVALID_PARAMS, ErrorData

        if getattr(params, "mode", "form") != "form":
            return ErrorData(code=INVALID_PARAMS, message="URL-mode elicitation is not offered by this client.")
        flights = [f for f in self.in_flight.values() if f.ask is not None]
        if not flights:
            return ErrorData(code=INVALID_PARAMS, message="No tool call is running to ask the person for.")
        # A call waiting on its own question is blocked in the server, so it is not the one asking; a call not yet
        # asked anything is likelier to be asking than one whose question was answered (most tools ask once).
        flight = min(flights, key=lambda f: (bool(f.asking), f.asked))
        flight.asked += 1
        assert flight.ask is not None
        loop = asyncio.get_running_loop()
        others = tuple(f.call_id for f in flights if f is not flight)
        for f in flights:
            f.pause(loop)
        task: asyncio.Task[Any] = loop.create_task(flight.ask(params, others), context=flight.context.copy())
        flight.asking.add(task)
        try:
            await asyncio.wait((task,))  # a question its call stopped waiting for ends cancelled, not raising here
        finally:
            flight.asking.discard(task)
            task.cancel()
            for f in flights:
                f.resume(loop)
        if task.cancelled():
            from mcp.types import ElicitResult

            return ElicitResult(action="cancel")
        if task.exception() is not None:
            return ErrorData(code=INVALID_PARAMS, message="The client could not ask the person.")
        return task.result()


_SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.streamable_http", "mcp.shared.jsonrpc_dispatcher", "client", "httpx")
"""The loggers of the SDK's client (its session logs as ``client``) and its HTTP client, which log what servers send."""


def _scrub_sdk_logs() -> None:
    """No secret a server sends reaches a log handler through the SDK's loggers (`_secret_logs`)."""
    import logging

    from .._secret_logs import scrub_logs

    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _NO_SERVER_TRACEBACK not in logger.filters:
            logger.addFilter(_NO_SERVER_TRACEBACK)  # before the scrubber, which then scrubs the message it leaves
    scrub_logs(*_SDK_LOGGERS)


class _NoServerTraceback:
    """Keeps only the type of a log record's exception.

    The SDK logs a line it could not parse with the parser's error, whose text quotes the line cut short (pydantic
    shortens long input): a secret cut there is no longer one the scrubber finds. The step's `MCPServerError` says
    what the server sent.
    """

    def filter(self, record: Any) -> bool:
        """Replace the record's traceback by its exception's type, in the message."""
        error = record.exc_info[1] if record.exc_info else None
        # The SDK's session logs as "client": a logger of that name elsewhere keeps its tracebacks.
        if error is not None and _SDK_FOLDER in str(record.pathname):
            record.msg, record.args = f"{record.getMessage()} ({type(error).__name__})", ()
            record.exc_info = record.exc_text = None
        return True


_NO_SERVER_TRACEBACK = _NoServerTraceback()
_SDK_FOLDER = f"{os.sep}mcp{os.sep}"


async def _listing(session: ClientSession) -> list[dict[str, Any]]:
    """The server's tools, every page of them (at most a little over 100,000: `offered_tools` refuses so many)."""
    from mcp.types import PaginatedRequestParams

    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        listed.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
        cursor = page.next_cursor
        if not cursor or len(listed) > 100_000:
            return listed


_too_long: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("_too_long", default=None)
"""What the server being spawned in this context does when it writes a line over `MAX_LINE_BYTES`."""


class _BoundedLines:
    """A server's stdout, ended once a line runs past `MAX_LINE_BYTES` with no newline (the SDK keeps it whole).

    It tells ``too_long`` first, then raises EndOfStream, so the SDK's reader stops cleanly (nothing logged).
    """

    def __init__(self, stream: Any, too_long: Callable[[], None]) -> None:
        self._stream = stream
        self._too_long = too_long
        self._run = 0  # bytes since the last newline
        self._over = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        import anyio

        if self._over:
            raise anyio.EndOfStream
        chunk: bytes = await self._stream.receive(max_bytes)
        newline = chunk.rfind(b"\n")
        self._run = len(chunk) - newline - 1 if newline >= 0 else self._run + len(chunk)
        if self._run > MAX_LINE_BYTES:
            self._over = True
            self._too_long()
            raise anyio.EndOfStream
        return chunk

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _bound_stdio_lines() -> None:
    """Have the SDK's stdio transport read a server of ours through `_BoundedLines`, before it parses a line.

    The SDK reads ``process.stdout`` of the process its private ``_create_platform_compatible_process`` returns;
    that function is wrapped once (the mcp major version is pinned), and only a spawn made in a context that set
    `_too_long` (a `Connection`'s) is bounded: another user of the SDK in the process is left as it was.
    """
    from mcp.client import stdio

    spawn = stdio._create_platform_compatible_process
    if getattr(spawn, "_agl_bounded", False):
        return

    async def bounded(*args: Any, **kwargs: Any) -> Any:
        process: Any = await spawn(*args, **kwargs)
        too_long = _too_long.get()
        if too_long is not None and getattr(process, "_stdout", None) is not None:  # anyio's asyncio Process
            process._stdout = _BoundedLines(process._stdout, too_long)
        return process

    bounded._agl_bounded = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = bounded


def _form_only_session() -> type[ClientSession]:
    """The SDK's `ClientSession`, declaring form-mode elicitation only (the SDK declares URL mode too)."""
    global _FormOnlySession
    if _FormOnlySession is None:
        from mcp import ClientSession
        from mcp.types import ElicitationCapability, FormElicitationCapability

        class FormOnly(ClientSession):
            def _build_capabilities(self, version: str) -> Any:
                offered = super()._build_capabilities(version)
                return offered.model_copy(
                    update={"elicitation": ElicitationCapability(form=FormElicitationCapability())}
                )

        _FormOnlySession = FormOnly
    return _FormOnlySession


_FormOnlySession: type[ClientSession] | None = None


@contextlib.asynccontextmanager
async def _http(streamable_http_client: Any, client: Any, url: str) -> Any:
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _describe(error: BaseException, secrets: list[str]) -> str:
    """An exception as one line, an ExceptionGroup by its first leaf; scrubbed of ``secrets`` before it is cut."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    said = str(error).strip()
    text = scrub_text(said.splitlines()[0], secrets)[:300] if said else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# Connections by event loop, then by `MCPServer.connection_key`: a loop that ends takes its entries with it.
_connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Connection]] = weakref.WeakKeyDictionary()
_started: dict[int, str] = {}  # the process id of every stdio server started and not yet seen closed
_lock = threading.Lock()
_hooked = False


PROBE_PAUSE = 30.0
"""Seconds a server that failed to start is not tried again by a probe (mode ``auto`` checking a found record)."""
_probe_failures: dict[str, tuple[float, MCPServerError]] = {}


async def connect(server: MCPServer, *, probe: bool = False) -> Connection:
    """The running loop's session with ``server``, started (and listed) if it has none or its last one ended.

    A ``probe`` (mode ``auto`` listing a server to check a found record) does not try again a server that failed
    to start in the last `PROBE_PAUSE` seconds, so a map's items do not each wait for a server that is down.

    Raises:
        MCPServerError: The server did not start, list its tools in time, or listed tools that cannot be offered.
    """
    import time

    loop = asyncio.get_running_loop()
    key = server.connection_key
    failed = _probe_failures.get(key)
    if probe and failed is not None and time.monotonic() - failed[0] < PROBE_PAUSE:
        raise failed[1]
    with _lock:
        by_key = _connections.setdefault(loop, {})
        found = by_key.get(key)
        if found is None or not found.alive:
            found = by_key[key] = Connection(server, loop)
    try:
        await found.ready()
    except MCPServerError as e:
        _probe_failures[key] = (time.monotonic(), e)
        raise
    _probe_failures.pop(key, None)
    return found


def running(server: MCPServer) -> Connection | None:
    """The running loop's live session with ``server``, if one is open and listed (nothing is started)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    found = _connections.get(loop, {}).get(server.connection_key)
    return found if found is not None and found.alive and found.tools is not None else None


async def close_loop(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Close every session of ``loop`` (the running one): its servers stop before the loop is closed."""
    loop = loop or asyncio.get_running_loop()
    with _lock:
        connections = list(_connections.pop(loop, {}).values())
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


def server_processes() -> dict[int, str]:
    """The process ids of the stdio servers this interpreter started and has not seen closed, to their names."""
    with _lock:
        return {pid: name for pid, name in _started.items() if _exists(pid)}


def _forget(connection: Connection) -> None:
    with _lock:
        by_key = _connections.get(connection.loop)
        if by_key is not None and by_key.get(connection.server.connection_key) is connection:
            del by_key[connection.server.connection_key]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) still answers; /proc says so where there is one.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().split(b") ", 1)[-1][:1] != b"Z"
    except OSError:
        return True


def _register_exit_hook() -> None:
    global _hooked
    with _lock:
        if _hooked:
            return
        _hooked = True
    atexit.register(kill_all)


def kill_all() -> None:
    """Stop every stdio server this interpreter started (its process group): at exit, a session cannot close."""
    with _lock:
        pids = list(_started)
        _started.clear()
    if os.name != "posix" or not pids:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)  # started in a session of its own: its group is its pid
    import time

    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(_exists(pid) for pid in pids):
        time.sleep(0.02)
    for pid in pids:
        if _exists(pid):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
    sys.stderr.flush()
