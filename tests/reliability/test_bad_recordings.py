"""Reliability, bad recordings: notebooks whose recordings are damaged, foreign, stale or huge.

Each bad input is taken end to end: a `Run` reading the notebook file through a `NotebookStore` (what a kernel
uses), the ``agl-notebook`` command, and, where it matters, a real kernel through ``agl-notebook execute``. For every
one the test checks that the message says what is wrong and where (the file, line and column, the block, the record's
position and field), that the notebook still runs (good recordings replay, the rest runs live on a scripted model),
and that the file's bytes are unchanged unless the person asked for a write.

Found while writing this (and fixed):

- ``agl-notebook execute`` on a notebook holding 50 MB of recordings took about 24 s and 1.6 GB of memory, mostly
  in writing it back: nbformat deep-copies and converts the whole notebook (the records block included) before
  serialising it. `agl_notebook.cli._notebook_text` now writes the records block apart, byte for byte in nbformat's
  layout (about 5x faster, half the memory).
- A `NotebookStore` used outside a kernel waited a second for a frontend extension that cannot exist there.
- A records block of the wrong shape said only "expected an object"; it now says what it found (a string holding
  JSON cut short, with line and column; a string holding JSON; a list; a number), a missing version says so, and a
  version given as the string ``"1"`` says it is a string.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.cli import main
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.notebook.store import NotebookStore
from agl_notebook.replay import MemoryStore, RecordingWarning, ReplayMissError, StepRecord, block_to_json
from agl_notebook.replay.explain import recent_misses
from tests.support.oracle_notebook import SETUP, load, make_notebook, printed_calls, step_result
from tests.support.paths import ROOT
from tests.support.reliability_report import ReliabilityNotes

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

AREA = "Bad recordings"


@dataclass(frozen=True)
class Answer:
    summary: str = describe("The answer.")


def answering(request: ModelRequest) -> dict[str, Any]:
    """A scripted model that reports at once, filling every field of whatever the reporting tool asks for now.

    One function whatever the payload's shape, so its backend (``scripted:<digest of this source>``) never changes
    and a changed payload class differs from its recording in the ``reporting`` part alone.
    """
    (report,) = [t for t in request.tools if t.name == "answer"]
    properties = report.input_schema.get("properties")
    assert isinstance(properties, dict)
    args = {
        name: 42 if isinstance(spec, dict) and spec.get("type") == "integer" else f"{name} of {request.role}"
        for name, spec in properties.items()
    }
    return {"calls": [{"name": "answer", "args": args}]}


def oracle(payload: type[Any] = Answer) -> Role[Any]:
    return Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", payload)])


async def recorded(question: str) -> StepRecord:
    """The record of one live step of the oracle on ``question``."""
    store = MemoryStore()
    await Run(model=ScriptedModel(answering), store=store).step(oracle(), question)
    (record,) = store.records()
    return record


def write_notebook(path: Path, *, metadata_block: Any = None, output_block: Any = None) -> Path:
    """A saved nbformat 4 notebook with one code cell, the given records blocks in its metadata and its output."""
    outputs = (
        []
        if output_block is None
        else [
            {"output_type": "display_data", "data": {"text/plain": ["step"]}, "metadata": {METADATA_KEY: output_block}}
        ]
    )
    metadata: dict[str, Any] = {} if metadata_block is None else {METADATA_KEY: metadata_block}
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": metadata,
        "cells": [
            {
                "cell_type": "code",
                "id": "cell-1",
                "execution_count": 1,
                "metadata": {},
                "source": ["await run.step(oracle, question)"],
                "outputs": outputs,
            }
        ],
    }
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


class Steps:
    """Steps run the way a kernel runs them: a `Run` reading ``path`` through a `NotebookStore`."""

    def __init__(self, path: Path) -> None:
        self.model = ScriptedModel(answering)
        self.store = NotebookStore(locate=lambda: path)

    async def step(self, question: str, *, payload: type[Any] = Answer, mode: Any = None) -> Any:
        return await Run(model=self.model, store=self.store, mode=mode).step(oracle(payload), question)


@contextmanager
def caught() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning given inside, none of them shown."""
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        yield given


