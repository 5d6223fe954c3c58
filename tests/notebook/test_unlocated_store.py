"""The engine's side of "never live on a guess", through its seam: a store that cannot tell where its records are.

The real proof runs the runners (tests/cli/test_headless_runners.py: nbconvert, ``jupyter execute`` and papermill
beside copies of the notebook, counting the requests a loopback server gets). Here the notebook's store is stood in
for by a `MemoryStore` that says why it is unlocated, as `NotebookStore` does in a headless kernel.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.errors import ModelCallBlockedError, ReplayMissError
from agl_notebook.replay.stores import LocatedStore, MemoryStore

WHY = "This kernel cannot tell which notebook it runs: 2 notebooks in /nbs hold its code (a.ipynb, a-Copy1.ipynb)."


@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")


ROLE: Role[Answer] = Role(
    name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)]
)
REPLY = [{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}]


class Unlocated(MemoryStore):
    def unlocated(self) -> str | None:
        return WHY


class NetworkModel(ScriptedModel):
    """A scripted model that declares it reaches the network, as the Anthropic backend does."""

    network = True


def test_the_notebooks_store_is_a_located_store() -> None:
    from agl_notebook.notebook.store import NotebookMapStore, NotebookStore

    assert issubclass(NotebookStore, LocatedStore) and issubclass(NotebookMapStore, LocatedStore)


def test_a_model_on_the_network_is_not_called_live_on_a_guess() -> None:
    model = NetworkModel(REPLY)
    run = Run(model=model, store=Unlocated())

    with pytest.raises(ModelCallBlockedError) as caught:
        asyncio.run(run.step(ROLE, "What is six times seven?"))

    assert model.calls == 0
    assert "A step of role 'oracle' would call a model; a headless run refuses to" in str(caught.value)
    assert WHY in str(caught.value)


def test_in_mode_replay_the_miss_says_why_nothing_was_read() -> None:
    with pytest.raises(ReplayMissError) as caught:
        asyncio.run(Run(model=NetworkModel(REPLY), store=Unlocated(), mode="replay").step(ROLE, "Why?"))

    assert WHY in str(caught.value)


def test_what_reaches_no_network_runs_and_what_this_session_recorded_replays() -> None:
    scripted = ScriptedModel(REPLY)
    store = Unlocated()
    assert asyncio.run(Run(model=scripted, store=store).step(ROLE, "Six times seven?")).text == "forty-two"
    assert scripted.calls == 1
    model = NetworkModel(REPLY)
    assert asyncio.run(Run(model=model, store=store, mode="refresh").step(ROLE, "Again?")).text == "forty-two"
    assert model.calls == 1  # asked for live (mode refresh): no guess
    assert asyncio.run(Run(model=model, store=store).step(ROLE, "Again?")).text == "forty-two"
    assert model.calls == 1  # its own record replays
