"""Replay: fingerprints and occurrences, the record format and stores, modes, secrets, corrupt files."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import (
    Claude,
    InputError,
    Role,
    Run,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
    ToolResult,
    describe,
    reporting_tool,
    tool,
)
from agl_notebook import events as ev
from agl_notebook.errors import MissingCredentialsError
from agl_notebook.events import Event
from agl_notebook.models.anthropic import NO_CREDENTIALS_MESSAGE, AnthropicModel
from agl_notebook.models.base import ModelRequest
from agl_notebook.replay import (
    REDACTED,
    JsonFileStore,
    RecordingWarning,
    ReplayMissError,
    StepRecord,
    Store,
    resolve_mode,
)
from agl_notebook.replay.modes import BLOCK_VARIABLE, ENV_VAR, NBVAL_VARIABLE, session
from agl_notebook.transcript import TextBlock, ToolResultBlock
from tests.support.researcher import RESULT, SCRIPT, Answer, Request, answering, record_once, researcher
from tests.support.steps import Query


@dataclass(frozen=True)
class OtherRequest:
    text: str = describe("What to look into.")


@dataclass(frozen=True)
class QueryWithLimit:
    text: str = describe("What to look up.")
    limit: int = describe("How many results at most.")


@dataclass(frozen=True)
class AnswerWithSource:
    summary: str = describe("What was found.")
    count: int = describe("How many were found.")
    source: str = describe("Where it was found.")


def joined(events: list[Event]) -> list[Event]:
    """The events with every run of consecutive text deltas joined into one."""
    out: list[Event] = []
    for e in events:
        if isinstance(e, ev.OutputTextDelta) and out and isinstance(out[-1], ev.OutputTextDelta):
            out[-1] = ev.OutputTextDelta(out[-1].delta + e.delta)
        else:
            out.append(e)
    return out


def only(store: Store) -> StepRecord:
    records = store.records()
    assert len(records) == 1, records
    return records[0]


@pytest.fixture(autouse=True)
def _clean_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts with no mode from the environment, the magic or nbval."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(NBVAL_VARIABLE, raising=False)
    saved = session.magic_mode
    session.magic_mode = None
    try:
        yield
    finally:
        session.magic_mode = saved


# ---------------------------------------------------------------------------------------------------------------
# A recorded step replays: no model, no tool, no question; the same payload and the same events


async def test_a_recorded_step_replays_with_no_model_call_no_tool_call_and_no_question() -> None:
    model = ScriptedModel(SCRIPT)
    handled: list[str] = []
    asked_live: list[str] = []
    live_events: list[Event] = []
    live = Run(model=model, answers=answering(asked_live), on_event=live_events.append)
    live_result = await live.step(researcher(live, handled), Request("retries"))
    assert live_result == RESULT
    assert (model.calls, handled, asked_live) == (2, ["retries"], ["Which retries?"])

    asked: list[str] = []
    replay_events: list[Event] = []
    again = Run(model=model, answers=answering(asked), store=live.store, on_event=replay_events.append)
    replayed = await again.step(researcher(again, handled), Request("retries"))

    assert replayed == live_result
    assert model.calls == 2
    assert handled == ["retries"]
    assert asked == []
    record = only(live.store)
    assert again.store.records() == (record,)  # a replay writes nothing

    # The live deltas come word by word; the replay gives one delta per text block.
    assert [e.delta for e in live_events if isinstance(e, ev.OutputTextDelta)] == [
        "Let ",
        "me ",
        "look ",
        "that ",
        "up.",
        "Found ",
        "two ",
        "of ",
        "them.",
    ]
    assert [e.delta for e in replay_events if isinstance(e, ev.OutputTextDelta)] == [
        "Let me look that up.",
        "Found two of them.",
    ]
    replayed_event = ev.StepReplayed("researcher", record.id, f"scripted:{model.digest}")
    expected = joined(live_events)
    assert replay_events == [expected[0], replayed_event, *expected[1:]]
    assert [e.type for e in replay_events] == [
        "step.started",
        "step.replayed",
        "response.output_text.delta",
        "client.tool.requested",
        "client.tool.executing",
        "question.asked",
        "question.answered",
        "client.tool.result",
        "client.tool.roundtrip",
        "response.output_text.delta",
        "client.tool.requested",
        "step.reported",
        "client.tool.result",
        "step.finished",
    ]
    assert again.outcomes[0].usage == live.outcomes[0].usage
    assert again.outcomes[0].transcript == live.outcomes[0].transcript


async def test_occurrences_count_within_one_run_so_replay_needs_a_new_run_sharing_the_store() -> None:
    model = ScriptedModel(SCRIPT)
    handled: list[str] = []
    run = Run(model=model, answers=answering([]))
    assert await run.step(researcher(run, handled), Request("retries")) == RESULT
    # The same Run again: this is occurrence 1 of the step, not recorded yet, so it runs live.
    assert await run.step(researcher(run, handled), Request("retries")) == RESULT
    assert (model.calls, len(handled)) == (4, 2)
    assert sorted(r.occurrence for r in run.store.records()) == [0, 1]

    again = Run(model=model, answers=answering([]), store=run.store)
    assert await again.step(researcher(again, handled), Request("retries")) == RESULT
    assert await again.step(researcher(again, handled), Request("retries")) == RESULT
    assert (model.calls, len(handled), len(run.store.records())) == (4, 2, 2)


async def test_a_json_file_store_round_trip_replays_in_a_fresh_run(tmp_path: Path) -> None:
    path = tmp_path / "recordings.json"
    model = ScriptedModel(SCRIPT)
    live = await record_once(model, JsonFileStore(path))
    kept = only(live.store)

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1
    assert [(r["kind"], r["format"], r["id"], r["occurrence"]) for r in data["records"]] == [("step", 1, kept.id, 0)]
    assert data["records"][0]["questions"] == [
        {"tool_call_id": "toolu_00_0", "text": "Which retries?", "inputs": ["Answer"], "answer": "the slow ones"}
    ]

    fresh = JsonFileStore(path)
    assert fresh.records() == (kept,)  # nothing lost in the round trip
    handled: list[str] = []
    asked: list[str] = []
    again = Run(model=model, answers=answering(asked), store=fresh, mode="replay")
    assert await again.step(researcher(again, handled), Request("retries")) == RESULT
    assert (model.calls, handled, asked) == (2, [], [])


@pytest.mark.filterwarnings("ignore:A recording was skipped:agl_notebook.replay.stores.RecordingWarning")
def test_a_json_file_store_writes_what_json_dumps_writes_whatever_the_strings_hold(tmp_path: Path) -> None:
    # Line and paragraph separators (U+2028, U+2029, U+0085) stay raw in JSON written with ensure_ascii=False: the
    # store's kept texts must not break lines inside such strings.
    path = tmp_path / "recordings.json"
    path.write_text(json.dumps({"version": 1, "records": [{"kind": "unknown", "text": "a\u2028b"}]}), encoding="utf-8")
    store = JsonFileStore(path)
    odd = "line\u2028separator\u2029paragraph\u0085next\nnewline \u00e9\u00e8 \U0001f600"
    for n in range(3):
        store.put(
            StepRecord(
                id=f"r{n}",
                parts={},
                occurrence=n,
                role="r",
                backend="scripted:x",
                input=odd,
                result={"s": odd},
                transcript=(),
            )
        )
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert text == json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    assert [r.input for r in JsonFileStore(path).records()] == [odd] * 3
    assert data["records"][-1] == {"kind": "unknown", "text": "a\u2028b"}  # an unreadable record, kept


# ---------------------------------------------------------------------------------------------------------------
# Fingerprint parts: each one changed alone is a miss naming that part


def _miss_message(part: str, store: Store, record: StepRecord, role: str = "researcher") -> str:
    return (
        f"No recording matches this step of role {role!r} in {store!r}. The nearest (role {record.role!r}, "
        f"recorded with {record.backend}) differs in: {part}. Mode 'replay' never calls a model: run it in "
        "mode 'auto' or 'refresh' to record it."
    )


@pytest.mark.parametrize(
    ("part", "changes"),
    [
        ("role", {"name": "other_researcher"}),
        ("instructions", {"instructions": "You look things up carefully and report what you found."}),
        ("tools", {"tool_description": "Look a topic up in the index."}),
        ("tools", {"tool_payload": QueryWithLimit}),
        ("reporting", {"report_description": "Report what you found, briefly."}),
        ("reporting", {"report_payload": AnswerWithSource}),
        ("settings", {"max_tokens": 1000}),
        ("settings", {"max_tool_roundtrips": 3}),
        ("settings", {"reminders": 0}),
    ],
)
async def test_a_changed_role_part_misses_and_names_that_part(part: str, changes: dict[str, Any]) -> None:
    model = ScriptedModel(SCRIPT)
    live = await record_once(model)
    record = only(live.store)
    handled: list[str] = []
    again = Run(model=model, answers=answering([]), store=live.store, mode="replay")
    with pytest.raises(ReplayMissError) as e:
        await again.step(researcher(again, handled, **changes), Request("retries"))
    assert e.value.differing == (part,)
    assert e.value.nearest is record
    assert str(e.value) == _miss_message(part, live.store, record, changes.get("name", "researcher"))
    assert (model.calls, handled) == (2, [])


@pytest.mark.parametrize("value", [Request("timeouts"), OtherRequest("retries")], ids=["value", "type"])
async def test_a_changed_input_value_or_type_misses_and_names_the_input(value: object) -> None:
    model = ScriptedModel(SCRIPT)
    live = await record_once(model)
    again = Run(model=model, answers=answering([]), store=live.store, mode="replay")
    with pytest.raises(ReplayMissError) as e:
        await again.step(researcher(again, []), value)
    assert e.value.differing == ("input",)
    assert str(e.value) == _miss_message("input", live.store, only(live.store))
    assert model.calls == 2


async def test_a_different_script_is_a_different_backend_and_misses() -> None:
    model = ScriptedModel(SCRIPT)
    live = await record_once(model)
    other = ScriptedModel([*SCRIPT, "One more turn."])
    assert other.digest != model.digest
    again = Run(model=other, answers=answering([]), store=live.store, mode="replay")
    with pytest.raises(ReplayMissError) as e:
        await again.step(researcher(again, []), Request("retries"))
    assert e.value.differing == ("backend",)
    assert str(e.value) == _miss_message("backend", live.store, only(live.store))
    assert (model.calls, other.calls) == (2, 0)


async def test_an_identical_step_beyond_the_recorded_occurrences_misses_on_occurrence() -> None:
    model = ScriptedModel(SCRIPT)
    live = await record_once(model)
    again = Run(model=model, answers=answering([]), store=live.store, mode="replay")
    assert await again.step(researcher(again, []), Request("retries")) == RESULT
    with pytest.raises(ReplayMissError) as e:
        await again.step(researcher(again, []), Request("retries"))
    assert e.value.differing == ("occurrence",)
    assert str(e.value) == (
        f"{live.store!r} holds identical steps of role 'researcher', but not a recording for occurrence 2 of it in "
        "this cell execution (the nearest is occurrence 1). Mode 'replay' never calls a model: run it in mode "
        "'auto' or 'refresh' to record it."
    )
    assert model.calls == 2


async def test_mode_replay_with_an_empty_store_says_no_recording_exists() -> None:
    model = ScriptedModel(SCRIPT)
    events: list[Event] = []
    run = Run(model=model, answers=answering([]), mode="replay", on_event=events.append)
    with pytest.raises(ReplayMissError) as e:
        await run.step(researcher(run, []), Request("retries"))
    assert str(e.value) == (
        "No recording of a step of role 'researcher' exists in MemoryStore(0 records). Mode "
        "'replay' never calls a model: run it in mode 'auto' or 'refresh' to record it."
    )
    assert (e.value.nearest, e.value.differing) == (None, ())
    assert model.calls == 0
    assert [e.type for e in events] == ["step.started", "step.failed"]


# ---------------------------------------------------------------------------------------------------------------
# asyncio.gather: occurrences are numbered in start order, so identical steps replay into the same positions


def counting_model() -> ScriptedModel:
    counter = itertools.count()

    async def reply(request: ModelRequest) -> dict[str, Any]:
        n = next(counter)
        await asyncio.sleep(0.01 * (3 - n))  # the step started first finishes last
        return {"calls": [{"name": "report_answer", "args": {"summary": f"reply {n}", "count": n}}]}

    return ScriptedModel(reply)


COUNTER_ROLE: Role[Answer] = Role("counter", "Count.", [reporting_tool("report_answer", "Report it.", Answer)])


async def test_gathered_identical_steps_replay_in_the_recorded_order() -> None:
    model = counting_model()
    live = Run(model=model)
    results = await asyncio.gather(*(live.step(COUNTER_ROLE, "count") for _ in range(3)))
    expected = [Answer("reply 0", 0), Answer("reply 1", 1), Answer("reply 2", 2)]
    assert results == expected
    # They finished (and were recorded) in the reverse order, yet each record holds its own start position.
    assert [r.occurrence for r in live.store.records()] == [2, 1, 0]
    assert {r.occurrence: r.result for r in live.store.records()} == {
        n: {"summary": f"reply {n}", "count": n} for n in range(3)
    }

    again = Run(model=model, store=live.store, mode="replay")
    assert await asyncio.gather(*(again.step(COUNTER_ROLE, "count") for _ in range(3))) == expected
    assert model.calls == 3


# ---------------------------------------------------------------------------------------------------------------
# Modes and their precedence


def echo_model() -> ScriptedModel:
    """Looks up once, then reports the tool's result text: the result follows the person's answer."""

    def reply(request: ModelRequest) -> dict[str, Any]:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
        if not results:
            return {"calls": [{"name": "look_up", "args": {"text": "retries"}}]}
        return {"calls": [{"name": "report_answer", "args": {"summary": results[0].content, "count": 1}}]}

    return ScriptedModel(reply)


async def test_auto_records_when_not_recorded_and_replays_when_recorded() -> None:
    model = echo_model()
    handled: list[str] = []
    first = Run(model=model, answers=answering([], "first"), mode="auto")
    assert await first.step(researcher(first, handled), Request("retries")) == Answer("found first", 1)
    assert (model.calls, handled, len(first.store.records())) == (2, ["retries"], 1)

    second = Run(model=model, answers=answering([], "second"), store=first.store, mode="auto")
    assert await second.step(researcher(second, handled), Request("retries")) == Answer("found first", 1)
    assert (model.calls, handled, len(first.store.records())) == (2, ["retries"], 1)


async def test_refresh_runs_live_and_replaces_the_record() -> None:
    model = echo_model()
    handled: list[str] = []
    first = Run(model=model, answers=answering([], "first"))
    assert await first.step(researcher(first, handled), Request("retries")) == Answer("found first", 1)
    old = only(first.store)

    fresh = Run(model=model, answers=answering([], "second"), store=first.store, mode="refresh")
    assert await fresh.step(researcher(fresh, handled), Request("retries")) == Answer("found second", 1)
    assert (model.calls, handled) == (4, ["retries", "retries"])
    new = only(first.store)
    assert new.id == old.id
    assert new.result == {"summary": "found second", "count": 1}
    assert new.questions[0].answer == "second"

    replay = Run(model=model, store=first.store, mode="replay")
    assert await replay.step(researcher(replay, handled), Request("retries")) == Answer("found second", 1)
    assert model.calls == 4


async def test_off_neither_reads_nor_writes() -> None:
    model = echo_model()
    handled: list[str] = []
    first = Run(model=model, answers=answering([], "first"))
    assert await first.step(researcher(first, handled), Request("retries")) == Answer("found first", 1)
    before = first.store.records()

    off = Run(model=model, answers=answering([], "second"), store=first.store, mode="off")
    assert await off.step(researcher(off, handled), Request("retries")) == Answer("found second", 1)
    assert (model.calls, handled) == (4, ["retries", "retries"])
    assert first.store.records() == before

    alone = Run(model=model, answers=answering([], "third"), mode="off")
    assert await alone.step(researcher(alone, handled), Request("retries")) == Answer("found third", 1)
    assert alone.store.records() == ()


async def test_mode_precedence_is_step_then_run_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(SCRIPT)
    # Default: auto, so a miss runs live and records.
    default = Run(model=model, answers=answering([]))
    assert await default.step(researcher(default, []), Request("retries")) == RESULT
    assert len(default.store.records()) == 1

    monkeypatch.setenv(ENV_VAR, "replay")  # the environment beats the default
    env = Run(model=model, answers=answering([]))
    with pytest.raises(ReplayMissError):
        await env.step(researcher(env, []), Request("retries"))
    assert env.store.records() == ()

    run_level = Run(model=model, answers=answering([]), mode="off")  # the Run beats the environment
    assert await run_level.step(researcher(run_level, []), Request("retries")) == RESULT
    assert run_level.store.records() == ()

    step_level = Run(model=model, answers=answering([]), mode="replay")  # the step beats the Run
    assert await step_level.step(researcher(step_level, []), Request("retries"), mode="auto") == RESULT
    assert len(step_level.store.records()) == 1
    assert model.calls == 6

    assert resolve_mode(step="refresh", run="off") == "refresh"
    assert resolve_mode(run="off") == "off"
    assert resolve_mode() == "replay"
    monkeypatch.delenv(ENV_VAR)
    assert resolve_mode() == "auto"
    assert resolve_mode(environ={ENV_VAR: " off "}) == "off"


async def test_the_magic_sits_between_the_run_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "replay")
    session.magic_mode = "off"
    assert resolve_mode() == "off"
    assert resolve_mode(run="refresh") == "refresh"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("run", "Run(mode=...): unknown mode 'bogus'; the modes are auto, replay, refresh, off."),
        ("step", "run.step(mode=...): unknown mode 'bogus'; the modes are auto, replay, refresh, off."),
        ("env", "AGL_NOTEBOOK_MODE: unknown mode 'bogus'; the modes are auto, replay, refresh, off."),
    ],
)
async def test_an_invalid_mode_is_an_input_error_naming_where_it_came_from(
    where: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(SCRIPT)
    bogus: Any = "bogus"
    if where == "env":
        monkeypatch.setenv(ENV_VAR, bogus)

    async def attempt() -> None:
        run = Run(model=model, answers=answering([]), mode=bogus if where == "run" else None)
        await run.step(researcher(run, []), Request("retries"), mode=bogus if where == "step" else None)

    with pytest.raises(InputError) as e:
        await attempt()
    assert str(e.value) == message
    assert model.calls == 0


async def test_under_nbval_the_default_is_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(SCRIPT)
    monkeypatch.setenv(NBVAL_VARIABLE, "1")
    assert resolve_mode() == "replay"
    run = Run(model=model, answers=answering([]))
    with pytest.raises(ReplayMissError):
        await run.step(researcher(run, []), Request("retries"))
    assert model.calls == 0
    monkeypatch.setenv(ENV_VAR, "auto")  # the environment still beats the default
    assert await run.step(researcher(run, []), Request("retries")) == RESULT
    assert len(run.store.records()) == 1
    assert resolve_mode(environ={}) == "auto"


def test_the_nbval_and_block_settings_are_read_when_used_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel's %env, or a variable set after agl_notebook was imported, takes effect at the next step.
    monkeypatch.delenv(BLOCK_VARIABLE, raising=False)
    assert (resolve_mode(), session.under_nbval, session.block_model_calls) == ("auto", False, False)
    monkeypatch.setenv(NBVAL_VARIABLE, "1")
    monkeypatch.setenv(BLOCK_VARIABLE, "1")
    assert (resolve_mode(), session.under_nbval, session.block_model_calls) == ("replay", True, True)


# ---------------------------------------------------------------------------------------------------------------
# Secrets never reach a record, whatever path they came by


KEY = "sk-ant-api03-" + "abcdefghij" * 4
ENV_SECRET = "supersecretvalue123"


async def test_secrets_are_scrubbed_from_every_record_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    path = tmp_path / "recordings.json"
    model = ScriptedModel(
        [
            ScriptedTurn(f"I will use {KEY} now.", [ScriptedCall("look_up", {"text": "keys"})]),
            ScriptedTurn("Done.", [ScriptedCall("report_answer", {"summary": f"used {KEY}", "count": 1})]),
        ]
    )
    run = Run(model=model, answers=answering([], f"use {KEY}"), store=JsonFileStore(path))
    role = researcher(run, [], result_text=f"token {ENV_SECRET}, key {KEY}")
    assert await run.step(role, Request(f"please use {KEY}")) == Answer(f"used {KEY}", 1)  # live: unaffected

    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert ENV_SECRET not in text
    assert REDACTED in text
    for store in (run.store, JsonFileStore(path)):
        record = only(store)
        as_json = json.dumps(record.to_json(), ensure_ascii=False)
        assert KEY not in as_json
        assert ENV_SECRET not in as_json
        assert record.input == {"text": f"please use {REDACTED}"}
        assert record.questions[0].answer == f"use {REDACTED}"
        assert record.transcript[1].content[0] == TextBlock(f"I will use {REDACTED} now.")
        assert record.transcript[2].content[0] == ToolResultBlock("toolu_00_0", f"token {REDACTED}, key {REDACTED}")
        assert record.result == {"summary": f"used {REDACTED}", "count": 1}


async def test_an_auth_header_in_a_tool_result_is_scrubbed_and_the_record_stays_readable(tmp_path: Path) -> None:
    # Scrubbing works on the record's JSON text, where the quote after a header's value is spelled \"; the value
    # must stop before that backslash, or the record's JSON breaks and the finished step fails on put().
    path = tmp_path / "recordings.json"
    model = ScriptedModel(SCRIPT)
    run = Run(model=model, answers=answering([]), store=JsonFileStore(path))
    header = 'curl -H "Authorization: Bearer abcdefghijklmnop1234" -d \'{"x-api-key": "zzzz-fake"}\''
    assert await run.step(researcher(run, [], result_text=header), Request("retries")) == RESULT
    record = only(JsonFileStore(path))
    assert record.transcript[2].content[0] == ToolResultBlock(
        "toolu_00_0", f'curl -H "Authorization: Bearer {REDACTED}" -d \'{{"x-api-key": "{REDACTED}"}}\''
    )


# ---------------------------------------------------------------------------------------------------------------
# Corrupt stores: say what is wrong, keep what is good, never lose or overwrite anything


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("truncated", ": invalid JSON at line "),
        ('{"version": 2, "records": []}\n', ".version: this version of agl_notebook reads version 1, found 2."),
        ('{"version": 1, "records": {}}\n', ".records: expected a list."),
        ("[]\n", ": expected an object with 'version' and 'records'."),
    ],
)
async def test_a_wholly_corrupt_file_is_read_as_empty_and_never_overwritten(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "recordings.json"
    model = ScriptedModel(SCRIPT)
    if content == "truncated":
        await record_once(model, JsonFileStore(path))
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    else:
        path.write_text(content, encoding="utf-8")
    before = path.read_bytes()

    store = JsonFileStore(path)
    calls = model.calls
    run = Run(model=model, answers=answering([]), store=store)
    with pytest.warns(RecordingWarning) as warned:
        assert await run.step(researcher(run, []), Request("retries")) == RESULT
    assert model.calls == calls + 2  # nothing was read, so it ran live
    assert store.problem is not None
    assert problem in store.problem
    assert [str(w.message) for w in warned] == [
        f"Recordings not read: {store.problem}",
        f"Not saved to {path}: {store.problem} The record is kept in memory for this session; fix or move the file "
        "to save recordings again.",
    ]
    assert path.read_bytes() == before
    # The record is kept in memory: a new Run on the same store replays it.
    again = Run(model=model, answers=answering([]), store=store, mode="replay")
    assert await again.step(researcher(again, []), Request("retries")) == RESULT
    assert model.calls == calls + 2


async def test_a_malformed_record_is_skipped_with_a_warning_and_kept_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "recordings.json"
    model = ScriptedModel(SCRIPT)
    store = JsonFileStore(path)
    await record_once(model, store, Request("retries"))
    await record_once(model, store, Request("timeouts"))
    data = json.loads(path.read_text(encoding="utf-8"))
    good_ids = [r["id"] for r in data["records"]]
    bad: dict[str, Any] = {"kind": "step", "format": 1, "id": "broken", "parts": "not digests", "extra": [1, {}]}
    data["records"].insert(1, bad)
    path.write_text(json.dumps(data), encoding="utf-8")

    reread = JsonFileStore(path)
    handled: list[str] = []
    replay = Run(model=model, answers=answering([]), store=reread, mode="replay")
    with pytest.warns(RecordingWarning) as warned:
        assert await replay.step(researcher(replay, handled), Request("retries")) == RESULT
    assert [str(w.message) for w in warned] == [
        f"A recording was skipped (kept in the file as it is): {path}.records[1].parts: expected an object of digests."
    ]
    assert await replay.step(researcher(replay, handled), Request("timeouts")) == RESULT  # the one after it
    assert (model.calls, handled) == (4, [])

    await record_once(model, reread, Request("deadlines"))  # a new put rewrites the file...
    assert model.calls == 6
    records = json.loads(path.read_text(encoding="utf-8"))["records"]
    assert bad in records  # ...keeping the malformed record verbatim
    assert len(records) == 4
    assert [r["id"] for r in records if r is not None and r.get("id") != "broken"][:2] == good_ids


# ---------------------------------------------------------------------------------------------------------------
# A miss on a network backend without credentials says why it had to run live, and sends nothing


@pytest.mark.parametrize("model", [AnthropicModel(model=Claude.HAIKU), Claude.HAIKU], ids=["backend", "model-id"])
async def test_a_miss_without_credentials_says_it_is_not_recorded(model: AnthropicModel | str) -> None:
    run = Run(answers=answering([]))
    events: list[Event] = []
    run.add_sink(events.append)
    role: Role[Answer] = Role("caller", "Say hello.", [reporting_tool("report_answer", "Report.", Answer)], model=model)
    with pytest.raises(MissingCredentialsError) as e:
        await run.step(role, "hello")
    message = str(e.value)
    assert message == (
        "This step is not recorded, so it must run live. No recording of a step of role 'caller' "
        f"exists in MemoryStore(0 records).\n\n{NO_CREDENTIALS_MESSAGE}"
    )
    assert "sk-ant" not in message
    assert run.store.records() == ()
    assert [event.type for event in events] == ["step.started", "step.failed"]


async def test_a_miss_without_credentials_in_refresh_mode_gives_the_backends_own_message() -> None:
    run = Run(mode="refresh")
    role: Role[Answer] = Role(
        "caller",
        "Say hello.",
        [reporting_tool("report_answer", "Report.", Answer)],
        model=AnthropicModel(model=Claude.HAIKU),
    )
    with pytest.raises(MissingCredentialsError) as e:
        await run.step(role, "hello")
    assert str(e.value) == NO_CREDENTIALS_MESSAGE


async def test_a_failed_step_gives_its_occurrence_back_so_a_retry_is_the_same_step() -> None:
    flaky = {"fail": True}

    async def look_up(query: Query) -> ToolResult:
        if flaky.pop("fail", False):
            raise ConnectionError("the docs server is down")
        return ToolResult(text="found")

    role: Role[Query] = Role(
        name="retrier",
        instructions="Look it up.",
        tools=[tool("look_up", "Look it up.", Query, look_up), reporting_tool("report", "Report.", Query)],
    )
    model = ScriptedModel(
        [
            {"calls": [{"name": "look_up", "args": {"text": "x"}}]},
            {"calls": [{"name": "report", "args": {"text": "done"}}]},
        ]
    )
    run = Run(model=model)
    with pytest.raises(ConnectionError):
        await run.step(role, "retry me")
    assert await run.step(role, "retry me") == Query("done")
    (record,) = run.store.records()
    assert record.occurrence == 0  # a fresh Run (a re-executed cell) replays it
    assert await Run(model=model, store=run.store, mode="replay").step(role, "retry me") == Query("done")


async def test_two_stores_on_one_file_keep_each_others_records(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    first, second = JsonFileStore(path), JsonFileStore(path)
    first.records(), second.records()  # both have read the (missing) file
    role: Role[Query] = Role(name="echo", instructions="Echo.", tools=[reporting_tool("report", "Report.", Query)])
    model = ScriptedModel([{"calls": [{"name": "report", "args": {"text": "done"}}]}])
    await Run(model=model, store=first).step(role, "one")
    await Run(model=model, store=second).step(role, "two")
    assert sorted(str(r.input) for r in JsonFileStore(path).records()) == ["one", "two"]
