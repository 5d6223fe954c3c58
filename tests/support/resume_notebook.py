"""The notebook source of the resume tests (in real kernels and in the browser): a mailer whose calls ask for approval
and a planner whose tool asks two questions; every handler call is noted in a file, so a test counts them.

`NOTES_PREFIX` is defined by the test before this source runs: the start of the notes file's name.
"""

ROLES = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool

def note(name, text):
    with open(NOTES_PREFIX + name, "a", encoding="utf-8") as f:
        f.write(text + "\\n")

@dataclass(frozen=True)
class Mail:
    subject: str = describe("The subject line.")

@dataclass(frozen=True)
class Trip:
    city: str = describe("Where to.")

@dataclass(frozen=True)
class Done:
    results: list[str] = describe("Every tool result, in order.")

async def send_mail(mail: Mail) -> ToolResult:
    note("handler.txt", f"send_mail {mail.subject}")
    return ToolResult(f"Sent {mail.subject}.")

async def lookup(trip: Trip) -> ToolResult:
    note("handler.txt", f"lookup {trip.city}")
    return ToolResult(f"{trip.city}: 3 hotels")

async def plan(trip: Trip) -> ToolResult:
    note("handler.txt", f"plan entered {trip.city}")  # work before a question runs again on resume
    when = await run.terminal.show(lambda: Screen("When do you leave?", [TextInput("Date")]))
    budget = await run.terminal.show(lambda: Screen("What is your budget?", [TextInput("Budget")]))
    return ToolResult(f"{trip.city} on {when} for {budget}")

def scripted(calls):
    def reply(request):
        note("requests.txt", str(len(request.messages)))
        turn = (len(request.messages) - 1) // 2
        if turn < len(calls):
            return {"calls": [calls[turn]]}
        results = [m.content[0].content for m in request.messages[2::2]]
        return {"calls": [{"name": "report", "args": {"results": results}}]}
    return ScriptedModel(reply)

MAILS = scripted([{"name": "send_mail", "args": {"subject": "Minutes"}},
                  {"name": "send_mail", "args": {"subject": "Budget"}}])
TRIPS = scripted([{"name": "lookup", "args": {"city": "Rome"}}, {"name": "plan", "args": {"city": "Rome"}}])
mailer = Role(name="mailer", instructions="Mail.", tools=[tool("send_mail", "Send.", Mail, send_mail, approval="ask"),
                                                          reporting_tool("report", "Report.", Done)])
planner = Role(name="planner", instructions="Plan.", tools=[tool("lookup", "Find.", Trip, lookup),
                                                            tool("plan", "Plan.", Trip, plan),
                                                            reporting_tool("report", "Report.", Done)])"""
"""Defines `mailer` (MAILS) and `planner` (TRIPS); `note(name, text)` appends to ``NOTES_PREFIX + name``."""
