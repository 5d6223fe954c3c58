"""The reliability report: ``make reliability-report`` writes ``docs/reliability.md`` from what the tests tried.

A reliability test (marked ``reliability``: the modules of tests/reliability/ and tests/browser/test_reliability_lab.py
mark every test they hold) takes the ``reliability`` fixture and notes each fault or bad input it tried, the outcome
it checked, and any figures it measured::

    def test_reset_mid_stream(reliability):
        ...  # provoke the fault, assert the outcome
        reliability.note("Model faults", "a connection reset mid-stream",
                         "the step fails with UpstreamUnexpected; nothing recorded; the next step works",
                         requests_retried=0, records_lost=0)

Notes count only for a test that passed; a failed test is listed as failed. The page is written at the end of a
session only when asked (``pytest --reliability-report``, which ``make reliability-report`` runs), and then only if
every reliability test ran: asked of a partial run, the session fails and writes nothing. Any other run, ``make test``
included, writes no file. The figures
add up across notes under the same name (``requests_retried``, ``records_lost``, ``secrets_found``), except the
measured ones given with ``measured=...``, which are reported as they are, each with ``how=...``: what ran (the
model backend above all: a scripted model or the real anthropic client), and how it was timed or weighed. A
figure means only what its test did: the page says so next to each.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import ROOT

REPORT_PATH = ROOT / "docs" / "reliability.md"

AREAS = ("Model faults", "Kernel faults", "Bad recordings", "Untrusted notebooks", "Secrets", "Load", "Fuzzing")
"""The issue's sections, in its order; a note must name one."""

COUNTED = {
    "requests_retried": (
        "Requests retried",
        "counted from the requests the in-process HTTP transport served to the real anthropic client "
        "(the Anthropic backend retries with the SDK's rules)",
    ),
    "records_lost": (
        "Records lost",
        "each test asserts that every record it expects is there; a test that lost one would fail "
        "and be listed under Failed, so this sums the zeros of the tests that passed",
    ),
    "secrets_found": (
        "Planted secrets found",
        "a fake key and a secret-named variable's value, planted and searched for in the places "
        "counted below; a find fails its test, so this sums the zeros of the tests that passed",
    ),
    "notebooks_corrupted": (
        "Notebooks corrupted or overwritten",
        "each test that writes or runs a notebook asserts that it is valid, or byte-identical "
        "where nothing was to be written; as above, a sum of the passing tests' zeros",
    ),
    "places_searched": (
        "Places searched for the planted secrets",
        "store files, records, each view's text/plain, text/html and output metadata, every "
        "captured log line (the SDK's DEBUG lines in two tests), and the widget messages of one "
        "live view; steps through the real anthropic client over an in-process transport",
    ),
}
"""Figures that add up across notes: their headings in the report, and what the sum means."""


@dataclass(frozen=True)
class Trial:
    area: str
    tried: str
    outcome: str
    test: str
    counts: dict[str, int] = field(default_factory=dict)
    measured: dict[str, str] = field(default_factory=dict)
    how: str = ""
    """How the measured figures were measured: the backend and the machinery that ran, and the timing."""