def recording_warnings(given: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in given if issubclass(w.category, RecordingWarning)]


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def nbformat_text(nb: dict[str, Any]) -> str:
    """The notebook as nbformat itself writes it."""
    import nbformat

    text: str = nbformat.writes(nbformat.from_dict(nb))  # type: ignore[no-untyped-call]  # unannotated in nbformat
    return text if text.endswith("\n") else text + "\n"


def only_file(path: Path) -> None:
    """Nothing but ``path`` in its folder: no temporary file, no copy left behind."""
    assert [p.name for p in path.parent.iterdir()] == [path.name]


# Truncated JSON ----------------------------------------------------------------------------------------------------


async def test_a_truncated_notebook_file_runs_live_names_line_and_column_and_is_never_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: ReliabilityNotes
) -> None:
    record = await recorded("q")
    path = write_notebook(tmp_path / "cut.ipynb", metadata_block=block_to_json([record]))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) * 2 // 3])  # cut mid-way, as a full disk or a killed save leaves it
    before = path.read_bytes()
    with pytest.raises(json.JSONDecodeError) as cut:
        json.loads(before)
    where = f"invalid JSON at line {cut.value.lineno}, column {cut.value.colno}"
    assert cut.value.lineno > 1

    steps = Steps(path)
    with caught() as given:
        assert await steps.step("q") == Answer("summary of oracle")
        assert await steps.step("another") == Answer("summary of oracle")
    (warning,) = recording_warnings(given)  # once for this state of the file, not once per step
    assert f"Some recordings in {path.name} could not be read" in warning
    assert f"{path}: not a notebook: {where}" in warning
    assert "run live where they can, and nothing in the notebook is changed" in warning
    assert steps.model.calls == 2  # its recording could not be read, so "q" ran live (as did "another")
    assert await steps.step("q", mode="replay") == Answer("summary of oracle")  # this session's own record replays
    assert steps.model.calls == 2
    assert path.read_bytes() == before

    # Every command says the same and writes nothing; none starts a kernel.
    for command in (
        ["execute"],
        ["execute", "--record"],
        ["consolidate"],
        ["list"],
        ["list", "--json"],
        ["clear", "--all"],
        ["gc"],
        ["explain", "1"],
    ):
        assert cli(command[0], path, *command[1:]) == 2, command
    err = capsys.readouterr().err
    assert err.count(f"{path}: not a notebook: {where}") == 8
    assert path.read_bytes() == before
    only_file(path)
    reliability.note(
        AREA,
        "the notebook file itself truncated two thirds of the way through (invalid JSON)",
        "one RecordingWarning naming the file, line and column; its steps ran live; every command "
        "(execute, consolidate, list, clear, gc, explain) exits 2 with the same words; the file's bytes "
        "are unchanged",
        records_lost=0,
        notebooks_corrupted=0,
    )


GOOD_BLOCK = '{"version": 1, "records": []}'
SHAPE = ": expected an object with 'version' and 'records'. "

