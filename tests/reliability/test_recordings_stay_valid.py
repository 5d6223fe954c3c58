"""Recordings stay valid across issue 27 (thinking, effort, strict tools, kept blocks).

- A setting enters the fingerprint only when it is set: a role that sets none has the fingerprint it had before.
- The repository's notebooks as committed before the change (commit ``BEFORE``) replay under nbval with this code:
  every step replays, no model call, every output equal.
- An older reader (the code of ``BEFORE``) keeps a record holding a kept block aside as unreadable, with a warning,
  and writes it back whole: never a replay without its blocks (a tape's kept blocks included, which it would have
  skipped silently).
- A secret in the model's thinking is scrubbed from every record, and its opaque fields are never touched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Role, reporting_tool, tool
from agl_notebook.models.base import Thinking
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.records import StepRecord, Waiting, block_to_json
from agl_notebook.run._step import step_settings
from agl_notebook.transcript import Message, RawBlock, TextBlock, user_text
from tests.support.nbval import nbval
from tests.support.paths import ROOT
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Answer, Query

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

BEFORE = "c303204"
"""The last commit before issue 27's change: its notebooks and its reader."""


def git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True, timeout=120).stdout


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as it was at ``BEFORE`` (``git archive``), to run with PYTHONPATH."""
    where = tmp_path_factory.mktemp("older")
    with tarfile.open(fileobj=BytesIO(git("archive", BEFORE, "agl_notebook"))) as archive:
        archive.extractall(where, filter="data")
    return where


async def look_up(query: Query) -> Any:
    raise AssertionError("never called")


def a_role(**settings: Any) -> Role[Answer]:
    return Role(
        name="researcher",
        instructions="Look it up.",
        tools=[tool("look_up", "Look.", Query, look_up), reporting_tool("report", "Report.", Answer)],
        **settings,
    )


def test_a_setting_enters_the_fingerprint_only_when_it_is_set() -> None:
    # Exactly the settings a record made before issue 27 was fingerprinted with.
    assert step_settings(a_role()) == {"max_tokens": 4096, "max_tool_roundtrips": 25, "reminders": 1}
    assert step_settings(a_role(thinking=Thinking.enabled(2048), effort="low", strict_tools=True)) == {
        "max_tokens": 4096,
        "max_tool_roundtrips": 25,
        "reminders": 1,
        "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "summarized"},
        "effort": "low",
        "strict_tools": True,
    }
    assert step_settings(a_role(thinking="adaptive"))["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert "thinking" not in step_settings(dataclasses.replace(a_role(thinking="adaptive"), thinking=None))


def test_the_notebooks_as_committed_before_replay_unchanged(tmp_path: Path, reliability: ReliabilityNotes) -> None:
    names = [n for n in git("ls-tree", "--name-only", BEFORE, "notebooks/").decode().split() if n]
    strict, lax = tmp_path / "strict", tmp_path / "lax"
    strict.mkdir()
    lax.mkdir()
    copied = 0
    for name in names:
        if name.endswith((".ipynb", ".agl.jsonl")):  # the notebooks and their sidecar files, if any
            # 08's map summaries gained each mean score's interval since (issue 33, on purpose): its recordings must
            # still all replay with no model call, but its saved summary lines are no longer what a replay draws.
            folder = lax if Path(name).name.startswith("08_") else strict
            (folder / Path(name).name).write_bytes(git("show", f"{BEFORE}:{name}"))
            copied += 1
    assert copied >= 8
    # A finished view gained the code that forks it at each turn (issue 32), drawn only for records made since
    # (`StepRecord.views`): these recordings replay equal to their saved outputs, with no sanitizing.
    # mode replay: no model call can be made, every output compared with the saved one
    done = nbval(strict)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = done.stdout[done.stdout.index("What each notebook did") :]
    assert summary.count("; 0 model calls") == 7, summary
    assert "failed" not in done.stdout.splitlines()[-4:], done.stdout[-2000:]
    done = nbval(lax, args=("--nbval-lax",))  # every cell runs and replays; outputs not compared
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "08_map.ipynb: 21 map items replayed from its recordings; 0 model calls" in done.stdout, done.stdout
    reliability.note(
        "Bad recordings",
        f"the 8 example notebooks as committed before thinking and kept blocks ({BEFORE}), replayed by this version",
        "nbval passes: every recorded step replays with no model call; every output equal but 08's map summaries, "
        "which gained their intervals on purpose, and each finished view's block of fork snippets (issue 32)",
    )


OLD_READER = textwrap.dedent(
    """
    import json, sys, warnings
    from pathlib import Path
    import agl_notebook
    from agl_notebook.replay.records import StepRecord
    from agl_notebook.replay.stores import JsonFileStore
    from agl_notebook.transcript import user_text
    assert agl_notebook.__file__.startswith(sys.argv[2]), agl_notebook.__file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = JsonFileStore(Path(sys.argv[1]))
        read = [r.id for r in store.records()]
        # It writes the file again: what it could not read must be kept whole.
        store.put(StepRecord(id="new_0", parts={}, occurrence=0, role="r", backend="b", input="x", result=None,
                             transcript=(user_text("x"),)))
    print(json.dumps({"read": read, "warnings": [str(w.message) for w in caught]}))
    """
)


def kept_records() -> list[StepRecord]:
    thinking: JsonObject = {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCkgIARAB/sig=="}
    plain = StepRecord(
        id="plain_0",
        parts={},
        occurrence=0,
        role="r",
        backend="b",
        input="x",
        result="ok",
        transcript=(user_text("x"),),
    )
    in_transcript = dataclasses.replace(
        plain,
        id="transcript_0",
        transcript=(user_text("x"), Message("assistant", (RawBlock(thinking), TextBlock("ok")))),
    )
    # A unit of work's tape (a JSON function's model replies): the older reader skips events it does not know, so
    # before the format said otherwise it replayed this reply without its thinking.
    tape: tuple[Any, ...] = (
        {
            "kind": "model",
            "key": "k",
            "events": [{"thinking": "Let me see."}, {"block": thinking}, {"text": "ok"}, {"end": "end_turn"}],
        },
    )
    on_tape = dataclasses.replace(plain, id="tape_0", transcript=(), tape=tape)
    return [plain, in_transcript, on_tape]


def test_an_older_reader_keeps_a_record_holding_a_kept_block_aside_with_a_warning(
    tmp_path: Path, older: Path, reliability: ReliabilityNotes
) -> None:
    records = kept_records()
    assert [r.to_json()["format"] for r in records] == [1, 2, 2]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(block_to_json(records)))
    env = {**os.environ, "PYTHONPATH": str(older), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, "-c", OLD_READER, str(path), str(older)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["read"] == ["plain_0"], "neither record holding a kept block is read as a step to replay"
    skipped = [w for w in seen["warnings"] if "A recording was skipped" in w]
    assert len(skipped) == 2 and all("format: this version reads format 1, the record has 2" in w for w in skipped)
    written = json.loads(path.read_text())["records"]
    assert [r["id"] for r in written] == ["plain_0", "new_0", "transcript_0", "tape_0"]
    assert written[2:] == [records[1].to_json(), records[2].to_json()], "kept whole, as written"
    reliability.note(
        "Bad recordings",
        "a record holding thinking or another kept block (in its transcript or a JSON function's tape) read by the "
        f"version before kept blocks ({BEFORE})",
        "kept aside with a warning naming its format (2), written back whole; never replayed without its blocks",
    )


def test_a_secret_in_the_models_thinking_is_scrubbed_and_its_signature_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: ReliabilityNotes
) -> None:
    from agl_notebook.replay.records import resume_refusal
    from agl_notebook.replay.stores import JsonFileStore

    planted = "planted-" + "5e1d" * 6  # built at run time, never a real secret
    monkeypatch.setenv("RECORDS_TEST_API_KEY", planted)
    signature = "EqQBCkgIARAB/" + planted  # an opaque field holding the same characters: sent back as it came
    blocks: list[JsonObject] = [
        {"type": "thinking", "thinking": f"The key is {planted}.", "signature": signature},
        {"type": "redacted_thinking", "data": planted},
        {"type": "web_search_tool_result", "content": [{"title": planted, "encrypted_content": planted}]},
    ]
    record = dataclasses.replace(
        kept_records()[1],
        transcript=(user_text("x"), Message("assistant", (*map(RawBlock, blocks), TextBlock(f"Done: {planted}")))),
    )
    store = JsonFileStore(tmp_path / "records.json")
    kept = store.put(record)
    text = (tmp_path / "records.json").read_text()
    thinking, redacted, result, answer = kept.transcript[1].content
    assert isinstance(thinking, RawBlock) and isinstance(redacted, RawBlock) and isinstance(result, RawBlock)
    assert thinking.data == {"type": "thinking", "thinking": "The key is [REDACTED].", "signature": signature}
    assert redacted.data == blocks[1]
    assert result.data == {
        "type": "web_search_tool_result",
        "content": [{"title": "[REDACTED]", "encrypted_content": planted}],
    }
    assert answer == TextBlock("Done: [REDACTED]")
    assert kept.scrubbed_blocks == ((1, 0), (1, 2))
    assert json.loads(text)["records"][0]["scrubbed_blocks"] == [[1, 0], [1, 2]]
    # Every readable place is clean; the planted characters remain only inside the three opaque fields.
    assert text.count(planted) == 3
    partial = dataclasses.replace(kept, partial=Waiting("approval", "toolu_1", "weather"))
    assert "cannot be resumed" in (resume_refusal(partial, "researcher") or "")
    reliability.note(
        "Secrets",
        "a secret in the model's thinking and in a kept block of an unknown type, and the same characters inside a "
        "signature, redacted data and encrypted content",
        "scrubbed from the readable text only; the opaque fields kept byte for byte; the record names the changed "
        "blocks, and a partial record holding one is refused on resume rather than sent with a broken signature "
        "(the characters stay inside the opaque fields, as the issue requires: they are sent back as received)",
    )
