"""Tool calls written as text markup: the interceptor alone, its split-independence (hypothesis), and its
place below the loop (every model, roles included)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agl_notebook import Claude, Role, Run, ScriptedModel, ToolResult, tool
from agl_notebook.events import ClientToolRequested, Event, MarkupError, OutputTextDelta
from agl_notebook.loop import model_events
from agl_notebook.models.base import ModelEvent, ModelRequest, TextDelta, ToolCall, TurnEnd
from agl_notebook.models.markup import (
    DSML_TOOL_CALL_CLOSE,
    DSML_TOOL_CALL_OPEN,
    MarkupDropped,
    MarkupParser,
    Read,
    intercept,
)
from agl_notebook.transcript import Message, TextBlock, ToolUseBlock, user_text
from tests.support.steps import Query

OPEN, CLOSE = DSML_TOOL_CALL_OPEN, DSML_TOOL_CALL_CLOSE
Item = tuple[Any, ...]


def span(body: object) -> str:
    """A call written as text; a dict body is written as JSON."""
    return OPEN + (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)) + CLOSE


def normal(out: Sequence[Any]) -> list[Item]:
    """Parser output with adjacent text joined: what a consumer of the whole reply gets."""
    items: list[Item] = []
    for o in out:
        if isinstance(o, TextDelta):
            if items and items[-1][0] == "text":
                items[-1] = ("text", items[-1][1] + o.text)
            elif o.text:
                items.append(("text", o.text))
        elif isinstance(o, ToolCall):
            items.append(("call", o.id, o.name, o.args))
        elif isinstance(o, MarkupDropped):
            items.append(("error", o.error.message, o.error.text))
        else:
            assert isinstance(o, TurnEnd), o
    return items


def parse(chunks: Sequence[str], *, turn: int = 0, limit: int | None = None) -> list[Item]:
    parser = MarkupParser(turn) if limit is None else MarkupParser(turn, limit=limit)
    out: list[Read] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    out += parser.finish()
    assert parser.idle
    return normal(out)


def texts(items: list[Item]) -> str:
    return "".join(i[1] for i in items if i[0] == "text")


# The tags ---------------------------------------------------------------------------------------------------------


def test_the_tags_use_full_width_bars() -> None:
    assert OPEN == "<\uff5cDSML\uff5ctool_call>" == "<｜DSML｜tool_call>"
    assert CLOSE == "</\uff5cDSML\uff5ctool_call>"


# Reading spans ------------------------------------------------------------------------------------------------------


def test_a_call_becomes_a_tool_call_and_the_text_around_it_stays() -> None:
    reply = "Let me look. " + span({"name": "get_weather", "arguments": {"city": "Sydney"}}) + " Done."
    assert parse([reply]) == [
        ("text", "Let me look. "),
        ("call", "markup_00_0", "get_weather", {"city": "Sydney"}),
        ("text", " Done."),
    ]


@pytest.mark.parametrize(
    ("body", "args"),
    [
        ({"name": "f", "args": {"x": 1}}, {"x": 1}),
        ({"name": "f", "arguments": json.dumps({"x": [1, "a"]})}, {"x": [1, "a"]}),
        ({"name": "f", "args": '{"x": 2}'}, {"x": 2}),
        ({"name": "f"}, {}),
        ({"name": "f", "arguments": None}, {}),
        ({"name": "f", "arguments": "  "}, {}),
        ({"name": "f", "arguments": {"y": 1}, "args": {"x": 1}}, {"y": 1}),
    ],
)
def test_arguments_or_args_as_an_object_or_a_json_string(body: dict[str, Any], args: dict[str, Any]) -> None:
    assert parse([span(body)]) == [("call", "markup_00_0", "f", args)]


def test_a_close_tag_inside_a_json_string_is_not_a_close() -> None:
    args = {"text": f"write {CLOSE} and {OPEN} literally", "q": 'say "hi" \\ then ' + CLOSE}
    reply = "a" + span({"name": "note", "arguments": args}) + "b"
    assert parse([reply]) == [("text", "a"), ("call", "markup_00_0", "note", args), ("text", "b")]


def test_several_calls_in_one_reply_get_numbered_ids_from_the_turn() -> None:
    reply = span({"name": "a"}) + "then" + span({"name": "b", "args": {"k": "v"}}) + span({"name": "c"})
    assert parse([reply], turn=3) == [
        ("call", "markup_03_0", "a", {}),
        ("text", "then"),
        ("call", "markup_03_1", "b", {"k": "v"}),
        ("call", "markup_03_2", "c", {}),
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"name": "f", "arguments": {"x": }', "not valid JSON"),
        ('["f", {}]', "must be a JSON object"),
        ('{"arguments": {}}', 'has no "name"'),
        ('{"name": "  "}', 'has no "name"'),
        ('{"name": "f", "arguments": [1]}', "not a JSON object"),
        ('{"name": "f", "arguments": "{nope"}', "a string that is not valid JSON"),
        ('{"name": "f", "arguments": "[1, 2]"}', "not a JSON object"),
        ('{"name": "f", "arguments": {"x": NaN}}', "not valid JSON"),
    ],
)
def test_a_malformed_span_is_dropped_alone(body: str, reason: str) -> None:
    reply = "before " + span(body) + " middle " + span({"name": "ok", "args": {"n": 1}}) + " after"
    items = parse([reply])
    assert items[0] == ("text", "before ")
    assert items[1][0] == "error" and reason in items[1][1] and items[1][2] == body
    assert items[2:] == [("text", " middle "), ("call", "markup_00_0", "ok", {"n": 1}), ("text", " after")]


def test_a_dropped_span_keeps_its_raw_text_for_the_transcript() -> None:
    parser = MarkupParser(0)
    out = parser.feed("a" + span("{bad") + "b" + OPEN + '{"name": "f"') + parser.finish()
    raws = [o.raw for o in out if isinstance(o, MarkupDropped)]
    assert raws == [span("{bad"), OPEN + '{"name": "f"']


def test_a_span_left_open_is_dropped_with_an_error() -> None:
    items = parse(["text " + OPEN + '{"name": "f"'])
    assert items[0] == ("text", "text ")
    assert items[1][0] == "error" and "no close tag" in items[1][1]
    assert len(items) == 2


def test_unbalanced_quotes_lose_one_call_not_the_rest_of_the_reply() -> None:
    broken = OPEN + '{"name": "f", "arguments": {"x": "oops}}' + CLOSE
    reply = "a" + broken + " b " + span({"name": "g"}) + " c"
    items = parse([reply])
    assert items[0] == ("text", "a")
    assert items[1][0] == "error"
    assert items[2:] == [("text", " b "), ("call", "markup_00_0", "g", {}), ("text", " c")]


def test_a_span_past_the_size_bound_is_dropped_and_what_follows_is_read() -> None:
    big = {"name": "f", "arguments": {"blob": "x" * 200}}
    reply = "a" + span(big) + "b" + span({"name": "g"}) + "c"
    for chunks in ([reply], list(reply), [reply[:30], reply[30:90], reply[90:]]):
        items = parse(chunks, limit=100)
        assert items[0] == ("text", "a")
        assert items[1][0] == "error" and "longer than 100 characters" in items[1][1]
        assert items[1][2].startswith('{"name": "f"')
        assert items[2:] == [("text", "b"), ("call", "markup_00_0", "g", {}), ("text", "c")]
    # A body of exactly the bound is kept.
    body = json.dumps({"name": "f", "arguments": {"b": ""}})
    assert parse([span(body)], limit=len(body))[0][0] == "call"
    assert parse([span(body)], limit=len(body) - 1)[0][0] == "error"


def test_a_huge_unclosed_span_is_not_kept_in_memory() -> None:
    parser = MarkupParser(0, limit=1000)
    parser.feed(OPEN + '{"name": "f", "arguments": {"x": "')
    for _ in range(200):
        assert parser.feed("y" * 1000) == []
    assert parser._span is not None and parser._span.parts == []
    (dropped,) = parser.finish()
    assert isinstance(dropped, MarkupDropped) and "no close tag" in dropped.error.message
    assert len(dropped.error.text) <= 201 and dropped.raw == ""  # too long to keep, in the transcript too


def test_only_a_possible_tag_prefix_is_held_back() -> None:
    parser = MarkupParser(0)
    assert normal(parser.feed("Hello <｜DS")) == [("text", "Hello ")]
    assert normal(parser.feed("x and more")) == [("text", "<｜DSx and more")]
    assert normal(parser.feed("a < b <")) == [("text", "a < b ")]
    assert normal(parser.feed("= c")) == [("text", "<= c")]
    assert normal(parser.feed("end <｜")) == [("text", "end ")]
    assert normal(parser.finish()) == [("text", "<｜")]


def test_inside_a_call_nothing_is_released_until_its_close() -> None:
    parser = MarkupParser(0)
    assert parser.feed(OPEN + '{"name": "f", "args": {"s": "</｜DSML｜tool_') == []
    assert parser.feed('call>"}}</｜DSML') == []
    assert normal(parser.feed("｜tool_call>next")) == [("call", "markup_00_0", "f", {"s": CLOSE}), ("text", "next")]


def test_an_escaped_quote_split_from_its_backslash() -> None:
    assert parse([OPEN + '{"name": "f", "args": {"s": "a\\', '"' + CLOSE + '"}}' + CLOSE]) == [
        ("call", "markup_00_0", "f", {"s": 'a"' + CLOSE})
    ]


def test_text_without_markup_is_never_changed() -> None:
    for text in ["", "plain", "a < b > c", "<｜DSML｜tool", "</｜DSML｜tool_call>", "<<<", "｜DSML｜"]:
        assert texts(parse([text])) == text


# Property tests: any split of a reply reads the same ---------------------------------------------------------------

_ALPHABET = st.sampled_from(
    [
        "a",
        " ",
        "<",
        ">",
        "/",
        "｜",
        "D",
        "S",
        "M",
        "L",
        "_",
        '"',
        "\\",
        "{",
        "}",
        ":",
        "\n",
        "é",
        "tool_call",
        OPEN[:5],
        CLOSE[:6],
    ]
)
_free_text = st.lists(_ALPHABET, max_size=8).map("".join)
_json_text = st.lists(st.sampled_from([*'ab "\\<>/｜{}', CLOSE, OPEN, CLOSE[:4]]), max_size=6).map("".join)
_args = st.dictionaries(
    st.sampled_from(["city", "q", "n"]),
    st.one_of(_json_text, st.integers(-5, 5), st.none(), st.lists(_json_text, max_size=2)),
    max_size=3,
)


@st.composite
def _call_span(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(["get_weather", "calc", "f"]))
    args = draw(_args)
    key = draw(st.sampled_from(["arguments", "args", "string"]))
    body: dict[str, Any] = (
        {"name": name, "arguments": json.dumps(args)} if key == "string" else {"name": name, key: args}
    )
    return span(json.dumps(body, ensure_ascii=draw(st.booleans())))


_broken_span = st.sampled_from(
    [
        span('{"name": "f", "arguments": {'),
        span("nope"),
        span('{"args": {}}'),
        span('{"name": "f", "args": "[1]"}'),
        OPEN + '{"name": "g", "arguments": {"x": "unterminated}}' + CLOSE,
    ]
)
_reply = st.lists(st.one_of(_free_text, _call_span(), _broken_span), max_size=6).map("".join)
_tail = st.sampled_from(["", OPEN + '{"name": "f"', OPEN[:7], OPEN + '{"a": "' + CLOSE[:3]])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_reply, _tail)
def test_splitting_at_every_point_reads_the_same(reply: str, tail: str) -> None:
    reply += tail
    whole = parse([reply])
    for i in range(len(reply) + 1):
        assert parse([reply[:i], reply[i:]]) == whole, i
    assert parse(list(reply)) == whole
    assert all(OPEN not in i[1] for i in whole if i[0] == "text")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_reply, _tail, st.lists(st.integers(0, 10_000), max_size=12), st.integers(20, 200))
def test_random_deltas_read_the_same(reply: str, tail: str, cuts: list[int], limit: int) -> None:
    reply += tail
    points = sorted({c % (len(reply) + 1) for c in cuts})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    assert "".join(chunks) == reply
    assert parse(chunks) == parse([reply])
    assert parse(chunks, limit=limit) == parse([reply], limit=limit)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="｜"), max_size=60), st.lists(st.integers(0, 100)))
def test_text_that_holds_no_tag_comes_out_unchanged(text: str, cuts: list[int]) -> None:
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert parse(chunks) == ([("text", text)] if text else [])


@settings(max_examples=150, deadline=None)
@given(_reply, st.lists(st.integers(0, 10_000), max_size=12))
async def test_the_stream_interceptor_reads_random_deltas_like_the_whole_reply(reply: str, cuts: list[int]) -> None:
    points = sorted({c % (len(reply) + 1) for c in cuts})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    whole = await intercepted([TextDelta(reply), TurnEnd("end_turn")])
    split = await intercepted([*(TextDelta(c) for c in chunks), TurnEnd("end_turn")])
    assert (
        normal([e for e in split if not isinstance(e, TurnEnd)])
        == normal([e for e in whole if not isinstance(e, TurnEnd)])
        == parse([reply])
    )
    assert split[-1] == whole[-1]


def transcript_of(events: Sequence[Any]) -> list[Any]:
    """The reply's blocks as the loop keeps them: text (the raw text of dropped spans included) and tool calls."""
    blocks: list[Any] = []
    text: list[str] = []
    for e in events:
        if isinstance(e, TextDelta | MarkupDropped):
            text.append(e.text if isinstance(e, TextDelta) else e.raw)
        elif isinstance(e, ToolCall):
            if text:
                blocks.append("".join(text))
                text.clear()
            blocks.append(e)
    if text:
        blocks.append("".join(text))
    return blocks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_reply, _tail, st.lists(st.integers(0, 10_000), max_size=12))
