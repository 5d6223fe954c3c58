"""A step's MCP tools: listed live or taken from its record's snapshot, offered to the loop, kept in the record.

`StepPlan` (`run/_step.py`) holds one `StepMCP` when its role has MCP servers. The record id covers which servers a
role uses and how it names their tools (the ``mcp`` part, known before the step starts); each offered tool adds a
part ``mcp:<name>``, its own digest, kept in the record. A step whose record is found replays from the record's
snapshot (``StepRecord.engine["mcp"]``) with no server started, unless mode ``auto`` can list the server live and a
tool differs: then the step misses, and the explanation names the tool's part (docs/mcp.md, "Replay").

Approvals: each MCP tool gets the policy its role states for it (``Role.mcp_approvals``, by name or pattern), made
"ask" by ``Role.ask_destructive`` when the server does not mark it read-only or non-destructive; the run layer's
`Gatekeeper` then gates it as any tool, live, replayed and resumed (docs/mcp.md, "Approvals").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MCPServerError, ReplayMissError
from ..loop import Gate, LoopTool
from ..models.base import ToolSpec
from ..payloads import JsonObject, JsonValue
from ..replay.records import StepRecord
from ..tools import Tool
from ..transcript import ToolResultBlock
from ..transcript import result_text as recorded_text

if TYPE_CHECKING:
    from ..approvals import ApprovalPolicy, ApprovalRequest, PolicyAnswer
    from ..mcp.listing import OfferedTool, ServerTools
    from ..mcp.servers import MCPServer
    from ..replay.modes import Mode
    from ..terminals import Terminal


class StepMCP:
    """The MCP side of one step of a role."""

    def __init__(
        self,
        servers: Sequence[MCPServer],
        role: str,
        own_tools: Sequence[str],
        *,
        approvals: Mapping[str, ApprovalPolicy] | None = None,
        ask_destructive: bool = False,
    ) -> None:
        self.servers = tuple(servers)
        self.role = role
        self.own_tools = tuple(own_tools)
        self.approvals = dict(approvals or {})
        self.ask_destructive = ask_destructive
        self.listed: list[ServerTools] | None = None
        """The tools offered, once known: listed live, or from the record replayed."""

    @staticmethod
    def choice_part(servers: Sequence[MCPServer]) -> JsonValue:
        """The ``mcp`` fingerprint part: which servers, and how their tools are chosen and named."""
        return [s.choice for s in servers]  # type: ignore[misc]

    def parts(self) -> dict[str, str]:
        """The per-tool fingerprint parts of the tools known so far."""
        found: dict[str, str] = {}
        for tools in self.listed or ():
            found.update(tools.parts())
        return found

    def snapshot(self) -> JsonObject:
        """What the record keeps: each server's tools, by server name."""
        return {tools.server: tools.snapshot() for tools in self.listed or ()}

    async def list_live(self, *, probe: bool = False) -> list[ServerTools]:
        """Every server's tools, listed through this loop's session (started if needed; see `connect`'s probe)."""
        from ..mcp import _sessions
        from ..mcp.listing import check_unique

        listed = [(await _sessions.connect(server, probe=probe)).tools for server in self.servers]
        tools = [t for t in listed if t is not None]
        check_unique(tools, self.own_tools, self.role)
        self.listed = tools
        return tools

    async def relisted(self, record: StepRecord, mode: Mode) -> bool:
        """In mode ``auto``, whether the servers' live tools differ from ``record``'s (the step then misses).

        A server that cannot be started counts as unchanged: the record replays from its snapshot. Mode ``replay``
        never starts or reaches a server.
        """
        if mode != "auto":
            return False
        try:
            await self.list_live(probe=True)
        except MCPServerError:
            self.listed = None
            return False
        recorded = {k: v for k, v in record.parts.items() if k.startswith("mcp:")}
        return recorded != self.parts()

    def policy(self, t: OfferedTool) -> ApprovalPolicy:
        """The approval policy of ``t``: the role's for its name, else for the first pattern matching it, else None.

        With ``ask_destructive``, a tool its hints leave destructive is asked about ("ask"; a callable policy's
        denial stands, its approval still waits for a person).
        """
        if t.name in self.approvals:
            stated = self.approvals[t.name]
        else:
            stated = next((p for pattern, p in self.approvals.items() if fnmatch.fnmatchcase(t.name, pattern)), None)
        if not (self.ask_destructive and t.destructive) or stated == "ask":
            return stated
        if stated is None:
            return "ask"
        return _then_ask(stated)

    def gated(self, t: OfferedTool) -> Tool[Any]:
        """``t`` as the `Gatekeeper` sees a tool: its name, description, schema-checked arguments and policy."""
        from ..mcp.results import payload_spec

        return Tool(t.name, t.description, dict, _not_called, payload_spec(t), self.policy(t))

    async def live_tools(self, gate_of: GateOf | None = None, terminal: Terminal | None = None) -> list[LoopTool]:
        """The offered tools, each calling its server, its arguments checked first, gated by ``gate_of``.

        A server's request for input during a call is shown on ``terminal`` (none: it is declined as unsupported).
        """
        from ..mcp import _sessions

        listed = await self.list_live()
        loop_tools: list[LoopTool] = []
        for server, tools in zip(self.servers, listed, strict=True):
            for t in tools.tools:
                gate = gate_of(self.gated(t)) if gate_of is not None else None
                loop_tools.append(_live_tool(server, t, _sessions, gate, terminal))
        return loop_tools

    def recorded_tools(self, record: StepRecord, gate_of: GateOf | None = None) -> list[LoopTool]:
        """The tools ``record`` offered, from its snapshot, answering with recorded results, gated by ``gate_of``."""
        from ..mcp.listing import check_unique, from_snapshot

        kept = (record.engine or {}).get("mcp")
        snapshots = kept if isinstance(kept, dict) else {}
        listed = []
        for server in self.servers:
            if server.name not in snapshots:
                raise ReplayMissError(
                    f"The recording {record.id} of role {self.role!r} keeps no tool list of its MCP server "
                    f"{server.name!r}: it is damaged. Run the step in mode 'refresh' with the server available.",
                    nearest=record,
                    differing=(),
                )
            listed.append(from_snapshot(server.name, snapshots[server.name]))
        check_unique(listed, self.own_tools, self.role)
        self.listed = listed
        results = {b.tool_use_id: b for m in record.transcript for b in m.content if isinstance(b, ToolResultBlock)}
        return [
            _recorded_tool(t, record, results, gate_of(self.gated(t)) if gate_of is not None else None)
            for tools in listed
            for t in tools.tools
        ]


