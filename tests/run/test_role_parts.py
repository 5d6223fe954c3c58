"""A role's shared plan (system text, tool specs, reporting tool, settings) is worked out once per Role object."""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass

from agl_notebook import Role, Run, ScriptedCall, ScriptedModel, ScriptedTurn, ToolResult, reporting_tool, tool
from agl_notebook.run._step import _ROLE_PARTS, _role_parts, system_text


@dataclass(frozen=True)
class Query:
    """What to look up."""

    topic: str


@dataclass(frozen=True)
class Found:
    """What was found."""

    summary: str


async def look(payload: Query) -> ToolResult:
    return ToolResult(f"about {payload.topic}")


def make_role(instructions: str, *, max_tokens: int = 4096) -> Role[Found]:
    return Role(
        name="looker",
        instructions=instructions,
        tools=[tool("look", "Look a topic up.", Query, look), reporting_tool("report", "Report it.", Found)],
        max_tokens=max_tokens,
    )


def test_the_same_role_is_planned_once() -> None:
    role = make_role("Look things up.")
    assert _role_parts(role) is _role_parts(role)


def test_an_entry_left_by_a_dead_role_at_a_reused_id_is_not_taken() -> None:
    # A role that died leaves its entry; a new role may get its id. Planted here with another (live) role's parts,
    # the new role must be planned from its own fields.
    other, role = make_role("Say only yes."), make_role("Look things up.")
    _ROLE_PARTS[id(role)] = (weakref.ref(other), _role_parts(other))
    parts = _role_parts(role)
    assert parts.system == system_text(role) != system_text(other)
    assert _ROLE_PARTS[id(role)][0]() is role


def test_roles_that_differ_are_fingerprinted_apart_and_each_replays() -> None:
    """Two roles alike but for their instructions or a setting: each step records and replays as its own."""

    def model() -> ScriptedModel:
        return ScriptedModel(
            [
                ScriptedTurn(calls=[ScriptedCall("look", {"topic": "a"})]),
                ScriptedTurn(calls=[ScriptedCall("report", {"summary": "done"})]),
            ]
        )

    roles = [make_role("Look things up."), make_role("Look things up, briefly."), make_role("Look.", max_tokens=99)]
    run = Run(model=model())
    ids = []
    for role in roles:
        run.model = model()
        asyncio.run(run.step(role, "retries"))
        ids.append(run.store.records()[-1].id)
    assert len(set(ids)) == 3
    records = run.store.records()
    assert records[0].parts["instructions"] != records[1].parts["instructions"]
    assert records[0].parts["settings"] != records[2].parts["settings"]
    for role in roles:  # each replays from its own record, no model asked
        assert asyncio.run(Run(model=model(), store=run.store, mode="replay").step(role, "retries")) == Found("done")
