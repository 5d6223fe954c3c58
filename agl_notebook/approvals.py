"""Approvals: a tool call approved, edited or denied after its arguments pass validation and before its handler runs.

A tool declares its policy with ``tool(..., approval=...)`` (a client tool with an ``"approval"`` key): None runs
every call (the default), ``"ask"`` asks for every call, and a callable decides per call from the validated payload
(`ApprovalPolicy`). What a person, a script or a headless setting says is a `Verdict` (`Approve`, `Edit`, `Deny`);
checked against the tool's payload it becomes the `Decision` a step records. The terminal asks
(`agl_notebook.terminals.Terminal.approve`); the run layer gates each call (`agl_notebook.run._approvals`).

The policy is not part of a step's fingerprint: the fingerprint covers what the model sees, and a replay asks nobody
(its recorded decisions are shown, the tool results are already in the transcript). docs/roles-and-tools.md,
"Approvals".
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from . import _settings
from ._canonical import canonical_json
from ._fieldwise import Fieldwise
from ._files import read_json_file
from ._scope import Decision
from .errors import InputError, NoDecisionError
from .events import ApprovalDecided
from .payloads import JsonObject, JsonValue, PayloadSpec, dump

__all__ = [
    "Approve",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Decision",
    "Deny",
    "Edit",
    "Verdict",
]

SETTING = _settings.APPROVALS.name
"""The variable that decides tool calls in a headless run."""


@dataclass(frozen=True, eq=False, repr=False)
class Approve(Fieldwise):
    """Run the call as the agent wrote it."""

    always: bool = False
    """Also approve every later call of this tool in the same `Run` without asking."""


@dataclass(frozen=True, eq=False, repr=False)
class Edit(Fieldwise):
    """Run the call with these arguments instead; they are checked as the agent's were."""

    arguments: JsonObject
    """The whole arguments object, as JSON."""


@dataclass(frozen=True, eq=False, repr=False)
class Deny(Fieldwise):
    """Do not run the call: the agent gets an error result carrying ``message`` (or a default text)."""

    message: str = ""
    """What the agent is told, if anything."""


Verdict: TypeAlias = Approve | Edit | Deny
"""What is said about one call, before it is checked."""

PolicyAnswer: TypeAlias = Literal["approve", "deny", "ask"] | Approve | Deny
"""What a callable policy returns for one call: ``"ask"`` leaves it to a person."""


@dataclass(frozen=True, eq=False, repr=False)
class ApprovalRequest(Fieldwise):
    """One tool call waiting for a decision: what a terminal shows and what a policy is given."""

    tool: str
    """The tool's name."""
    tool_call_id: str
    """The call's id."""
    payload: Any
    """The validated payload the handler would get (a dataclass; for a client tool, the arguments dict)."""
    arguments: JsonObject
    """The validated payload as JSON (defaults filled in): what an edit starts from and a decisions file matches."""
    spec: PayloadSpec = field(repr=False, compare=False)
    """The tool's compiled payload: its JSON Schema (the edit form's fields) and its validator."""
    role: str = ""
    """The role whose step made the call."""
    description: str = ""
    """The tool's description."""

    def check(self, arguments: object) -> tuple[Any, tuple[str, ...]]:
        """Build the payload from edited arguments, or return the problems (the messages the agent would get)."""
        if not isinstance(arguments, dict):
            return None, (f"arguments: expected an object, got {type(arguments).__name__}.",)
        return self.spec.validate(arguments)


ApprovalPolicy: TypeAlias = (
    Literal["ask"] | Callable[[Any, ApprovalRequest], "PolicyAnswer | Awaitable[PolicyAnswer]"] | None
)
"""A tool's approval: None (every call runs), ``"ask"`` (a person decides every call), or
``policy(payload, request)`` returning ``"approve"``, ``"deny"`` (or a `Deny` with a message) or ``"ask"``."""


def check_policy(where: str, approval: object) -> None:
    """Raise `InputError` unless ``approval`` is a usable `ApprovalPolicy`."""
    if approval is None or approval == "ask" or callable(approval):
        return
    raise InputError(
        f"{where}: approval must be None (every call runs), 'ask' (a person approves every call) or a function "
        f"policy(payload, request) returning 'approve', 'deny' or 'ask'; not {approval!r}."
    )


