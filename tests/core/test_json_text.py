"""A record is searched for secrets as compact JSON by orjson (`_json_text`), and scrubbed the standard way.

The fast text only says whether anything is to be scrubbed; what it finds is scrubbed in the standard spelling and
read back. Every case runs with orjson and without it (an install without its wheel): the kept record is the same.
"""

from __future__ import annotations

import html
import json
import math

import pytest

from agl_notebook import _json_text
from agl_notebook._secrets import REDACTED
from agl_notebook.payloads import JsonObject, JsonValue
from agl_notebook.replay import MemoryStore
from agl_notebook.replay.records import StepRecord
from agl_notebook.transcript import Message, TextBlock, ToolResultBlock, ToolUseBlock

SECRET = "pl" + "4nted" * 4  # built here: no secret is written whole in the repository
HEADER_VALUE = "hv" + "7" * 14


@pytest.fixture(params=["orjson", "standard"])
def encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PLANTED_API_KEY", SECRET)
    if request.param == "standard":  # as if orjson were not installed
        monkeypatch.setattr(_json_text, "_loaded", True)
        monkeypatch.setattr(_json_text, "_dumps", None)
    return str(request.param)


def record(text: str, *, tool_input: JsonObject | None = None, result: JsonValue = None) -> StepRecord:
    return StepRecord(
        id="0" * 32,
        parts={"role": "r", "input": "i"},
        occurrence=0,
        role="looker",
        backend="scripted:x",
        input="look it up",
        result={"summary": "done"} if result is None else result,
        transcript=(
            Message("user", (TextBlock("look it up"),)),
            Message("assistant", (ToolUseBlock("toolu_1", "look_up", tool_input or {"topic": "a"}),)),
            Message("user", (ToolResultBlock("toolu_1", text),)),
        ),
    )


def kept_text(kept: StepRecord) -> str:
    return json.dumps(kept.to_json(), ensure_ascii=False)


def test_the_search_text_is_the_records_json_compact() -> None:
    value = record("a:0").to_json()
    text = _json_text.json_to_search(value)
    assert text is not None and json.loads(text) == value
    assert ", " not in text.replace('", "', "")  # compact: no space after a separator


@pytest.mark.parametrize("value", [{"n": 2**70}, {"s": "\ud800"}, {1: "a"}], ids=["big int", "surrogate", "int key"])
def test_what_orjson_cannot_spell_is_none_and_the_caller_spells_it_the_standard_way(value: object) -> None:
    assert _json_text.json_to_search(value) is None


def test_without_orjson_the_search_text_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "orjson", None)  # `import orjson` raises ImportError
    monkeypatch.setattr(_json_text, "_loaded", False)
    monkeypatch.setattr(_json_text, "_dumps", None)
    assert _json_text.json_to_search({"a": 1}) is None


def test_a_clean_record_is_kept_as_it_is(encoder: str) -> None:
    clean = record("a:0")
    assert MemoryStore().put(clean) is clean


@pytest.mark.parametrize(
    "spelling",
    [
        SECRET,
        json.dumps(SECRET),  # escaped as JSON inside the text
        SECRET[:10] + "\\u" + format(ord(SECRET[10]), "04x") + SECRET[11:],  # one character escaped
        html.escape(SECRET).replace("4", "&#52;"),  # as an HTML text spells it
    ],
    ids=["plain", "json", "escaped", "html"],
)
def test_a_planted_secret_in_any_spelling_is_scrubbed_with_either_encoder(encoder: str, spelling: str) -> None:
    kept = MemoryStore().put(record(f"the key is {spelling} ok"))
    said = kept.transcript[2].content[0]
    assert isinstance(said, ToolResultBlock)
    assert said.content.replace('"', "") == f"the key is {REDACTED} ok"  # the JSON spelling keeps its quotes
    assert SECRET not in kept_text(kept)


def test_a_secret_split_across_two_strings_of_a_record_is_not_a_secret_and_nothing_breaks(encoder: str) -> None:
    half = len(SECRET) // 2
    kept = MemoryStore().put(record(SECRET[:half], tool_input={"topic": SECRET[half:]}))
    assert kept.transcript[2].content[0] == ToolResultBlock("toolu_1", SECRET[:half])


def test_an_auth_header_as_a_json_object_in_a_tool_call_is_scrubbed_with_either_encoder(encoder: str) -> None:
    # The standard text spells it "x-api-key": "...", the compact one "x-api-key":"...": both are found.
    kept = MemoryStore().put(record("a:0", tool_input={"headers": {"x-api-key": HEADER_VALUE}}))
    assert HEADER_VALUE not in kept_text(kept)
    assert kept.transcript[1].content[0] == ToolUseBlock("toolu_1", "look_up", {"headers": {"x-api-key": REDACTED}})


def test_a_record_only_the_standard_encoder_spells_is_still_scrubbed(encoder: str) -> None:
    kept = MemoryStore().put(record(f"key {SECRET}", result={"n": 2**70, "text": "x"}))
    assert SECRET not in kept_text(kept)
    assert kept.result == {"n": 2**70, "text": "x"}


def test_a_non_finite_number_survives_the_scrub_of_its_record(encoder: str) -> None:
    # orjson writes NaN as null: the search text is only searched, the record is rewritten from the standard text.
    kept = MemoryStore().put(record(f"key {SECRET}", result={"score": math.inf, "text": "x"}))
    assert SECRET not in kept_text(kept)
    assert kept.result == {"score": math.inf, "text": "x"}


def _names() -> dict[str, object]:
    """What the records' modules import only while type checking, for their hints."""
    from agl_notebook.media import Media
    from agl_notebook.models.prices import RecordedCost

    return {"RecordedCost": RecordedCost, "Media": Media}


_NAMES = _names()


def _dataclasses_in(kind: object, seen: set[type]) -> None:
    """Every dataclass a value of ``kind`` may hold, through its fields' annotations (tuples, unions, aliases)."""
    import dataclasses
    import sys
    import typing

    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if kind in seen:
            return
        seen.add(kind)
        module = vars(sys.modules[kind.__module__])
        for f in dataclasses.fields(kind):
            try:
                hint = eval(f.type, module, _NAMES) if isinstance(f.type, str) else f.type
            except TypeError:  # a JSON alias spelled as a string (``JsonObject | None``): it holds no dataclass
                continue
            _dataclasses_in(hint, seen)
        for sub in kind.__subclasses__():
            _dataclasses_in(sub, seen)
        return
    for arg in typing.get_args(kind):
        _dataclasses_in(arg, seen)


def test_no_field_of_a_records_dataclasses_is_left_out_of_the_searched_text() -> None:
    # orjson leaves out a dataclass field whose name starts with "_": a secret in one would never be searched for.
    import dataclasses

    seen: set[type] = set()
    _dataclasses_in(StepRecord, seen)
    assert {"StepRecord", "Message", "TextBlock", "ToolUseBlock", "ToolResultBlock", "Usage"} <= {
        t.__name__ for t in seen
    }
    hidden = [f"{t.__name__}.{f.name}" for t in seen for f in dataclasses.fields(t) if f.name.startswith("_")]
    assert hidden == []
    text = _json_text.json_to_search(record("a:0"))
    assert text is not None and '"transcript":[' in text and '"content":"a:0"' in text
