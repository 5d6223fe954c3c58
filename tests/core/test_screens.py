"""Questions: screens, inputs and their validation, `run.terminal.show`, scripted answers (docs/questions.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import (
    ChoiceInput,
    Claude,
    ConfirmInput,
    InputError,
    NumberInput,
    Role,
    Run,
    Screen,
    ScriptedModel,
    TextInput,
    ToolResult,
    describe,
    reporting_tool,
    role,
    tool,
)
from agl_notebook import events as ev
from agl_notebook.errors import NoAnswerError
from agl_notebook.events import Event
from agl_notebook.terminals import ScriptedTerminal


@dataclass(frozen=True)
class Question:
    text: str = describe("The question to ask.")


@dataclass(frozen=True)
class Plan:
    steps: list[str] = describe("The steps of the plan.")


def asking(text: str) -> Screen[str]:
    return Screen(text, [TextInput("Answer", str)])


def sizing(text: str) -> Screen[tuple[str, int, str, bool]]:
    return Screen(
        text,
        [
            TextInput("Name"),
            NumberInput("Count", int, min=1, max=10),
            ChoiceInput("Colour", ["red", "green"]),
            ConfirmInput("Sure"),
        ],
    )


# ---------------------------------------------------------------------------------------------------------------
# Inputs


def test_text_input_validation() -> None:
    text = TextInput("Answer", str)
    assert text.validate("hello") == "hello"
    assert text.parse("  hello  ") == "hello"
    assert TextInput("Notes", multiline=True).parse("  two\nlines  ") == "  two\nlines  "
    with pytest.raises(InputError) as e:
        text.validate("   ")
    assert str(e.value) == "Answer: the answer is empty."
    with pytest.raises(InputError) as e:
        text.validate(3)
    assert str(e.value) == "Answer: expected text, got 3."
    age = TextInput("Age", int)
    assert age.parse(" 42 ") == 42
    assert age.validate(42.0) == 42
    with pytest.raises(InputError) as e:
        age.parse("forty")
    assert str(e.value) == "Age: type a whole number."
    with pytest.raises(InputError) as e:
        age.validate(True)
    assert str(e.value) == "Age: expected a number, got True."
    assert TextInput("Weight", float).parse("2.5") == 2.5
    with pytest.raises(InputError) as e:
        TextInput("Bad", list)  # type: ignore[arg-type]
    assert str(e.value) == "TextInput 'Bad': type must be str, int or float, not <class 'list'>."
    with pytest.raises(InputError) as e:
        TextInput("  ")
    assert str(e.value) == "An input needs a non-empty label, not '  '."


def test_number_input_validation() -> None:
    count = NumberInput("Count", int, min=1, max=10)
    assert count.validate(3) == 3
    assert count.validate(4.0) == 4
    assert type(count.validate(4.0)) is int
    assert count.parse(" 7 ") == 7
    for value, message in [
        (0, "Count: 0 is below the minimum 1; type a whole number from 1 to 10."),
        (11, "Count: 11 is above the maximum 10; type a whole number from 1 to 10."),
        (2.5, "Count: expected a whole number, got 2.5."),
        (True, "Count: expected a number, got True."),
        ("3", "Count: expected a number, got '3'."),
        (float("nan"), "Count: expected a finite number."),
    ]:
        with pytest.raises(InputError) as e:
            count.validate(value)
        assert str(e.value) == message
    with pytest.raises(InputError) as e:
        count.parse("2.5")
    assert str(e.value) == "Count: type a whole number from 1 to 10."
    ratio = NumberInput("Ratio", float, min=0, max=1.5)
    assert ratio.validate(1) == 1.0
    assert type(ratio.validate(1)) is float
    with pytest.raises(InputError) as e:
        ratio.validate(2)
    assert str(e.value) == "Ratio: 2.0 is above the maximum 1.5; type a number from 0 to 1.5."
    with pytest.raises(InputError) as e:
        NumberInput("Range", int, min=5, max=1)
    assert str(e.value) == "NumberInput 'Range': min 5 is above max 1."


def test_a_typed_number_out_of_range_is_told_the_range_not_to_type_a_number() -> None:
    attendees = NumberInput("Attendees", int, min=1, max=20)
    for typed, message in [
        ("50", "Attendees: 50 is above the maximum 20; type a whole number from 1 to 20."),
        (" 0 ", "Attendees: 0 is below the minimum 1; type a whole number from 1 to 20."),
        ("fifty", "Attendees: type a whole number from 1 to 20."),
    ]:
        with pytest.raises(InputError) as e:
            attendees.parse(typed)
        assert str(e.value) == message
    assert attendees.parse("7") == 7
    with pytest.raises(InputError) as e:
        NumberInput("Budget", float, min=0).parse("-1")
    assert str(e.value) == "Budget: -1.0 is below the minimum 0."
    with pytest.raises(InputError) as e:
        NumberInput("Budget", float, min=0).parse("much")
    assert str(e.value) == "Budget: type a number of at least 0."
    with pytest.raises(InputError) as e:
        TextInput("Weight", float).parse("inf")
    assert str(e.value) == "Weight: expected a finite number."
    assert [
        NumberInput("N", min=1, max=20).range_text(),
        NumberInput("N", min=1).range_text(),
        NumberInput("N", float, max=2.5).range_text(),
        NumberInput("N").range_text(),
    ] == ["1\u201320", "\u2265 1", "\u2264 2.5", ""]
    assert NumberInput("N", max=3).expected() == "a whole number of at most 3"
    assert TextInput("T", int).expected() == "a whole number" and TextInput("T").expected() == ""


def test_choice_input_validation() -> None:
    colour = ChoiceInput("Colour", ["red", "green"])
    assert colour.options == ("red", "green")
    assert colour.validate("green") == "green"
    assert colour.parse("2") == "green"
    assert colour.parse(" red ") == "red"
    with pytest.raises(InputError) as e:
        colour.validate("blue")
    assert str(e.value) == "Colour: choose one of red, green; 'blue' is not one."
    with pytest.raises(InputError) as e:
        colour.parse("3")
    assert str(e.value) == "Colour: choose one of red, green; '3' is not one."
    with pytest.raises(InputError) as e:
        ChoiceInput("Empty", [])
    assert str(e.value) == "ChoiceInput 'Empty': options must be a non-empty list of non-empty strings."
    with pytest.raises(InputError) as e:
        ChoiceInput("Twice", ["a", "a"])
    assert str(e.value) == "ChoiceInput 'Twice': options must be distinct."


def test_confirm_input_validation() -> None:
    sure = ConfirmInput("Sure")
    assert [sure.parse(t) for t in ("y", "YES", " true ", "1", "n", "No", "false", "0")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert sure.validate(False) is False
    with pytest.raises(InputError) as e:
        sure.parse("maybe")
    assert str(e.value) == "Sure: answer yes or no."
    with pytest.raises(InputError) as e:
        sure.validate(1)
    assert str(e.value) == "Sure: expected yes or no (a bool), got 1."


def test_screen_validation() -> None:
    with pytest.raises(InputError) as e:
        Screen("  ", [TextInput("A")])
    assert str(e.value) == "Screen needs text: what the person reads."
    with pytest.raises(InputError) as e:
        Screen("Q?", [])
    assert str(e.value) == "Screen 'Q?' needs at least one input."
    with pytest.raises(InputError) as e:
        Screen("Q?", [TextInput("A"), ConfirmInput("A")])
    assert str(e.value) == "Screen 'Q?': input labels must be distinct."
    with pytest.raises(InputError) as e:
        Screen("Q?", ["A"])  # type: ignore[list-item]
    assert str(e.value) == "Screen 'Q?': 'A' is not an input."
    screen = sizing("How?")
    assert screen.validate(["box", 3, "red", True]) == ("box", 3, "red", True)
    with pytest.raises(InputError) as e:
        screen.validate(["box"])
    assert str(e.value) == "Screen 'How?' has 4 input(s), got 1 answer(s)."
    assert asking("Q?").validate(["yes"]) == "yes"


# ---------------------------------------------------------------------------------------------------------------
# show: one value, or a tuple


async def test_show_returns_the_value_for_one_input_and_a_tuple_for_several() -> None:
    run = Run(answers=["blue", ("box", 3.0, "green", False)])
    one = await run.terminal.show(asking, text="Which colour?")
    several = await run.terminal.show(sizing, text="How big?")
    assert one == "blue"
    assert several == ("box", 3, "green", False)
    assert type(several[1]) is int


async def test_answers_list_is_used_in_order_and_runs_out() -> None:
    run = Run(answers=["first", "second"])
    assert [await run.terminal.show(asking, text="Q?") for _ in range(2)] == ["first", "second"]
    with pytest.raises(NoAnswerError) as e:
        await run.terminal.show(asking, text="Third?")
    assert str(e.value) == "No scripted answer left for 'Third?' (2 were used)."


async def test_answers_callable_gets_the_screen() -> None:
    seen: list[Screen[Any]] = []

    def answer(screen: Screen[Any]) -> object:
        seen.append(screen)
        return f"answer to {screen.text}" if len(screen.inputs) == 1 else ["n", 2, "red", True]

    run = Run(answers=answer)
    assert await run.terminal.show(asking, text="Why?") == "answer to Why?"
    assert await run.terminal.show(sizing, text="How?") == ("n", 2, "red", True)
    assert [s.text for s in seen] == ["Why?", "How?"]
    assert seen[0] == asking("Why?")


async def test_scripted_answers_are_validated_like_typed_ones() -> None:
    run = Run(answers=[("box", 30, "red", True), ""])
    with pytest.raises(InputError) as e:
        await run.terminal.show(sizing, text="How?")
    assert str(e.value) == "Count: 30 is above the maximum 10; type a whole number from 1 to 10."
    with pytest.raises(InputError) as e:
        await run.terminal.show(asking, text="Q?")
    assert str(e.value) == "Answer: the answer is empty."


async def test_show_refuses_a_screen_function_not_returning_a_screen() -> None:
    def not_a_screen(text: str) -> str:
        return text

    run = Run(answers=["x"])
    with pytest.raises(InputError) as e:
        await run.terminal.show(not_a_screen, text="Q?")  # type: ignore[arg-type]
    assert str(e.value) == f"{not_a_screen.__qualname__!r} must return a Screen, not str."


@pytest.mark.parametrize("scripted", [{"answers": ["x"]}, {"approvals": "approve"}])
def test_run_takes_answers_or_a_terminal_not_both(scripted: dict[str, Any]) -> None:
    with pytest.raises(InputError) as e:
        Run(**scripted, terminal=ScriptedTerminal(["y"]))
    assert str(e.value) == "Run takes answers and approvals, or a terminal, not both."


# ---------------------------------------------------------------------------------------------------------------
# Questions inside a step (the seed's planner)


@role(model=Claude.OPUS)
def planner_role(run: Run) -> Role[Plan]:
    async def ask(question: Question) -> ToolResult:
        answer = await run.terminal.show(asking, text=question.text)
        return ToolResult(text=answer)

    return Role(
        name="planner",
        instructions="Plan the work; ask when unsure.",
        tools=[
            tool("ask", "Ask a question in the terminal.", Question, ask),
            reporting_tool("report_plan", "Report the plan.", Plan),
        ],
    )


async def test_a_tool_asks_a_question_while_the_agent_waits_in_the_same_step() -> None:
    model = ScriptedModel(
        [
            {"calls": [{"name": "ask", "args": {"text": "Which database?"}}]},
            {"calls": [{"name": "report_plan", "args": {"steps": ["use sqlite"]}}]},
        ]
    )
    events: list[Event] = []
    run = Run(model=model, answers=["sqlite"], on_event=events.append)
    plan = await run.step(planner_role(run), "Plan the storage.")
    assert plan == Plan(["use sqlite"])
    assert [e.type for e in events if not isinstance(e, ev.OutputTextDelta)] == [
        "step.started",
        "client.tool.requested",
        "client.tool.executing",
        "question.asked",
        "question.answered",
        "client.tool.result",
        "client.tool.roundtrip",
        "client.tool.requested",
        "step.reported",
        "client.tool.result",
        "step.finished",
    ]
    assert [e for e in events if isinstance(e, ev.QuestionAsked | ev.QuestionAnswered)] == [
        ev.QuestionAsked("Which database?", ("Answer",)),
        ev.QuestionAnswered("Which database?", "sqlite"),
    ]
    assert next(e for e in events if isinstance(e, ev.ClientToolResult)).result == "sqlite"
    assert len(model.requests) == 2


async def test_question_events_for_a_screen_of_several_inputs() -> None:
    events: list[Event] = []
    recorded: list[Any] = []
    run = Run(
        model=ScriptedModel([{"calls": [{"name": "size", "args": {"text": "How big?"}}]}, "done"]),
        answers=[["box", 2, "green", True]],
        on_event=events.append,
    )

    async def size(question: Question) -> ToolResult:
        answer = await run.terminal.show(sizing, text=question.text)
        recorded.extend(run.current_step.questions)
        return ToolResult(text=repr(answer))

    await run.step(Role("sizer", "Size it.", [tool("size", "Size.", Question, size)], model=Claude.OPUS), "go")
    assert [e for e in events if isinstance(e, ev.QuestionAsked | ev.QuestionAnswered)] == [
        ev.QuestionAsked("How big?", ("Name", "Count", "Colour", "Sure")),
        ev.QuestionAnswered("How big?", ["box", 2, "green", True]),
    ]
    assert [(q.text, q.inputs, q.answer) for q in recorded] == [
        ("How big?", ("Name", "Count", "Colour", "Sure"), ["box", 2, "green", True])
    ]
    assert next(e for e in events if isinstance(e, ev.ClientToolResult)).result == "('box', 2, 'green', True)"


async def test_an_invalid_scripted_answer_inside_a_step_fails_the_step() -> None:
    events: list[Event] = []
    model = ScriptedModel([{"calls": [{"name": "ask", "args": {"text": "Which?"}}]}, "never"])
    run = Run(model=model, answers=[3], on_event=events.append)
    with pytest.raises(InputError) as e:
        await run.step(planner_role(run), "go")
    assert str(e.value) == "Answer: expected text, got 3."
    assert [e.type for e in events][-2:] == ["question.asked", "step.failed"]
    assert len(model.requests) == 1