async def apply_policy(policy: ApprovalPolicy, request: ApprovalRequest) -> Verdict | None:
    """What the tool's policy says of the call: a `Verdict`, or None when a person must decide."""
    if policy is None:
        return Approve()
    if policy == "ask":
        return None
    said: object = policy(request.payload, request)
    if inspect.isawaitable(said):
        said = await said
    if said == "ask":
        return None
    if said == "approve" or said == Approve():
        return Approve()
    if said == "deny":
        return Deny()
    if isinstance(said, Deny):
        return Deny(_message(said.message, f"the approval policy of tool {request.tool!r}"))
    raise InputError(
        f"The approval policy of tool {request.tool!r} returned {said!r}; it returns 'approve', 'deny' (or "
        "Deny(message)) or 'ask'. Only a person edits arguments or approves a tool for the rest of a Run."
    )


def decide(request: ApprovalRequest, verdict: object, *, by: str = "person") -> Decision:
    """Check ``verdict`` on ``request`` and make the decision to record.

    An edit that changes nothing is an approval. Raises `InputError` for something that is not a `Verdict`, or an
    edit whose arguments do not fit the payload (naming every problem, as the agent would read them).
    """
    call, tool = request.tool_call_id, request.tool
    if isinstance(verdict, Approve):
        return Decision(call, tool, "approve", always=bool(verdict.always), by=by)
    if isinstance(verdict, Deny):
        return Decision(call, tool, "deny", message=_message(verdict.message, f"the denial of {tool!r}"), by=by)
    if not isinstance(verdict, Edit):
        raise InputError(
            f"The decision on the call to {request.tool!r} must be Approve(), Edit(arguments) or Deny(message), not "
            f"{verdict!r}."
        )
    payload, problems = request.check(verdict.arguments)
    if problems:
        listed = "\n".join(f"- {p}" for p in problems)
        raise InputError(f"The edited arguments of the call to {request.tool!r} do not fit its payload:\n{listed}")
    arguments = dump(payload)
    assert isinstance(arguments, dict)  # a payload is an object
    changed = changed_paths(request.arguments, arguments)
    if not changed:
        return Decision(call, tool, "approve", by=by)
    return Decision(call, tool, "edit", arguments=arguments, by=by, changed=changed)


def decided_event(decision: Decision) -> ApprovalDecided:
    """The event that tells views of ``decision``."""
    return ApprovalDecided(
        decision.tool,
        decision.tool_call_id,
        decision.decision,
        decision.by,
        decision.always,
        decision.changed,
        decision.arguments,
        decision.message,
    )


def as_verdict(said: object, where: str) -> Verdict:
    """A scripted decision as a `Verdict`: ``"approve"``, ``"always"``, ``"deny"``, or an `Approve`, `Edit`, `Deny`."""
    if isinstance(said, Approve | Edit | Deny):
        return said
    words: dict[object, Verdict] = {"approve": Approve(), "always": Approve(always=True), "deny": Deny()}
    if isinstance(said, str) and said in words:
        return words[said]
    raise InputError(
        f"{where}: a decision is 'approve', 'always', 'deny', Approve(), Edit(arguments) or Deny(message), not "
        f"{said!r}."
    )


def changed_paths(before: JsonValue, after: JsonValue, path: str = "") -> tuple[str, ...]:
    """The paths whose values differ between two argument objects (``city``, ``address.zip``; a list as a whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        # In the order of ``before`` (the call's validated arguments: the payload's field order, live or replayed),
        # never of ``after``, whose keys come back sorted from a saved record.
        for key in [*before, *(k for k in after if k not in before)]:
            child = f"{path}.{key}" if path else key
            if key not in before or key not in after:
                found.append(child)
            else:
                found.extend(changed_paths(before[key], after[key], child))
        return tuple(found)
    return () if canonical_json(before) == canonical_json(after) else (path or "arguments",)


def _message(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"{where}: the message must be a string, not {text!r}.")
    return text.strip()


# What the agent reads, and what a view says ------------------------------------------------------------------


def denied_text(decision: Decision) -> str:
    """The error result the agent gets for a denied call."""
    who = {
        "person": "The person denied this call",
        "policy": "This call was denied by its approval policy",
    }.get(decision.by, "This call was denied")
    return f"{who}: {decision.message}" if decision.message else f"{who}."


def edited_note(decision: Decision) -> str:
    """What precedes the handler's result when the call ran with edited arguments: what changed, what it ran with."""
    who = "The person edited your arguments" if decision.by == "person" else "Your arguments were edited"
    ran_with = json.dumps(decision.arguments, ensure_ascii=False)  # in the payload's field order, as the form shows
    return f"{who} before the call ran (changed: {', '.join(decision.changed)}); it ran with {ran_with}.\n\n"


