"""`Run.step`: roles and factories, accepts, handler errors, wiping a failed step, concurrency."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import (
    Claude,
    InputError,
    Role,
    RoleIncompleteError,
    Run,
    ScriptedModel,
    ToolResult,
    describe,
    prompt_file,
    reporting_tool,
    role,
    tool,
)
from agl_notebook import events as ev
from agl_notebook.events import Event
from agl_notebook.transcript import Message, ToolResultBlock
from tests.support.paths import PROMPTS
from tests.support.steps import Boom, Query, Request, Review, look, report, types


@dataclass(frozen=True)
class Other:
    text: str = describe("Something else.")


@role(model=Claude.OPUS, accepts=(Request,))
def reviewer_role() -> Role[Review]:
    return Role(
        name="reviewer",
        instructions=prompt_file(PROMPTS / "review.md"),
        tools=[reporting_tool("report_review", "Report what you found.", Review)],
    )


reviewer = reviewer_role


# ---------------------------------------------------------------------------------------------------------------
# Run.step takes a Role or an uncalled factory


async def test_step_takes_a_called_role() -> None:
    model = ScriptedModel([{"calls": [report(["a"])]}])
    run = Run(model=model)
    review = await run.step(reviewer_role(), Request("check"))
    assert review == Review(["a"])
    request = model.requests[0]
    assert request.model == "claude-opus-5-5"
    assert request.role == "reviewer"
    assert request.system == (
        "Review the request and list every problem.\n\nWhen you have the result, hand it back "
        "by calling the `report_review` tool. Calling it ends your work on this step."
    )
    assert request.messages[0].text == 'Request:\n{\n  "text": "check"\n}'
    assert [t.name for t in request.tools] == ["report_review"]


async def test_step_takes_an_uncalled_factory_as_in_the_seed() -> None:
    run = Run(model=ScriptedModel([{"calls": [report(["b"])]}]))
    review = await run.step(reviewer, Request("check"))
    assert review == Review(["b"])


async def test_a_factory_whose_only_parameter_is_run_gets_the_run() -> None:
    seen: list[Run] = []

    @role(model=Claude.OPUS)
    def planner_role(run: Run) -> Role[Any]:
        async def ask(query: Query) -> ToolResult:
            seen.append(run)
            return ToolResult(text="ok")

        return Role("planner", "Plan.", [tool("ask", "Ask.", Query, ask)])

    @role(model=Claude.OPUS)
    def keyword_role(*, run: Run) -> Role[Any]:
        seen.append(run)
        return Role("keyword", "Plan.")

    model = ScriptedModel(
        {"planner": [{"calls": [{"name": "ask", "args": {"text": "q"}}]}, "done"], "keyword": ["done"]}
    )
    run = Run(model=model)
    assert await run.step(planner_role, "plan it") is None
    assert await run.step(planner_role(run), "plan it") is None
    assert await run.step(keyword_role, "plan it") is None
    assert seen == [run, run, run]


async def test_a_factory_needing_other_arguments_is_refused() -> None:
    @role(model=Claude.OPUS)
    def needs(topic: str, run: Run) -> Role[None]:
        return Role("needs", topic)

    run = Run(model=ScriptedModel(["x"]))
    with pytest.raises(InputError) as e:
        await run.step(needs, "go")
    assert str(e.value) == (
        f"{needs.function.__qualname__} needs arguments (topic, run): call it first, as run.step(needs(...), input)."
    )


async def test_step_refuses_what_is_not_a_role() -> None:
    def plain() -> Role[None]:
        return Role("plain", "Do it.")

    run = Run(model=ScriptedModel(["x"]))
    with pytest.raises(InputError) as e:
        await run.step(plain, "go")  # type: ignore[call-overload]
    assert str(e.value).startswith("run.step() takes a Role or a @role function, not <function ")


# ---------------------------------------------------------------------------------------------------------------
# accepts, inputs and models


async def test_accepts_refuses_other_input_types() -> None:
    model = ScriptedModel([{"calls": [report([])]}])
    run = Run(model=model)
    with pytest.raises(InputError) as e:
        await run.step(reviewer, Other("x"))
    assert str(e.value) == "Role 'reviewer' accepts Request, not Other."
    with pytest.raises(InputError) as e:
        await run.step(reviewer, "a string")
    assert str(e.value) == "Role 'reviewer' accepts Request, not str."
    assert model.calls == 0


async def test_without_accepts_a_step_takes_a_string_or_a_payload_only() -> None:
    role_: Role[Any] = Role("free", "Do it.", model=Claude.OPUS)
    run = Run(model=ScriptedModel(["ok"]))
    with pytest.raises(InputError) as e:
        await run.step(role_, 42)
    assert str(e.value) == "A step's input is a payload dataclass or a string, not int."
    assert await run.step(role_, Other("fine")) is None


async def test_run_model_overrides_every_roles_model() -> None:
    model = ScriptedModel(["ok"])
    events: list[Event] = []
    run = Run(model=model, on_event=events.append)
    await run.step(Role("r", "Do it.", model=Claude.HAIKU), "go")
    assert model.requests[0].model == "claude-haiku-5-5"
    assert events[0] == ev.StepStarted("r", "go", f"scripted:{model.digest}", label="go")


async def test_a_role_may_carry_its_own_model_backend() -> None:
    model = ScriptedModel(["ok"])
    run = Run()
    assert await run.step(Role("r", "Do it.", model=model), "go") is None
    assert len(model.requests) == 1
    assert model.requests[0].model == ""


async def test_a_role_without_any_model_is_an_input_error() -> None:
    with pytest.raises(InputError) as e:
        await Run(answers=[]).step(Role("r", "Do it."), "go")
    assert str(e.value) == (
        "Role 'r' has no model: give it one with @role(model=Claude.OPUS), or run it with "
        "Run(model=ScriptedModel(...))."
    )


def test_run_refuses_a_model_id_string() -> None:
    with pytest.raises(InputError) as e:
        Run(model="claude-opus-5-5")  # type: ignore[arg-type]
    assert str(e.value) == (
        "Run(model=...) takes a model backend such as ScriptedModel, not 'claude-opus-5-5'; to "
        "name a Claude model, use @role(model=Claude.OPUS)."
    )


def test_current_step_outside_a_step_is_an_input_error() -> None:
    with pytest.raises(InputError) as e:
        _ = Run(answers=[]).current_step
    assert str(e.value) == "run.current_step is only available inside a running step (in a tool's handler)."


# ---------------------------------------------------------------------------------------------------------------
# Handler errors stop the step, wipe its work, and are re-raised unchanged


class Work:
    """A role whose look_up handler registers undo work, writes a scratch file, then does what it is told."""

    def __init__(self, run_holder: list[Run], mode: str) -> None:
        self.run_holder = run_holder
        self.mode = mode
        self.undone: list[str] = []
        self.scratch: list[Path] = []
        self.error = Boom("the handler broke")
        self.started = asyncio.Event()

    async def __call__(self, query: Query) -> ToolResult:
        step = self.run_holder[0].current_step
        step.on_undo(lambda: self.undone.append(f"first {query.text}"))
        step.on_undo(lambda: self.undone.append(f"second {query.text}"))
        folder = step.scratch_dir()
        (folder / "draft.txt").write_text(query.text, encoding="utf-8")
        self.scratch.append(folder)
        if self.mode == "raise":
            raise self.error
        if self.mode == "hang":
            self.started.set()
            await asyncio.Event().wait()
        return ToolResult("ok")

    def role(self, name: str = "worker") -> Role[Review]:
        return Role(
            name,
            "Work.",
            [tool("look_up", "Look.", Query, self), reporting_tool("report_review", "Report.", Review)],
            model=Claude.OPUS,
        )


def make(mode: str, script: Any) -> tuple[Run, Work, list[Event]]:
    holder: list[Run] = []
    events: list[Event] = []
    run = Run(model=ScriptedModel(script), on_event=events.append)
    holder.append(run)
    return run, Work(holder, mode), events


async def test_a_handler_error_is_reraised_unchanged_and_the_work_is_wiped() -> None:
    run, work, events = make("raise", [{"calls": [look("a")]}, {"calls": [report([])]}])
    with pytest.raises(Boom) as e:
        await run.step(work.role(), "go")
    assert e.value is work.error
    assert work.undone == ["second a", "first a"]
    assert len(work.scratch) == 1
    assert not work.scratch[0].exists()
    assert run.outcomes == []
    assert types(events) == ["step.started", "client.tool.requested", "client.tool.executing", "step.failed"]
    assert events[-1] == ev.StepFailed("worker", "Boom", "the handler broke")


async def test_a_handler_error_in_a_role_is_not_turned_into_a_tool_result() -> None:
    run, work, events = make("raise", [{"calls": [look("a")]}, "never reached"])
    with pytest.raises(Boom):
        await run.step(work.role(), "go")
    assert "client.tool.result" not in types(events)
    assert len(run.model.requests) == 1  # type: ignore[union-attr]


async def test_role_incomplete_wipes_the_work() -> None:
    run, work, events = make("ok", [{"calls": [look("a")]}, "no report", "still no report"])
    with pytest.raises(RoleIncompleteError):
        await run.step(work.role(), "go")
    assert work.undone == ["second a", "first a"]
    assert not work.scratch[0].exists()
    assert run.outcomes == []
    assert events[-1].type == "step.failed"


async def test_cancellation_wipes_the_work() -> None:
    run, work, events = make("hang", [{"calls": [look("a")]}, {"calls": [report([])]}])
    task = asyncio.create_task(run.step(work.role(), "go"))
    await work.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert work.undone == ["second a", "first a"]
    assert not work.scratch[0].exists()
    assert run.outcomes == []
    assert events[-1] == ev.StepFailed("worker", "CancelledError", "")


async def test_a_successful_step_keeps_its_work() -> None:
    run, work, events = make("ok", [{"calls": [look("a")]}, {"calls": [report(["done"])]}])
    assert await run.step(work.role(), "go") == Review(["done"])
    assert work.undone == []
    assert (work.scratch[0] / "draft.txt").read_text(encoding="utf-8") == "a"
    shutil.rmtree(work.scratch[0])
    assert len(run.outcomes) == 1
    assert events[-1] == ev.StepFinished("worker", {"issues": ["done"]}, 2, False)


async def test_scratch_dir_works_for_any_role_name() -> None:
    folders: list[Path] = []
    run = Run(model=ScriptedModel([{"calls": [look("a")]}, "done"]))

    async def handler(query: Query) -> ToolResult:
        folders.append(run.current_step.scratch_dir())
        assert run.current_step.scratch_dir() == folders[0]  # one folder per step
        return ToolResult("ok")

    role_: Role[Any] = Role("review/plan: ü", "Work.", [tool("look_up", "Look.", Query, handler)], model=Claude.OPUS)
    assert await run.step(role_, "go") is None
    assert folders[0].is_dir()
    assert folders[0].name.startswith("agl-review_plan_")
    shutil.rmtree(folders[0])


async def test_an_undo_that_fails_does_not_hide_the_steps_error() -> None:
    run, work, _ = make("raise", [{"calls": [look("a")]}])

    def broken_undo() -> None:
        raise RuntimeError("undo broke")

    async def handler(query: Query) -> ToolResult:
        run.current_step.on_undo(lambda: work.undone.append("ran"))
        run.current_step.on_undo(broken_undo)
        raise work.error

    role_: Role[Any] = Role("worker", "Work.", [tool("look_up", "Look.", Query, handler)], model=Claude.OPUS)
    with pytest.raises(Boom) as e:
        await run.step(role_, "go")
    assert e.value is work.error
    assert work.undone == ["ran"]


# ---------------------------------------------------------------------------------------------------------------
# Concurrent steps


def _concurrent_script() -> dict[str, list[Any]]:
    return {
        f"worker{i}": [{"calls": [look(f"{i}-1")]}, {"calls": [look(f"{i}-2")]}, {"calls": [report([f"r{i}"])]}]
        for i in range(3)
    }


async def _gather_run() -> tuple[list[Any], list[Event], list[tuple[str, str]], Run]:
    events: list[Event] = []
    seen: list[tuple[str, str]] = []
    run = Run(model=ScriptedModel(_concurrent_script()), on_event=events.append)

    async def handler(query: Query) -> ToolResult:
        step = run.current_step
        await asyncio.sleep(0)
        assert run.current_step is step
        seen.append((step.role, query.text))
        return ToolResult(f"{step.role} saw {query.text}")

    roles: list[Role[Any]] = [
        Role(
            f"worker{i}",
            "Work.",
            [tool("look_up", "Look.", Query, handler), reporting_tool("report_review", "Report.", Review)],
            model=Claude.OPUS,
        )
        for i in range(3)
    ]
    results = list(await asyncio.gather(*(run.step(r, f"input {i}") for i, r in enumerate(roles))))
    return results, events, seen, run


def result_text(message: Message) -> str:
    """The text of the tool result a user message opens with."""
    block = message.content[0]
    assert isinstance(block, ToolResultBlock), block
    return block.content


async def test_concurrent_steps_are_correct_and_deterministic() -> None:
    results, events, seen, run = await _gather_run()
    assert results == [Review(["r0"]), Review(["r1"]), Review(["r2"])]
    assert sorted(seen) == [(f"worker{i}", f"{i}-{j}") for i in range(3) for j in (1, 2)]
    for role_name, text in seen:
        assert text.startswith(role_name[-1])
    assert len(run.outcomes) == 3
    for outcome in run.outcomes:
        name = outcome.transcript[0].text[-1]
        tool_texts = [
            result_text(m) for m in outcome.transcript if m.role == "user" and m is not outcome.transcript[0]
        ][:2]
        assert tool_texts == [f"worker{name} saw {name}-1", f"worker{name} saw {name}-2"]
    again = await _gather_run()
    assert again[0] == results
    assert again[1] == events
    assert again[2] == seen
    assert types(events).count("step.started") == 3
    assert types(events).count("step.finished") == 3


async def test_a_failing_concurrent_step_wipes_only_its_own_work() -> None:
    events: list[Event] = []
    undone: list[str] = []
    run = Run(
        model=ScriptedModel(
            {"good": [{"calls": [look("g")]}, {"calls": [report([])]}], "bad": [{"calls": [look("b")]}]}
        ),
        on_event=events.append,
    )

    async def handler(query: Query) -> ToolResult:
        run.current_step.on_undo(lambda: undone.append(query.text))
        await asyncio.sleep(0)
        if query.text == "b":
            raise Boom("bad")
        return ToolResult("ok")

    def make_role(name: str) -> Role[Review]:
        return Role(
            name,
            "Work.",
            [tool("look_up", "Look.", Query, handler), reporting_tool("report_review", "Report.", Review)],
            model=Claude.OPUS,
        )

    outcomes = await asyncio.gather(
        run.step(make_role("good"), "go"), run.step(make_role("bad"), "go"), return_exceptions=True
    )
    assert outcomes[0] == Review([])
    assert isinstance(outcomes[1], Boom)
    assert undone == ["b"]
    assert [e.role for e in events if isinstance(e, ev.StepFailed)] == ["bad"]
    assert [e.role for e in events if isinstance(e, ev.StepFinished)] == ["good"]
    assert len(run.outcomes) == 1


# ---------------------------------------------------------------------------------------------------------------
# A step that replays runs no agent, so its tools aren't called and their questions aren't asked again


async def test_a_replayed_step_runs_no_agent_calls_no_tool_and_asks_nothing() -> None:
    from agl_notebook.replay.stores import MemoryStore
    from agl_notebook.screens import Screen, TextInput

    def asking(text: str) -> Screen[str]:
        return Screen(text, [TextInput("Answer", str)])

    handled: list[str] = []

    @role(model=Claude.OPUS, accepts=(Request,))
    def planner_role(run: Run) -> Role[Review]:
        async def ask(query: Query) -> ToolResult:
            handled.append(query.text)
            return ToolResult(text=await run.terminal.show(asking, text=query.text))

        return Role(
            "planner",
            "Plan.",
            [tool("ask", "Ask a question.", Query, ask), reporting_tool("report_review", "Report.", Review)],
        )

    def script() -> list[Any]:
        return [{"calls": [{"name": "ask", "args": {"text": "Which?"}}]}, {"calls": [report(["sqlite"])]}]

    store = MemoryStore()
    live_events: list[Event] = []
    live_model = ScriptedModel(script())
    live = Run(model=live_model, answers=["sqlite"], store=store, mode="auto", on_event=live_events.append)
    assert await live.step(planner_role(live), Request("storage")) == Review(["sqlite"])
    assert (live_model.calls, handled) == (2, ["Which?"])

    replay_events: list[Event] = []
    replay_model = ScriptedModel(script())
    again = Run(model=replay_model, answers=[], store=store, mode="replay", on_event=replay_events.append)
    assert await again.step(planner_role(again), Request("storage")) == Review(["sqlite"])
    assert replay_model.calls == 0
    assert handled == ["Which?"]  # the tool was not called again, and its question (no answers left) not asked
    assert types(replay_events)[:2] == ["step.started", "step.replayed"]
    assert [e for e in replay_events if not isinstance(e, ev.StepReplayed)] == live_events


# ---------------------------------------------------------------------------------------------------------------
# The Run's history is bounded; a step's own outcome comes back from step_outcome


async def test_the_runs_history_keeps_only_the_latest_outcomes(monkeypatch: pytest.MonkeyPatch) -> None:
    import agl_notebook.run as run_module

    monkeypatch.setattr(run_module, "HISTORY", 2)
    run = Run(model=ScriptedModel([{"calls": [report(["a"])]}]), mode="off")
    outcomes = [await run.step_outcome(reviewer_role(), Request(f"check {i}")) for i in range(3)]
    assert len(run.outcomes) == 2
    assert run.outcomes[0] is outcomes[1] and run.outcomes[1] is outcomes[2]


async def test_step_outcome_returns_the_steps_own_outcome_and_events() -> None:
    run_events: list[Event] = []
    own: list[Event] = []
    run = Run(model=ScriptedModel([{"calls": [report(["a"])]}]), on_event=run_events.append)
    outcome = await run.step_outcome(reviewer_role(), Request("check"), on_event=own.append)
    assert outcome.result == Review(["a"]) and outcome.requests == 1
    assert outcome is run.outcomes[-1]
    assert own == run_events and types(own)[0] == "step.started" and types(own)[-1] == "step.finished"
