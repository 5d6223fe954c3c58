"""The map-store contract: a map's item records kept in the parent store, and the block its final display saves."""

from __future__ import annotations

from agl_notebook.replay.records import StepRecord
from agl_notebook.replay.stores import InlineMapStore, MapStore, MemoryStore, Store, map_store
from tests.support.records import tiny_record


def test_a_memory_stores_map_keeps_its_records_in_the_parent_and_saves_only_its_own() -> None:
    parent = MemoryStore([tiny_record("earlier"), tiny_record("other")])
    items = parent.for_map("oracle-map")
    assert isinstance(items, MapStore) and isinstance(items, Store)
    items.put(tiny_record("a"))
    items.put(tiny_record("b"))
    # A record the map found is its own too (an item that replays): its display saves it again.
    assert parent.get("a") is not None and items.get("earlier") is not None
    saved = items.saved_block()
    assert saved["version"] == 1
    records = saved["records"]
    assert isinstance(records, list)
    assert [r["id"] for r in records if isinstance(r, dict)] == ["a", "b", "earlier"]  # never "other"


def test_a_map_inside_a_map_keeps_its_records_in_the_same_parent() -> None:
    parent = MemoryStore()
    inner = parent.for_map("outer").for_map("inner")
    assert isinstance(inner, InlineMapStore) and inner.parent is parent


def test_a_store_written_before_for_map_keeps_a_maps_records_in_itself() -> None:
    class OlderStore:
        """A person's store of the four methods a step needs (no ``for_map``)."""

        def __init__(self) -> None:
            self.kept: dict[str, StepRecord] = {}

        def get(self, record_id: str) -> StepRecord | None:
            return self.kept.get(record_id)

        def records(self) -> tuple[StepRecord, ...]:
            return tuple(self.kept.values())

        def put(self, record: StepRecord) -> StepRecord:
            self.kept[record.id] = record
            return record

        async def ready(self) -> None:
            pass

    older = OlderStore()
    items = map_store(older, "oracle-map")  # type: ignore[arg-type]  # what a person's untyped store gives
    items.put(tiny_record("a"))
    assert isinstance(items, InlineMapStore) and older.get("a") is not None
    assert map_store(MemoryStore(), "k").key == "k"  # type: ignore[attr-defined]


def test_a_maps_saved_block_never_carries_a_partial_record_it_found() -> None:
    from agl_notebook.replay.records import Waiting

    waiting = StepRecord(
        id="w",
        parts={},
        occurrence=0,
        role="oracle",
        backend="scripted:x",
        input="q",
        result=None,
        transcript=(),
        partial=Waiting("question", "toolu_00_0", "ask"),
    )
    parent = MemoryStore()
    parent.put_partial(waiting)
    items = parent.for_map("oracle-map")
    assert items.get("w") == waiting, "found, to be resumed"
    parent.discard_partial("w")  # the resumed item failed
    assert items.saved_block()["records"] == []