WRONG_BLOCKS = [
    pytest.param(
        '{"version": 1, "records": [{"kind": "step", "format": 1, "id": "0f3a',
        SHAPE + "Found a string of 68 characters holding JSON cut short or broken (line 1, column 64: "
        "Unterminated string starting at)",
        id="a string of truncated JSON",
    ),
    pytest.param(
        GOOD_BLOCK,
        SHAPE + "Found a string of 29 characters holding JSON: the block was saved as text instead of as an object",
        id="a string of JSON",
    ),
    pytest.param([{"version": 1, "records": []}], SHAPE + "Found a list.", id="a list"),
    pytest.param(1, SHAPE + "Found a number.", id="a number"),
    pytest.param(
        {"version": 2, "records": []},
        ".version: this version of agl_notebook reads version 1, found 2.",
        id="version 2",
    ),
    pytest.param(
        {"version": "1", "records": []},
        ".version: this version of agl_notebook reads version 1, found '1' (a string).",
        id="version '1'",
    ),
    pytest.param({"records": []}, ".version: missing; this version of agl_notebook reads version 1.", id="no version"),
    pytest.param(
        {"version": 1, "records": {"0f3a": {}}}, ".records: expected a list. Found an object.", id="records an object"
    ),
    pytest.param({"version": 1, "records": None}, ".records: expected a list. Found null.", id="records null"),
]


@pytest.mark.parametrize(("block", "problem"), WRONG_BLOCKS)
async def test_a_metadata_block_of_the_wrong_shape_or_version_is_named_and_the_notebook_still_runs(
    tmp_path: Path, block: Any, problem: str, capsys: pytest.CaptureFixture[str], reliability: ReliabilityNotes
) -> None:
    # The block in the notebook metadata is bad; a record a headless run left in an output (path 2) is good.
    record = await recorded("recorded")
    path = write_notebook(tmp_path / "bad.ipynb", metadata_block=block, output_block=block_to_json([record]))
    before = path.read_bytes()

    steps = Steps(path)
    with caught() as given:
        assert await steps.step("recorded", mode="replay") == Answer("summary of oracle")  # the good record replays
        assert steps.model.calls == 0
        assert await steps.step("new") == Answer("summary of oracle")  # the rest runs live
        assert steps.model.calls == 1
    (warning,) = recording_warnings(given)
    assert f"Some recordings in {path.name} could not be read" in warning
    assert f"{path} metadata['agl_notebook']{problem}" in warning
    assert path.read_bytes() == before

    # Whatever would write the notebook refuses, saying why and what to do; so does list. None starts a kernel.
    for command in (["consolidate"], ["execute", "--record"], ["clear", "--all"], ["gc"], ["list"]):
        assert cli(command[0], path, *command[1:]) == 2, command
        err = capsys.readouterr().err
        assert f"{path}: metadata['agl_notebook']{problem}" in err
        assert "The recordings block is corrupt" in err
        assert "Fix metadata['agl_notebook'] by hand, or remove it to record again." in err
    assert path.read_bytes() == before
    only_file(path)
    reliability.note(
        AREA,
        f"the notebook metadata's agl_notebook block is {_words(block)}",
        "a RecordingWarning names the file, the block and what was found; a good record in an output "
        "still replays and a new step runs live; consolidate, execute --record, clear, gc and list "
        "refuse (exit 2) and the file's bytes are unchanged",
        records_lost=0,
        notebooks_corrupted=0,
    )


