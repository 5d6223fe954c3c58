"""What a map's and a comparison's results show in a cell is scrubbed of secrets, like every view."""

from __future__ import annotations

import pytest

from agl_notebook import Role, Run, ScriptedCall, ScriptedModel, ScriptedTurn, ToolResult, reporting_tool, tool
from tests.support.steps import Answer, Query

SECRET = "tok" + "-abcdef1234567890XYZ"


async def _fails(query: Query) -> ToolResult:
    raise RuntimeError(f"GET https://api.example/x?token={SECRET} failed")


ROLE: Role[Answer] = Role(
    name="looker",
    instructions="Look it up.",
    tools=[tool("look_up", "Look.", Query, _fails), reporting_tool("report_answer", "Report.", Answer)],
)


def _model() -> ScriptedModel:
    return ScriptedModel([ScriptedTurn(calls=[ScriptedCall("look_up", {"text": "a"})])])


async def test_map_and_compare_results_show_no_secret_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    run = Run(model=_model())
    results = await run.map(ROLE, [Query(f"q {SECRET}")])
    compared = await run.compare({"a": ROLE}, [Query(f"in {SECRET}")])
    shown = [repr(results), results._repr_html_(), repr(results[0]), repr(compared)]
    shown += list(compared._repr_mimebundle_().values())
    assert all(SECRET not in text for text in shown), [t for t in shown if SECRET in t]
    assert "failed" in repr(results)  # the failure is still told, its secret redacted
