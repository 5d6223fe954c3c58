"""Reliability (docs/reliability.md): an untrusted notebook's recordings are data only.

A record is made live with hostile strings in its input, the model's text, tool arguments and results, a question
and its answer and the result; then crafted (its claimed backend and cell id replaced by hostile strings, and a
second, wholly hand-written record added) and saved in a notebook's metadata and in a JSON file. Reading and replaying
it must run no code, open no file outside the notebook's folder, draw none of the markup raw, and state the backend
only as what the record claims.
"""

from __future__ import annotations

import builtins
import html
import io
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, Run, Screen, ScriptedModel, TextInput, ToolResult, describe, reporting_tool, tool
from agl_notebook.models.scripted import TurnLike
from agl_notebook.notebook.nbfile import METADATA_KEY, read_notebook_json, records_in_notebook
from agl_notebook.payloads import JsonObject
from agl_notebook.replay import JsonFileStore, StepRecord
from agl_notebook.replay.records import block_to_json
from agl_notebook.replay.stores import MemoryStore
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Query
from tests.support.widgets import FakeDisplay, views_on

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

SCRIPT_TAG = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_URL = "javascript:alert(document.cookie)"
TEMPLATE = "{{7*7}}"
PY = "__import__('os').system('id')"
PASSWD = "../../etc/passwd"
HOSTILE = (SCRIPT_TAG, IMG, JS_URL, TEMPLATE, PY, PASSWD)
EVERYTHING = " ".join(HOSTILE)
CLAIMED_BACKEND = f"anthropic:{SCRIPT_TAG}{IMG} {JS_URL}"


@dataclass(frozen=True)
class Verdict:
    summary: str = describe("The verdict.")
    link: str = describe("A link.")


def which(text: str) -> Screen[str]:
    return Screen(text, [TextInput(f"Answer {IMG}")])


def hostile_role(run: Run, called: list[str]) -> Role[Verdict]:
    async def look_up(query: Query) -> ToolResult:
        called.append(query.text)
        answer = await run.terminal.show(which, text=f"Which one? {EVERYTHING}")
        return ToolResult(f"result {EVERYTHING} / answer {answer}")

    return Role(
        name="judge",
        instructions="Judge.",
        tools=[tool("look_up", "Look it up.", Query, look_up), reporting_tool("verdict", "Give the verdict.", Verdict)],
    )


SCRIPT: list[TurnLike] = [
    {"text": f"Model text {EVERYTHING}", "calls": [{"name": "look_up", "args": {"text": EVERYTHING}}]},
    {"calls": [{"name": "verdict", "args": {"summary": EVERYTHING, "link": JS_URL}}]},
]
INPUT = Query(EVERYTHING)


class Tripwire(AssertionError):
    """Replay did something a recording must never make it do."""


@contextmanager
def guarded(folder: Path, opened: list[str]) -> Iterator[None]:
    """While active: any attempt to run code or a command fails loudly; every file opened is noted and must be in
    ``folder``. Only around the read or replay call itself, so pytest and asyncio keep their own eval/exec."""

    def refuse(name: str) -> Any:
        def tripped(*args: Any, **kwargs: Any) -> Any:
            raise Tripwire(f"replay called {name}{args!r}")

        return tripped

    real_open, real_os_open = io.open, os.open

    def checked(path: Any) -> None:
        if isinstance(path, int):
            return
        resolved = Path(os.fsdecode(path)).resolve()
        opened.append(str(resolved))
        if not resolved.is_relative_to(folder.resolve()):
            raise Tripwire(f"replay opened {resolved}, outside {folder}")

    def open_(file: Any, *args: Any, **kwargs: Any) -> Any:
        checked(file)
        return real_open(file, *args, **kwargs)

    def os_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        checked(path)
        return real_os_open(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "system", refuse("os.system"))
        mp.setattr(os, "popen", refuse("os.popen"))
        mp.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
        mp.setattr(builtins, "eval", refuse("eval"))
        mp.setattr(builtins, "exec", refuse("exec"))
        mp.setattr(builtins, "__import__", _no_new_imports(builtins.__import__, refuse))
        mp.setattr(builtins, "open", open_)
        mp.setattr(io, "open", open_)
        mp.setattr(os, "open", os_open)
        yield


