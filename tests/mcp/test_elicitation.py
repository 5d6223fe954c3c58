"""A server's request for input (MCP elicitation, form mode) as a question of the step: accepted, declined and
cancelled, its fields checked as the requested schema says, recorded with the call and told again on replay with the
server absent, the call's timeout paused while the person answers, a map's items each asked their own (a real server
built with the `mcp` package, tests/support/mcp_servers.py)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, ClassVar

import pytest

from agl_notebook import MCPServer, Run, ScriptedCall, ScriptedModel, ScriptedTurn
from agl_notebook._map_scope import current_map_item
from agl_notebook.errors import InputError
from agl_notebook.events import Event, QuestionAnswered, QuestionAsked
from agl_notebook.mcp import _sessions
from agl_notebook.mcp.elicitation import UnsupportedRequest, elicitation
from agl_notebook.replay.records import StepRecord, record_from_json
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.screens import Screen
from agl_notebook.terminals import Terminal
from agl_notebook.transcript import ToolResultBlock

from .conftest import fault_server, gone, role

ACCEPTED = ["Accept", "ada@example.org", 3, "Double room", True, ""]
QUESTION = "Book a room?\n- Email: Where to send it.\n(asked by the MCP server 'faults' during the call to ask)"


def script(tool: str = "ask") -> ScriptedModel:
    return ScriptedModel(
        [ScriptedTurn(calls=[ScriptedCall(tool, {})]), ScriptedTurn(calls=[ScriptedCall("report", {"text": "ok"})])]
    )


def results(record: StepRecord) -> list[tuple[str, bool]]:
    return [(b.content, b.is_error) for m in record.transcript for b in m.content if isinstance(b, ToolResultBlock)]


async def step(server: MCPServer, answers: Any, tool: str = "ask", **run: Any) -> tuple[StepRecord, list[Event]]:
    store, events = MemoryStore(), list[Event]()
    await Run(model=script(tool), store=store, answers=answers, on_event=events.append, **run).step(role(server), "go")
    (record,) = store.records()
    return record_from_json(json.loads(json.dumps(record.to_json()))), events


async def test_an_accepted_form_sends_the_fields_as_the_schema_types_them_and_is_recorded_with_its_call(
    tag: str,
) -> None:
    record, events = await step(fault_server(tag), [ACCEPTED])
    said, error = results(record)[0]
    assert not error
    # The choice's title goes back as its value; the optional note left empty is left out.
    assert said == 'accept: {"breakfast": true, "email": "ada@example.org", "nights": 3, "room": "double"}'
    (question,) = record.questions
    assert question.tool_call_id == record.transcript[1].tool_uses[0].id
    assert question.text == QUESTION
    assert question.inputs == ("Response", "Email (an email address)", "Nights", "room", "Breakfast", "Note, optional")
    assert question.answer == [*ACCEPTED[:-1], None]  # the empty optional note, as None
    assert [type(e).__name__ for e in events if isinstance(e, QuestionAsked | QuestionAnswered)] == [
        "QuestionAsked",
        "QuestionAnswered",
    ]
    await _sessions.close_loop()
    assert await gone(tag) == []


@pytest.mark.parametrize("action", ["Decline", "Cancel"])
async def test_declined_and_cancelled_send_no_content(tag: str, action: str) -> None:
    record, _ = await step(fault_server(tag), [[action]])
    assert results(record)[0] == (f"{action.lower()}: null", False)
    assert record.questions[0].answer == [action, None, None, None, None, None]
    await _sessions.close_loop()


async def test_a_replay_tells_the_question_again_with_the_server_absent(
    tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    await Run(model=script(), store=store, answers=[ACCEPTED]).step(role(fault_server(tag)), "go")
    await _sessions.close_loop()
    assert await gone(tag) == []
    opened: list[str] = []
    monkeypatch.setattr(_sessions.Connection, "__init__", lambda self, *a: opened.append("x"))
    absent = MCPServer.stdio("faults", "/nonexistent/agl-notebook-faults")
    events: list[Event] = []
    await Run(model=script(), store=store, mode="replay", on_event=events.append).step(role(absent), "go")
    assert opened == []  # no session: everything came from the record
    told = [(e.text, e.answer) for e in events if isinstance(e, QuestionAnswered)]
    assert told == [(QUESTION, [*ACCEPTED[:-1], None])]


async def test_answers_are_checked_as_the_schema_says(tag: str) -> None:
    wrong = [
        (["Accept", "not an address", 3, "Double room", True, ""], "Email (an email address): type an email address"),
        (["Accept", "ada@example.org", 15, "Double room", True, ""], "Nights: 15 is above the maximum 14"),
        (["Accept", "ada@example.org", 3, "Suite", True, ""], "room: choose one of Single room, Double room"),
        (["Accept", "ada@example.org", 3, "Double room", True, "x" * 41], "Note, optional: at most 40 characters"),
    ]
    for answer, message in wrong:
        with pytest.raises(InputError, match=re.escape(message)):
            await step(fault_server(tag), [answer])
    await _sessions.close_loop()


class SlowPerson(Terminal):
    """Takes ``seconds`` to answer, longer than the server's call timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def ask(self, screen: Screen[Any]) -> Any:
        await asyncio.sleep(self.seconds)
        return screen.validate(["Decline"])


