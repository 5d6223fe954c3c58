"""merge_records: a later layer wins on an id, but a partial record never replaces a finished one."""

from __future__ import annotations

from agl_notebook.replay.records import StepRecord, Waiting
from agl_notebook.replay.stores import merge_records
from tests.support.records import tiny_record


def _record(record_id: str, result: str | None, *, partial: bool = False) -> StepRecord:
    return tiny_record(record_id, result, waiting=Waiting("approval", "call-1", "send") if partial else None)


def test_a_later_layer_wins_but_a_partial_never_replaces_a_finished_record() -> None:
    finished, waiting = _record("item-23", "sent"), _record("item-23", None, partial=True)
    # A map item's finished record travels in the map's output; its partial one stayed in the notebook metadata
    # the extension hands back after a restart, read after the file.
    assert merge_records({"item-23": finished}, {"item-23": waiting})["item-23"] is finished
    assert merge_records({"item-23": waiting}, {"item-23": finished})["item-23"] is finished
    newer_partial = _record("item-23", None, partial=True)
    assert merge_records({"item-23": waiting}, {"item-23": newer_partial})["item-23"] is newer_partial
    newer = _record("item-23", "sent again")
    assert merge_records({"item-23": finished}, {"item-23": newer})["item-23"] is newer
    assert merge_records({"a": finished}, {"b": waiting}) == {"a": finished, "b": waiting}
