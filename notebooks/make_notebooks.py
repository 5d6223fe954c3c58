"""Write the example notebooks from the cells below, then record them: ``python notebooks/make_notebooks.py``.

Each notebook is written fresh (no outputs), then executed headlessly with ``agl-notebook execute --record`` so
every step's recording lands in its metadata, made with the scripted model the notebook names. The notebooks can
just as well be edited in JupyterLab; this script only keeps them reproducible. Questions asked while recording are
answered from ``ANSWERS`` (the person's part, written down).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).parent


def imports(*names: str, extra: str = "") -> str:
    """The first code cell: the dataclass decorator and the agl_notebook names the notebook uses."""
    ordered = sorted(names, key=lambda n: (n[0].islower(), n))  # isort's order: classes, then functions
    line = f"from agl_notebook import {', '.join(ordered)}"
    if len(line) > 120:
        line = "from agl_notebook import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"
    return f"from dataclasses import dataclass\n\n{line}{extra}"


FIRST_STEP = [
    (
        "md",
        """\
# 1. A first step

A **role** is a model, instructions, and tools; its **reporting tool** is how the agent hands back its result.
`Run.step` runs one role on one typed input until the agent reports, and returns the report as a dataclass.

This notebook runs anywhere, without an API key: every step is **recorded in the notebook's metadata**, so running it
again replays the recording (no model call). The recordings were made with a *scripted model* standing in for
Claude, and each step's view says so (`recorded with scripted:…`). Set `ANTHROPIC_API_KEY` and the same cells run
live against Claude instead.""",
    ),
    ("code", imports("Claude", "Role", "Run", "describe", "reporting_tool", "role", "scripted_unless_credentials")),
    (
        "md",
        """\
Payloads are frozen dataclasses. `describe()` is the text the agent reads beside each field.""",
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Article:
    text: str = describe("The article to summarise.")


@dataclass(frozen=True)
class Summary:
    title: str = describe("A title of at most eight words.")
    key_points: list[str] = describe("The article's main points, one sentence each.")""",
    ),
    (
        "md",
        """\
`@role` names the model and the input types the role accepts. The function returns the `Role`.""",
    ),
    (
        "code",
        """\
@role(model=Claude.SONNET, accepts=(Article,))
def summariser() -> Role[Summary]:
    return Role(
        name="summariser",
        instructions="You summarise articles for busy engineers.",
        tools=[reporting_tool("report_summary", "Report the summary.", Summary)],
    )""",
    ),
    (
        "md",
        """\
Without credentials the scripted model answers; its replies are written down here. With `ANTHROPIC_API_KEY` set,
`scripted_unless_credentials` gives `None` and each role runs on its own Claude model.""",
    ),
    (
        "code",
        """\
SCRIPT = [{
    "text": "Here is the summary.",
    "calls": [{"name": "report_summary", "args": {
        "title": "Retries make network calls dependable",
        "key_points": ["Transient failures are common.", "Retry with exponential backoff, at most three times."],
    }}],
}]
run = Run(model=scripted_unless_credentials(SCRIPT))""",
    ),
    (
        "code",
        """\
article = Article(text="Network calls fail now and then. Retrying them with exponential backoff ...")
summary = await run.step(summariser, article)
summary""",
    ),
    (
        "md",
        """\
The view above is what the step left in the cell: the streamed text, each tool call (click to open it), and the
reported payload as a table with each field's description. The result is an ordinary dataclass:""",
    ),
    (
        "code",
        """\
print(summary.title)
for point in summary.key_points:
    print("-", point)""",
    ),
]

TOOLS = [
    (
        "md",
        """\
# 2. Tools, validation and retries

A tool's arguments are checked against its payload dataclass **before** your handler runs. When they do not fit,
the agent is sent the problems, each naming its field, and tries again. Here the scripted agent first sends a
quantity as text, is told what is wrong, and fixes its call; the view shows the rejected call and the retry.""",
    ),
    (
        "code",
        imports(
            "Claude",
            "Role",
            "Run",
            "ToolResult",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            "tool",
        ),
    ),
    (
        "code",
        """\
PRICES = {"bolt": 0.25, "nut": 0.10, "washer": 0.05}


@dataclass(frozen=True)
class Item:
    name: str = describe("The part's name, e.g. bolt.")
    quantity: int = describe("How many, a whole number.")


@dataclass(frozen=True)
class Order:
    parts: list[str] = describe("The parts needed.")


@dataclass(frozen=True)
class Quote:
    total: float = describe("The total price in euros.")
    lines: list[str] = describe("One line per part: name, quantity and price.")


async def price(item: Item) -> ToolResult:
    if item.name not in PRICES:
        return ToolResult(text=f"No part called {item.name!r}.", rejected=True)
    return ToolResult(text=f"{item.quantity} x {item.name} = {item.quantity * PRICES[item.name]:.2f} EUR")


@role(model=Claude.SONNET, accepts=(Order,))
def quoter() -> Role[Quote]:
    return Role(
        name="quoter",
        instructions="Price every part of the order with the price tool, then report the quote.",
        tools=[tool("price", "Price a quantity of one part.", Item, price),
               reporting_tool("report_quote", "Report the quote.", Quote)],
    )""",
    ),
    (
        "code",
        """\
SCRIPT = [
    {"text": "I will price the bolts first.",
     "calls": [{"name": "price", "args": {"name": "bolt", "quantity": "three"}}]},
    {"text": "The quantity must be a number.",
     "calls": [{"name": "price", "args": {"name": "bolt", "quantity": 3}}]},
    {"calls": [{"name": "report_quote", "args": {"total": 0.75, "lines": ["3 x bolt = 0.75 EUR"]}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
quote = await run.step(quoter, Order(parts=["3 bolts"]))
quote""",
    ),
    (
        "md",
        """\
The transcript kept for the step shows exactly what the agent read back. Every tool call is answered with a
result paired by its id: the first was rejected with the field that did not fit.""",
    ),
    (
        "code",
        """\
for message in run.outcomes[-1].transcript:
    for block in message.content:
        if block.type == "tool_result":
            print(("ERROR " if block.is_error else "") + block.content)
            print()""",
    ),
    (
        "md",
        """\
A tool the role does not offer never runs: the agent gets `Tool not offered this turn: <name>`. And if a handler
raises, the step stops, its work is wiped, and `Run.step` raises the same exception.""",
    ),
]

QUESTIONS = [
    (
        "md",
        """\
# 3. Asking the person

A tool can ask a question while the agent waits in the same step: its handler calls
`await run.terminal.show(screen_fn, **kwargs)`. In JupyterLab the screen is drawn as **input widgets inside the
running cell**; the answer is checked in place and sent when you press *Submit*. To reach the terminal, the role's
function takes the `Run` as an argument.

When this notebook replays, nothing is asked again: the recording holds the answers.""",
    ),
    (
        "code",
        imports(
            "ChoiceInput",
            "Claude",
            "ConfirmInput",
            "Role",
            "Run",
            "Screen",
            "TextInput",
            "ToolResult",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            "tool",
        ),
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Request:
    goal: str = describe("What the meeting is for.")


@dataclass(frozen=True)
class Question:
    text: str = describe("The question for the person.")


@dataclass(frozen=True)
class Plan:
    day: str = describe("The day of the meeting.")
    steps: list[str] = describe("What to do, in order.")


def asking(text: str) -> Screen[str]:
    return Screen(text, [TextInput("Answer", str)])


@role(model=Claude.SONNET, accepts=(Request,))
def planner(run: Run) -> Role[Plan]:
    async def ask(question: Question) -> ToolResult:
        answer = await run.terminal.show(asking, text=question.text)
        return ToolResult(text=answer)

    return Role(
        name="planner",
        instructions="Plan the meeting. Ask the person for anything you need to know.",
        tools=[tool("ask", "Ask the person a question.", Question, ask),
               reporting_tool("report_plan", "Report the plan.", Plan)],
    )""",
    ),
    (
        "code",
        """\
def script(request):
    \"\"\"The scripted agent: it asks for a day, then plans around the answer it got.\"\"\"
    if len(request.messages) == 1:
        return {"text": "I need to know the day.",
                "calls": [{"name": "ask", "args": {"text": "Which day suits you?"}}]}
    day = request.messages[-1].content[0].content
    steps = [f"Book a room for {day}", "Send the invites"]
    return {"calls": [{"name": "report_plan", "args": {"day": day, "steps": steps}}]}


run = Run(model=scripted_unless_credentials(script))
plan = await run.step(planner, Request(goal="Review the release"))
plan""",
    ),
    (
        "md",
        """\
A screen can hold several inputs: text (one line or several), numbers with bounds, a choice, a yes/no. `show`
returns one value per input, as a tuple. Each input validates the answer before it is accepted.""",
    ),
    (
        "code",
        """\
def booking(rooms: list[str]) -> Screen[tuple[str, bool]]:
    return Screen("Which room, and shall I send the invites?",
                  [ChoiceInput("Room", rooms), ConfirmInput("Send invites")])


@dataclass(frozen=True)
class Rooms:
    names: list[str] = describe("The rooms that are free.")


@dataclass(frozen=True)
class Booking:
    room: str = describe("The room booked.")
    invites_sent: bool = describe("Whether the invites went out.")


@role(model=Claude.SONNET, accepts=(Plan,))
def booker(run: Run) -> Role[Booking]:
    async def choose(rooms: Rooms) -> ToolResult:
        room, send = await run.terminal.show(booking, rooms=rooms.names)
        return ToolResult(text=f"room={room}, send_invites={send}")

    return Role(name="booker", instructions="Book a room for the plan.",
                tools=[tool("choose_room", "Let the person choose a room.", Rooms, choose),
                       reporting_tool("report_booking", "Report the booking.", Booking)])


def book(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "choose_room", "args": {"names": ["Aster", "Birch"]}}]}
    answer = dict(part.split("=") for part in request.messages[-1].content[0].content.split(", "))
    return {"calls": [{"name": "report_booking",
                       "args": {"room": answer["room"], "invites_sent": answer["send_invites"] == "True"}}]}