def _words(block: Any) -> str:
    if isinstance(block, str):
        return "a string holding JSON cut short" if block != GOOD_BLOCK else "a string holding the JSON of a block"
    if not isinstance(block, dict):
        kind = {list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(type(block), "null")
        return f"{kind} ({json.dumps(block)})"
    return f"{json.dumps(block)}"


# Wrong types -------------------------------------------------------------------------------------------------------


def wrong_records(good: dict[str, Any]) -> list[tuple[Any, str]]:
    """Records with a field of the wrong type (each its own id), and the message naming that field."""

    def bad(n: int, **fields: Any) -> dict[str, Any]:
        return {**good, "id": f"bad{n}", **fields}

    return [
        (42, ": expected an object."),
        (bad(2, kind="unit"), ".kind: expected 'step' or 'failure', got 'unit'."),
        (bad(3, format="1"), ".format: this version reads formats 1 and 2, the record has '1'."),
        ({**good, "id": 7}, ".id: expected a non-empty string."),
        (bad(5, parts=["role", "backend"]), ".parts: expected an object of digests."),
        (bad(6, occurrence="0"), ".occurrence: expected a whole number >= 0."),
        (bad(7, role=None), ".role: expected a non-empty string."),
        (bad(8, transcript={"role": "user"}), ".transcript: expected a list of messages."),
        (
            bad(9, transcript=[{"role": "robot", "content": []}]),
            ".transcript[0]: expected an object with role 'user' or 'assistant'.",
        ),
        (
            # a block of a type not read here is kept as it is (RawBlock); one with no type is not a block
            bad(10, transcript=[{"role": "user", "content": [{"kind": "image"}]}]),
            ".transcript[0].content[0]: not a text, tool_use or tool_result block, nor a block of another type kept "
            "as is.",
        ),
        (bad(11, usage={"input_tokens": "many"}), ".usage: expected an object of token counts."),
        (bad(12, questions="none"), ".questions: expected a list."),
        (
            bad(13, questions=[{"tool_call_id": "t", "text": "Which?", "inputs": "Answer", "answer": "x"}]),
            ".questions[0].inputs: expected a list of labels.",
        ),
        (bad(14, tape={}), ".tape: expected a list of effects."),
    ]


async def test_records_of_the_wrong_types_are_named_by_position_and_field_skipped_and_kept_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: ReliabilityNotes
) -> None:
    good = await recorded("q")
    wrong = wrong_records(good.to_json())
    block = block_to_json([good], [w for w, _ in wrong])  # the good record first, then the bad ones
    path = write_notebook(tmp_path / "types.ipynb", metadata_block=block)
    before = path.read_bytes()

    steps = Steps(path)
    with caught() as given:
        assert await steps.step("q", mode="replay") == Answer("summary of oracle")
        assert steps.model.calls == 0
        assert await steps.step("new") == Answer("summary of oracle")
        assert steps.model.calls == 1
    (warning,) = recording_warnings(given)
    listed = [line.removeprefix("- ") for line in warning.splitlines()[1:]]
    assert listed == [
        f"{path} metadata['agl_notebook'].records[{i + 1}]{message}" for i, (_, message) in enumerate(wrong)
    ]
    assert path.read_bytes() == before

    # list names each unreadable record, and lists the good one.
    assert cli("list", path, "--json") == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["unreadable"] == len(wrong)
    assert [r["id"] for r in listing["recordings"]] == [good.id]
    assert all(any(message in p for p in listing["problems"]) for _, message in wrong)
    assert path.read_bytes() == before

    # The person chooses to write: a new record moved in from an output, then the good one cleared. The records this
    # version cannot read stay, verbatim and in order, through both writes.
    newer = await recorded("newer")
    nb = load(path)
    nb["cells"][0]["outputs"] = [
        {
            "output_type": "display_data",
            "data": {"text/plain": ["step"]},
            "metadata": {METADATA_KEY: block_to_json([newer])},
        }
    ]
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    assert cli("consolidate", path) == 0
    assert "moved 1 record into the notebook metadata" in capsys.readouterr().out
    kept = load(path)["metadata"][METADATA_KEY]["records"]
    assert [r["id"] for r in kept[:2]] == [good.id, newer.id]
    assert kept[2:] == [w for w, _ in wrong]
    # The command writes the records block apart from the rest (50 MB blocks, below), in nbformat's layout exactly.
    assert path.read_text(encoding="utf-8") == nbformat_text(load(path))
    assert cli("clear", path, good.id) == 0
    kept = load(path)["metadata"][METADATA_KEY]["records"]
    assert kept[0]["id"] == newer.id
    assert kept[1:] == [w for w, _ in wrong]
    only_file(path)
    reliability.note(
        AREA,
        f"{len(wrong)} records with a field of the wrong type (not an object, kind, format, id, "
        "parts, occurrence, role, transcript and its messages and blocks, usage, questions, tape) next "
        "to a good one",
        "one RecordingWarning lists each by position and field; the good record replays and a new step "
        "runs live; the file is unchanged; consolidate and clear keep every unreadable record verbatim",
        records_lost=0,
        notebooks_corrupted=0,
    )


