"""A server's request for input in a real kernel: the question form in the cell (Accept after a wrong answer, and
Decline), and headless, answered from ``AGL_NOTEBOOK_ANSWERS`` or failing with an error naming it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tests.support.kernel_harness import Kernel, started_kernel

from .conftest import FAULT_SERVER, new_tag, wait_until_gone

SETUP = f"""
import sys
from dataclasses import dataclass
from agl_notebook import MCPServer, Role, Run, ScriptedCall, ScriptedModel, ScriptedTurn, reporting_tool
from agl_notebook.replay.stores import MemoryStore

@dataclass
class Answer:
    text: str

store = MemoryStore()

def step_asking(tag):
    server = MCPServer.stdio("faults", sys.executable, [{str(FAULT_SERVER)!r}, "faults", "--tag", tag])
    role = Role("k", "Use the tools.", tools=[reporting_tool("report", "Report.", Answer)], mcp=[server])
    report = ScriptedTurn(calls=[ScriptedCall("report", {{"text": "ok"}})])
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("ask", {{}})]), report])
    return Run(model=model, store=store, mode="refresh").step(role, "go")

def said():
    record = store.records()[-1]
    return record.transcript[2].content[0].content
"""

ACCEPT = ["Accept", "ada@example.org", "3", "Double room", True, ""]


def printed(kernel: Kernel) -> str:
    msg_id = kernel.execute("print(said())")
    kernel.wait_reply(msg_id)
    return kernel.stream(msg_id)


def form(kernel: Kernel) -> str:
    kernel.wait_for(lambda: bool(kernel.question_forms()))
    (found,) = kernel.question_forms()
    return found


def test_the_question_form_in_the_cell_accepts_after_a_wrong_answer_and_declines(tmp_path: Path) -> None:
    tag = new_tag()
    with started_kernel(tmp_path, SETUP) as kernel:
        msg_id = kernel.execute(f"await step_asking({tag!r})")
        shown = form(kernel)
        fields = kernel.widgets[shown]["fields"]
        assert fields[0] == {"kind": "actions", "label": "Response", "options": ["Accept", "Decline", "Cancel"]}
        assert [f["kind"] for f in fields[1:]] == ["text", "number", "choice", "confirm", "text"]
        kernel.submit_form(shown, ["Accept", "not an address", "30", "Double room", True, ""])
        kernel.wait_for(lambda: kernel.widgets[shown].get("checked") == 1)
        assert kernel.widgets[shown]["errors"][1:3] == [
            "Email (an email address): type an email address.",
            "Nights: 30 is above the maximum 14; type a whole number from 1 to 14.",
        ]
        kernel.submit_form(shown, ACCEPT, attempt=2)
        assert kernel.wait_reply(msg_id)["content"]["status"] == "ok"
        said = printed(kernel)
        assert 'accept: {"breakfast": true, "email": "ada@example.org", "nights": 3, "room": "double"}' in said

        first = shown
        msg_id = kernel.execute(f"await step_asking({tag!r})")
        kernel.wait_for(lambda: any(c != first for c in kernel.question_forms()))
        (shown,) = [c for c in kernel.question_forms() if c != first]
        kernel.submit_form(shown, ["Decline", "", "", None, None, ""])  # the fields are not read
        assert kernel.wait_reply(msg_id)["content"]["status"] == "ok"
        assert "decline: null" in printed(kernel)
    assert wait_until_gone(tag) == []


def test_headless_the_answer_comes_from_the_setting_or_the_error_names_it(tmp_path: Path) -> None:
    tag = new_tag()
    for answers in (None, json.dumps([["Cancel"]])):
        env = {"AGL_NOTEBOOK_ANSWERS": answers} if answers else {}
        kernel = Kernel(cwd=tmp_path, env=env)
        try:
            kernel.run(SETUP)
            msg_id = kernel.execute(f"await step_asking({tag!r})", allow_stdin=False)
            reply = kernel.wait_reply(msg_id)["content"]
            if answers is None:
                assert reply["ename"] == "NoAnswerError"
                assert 'Nobody can answer "Book a room?' in reply["evalue"]
                assert "set AGL_NOTEBOOK_ANSWERS=VALUE" in reply["evalue"]
            else:
                assert reply["status"] == "ok", reply
                assert "cancel: null" in printed(kernel)
        finally:
            kernel.close()
    assert wait_until_gone(tag) == []


MAP = """
def booked(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "ask", "args": {}}]}
    return {"calls": [{"name": "report", "args": {"text": request.messages[-1].content[0].content}}]}

