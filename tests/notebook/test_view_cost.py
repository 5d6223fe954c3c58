"""Dollars in a step's view: the record's cost beside its tokens, the same live and replayed whatever the prices are
now; what the Run spends now only in the live widget (the ``sent`` fixture of tests/conftest.py fakes the comm)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agl_notebook import Claude, Role, Run, describe, reporting_tool
from agl_notebook.models.prices import PRICES, Rates
from agl_notebook.notebook.view import NotebookView
from agl_notebook.replay.stores import MemoryStore
from tests.support.anthropic_api import CountingAPI
from tests.support.widgets import FakeDisplay, Sent


@dataclass(frozen=True)
class Note:
    text: str = describe("The note.")


@dataclass(frozen=True)
class Summary:
    title: str = describe("A title.")


ROLE: Role[Summary] = Role(
    "summarizer",
    "Summarize the note.",
    tools=[reporting_tool("report_summary", "Hand back the summary.", Summary)],
    model=Claude.OPUS,
)


async def test_a_saved_view_shows_the_recorded_dollars_live_and_replayed_after_a_price_change(sent: Sent) -> None:
    fake = CountingAPI()
    live_display, replay_display = FakeDisplay(), FakeDisplay()
    live = Run(model=fake.model(), view=lambda role: NotebookView(role, display=live_display))
    await live.step(ROLE, Note("a note"))
    (_, (final, _)) = live_display.updates
    (record,) = live.store.records()
    assert record.cost is not None and record.cost.usd is not None
    words = f"{record.usage.tokens:,} tokens, ${record.cost.usd:.4f} (rates of {PRICES.as_of})"
    assert f"  cost: {words}" in final["text/plain"]
    assert words in final["text/html"]
    assert "spent" not in final["text/html"], "what the Run spent now is never saved"

    # Widgets carried the Run's spending while the step ran.
    assert any("this Run has spent $" in str(d) for kind, d in sent if kind == "comm_msg")

    dearer = dataclasses.replace(PRICES.rates_for(Claude.OPUS) or Rates(0, 0, 0, 0, 0), output=99.0)
    replay = Run(
        model=fake.model(),
        store=live.store,
        mode="replay",
        prices=PRICES.with_rates({Claude.OPUS: dearer}, as_of="2027-01-01"),
        view=lambda role: NotebookView(role, display=replay_display, live=False),
    )
    await replay.step(ROLE, Note("a note"))
    ((replayed, _),) = replay_display.shown
    assert replayed == final, "a later price change alters no saved output"
    assert len(fake.costs) == 1


UNPRICED = "claude-unpriced-for-tests"
"""A model id no price table has (nor the SDK's list of deprecated models, whose warning the suite makes an error)."""


async def test_a_record_without_a_cost_shows_no_dollars_and_an_unpriced_model_says_so(sent: Sent) -> None:
    fake = CountingAPI()
    store = MemoryStore()
    unpriced_display = FakeDisplay()
    unpriced = Run(
        model=fake.model(UNPRICED),
        store=store,
        view=lambda role: NotebookView(role, display=unpriced_display),
    )
    await unpriced.step(ROLE, Note("a note"))
    (record,) = store.records()
    assert record.cost is not None and record.cost.usd is None
    final = unpriced_display.updates[-1][0]
    assert "tokens, price unknown (rates of" in final["text/plain"]

    # An older record (no cost kept) replays to a view with no dollars at all.
    old = MemoryStore()
    old.put(dataclasses.replace(record, cost=None))
    old_display = FakeDisplay()
    replay = Run(
        model=fake.model(UNPRICED),
        store=old,
        mode="replay",
        view=lambda role: NotebookView(role, display=old_display, live=False),
    )
    await replay.step(ROLE, Note("a note"))
    ((shown, _),) = old_display.shown
    assert "cost:" not in shown["text/plain"] and "tokens" not in shown["text/html"]
