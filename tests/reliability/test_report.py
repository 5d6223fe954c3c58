"""docs/reliability.md's generator: every figure says what ran and how it was measured; the page is written only
when asked, of a run of every reliability test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.reliability_report import COUNTED, NotWholeError, ReliabilityNotes, ReliabilityReport


def test_a_measured_figure_needs_to_say_how_it_was_measured() -> None:
    notes = ReliabilityNotes("tests/reliability/test_x.py::test_x")
    with pytest.raises(ValueError, match="how="):
        notes.note("Load", "a thing", "it held", measured={"Time": "1.0 s"})


def test_each_figure_is_shown_with_what_ran_and_how() -> None:
    notes = ReliabilityNotes("tests/reliability/test_x.py::test_x")
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


def ran_whole(path: Path) -> ReliabilityReport:
    """A report on ``path`` of a session in which the one reliability test collected ran to its end and passed."""
    notes = ReliabilityNotes("tests/reliability/test_x.py::test_x")
    notes.note("Load", "a thing", "it held", records_lost=0)
    report = ReliabilityReport(path)
    report.selected = report.finished = {notes.test}
    report.trials[notes.test] = notes.trials
    return report


def test_a_run_not_asked_for_the_page_writes_nothing(tmp_path: Path) -> None:
    page = tmp_path / "reliability.md"
    assert ran_whole(page).finish(asked=False) is None
    assert not page.exists()  # a plain `pytest` or `make test` modifies no tracked file
    assert ran_whole(page).finish(asked=True) == page
    assert "| Records lost | 0 |" in page.read_text(encoding="utf-8")


def test_asked_of_a_partial_run_the_page_is_refused_and_not_written(tmp_path: Path) -> None:
    page = tmp_path / "reliability.md"
    deselected = ran_whole(page)
    deselected.left_out = "reliability tests were deselected (-k, -m, --lf or the like)"
    with pytest.raises(NotWholeError, match="deselected"):
        deselected.finish(asked=True)
    stopped = ran_whole(page)
    stopped.selected = {*stopped.selected, "tests/reliability/test_x.py::test_y"}  # collected, never finished (-x)
    with pytest.raises(NotWholeError, match="1 reliability tests did not run to the end"):
        stopped.finish(asked=True)
    with pytest.raises(NotWholeError, match="no reliability test"):
        ReliabilityReport(page).finish(asked=True)
    assert not page.exists()