booking_run = Run(model=scripted_unless_credentials(book))
await booking_run.step(booker, plan)""",
    ),
]

REPLAY = [
    (
        "md",
        """\
# 4. Recordings and replay

Every finished step is recorded under a **fingerprint** of everything the model sees (role, instructions, tools and
their schemas, the input, the settings) and the backend used. Running a cell again replays its recording when the
fingerprint matches. **Modes** decide what happens:

| mode | recorded step | step not recorded |
|---|---|---|
| `auto` (default) | replays | runs live and records |
| `replay` (default under `pytest --nbval`) | replays | error naming the nearest recording and what differs |
| `refresh` | runs live and replaces the recording | runs live and records |
| `off` | runs live, records nothing | runs live, records nothing |

A step's `mode=` wins over the Run's, which wins over `%agl mode`, then `AGL_NOTEBOOK_MODE`, then the default.""",
    ),
    (
        "code",
        imports(
            "Claude",
            "Role",
            "Run",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            extra="\nfrom agl_notebook.replay import ReplayMissError",
        ),
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Claim:
    text: str = describe("A claim to check.")


@dataclass(frozen=True)
class Verdict:
    holds: bool = describe("Whether the claim holds.")
    reason: str = describe("Why, in one sentence.")


@role(model=Claude.SONNET, accepts=(Claim,))
def checker() -> Role[Verdict]:
    return Role(name="checker", instructions="Check the claim.",
                tools=[reporting_tool("report_verdict", "Report the verdict.", Verdict)])


def script(request):
    claim = request.messages[0].content[0].text
    holds = "backoff" in claim
    return {"calls": [{"name": "report_verdict", "args": {
        "holds": holds, "reason": "Backoff spreads retries out." if holds else "Nothing supports it."}}]}


run = Run(model=scripted_unless_credentials(script))
await run.step(checker, Claim("Retries should use exponential backoff."))""",
    ),
    (
        "md",
        """\
**A miss, explained.** In mode `replay` a step that was never recorded is an error, and the error names the nearest
recording and which parts of the fingerprint differ. Here only the input changed:""",
    ),
    (
        "code",
        """\
try:
    await run.step(checker, Claim("Retries should be immediate."), mode="replay")
except ReplayMissError as miss:
    print(miss)
    print("differs in:", miss.differing)""",
    ),
    (
        "md",
        """\
**Refreshing one step.** Mode `refresh` runs the step live and replaces its recording; the other steps keep theirs.
(Here the live run is the scripted model again, so nothing changes; with a key set, it asks Claude.)""",
    ),
    (
        "code",
        """\
await run.step(checker, Claim("Retries should use exponential backoff."), mode="refresh")""",
    ),
    (
        "md",
        """\
The `%agl` magic shows and sets the mode for the kernel, lists the notebook's recordings, explains why the latest
live steps did not replay, and forgets recordings. Its output depends on where the notebook runs, so these cells are
marked for nbval not to compare them (`# NBVAL_IGNORE_OUTPUT`).""",
    ),
    (
        "code",
        """\
# NBVAL_IGNORE_OUTPUT
%load_ext agl_notebook
%agl""",
    ),
    (
        "code",
        """\
# NBVAL_IGNORE_OUTPUT
%agl list""",
    ),
    (
        "md",
        """\
Where recordings live: each finished step's output carries its record (every frontend saves output metadata, and
nbval ignores it). In JupyterLab and Notebook 7 the bundled extension moves it into the notebook's metadata
(`metadata["agl_notebook"]`), which survives *Clear All Outputs*. Headless, `agl-notebook execute NOTEBOOK --record`
does the same. Records are JSON only, and API keys and auth headers are scrubbed before anything is kept.""",
    ),
]