# Payload no longer fits the dataclass ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerWithTitle:
    title: str = describe("A title.")
    summary: str = describe("The answer.")


@dataclass(frozen=True)
class AnswerAsNumber:
    summary: int = describe("The answer.")


@dataclass(frozen=True)
class AnswerRenamed:
    text: str = describe("The answer.")


CHANGED = [
    pytest.param(AnswerWithTitle, AnswerWithTitle("title of oracle", "summary of oracle"), id="a field added"),
    pytest.param(AnswerAsNumber, AnswerAsNumber(42), id="summary now an int"),
    pytest.param(AnswerRenamed, AnswerRenamed("text of oracle"), id="summary renamed"),
]


@pytest.mark.parametrize(("payload", "live"), CHANGED)
async def test_a_recording_whose_payload_no_longer_fits_the_dataclass_runs_live_or_fails_clearly(
    tmp_path: Path, payload: type[Any], live: Any, reliability: ReliabilityNotes
) -> None:
    old = await recorded("q")  # made when the role reported Answer(summary: str)
    path = write_notebook(tmp_path / "stale.ipynb", metadata_block=block_to_json([old]))
    before = path.read_bytes()

    # Replay only (nbval, or --mode replay): no model call, and a message naming the recording, what differs, and
    # what to do. Never a TypeError from building the new dataclass out of the old payload.
    steps = Steps(path)
    with pytest.raises(ReplayMissError) as missed:
        await steps.step("q", payload=payload, mode="replay")
    message = str(missed.value)
    assert f"No recording matches this step of role 'oracle' in the notebook {path.name}." in message
    assert "differs in: reporting." in message  # the reporting tool's payload schema, and nothing else
    assert "Mode 'replay' never calls a model: run it in mode 'auto' or 'refresh' to record it." in message
    assert missed.value.nearest == old
    assert missed.value.differing == ("reporting",)
    assert steps.model.calls == 0

    # Auto (the default in a notebook): the step runs live and gives the new dataclass; asked why, it says so.
    with caught() as given:
        assert await steps.step("q", payload=payload) == live
    assert recording_warnings(given) == []
    assert steps.model.calls == 1
    assert "differs in: reporting." in recent_misses()[-1].explain()
    # ...and its new record replays next time, next to the stale one, which nothing overwrote.
    assert await steps.step("q", payload=payload, mode="replay") == live
    assert steps.model.calls == 1
    assert path.read_bytes() == before
    reliability.note(
        AREA,
        f"a recording made when the payload was Answer(summary: str), replayed with "
        f"{payload.__name__}{_fields(payload)}",
        "mode replay: ReplayMissError naming the notebook, the nearest record and the part that "
        "differs (reporting) and saying what to do, no model call; mode auto: the step runs live and "
        "returns the new dataclass; no TypeError; the file is unchanged",
        records_lost=0,
        notebooks_corrupted=0,
    )


def _fields(payload: type[Any]) -> str:
    return (
        "("
        + ", ".join(f"{name}: {t if isinstance(t, str) else t.__name__}" for name, t in payload.__annotations__.items())
        + ")"
    )


@dataclass(frozen=True)
class CheckedAnswer:
    """The same schema as `Answer`, so the same fingerprint; but now an empty summary is refused."""

    summary: str = describe("The answer.")

    def __post_init__(self) -> None:
        if not self.summary.strip():
            raise ValueError("summary: must not be empty")


def with_summary(record: StepRecord, summary: Any) -> dict[str, Any]:
    """The record's JSON with its reported summary replaced (in the result and in the transcript's report call)."""
    data: dict[str, Any] = json.loads(json.dumps(record.to_json()))
    data["result"]["summary"] = summary
    for message in data["transcript"]:
        for block in message["content"]:
            if block["type"] == "tool_use":
                block["input"]["summary"] = summary
    return data