def decision_words(
    decision: str, *, by: str, always: bool = False, changed: tuple[str, ...] = (), message: str = ""
) -> str:
    """A decision in words, for views: ``edited by a person: changed city, days``."""
    who = {"person": "by a person", "policy": "by the tool's policy", "setting": f"by {SETTING}"}.get(by, f"by {by}")
    if decision == "approve":
        return f"approved {who}" + (", and every later call of this tool in this Run" if always else "")
    if decision == "edit":
        return f"edited {who}: changed {', '.join(changed)}"
    return f"denied {who}" + (f": {message}" if message else "")


# A headless run: AGL_NOTEBOOK_APPROVALS ------------------------------------------------------------------------


def setting_verdict(request: ApprovalRequest) -> Verdict | None:
    """What ``AGL_NOTEBOOK_APPROVALS`` decides for the call; None when it is not set.

    Raises:
        InputError: The file cannot be read or an entry is malformed (naming the file and the entry).
        NoDecisionError: The file has no entry for this tool and these arguments.
    """
    raw = _settings.APPROVALS.text()
    if not raw:
        return None
    if raw.lower() == "approve":
        return Approve()
    if raw.lower() == "deny":
        return Deny()
    path = Path(raw).expanduser()
    if not path.is_file():
        raise InputError(
            f"{SETTING}={raw!r}: expected approve, deny, or the path of a JSON file of decisions; no file is there "
            f"(relative paths start from the kernel's folder, {Path.cwd()})."
        )
    return _from_file(path, request)


def _from_file(path: Path, request: ApprovalRequest) -> Verdict:
    entries = read_json_file(path, kind="decisions file")
    if not isinstance(entries, list):
        raise InputError(f"{path}: a decisions file is a JSON list of {_ENTRY}.")
    wanted = canonical_json(request.arguments)
    exact: Verdict | None = None
    fallback: Verdict | None = None
    for i, entry in enumerate(entries):
        where = f"{path}, entry {i}"
        verdict, tool, arguments = _entry(entry, where)
        if tool != request.tool:
            continue
        if arguments is None:
            fallback = fallback or verdict
        elif canonical_json(arguments) == wanted and exact is None:
            exact = verdict
    found = exact or fallback
    if found is None:
        raise NoDecisionError(
            f"{path} ({SETTING}) has no decision for the call to tool {request.tool!r} with the arguments "
            f"{wanted}, so it was not run. Add an entry "
            f'{{"tool": "{request.tool}", "arguments": {wanted}, "decision": "approve"}} (or one without '
            '"arguments" for every call of the tool).'
        )
    return found


_ENTRY = (
    '{"tool": NAME, "arguments": {...} (leave out: every call of the tool), "decision": "approve" | "deny" | '
    '"edit", "message": TEXT (deny), "edited": {...} (edit)}'
)


def _entry(entry: object, where: str) -> tuple[Verdict, str, JsonObject | None]:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected an object {_ENTRY}.")
    unknown = sorted(set(entry) - {"tool", "arguments", "decision", "message", "edited"})
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown}; an entry is {_ENTRY}.")
    tool, arguments, decision = entry.get("tool"), entry.get("arguments"), entry.get("decision")
    if not isinstance(tool, str) or not tool:
        raise InputError(f"{where}: 'tool' must be the tool's name.")
    if arguments is not None and not isinstance(arguments, dict):
        raise InputError(f"{where}: 'arguments' must be an object (or left out for every call of {tool!r}).")
    if decision == "approve":
        verdict: Verdict = Approve()
    elif decision == "deny":
        message = entry.get("message", "")
        if not isinstance(message, str):
            raise InputError(f"{where}: 'message' must be a string.")
        verdict = Deny(message)
    elif decision == "edit":
        edited = entry.get("edited")
        if not isinstance(edited, dict):
            raise InputError(f"{where}: a decision 'edit' needs 'edited', the arguments to run with (an object).")
        verdict = Edit(edited)
    else:
        raise InputError(f"{where}: 'decision' must be 'approve', 'deny' or 'edit', not {decision!r}.")
    return verdict, tool, arguments