TESTING = [
    (
        "md",
        """\
# 5. Testing agents offline

The scripted model is a public part of the library, so an agent's behaviour can be tested without a network or a
key: script what the model says, run the step with `mode="off"` (live, nothing recorded), and assert on the result
and on the events. A script can be a list of turns, a dict of such lists keyed by role name, or a function of the
request (which sees the whole conversation).""",
    ),
    (
        "code",
        imports("Claude", "Role", "Run", "ScriptedModel", "ToolResult", "describe", "reporting_tool", "role", "tool"),
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Diff:
    text: str = describe("The change, as a unified diff.")


@dataclass(frozen=True)
class Query:
    text: str = describe("What to search the conventions for.")


@dataclass(frozen=True)
class Review:
    issues: list[str] = describe("Every problem found, one sentence each.")


CONVENTIONS = {"retry": "Network calls retry three times with exponential backoff."}


async def look_up(query: Query) -> ToolResult:
    found = [text for key, text in CONVENTIONS.items() if key in query.text]
    return ToolResult(text="\\n".join(found) or "Nothing found.", rejected=not found)


@role(model=Claude.SONNET, accepts=(Diff,))
def reviewer() -> Role[Review]:
    return Role(name="reviewer", instructions="Review the diff against the conventions.",
                tools=[tool("look_up", "Search the conventions.", Query, look_up),
                       reporting_tool("report_review", "Report the review.", Review)])""",
    ),
    (
        "md",
        """\
A test: the script looks something up, then reports. The events say what happened, in order.""",
    ),
    (
        "code",
        """\
async def test_reviewer_cites_the_retry_convention():
    model = ScriptedModel([
        {"calls": [{"name": "look_up", "args": {"text": "retry"}}]},
        {"calls": [{"name": "report_review", "args": {"issues": ["The new call does not retry."]}}]},
    ])
    events = []
    run = Run(model=model, on_event=events.append, mode="off")
    review = await run.step(reviewer, Diff("+ http.get(url)"))
    assert review == Review(issues=["The new call does not retry."])
    assert model.calls == 2
    assert [e.type for e in events if e.type.startswith("client.tool")] == [
        "client.tool.requested", "client.tool.executing", "client.tool.result", "client.tool.roundtrip",
        "client.tool.requested", "client.tool.result"]
    return events


events = await test_reviewer_cites_the_retry_convention()
print("passed;", len(events), "events")""",
    ),
    (
        "md",
        """\
A test of a failure: an agent that never reports gets one framed reminder, then the step raises
`RoleIncompleteError`, which carries the transcript.""",
    ),
    (
        "code",
        """\
from agl_notebook import RoleIncompleteError

silent = ScriptedModel(lambda request: "I think it looks fine.")
try:
    await Run(model=silent, mode="off").step(reviewer, Diff("+ pass"))
except RoleIncompleteError as error:
    print(error)
    print([m.role for m in error.transcript])""",
    ),
]

CLIENT_TOOLS = [
    (
        "md",
        """\
# 6. Client tools

The second API (`agl_notebook.client_tools`) has no roles and no payload types: an agent is a name and
instructions, tools are declared with a JSON Schema, and **handlers** are plain async functions of the arguments.
`stream()` yields events as the agent works; `run()` returns them all with the final text. It is the same tool loop
as `Run.step`, so the runs below draw the same view in the cell, and are recorded in this notebook and replayed
when it runs again (no model call, no handler).

As in the other notebooks, a scripted model stands in for Claude when no `ANTHROPIC_API_KEY` is set.""",
    ),
    (
        "code",
        """\
import json

from agl_notebook import Screen, TextInput, scripted_unless_credentials
from agl_notebook.client_tools import DSML_TOOL_CALL_CLOSE, DSML_TOOL_CALL_OPEN, Runner, ToolResult, run, stream""",
    ),
    (
        "md",
        """\
Declare the tools so the model knows they exist (`parameters` is the JSON Schema it is shown), and register a
handler for each. A handler gets the arguments as a dict and a context holding the call's id.""",
    ),
    (
        "code",
        """\
AGENT = {"name": "assistant", "instructions": "Use the available tools to answer questions."}

client_tools = [
    {"name": "get_weather", "description": "Get current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "calculate", "description": "Multiply two whole numbers",
     "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
]


async def get_weather(args, ctx):
    city = args.get("city", "unknown")
    return ToolResult(content=json.dumps({"city": city, "temp": 22, "condition": "sunny"}))


async def calculate(args, ctx):
    try:
        return ToolResult(content=str(int(args["a"]) * int(args["b"])))
    except (KeyError, TypeError, ValueError):
        return ToolResult(content="Give a and b as whole numbers.", is_error=True)


tool_handlers = {"get_weather": get_weather, "calculate": calculate}""",
    ),
    (
        "md",
        """\
`stream()` yields typed events; match on `event.type` (or on the classes). The view above the printed lines is
drawn from the same events.""",
    ),
    (
        "code",
        """\
WEATHER_AND_SUM = [
    {"text": "Let me look both up.", "calls": [{"name": "get_weather", "args": {"city": "Sydney"}},
                                                {"name": "calculate", "args": {"a": 15, "b": 23}}]},
    "It is 22 °C and sunny in Sydney, and 15 * 23 = 345.",
]

async for event in stream(AGENT, "What is the weather in Sydney, and what is 15 * 23?",
                          tool_handlers=tool_handlers, client_tools=client_tools,
                          model=scripted_unless_credentials(WEATHER_AND_SUM)):
    if event.type == "client.tool.requested":
        print(f"\\n→ Agent requested: {event.name}({json.dumps(event.args)})")
    if event.type == "client.tool.executing":
        print(f"⚙ Executing: {event.name}")
    if event.type == "client.tool.result":
        suffix = " (error)" if event.is_error else ""
        print(f"← Result: {event.result}{suffix}")
    if event.type == "client.tool.roundtrip":
        print(f"  Roundtrip {event.turn}/{event.max_turns}")
    if event.type == "response.output_text.delta":
        print(event.delta, end="", flush=True)""",
    ),
    (
        "md",
        """\
`run()` runs to the end and returns the events, the final text, the structured transcript (every `tool_use`
answered by a `tool_result` with its id) and whether the run was cut short.""",
    ),
    (
        "code",
        """\
result = await run(AGENT, "What is the weather in Sydney, and what is 15 * 23?",
                   tool_handlers=tool_handlers, client_tools=client_tools,
                   model=scripted_unless_credentials(WEATHER_AND_SUM))
roundtrips = [e for e in result.events if e.type == "client.tool.roundtrip"]
print(result.text)
print(f"Roundtrips used: {len(roundtrips)}; requests: {result.requests}; truncated: {result.truncated}")""",
    ),
    (
        "md",
        """\
## The round-trip limit

`max_tool_roundtrips=N` (25 by default) allows N round trips, so at most N+1 model requests. When the last reply
still asks for tools, those calls are answered "not run" (so the transcript can be continued), a `run.truncated`
event is emitted and `result.truncated` is true. This scripted agent never stops searching:""",
    ),
    (
        "code",
        """\
def keeps_searching(request):
    return {"text": "Searching again.", "calls": [{"name": "search", "args": {"query": "more"}}]}


async def search(args, ctx):
    return ToolResult(content=f"Nothing new for {args['query']!r}.")


result = await run({"name": "searcher", "instructions": "Search until you know."}, "Find everything.",
                   tool_handlers={"search": search}, max_tool_roundtrips=2,
                   client_tools=[{"name": "search", "description": "Search", "parameters": {"type": "object"}}],
                   model=scripted_unless_credentials(keeps_searching))
print(f"requests: {result.requests}, truncated: {result.truncated}")
print([e.type for e in result.events if e.type in ("client.tool.roundtrip", "run.truncated")])
print(result.transcript[-1].content[0].content)""",
    ),
    (
        "md",
        """\
## Untrusted calls and failing handlers

Only the tools listed in `client_tools` for this turn can run: a call to any other tool gets the error result
`Tool not offered this turn: <name>` and no handler runs, even when `tool_handlers` has one (and also when no tool
is listed at all). A handler that raises, or returns something other than a `ToolResult`, gives the model an error
result with the exception's type and message, and the run goes on.""",
    ),
    (
        "code",
        """\
async def delete_files(args, ctx):
    raise AssertionError("never runs: delete_files is not offered")


async def flaky_weather(args, ctx):
    raise TimeoutError(f"the weather service did not answer for {args['city']}")


UNTRUSTED = [
    {"calls": [{"name": "delete_files", "args": {"path": "/"}}, {"name": "get_weather", "args": {"city": "Oslo"}}]},
    "I cannot delete files, and the weather service is down.",
]
result = await run(AGENT, "Clean up, then tell me the weather in Oslo.",
                   tool_handlers={"delete_files": delete_files, "get_weather": flaky_weather},
                   client_tools=client_tools[:1], model=scripted_unless_credentials(UNTRUSTED))
for e in result.events:
    if e.type == "client.tool.result":
        print(f"{e.name}: {e.result} (is_error={e.is_error})")""",
    ),
    (
        "md",
        """\
## Tool calls written as text

Some models write a tool call as text, wrapped in DSML markup, instead of calling the tool natively. Every reply of
every model passes through an interceptor that turns such spans into ordinary tool calls: the handler runs, the
events show a `client.tool.requested`, and the text never shows the markup. A span that cannot be read is dropped
alone, with a `markup.error` event.""",
    ),
    (
        "code",
        """\
print(DSML_TOOL_CALL_OPEN, DSML_TOOL_CALL_CLOSE)
WRITTEN_AS_TEXT = [
    "Checking. " + DSML_TOOL_CALL_OPEN + '{"name": "get_weather", "arguments": {"city": "Lima"}}'
    + DSML_TOOL_CALL_CLOSE + DSML_TOOL_CALL_OPEN + "{not json" + DSML_TOOL_CALL_CLOSE + " One moment.",
    "It is 22 °C in Lima.",
]
result = await run(AGENT, "Weather in Lima?", tool_handlers=tool_handlers, client_tools=client_tools,
                   model=scripted_unless_credentials(WRITTEN_AS_TEXT))
print("".join(e.delta for e in result.events if e.type == "response.output_text.delta"))
print([(e.type, getattr(e, "name", "")) for e in result.events if e.type != "response.output_text.delta"])""",
    ),
    (
        "md",
        """\
## A person in the loop

A handler is just an async function, so it can wait for a person. Through a `Runner`, it can ask on the run's
terminal: in JupyterLab the question is drawn as an input widget inside the running cell, and the answer is recorded
with the run, so a replay asks nothing.""",
    ),
    (
        "code",
        """\
def question(text: str) -> Screen[str]:
    return Screen(text, [TextInput("Answer", str)])


def clarifier(request):
    if len(request.messages) == 1:
        return {"calls": [{"name": "ask_user", "args": {"question": "Where would you like to go?"}}]}
    return f"Then let us plan a trip to {request.messages[-1].content[0].content}."


runner = Runner(model=scripted_unless_credentials(clarifier))


async def ask_user(args, ctx):
    answer = await runner.terminal.show(question, text=args["question"])
    return ToolResult(content=answer.strip())


result = await runner.run(
    {"name": "clarifier", "instructions": "Ask the user for clarification when needed."},
    "Help me plan a trip",
    tool_handlers={"ask_user": ask_user},
    client_tools=[{"name": "ask_user", "description": "Ask the user a question", "parameters": {"type": "object"}}],
)
result.text""",
    ),
]


FUNCTIONS = [
    (
        "md",
        """\
# 7. JSON functions

An agent can also be written as **JSON**: named functions of commands (`set`, `if`, `loop`, `func`, `log`, `ask`,
`api`, `llm` ...), with values written as sandboxed `{ expressions }`. `load_agent` validates it before anything
runs, and `Agent.call` runs one function. A call made with a `Run` is recorded and replayed like a step: running
this notebook again replays it (no model call, no request, no question).

As in the other notebooks, a scripted model stands in for Claude when no `ANTHROPIC_API_KEY` is set.""",
    ),
    (
        "code",
        """\
from agl_notebook import Run, scripted_unless_credentials
from agl_notebook.functions import AgentInvalidError, load_agent""",
    ),
    (
        "md",
        """\
A function with a `description` and described arguments is a **tool function**: an `llm` command may offer it to
the model. `quote` runs the tool loop, and its `output` is the typed result the model hands back.""",
    ),
    (
        "code",
        """\
AGENT = {
    "name": "shop",
    "model": "claude-sonnet-5-5",
    "functions": {
        "price": {
            "description": "The price of one item, in euros.",
            "args": {"item": {"type": "str", "description": "The item's name: bolt, nut or washer."}},
            "commands": [
                {"log": "{ f'pricing {item}' }"},
                {"return": "{ {'bolt': 0.25, 'nut': 0.10, 'washer': 0.05}.get(item) }"},
            ],
        },
        "quote": {
            "args": {"request": {"type": "str"}},
            "commands": [
                {"llm": {"prompt": "{ request }", "tools": ["price"],
                         "output": {"total": {"type": "float", "description": "The total in euros."}}}},
                {"return": "{ {'total': result['total']} }"},
            ],
        },
    },
}
agent = load_agent(AGENT)
agent""",
    ),
    (
        "md",
        """\
A broken agent never runs: every problem is listed at once, each with its JSON path.""",
    ),
    (
        "code",
        """\
broken = {"name": "broken", "functions": {"f": {"commands": [{"set": {"x": "{ 1 + }"}},
                                                           {"func": {"name": "missing"}}]}}}
try:
    load_agent(broken)
except AgentInvalidError as error:
    for problem in error.problems:
        print(problem)""",
    ),
    (
        "md",
        """\
Call `quote`: the model calls the `price` tool function twice, then reports the total. The cell shows the calls,
the log lines and the result; the recording lands in this notebook.""",
    ),
    (
        "code",
        """\
SCRIPT = [
    {"text": "Pricing the items.", "calls": [{"name": "price", "args": {"item": "bolt"}},
                                            {"name": "price", "args": {"item": "nut"}}]},
    {"calls": [{"name": "report_result", "args": {"total": 0.35}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
await agent.call("quote", {"request": "One bolt and one nut, please."}, run=run)""",
    ),
]


