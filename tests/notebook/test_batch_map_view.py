"""A batch map's live view without a kernel (a fake display, fake comms): its estimate, its batches, the interrupt.

The batches come from the real ``anthropic`` client against `tests/support/anthropic_batches.py`.
"""

from __future__ import annotations

from agl_notebook import Claude, Run
from agl_notebook.models.batch_replies import BatchStatus
from agl_notebook.models.prices import Rates
from agl_notebook.notebook.map_view import NotebookMapView
from agl_notebook.replay.stores import MemoryStore
from tests.support.anthropic_batches import FakeBatches
from tests.support.batch_steps import RESEARCHER, engine_for, inputs, three_turns
from tests.support.widgets import FakeDisplay, Sent

PRICES = {str(Claude.SONNET): Rates(3.0, 15.0, 3.75, 6.0, 0.30)}


async def test_the_live_view_shows_the_estimate_each_batch_and_what_an_interrupt_does(sent: Sent) -> None:
    fake = FakeBatches(three_turns, polls=2)
    view = NotebookMapView(RESEARCHER, display=FakeDisplay())
    drawn: list[str] = []
    original = view._live_html

    def recording() -> str:
        html = original()
        drawn.append(html)
        return html

    view._live_html = recording  # type: ignore[method-assign]
    store = MemoryStore()
    told: list[BatchStatus] = []
    engine = engine_for(fake, on_status=told.append)
    view.redraw = view._draw  # type: ignore[method-assign]  # every change drawn at once, not coalesced
    results = await Run(store=store, prices=PRICES).map(RESEARCHER, inputs(5), engine=engine, view=view)
    assert not results.failures

    # Before the first wave: the estimate at the batch price, and no batch yet.
    first = drawn[0]
    assert "first wave: 5 requests, estimated $" in first and "at the batch price" in first
    assert "msgbatch_" not in first
    assert "An interrupt stops the polling, not the batches" in first
    # Every poll of every batch was drawn: its wave, id, status and request_counts.
    ids = [b.id for b in fake.creations]
    assert len(told) >= 6
    for status in told:
        counts = ", ".join(f"{n} {name}" for name, n in status.request_counts.items())
        line = f"wave {status.wave}: batch {status.batch_id} {status.processing_status}: {counts}"
        assert any(line in h for h in drawn), line
    assert any(f"wave 1: batch {ids[0]} in_progress: 5 processing, 0 succeeded" in h for h in drawn)
    assert any(
        f"wave 3: batch {ids[2]} ended: 0 processing, 5 succeeded, 0 errored, 0 canceled, 0 expired" in h for h in drawn
    )
    # The static view at the end keeps none of it (it must equal a replay's).
    ((final, _),) = view._display.updates  # type: ignore[attr-defined]
    assert "msgbatch_" not in final["text/html"] and "estimated" not in final["text/plain"]
    replayed = FakeDisplay()
    await Run(store=store, prices=PRICES).map(
        RESEARCHER, inputs(5), engine=engine_for(fake), view=NotebookMapView(RESEARCHER, display=replayed, live=False)
    )
    ((headless, _),) = replayed.shown
    assert headless == final
