"""Recordings inside notebook JSON: reading damaged notebooks, and consolidating without losing anything."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from agl_notebook.errors import InputError
from agl_notebook.models.base import Usage
from agl_notebook.notebook.nbfile import METADATA_KEY, consolidate, records_in_notebook
from agl_notebook.payloads import JsonObject
from agl_notebook.replay.records import StepRecord, block_to_json
from agl_notebook.transcript import user_text


def record(record_id: str) -> StepRecord:
    return StepRecord(
        id=record_id,
        parts={"role": "r"},
        occurrence=0,
        role="r",
        backend="scripted:x",
        input="q",
        result=None,
        transcript=(user_text("q"),),
        usage=Usage(1, 2),
    )


def output_with(block: Any) -> dict[str, Any]:
    return {"output_type": "display_data", "data": {"text/plain": "step"}, "metadata": {METADATA_KEY: block}}


def notebook(*outputs: dict[str, Any], metadata_block: Any = None) -> dict[str, Any]:
    nb: dict[str, Any] = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"cell_type": "code", "source": "x", "metadata": {}, "outputs": list(outputs)}],
    }
    if metadata_block is not None:
        nb["metadata"][METADATA_KEY] = metadata_block
    return nb


@pytest.mark.parametrize(
    "damage",
    [
        {"cells": None},
        {"cells": [None, 3, "x"]},
        {"cells": [{"outputs": None}]},
        {"cells": [{"outputs": [None, 1]}]},
        {"cells": [{"outputs": [{"metadata": None}]}]},
        {"metadata": None},
    ],
)
def test_a_damaged_notebook_is_read_as_far_as_it_goes(damage: dict[str, Any]) -> None:
    nb = {"nbformat": 4, "metadata": {}, "cells": []} | damage
    assert records_in_notebook(nb).records == {}


def test_consolidate_keeps_records_this_version_cannot_read_where_they_were() -> None:
    newer: JsonObject = {"kind": "step", "format": 2, "id": "from-the-future"}
    nb = notebook(output_with(block_to_json([record("a1")], [newer])))
    assert consolidate(nb) == 1
    assert [r["id"] for r in nb["metadata"][METADATA_KEY]["records"]] == ["a1"]
    assert nb["cells"][0]["outputs"][0]["metadata"][METADATA_KEY] == {"version": 1, "records": [newer]}


def test_consolidate_refuses_over_an_unreadable_metadata_block_and_changes_nothing() -> None:
    nb = notebook(output_with(block_to_json([record("a1")])), metadata_block={"version": 99, "records": []})
    before = copy.deepcopy(nb)
    with pytest.raises(InputError, match="Not consolidated, so nothing is lost"):
        consolidate(nb)
    assert nb == before


def test_output_copies_win_over_the_metadata_copy_and_duplicates_are_dropped() -> None:
    old, new = record("same"), dataclasses.replace(record("same"), backend="scripted:newer")
    nb = notebook(output_with(block_to_json([new])), metadata_block=block_to_json([old]))
    found = records_in_notebook(nb)
    assert list(found.records) == ["same"]
    assert found.records["same"].backend == "scripted:newer"
