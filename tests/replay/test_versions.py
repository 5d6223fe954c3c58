"""Versions of a step: contents kept once, the change a record carries, refresh keeping the version it replaced,
history and diff."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from IPython.core.error import UsageError

from agl_notebook import Claude, Role, Run, ScriptedModel, Tool, ToolResult, describe, reporting_tool, tool
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import ModelRequest
from agl_notebook.notebook.magics import agl
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.replay.records import block_from_json, block_to_json, record_from_json
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.replay.versions import (
    DIFF_LINES,
    ContentIndex,
    diff_lines,
    history_lines,
    line_diff,
    versions_of,
    word_diff,
)
from tests.support.anthropic_api import reply, stream_response, use


@dataclass
class Answer:
    text: str = describe("the answer")


def role(instructions: str, *, max_tokens: int = 1024) -> Role[Answer]:
    return Role(
        "writer", instructions, [reporting_tool("answer", "Hand back the answer.", Answer)], max_tokens=max_tokens
    )


def model(answer: str) -> ScriptedModel:
    def reply(request: ModelRequest) -> dict[str, object]:
        return {"calls": [{"name": "answer", "args": {"text": answer}}]}

    return ScriptedModel(reply)


async def test_an_edit_of_the_instructions_keeps_a_change_naming_them_with_the_line_diff() -> None:
    store = MemoryStore()
    await Run(model=model("short"), store=store).step(role("Be brief.\nUse plain words."), "q")
    await Run(model=model("shorter"), store=store).step(role("Be very brief.\nUse plain words."), "q")
    first, second = store.records()
    assert first.change is None, "no previous version: nothing to show"
    change = second.change
    assert change is not None and change["previous"] == first.id
    assert change["differs"] == ["instructions", "result"]
    assert change["instructions"] == {
        "lines": ["@@ -1,3 +1,3 @@", "-Be brief.", "+Be very brief.", " Use plain words.", " "]
    }
    assert change["result"] == [{"field": "text", "before": "short", "after": "shorter"}]
    numbers: Any = change["numbers"]
    assert numbers["turns"] == [1, 1] and numbers["tool_calls"] == [1, 1]
    trace = StepTrace("writer")
    trace.change = change
    assert "changed since the previous version: instructions, result" in render_text(trace, ())
    html = render_html(trace, ())
    assert '<details class="agl-change">' in html and "open" not in html.split("agl-change")[1][:20]
    assert "Changed since the previous version: instructions, result" in html and "+Be very brief." in html


async def test_a_long_system_text_is_kept_once_however_many_steps_share_it() -> None:
    long = "Rule. " * 3500  # about 20 KB
    store = MemoryStore()
    run = Run(model=model("ok"), store=store)
    for i in range(50):
        await run.step(role(long), f"question {i}")
    records = store.records()
    assert sum("instructions" in r.contents for r in records) == 1
    block = json.dumps(block_to_json(records))
    assert block.count(long.strip()) == 1
    assert len(block) < 20_000 + 50 * 2_500, len(block)
    index = ContentIndex(records)
    held = next(r.contents["instructions"] for r in records if "instructions" in r.contents)
    assert all(index.content(r, "instructions") == (True, held) for r in records)
    assert all(index.content(r, "instructions")[1].startswith("Rule.") for r in records)  # type: ignore[union-attr]


async def test_a_record_from_before_versions_says_differs_for_what_it_did_not_keep() -> None:
    store = MemoryStore()
    await Run(model=model("a"), store=store).step(role("One."), "q")
    old = store.records()[0].to_json()
    del old["contents"]  # as a record made before versions
    older = MemoryStore()
    older.put(record_from_json(old))
    await Run(model=model("b"), store=older).step(role("Two."), "q")
    change = older.records()[1].change
    assert change is not None and change["unknown"] == ["instructions"] and "instructions" not in change
    trace = StepTrace("writer")
    trace.change = change
    assert "instructions (differs; not kept before)" in render_text(trace, ())


async def test_settings_and_tools_changes_say_before_and_after() -> None:
    store = MemoryStore()
    await Run(model=model("a"), store=store).step(role("Same.", max_tokens=100), "q")
    await Run(model=model("a"), store=store).step(role("Same.", max_tokens=200), "q")
    change = store.records()[1].change
    assert change is not None and change["differs"] == ["settings"]
    assert change["settings"] == {"before": {"max_tokens": 100}, "after": {"max_tokens": 200}}


async def test_refresh_keeps_the_replaced_record_inside_the_new_one_and_at_most_two_versions_by_default() -> None:
    store = MemoryStore()
    for answer in ("first", "second", "third"):
        await Run(model=model(answer), store=store, mode="refresh").step(role("Same."), "q")
    (record,) = store.records()
    assert record.result == {"text": "third"}
    assert record.replaced is not None and record.replaced.result == {"text": "second"}
    assert record.replaced.replaced is None, "keeping more than the current and the previous version is opt-in"
    assert record.change is not None and record.change["result"] == [
        {"field": "text", "before": "second", "after": "third"}
    ]
    again = block_from_json(json.loads(json.dumps(block_to_json([record]))), where="block")
    assert again.records == (record,)
    assert [name for name, _ in versions_of([record])] == [record.id, f"{record.id}~1"]


async def test_refresh_keeps_more_versions_when_asked() -> None:
    agl("versions 3")
    try:
        store = MemoryStore()
        for answer in ("first", "second", "third", "fourth"):
            await Run(model=model(answer), store=store, mode="refresh").step(role("Same."), "q")
        (record,) = store.records()
        assert [r.result for _, r in versions_of([record])] == [{"text": t} for t in ("fourth", "third", "second")]
    finally:
        agl("versions 2")


async def test_history_lists_versions_newest_first_and_diff_compares_any_two() -> None:
    store = MemoryStore()
    await Run(model=model("short"), store=store).step(role("Be brief."), "q")
    await Run(model=model("long answer"), store=store).step(role("Be thorough."), "q")
    lines = history_lines(store.records())
    assert lines[0].startswith("cell (unknown cell): role 'writer' on 'q' (occurrence 1), 2 version(s)")
    assert "changed: instructions, result" in lines[1] and '"long answer"' in lines[1]
    assert "(no previous version)" in lines[2] and '"short"' in lines[2]
    first, second = store.records()
    said = diff_lines(first, second, ContentIndex(store.records()))
    assert said[0] == "changed: instructions, result"
    assert "  -Be brief." in said and "  +Be thorough." in said


def test_line_and_word_diffs_are_capped() -> None:
    old = "\n".join(f"line {i}" for i in range(1000))
    new = "\n".join(f"line {i}!" for i in range(1000))
    diff: Any = line_diff(old, new)
    assert len(diff["lines"]) == DIFF_LINES and diff["more"] == 2001 - DIFF_LINES  # a hunk header, 2,000 lines
    runs = word_diff("the cat sat on the mat", "the dog sat on the mat")
    assert runs == [["=", "the"], ["-", "cat"], ["+", "dog"], ["=", "sat on the mat"]]
    huge: Any = word_diff("a " * 10_000, "b " * 10_000)
    assert huge[-1][0] == "…"
    assert sum(len(str(r[1])) for r in huge[:-1]) <= 6_000


@pytest.mark.parametrize("line", ["diff abcdefgh 12345678", "diff abc def", "diff onlyone"])
def test_diff_of_unknown_ids_is_a_one_line_usage_error(line: str) -> None:
    with pytest.raises(UsageError) as caught:
        agl(line)
    assert "\n" not in str(caught.value) and "usage: %agl" in str(caught.value)


async def test_a_refresh_to_the_same_result_is_the_same_version_with_its_change_and_previous() -> None:
    store = MemoryStore()
    await Run(model=model("one"), store=store).step(role("First."), "q")
    for _ in range(2):
        await Run(model=model("two"), store=store, mode="refresh").step(role("Second."), "q")
    first, second = store.records()
    assert second.change is not None and second.change["previous"] == first.id
    assert second.change["differs"] == ["instructions", "result"]
    assert second.replaced is None, "nothing new was replaced: the version before it is the other record"


async def test_a_planted_secret_is_in_no_content_change_view_history_or_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)  # the way the scrubber learns a secret
    store = MemoryStore()
    await Run(model=model(f"one {secret}"), store=store).step(role(f"Use the password {secret}."), "q")
    long_answer = f"a long answer {'with many words ' * 12} and {json.dumps(secret)} in it"
    await Run(model=model(long_answer), store=store).step(role(f"Use the password {secret} twice."), "q")
    first, second = store.records()
    assert second.change is not None and second.change["differs"] == ["instructions", "result"]
    trace = StepTrace("writer")
    trace.change = second.change
    texts = [
        json.dumps(block_to_json(store.records())),  # contents and change as kept (plain and JSON-escaped)
        render_text(trace),
        render_html(trace),
        *history_lines(store.records()),
        *diff_lines(first, second, ContentIndex(store.records())),
    ]
    assert not leaked(texts, secret), leaked(texts, secret)
    assert "+Use the password" in render_html(trace)


def test_history_and_versions_magics_say_what_they_did_or_a_one_line_usage_error() -> None:
    assert agl("history").startswith("No recordings")
    for line in ("versions 0", "versions many", "history a b"):
        with pytest.raises(UsageError) as caught:
            agl(line)
        assert "\n" not in str(caught.value) and "usage: %agl" in str(caught.value)


def test_a_map_pairs_only_with_records_of_its_own_cell_never_another_cells_experiment() -> None:
    import dataclasses

    from agl_notebook.replay.records import CellUse
    from agl_notebook.replay.versions import VersionIndex
    from tests.support.records import tiny_record

    def kept(record_id: str, cell: CellUse, at: str) -> Any:
        record = dataclasses.replace(tiny_record(record_id), parts={"input": "in-1"}, cell_id=cell.cell_id)
        return dataclasses.replace(record, cells=(cell,), recorded_at=at)

    here, there = CellUse("cell-a", "s" * 32), CellUse("cell-b", "t" * 32)
    earlier = kept("earlier-here", here, "2026-12-01T10:00:00Z")
    other = kept("other-cell", there, "2026-12-01T11:00:00Z")  # newer, the same rows, another cell's map
    records = [earlier, other]

    def paired(index: VersionIndex) -> str | None:
        found = index.previous("oracle", "in-1", 0, "new")
        return found.id if found is not None else None

    assert paired(VersionIndex(records, cell_id="cell-a")) == "earlier-here"
    assert paired(VersionIndex(records, cell_id="cell-b")) == "other-cell"
    assert paired(VersionIndex(records, cell_id="cell-c")) is None
    headless = VersionIndex(records, source="s" * 32)  # a headless kernel knows its cell by its source's digest
    assert paired(headless) == "earlier-here"
    outside = [dataclasses.replace(tiny_record("a"), parts={"input": "in-1"})]  # outside a notebook: one place
    assert paired(VersionIndex(outside)) == "a"


async def _noop(_: Answer) -> ToolResult:
    return ToolResult("ok")


def tooled(*tools: Tool[Any], reporting: type[Any] = Answer) -> Role[Any]:
    return Role("writer", "Same.", [*tools, reporting_tool("answer", "Hand back the answer.", reporting)])


@dataclass
class LongAnswer:
    text: str = describe("the answer")
    sources: str = describe("where it came from")


def answer_as_asked(request: ModelRequest) -> dict[str, object]:
    """The answer, with its sources when the reporting tool asks for them."""
    (reporting,) = [spec for spec in request.tools if spec.name == "answer"]
    sourced = "sources" in json.dumps(reporting.input_schema)
    return {"calls": [{"name": "answer", "args": {"text": "a", **({"sources": "the index"} if sourced else {})}}]}


async def test_tools_added_removed_and_changed_are_named_in_the_change_its_views_and_the_diff() -> None:
    store = MemoryStore()
    lookup = tool("lookup", "Look it up.", Answer, _noop)
    send = tool("send", "Send it.", Answer, _noop)
    writer = ScriptedModel(answer_as_asked)  # one backend for both: only the tools differ
    await Run(model=writer, store=store).step(tooled(lookup, send), "q")
    looked_up_better = tool("lookup", "Look it up in the index first.", Answer, _noop)
    fetch = tool("fetch", "Fetch the page.", Answer, _noop)
    await Run(model=writer, store=store).step(tooled(looked_up_better, fetch, reporting=LongAnswer), "q")
    before, after = store.records()
    change = after.change
    assert change is not None and change["differs"] == ["tools", "reporting", "result"]
    assert change["tools"] == {"added": ["fetch"], "removed": ["send"], "changed": ["lookup"]}
    assert change["reporting"] == {"added": [], "removed": [], "changed": ["answer"]}
    trace = StepTrace("writer")
    trace.change = change
    assert "changed since the previous version: tools, reporting, result" in render_text(trace, ())
    html = render_html(trace, ())
    assert "<b>tools</b>: added fetch; removed send; changed lookup" in html
    assert "<b>reporting</b>: changed answer" in html
    lines = diff_lines(before, after, ContentIndex(store.records()))
    assert "tools: added fetch; removed send; changed lookup" in lines
    assert "reporting: changed answer" in lines
    again = diff_lines(after, before, ContentIndex(store.records()))  # the other way round: added and removed swap
    assert "tools: added send; removed fetch; changed lookup" in again


def anthropic_model(model_id: str, answer: str) -> AnthropicModel:
    """A Claude backend through the real ``anthropic`` client, its API the local fake answering ``answer``."""
    import anthropic

    def handle(request: httpx2.Request) -> httpx2.Response:
        assert json.loads(request.content)["model"] == model_id
        return stream_response(reply(use("toolu_1", "answer", json.dumps({"text": answer})), stop_reason="tool_use"))

    client = anthropic.AsyncAnthropic(
        api_key="test-key-not-real",
        base_url="http://anthropic.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
        max_retries=0,
    )
    return AnthropicModel(client=client, model=model_id)


async def test_a_model_change_names_the_backend_before_and_after() -> None:
    store = MemoryStore()
    await Run(model=anthropic_model(Claude.SONNET, "long answer"), store=store).step(role("Same."), "q")
    await Run(model=anthropic_model(Claude.HAIKU, "short"), store=store).step(role("Same."), "q")
    before, after = store.records()
    change = after.change
    assert change is not None and change["previous"] == before.id
    assert change["differs"] == ["backend", "result"]
    assert change["backend"] == {"before": f"anthropic:{Claude.SONNET}", "after": f"anthropic:{Claude.HAIKU}"}
    trace = StepTrace("writer")
    trace.change = change
    assert "changed since the previous version: backend, result" in render_text(trace, ())
    html = render_html(trace, ())
    assert f"<b>backend</b>: anthropic:{Claude.SONNET} → anthropic:{Claude.HAIKU}" in html
    lines = diff_lines(before, after, ContentIndex(store.records()))
    assert f"backend: anthropic:{Claude.SONNET} -> anthropic:{Claude.HAIKU}" in lines
    assert "result text: long answer -> short" in lines
    numbers: Any = change["numbers"]
    assert numbers["usd"][0] > numbers["usd"][1] > 0, "the same tokens cost less on the smaller model"


@pytest.mark.parametrize("keep", [1, 2])
async def test_a_refresh_never_loses_the_contents_only_the_replaced_record_kept(keep: int) -> None:
    from agl_notebook.replay.versions import keep_versions, set_keep_versions

    before = keep_versions()
    set_keep_versions(keep)
    try:
        store = MemoryStore()
        await Run(model=model("same"), store=store).step(role("Be brief."), "q")
        for answer in ("same", "other"):  # a refresh to the same result, then to another one
            await Run(model=model(answer), store=store, mode="refresh").step(role("Be brief."), "q")
            (record,) = store.records()
            index = ContentIndex(store.records())
            for part in ("instructions", "tools", "reporting", "settings"):
                assert index.content(record, part)[0], f"{part} lost with the replaced record ({answer}, keep {keep})"
            assert str(index.content(record, "instructions")[1]).startswith("Be brief.\n")
        # An edit now still diffs the instructions line by line, not "differs (not kept before)".
        await Run(model=model("other"), store=store).step(role("Be very brief."), "q")
        edited = next(r for r in store.records() if r.id != record.id)
        assert edited.change is not None and "instructions" in json.dumps(edited.change.get("differs"))
        assert "-Be brief." in json.dumps(edited.change)
    finally:
        set_keep_versions(before)


@pytest.mark.parametrize("before", [53, 385])
async def test_a_secret_cut_at_a_line_s_bound_leaves_no_piece_in_the_change_history_or_diff(
    before: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The diff's lines are cut at 400 characters: a secret across the cut is scrubbed before it."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)
    store = MemoryStore()
    await Run(model=model("one"), store=store).step(role("First."), "q")
    pad = "x" * before
    await Run(model=model(f"{pad}{secret}"), store=store).step(role(f"{pad}{secret} and more " * 2), "q")
    first, second = store.records()
    texts = [
        json.dumps(block_to_json(store.records())),
        *history_lines(store.records()),
        *diff_lines(first, second, ContentIndex(store.records())),
    ]
    assert not leaked(texts, secret), leaked(texts, secret)


@pytest.mark.parametrize("before", [0, 30, 53])
async def test_history_scrubs_a_secret_before_cutting_the_headline_and_the_input(
    before: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records read from a notebook were scrubbed of the secrets known when they were kept, not of one set since."""
    from tests.notebook.test_saved_views import leaked, planted_secret

    secret = planted_secret()
    pad = "x" * before
    store = MemoryStore()
    await Run(model=model(f"{pad}{secret}"), store=store).step(role("First."), f"{pad}{secret}")
    monkeypatch.setenv("AGL_TEST_SERVICE_PASSWORD", secret)  # known from now on
    lines = history_lines(store.records())
    assert not leaked(lines, secret), leaked(lines, secret)
