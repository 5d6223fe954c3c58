"""Sidecar files: the format, namings that check out after appends, torn and damaged lines, two processes appending."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agl_notebook._files import write_atomically
from agl_notebook.errors import InputError
from agl_notebook.replay import sidecar as sidecar_module
from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.sidecar import (
    SidecarWriter,
    file_name,
    header_text,
    line_text,
    naming_from_json,
    namings_in_block,
    read_sidecar,
    rewrite_sidecar,
    with_naming,
)
from tests.support.paths import ROOT
from tests.support.records import tiny_record


def record(record_id: str, result: str = "ok") -> StepRecord:
    return tiny_record(record_id, result)


def written(tmp_path: Path, *ids: str) -> tuple[Path, SidecarWriter]:
    path = tmp_path / file_name("oracle-map")
    writer = SidecarWriter(path, "oracle-map")
    writer.append([line_text(record(i)) for i in ids])
    return path, writer


def test_the_file_is_a_header_then_one_record_a_line_named_for_the_map(tmp_path: Path) -> None:
    path, _ = written(tmp_path, "a", "b")
    assert path.name == "oracle-map.agl.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == header_text("oracle-map") and lines[-1] == ""
    assert [json.loads(line)["id"] for line in lines[1:-1]] == ["a", "b"]
    assert list(read_sidecar(path, key="oracle-map").records) == ["a", "b"]


@pytest.mark.parametrize("key", ["", "../x", "a/b", "a.b", "x" * 101, "é"])
def test_a_key_that_could_not_name_a_file_safely_is_refused(key: str) -> None:
    with pytest.raises(InputError, match="map key"):
        file_name(key)


def test_a_naming_checks_out_after_appends_and_not_after_a_rewrite(tmp_path: Path) -> None:
    path, writer = written(tmp_path, "a")
    naming = writer.naming()
    assert (naming.lines, naming.bytes) == (2, path.stat().st_size)
    writer.append([line_text(record("b"))])
    grown = read_sidecar(path, naming=naming)
    assert grown.unchanged is True and not grown.problems and list(grown.records) == ["a", "b"]
    assert writer.naming().lines == 3  # kept up incrementally
    path.write_text(path.read_text(encoding="utf-8").replace('"ok"', '"KO"'), encoding="utf-8")
    changed = read_sidecar(path, naming=naming)
    assert changed.unchanged is False and "are not those the notebook named" in changed.problems[0]
    assert str(path) in changed.problems[0]
    assert list(changed.records) == ["a", "b"], "what is readable is still read"


def test_a_naming_is_read_back_and_a_crafted_one_cannot_name_another_file(tmp_path: Path) -> None:
    _, writer = written(tmp_path, "a")
    naming = writer.naming()
    assert naming_from_json(naming.to_json(), where="n") == naming
    for bad in ({**naming.to_json(), "file": "../secrets.agl.jsonl"}, {**naming.to_json(), "key": "../x"}):
        with pytest.raises(InputError, match="n\\."):
            naming_from_json(bad, where="n")
    block = with_naming({"version": 1, "records": [], "other": 1}, naming)
    again = with_naming(block, naming)
    assert again["other"] == 1 and again["sidecars"] == [naming.to_json()], "replaced, not added twice"
    found, problems = namings_in_block({**again, "sidecars": [naming.to_json(), 3]}, where="b")
    assert found == [naming] and problems == ["b.sidecars[1]: expected an object naming a sidecar file."]


def test_a_torn_last_line_is_a_problem_and_the_rest_is_kept_and_appending_goes_on(tmp_path: Path) -> None:
    path, writer = written(tmp_path, "a", "b")
    with open(path, "ab") as f:
        f.write(line_text(record("c")).encode()[:40])  # a kernel killed in the middle of its write
    read = read_sidecar(path, key="oracle-map")
    assert read.torn and list(read.records) == ["a", "b"]
    assert read.problems == [
        f"{path} line 4: cut short (a kernel stopped while writing it); skipped, and the rest is kept."
    ]
    writer.append([line_text(record("d"))])
    after = read_sidecar(path, key="oracle-map")
    assert list(after.records) == ["a", "b", "d"] and not after.torn
    assert after.problems == [f"{path} line 4: not a JSON object; skipped, kept as it is."]
    assert len(path.read_text(encoding="utf-8").split("\n")) == 6, "the torn line stays a line of its own"


def test_other_kinds_of_lines_are_kept_and_not_read_as_records_and_a_later_line_wins(tmp_path: Path) -> None:
    path, writer = written(tmp_path, "a")
    writer.append(['{"kind":"batch","state":{"id":"msgbatch_1"}}', line_text(record("a", "newer"))])
    writer.append(['{"kind":"step","id":"broken"}'])
    read = read_sidecar(path, key="oracle-map")
    assert read.records["a"].result == "newer" and [line.kind for line in read.lines] == [
        "step",
        "batch",
        "step",
        "step",
    ]
    assert len(read.problems) == 1 and "line 5" in read.problems[0] and "Skipped, kept as it is" in read.problems[0]
    writer.append(['{"kind":"batch","state":{"id":"msgbatch_2"}}'])
    assert read_sidecar(path, key="oracle-map").latest("batch") == {"kind": "batch", "state": {"id": "msgbatch_2"}}
    assert read.latest("nothing") is None


def test_a_file_that_is_not_this_maps_sidecar_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / file_name("oracle-map")
    with pytest.raises(InputError, match="sidecar file is missing"):
        read_sidecar(path, key="oracle-map")
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(InputError, match=f"{path}: not an agl_notebook sidecar"):
        read_sidecar(path, key="oracle-map")
    path.write_text(header_text("other") + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="the sidecar of map 'other', not of map 'oracle-map'"):
        read_sidecar(path, key="oracle-map")


def test_a_rewrite_drops_only_what_it_is_told_and_keeps_lines_appended_since(tmp_path: Path) -> None:
    path, writer = written(tmp_path, "a", "b")
    writer.append(['{"kind":"batch"}', "not json"])
    read = read_sidecar(path, key="oracle-map")
    writer.append([line_text(record("c"))])  # appended after the read: not the rewrite's to judge
    dropped = rewrite_sidecar(read, lambda line: line.record is None or line.record.id != "a")
    assert dropped == 1
    after = read_sidecar(path, key="oracle-map")
    assert list(after.records) == ["b", "c"] and [line.text for line in after.lines][1:3] == [
        b'{"kind":"batch"}',
        b"not json",
    ]


_APPENDER = """
import sys
from pathlib import Path
from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.sidecar import SidecarWriter, line_text
import time
writer = SidecarWriter(Path(sys.argv[1]), "oracle-map")
while not Path(sys.argv[1] + ".go").exists():  # both processes start appending together
    time.sleep(0.005)