NO_LONGER_VALID = [
    pytest.param(Answer, 42, id="the recorded summary edited into a number"),
    pytest.param(CheckedAnswer, "", id="an empty recorded summary now refused by a validator"),
]


@pytest.mark.parametrize("mode", ["auto", "replay"])
@pytest.mark.parametrize(("payload", "summary"), NO_LONGER_VALID)
async def test_a_recording_that_matches_but_whose_report_no_longer_validates(
    tmp_path: Path, payload: type[Any], summary: Any, mode: str, reliability: ReliabilityNotes
) -> None:
    old = await recorded("q")
    path = write_notebook(
        tmp_path / "checked.ipynb", metadata_block={"version": 1, "records": [with_summary(old, summary)]}
    )
    before = path.read_bytes()
    steps = Steps(path)
    if mode == "replay":
        with pytest.raises(ReplayMissError) as missed:
            await steps.step("q", payload=payload, mode="replay")
        assert old.id in str(missed.value)
        assert "summary" in str(missed.value)
        assert "refresh" in str(missed.value)
        assert steps.model.calls == 0
    else:
        with caught() as given:
            assert await steps.step("q", payload=payload) == payload("summary of oracle")
        assert steps.model.calls == 1
        assert any(old.id in w and "summary" in w for w in recording_warnings(given))
    assert path.read_bytes() == before
    reliability.note(
        AREA,
        f"a recording whose report no longer validates ({summary!r} for {payload.__name__}), mode {mode}",
        "a ReplayMissError naming the record and the field, saying to record it again; no model call"
        if mode == "replay"
        else "a RecordingWarning naming the record and the field; the step runs live and returns the new payload",
        records_lost=0,
        notebooks_corrupted=0,
    )


# In a real kernel (agl-notebook execute: nbclient) -----------------------------------------------------------------


def set_metadata_block(path: Path, block: Any) -> None:
    nb = load(path)
    nb["metadata"][METADATA_KEY] = block
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def cell_text(nb: dict[str, Any], index: int) -> str:
    return "".join("".join(o.get("text", "")) for o in nb["cells"][index]["outputs"])


def test_a_real_kernel_runs_a_notebook_whose_block_is_truncated_json_live_and_keeps_the_block(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], reliability: ReliabilityNotes
) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    cut = '{"version": 1, "records": [{"kind": "step", "format": 1, "id": "6a5e'
    set_metadata_block(notebook, cut)
    before = notebook.read_bytes()
    executed = tmp_path / "executed.ipynb"

    assert cli("execute", notebook, "--output", executed) == 0

    err = capsys.readouterr().err
    assert (
        f"agl-notebook: warning: {notebook}: metadata['agl_notebook']: expected an object with 'version' and "
        "'records'. Found a string of 68 characters holding JSON cut short or broken (line 1, column 64"
    ) in err
    nb = load(executed)
    assert printed_calls(nb) == "1"  # the step ran live, on the scripted model
    assert step_result(nb) == "Answer(text='forty-two')"
    assert "Some recordings in oracle.ipynb could not be read" in cell_text(nb, 3)  # said in the cell, too
    assert nb["metadata"][METADATA_KEY] == cut  # the block travels on as it was
    assert notebook.read_bytes() == before

    assert cli("execute", notebook, "--record") == 2  # recording would replace the block: refused, before a kernel
    assert "The recordings block is corrupt, so the notebook was not written" in capsys.readouterr().err
    assert notebook.read_bytes() == before
    reliability.note(
        AREA,
        "agl-notebook execute (a real kernel) of a notebook whose agl_notebook block is a string of truncated JSON",
        "a warning on the command line and in the cell names the file, the block, line and column; "
        "the step runs live; the executed copy keeps the block as it was; --record refuses; the "
        "notebook's bytes are unchanged",
        records_lost=0,
        notebooks_corrupted=0,
    )