async def test_a_recorded_reply_replays_to_the_same_text_calls_and_errors(
    reply: str, tail: str, cuts: list[int]
) -> None:
    # A recording keeps the transcript; replaying streams each text block as one delta and each call natively.
    reply += tail
    points = sorted({c % (len(reply) + 1) for c in cuts})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    live = await intercepted([*(TextDelta(c) for c in chunks), TurnEnd("end_turn")])
    recorded = [TextDelta(b) if isinstance(b, str) else b for b in transcript_of(live)]
    replayed = await intercepted([*recorded, TurnEnd("tool_use" if live[-1].stop_reason == "tool_use" else "end_turn")])
    assert normal(replayed) == normal(live)
    assert transcript_of(replayed) == transcript_of(live)


# The stream interceptor -------------------------------------------------------------------------------------------


def request(turns_before: int = 0) -> ModelRequest:
    messages: list[Message] = [user_text("hi")]
    for _ in range(turns_before):
        messages += [Message("assistant", (TextBlock("ok"),)), user_text("more")]
    return ModelRequest("m", "system", tuple(messages), (), 100)


async def intercepted(events: Sequence[ModelEvent], req: ModelRequest | None = None) -> list[Any]:
    async def source() -> AsyncIterator[ModelEvent]:
        for e in events:
            yield e

    return [e async for e in intercept(source(), req or request())]