big = "x" * 70000  # more than a pipe's or a page's worth, so a write could be split if it were not locked
for i in range(int(sys.argv[3])):
    r = StepRecord(id=f"{sys.argv[2]}-{i}", parts={}, occurrence=0, role="r", backend="b", input=i, result=big,
                   transcript=())
    writer.append([line_text(r)])
"""


def test_two_processes_appending_at_once_lose_nothing_and_interleave_no_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / file_name("oracle-map")
    env = {"PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, str(path), name, "150"], env=env, cwd=ROOT)
        for name in ("one", "two")
    ]
    time.sleep(0.5)
    Path(f"{path}.go").touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    read = read_sidecar(path, key="oracle-map")
    assert not read.problems and len(read.lines) == 300
    assert sorted(read.records) == sorted(f"{n}-{i}" for n in ("one", "two") for i in range(150))
    writers = [r.id.split("-")[0] for r in read.records.values()]
    assert sum(a != b for a, b in itertools.pairwise(writers)) > 1, "the two appended at once"


def test_an_append_waiting_while_a_rewrite_replaces_the_file_lands_in_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, writer = written(tmp_path, "a", "b")
    read = read_sidecar(path, key="oracle-map")
    appended = threading.Event()

    def slow_write_atomically(target: Path, data: str | bytes) -> None:
        appender.start()  # it now waits for the lock the rewrite holds, on the file about to be replaced
        time.sleep(0.3)
        assert not appended.is_set()
        write_atomically(target, data)

    def append() -> None:
        writer.append([line_text(record("c"))])
        appended.set()

    appender = threading.Thread(target=append)
    monkeypatch.setattr(sidecar_module, "write_atomically", slow_write_atomically)
    assert rewrite_sidecar(read, lambda line: line.record is None or line.record.id != "a") == 1
    appender.join(10)
    assert list(read_sidecar(path, key="oracle-map").records) == ["b", "c"], "the waiting line was not lost"