def _no_new_imports(real: Any, refuse: Any) -> Any:
    import sys

    def importing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name not in sys.modules and name.split(".")[0] in ("os", "subprocess", "pty", "shutil", "socket"):
            refuse(f"__import__({name!r})")()
        return real(name, *args, **kwargs)

    return importing


class Tags(HTMLParser):
    """Every tag and attribute in a piece of HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.values: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attributes.add(name)
            self.values.append(value or "")


def assert_html_is_inert(page: str) -> None:
    for raw in ("<script", "<img", "onerror=alert(1)>"):
        assert raw not in page, raw
    parsed = Tags()
    parsed.feed(page)
    assert parsed.tags <= {
        "div",
        "b",
        "span",
        "details",
        "summary",
        "pre",
        "code",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "br",
        "i",
        "ul",
        "li",
    }, parsed.tags
    assert parsed.attributes <= {"class", "style", "title"}, parsed.attributes
    assert not any("javascript:" in v or "alert" in v for v in parsed.values)


async def recorded(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A live recording, crafted, saved in a notebook (metadata) and a JSON file inside ``tmp_path/nb``."""
    called: list[str] = []
    run = Run(model=ScriptedModel(SCRIPT), answers=[f"answer {EVERYTHING}"])
    assert await run.step(hostile_role(run, called), INPUT) == Verdict(EVERYTHING, JS_URL)
    assert called == [EVERYTHING]
    (record,) = run.store.records()
    data = record.to_json()
    data["backend"] = CLAIMED_BACKEND  # what the record claims; not part of its id
    data["cell_id"] = PASSWD
    crafted: JsonObject = {
        **data,
        "id": "crafted",
        "role": SCRIPT_TAG,
        "backend": f"file://{PASSWD}",
        "input": {"__class__": PY, "path": PASSWD},
        "result": {TEMPLATE: IMG},
        "transcript": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": PASSWD, "name": PY, "input": {"cmd": PY}}]}
        ],
    }
    folder = tmp_path / "nb"
    folder.mkdir()
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": [],
        "metadata": {METADATA_KEY: {"version": 1, "records": [data, crafted]}},
    }
    (folder / "hostile.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (folder / "records.json").write_text(json.dumps({"version": 1, "records": [data, crafted]}), encoding="utf-8")
    return data, folder


def replay_run(store: Any, displays: list[FakeDisplay]) -> Run:
    return Run(model=ScriptedModel(SCRIPT), store=store, mode="replay", answers=[], view=views_on(displays))


async def replay_and_check(store: Any, folder: Path, opened: list[str]) -> None:
    displays: list[FakeDisplay] = []
    run = replay_run(store, displays)
    called: list[str] = []
    role = hostile_role(run, called)
    with guarded(folder, opened):
        result = await run.step(role, INPUT)
    assert result == Verdict(EVERYTHING, JS_URL)  # the strings come back as data, untouched
    assert called == []  # no tool ran, no question was asked
    ((bundle, metadata),) = displays[0].shown
    plain, page = bundle["text/plain"], bundle["text/html"]
    # Provenance is said as a claim ("recorded with ..."); which claim it shows is checked below.
    assert "recorded with " in plain
    assert "What the recording says it was made with" in page
    assert_html_is_inert(page)
    # Every hostile string was drawn, escaped, and none was evaluated ({{7*7}} stays as written).
    for hostile in HOSTILE:
        assert html.escape(hostile, quote=True) in page, hostile
    assert TEMPLATE in page
    assert metadata[METADATA_KEY]["records"][0]["backend"] == CLAIMED_BACKEND


async def test_a_crafted_record_in_notebook_metadata_replays_as_data_only(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    data, folder = await recorded(tmp_path)
    opened: list[str] = []
    with guarded(folder, opened):
        found = records_in_notebook(read_notebook_json(folder / "hostile.ipynb"))
    assert opened == [str((folder / "hostile.ipynb").resolve())]
    assert set(found.records) == {data["id"], "crafted"}
    assert found.records[data["id"]].backend == CLAIMED_BACKEND
    assert found.records[data["id"]].cell_id == PASSWD  # a string, never used as a path
    await replay_and_check(MemoryStore(list(found.records.values())), folder, opened)
    assert opened == [str((folder / "hostile.ipynb").resolve())]  # replay itself opened nothing
    reliability.note(
        "Untrusted notebooks",
        "a crafted record in notebook metadata: script tags, event handlers, "
        "javascript: URLs, template syntax, Python source and paths outside the folder in every string",
        "replayed as data: no code run (os.system, subprocess, eval, exec guarded), no file opened "
        "but the notebook, the strings come back untouched, the HTML holds no live markup",
    )


async def test_a_crafted_record_in_a_json_file_store_replays_as_data_only(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    _, folder = await recorded(tmp_path)
    opened: list[str] = []
    store = JsonFileStore(folder / "records.json")
    await replay_and_check(store, folder, opened)
    assert set(opened) == {str((folder / "records.json").resolve())}
    assert store.problem is None
    reliability.note(
        "Untrusted notebooks",
        "the same crafted record in a JSON recordings file",
        "replayed as data; only the recordings file is opened",
    )


async def test_the_hand_written_record_draws_inert_html(tmp_path: Path, reliability: ReliabilityNotes) -> None:
    from agl_notebook.events import StepReplayed, StepStarted
    from agl_notebook.notebook.render import StepTrace
    from agl_notebook.notebook.view import final_bundle

    _, folder = await recorded(tmp_path)
    record: StepRecord = records_in_notebook(read_notebook_json(folder / "hostile.ipynb")).records["crafted"]
    trace = StepTrace(record.role)
    trace.apply(StepStarted(record.role, record.input, record.backend))
    trace.apply(StepReplayed(record.role, record.id, record.backend))
    trace.state = "finished"
    bundle = final_bundle(trace, ())
    assert_html_is_inert(bundle["text/html"])
    assert f"recorded with file://{PASSWD}" in bundle["text/plain"]
    assert html.escape(SCRIPT_TAG) in bundle["text/html"]
    reliability.note(
        "Untrusted notebooks",
        "a hand-written record whose role is a script tag and whose backend claims a file:// path",
        'drawn escaped; the claim shown as "recorded with ...", never used',
    )


async def test_a_replayed_view_states_the_backend_the_record_claims(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    _, folder = await recorded(tmp_path)
    displays: list[FakeDisplay] = []
    run = replay_run(JsonFileStore(folder / "records.json"), displays)
    await run.step(hostile_role(run, []), INPUT)
    ((bundle, _),) = displays[0].shown
    assert f"recorded with {CLAIMED_BACKEND}" in bundle["text/plain"]
    assert html.escape(f"recorded with {CLAIMED_BACKEND}", quote=True) in bundle["text/html"]
    assert_html_is_inert(bundle["text/html"])
    reliability.note(
        "Untrusted notebooks",
        "a record claiming a backend other than the one running",
        'the view states provenance as the record\'s claim ("recorded with ..."), not as fact',
    )


def test_the_guard_itself_trips(tmp_path: Path) -> None:
    opened: list[str] = []
    with guarded(tmp_path, opened):
        for attempt in (
            lambda: os.system("true"),
            lambda: eval("1"),
            lambda: subprocess.Popen(["true"]),
            lambda: open("/etc/hostname"),  # noqa: SIM115
        ):
            with pytest.raises(Tripwire):
                attempt()
    assert opened == [str(Path("/etc/hostname").resolve())]


def test_the_block_written_back_keeps_the_hostile_strings_verbatim_as_json(reliability: ReliabilityNotes) -> None:
    # Writing a record back is JSON serialisation only: nothing is interpreted on the way out either.
    record = StepRecord(
        id="x",
        parts={},
        occurrence=0,
        role=SCRIPT_TAG,
        backend=CLAIMED_BACKEND,
        input=PY,
        result={TEMPLATE: IMG},
        transcript=(),
    )
    text = json.dumps(block_to_json([record]))
    assert json.loads(text)["records"][0]["result"] == {TEMPLATE: IMG}
    reliability.note(
        "Untrusted notebooks",
        "writing a record of hostile strings back to a notebook",
        "JSON serialisation only: the strings round-trip verbatim, nothing interpreted",
    )
