"""A store's `RecordIndex` follows it put by put: the same previous version and contents as a pass over its records."""

from __future__ import annotations

from agl_notebook.replay import MemoryStore
from agl_notebook.replay.records import StepRecord, Waiting
from agl_notebook.replay.versions import ContentIndex, previous_version


def _record(record_id: str, *, at: str, text: str | None = None, partial: bool = False, role: str = "r") -> StepRecord:
    return StepRecord(
        id=record_id,
        parts={"input": "in", "instructions": f"d-{text}"},
        occurrence=0,
        role=role,
        backend="scripted:x",
        input="hello",
        result=None if partial else {"n": record_id},
        transcript=(),
        recorded_at=at,
        contents={"instructions": text} if text is not None else {},
        partial=Waiting(on="question", tool_call_id="t1", tool="ask") if partial else None,
    )


def _agrees(store: MemoryStore, not_id: str) -> None:
    index = store.version_index()
    records = store.records()
    found = index.previous(cell_id=None, role="r", input_digest="in", occurrence=0, not_id=not_id)
    scanned = previous_version(records, cell_id=None, role="r", input_digest="in", occurrence=0, not_id=not_id)
    assert found is scanned
    fresh = ContentIndex(records)
    for text in ("one", "two", "three"):
        assert index.contents.holds("instructions", f"d-{text}") == fresh.holds("instructions", f"d-{text}")


def test_a_stores_index_follows_puts_replacements_partials_and_discards() -> None:
    store = MemoryStore([_record("a", at="1", text="one")])
    _agrees(store, "new")  # made now, from the store's records
    store.put(_record("b", at="1", text="two"))  # a tie in time: the later in the store's order wins
    _agrees(store, "new")
    store.put(_record("a", at="1"))  # replaced in its place, without its content: "one" is kept by no record now
    _agrees(store, "new")
    assert not store.version_index().contents.holds("instructions", "d-one")
    store.put(_record("c", at="2", text="three", partial=True))  # a partial record is never a previous version
    _agrees(store, "new")
    store.discard_partial("c")
    _agrees(store, "new")
    assert not store.version_index().contents.holds("instructions", "d-three")
    store.put(_record("d", at="1", partial=True))
    store.put(_record("d", at="1", text="three"))  # finished in place of its partial record: last in the order
    _agrees(store, "new")
    _agrees(store, "d")
    assert store.version_index().previous(
        cell_id=None, role="r", input_digest="in", occurrence=0, not_id="new"
    ) is store.get("d")
