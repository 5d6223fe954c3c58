"""Approvals in a step: the gate between a tool call's validation and its handler (docs/roles-and-tools.md).

Live, the tool's policy decides, or the Run's terminal asks a person, unless the person chose "always approve" for
the tool earlier in the same Run; the decision is recorded in the step's scope and so in its record. Replayed,
nobody is asked and no policy runs: the recorded decisions are told to the views as they were live, a denied call
gets its recorded result, and a recorded "always" holds for the rest of the Run again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .._scope import Decision, StepScope
from ..events import ApprovalRequested
from ..loop import Gate, Gated
from ..payloads import JsonObject, dump
from ..terminals import Terminal
from ..tools import Tool


class Gatekeeper:
    """A Run's approvals: its terminal, and the tools a person chose to approve for the rest of the Run."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self.always: set[str] = set()
        """The names of the tools whose calls run without asking for the rest of the Run."""

    def live_gate(self, tool: Tool[Any], scope: StepScope) -> Gate | None:
        """The gate of ``tool`` in a live step; None for a tool without an approval policy."""
        policy = tool.approval
        if policy is None:
            return None
        # Loaded by the first tool that has a policy: a notebook without approvals never imports them.
        from ..approvals import ApprovalRequest, Deny, apply_policy, decide, decided_event, denied_text, edited_note

        async def gate(payload: Any, call_id: str) -> Gated:
            __tracebackhide__ = True  # IPython shows a policy's frames, not these
            request = ApprovalRequest(
                tool.name, call_id, payload, _arguments(payload), tool.spec, scope.role, tool.description
            )
            verdict = await apply_policy(policy, request)
            if verdict is None:
                if tool.name in self.always:
                    return Gated(payload)
                decision = await self.terminal.approve(request)
            elif isinstance(verdict, Deny):
                decision = decide(request, verdict, by="policy")
                scope.decisions.append(decision)
                scope.emit(decided_event(decision))
            else:
                return Gated(payload)
            if decision.always:
                self.always.add(tool.name)
            if decision.decision == "deny":
                return Gated(result=(denied_text(decision), True))
            if decision.decision == "edit":
                edited, _ = request.check(decision.arguments)
                return Gated(edited, note=edited_note(decision))
            return Gated(payload)

        return gate

    def replay_gate(
        self,
        tool: Tool[Any],
        decisions: tuple[Decision, ...],
        scope: StepScope,
        recorded_result: Callable[[str], tuple[str, bool]],
    ) -> Gate | None:
        """The gate of ``tool`` in a replayed step: tells its recorded decisions; None if it has none."""
        mine = {d.tool_call_id: d for d in decisions if d.tool == tool.name}
        if not mine:
            return None

        async def gate(payload: Any, call_id: str) -> Gated:
            __tracebackhide__ = True
            recorded = mine.get(call_id)
            if recorded is None:
                return Gated(payload)
            recorded = self._tell(tool, recorded, payload, scope)
            if recorded.decision == "deny":
                return Gated(result=recorded_result(call_id))
            return Gated(payload)  # the recorded result (of the edited call, its note included) comes from `call`

        return gate

    def resume_gate(
        self,
        tool: Tool[Any],
        decisions: tuple[Decision, ...],
        scope: StepScope,
        finished: set[str],
        recorded_result: Callable[[str], tuple[str, bool]],
    ) -> Gate | None:
        """The gate of ``tool`` in a step resumed from a partial record (docs/recordings.md, "Partial records").

        A finished call's recorded decision is told, as in a replay. The call the step waited on, if it was decided
        before its handler asked a question, runs as decided (the edited payload, with its note) without asking
        again; undecided, it goes through the live gate: the same approval is shown again. Every decision told is
        kept in the step's scope, so the finished record holds them all.
        """
        mine = {d.tool_call_id: d for d in decisions if d.tool == tool.name}
        live = self.live_gate(tool, scope)
        if not mine and live is None:
            return None
        from ..approvals import ApprovalRequest, denied_text, edited_note

        async def gate(payload: Any, call_id: str) -> Gated:
            __tracebackhide__ = True
            recorded = mine.get(call_id)
            if recorded is None:
                if call_id in finished or live is None:
                    return Gated(payload)
                return await live(payload, call_id)
            recorded = self._tell(tool, recorded, payload, scope)
            scope.decisions.append(recorded)
            if recorded.decision == "deny":
                return Gated(result=recorded_result(call_id) if call_id in finished else (denied_text(recorded), True))
            if call_id in finished or recorded.decision != "edit":
                return Gated(payload)
            request = ApprovalRequest(
                tool.name, call_id, payload, _arguments(payload), tool.spec, scope.role, tool.description
            )
            edited, _ = request.check(recorded.arguments)
            return Gated(edited, note=edited_note(recorded))

        return gate

    def _tell(self, tool: Tool[Any], recorded: Decision, payload: Any, scope: StepScope) -> Decision:
        """Tell the views a recorded decision as it was told live; the decision, with what an edit changed."""
        from ..approvals import changed_paths, decided_event

        arguments = _arguments(payload)
        if recorded.by != "policy":  # a policy decides without showing the call to anyone
            scope.emit(ApprovalRequested(tool.name, recorded.tool_call_id, arguments))
        if recorded.decision == "edit" and recorded.arguments is not None:
            # What the edit changed is not recorded: the same validation of the same call gives it again.
            recorded = dataclasses.replace(recorded, changed=changed_paths(arguments, recorded.arguments))
        scope.emit(decided_event(recorded))
        if recorded.always:
            self.always.add(tool.name)
        return recorded


def _arguments(payload: Any) -> JsonObject:
    arguments = dump(payload)
    return arguments if isinstance(arguments, dict) else {}