GateOf = Callable[[Tool[Any]], Gate | None]
"""Makes a tool's gate (`agl_notebook.run._approvals.Gatekeeper`'s live, replay or resume gate)."""


async def _not_called(payload: Any) -> Any:
    raise AssertionError("an MCP tool's calls go through its server, never through this handler")


def _then_ask(policy: Callable[..., Any]) -> Callable[[Any, ApprovalRequest], Awaitable[PolicyAnswer]]:
    """``policy``, except that a call it approves still waits for a person: a destructive tool's approval is added."""

    async def asking(payload: Any, request: ApprovalRequest) -> PolicyAnswer:
        from ..approvals import Approve, apply_policy

        said = await apply_policy(policy, request)
        return "ask" if said is None or said == Approve() else said  # type: ignore[return-value]

    return asking


def _spec(t: OfferedTool) -> ToolSpec:
    return ToolSpec(t.name, t.description, t.input_schema)


def _live_tool(
    server: MCPServer, t: OfferedTool, sessions: Any, gate: Gate | None, terminal: Terminal | None
) -> LoopTool:
    from ..mcp.results import argument_checker, output_schema_broken, result_text

    async def call(arguments: Any, call_id: str) -> tuple[str, bool]:
        connection = await sessions.connect(server)
        failed: list[Exception] = []
        ask = _asker(server, t, terminal, failed) if terminal is not None else None
        try:
            result = await connection.call(t.server_name, arguments, call_id, ask)
        except RuntimeError as e:
            if isinstance(e, MCPServerError):
                raise
            return output_schema_broken(t, str(e), server.secrets())
        if failed:  # nobody could answer the server's question (headless, no answer given): the step fails so
            raise failed[0]
        return result_text(t, result, server.secrets())

    return LoopTool(_spec(t), call, argument_checker(t), gate)


def _asker(server: MCPServer, t: OfferedTool, terminal: Terminal, failed: list[Exception]) -> Any:
    """How a call to ``t`` answers its server's request for input: a question on ``terminal`` (docs/mcp.md).

    Runs in the calling step's context, so the question is that step's (its view, its record, its map item). A
    question nobody can answer is cancelled for the server, and its error kept in ``failed`` for the step.
    """

    async def ask(params: Any, others: tuple[str, ...]) -> Any:
        from mcp.types import INVALID_PARAMS, ElicitResult, ErrorData

        from ..mcp.elicitation import UnsupportedRequest, elicitation

        try:
            made = elicitation(server.name, t.name, params, server.secrets())
        except UnsupportedRequest as e:
            return ErrorData(code=INVALID_PARAMS, message=str(e))
        try:
            answer = await terminal.show(lambda: made.screen)
        except Exception as e:
            failed.append(e)
            return ElicitResult(action="cancel")
        return ElicitResult(**made.result(answer))

    return ask


def _recorded_tool(
    t: OfferedTool, record: StepRecord, results: dict[str, ToolResultBlock], gate: Gate | None
) -> LoopTool:
    from ..mcp.results import argument_checker

    async def call(arguments: Any, call_id: str) -> tuple[str, bool]:
        recorded = results.get(call_id)
        if recorded is None:
            raise ReplayMissError(
                f"The recording {record.id} has no result for the call {call_id} to the MCP tool {t.name!r}: it "
                "is damaged. Run the step in mode 'refresh'.",
                nearest=record,
                differing=(),
            )
        return recorded_text(recorded), recorded.is_error

    return LoopTool(_spec(t), call, argument_checker(t), gate)
