"""What a step's view draws of images and documents (issue 28, item 3): a thumbnail of the original bytes scaled by
CSS, a chip for a document, a placeholder with the size and digest over the cap; scrubbed and escaped;
deterministic, the same live, at the end, and replayed."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from agl_notebook import Document, Image, Run, ToolResult, tool
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.notebook.media_view import THUMBNAIL_BYTES
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.replay.stores import JsonFileStore
from tests.media.test_media_requests import Inspection, Query, inspector, reported
from tests.support.anthropic_api import api, reply, use
from tests.support.media import pdf, png

PLANTED = "planted-" + "5e1c" * 5  # a secret built at run time


async def drawn(tmp_path: Path, inspection: Inspection, chart: bytes, *, mode: str = "auto") -> tuple[str, str]:
    events: list[object] = []

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(chart)])

    fake = api(reply(use("toolu_c", "chart", json.dumps({"topic": "t"})), stop_reason="tool_use"), reported())
    run = Run(
        model=AnthropicModel(client=fake.client()),
        store=JsonFileStore(tmp_path / "records.json"),
        on_event=events.append,
        mode=mode,  # type: ignore[arg-type]
    )
    await run.step(inspector(tool("chart", "Draw a chart.", Query, draw)), inspection)
    trace = StepTrace("inspector")
    for event in events:
        trace.apply(event)  # type: ignore[arg-type]
    secrets = (PLANTED,)
    return render_html(trace, secrets), render_text(trace, secrets)


async def test_a_thumbnail_a_chip_and_a_placeholder_over_the_cap(tmp_path: Path) -> None:
    photo, big = png(5, 4), png(160, 160, noisy=True)
    assert len(big) > THUMBNAIL_BYTES
    sheet = Document(pdf(3), title=f"<b>Sheet</b> {PLANTED}")
    page, text = await drawn(tmp_path, Inspection(Image(photo), sheet, "x"), big)
    # The input's image: its original bytes as a data URI, scaled by CSS, no re-encoding.
    assert f'src="data:image/png;base64,{base64.b64encode(photo).decode()}"' in page
    assert "max-width:160px;max-height:120px" in page
    # The PDF: a chip with its pages, its title escaped and scrubbed.
    assert 'class="agl-doc"' in page and "PDF, 3 pages" in page
    assert "&lt;b&gt;Sheet&lt;/b&gt;" in page and "<b>Sheet</b>" not in page and PLANTED not in page
    # The tool's image over the cap: a placeholder with its size and digest, not its bytes.
    assert base64.b64encode(big).decode()[:100] not in page
    assert f"image/png, 160x160 px, {len(big):,} bytes, sha256:" in page and "over the 64 KB view cap" in page
    assert f"returned image/png, 160x160 px, {len(big):,} bytes" in text

    # A replay draws the same HTML (the same bytes) with no request.
    again, again_text = await drawn(tmp_path, Inspection(Image(photo), sheet, "x"), big, mode="replay")
    assert (again, again_text) == (page, text)


async def test_a_url_with_a_secret_is_scrubbed_in_the_view_and_never_fetched(tmp_path: Path) -> None:
    url = f"https://example.test/part.png?token={PLANTED}&x=<b>"
    page, text = await drawn(tmp_path, Inspection(Image(url), Document(pdf()), "x"), png())
    for spelling in (PLANTED, PLANTED[-12:], html.escape(PLANTED)):  # whole, any tail of it, escaped
        assert spelling not in page and spelling not in text
    assert "<b>" not in page.split("token=")[1][:80]  # the rest of the URL escaped
    assert 'src="https://' not in page  # a URL source is named, never drawn (the view fetches nothing)


async def test_a_step_with_images_leaves_no_cycle_for_the_collector() -> None:
    """As tests/run/test_step_garbage.py: a finished step with an image input and a tool's image frees everything."""
    import gc

    from agl_notebook import ScriptedModel
    from agl_notebook.replay.stores import MemoryStore

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(png(7, 7))])

    script = [
        {"calls": [{"name": "chart", "args": {"topic": "t"}}]},
        {"calls": [{"name": "report", "args": {"text": "a crack"}}]},
    ]
    role = inspector(tool("chart", "Draw a chart.", Query, draw))
    store = MemoryStore()
    await Run(model=ScriptedModel(script), store=store).step(role, Inspection(Image(png()), Document(pdf()), "x"))
    gc.collect()  # what the first step loaded (modules, caches) is not the steps' own
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for mode in ("auto", "refresh"):  # replayed, then live again
            run = Run(model=ScriptedModel(script), store=store, mode=mode)
            await run.step(role, Inspection(Image(png()), Document(pdf()), "x"))
            del run
            gc.collect()
            # Only the json module's own: its indenting encoder (the input's JSON, indent=2, as for every payload
            # input) is made of closures that refer to each other. Nothing of a step, its images or its view.
            functions = {f"{o.__module__}.{o.__qualname__}" for o in gc.garbage if type(o).__name__ == "function"}
            assert all(name.startswith("json.encoder.") for name in functions), functions
            assert not [o for o in gc.garbage if type(o).__module__.startswith("agl_notebook")], mode
            gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.enable()