class ReliabilityNotes:
    """What one test tried (the ``reliability`` fixture)."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.trials: list[Trial] = []
        self.examples = 0
        """Examples run so far, for a property-based test (it counts them itself: see `example`)."""

    def note(
        self,
        area: str,
        tried: str,
        outcome: str,
        *,
        measured: dict[str, str] | None = None,
        how: str = "",
        **counts: int,
    ) -> None:
        """Record one fault or bad input this test tried, and the outcome it asserted.

        ``measured`` figures need ``how``: what ran (which model backend, which kernel or browser) and how the figure
        was taken, so the page never presents a scripted model's timing as the real client's.
        """
        if area not in AREAS:
            raise ValueError(f"unknown area {area!r}; one of {AREAS}")
        unknown = set(counts) - set(COUNTED)
        if unknown:
            raise ValueError(f"unknown counts {sorted(unknown)}; one of {sorted(COUNTED)} (or measured=...)")
        if measured and not how.strip():
            raise ValueError(f"{tried!r}: measured figures need how=... (the backend, and how they were measured)")
        trial = Trial(area, tried, outcome, self.test, dict(counts), dict(measured or {}), how)
        # A note made again with the same area and trial replaces the earlier one (a property-based test notes
        # once per example, the last note counting them all).
        self.trials = [t for t in self.trials if (t.area, t.tried) != (area, tried)] + [trial]

    def example(self, area: str, tried: str, outcome: str) -> None:
        """Note one example of a property-based test: the report says how many held."""
        self.examples += 1
        self.note(area, tried, f"{outcome}: held for {self.examples} random examples")


class NotWholeError(Exception):
    """The report was asked of a run that did not run every reliability test: it is not written."""


class ReliabilityReport:
    """Collects the notes of every reliability test in a session; writes the page when asked, of a whole run."""

    def __init__(self, path: Path = REPORT_PATH) -> None:
        self.path = path
        self.trials: dict[str, list[Trial]] = {}  # test -> its notes, for tests that passed
        self.failed: list[str] = []
        self.skipped: list[str] = []
        self.selected: set[str] = set()
        self.finished: set[str] = set()
        self.left_out: str | None = None  # why some reliability tests may not have run, once known

    # --- pytest hooks (registered by conftest.py) ---

    @property
    def passed(self) -> list[Trial]:
        return [trial for trials in self.trials.values() for trial in trials]

    def collected(self, items: list[pytest.Item], *, from_testpaths: bool) -> None:
        """``from_testpaths``: the session collected the configured test paths, not files or tests it was given."""
        if not from_testpaths:
            self.left_out = "the run was given test paths: run every test, selecting with -m reliability"
        self.selected = {item.nodeid for item in items if _is_reliability(item)}

    def deselected(self, items: list[pytest.Item]) -> None:
        if any(_is_reliability(item) for item in items):
            self.left_out = "reliability tests were deselected (-k, -m, --lf or the like)"

    def finished_test(self, item: pytest.Item, report: pytest.TestReport) -> None:
        if not _is_reliability(item):
            return
        node = item.nodeid
        if report.failed:  # in setup, the call or teardown: its notes do not count
            self.trials.pop(node, None)
            if node not in self.failed:
                self.failed.append(node)
        elif report.skipped:  # skipped, or an expected failure
            self.skipped.append(node)
        elif report.when == "call" and node not in self.failed:
            notes: ReliabilityNotes | None = item.stash.get(NOTES_KEY, None)
            self.trials[node] = notes.trials if notes is not None else []
        if report.when == "teardown":
            self.finished.add(node)

    def finish(self, *, asked: bool) -> Path | None:
        """Write the page if ``asked`` (returning where), else nothing; asked of a partial run, raise NotWholeError."""
        if not asked:
            return None
        if self.left_out is not None:
            raise NotWholeError(self.left_out)
        if not self.selected:
            raise NotWholeError("no reliability test was collected")
        if self.finished != self.selected:
            raise NotWholeError(f"{len(self.selected - self.finished)} reliability tests did not run to the end")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.render(), encoding="utf-8")
        return self.path

    # --- the document ---

    def render(self) -> str:
        import anthropic

        lines = [
            "# Reliability",
            "",
            "<!-- Generated by `make reliability-report` (tests/support/reliability_report.py) from a run of every",
            "     test marked `reliability`. Do not edit by hand. -->",
            "",
            "What the reliability suite tried against agl_notebook, and what it checked happened. Every row is a "
            "test that passed in the run that wrote this page; a test that failed is listed under *Failed*.",
            "",
            f"Run on Python {platform.python_version()}, anthropic {anthropic.__version__}, {platform.system()} "
            f"{platform.machine()}, {os.cpu_count()} cores (shared with whatever else ran).",
            "",
            "## Figures",
            "",
            "Counts add up the notes of the tests that passed. Times and sizes are single runs of one test on the "
            "machine above, not bounds: each says what ran (a scripted model is not the real client: its reply "
            "is an `asyncio.sleep`, with no HTTP stack to unwind) and how it was taken.",
            "",
            "| Figure | Value | What ran, and how it was measured |",
            "|---|---|---|",
        ]
        for key, (heading, how) in COUNTED.items():
            lines.append(f"| {heading} | {sum(t.counts.get(key, 0) for t in self.passed)} | {_cell(how)} |")
        # By area, in the page's order, then in the order the tests ran: the same page whatever order files ran in.
        for trial in sorted(self.passed, key=lambda t: AREAS.index(t.area)):
            for name, value in trial.measured.items():
                lines.append(f"| {_cell(name)} | {_cell(value)} | {_cell(trial.how)} |")
        lines += [
            "",
            f"{len(self.passed)} faults and bad inputs tried, in {len({t.test for t in self.passed})} "
            f"tests; {len(self.failed)} failed, {len(self.skipped)} not run.",
            "",
        ]
        for area in AREAS:
            trials = [t for t in self.passed if t.area == area]
            if not trials:
                continue
            lines += [f"## {area}", "", "| Tried | Outcome | Test |", "|---|---|---|"]
            for t in trials:
                lines.append(f"| {_cell(t.tried)} | {_cell(t.outcome)} | `{_cell(_short(t.test))}` |")
            lines.append("")
        if self.failed:
            lines += ["## Failed", ""] + [f"- `{_short(f)}`" for f in self.failed] + [""]
        if self.skipped:
            lines += ["## Not run (skipped, or failed as expected)", ""] + [f"- `{_short(f)}`" for f in self.skipped]
            lines.append("")
        return "\n".join(lines)


NOTES_KEY = pytest.StashKey[ReliabilityNotes]()


MARKER = "reliability"
"""The mark of a reliability test (a module's ``pytestmark``); registered in pyproject.toml."""

WRITE_OPTION = "--reliability-report"
"""The pytest option that asks for the page (tests/conftest.py adds it)."""


def _is_reliability(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None


def _short(nodeid: str) -> str:
    return nodeid.removeprefix("tests/")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
