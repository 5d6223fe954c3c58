"""Maps over images (issue 28): 20 image rows through the real ``anthropic`` client, replayed with no request; a
DataFrame column of paths or bytes builds the image fields; a batch map carries each image within the batch size
limit, split as any wave is."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pandas as pd  # type: ignore[import-untyped]
import pytest

from agl_notebook import Image, Role, Run, describe, reporting_tool
from agl_notebook.errors import InputError
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay.stores import JsonFileStore
from tests.support.anthropic_api import BASE_URL, KEY, reply, sse, use
from tests.support.anthropic_batches import FakeBatches, Turn
from tests.support.batch_steps import engine_for
from tests.support.media import png


@dataclass(frozen=True)
class Row:
    photo: Image = describe("The photo.")
    label: str = describe("Its label.")


@dataclass(frozen=True)
class Seen:
    text: str = describe("What the photo shows.")


LOOKER: Role[Seen] = Role(
    name="looker",
    instructions="Say what the photo shows.",
    tools=[reporting_tool("report", "Report.", Seen)],
    model="claude-haiku-4-5",
    accepts=(Row,),
)


def photos(n: int) -> list[bytes]:
    return [png(6, 4, shade=i) for i in range(n)]


class Looking:
    """Answers each request with a report naming the image's size in bytes and the row's label."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        first = body["messages"][0]["content"]
        image = next(b for b in first if b["type"] == "image")
        label = json.loads(first[-1]["text"].split(":\n", 1)[1])["label"]
        seen = f"{label}: {len(base64.b64decode(image['source']['data']))} bytes of {image['source']['media_type']}"
        events = reply(use("toolu_1", "report", json.dumps({"text": seen})), stop_reason="tool_use")
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(events))

    def model(self) -> AnthropicModel:
        client = anthropic.AsyncAnthropic(
            api_key=KEY, base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        )
        return AnthropicModel(client=client)


async def test_a_map_over_twenty_image_rows_sends_each_image_and_replays_with_no_request(tmp_path: Path) -> None:
    file = tmp_path / "records.json"
    rows = [Row(Image(p), f"row {i}") for i, p in enumerate(photos(20))]
    fake = Looking()
    results = await Run(model=fake.model(), store=JsonFileStore(file)).map(LOOKER, rows, concurrency=4)
    assert [r.text for r in results] == [f"row {i}: {len(p)} bytes of image/png" for i, p in enumerate(photos(20))]
    assert len(fake.bodies) == 20
    sent = sorted(
        next(b for b in body["messages"][0]["content"] if b["type"] == "image")["source"]["data"]
        for body in fake.bodies
    )
    assert sent == sorted(base64.b64encode(p).decode() for p in photos(20))

    again = Looking()
    replayed = await Run(model=again.model(), store=JsonFileStore(file), mode="replay").map(
        LOOKER, [Row(Image(p), f"row {i}") for i, p in enumerate(photos(20))]
    )
    assert [r.text for r in replayed] == [r.text for r in results]
    assert again.bodies == []


async def test_a_dataframe_column_of_paths_or_bytes_builds_the_image_fields(tmp_path: Path) -> None:
    paths = []
    for i, data in enumerate(photos(3)):
        path = tmp_path / f"photo{i}.png"
        path.write_bytes(data)
        paths.append(str(path))
    fake = Looking()
    run = Run(model=fake.model())
    by_path = await run.map(LOOKER, pd.DataFrame({"photo": paths, "label": ["a", "b", "c"]}))
    by_bytes = await run.map(LOOKER, pd.DataFrame({"photo": photos(3), "label": ["a", "b", "c"]}))
    assert [r.text for r in by_path] == [r.text for r in by_bytes]
    assert by_path[0].text == f"a: {len(photos(1)[0])} bytes of image/png"
    with pytest.raises(InputError, match=r"run.map: row 1: Row.photo: cannot read the image at '.*nowhere.png'"):
        await run.map(LOOKER, pd.DataFrame({"photo": [paths[0], str(tmp_path / "nowhere.png")], "label": ["a", "b"]}))


def _batch_turn(params: dict[str, Any]) -> Turn:
    first = params["messages"][0]["content"]
    label = json.loads(first[-1]["text"].split(":\n", 1)[1])["label"]
    return Turn((use("toolu_1", "report", json.dumps({"text": label})),), "tool_use")


async def test_a_batch_map_carries_its_images_within_the_batch_size_limit(tmp_path: Path) -> None:
    big = [png(60, 60, shade=i, noisy=True) for i in range(6)]  # about 11 KB each, 14 KB as base64
    fake = FakeBatches(_batch_turn, polls=0, max_bytes=40_000)
    run = Run(model=AnthropicModel(client=fake.client()))
    rows = [Row(Image(p), f"row {i}") for i, p in enumerate(big)]
    results = await run.map(LOOKER, rows, engine=engine_for(fake, max_bytes=40_000))
    assert [r.text for r in results] == [f"row {i}" for i in range(6)]
    assert len(fake.creations) > 1  # one wave split over several batches, each under the limit
    carried = [
        block["source"]["data"]
        for batch in fake.creations
        for request in batch.requests
        for block in request["params"]["messages"][0]["content"]
        if block["type"] == "image"
    ]
    assert sorted(carried) == sorted(base64.b64encode(p).decode() for p in big)
