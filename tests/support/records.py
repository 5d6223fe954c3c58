"""A small step record for store and sidecar tests: only its id, result and (for a partial) what it waits on differ."""

from __future__ import annotations

import dataclasses

from agl_notebook.payloads import JsonValue
from agl_notebook.replay.records import StepRecord, Waiting


def tiny_record(record_id: str, result: JsonValue = None, *, waiting: Waiting | None = None) -> StepRecord:
    """A record of role ``oracle`` on a scripted backend; partial when ``waiting`` is given."""
    record = StepRecord(
        id=record_id,
        parts={},
        occurrence=0,
        role="oracle",
        backend="scripted:x",
        input="q",
        result=result,
        transcript=(),
    )
    return dataclasses.replace(record, partial=waiting) if waiting is not None else record