def test_a_real_notebook_whose_payload_dataclass_changed_after_recording(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str], reliability: ReliabilityNotes
) -> None:
    notebook = make_notebook(tmp_path / "oracle.ipynb")
    assert cli("execute", notebook, "--record") == 0  # recorded with Answer(text: str)
    nb = load(notebook)
    (old,) = nb["metadata"][METADATA_KEY]["records"]
    nb["cells"][1]["source"] = SETUP.replace(
        '    text: str = describe("The answer.")',
        '    title: str = describe("A title.")\n    text: str = describe("The answer.")',
    ).replace('"args": {"text": "forty-two"}', '"args": {"title": "Oracle", "text": "forty-two"}')
    assert "title: str" in nb["cells"][1]["source"]
    notebook.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    before = notebook.read_bytes()
    capsys.readouterr()

    # As nbval would (replay only): the cell fails, saying which recording is nearest, what differs and what to do.
    assert cli("execute", notebook, "--mode", "replay", "--output", tmp_path / "replayed.ipynb") == 1
    err = capsys.readouterr().err
    assert (
        "cell 4 raised ReplayMissError: No recording matches this step of role 'oracle' in the notebook "
        "oracle.ipynb." in err
    )
    assert "reporting" in err.split("differs in:")[1].splitlines()[0]
    assert "Mode 'replay' never calls a model" in err
    assert "TypeError" not in err
    assert notebook.read_bytes() == before

    # In mode auto (the default): it runs live and shows the new dataclass; the old recording is left alone.
    executed = tmp_path / "executed.ipynb"
    assert cli("execute", notebook, "--output", executed) == 0
    nb = load(executed)
    assert step_result(nb) == "Answer(title='Oracle', text='forty-two')"
    assert printed_calls(nb) == "1"
    assert nb["metadata"][METADATA_KEY]["records"] == [old]
    assert notebook.read_bytes() == before
    reliability.note(
        AREA,
        "a real notebook recorded with Answer(text: str), then its cell changed to Answer(title, "
        "text), executed in a real kernel",
        "replay only: the cell fails with ReplayMissError naming the notebook and the differing part "
        "(reporting), no TypeError; auto: runs live and shows the new dataclass; the recording and the "
        "notebook's bytes are unchanged",
        records_lost=0,
        notebooks_corrupted=0,
    )


# 50 MB -------------------------------------------------------------------------------------------------------------


RECORDS = 16_800