async def test_text_without_a_tag_start_passes_through_as_the_same_objects() -> None:
    deltas: list[ModelEvent] = [TextDelta("plain "), TextDelta("text, no angle brackets"), TurnEnd("end_turn")]
    out = await intercepted(deltas)
    assert all(a is b for a, b in zip(out, deltas, strict=True))


async def test_ids_carry_the_reply_position_so_they_are_unique_in_a_conversation() -> None:
    out = await intercepted([TextDelta(span({"name": "f"})), TurnEnd("end_turn")], request(turns_before=2))
    assert out[0] == ToolCall("markup_02_0", "f", {})


async def test_a_reply_whose_calls_were_written_as_text_stops_for_tool_use() -> None:
    out = await intercepted([TextDelta(span({"name": "f"})), TurnEnd("end_turn")])
    assert out[-1].stop_reason == "tool_use"
    out = await intercepted([TextDelta(span("bad")), TurnEnd("end_turn")])
    assert out[-1].stop_reason == "end_turn"
    out = await intercepted([TextDelta(span({"name": "f"})), TurnEnd("max_tokens")])
    assert out[-1].stop_reason == "max_tokens"


async def test_a_native_event_ends_the_text_so_an_open_span_is_dropped() -> None:
    out = await intercepted(
        [
            TextDelta("a <｜DS"),
            ToolCall("t1", "g", {}),
            TextDelta(OPEN + '{"name"'),
            ToolCall("t2", "h", {}),
            TurnEnd("tool_use"),
        ]
    )
    assert out[0] == TextDelta("a ")
    assert out[1] == TextDelta("<｜DS")
    assert out[2] == ToolCall("t1", "g", {})
    assert isinstance(out[3], MarkupDropped)
    assert out[4:] == [ToolCall("t2", "h", {}), TurnEnd("tool_use")]


