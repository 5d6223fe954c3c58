"""The model's thinking in a step's view (issue 27): under its turn, collapsed, streamed live, settled by its block.

The final drawing depends only on the kept blocks, so a live run (thinking streamed in many pieces) and its replay
(the whole thinking in one piece) leave the same bundle. Redacted and omitted thinking are said as such, a block of
another type is a chip naming its type, opaque fields are never drawn, and ``text/plain`` leaves thinking out.
Thinking text is scrubbed (in every spelling a secret may take), then capped, then escaped.
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Role, Run, describe, reporting_tool
from agl_notebook._view_values import VIEW_VALUE_BYTES
from agl_notebook.events import (
    ClientToolRequested,
    OutputTextDelta,
    ReasoningTextDelta,
    ReplyBlockKept,
    StepFinished,
    StepStarted,
)
from agl_notebook.models.base import ModelEvent, ModelRequest, TextDelta, ThinkingDelta, ToolCall, TurnEnd
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.view import NotebookView
from agl_notebook.transcript import RawBlock
from tests.support.widgets import FakeDisplay, Sent

pytestmark = pytest.mark.usefixtures("sent")  # widgets over recording comms (tests/conftest.py)


@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")


ROLE: Role[Answer] = Role(
    name="thinker",
    instructions="Think, then answer.",
    tools=[reporting_tool("report_answer", "Report the answer.", Answer)],
)

SIGNATURE = "SigOpaque0123456789=="
ENCRYPTED = "EncryptedOpaqueBlob=="


class Thinker:
    """A backend of one's own that thinks: turn 1 thinks in pieces, is redacted once, writes, keeps an unknown
    block and reports; its thinking text is whatever the test gives it, streamed in the pieces given."""

    thinking = True
    network = False

    def __init__(self, pieces: list[str], *, kept: str | None = None) -> None:
        self.pieces = pieces
        self.kept = "".join(pieces) if kept is None else kept  # the block's text (the deltas' text by default)

    def backend_id(self, model: str) -> str:
        return "thinker:1"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for piece in self.pieces:
            yield ThinkingDelta(piece)
        yield RawBlock({"type": "thinking", "thinking": self.kept, "signature": SIGNATURE})
        yield RawBlock({"type": "redacted_thinking", "data": ENCRYPTED})
        yield TextDelta("Here is my answer.")
        yield RawBlock({"type": "server_gadget", "secret_field": "NotForTheView"})
        yield ToolCall("toolu_1", "report_answer", {"text": "42"})
        yield TurnEnd("tool_use")


def final_bundle(display: FakeDisplay) -> dict[str, Any]:
    bundle, _ = (display.updates or display.shown)[-1]
    return bundle


async def live_then_replayed(model: Thinker) -> tuple[dict[str, Any], dict[str, Any]]:
    """The final bundle of a live run of ROLE (a live widget on), and of its replay."""
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    run = Run(model=model, view=lambda role: NotebookView(role, display=live_display))
    assert await run.step(ROLE, "What is six times seven?") == Answer("42")
    replay = Run(
        model=model,
        store=run.store,
        mode="replay",
        view=lambda role: NotebookView(role, display=replay_display, live=False),
    )
    assert await replay.step(ROLE, "What is six times seven?") == Answer("42")
    return final_bundle(live_display), final_bundle(replay_display)


def thinking_blocks(page: str) -> list[str]:
    return re.findall(r'<details class="agl-thinking"[^>]*>.*?</details>', page)


def summaries(page: str) -> list[str]:
    return [re.search(r"<summary>(.*?)</summary>", b).group(1) for b in thinking_blocks(page)]  # type: ignore[union-attr]


# --- Drawn per turn, collapsed; text/plain leaves it out -----------------------------------------------------------


async def test_thinking_is_drawn_collapsed_before_its_turns_text_and_calls_and_left_out_of_text_plain() -> None:
    model = Thinker(["Six sevens: ", "add six ", "sevens <together>."])
    live, replayed = await live_then_replayed(model)
    page, plain = live["text/html"], live["text/plain"]
    assert summaries(page) == ["Thinking", "Thinking (redacted)"]
    first, redacted = thinking_blocks(page)
    assert " open" not in first and " open" not in redacted, "collapsed in the saved view"
    assert "Six sevens: add six sevens &lt;together&gt;." in first
    # In the turn's order: the thinking, the redacted thinking, the text, the unknown block, the call.
    order = [page.index(s) for s in (first, redacted, "Here is my answer.", "block: server_gadget", "report_answer")]
    assert order == sorted(order)
    # Opaque fields are never drawn; neither are an unknown block's fields.
    for opaque in (SIGNATURE, ENCRYPTED, "secret_field", "NotForTheView"):
        assert opaque not in page and opaque not in plain
    assert "data-agl-keep" not in page, "the live widget's keys never reach a saved view"
    # text/plain: no thinking at all; the unknown block named by its type.
    assert "Six sevens" not in plain and "Thinking" not in plain and "thinking" not in plain
    assert "  kept block: server_gadget" in plain.splitlines()
    assert replayed == live, "live and replayed draw the same"
    assert render_html(StepTrace("x"), ()) == render_html(StepTrace("x"), ())


async def test_the_kept_block_decides_the_final_drawing_not_the_streamed_pieces() -> None:
    # The deltas said one thing, the block closed with another (a backend may stream a summary and keep more):
    # the saved view draws the block, so the live run's view equals its replay's.
    live, replayed = await live_then_replayed(Thinker(["draft one, ", "draft two"], kept="The kept thinking."))
    assert "The kept thinking." in live["text/html"] and "draft" not in live["text/html"]
    assert replayed == live


async def test_omitted_thinking_is_said_as_such() -> None:
    live, replayed = await live_then_replayed(Thinker([], kept=""))
    assert summaries(live["text/html"]) == ["Thinking (omitted by the API)", "Thinking (redacted)"]
    assert replayed == live


def test_thinking_of_several_turns_stays_with_its_turn() -> None:
    trace = StepTrace("thinker")
    for event in (
        StepStarted("thinker", "go", "thinker:1"),
        ReasoningTextDelta("thought of turn one"),
        ReplyBlockKept({"type": "thinking", "thinking": "thought of turn one", "signature": "s1"}),
        OutputTextDelta("Looking."),
        ClientToolRequested("look", {}, "c1"),
        ReasoningTextDelta("thought of turn two"),
        ReplyBlockKept({"type": "thinking", "thinking": "thought of turn two", "signature": "s2"}),
        OutputTextDelta("Found it."),
        StepFinished("thinker", None, 2),
    ):
        trace.apply(event)
    page = render_html(trace, ())
    marks = ["thought of turn one", "Looking.", "<code>look</code>", "thought of turn two", "Found it."]
    positions = [page.index(m) for m in marks]
    assert positions == sorted(positions), "each turn's thinking before its text and calls, turns in order"
    # A turn's text after thinking is its own block, not joined to the text of the turn before.
    assert re.search(r">Looking\.</div>", page) and re.search(r">Found it\.</div>", page)


def test_a_block_of_an_unknown_type_is_a_chip_naming_its_type_escaped_and_scrubbed() -> None:
    secret = "Plant3d" + "".join(random.Random(5).choice("ghjkmnpqrtvwxyz") for _ in range(20))
    trace = StepTrace("thinker")
    trace.apply(ReplyBlockKept({"type": "<img src=x onerror=alert(1)>", "payload": {"x": 1}}))
    trace.apply(ReplyBlockKept({"type": f"tool_{secret}", "payload": {"x": 1}}))
    trace.apply(ReplyBlockKept({"payload": "no type"}))
    page, plain = render_html(trace, (secret,)), render_text(trace, (secret,))
    assert "block: &lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page
    assert secret not in page and secret not in plain and "block: tool_[REDACTED]" in page
    assert "block: (no type)" in page and "payload" not in page


# --- Scrubbed, then capped, then escaped ---------------------------------------------------------------------------


def planted() -> str:
    # A secret with characters that HTML and JSON escape, so each spelling differs from the plain one.
    return "Plant3d&" + "".join(random.Random(7).choice("ghjkmnpqrtvwxyz") for _ in range(24)) + '"/<'


def spellings(secret: str) -> dict[str, str]:
    return {
        "plain": secret,
        "json-escaped": json.dumps(secret)[1:-1],
        "unicode-escaped": "".join(f"\\u{ord(c):04x}" for c in secret),
        "html-escaped": html.escape(secret),
        "html-numeric": "".join(f"&#{ord(c)};" for c in secret),
    }


def assert_no_secret(drawn: str, secret: str) -> None:
    for name, spelled in spellings(secret).items():
        assert spelled not in drawn, name
    for text in (drawn, html.unescape(drawn)):
        assert secret[:12] not in text and secret[-12:] not in text


@pytest.mark.parametrize("form", ["plain", "json-escaped", "unicode-escaped", "html-escaped", "html-numeric"])
def test_a_secret_in_thinking_is_scrubbed_in_every_spelling_live_and_final(form: str) -> None:
    secret = planted()
    spelled = spellings(secret)[form]
    thought = f"The key is {spelled}; <script>alert('x')</script> then go on."
    cut = len(thought) // 2 + 3  # the spelling split across two deltas
    assert spelled[:8] in thought[:cut] or spelled[-8:] in thought[cut:]
    trace = StepTrace("thinker")
    trace.apply(StepStarted("thinker", "go", "thinker:1"))
    trace.apply(ReasoningTextDelta(thought[:cut]))
    trace.apply(ReasoningTextDelta(thought[cut:]))
    live = render_html(trace, (secret,), live=True)  # joined before it is scrubbed: the split hides nothing
    assert_no_secret(live, secret)
    assert "[REDACTED]" in live and "<script>" not in live
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in live
    trace.apply(ReplyBlockKept({"type": "thinking", "thinking": thought, "signature": SIGNATURE}))
    trace.apply(StepFinished("thinker", None, 1))
    final, plain = render_html(trace, (secret,)), render_text(trace, (secret,))
    assert_no_secret(final, secret)
    assert_no_secret(plain, secret)
    assert "[REDACTED]" in final and "<script>" not in final


def test_long_thinking_is_cut_at_the_cap_after_scrubbing_a_secret_that_straddles_it() -> None:
    secret = planted()
    rng = random.Random(11)
    filler = "".join(rng.choice("abcdef \n") for _ in range(VIEW_VALUE_BYTES))
    # The secret straddles the cap: cut first, its start would stay.
    thought = filler[: VIEW_VALUE_BYTES - 10] + secret + filler
    trace = StepTrace("thinker")
    trace.apply(ReplyBlockKept({"type": "thinking", "thinking": thought, "signature": SIGNATURE}))
    page = render_html(trace, (secret,))
    assert_no_secret(page, secret)
    scrubbed = thought.replace(secret, "[REDACTED]").encode()
    placeholder = f"[cut: {len(scrubbed):,} bytes in full, sha256 {hashlib.sha256(scrubbed).hexdigest()}"
    assert placeholder in page, "the size and sha256 are the scrubbed thinking's"
    assert len(page.encode()) < VIEW_VALUE_BYTES * 1.3 + 2_000


# --- The live view -------------------------------------------------------------------------------------------------


def widget_values(sent: Sent) -> list[str]:
    return [d["state"]["value"] for k, d in sent if k == "comm_msg" and "value" in d.get("state", {})]


def test_thinking_streams_into_a_collapsed_block_of_the_live_widget_kept_open_across_redraws(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr("agl_notebook.notebook.view.time.monotonic", lambda: now[0])
    display = FakeDisplay()
    view = NotebookView(ROLE, display=display)
    view.begin(replaying=False)
    view.event(StepStarted("thinker", "go", "thinker:1"))
    for piece in ("Six ", "sevens ", "make forty-two."):
        now[0] += 1
        view.event(ReasoningTextDelta(piece))
    streaming = widget_values(sent)[-1]
    ((block,),) = [thinking_blocks(streaming)]
    assert "<summary>Thinking…</summary>" in block and "Six sevens make forty-two." in block
    # Collapsed, and keyed: step.js gives the block the open state the person left it in at each redraw.
    assert " open" not in block and 'data-agl-keep="item-0"' in block
    now[0] += 1
    view.event(ReplyBlockKept({"type": "thinking", "thinking": "Six sevens make forty-two.", "signature": "s"}))
    settled = widget_values(sent)[-1]
    assert summaries(settled) == ["Thinking"] and 'data-agl-keep="item-0"' in settled, "the same key: kept open"
    view.event(StepFinished("thinker", None, 1))
    view.finish(None)
    assert "data-agl-keep" not in final_bundle(display)["text/html"]


# --- A map's item views --------------------------------------------------------------------------------------------


async def test_opening_a_map_row_shows_that_item_s_thinking_collapsed() -> None:
    import asyncio

    from agl_notebook.notebook.map_view import MapWidget, NotebookMapView
    from tests.support.widgets import from_browser

    gate = asyncio.Event()

    class Gated(Thinker):  # the second item waits, so the map is still live when the first one's row is opened
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            if "second" in request.messages[0].text:
                await gate.wait()
            async for event in super().stream(request):
                yield event

    view = NotebookMapView(ROLE, display=FakeDisplay())
    task = asyncio.ensure_future(Run(model=Gated(["Six sevens ", "are 42."])).map(ROLE, ["first", "second"], view=view))
    for _ in range(500):
        if view._traces.get(0) is not None:
            break
        await asyncio.sleep(0.01)
    (widget,) = [w for w in view._box.children if isinstance(w, MapWidget)]
    from_browser(widget, {"kind": "open", "index": 0})
    assert summaries(widget.detail) == ["Thinking", "Thinking (redacted)"]
    assert " open" not in "".join(thinking_blocks(widget.detail)) and "Six sevens are 42." in widget.detail
    assert SIGNATURE not in widget.detail and ENCRYPTED not in widget.detail
    gate.set()
    await task


@pytest.mark.parametrize("form", ["plain", "json-escaped", "html-escaped"])
@pytest.mark.parametrize("kind", ["thinking", "text"])
def test_the_start_of_a_secret_still_streaming_in_is_not_drawn_live(form: str, kind: str) -> None:
    secret = planted()
    spelled = spellings(secret)[form]
    delta = ReasoningTextDelta if kind == "thinking" else OutputTextDelta
    trace = StepTrace("thinker")
    trace.apply(StepStarted("thinker", "go", "thinker:1"))
    for cut in (1, 9, len(spelled) // 2, len(spelled) - 1):
        trace.apply(delta(f"The key is {spelled[:cut]}"))  # a redraw here: only the first part of it has arrived
        live = render_html(trace, (secret,), live=True)
        assert "The key is" in live
        started = f"key is {spelled[:cut]}"
        assert started not in live and started not in html.unescape(live), (cut, live[-300:])
        trace.apply(delta(f"{spelled[cut:]}. Then more."))
        live = render_html(trace, (secret,), live=True)
        assert_no_secret(live, secret)
        assert "[REDACTED]. Then more." in html.unescape(live)
    # Nothing held back where nothing looks like the start of a secret, nor once the step ends.
    trace.apply(delta(" Done, s"))
    assert "Done, s<" in render_html(trace, (secret,), live=True)
    trace.apply(delta(" and Plan"))
    assert "Done, s and <" in render_html(trace, (secret,), live=True)
    trace.apply(StepFinished("thinker", None, 1))
    assert "Done, s and Plan<" in render_html(trace, (secret,), live=True)