def fifty_mb_notebook(path: Path, good: StepRecord, moved: StepRecord) -> int:
    """A notebook whose metadata block holds about 50 MB of valid records, ``good`` among them (in the middle),
    and ``moved`` in an output's metadata; returns how many records the metadata block holds."""
    base: dict[str, Any] = dict(good.to_json())
    # The filler shares the good record's role: its contents are kept once, by that record (docs/iterating.md).
    shared = {key: value for key, value in base.items() if key != "contents"}
    filler: list[dict[str, Any]] = []
    for n in range(RECORDS):  # many small records, and every tenth with a payload and transcript of some size
        text = f"finding {n}: " + "lorem ipsum dolor sit amet " * (200 if n % 10 == 0 else 2)
        filler.append(
            {
                **shared,
                "id": f"{n:032x}",
                "input": f"question {n}",
                "result": {"summary": text},
                "transcript": [
                    {"role": "user", "content": [{"type": "text", "text": f"question {n}"}]},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": text},
                            {"type": "tool_use", "id": "toolu_00_0", "name": "answer", "input": {"summary": text}},
                        ],
                    },
                ],
            }
        )
    records = [*filler[: RECORDS // 2], base, *filler[RECORDS // 2 :]]
    write_notebook(path, metadata_block={"version": 1, "records": records}, output_block=block_to_json([moved]))
    return len(records)


MEASURE = textwrap.dedent("""
    import asyncio, json, resource, sys, time
    from pathlib import Path

    def peak():  # MB. VmHWM is this process's own; ru_maxrss may carry the parent's from before exec
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin"
                                                                         else 1024)
        (line,) = [line for line in status.splitlines() if line.startswith("VmHWM:")]
        return int(line.split()[1]) / 1024

    path, what = Path(sys.argv[1]), sys.argv[2]
    from agl_notebook.cli import main
    from agl_notebook.notebook.nbfile import read_notebook_json, records_in_notebook
    from agl_notebook.run import Run
    from agl_notebook.notebook.store import NotebookStore
    from tests.reliability.test_bad_recordings import Steps
    base = peak()
    started = time.perf_counter()
    if what == "read and step":
        found = records_in_notebook(read_notebook_json(path))
        read = time.perf_counter() - started
        del found
        steps = Steps(path)
        started = time.perf_counter()
        result = asyncio.run(steps.step("q", mode="replay"))
        out = {"read": read, "step": time.perf_counter() - started, "calls": steps.model.calls,
               "result": repr(result)}
    else:
        out = {"code": main(what.split(" ")[:1] + [str(path)]), "seconds": time.perf_counter() - started}
    print(json.dumps({**out, "base": base, "peak": peak()}))
""")


def measure(path: Path, what: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), what],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


async def test_a_notebook_holding_50_mb_of_recordings_reads_and_replays_in_bounded_time_and_memory(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    good, moved = await recorded("q"), await recorded("moved")
    path = tmp_path / "big.ipynb"
    count = fifty_mb_notebook(path, good, moved)
    size = path.stat().st_size / 1e6
    assert 48 < size < 60
    before = path.read_bytes()

    # Read every record, then run a step that replays the one in the middle (a fresh process, so its peak memory is
    # its own). The step reads the file again itself, through the NotebookStore.
    got = measure(path, "read and step")
    assert got["result"] == "Answer(summary='summary of oracle')"
    assert got["calls"] == 0
    assert got["read"] < 10
    assert got["step"] < 15
    assert got["peak"] - got["base"] < 10 * size  # measured: about 3x the file (160 MB)
    assert path.read_bytes() == before

    # The person chooses to write: consolidate moves the output's record in and rewrites the 50 MB file.
    written = measure(path, "consolidate")
    assert written["code"] == 0
    assert written["seconds"] < 30
    assert written["peak"] - written["base"] < 15 * size  # measured: about 7x the file (350 MB)
    block = load(path)["metadata"][METADATA_KEY]
    assert len(block["records"]) == count + 1
    assert block["records"][count // 2] == json.loads(before)["metadata"][METADATA_KEY]["records"][count // 2]
    reliability.note(
        AREA,
        f"a notebook whose agl_notebook block holds {size:.0f} MB ({count:,} valid records)",
        f"all records read in {got['read']:.1f} s; a step replaying one of them (reading the file itself) in "
        f"{got['step']:.1f} s with no model call; peak memory {got['peak']:.0f} MB; the file untouched; "
        f"consolidate (the person's choice) rewrote it in {written['seconds']:.1f} s, keeping every record",
        measured={
            "50 MB metadata block: read": f"{got['read']:.1f} s",
            "50 MB metadata block: replay one step (file read included)": f"{got['step']:.1f} s",
            "50 MB metadata block: peak memory": f"{got['peak']:.0f} MB",
            "50 MB metadata block: consolidate (rewrite)": f"{written['seconds']:.1f} s, peak {written['peak']:.0f} MB",
        },
        how="scripted model, no kernel: each figure in a fresh Python process (the store read, one replayed step, "
        "or agl-notebook consolidate); perf_counter, and the process's peak resident memory (VmHWM); one run",
        records_lost=0,
        notebooks_corrupted=0,
    )
