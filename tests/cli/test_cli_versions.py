"""``agl-notebook clear`` and ``gc`` keep a shared content: removing the record that keeps a long system text copies
it into the records that still use it (docs/iterating.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat as _nbformat

from agl_notebook import Run
from agl_notebook.cli import main
from agl_notebook.cli.sidecars import sidecars_of
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.records import block_from_json, block_to_json
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.replay.versions import ContentIndex
from tests.replay.test_versions import model, role

v4: Any = _nbformat.v4
nbformat: Any = _nbformat  # partly typed; its write is not annotated


async def test_clearing_the_record_that_keeps_a_shared_system_text_copies_it_into_the_others(tmp_path: Path) -> None:
    long = "Follow the house style. " * 900
    store = MemoryStore()
    for question in ("one", "two", "three"):
        await Run(model=model("ok"), store=store).step(role(long), question)
    holder, *others = store.records()
    assert "instructions" in holder.contents and all("instructions" not in r.contents for r in others)
    path = tmp_path / "shared.ipynb"
    nb = v4.new_notebook(cells=[v4.new_code_cell("pass")])
    nb.metadata[METADATA_KEY] = block_to_json(store.records())
    nbformat.write(nb, path)

    assert main(["clear", str(path), holder.id[:12]]) == 0
    left = block_from_json(json.loads(path.read_text(encoding="utf-8"))["metadata"][METADATA_KEY], where="b").records
    assert [r.id for r in left] == [r.id for r in others]
    index = ContentIndex(left)
    assert all(index.content(r, "instructions") == (True, holder.contents["instructions"]) for r in left)
    assert sum("instructions" in r.contents for r in left) == 1, "copied once, into one of them"


SIDECAR_SETUP = """\
%env AGL_NOTEBOOK_SIDECAR_BYTES=0
import json
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Text:
    text: str = describe("What to note.")

@dataclass(frozen=True)
class Note:
    note: str = describe("The note.")

def script(request):
    text = json.loads(request.messages[0].text.split("\\n", 1)[1])["text"]
    return {"calls": [{"name": "report_note", "args": {"note": "about " + text}}]}

def noter(instructions):
    return Role("noter", instructions, accepts=(Text,), tools=[reporting_tool("report_note", "Report.", Note)])

run = Run(model=ScriptedModel(script))"""
HOUSE_STYLE = "Follow the house style. " * 900  # about 21 KB: kept once, by one record, for the map's items
INSTRUCTIONS = 'INSTRUCTIONS = "Follow the house style. " * 900'


def noted(inputs: str, extra: str = "") -> str:
    return f'results = await run.map(noter(INSTRUCTIONS{extra}), [Text(f"text {{i}}") for i in {inputs}], name="notes")'


def sidecar_records(path: Path) -> list[Any]:
    """The records of the notes map's sidecar, after checking the notebook names it as it is."""
    (sidecar,) = sidecars_of(json.loads(path.read_text(encoding="utf-8")), path.parent, where=str(path))
    assert sidecar.read is not None and sidecar.state == "ok", "the notebook names the sidecar as it is"
    return list(sidecar.read.records.values())


def test_clearing_the_sidecar_record_that_kept_a_shared_system_text_copies_it_into_a_sidecar_record_using_it(
    tmp_path: Path, clean_environment: None
) -> None:
    """A map keeps its records in its sidecar (the limit 0), one of them the long system text the others left out.
    ``clear`` removes that one: the text first goes into another line of the sidecar, rewritten and named anew; the
    map's records then replay with no model and still diff against an edit of the instructions."""
    path = tmp_path / "notes.ipynb"
    cells = [SIDECAR_SETUP, INSTRUCTIONS, noted("range(5)"), "print(len(results))"]
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells]), path)
    assert main(["execute", "--record", str(path)]) == 0
    records = sidecar_records(path)
    (holder,) = [r for r in records if "instructions" in r.contents]
    system = holder.contents["instructions"]  # the system text the agent read: the instructions, then a hint
    assert len(records) == 5 and isinstance(system, str) and system.startswith(HOUSE_STYLE.strip())

    assert main(["clear", str(path), holder.id[:12]]) == 0
    after = sidecar_records(path)
    assert sorted(r.id for r in after) == sorted(r.id for r in records if r.id != holder.id)
    index = ContentIndex(after)
    assert all(index.content(r, "instructions") == (True, system) for r in after)
    assert sum("instructions" in r.contents for r in after) == 1, "copied once, into one of them"

    edited = nbformat.read(path, as_version=4)  # the map without the cleared item's input: it replays whole
    edited.cells[2].source = noted(repr(sorted(int(r.input["text"].split()[-1]) for r in after)))
    nbformat.write(edited, path)
    assert main(["execute", "--mode", "replay", str(path)]) == 0  # replay fails loudly on a missing record
    edited = nbformat.read(path, as_version=4)
    edited.cells[2].source = noted("range(5)", ' + "\\nCite one source."')
    nbformat.write(edited, path)
    assert main(["execute", "--record", str(path)]) == 0
    changes = [r.change for r in sidecar_records(path) if r.change is not None]
    assert len(changes) == 4, "each item still recorded pairs with its previous version (the cleared one runs anew)"
    for change in changes:
        assert "unknown" not in change, "the previous version's instructions are still known"
        assert change["differs"] == ["instructions"]
        assert "+Cite one source." in change["instructions"]["lines"]