def map_asking(tag):
    server = MCPServer.stdio("faults", sys.executable, [FAULTS, "faults", "--tag", tag])
    role = Role("k", "Use the tools.", tools=[reporting_tool("report", "Report.", Answer)], mcp=[server])
    return Run(model=ScriptedModel(booked), store=store, mode="refresh").map(role, ["a", "b", "c"], concurrency=3)
"""


def map_headers(kernel: Kernel) -> list[str]:
    """The map's question headers shown now ("Item 1 (...) asks: ...")."""
    return [str(s.get("value", "")) for c, s in kernel.widgets.items() if s.get("_model_name") == "HTMLModel"]


def map_line(kernel: Kernel) -> str:
    return "".join(str(s.get("html", "")) for s in kernel.widgets.values() if "html" in s)


def waiting(kernel: Kernel, count: int) -> Callable[[], bool]:
    """Whether the map's line says ``count`` items wait for you."""
    return lambda: re.findall(r", (\d+) waiting for you", map_line(kernel)) == [str(count)]


def checked(kernel: Kernel, form: str, attempt: int) -> Callable[[], bool]:
    return lambda: kernel.widgets[form].get("checked") == attempt


def gone_form(kernel: Kernel, form: str) -> Callable[[], bool]:
    return lambda: form not in kernel.question_forms()


def test_a_maps_questions_queue_in_its_view_and_are_answered_one_after_another(tmp_path: Path) -> None:
    tag = new_tag()
    with started_kernel(tmp_path, SETUP, f"FAULTS = {str(FAULT_SERVER)!r}", MAP) as kernel:
        msg_id = kernel.execute(f"results = await map_asking({tag!r})\nprint([r.text for r in results])")
        answered: list[int] = []
        for turn in range(3):
            # One question at a time, under its item's header; the others wait, and the map's line says so.
            kernel.wait_for(lambda: len(kernel.question_forms()) == 1 and len(map_headers(kernel)) == 1)
            (shown,) = kernel.question_forms()
            (header,) = map_headers(kernel)
            item = int(header.split("<b>Item ")[1].split("<")[0])
            assert "asks: Book a room?" in header and item not in answered, header
            kernel.wait_for(waiting(kernel, 3 - turn))
            if turn == 0:
                kernel.submit_form(shown, ["Accept", "nobody", "3", "Single room", False, ""])
                kernel.wait_for(checked(kernel, shown, 1))
                assert kernel.widgets[shown]["errors"][1] == "Email (an email address): type an email address."
                assert len(kernel.question_forms()) == 1, "the next item waits while this one is corrected"
                kernel.submit_form(
                    shown, ["Accept", f"item{item}@example.org", str(item + 1), "Single room", False, ""], attempt=2
                )
            else:
                kernel.submit_form(shown, ["Accept", f"item{item}@example.org", str(item + 1), "Double room", True, ""])
            answered.append(item)
            kernel.wait_for(gone_form(kernel, shown))
        assert kernel.wait_reply(msg_id)["content"]["status"] == "ok"
        assert sorted(answered) == [0, 1, 2]
        said = kernel.stream(msg_id)
        for item in range(3):
            assert f'"email": "item{item}@example.org", "nights": {item + 1}' in said, said
        kernel.run(
            "records = store.records()\nassert len(records) == 3\n"
            "assert all(r.questions[0].tool_call_id == r.transcript[1].content[0].id for r in records)"
        )
    assert wait_until_gone(tag) == []


def test_an_interrupt_while_a_servers_question_waits_ends_the_step_and_the_next_run_asks_again(tmp_path: Path) -> None:
    """Interrupting the kernel while an MCP server's question waits in the cell ends the step cleanly (no question
    form left, nothing recorded); the kernel's session with the server (kept per loop, docs/mcp.md) still serves the
    cell run again, which asks again and finishes; no server outlives the kernel."""
    tag = new_tag()
    with started_kernel(tmp_path, SETUP) as kernel:
        msg_id = kernel.execute(f"await step_asking({tag!r})")
        form(kernel)
        kernel.km.interrupt_kernel()
        reply = kernel.wait_reply(msg_id, timeout=30)["content"]
        assert reply["status"] == "error" and reply["ename"] == "StepInterrupted", reply
        assert kernel.widgets == {}, "no live widget (the question form) is left behind"
        check = kernel.execute("print(len(store.records()))")
        kernel.wait_reply(check)
        assert kernel.stream(check) == "0\n", "nothing is recorded"

        again = kernel.execute(f"await step_asking({tag!r})")
        shown = form(kernel)
        kernel.submit_form(shown, ACCEPT)
        assert kernel.wait_reply(again)["content"]["status"] == "ok"
        assert 'accept: {"breakfast": true' in printed(kernel)
    assert wait_until_gone(tag) == []
