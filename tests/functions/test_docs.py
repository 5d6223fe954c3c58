"""Every example of docs/functions.md loads and runs, and gives the result the comment above it says."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agl_notebook import Run, ScriptedModel
from agl_notebook.functions import AgentInvalidError, load_agent
from tests.support.functions_server import OrdersServer, serve
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "functions.md"
_BLOCK = re.compile(r"(?:<!-- check: (?P<check>.*?) -->\n)?```json\n(?P<agent>.*?)```", re.DOTALL)


def examples(text: str) -> list[tuple[str, dict[str, Any], str]]:
    """Each JSON example as (its heading, its check, its agent text); an example without a check is an error."""
    found = []
    for match in _BLOCK.finditer(text):
        heading = re.findall(r"^#+ (.+)$", text[: match.start()], re.MULTILINE)[-1]
        if match.group("check") is None:
            raise AssertionError(f"the example under {heading!r} has no <!-- check: {{...}} --> comment above it")
        found.append((heading, json.loads(match.group("check")), match.group("agent")))
    return found


EXAMPLES = examples(DOC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server() -> Iterator[OrdersServer]:
    yield from serve()


def test_the_reference_has_an_example_for_every_command() -> None:
    assert len(EXAMPLES) >= 9
    shown = " ".join(agent for _, _, agent in EXAMPLES)
    for command in ("set", "log", "return", "end", "func", "ask", "api", "llm", "if", "loop", "onError"):
        assert f'"{command}":' in shown, command


async def run_example(check: dict[str, Any], agent: str, server: OrdersServer) -> None:
    """Load and run one example as its check says, and compare its result."""
    unknown = set(check) - {"call", "args", "replies", "answers", "environ", "server", "result"}
    assert not unknown, f"unknown check fields {unknown}"
    profiles = None
    if check.get("server"):  # every profile is sent to the local server instead of the example's address
        profiles = {name: {"baseUrl": server.base_url} for name in json.loads(agent).get("profiles", {})}
    loaded = load_agent(agent, profiles=profiles, environ=check.get("environ", {}))
    run = Run(model=ScriptedModel(check.get("replies", [])), answers=check.get("answers"))
    result = await loaded.call(check.get("call", "main"), check.get("args", {}), run=run)
    assert result == check["result"], f"the example gave {result!r}"


@pytest.mark.parametrize(("heading", "check", "agent"), EXAMPLES, ids=[h for h, _, _ in EXAMPLES])
async def test_each_example_runs_and_gives_its_result(
    heading: str, check: dict[str, Any], agent: str, server: OrdersServer
) -> None:
    await run_example(check, agent, server)


async def test_a_broken_example_fails(server: OrdersServer) -> None:
    def only(markdown: str) -> tuple[dict[str, Any], str]:
        ((_, check, agent),) = examples("## An example\n" + markdown)
        return check, agent

    invalid = only('<!-- check: {"result": 1} -->\n```json\n{"functions": {"main": {"commands": {"retrun": 1}}}}\n```')
    with pytest.raises(AgentInvalidError, match="unknown command 'retrun'"):
        await run_example(*invalid, server)
    wrong = only('<!-- check: {"result": 2} -->\n```json\n{"functions": {"main": {"commands": {"return": 1}}}}\n```')
    with pytest.raises(AssertionError, match="the example gave 1"):
        await run_example(*wrong, server)
    with pytest.raises(AssertionError, match="has no <!-- check"):
        examples("## An example\n```json\n{}\n```")