class Fixed:
    """A model that streams the given deltas whatever it is asked."""

    def __init__(self, *events: ModelEvent, intercept_markup: bool = True) -> None:
        self.events = events
        self.intercept_markup = intercept_markup

    def backend_id(self, model: str) -> str:
        return "fixed:1"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for e in self.events:
            yield e


async def test_model_events_intercepts_for_every_model_unless_it_opts_out() -> None:
    events = (TextDelta(span({"name": "f"})), TurnEnd("end_turn"))
    intercepted = [e async for e in model_events(Fixed(*events), request())]
    assert intercepted == [ToolCall("markup_00_0", "f", {}), TurnEnd("tool_use")]
    assert [e async for e in model_events(Fixed(*events, intercept_markup=False), request())] == list(events)


# Below the loop: roles get it too ---------------------------------------------------------------------------------


async def test_a_role_step_runs_a_tool_called_through_markup_and_reports_markup_errors() -> None:
    seen: list[str] = []

    async def look_up(q: Query) -> ToolResult:
        seen.append(q.text)
        return ToolResult(f"found {q.text}")

    role: Role[None] = Role("reader", "Read.", [tool("look_up", "Search.", Query, look_up)], model=Claude.OPUS)
    model = ScriptedModel(
        [
            "Looking. " + span("{broken") + span({"name": "look_up", "arguments": {"text": "retries"}}) + " ok",
            "Found it.",
        ]
    )
    events: list[Event] = []
    await Run(model=model, on_event=events.append).step(role, "go")
    assert seen == ["retries"]
    deltas = "".join(e.delta for e in events if isinstance(e, OutputTextDelta))
    assert deltas == "Looking.  okFound it." and OPEN not in deltas
    (error,) = [e for e in events if isinstance(e, MarkupError)]
    assert error.type == "markup.error" and error.text == "{broken"
    assert [e.tool_call_id for e in events if isinstance(e, ClientToolRequested)] == ["markup_00_0"]
    assistant = model.requests[1].messages[1]
    assert [type(b) for b in assistant.content] == [TextBlock, ToolUseBlock, TextBlock]
    # The model is sent back what it wrote (the dropped span included); the stream never showed it.
    assert assistant.content[0] == TextBlock("Looking. " + span("{broken"))
    assert model.requests[1].messages[2].content[0].tool_use_id == "markup_00_0"  # type: ignore[union-attr]