MAP = [
    (
        "md",
        """\
# 8. Many inputs: `run.map`

Designing an agent usually means running its role over a dataset and scoring what comes back. `run.map` runs one
role on every input, a few at a time, in **one cell with one view**: progress, tokens, a Stop button, and a table of
the finished items. Each item is an ordinary step with its own recording, so running the cell again replays the
finished items with no model call and runs only what did not finish (an interrupted map keeps every item that
finished; a failed item is not recorded, so it is tried again).""",
    ),
    ("code", imports("Claude", "Role", "Run", "describe", "reporting_tool", "role", "scripted_unless_credentials")),
    (
        "code",
        """\
@dataclass(frozen=True)
class Ticket:
    text: str = describe("A support ticket, as the customer wrote it.")


@dataclass(frozen=True)
class Triage:
    category: str = describe("One of: billing, outage, account, other.")
    urgent: bool = describe("Whether someone must look at it today.")


@role(model=Claude.HAIKU, accepts=(Ticket,))
def triager() -> Role[Triage]:
    return Role(
        name="triager",
        instructions="You sort support tickets into a category and say whether they are urgent.",
        tools=[reporting_tool("report_triage", "Report the triage.", Triage)],
    )""",
    ),
    (
        "md",
        """\
Offline, a scripted model stands in for Claude: it sorts by keywords.""",
    ),
    (
        "code",
        """\
import json


def script(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"].lower()
    category = next(
        (name for name, words in [("billing", ("invoice", "charged", "refund")), ("outage", ("down", "error")),
                                  ("account", ("password", "login"))] if any(w in text for w in words)),
        "other",
    )
    urgent = category == "outage" or "asap" in text
    return {"calls": [{"name": "report_triage", "args": {"category": category, "urgent": urgent}}]}


run = Run(model=scripted_unless_credentials(script))""",
    ),
    (
        "md",
        """\
The inputs are a list of payloads (or a pandas DataFrame whose columns name the payload's fields). `score` is a
function of the input and the result giving a number or a bool: here, whether the category is the one we expected.""",
    ),
    (
        "code",
        """\
tickets = [
    Ticket("I was charged twice for my invoice"),
    Ticket("The dashboard is down with error 502"),
    Ticket("I forgot my password"),
    Ticket("Can I get a refund ASAP?"),
    Ticket("How do I export my data?"),
    Ticket("Login page shows an error"),
    Ticket("Please update the invoice address"),
]
expected = ["billing", "outage", "account", "billing", "other", "account", "billing"]


def correct(ticket: Ticket, triage: Triage) -> bool:
    return triage.category == expected[tickets.index(ticket)]


results = await run.map(triager, tickets, concurrency=4, score=correct)""",
    ),
    (
        "md",
        """\
The view above is what the map left in the cell: a summary, a row per item (the reported fields and the score as
columns) and the failures. While a map runs, the same place shows a live view: done, failed, running and queued
items, tokens so far, time left, a **Stop** button (queued items are not started; finished ones are kept), and a
click on a row opens that item's step. The results come back in input order; a failed item is a `MapItemError`
carrying the error and the transcript of what its agent was sent.""",
    ),
    (
        "code",
        """\
print(results[0])
print("mean score:", results.mean_score)
print("failed:", [failure.index for failure in results.failures])""",
    ),
    (
        "md",
        """\
One mistake to look at: the login error went to `outage` (its keywords are checked first). Run the map cell again
and every item replays from its recording. Had an item failed (its agent never reported, a tool raised, the API
refused), it would show in the table with its error and, never recorded, run again on the next run of the cell.

- **Rate limits**: the map owns its retries. Its requests to Claude go out without the SDK's retries, so it sees
  each 429 and 529: it halves its concurrency, grows it back as requests succeed, waits what `retry-after` asks (at
  most a minute) and retries up to `retries=` times; an invalid request (400) is never retried.
- **Pandas**: `await run.map(triager, frame)` takes a DataFrame with a `text` column, and `results.to_pandas()`
  gives a row per input (install `agl_notebook[pandas]`).
- **Questions and approvals** of items queue in the map's view and are answered one at a time, each with the
  item's input shown. See [docs/map.md](../docs/map.md).""",
    ),
    (
        "md",
        """\
## Comparing variants, with the cost in view

`run.compare` runs each variant (another model, other instructions, other tools) as a map over the same inputs and
shows a grid: a row per input, each reported field side by side per variant, the cells where the variants disagree
marked; per variant its tokens, dollars, failures and mean score; per field the share of inputs on which every
variant agreed. Here a second triager is told that a login problem is an account problem.""",
    ),
    (
        "code",
        """\
@role(model=Claude.HAIKU, accepts=(Ticket,))
def careful_triager() -> Role[Triage]:
    return Role(
        name="careful_triager",
        instructions="You sort support tickets into a category and say whether they are urgent. A login problem "
        "is an account problem, even when the ticket mentions an error.",
        tools=[reporting_tool("report_triage", "Report the triage.", Triage)],
    )


def careful_script(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"].lower()
    if "login problem" in request.system and "login" in text:
        return {"calls": [{"name": "report_triage", "args": {"category": "account", "urgent": False}}]}
    return script(request)


run = Run(model=scripted_unless_credentials(careful_script), budget_usd=0.50)
grid = await run.compare({"keywords": triager, "careful": careful_triager}, tickets, score=correct)
grid""",
    ),
    (
        "md",
        """\
The login ticket is the one row marked: the variants disagree on its category and its urgency, so each field's
agreement is 6 of 7. Each variant is a map of its own records, so running the cell again replays both.

Offline nothing is spent: a scripted model is never billed, and its steps show no dollars. Live, each step's view
and each map's table show what its record says it cost beside its tokens (`cost: 1,580 tokens, $0.0079 (rates of
2026-12-01)`), priced when it was recorded, so a replay shows the same dollars whatever the prices are later.
`Run(budget_usd=0.50)` is the most this Run's live requests may cost, shared by every step and every item: a
request that would pass it is not made, and its item fails with `BudgetExceededError`, recording nothing.
`run.spent_usd` and `run.summary()` say what the Run has spent so far. See [docs/cost.md](../docs/cost.md).""",
    ),
    (
        "code",
        """\
print(grid.agreement)
print("spent:", run.spent_usd)""",
    ),
]


THINKING = [
    (
        "md",
        """\
# 9. Thinking, effort and strict tools

Claude can **think** before it answers: a reply then starts with thinking blocks, the model's reasoning, each
sealed with a *signature*. In a tool loop the API wants every earlier thinking block sent back **exactly as it
came**, signature and all; agl_notebook keeps every block of a reply as the API sent it and sends it back
unchanged, turn after turn.

This notebook follows one agent through a tool loop with thinking on. The recordings were made with the scripted
model, which scripts thinking too (its signatures are stand-ins, the same on every run), so it runs with no API
key; set `ANTHROPIC_API_KEY` and the same cells run live on Claude.""",
    ),
    (
        "code",
        imports(
            "Claude",
            "InputError",
            "Role",
            "Run",
            "Thinking",
            "ToolResult",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            "tool",
        ),
    ),
    (
        "md",
        """\
The agent investigates a failed deploy: it reads service logs with a tool, then reports a diagnosis. Three
settings of the role are new here:

- `thinking=Thinking.adaptive()`: Claude decides when and how much to think. `Thinking.enabled(budget_tokens)`
  caps it instead (at least 1,024 tokens, and under `max_tokens`: thinking tokens count toward it);
  `Thinking.between_tools()` thinks only between tool calls; `Thinking.disabled()` turns it off. One setting per
  step: every request of the step sends it.
- `effort="high"`: how much effort each reply takes, from `"low"` to `"max"`.
- `strict=True` on the tool: the API guarantees arguments that fit its schema. The loop still checks them.""",
    ),
    (
        "code",
        """\
LOGS = {
    "api": "12:00:01 started\\n12:00:04 ERROR cannot reach db:5432 (connection refused)",
    "db": "11:59:58 shutting down for maintenance\\n12:02:30 ready",
}


@dataclass(frozen=True)
class Incident:
    summary: str = describe("What went wrong, as the on-call engineer saw it.")


@dataclass(frozen=True)
class Service:
    name: str = describe("The service whose log to read: api or db.")


@dataclass(frozen=True)
class Diagnosis:
    cause: str = describe("The root cause, in one sentence.")
    fix: str = describe("What to change so it does not happen again.")


async def read_log(service: Service) -> ToolResult:
    if service.name not in LOGS:
        return ToolResult(f"No service called {service.name!r}.", rejected=True)
    return ToolResult(LOGS[service.name])


@role(model=Claude.SONNET, accepts=(Incident,))
def investigator() -> Role[Diagnosis]:
    return Role(
        name="investigator",
        instructions="Find the root cause of the incident from the services' logs, then report a diagnosis.",
        tools=[tool("read_log", "Read a service's recent log.", Service, read_log, strict=True),
               reporting_tool("report_diagnosis", "Report the diagnosis.", Diagnosis)],
        thinking=Thinking.adaptive(),
        effort="high",
    )""",
    ),
    (
        "md",
        """\
The script's turns think (`"thinking"`), and the second also holds a **redacted** thinking block
(`"redacted": True`): reasoning the API returns encrypted, which no one can read but which must be sent back all
the same.""",
    ),
    (
        "code",
        """\
SCRIPT = [
    {"thinking": "The api failed at 12:00:04. Its own log first, then whatever it depends on.",
     "text": "I will read the api's log.",
     "calls": [{"name": "read_log", "args": {"name": "api"}}]},
    {"thinking": "Connection refused on db:5432 means the database was down, not slow. Check why.",
     "redacted": True,
     "calls": [{"name": "read_log", "args": {"name": "db"}}]},
    {"thinking": "The database went down for maintenance two seconds before the deploy and was back at 12:02:30.",
     "calls": [{"name": "report_diagnosis", "args": {
         "cause": "The deploy started while the database was down for planned maintenance.",
         "fix": "Block deploys during maintenance windows, and retry the db connection at start-up."}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
diagnosis = await run.step(investigator, Incident("The api failed to start after the 12:00 deploy."))
diagnosis""",
    ),
    (
        "md",
        """\
In the view each turn's thinking sits in a collapsed **Thinking** block above its text and calls: open it to read
it. A redacted block is shown as *redacted*. The plain-text form of the view leaves thinking out.

The transcript the step kept shows what was sent back. Each assistant message holds its blocks in the order they
came, the thinking ones untouched:""",
    ),
    (
        "code",
        """\
for message in run.outcomes[-1].transcript:
    if message.role == "assistant":
        print([block.type for block in message.content])
first_thought = run.outcomes[-1].transcript[1].content[0]
print(first_thought.data["thinking"])
print("signature:", first_thought.data["signature"])""",
    ),
    (
        "md",
        """\
**What thinking costs.** Thinking tokens are output tokens: the usage the API reports already counts them in
`output_tokens`, so a step's usage and cost include them once, and nothing is added on top.""",
    ),
    (
        "code",
        """\
usage = run.outcomes[-1].usage
print("input tokens:", usage.input_tokens, " output tokens (thinking included):", usage.output_tokens)""",
    ),
    (
        "md",
        """\
**Display.** With `display="omitted"` the API sends each thinking block back with its signature and without its
text: you pay for the thinking but do not read it, and the reply starts sooner. The view says the thinking was
omitted.""",
    ),
    (
        "code",
        """\
@role(model=Claude.SONNET, accepts=(Incident,))
def quiet_investigator() -> Role[Diagnosis]:
    return Role(
        name="quiet_investigator",
        instructions="Find the root cause of the incident from the services' logs, then report a diagnosis.",
        tools=[tool("read_log", "Read a service's recent log.", Service, read_log),
               reporting_tool("report_diagnosis", "Report the diagnosis.", Diagnosis)],
        thinking=Thinking.adaptive(display="omitted"),
    )


quiet = await run.step(quiet_investigator, Incident("The api failed to start after the 12:00 deploy."))
print(repr(run.outcomes[-1].transcript[1].content[0].data["thinking"]))""",
    ),
    (
        "md",
        """\
**Bad settings fail at once**, before any request, with an error saying what is wrong: a budget under the API's
minimum or not under `max_tokens`, an unknown effort level, thinking on a backend that cannot think, or a tool
payload strict mode cannot express.""",
    ),
    (
        "code",
        """\
for make in (
    lambda: Thinking.enabled(budget_tokens=500),
    lambda: Role("r", "Think hard.", thinking=Thinking.enabled(8000), max_tokens=4096),
    lambda: Role("r", "Try hard.", effort="extreme"),
):
    try:
        make()
    except InputError as e:
        print(e)""",
    ),
    (
        "md",
        """\
Run the notebook again and every step replays from its recording: the thinking is drawn again from the record,
and no model is called. See [docs/thinking.md](../docs/thinking.md).""",
    ),
]