async def test_the_call_timeout_is_paused_while_the_person_answers(tag: str) -> None:
    store = MemoryStore()
    server = fault_server(tag, call_timeout=0.4)
    await Run(model=script(), store=store, terminal=SlowPerson(1.2)).step(role(server), "go")
    (record,) = store.records()
    assert results(record)[0] == ("decline: null", False)
    await _sessions.close_loop()
    assert await gone(tag) == []


async def test_url_mode_and_a_form_that_cannot_be_drawn_are_refused_to_the_server(tag: str) -> None:
    server = fault_server(tag)
    record, _ = await step(server, [], tool="ask_url")
    said, error = results(record)[0]
    assert error and "elicitation failed" in said  # the client declares form mode only
    record, _ = await step(server, [], tool="ask_array")
    said, error = results(record)[0]
    assert error and "no multi-select" in said and record.questions == ()
    await _sessions.close_loop()


async def test_a_map_item_answers_its_own_question(tag: str) -> None:
    def answer(screen: Screen[Any]) -> list[object]:
        item = current_map_item.get()
        assert item is not None
        return ["Accept", f"item{item.index}@example.org", item.index + 1, "Single room", False, ""]

    store = MemoryStore()
    model = ScriptedModel(
        [ScriptedTurn(calls=[ScriptedCall("ask", {})]), ScriptedTurn(calls=[ScriptedCall("report", {"text": "ok"})])]
        * 6
    )
    run = Run(model=model, store=store, answers=answer)
    await run.map(role(fault_server(tag)), [f"item {i}" for i in range(6)], concurrency=6)
    for record in store.records():
        index = int(str(record.input).split()[-1])
        said = json.loads(results(record)[0][0].split(": ", 1)[1])
        assert said["email"] == f"item{index}@example.org" and said["nights"] == index + 1
    await _sessions.close_loop()


def test_the_screen_of_a_schema() -> None:
    class Params:
        mode = "form"
        message = "Pick"
        requested_schema: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date"},
                "size": {
                    "type": "string",
                    "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
                },
                "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["when"],
        }

    made = elicitation("srv", "tool", Params())
    answer = made.screen.validate(["Accept", "2026-12-02", "Large", None])
    assert made.result(answer) == {"action": "accept", "content": {"when": "2026-12-02", "size": "l"}}
    assert made.screen.validate(["Accept", "2026-12-02", "(no answer)", 0.5])[2:] == ("(no answer)", 0.5)
    with pytest.raises(InputError, match="a date"):
        made.screen.validate(["Accept", "02/12/2026", "Large", None])


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "enum": ["a", "b"], "enumNames": ["Same", "Same"]},
        {"type": "string", "oneOf": [{"const": "a", "title": "Same"}, {"const": "b", "title": "Same"}]},
        {"type": "string", "enum": ["1", 1]},
        {"type": "string", "enum": ["(no answer)", "b"]},  # not required: a choice of its own is "(no answer)"
    ],
)
def test_a_choice_whose_options_read_alike_is_refused_rather_than_merged(prop: dict[str, Any]) -> None:
    class Params:
        mode = "form"
        message = "Pick"
        requested_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"pick": prop}}

    with pytest.raises(UnsupportedRequest, match="The property 'pick' offers two options shown as"):
        elicitation("srv", "tool", Params())


async def test_a_question_saying_the_server_s_own_credential_is_scrubbed_in_the_record_and_the_screen(tag: str) -> None:
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    shown: list[str] = []

    class Person(Terminal):
        async def ask(self, screen: Screen[Any]) -> Any:
            shown.append(screen.text)
            return screen.validate(["Decline"])

    server = fault_server(tag, env={"AGL_TEST_PLANTED": secret})
    store = MemoryStore()
    await Run(model=script(), store=store, terminal=Person(), mode="auto").step(role(server), "go")
    (record,) = store.records()
    texts = [*shown, json.dumps(record.to_json())]
    assert shown and shown[0].startswith("Book a room? [REDACTED]")
    assert not leaked(texts, secret), leaked(texts, secret)
    await _sessions.close_loop()
