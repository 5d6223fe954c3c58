"""A notebook with large images, recorded headlessly in a real kernel and replayed under nbval (issue 28, items 3 and
4): each image over 32 KB goes to a blob file beside the notebook, the saved notebook grows by about 2 KB per image over
the view's cap (its reference and placeholder, not its bytes) and by its thumbnail under it, and the replay in a
fresh kernel needs no model and draws what the live run drew (nbval compares them)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agl_notebook.cli import main
from agl_notebook.media import INLINE_BLOB_BYTES
from agl_notebook.notebook.media_view import THUMBNAIL_BYTES
from tests.support.media import png
from tests.support.nbval import nbval
from tests.support.oracle_notebook import nbformat, v4

SETUP = """\
from dataclasses import dataclass
from pathlib import Path
from agl_notebook import Image, Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

@dataclass(frozen=True)
class Shot:
    photo: Image = describe("The photo.")

@dataclass(frozen=True)
class Topic:
    topic: str = describe("What to draw.")

@dataclass(frozen=True)
class Seen:
    text: str = describe("What was seen.")

async def draw(topic: Topic) -> ToolResult:
    return ToolResult("The chart.", images=[Image(Path("chart.png").read_bytes())])

MODEL = ScriptedModel([{"calls": [{"name": "draw", "args": {"topic": "wear"}}]},
                       {"calls": [{"name": "report", "args": {"text": "a crack"}}]}])
role = Role(name="looker", instructions="Look.",
            tools=[tool("draw", "Draw a chart.", Topic, draw), reporting_tool("report", "Report.", Seen)])"""

WITH_IMAGE = 'seen = await Run(model=MODEL).step(role, Shot(Image("photo.png")))\nseen.text'


def notebook(folder: Path, step: str) -> Path:
    folder.mkdir()
    path = folder / "looker.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(SETUP), v4.new_code_cell(step)]), path)
    return path


def test_large_images_go_beside_the_notebook_and_replay_under_nbval(
    tmp_path: Path, clean_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # The photo (90 KB) is over the view's cap, a placeholder; the chart (50 KB) under it, a thumbnail, but over the
    # inline cap: both in blob files, and the replay in a fresh kernel must draw the chart as the live run did.
    photo, chart = png(200, 150, noisy=True), png(130, 130, shade=7, noisy=True)
    assert THUMBNAIL_BYTES > len(chart) > INLINE_BLOB_BYTES and len(photo) > THUMBNAIL_BYTES
    with_images = notebook(tmp_path / "images", WITH_IMAGE)
    (with_images.parent / "photo.png").write_bytes(photo)
    (with_images.parent / "chart.png").write_bytes(chart)
    assert main(["execute", str(with_images), "--record"]) == 0

    blobs = sorted(p.name for p in (with_images.parent / "agl_blobs").iterdir())
    assert blobs == sorted(f"{hashlib.sha256(b).hexdigest()}.png" for b in (photo, chart))
    # The same notebook whose photo is the tool's small text: what the images add to the saved file.
    twin = notebook(tmp_path / "text", WITH_IMAGE.replace('Shot(Image("photo.png"))', 'Shot(Image("photo.png"))'))
    (twin.parent / "photo.png").write_bytes(png(4, 3))
    (twin.parent / "chart.png").write_bytes(png(4, 3, shade=1))
    assert main(["execute", str(twin), "--record"]) == 0
    grown = with_images.stat().st_size - twin.stat().st_size
    thumbnail = len(chart) * 4 // 3  # the chart's thumbnail, its base64 in the HTML
    assert grown < thumbnail + 2 * 3_000, (
        f"the notebook grew by {grown:,} bytes for images of {len(photo) + len(chart):,}"
    )

    done = nbval(with_images)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 model calls" in done.stdout