SERVER_TOOLS = [
    (
        "md",
        """\
# 13. Web search, web fetch and code execution, run by Anthropic

Some tools Anthropic runs itself: **web search**, **web fetch** and **code execution**. A role only offers them
(`server_tools=[...]`); the model calls them inside its own request, and the reply holds each call and its result in
place. agl_notebook keeps those blocks as the API sent them, sends them back unchanged on later turns, and draws each
call as a row marked *run by Anthropic*. Text that cites a source carries a numbered link to it.

The recordings here were made with the scripted model, which scripts the blocks Claude would send, so the notebook
runs with no API key and no network; set `ANTHROPIC_API_KEY` and the same cells run live on Claude.""",
    ),
    (
        "code",
        imports(
            "Claude",
            "CodeExecution",
            "InputError",
            "Role",
            "Run",
            "UserLocation",
            "WebFetch",
            "WebSearch",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            extra="\nfrom agl_notebook.server_tools import scripted_code_execution, scripted_fetch, scripted_search",
        ),
    ),
    (
        "md",
        """\
A research agent: it may search (at most three times per request, only on two domains), read a page, and run code.
Each option object is checked when it is built, and sent as the API takes it.""",
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Question:
    text: str = describe("What to find out.")


@dataclass(frozen=True)
class Finding:
    answer: str = describe("The answer, in one sentence.")


@role(model=Claude.SONNET, accepts=(Question,))
def researcher() -> Role[Finding]:
    return Role(
        name="researcher",
        instructions="Search the web, read the best page, check numbers with code, then report with sources.",
        tools=[reporting_tool("report_finding", "Report the finding.", Finding)],
        server_tools=[
            WebSearch(max_uses=3, allowed_domains=["example.org", "tides.example"],
                      user_location=UserLocation(city="Brest", country="FR")),
            WebFetch(max_uses=1, citations=True),
            CodeExecution(),
        ],
    )""",
    ),
    (
        "md",
        """\
The script: the first reply searches and **pauses** its turn (`pause_turn`: Anthropic's own loop stopped, the turn
goes on: the paused reply is sent back as it is and the model continues). The second reads a page, runs a line of
code, and answers with a passage that cites a search result.""",
    ),
    (
        "code",
        """\
CITED = {"type": "web_search_result_location", "url": "https://tides.example/brest",
         "title": "Tides at Brest", "cited_text": "Brest has two high tides a day, about 12 h 25 min apart.",
         "encrypted_index": "scripted"}
SCRIPT = [
    {"blocks": scripted_search("srvtoolu_01", "tides at Brest", [
        ("Tides at Brest", "https://tides.example/brest"),
        ("Semidiurnal tides explained", "https://example.org/semidiurnal"),
     ]),
     "stop_reason": "pause_turn"},
    {"blocks": [
        *scripted_fetch("srvtoolu_02", "https://example.org/semidiurnal", "Semidiurnal tides explained",
                        "Most coasts have two high and two low tides each lunar day."),
        *scripted_code_execution("srvtoolu_03", "python3 -c 'print(24 * 60 + 50)'", stdout="1490\\n"),
     ],
     "text": "A lunar day is 1,490 minutes. ",
     "cited": [{"text": "Brest has two high tides a day, about 12 h 25 min apart.", "citations": [CITED]}],
     "container": "container_scripted_01",
     "calls": [{"name": "report_finding", "args": {"answer": "Two high tides a day, about 12 h 25 min apart."}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
finding = await run.step(researcher, Question("How often is high tide at Brest?"))
finding""",
    ),
    (
        "md",
        """\
Each call of a server tool is a row marked **run by Anthropic**: open the search to see its results as titles and
links, the fetch to see the page's title and URL, the code with its output. The cited sentence ends with **[1]**,
a link to its source, and the **Sources** list under the step names it. Only `http` and `https` URLs are ever
links; anything else a reply or a record holds is shown as text.

The transcript keeps every block where it came, and the cited text keeps its citations:""",
    ),
    (
        "code",
        """\
for message in run.outcomes[-1].transcript[1:]:
    print(message.role, [block.type for block in message.content])
cited = [b for b in run.outcomes[-1].transcript[2].content if b.type == "text" and b.citations]
print(cited[0].text, "->", cited[0].citations[0]["url"])""",
    ),
    (
        "md",
        """\
**What it costs.** Searches are billed apart from tokens, at $10 per 1,000; the record counts them, and a step on
Claude is priced with them. Web fetch costs only the tokens the page adds. Code execution is billed by container
time, which no usage reports: a step that ran code says *code execution not priced* beside its cost. (The scripted
model is never billed, so its steps show no dollars.)""",
    ),
    (
        "code",
        """\
from agl_notebook.models.prices import PRICES

usage = run.outcomes[-1].usage
sonnet = PRICES.rates_for("anthropic:" + Claude.SONNET)
print("searches:", usage.web_search_requests, " fetches:", usage.web_fetch_requests)
print(f"the searches alone, on Claude: ${usage.web_search_requests * sonnet.web_search / 1000:.2f}")""",
    ),
    (
        "md",
        """\
**No approval can gate a server tool**: Anthropic runs it inside the request, so the call has already run when the
reply reaches the kernel. Asking for one is an error that says so; limit the tool instead. A Run with a budget also
needs `max_uses` on web search, or a search could not be reserved before the request.""",
    ),
    (
        "code",
        """\
for make in (
    lambda: WebSearch(approval="ask"),
    lambda: WebSearch(allowed_domains=["a.example"], blocked_domains=["b.example"]),
    lambda: Role("r", "Search.", server_tools=[WebSearch()], mcp_approvals={"web_search": "ask"}),
):
    try:
        make()
    except InputError as e:
        print(e)""",
    ),
    (
        "md",
        """\
Run the notebook again and the step replays from its recording: every server tool row and citation is drawn again
from the record, and no model is called. See [docs/server-tools.md](../docs/server-tools.md).""",
    ),
]

MODELS = [
    (
        "md",
        """\
# 11. Models side by side: Claude, OpenAI and a local model

People choose a model by trying several on the same inputs. A role names its model, and besides Claude that can be
any server that speaks OpenAI's Chat Completions: OpenAI, DeepSeek, or a model running on your own machine (Ollama,
vLLM, llama.cpp's server), with no key at all. `run.compare` runs the same role on each and puts the answers, the
disagreements and the dollars in one grid.

This notebook runs anywhere, offline: its recordings were made by **three scripted models**, and they are named for
what they are. A recording never claims to come from a model that never answered it: each step's view says
`recorded with scripted:…`. The cell at the end shows the code that runs the same comparison on real models.""",
    ),
    ("code", imports("Role", "Run", "ScriptedModel", "describe", "reporting_tool")),
    (
        "code",
        """\
import json


@dataclass(frozen=True)
class Email:
    text: str = describe("An email, as it arrived.")


@dataclass(frozen=True)
class Verdict:
    spam: bool = describe("Whether the email is spam.")


def spam_judge(model) -> Role[Verdict]:
    # The one role every variant runs: only its model differs.
    return Role(
        name="spam_judge",
        instructions="Say whether the email is spam.",
        model=model,
        accepts=(Email,),
        tools=[reporting_tool("report_verdict", "Report the verdict.", Verdict)],
    )""",
    ),
    (
        "md",
        """\
Three scripted stand-ins with three habits: one flags any email with a link or money in it, one flags only
what shouts, one trusts everything. Each is a function of the request, so nothing here reaches a network.""",
    ),
    (
        "code",
        """\
def judging(flags):
    def script(request):
        text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"]
        return {"calls": [{"name": "report_verdict", "args": {"spam": flags(text)}}]}

    return ScriptedModel(script)


variants = {
    "scripted_cautious": spam_judge(judging(lambda t: any(w in t.lower() for w in ("http", "$", "prize")))),
    "scripted_shouting": spam_judge(judging(lambda t: t.isupper() or "!!" in t)),
    "scripted_trusting": spam_judge(judging(lambda t: False)),
}
emails = [
    Email("YOU WON A PRIZE!! CLAIM NOW"),
    Email("Lunch at noon? The usual place."),
    Email("Your invoice: $120, pay at http://pay.example"),
    Email("Minutes of Tuesday's meeting attached."),
]
run = Run()
grid = await run.compare(variants, emails)
grid""",
    ),
    (
        "md",
        """\
The grid marks the rows where the variants disagree, and under it gives each variant's tokens, its dollars (`-`
for a scripted model, which is never billed) and each field's agreement. Run the cell again and every item replays
from its recording.""",
    ),
    ("code", "print(grid.agreement)"),
    (
        "md",
        """\
## The same comparison on real models

This is the code that runs the same role on Claude, on OpenAI and on a local model served by Ollama (it is not run
here: it needs `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `pip install 'agl_notebook[openai]'`, and `ollama pull
llama3.2`). Each variant records under its own backend, `anthropic:claude-haiku-5-5`,
`openai:gpt-4.1@https://api.openai.com:443/v1` and `openai:llama3.2@http://localhost:11434/v1`, so no recording of
one is ever replayed for another, and none of the scripted recordings above would be.

```python
from agl_notebook import Claude
from agl_notebook.models.openai import OpenAIModel

real = {
    "claude_haiku": spam_judge(Claude.HAIKU),
    "gpt_4_1": spam_judge(OpenAIModel("gpt-4.1")),
    "llama_local": spam_judge(OpenAIModel("llama3.2", base_url="http://localhost:11434/v1", free=True)),
}
grid = await Run(budget_usd=0.50).compare(real, emails)
```

Claude and gpt-4.1 are priced from the library's dated table; the local model costs nothing only because
`free=True` says so (otherwise its dollars are "price unknown"). The settings for DeepSeek, vLLM and llama.cpp's
server are in [docs/models.md](../docs/models.md).""",
    ),
]


EVALUATING = [
    (
        "md",
        """\
# 12. Evaluations you can trust

On 30 inputs, a mean score of 0.72 against 0.78 is usually noise. This notebook runs each input several times
(**repeats**), scores answers with a **judge** role, and compares variants with **intervals**: every mean carries
its 95% interval, and each pair of variants gets one sentence saying whether the difference can be told apart from
noise at this number of inputs. See [docs/evaluating.md](../docs/evaluating.md).""",
    ),
    ("code", imports("Role", "Run", "Verdict", "describe", "judge", "reporting_tool", "scripted_unless_credentials")),
    (
        "code",
        """\
@dataclass(frozen=True)
class Sum:
    text: str = describe("An addition to work out.")


@dataclass(frozen=True)
class Result:
    answer: int = describe("The sum.")


def solver(name: str, instructions: str) -> Role[Result]:
    return Role(name, instructions, accepts=(Sum,), tools=[reporting_tool("report_result", "Report the sum.", Result)])


quick = solver("quick", "Add the numbers. Be quick.")
careful = solver("careful", "Add the numbers. Check your work.")
checked = solver("checked", "Add the numbers, then add them again from the right and compare.")
grader = Role(
    "grader",
    "Judge the answer by the rubric.",
    tools=[reporting_tool("report_verdict", "Report your verdict.", Verdict)],
)
# Each map below has inputs of its own: no two share a recording.
drills = [Sum(f"{a} + {a + 17}") for a in range(41, 53)]
checks = [Sum(f"{a} + {a + 29}") for a in range(61, 69)]
sums = [Sum(f"{a} + {a + 46}") for a in range(11, 41)]
more_sums = [Sum(f"{a} + {a + 5}") for a in range(71, 101)]""",
    ),
    (
        "md",
        """\
Offline, one scripted model stands in for Claude. Each solver is right on a share of the inputs fixed by its
instructions (quick 50%, careful 55%, checked 97%), decided by a hash of the input and the **repeat**: inside a map,
`current_map_item` says which repeat runs, so the repeats of one input can disagree, as a real model's do. As the
grader, it checks the sum.""",
    ),
    (
        "code",
        """\
import hashlib
import json

from agl_notebook._map_scope import current_map_item

ACCURACY = {"Be quick.": 0.50, "Check your work.": 0.55, "from the right": 0.97}


def chance(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") / 2**64


def script(request):
    given = json.loads(request.messages[0].text.split("\\n", 1)[1])
    if any(tool.name == "report_verdict" for tool in request.tools):  # the grader
        a, b = (int(n) for n in given["input"].split('"')[-2].split(" + "))
        answer = json.loads(given["answer"])["answer"]
        right = answer == a + b
        verdict = {"reasoning": f"{answer} is {'' if right else 'not '}{a} + {b}", "score": float(right)}
        return {"calls": [{"name": "report_verdict", "args": verdict}]}
    a, b = (int(n) for n in given["text"].split(" + "))
    accuracy = next(share for words, share in ACCURACY.items() if words in request.system)
    item = current_map_item.get()
    right = chance(request.system, given["text"], item.repeat if item else 0) < accuracy
    return {"calls": [{"name": "report_result", "args": {"answer": a + b if right else a + b + 10}}]}


run = Run(model=scripted_unless_credentials(script))


def correct(question: Sum, result: Result) -> bool:
    a, b = (int(n) for n in question.text.split(" + "))
    return result.answer == a + b""",
    ),
    (
        "md",
        """\
## Repeats

`epochs=3` runs every input three times, each repeat its own record. `results[i]` is input i's first repeat;
`results.repeats[i]` has all three. Scores are per input (the mean of its repeats'), and the `agree` column says how
many of an input's repeats gave its most common answer.""",
    ),
    (
        "code",
        """\
results = await run.map(quick, drills, score=correct, epochs=3)""",
    ),
    (
        "code",
        """\
print("consistency:", [round(c, 2) for c in results.consistency])
print("mean score:", results.score_interval.text())""",
    ),
    (
        "md",
        """\
## A judge

A score Python cannot compute needs a model. `judge(grader, rubric)` makes a score that runs one step of the
`grader` role per item; its reporting payload has a `score` and a `reasoning` (here `Verdict`). The verdicts are
recorded with the map's items, numbered by item and repeat, and replayed with them; the table shows each item's
verdict.""",
    ),
    (
        "code",
        """\
rubric = "Right when the answer is the sum of the two numbers."
graded = await run.map(careful, checks, score=judge(grader, rubric))""",
    ),
    (
        "md",
        """\
## A difference that is noise, and one that is real

`run.compare` runs each variant over the same inputs. Under the grid, each pair of variants gets its paired
difference (over the inputs both scored) with a 95% interval, from a bootstrap over inputs, and a sentence. Quick
against careful on 30 inputs: 0.50 against 0.55 is a real difference of 0.05, but 30 inputs cannot show it.""",
    ),
    (
        "code",
        """\
noise = await run.compare({"quick": quick, "careful": careful}, sums, score=correct, name="noise")
print(noise.sentences[0])""",
    ),
    (
        "md",
        """\
Quick against checked, on 30 other inputs: a difference of a third shows at 30 inputs. With more than two
variants, each pair's interval is Bonferroni-corrected for the number of pairs, and the sentence says so.""",
    ),
    (
        "code",
        """\
real = await run.compare({"quick": quick, "checked": checked}, more_sums, score=correct, name="real")
print(real.sentences[0])""",
    ),
]


MCP_TOOLS = [
    (
        "md",
        """\
# 10. MCP servers as tools

The [Model Context Protocol](https://modelcontextprotocol.io) (MCP) lets a program offer tools to any agent host.
A role takes MCP servers beside its own tools, one line each: the agent is offered the server's tools with their
names, descriptions and JSON Schemas, and its calls go to the server.

`examples/mcp_server.py` is a small server written with the `mcp` package's own server class: it converts units
(`convert`) and keeps notes (`add_note`, `read_note`). `MCPServer.stdio` says how to start it; nothing starts until
a step needs it. This notebook was recorded with that server running. Replayed, it needs neither the server nor the
`mcp` SDK (only `jsonschema`, which checks the recorded arguments again): each step's recording keeps a snapshot of
the tools it was offered and the results it got.""",
    ),
    (
        "code",
        "import sys\n"
        + imports("MCPServer", "Role", "Run", "describe", "reporting_tool", "scripted_unless_credentials"),
    ),
    (
        "code",
        """\
units = MCPServer.stdio("units", sys.executable, ["../examples/mcp_server.py"], prefix="units_")""",
    ),
    (
        "md",
        """\
The `prefix` goes before each tool's name as the agent sees it (`units_convert`), so two servers' tools cannot
collide. Only the server's name reaches a recording: its command and arguments (and any `env` or HTTP `headers`)
never do.

**Approvals.** A server may describe its tools with *hints*: this one marks `convert` and `read_note` read-only
and says nothing of `add_note`, which the protocol then counts as possibly destructive. `ask_destructive=True`
asks a person before every call of such a tool. Hints come from the server, so they are untrusted: they can add an
approval, never remove one. `mcp_approvals` states policies by name or pattern (`{"units_add_*": "ask"}`), as
`tool(..., approval=...)` does for a role's own tools.""",
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer, in one sentence.")


planner = Role(
    "trip_planner",
    "Answer with the tools: convert distances, and keep a note of what you found.",
    tools=[reporting_tool("report", "Hand back the answer.", Answer)],
    mcp=[units],
    ask_destructive=True,
)""",
    ),
    (
        "md",
        """\
The agent converts a distance (read-only: it runs at once), then keeps a note (it waits for approval). In
JupyterLab the note's call is drawn inside the running cell with **Approve**, **Edit…**, **Deny…** and **Always
approve this tool**. When this notebook was recorded nobody sat at it, so `AGL_NOTEBOOK_APPROVALS=approve`
decided; the view says who did.""",
    ),
    (
        "code",
        """\
SCRIPT = [
    {
        "text": "First the distance in miles.",
        "calls": [{"name": "units_convert", "args": {"amount": 42.195, "source": "km", "target": "mi"}}],
    },
    {
        "text": "Now I keep a note of it.",
        "calls": [{"name": "units_add_note", "args": {"title": "marathon", "text": "42.195 km is 26.2187 mi."}}],
    },
    {"calls": [{"name": "report", "args": {"text": "A marathon, 42.195 km, is 26.2187 miles; I noted it."}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
answer = await run.step(planner, "How many miles is a marathon? Keep a note.")
answer""",
    ),
    (
        "md",
        """\
What the agent read back from the server: `convert`'s structured result as JSON, and `add_note`'s text.""",
    ),
    (
        "code",
        """\
for message in run.outcomes[-1].transcript:
    for block in message.content:
        if block.type == "tool_result":
            print(("ERROR " if block.is_error else "") + block.content)""",
    ),
    (
        "md",
        """\
**The server's own questions (elicitation).** A server may ask the person something in the middle of a call.
`clear_notes` asks before it removes anything: confirm, and the title of a note to keep, if any. The question is
drawn in the running cell as a form of the server's fields, with **Accept**, **Decline** and **Cancel** (the
protocol's answers: the fields sent; "no"; the question dismissed). The answer is checked against the server's
schema before it goes back, it is kept in the step's recording with the call that caused it, and a replay shows it
again without asking. When this notebook was recorded nobody sat at it: `AGL_NOTEBOOK_ANSWERS` answered
(`[["Accept", true, ""]]`: accept, yes, keep none). `clear_notes` is also destructive, so it is approved first.""",
    ),
    (
        "code",
        """\
CLEAR = [
    {"text": "I clear the notes; the server asks you first.", "calls": [{"name": "units_clear_notes", "args": {}}]},
    {"calls": [{"name": "report", "args": {"text": "The notes are cleared."}}]},
]
cleared = await Run(model=scripted_unless_credentials(CLEAR)).step(planner, "Clear the notes.")
cleared""",
    ),
    (
        "md",
        """\
**Replay with the server gone.** Running this notebook again replays the step from its recording: the tools come
from the snapshot kept with it, the recorded approval is shown again, and no server process starts (mode
`replay` starts none; mode `auto` tries once, and replays if the command cannot start). If the server's tools
change, a step in mode `auto` misses and `%agl explain` names the tool that changed (`differs in: mcp:...`).
docs/mcp.md says more.""",
    ),
]


IMAGES = [
    (
        "md",
        """\
# 15. Images and documents

Agents read photos, charts, scans and PDFs, and tools return them. A payload field can be an `Image` (PNG, JPEG,
GIF, WebP) or a `Document` (PDF, plain text), made from a path, bytes or a URL. The model is sent each one as a
content block beside the JSON of the rest of the input (never as JSON text); the view draws a thumbnail of the
original bytes and a chip for a document; the record keeps each one once, by its digest.

The recordings were made with the scripted model; set `ANTHROPIC_API_KEY` and the same cells run live on Claude.""",
    ),
    (
        "code",
        imports(
            "Claude",
            "Document",
            "Image",
            "InputError",
            "Role",
            "Run",
            "ToolResult",
            "describe",
            "reporting_tool",
            "role",
            "scripted_unless_credentials",
            "tool",
        ),
    ),
    (
        "md",
        """\
An inspection takes a photo of a part and its inspection sheet (a PDF). Each is read when a step checks it, before
any request: its media type from its bytes, its size in pixels or pages, against the API's limits.""",
    ),
    (
        "code",
        """\
@dataclass(frozen=True)
class Inspection:
    photo: Image = describe("The photo of the gauge.")
    sheet: Document = describe("The inspection sheet.")
    question: str = describe("What to check.")


@dataclass(frozen=True)
class Finding:
    reading: str = describe("What the gauge reads.")
    within_limits: bool = describe("Whether the reading is within the sheet's limits.")


photo = Image("media/gauge.png")
sheet = Document("media/inspection.pdf", title="Inspection sheet 7")
print(photo.media_type, photo.pixels, f"about {photo.estimated_tokens} tokens")
print(sheet.media_type, sheet.pages, "pages")""",
    ),
    (
        "md",
        """\
A tool can return images beside its text: `ToolResult(text, images=[...])`. They go back to the model inside the
tool's result. This one draws a bar chart of the last readings (a PNG made by hand, so the notebook needs no
plotting library).""",
    ),
    (
        "code",
        """\
import struct
import zlib

READINGS = [4.1, 4.3, 4.2, 4.8, 5.6]


def bar_chart(values: list[float], width: int = 60, height: int = 40) -> bytes:
    top = max(values)
    rows = []
    for y in range(height):
        row = bytearray()
        for x in range(width):
            bar = x * len(values) // width
            filled = (height - y) <= values[bar] / top * height and x % (width // len(values)) > 1
            row += bytes((40, 90, 200) if filled else (250, 250, 250))
        rows.append(b"\\x00" + bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(rows))
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


@dataclass(frozen=True)
class History:
    last: int = describe("How many of the latest readings to chart.")


async def chart_readings(history: History) -> ToolResult:
    shown = READINGS[-history.last :]
    return ToolResult(f"The last {len(shown)} readings: {shown}", images=[Image(bar_chart(shown))])


@role(model=Claude.SONNET, accepts=(Inspection,))
def inspector() -> Role[Finding]:
    return Role(
        name="inspector",
        instructions="Read the gauge in the photo, check it against the sheet's limits, and look at the trend.",
        tools=[tool("chart_readings", "Chart the latest readings.", History, chart_readings),
               reporting_tool("report_finding", "Report the finding.", Finding)],
    )""",
    ),
    (
        "code",
        """\
SCRIPT = [
    {"text": "The gauge reads about 5.6 bar; the sheet allows 3.5 to 5.0. Let me look at the trend.",
     "calls": [{"name": "chart_readings", "args": {"last": 5}}]},
    {"calls": [{"name": "report_finding", "args": {"reading": "5.6 bar, rising", "within_limits": False}}]},
]
run = Run(model=scripted_unless_credentials(SCRIPT))
finding = await run.step(inspector, Inspection(photo, sheet, "Is the pressure within limits?"))
finding""",
    ),
    (
        "md",
        """\
The view shows the photo as a thumbnail (its original bytes, scaled by the page), the sheet as a chip, and the
chart under the tool call. An image over 64 KB is drawn as a placeholder with its size and digest instead, so a saved
notebook grows by at most that much per image.

What the model was sent first: each attachment after a line naming it, then the JSON of the rest of the input, in
which each attachment is only a label.""",
    ),
    (
        "code",
        """\
first = run.outcomes[-1].transcript[0]
print([block.type for block in first.content])
print(first.content[-1].text)""",
    ),
    (
        "md",
        """\
**Bad input** is an `InputError` naming the field, before any request: a path that cannot be read, a media type the
API does not take, an image over 5 MB or 8000 px on a side, a PDF over 100 pages or 32 MB.""",
    ),
    (
        "code",
        """\
try:
    await run.step(inspector, Inspection(Image("media/missing.png"), sheet, "?"))
except InputError as error:
    print(error)""",
    ),
    (
        "md",
        """\
**Replay.** The record keeps each image and document once, by its SHA-256 digest (one over 32 KB in a file beside
the notebook, under `agl_blobs/`), and the fingerprint covers the digest: one changed pixel is a different input,
and the step runs live again (mode `replay` refuses it, naming the input as what differs). An image given by URL is
fingerprinted by its URL: a changed picture behind the same URL replays the old answer. docs/images.md says more.""",
    ),
    (
        "code",
        """\
changed = bytearray(photo.data)
changed[-20] ^= 1  # one byte of the last row's pixels
try:
    await run.step(inspector, Inspection(Image(bytes(changed)), sheet, "Is the pressure within limits?"), mode="replay")
except Exception as error:
    print(type(error).__name__, "- differs in:", error.differing)""",
    ),
]


FORKING = [
    (
        "md",
        """\
# 14. Forking a step at a turn

An agent often goes wrong late. Instead of running the whole step again, **fork** it: its first turns are replayed
from its record (no model call, no tool call), and the step goes on live from the turn you choose, with the role as
it is now. docs/forking.md says more.""",
    ),
    ("code", imports("Role", "Run", "ToolResult", "describe", "reporting_tool", "scripted_unless_credentials", "tool")),
    (
        "code",
        """\
@dataclass(frozen=True)
class Question:
    text: str = describe("The question about the pump.")


@dataclass(frozen=True)
class Page:
    n: int = describe("Which page of the manual to read, from 1.")


@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer, in one or two sentences.")


MANUAL = {1: "Start the pump with the red switch.", 2: "Prime it with water first.", 3: "Never run it dry."}
pages_read = []


async def read_page(page: Page) -> ToolResult:
    pages_read.append(page.n)
    return ToolResult(MANUAL.get(page.n, "There is no such page."))


def reader_role(instructions: str) -> Role[Answer]:
    return Role(
        name="reader",
        instructions=instructions,
        accepts=(Question,),
        tools=[tool("read_page", "Read one page of the pump's manual.", Page, read_page),
               reporting_tool("answer", "Answer the question.", Answer)],
    )


def reading(request):
    turn = sum(1 for message in request.messages if message.role == "assistant")
    if turn < 3:
        return {"text": f"Reading page {turn + 1}.", "calls": [{"name": "read_page", "args": {"n": turn + 1}}]}
    answer = "Prime the pump with water, then press the red switch."
    if "safety" in request.system:
        answer += " Never run it dry."
    return {"calls": [{"name": "answer", "args": {"text": answer}}]}""",
    ),
    (
        "md",
        """\
The step reads three pages, then answers. Its view ends with **Fork this step at a turn**: the code that forks its
record after each turn.""",
    ),
    (
        "code",
        """\
reader = reader_role("Answer questions about the pump from its manual.")
run = Run(model=scripted_unless_credentials(reading))
first = await run.step_outcome(reader, Question("How do I start the pump?"))
first.result""",
    ),
    (
        "md",
        """\
The answer left out the safety warning. Change the instructions and fork at turn 2: turns 1 and 2 (pages 1 and 2)
come from the record, so only page 3 is read again, and only turns 3 and 4 are asked of the model. The replayed
turns were written under the old instructions; the view draws them in a dashed box and says where the fork began.
(Live, `pages_read` is `[3]` after this cell; replayed, nothing runs and it stays empty.)""",
    ),
    (
        "code",
        """\
pages_read.clear()
reader = reader_role("Answer questions about the pump from its manual. End with its safety warning.")
answer = await run.step(reader, fork_from=first, at_turn=2)
answer""",
    ),
    (
        "md",
        """\
The fork is a record of its own (the record it forked stays as it was): run the cell again, or the whole notebook
after a restart, and it replays with no model call. A fork on another model, with other thinking settings, past the
record's turns, or without a tool the replayed turns called is refused before any request.""",
    ),
]

ITERATING_V1 = '''INSTRUCTIONS = """You label product reviews.
Say whether each one is positive or negative."""'''

ITERATING_V2 = '''INSTRUCTIONS = """You label product reviews.
Say whether each one is positive, negative or mixed (it praises one thing and complains of another)."""'''

ITERATING = [
    (
        "md",
        """\
# 16. Iterating: what did my change do?

Designing an agent is a loop: change the instructions, a tool or the model, run again, judge the difference. Each
step's record keeps what its agent was told (instructions, tools, settings: each long text once per notebook), so
when a cell runs again after an edit, its new record says **what changed since its previous version**: the parts
that differ, the instructions as a line diff, the result field by field. The view shows it, collapsed, under the
step; it is part of the record, so a replay draws the same.

This notebook was recorded twice: first with the instructions saying *positive or negative*, then with the cell
below edited to add *mixed*. What you see is the second run, beside the first.""",
    ),
    ("code", imports("Claude", "Role", "Run", "describe", "reporting_tool", "role", "scripted_unless_credentials")),
    (
        "code",
        """\
@dataclass(frozen=True)
class Review:
    text: str = describe("A product review, as the customer wrote it.")


@dataclass(frozen=True)
class Label:
    sentiment: str = describe("positive, negative, or another label the instructions name.")
    reason: str = describe("Why, in one sentence.")""",
    ),
    ("md", "The instructions, in a cell of their own: the cell this notebook's second recording edited."),
    ("code", ITERATING_V2),
    (
        "code",
        """\
@role(model=Claude.HAIKU, accepts=(Review,))
def labeller() -> Role[Label]:
    return Role(
        name="labeller",
        instructions=INSTRUCTIONS,
        tools=[reporting_tool("report_label", "Report the label.", Label)],
    )


def script(request):
    # Offline, a scripted model stands in for Claude: it reads its instructions, as Claude would.
    text = request.messages[0].text.split('"text": ', 1)[1].strip('"}\\n ')
    words = text.lower()
    praise = any(w in words for w in ("good", "love", "great"))
    complaint = any(w in words for w in ("dies", "broke", "slow"))
    if praise and complaint and "mixed" in request.system:
        label, reason = "mixed", f"It praises one thing and complains of another: {text}"
    else:
        label = "positive" if praise else "negative"
        reason = f"The review is {label} overall: {text}"
    return {"calls": [{"name": "report_label", "args": {"sentiment": label, "reason": reason}}]}


run = Run(model=scripted_unless_credentials(script))""",
    ),
    (
        "md",
        """\
One step. Open **Changed since the previous version** under it: the instructions' diff, and the result before and
after (the reason, a longer text, as a word diff).""",
    ),
    ("code", 'await run.step(labeller, Review("The screen is good but the battery dies by noon."))'),
    (
        "md",
        """\
A map does the same for every item: the items that ran live because the role changed are paired with their previous
versions (same role, input and occurrence), and the summary counts what improved, regressed, stayed the same, newly
failed or newly passed, with the mean score before and after, each with its 95% interval, and the paired
difference said in a sentence. The changed items are listed first, with their previous result and score.""",
    ),
    (
        "code",
        """\
reviews = [
    Review("I love it, works great"),
    Review("It broke in a week"),
    Review("Good price but so slow"),
    Review("Great sound but the strap broke"),
    Review("Slow and it broke"),
    Review("Good value, love the colour"),
    Review("Love the design but the battery dies fast"),
    Review("It is good"),
]
expected = ["positive", "negative", "mixed", "mixed", "negative", "positive", "mixed", "positive"]


def right(review: Review, label: Label) -> bool:
    return label.sentiment == expected[reviews.index(review)]


results = await run.map(labeller, reviews, score=right)""",
    ),
    (
        "md",
        """\
`results.vs_previous()` gives the pairs as a DataFrame, and `results.compared` the counts and intervals.""",
    ),
    ("code", 'results.vs_previous()[["index", "outcome", "previous_result", "result", "previous_score", "score"]]'),
    (
        "md",
        """\
`%agl history` (or `agl-notebook history NOTEBOOK` in a terminal) lists each cell's versions newest first, with what
changed and the result; `%agl diff A B` shows any two. A version a `refresh` replaced is kept inside the new record
(`ID~1`); keeping more than the current and the previous version is opt-in: `%agl versions 3`. docs/iterating.md
says more.""",
    ),
]

EDITS = {"16_iterating.ipynb": (4, ITERATING_V1)}
"""Notebooks recorded twice: first with this cell's source (by index) in place of the one written, then as written."""


NOTEBOOKS = {
    "01_first_step.ipynb": FIRST_STEP,
    "02_tools_and_retries.ipynb": TOOLS,
    "03_asking_questions.ipynb": QUESTIONS,
    "04_recordings_and_replay.ipynb": REPLAY,
    "05_testing_offline.ipynb": TESTING,
    "06_client_tools.ipynb": CLIENT_TOOLS,
    "07_json_functions.ipynb": FUNCTIONS,
    "08_map.ipynb": MAP,
    "09_thinking.ipynb": THINKING,
    "10_mcp_tools.ipynb": MCP_TOOLS,
    "11_models_side_by_side.ipynb": MODELS,
    "12_evaluating.ipynb": EVALUATING,
    "13_server_tools.ipynb": SERVER_TOOLS,
    "14_forking.ipynb": FORKING,
    "15_images_and_documents.ipynb": IMAGES,
    "16_iterating.ipynb": ITERATING,
}

ANSWERS = {
    "03_asking_questions.ipynb": ["Saturday", ["Birch", True]],
    "06_client_tools.ipynb": ["Lisbon"],
    "10_mcp_tools.ipynb": [["Accept", True, ""]],
}
"""The person's answers to the questions asked while recording."""

APPROVALS = {"10_mcp_tools.ipynb": "approve"}
"""What decides the tool calls waiting for approval while recording (``agl-notebook execute --approvals``)."""


def write(name: str, cells: list[tuple[str, str]]) -> Path:
    """Write one notebook, without outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(text) if kind == "md" else nbformat.v4.new_code_cell(text) for kind, text in cells
    ]
    for index, cell in enumerate(nb.cells):  # stable ids keep diffs of regenerated notebooks small
        cell["id"] = f"{Path(name).stem[:2]}-{index:02d}"
    path = HERE / name
    nbformat.write(nb, path)
    return path


def main() -> int:
    """Write and record the notebooks named on the command line, or all of them."""
    from agl_notebook.cli import main as agl_notebook
    from agl_notebook.notebook.terminal import ANSWERS_VARIABLE

    chosen = [n for n in NOTEBOOKS if not sys.argv[1:] or n in sys.argv[1:]]
    for name in chosen:
        path = write(name, NOTEBOOKS[name])
        # The kernel inherits this environment: its questions take these answers, in order.
        os.environ.pop(ANSWERS_VARIABLE, None)
        if name in ANSWERS:
            os.environ[ANSWERS_VARIABLE] = json.dumps(ANSWERS[name])
        approvals = ["--approvals", APPROVALS[name]] if name in APPROVALS else []
        if name in EDITS:  # recorded first as it was before the edit, so the second recording has a previous version
            index, before = EDITS[name]
            written = nbformat.read(path, as_version=4)
            after, written.cells[index].source = written.cells[index].source, before
            nbformat.write(written, path)
            if agl_notebook(["execute", str(path), "--record", *approvals]) != 0:
                return 1
            edited = nbformat.read(path, as_version=4)
            edited.cells[index].source = after
            nbformat.write(edited, path)
        if agl_notebook(["execute", str(path), "--record", *approvals]) != 0:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
