"""docs/reliability.md's generator: every figure says what ran and how it was measured."""

from __future__ import annotations

import pytest

from tests.support.reliability_report import COUNTED, ReliabilityNotes, ReliabilityReport


def test_a_measured_figure_needs_to_say_how_it_was_measured() -> None:
    notes = ReliabilityNotes("tests/test_reliability_x.py::test_x")
    with pytest.raises(ValueError, match="how="):
        notes.note("Load", "a thing", "it held", measured={"Time": "1.0 s"})


def test_each_figure_is_shown_with_what_ran_and_how() -> None:
    notes = ReliabilityNotes("tests/test_reliability_x.py::test_x")
    notes.note(
        "Kernel faults",
        "an interrupt",
        "the cell ends",
        records_lost=0,
        measured={"Interrupt: time to end the cell": "0.50 s"},
        how="scripted model, in a real kernel",
    )
    report = ReliabilityReport()
    report.trials[notes.test] = notes.trials

    page = report.render()

    assert "| Figure | Value | What ran, and how it was measured |" in page
    assert "| Interrupt: time to end the cell | 0.50 s | scripted model, in a real kernel |" in page
    for heading, how in COUNTED.values():
        assert f"| {heading} | " in page and how in page
    assert "a scripted model is not the real client" in page
