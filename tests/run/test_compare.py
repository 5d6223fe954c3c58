"""`run.compare`: three variants over twenty inputs with known answers: the grid, `.to_pandas()`, the agreement
rates, exactly the differing cells marked; dollars per variant; a second run replays every item."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.errors import InputError
from agl_notebook.models.base import ModelRequest
from agl_notebook.replay.stores import MemoryStore
from agl_notebook.run import Comparison
from tests.support.anthropic_api import CountingAPI


@dataclass(frozen=True)
class Note:
    text: str = describe("The note.")


@dataclass(frozen=True)
class Label:
    label: str = describe("A label.")
    n: int = describe("A number.")


def answers(variant: str, i: int) -> dict[str, Any] | None:
    """The known answers: b's label differs on inputs 0-4, c's on 3-6; a's n on input 10; c fails on input 19."""
    label = f"L{i}" + ("x" if variant == "b" and i < 5 else "") + ("y" if variant == "c" and 3 <= i <= 6 else "")
    if variant == "c" and i == 19:
        return None
    return {"label": label, "n": i + (100 if variant == "a" and i == 10 else 0)}


def variant(name: str) -> tuple[Role[Label], ScriptedModel]:
    def reply(request: ModelRequest) -> dict[str, Any]:
        i = int(request.messages[0].text.split('"text": "note ')[1].split('"')[0])
        args = answers(name, i)
        if args is None:
            return {"text": "I will not report."}  # the item fails: its agent never reports
        return {"calls": [{"name": "report_label", "args": args}]}

    model = ScriptedModel(reply)
    role: Role[Label] = Role(
        "labeller",
        "Label the note.",
        tools=[reporting_tool("report_label", "Hand back the label.", Label)],
        model=model,
        reminders=0,
    )
    return role, model


NOTES = [Note(f"note {i}") for i in range(20)]


async def test_three_variants_over_twenty_inputs() -> None:
    roles = {name: variant(name) for name in ("a", "b", "c")}
    store = MemoryStore()
    grid = await Run(store=store).compare(
        {name: role for name, (role, _) in roles.items()},
        NOTES,
        score=lambda note, label: label.n == int(note.text.split()[1]),
    )
    assert isinstance(grid, Comparison)
    assert grid.fields == ("label", "n")
    assert len(grid.inputs) == 20 and [v.name for v in grid.variants] == ["a", "b", "c"]
    differing = {"label": {0, 1, 2, 3, 4, 5, 6, 19}, "n": {10, 19}}
    for f, expected_rows in differing.items():
        assert {r for r in range(20) if grid.differs(r, f)} == expected_rows
    assert grid.agreement == {"label": pytest.approx(12 / 20), "n": pytest.approx(18 / 20)}
    assert [v.failed for v in grid.variants] == [0, 0, 1]
    assert [v.mean_score for v in grid.variants] == [pytest.approx(19 / 20), 1.0, 1.0]
    assert grid.variants[2].failures[19] is not None and "RoleIncompleteError" in str(grid.variants[2].failures[19])

    page = grid.render_html()
    grid_html = page.split('class="agl-grid"')[1].split("</table>")[0]
    grid_rows: list[tuple[str, str]] = [
        row for row in re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", grid_html) if "<td" in row[1]
    ]
    assert len(grid_rows) == 20
    marked = {
        (r, col)
        for r, (_, cells) in enumerate(grid_rows)
        for col, cell in enumerate(re.findall(r"<td[^>]*>", cells))
        if "agl-differs" in cell
    }
    expected = {(r, c) for r in differing["label"] for c in (0, 1, 2)} | {
        (r, c) for r in differing["n"] for c in (3, 4, 5)
    }
    assert marked == expected, "exactly the differing cells are marked"
    text = grid.render_text()
    assert "agreement on label: 60%" in text and "agreement on n: 90%" in text

    frame = grid.to_pandas()
    assert frame.shape == (20, 1 + 3 * 2 + 3)
    assert frame.loc[0, ("input", "")] == "note 0"
    assert frame.loc[0, ("label", "b")] == "L0x"
    assert frame.loc[10, ("n", "a")] == 110
    assert frame.isna().loc[19, ("label", "c")]
    assert "RoleIncompleteError" in frame.loc[19, ("failure", "c")]

    # Resumable and stored as maps are: a second compare replays every item, no model call.
    before = [m.calls for _, m in roles.values()]
    again = await Run(store=store).compare({name: role for name, (role, _) in roles.items()}, NOTES)
    assert [m.calls for _, m in roles.values()][:2] == before[:2], "the finished items replayed"
    assert again.agreement == grid.agreement and again.render_html().count("agl-differs") == page.count("agl-differs")


async def test_each_variant_s_recorded_dollars_and_tokens() -> None:
    fake = CountingAPI()
    live: Role[Summary] = Role(
        "summarizer",
        "Summarize.",
        tools=[reporting_tool("report_summary", "Hand back the summary.", Summary)],
        model=fake.model(),
        max_tokens=256,
    )
    scripted: Role[Summary] = Role(
        "summarizer",
        "Summarize.",
        tools=[reporting_tool("report_summary", "Hand back the summary.", Summary)],
        model=ScriptedModel(lambda request: {"calls": [{"name": "report_summary", "args": {"title": "done"}}]}),
    )
    grid = await Run().compare({"opus": live, "scripted": scripted}, NOTES[:3])
    opus, free = grid.variants
    assert opus.usd == pytest.approx(sum(fake.costs)) and opus.tokens > 0
    assert free.usd == 0 and grid.agreement == {"title": 1.0}
    assert f"${sum(fake.costs):.4f}" in grid.render_text()


@dataclass(frozen=True)
class Summary:
    title: str = describe("A title.")


async def test_variants_must_be_named() -> None:
    with pytest.raises(InputError, match="mapping of variant names"):
        await Run().compare({}, NOTES)
    with pytest.raises(InputError, match="non-empty string"):
        await Run().compare({"": variant("a")[0]}, NOTES)
