"""Images and documents through the real ``anthropic`` client against the local fake wire (issue 28).

What each test shows: an image and a PDF reach the request as content blocks of their media types next to the JSON
of the rest of the input (never as JSON text); a URL source goes as a URL; a tool's image goes back inside its
tool_result; bad input is an InputError naming the field before any request; an API refusal fails the step with the
API's message and records nothing; a record keeps each blob once and replays with no request; one changed pixel
misses, and the miss names the input.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest

from agl_notebook import Document, Image, Role, Run, ToolResult, describe, reporting_tool, tool
from agl_notebook.errors import InputError, ReplayMissError
from agl_notebook.media import INLINE_BLOB_BYTES, Media
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.notebook.media_view import media_html
from agl_notebook.replay.stores import JsonFileStore, MemoryStore
from agl_notebook.transcript import ToolResultBlock
from tests.support.anthropic_api import api, fail, reply, use
from tests.support.media import jpeg_header, pdf, png, png_header


@dataclass(frozen=True)
class Inspection:
    photo: Image = describe("The photo of the part.")
    scan: Document = describe("The inspection sheet.")
    note: str = describe("What to look for.")


@dataclass(frozen=True)
class Finding:
    text: str = describe("What was found.")


@dataclass(frozen=True)
class Query:
    topic: str = describe("What to chart.")


def inspector(*tools: Any) -> Role[Finding]:
    return Role(
        name="inspector",
        instructions="Inspect the part.",
        tools=[*tools, reporting_tool("report", "Report the finding.", Finding)],
        model="claude-haiku-4-5",
    )


def reported(call_id: str = "toolu_r", finding: str = "a crack") -> list[Any]:
    return reply(use(call_id, "report", json.dumps({"text": finding})), stop_reason="tool_use")


async def test_an_image_and_a_pdf_arrive_as_content_blocks_of_their_media_types_beside_the_json() -> None:
    photo, sheet = png(), pdf(2)
    fake = api(reported())
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore())
    result = await run.step(inspector(), Inspection(Image(photo), Document(sheet, title="Sheet 7"), "cracks"))
    assert result == Finding("a crack")
    (body,) = fake.bodies()
    content = body["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image", "text", "document", "text"]
    assert content[1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(photo).decode(),
    }
    assert content[3]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(sheet).decode(),
    }
    assert content[3]["title"] == "Sheet 7"
    assert content[0]["text"] == "[image 1] (Inspection.photo):"
    # The rest of the input is JSON; each attachment in it is a label, never its bytes or digest.
    assert json.loads(content[4]["text"].removeprefix("Inspection:\n")) == {
        "photo": "[image 1]",
        "scan": "[document 1]",
        "note": "cracks",
    }
    assert "sha256" not in content[4]["text"] and base64.b64encode(photo).decode() not in content[4]["text"]


async def test_a_jpeg_a_text_document_and_url_sources() -> None:
    fake = api(reported(), reported())
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore())
    await run.step(
        inspector(), Inspection(Image(jpeg_header(640, 480)), Document(b"notes", media_type="text/plain"), "x")
    )
    url = "https://example.test/part.png"
    await run.step(inspector(), Inspection(Image(url), Document("https://example.test/sheet.pdf"), "x"))
    first, second = (b["messages"][0]["content"] for b in fake.bodies())
    assert first[1]["source"]["media_type"] == "image/jpeg"
    assert first[3]["source"] == {"type": "text", "media_type": "text/plain", "data": "notes"}
    assert second[1]["source"] == {"type": "url", "url": url}
    assert second[3]["source"] == {"type": "url", "url": "https://example.test/sheet.pdf"}


async def test_a_tools_image_goes_back_inside_its_tool_result() -> None:
    chart = png(8, 6, shade=9)

    async def draw(query: Query) -> ToolResult:
        return ToolResult(f"Chart of {query.topic}.", images=[Image(chart)])

    fake = api(
        reply(use("toolu_c", "chart", json.dumps({"topic": "sales"})), stop_reason="tool_use"),
        reported(),
    )
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore())
    await run.step(inspector(tool("chart", "Draw a chart.", Query, draw)), "Chart the sales.")
    result = fake.bodies()[1]["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_c"
    assert result["content"][0] == {"type": "text", "text": "Chart of sales."}
    assert result["content"][1]["type"] == "image"
    assert result["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(chart).decode(),
    }


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (
            lambda p: Inspection(Image(p / "missing.png"), Document(pdf()), "x"),
            r"Inspection\.photo: cannot read the image at '.*missing\.png'",
        ),
        (
            lambda p: Inspection(Image(b"BM" + b"\0" * 60), Document(pdf()), "x"),
            r"Inspection\.photo: the image is an unknown type; the API takes image/png",
        ),
        (
            lambda p: Inspection(Image(png()), Document(png()), "x"),
            r"Inspection\.scan: the document is image/png; the API takes application/pdf, text/plain",
        ),
        (
            lambda p: Inspection(Image(png_header(9000, 10)), Document(pdf()), "x"),
            r"Inspection\.photo: the image is 9000x10 px; the API refuses an image over 8000 px",
        ),
        (
            lambda p: Inspection(Image(png_header(10, 10) + b"\0" * (5 * 1024 * 1024)), Document(pdf()), "x"),
            r"Inspection\.photo: the image is 5,242,\d+ bytes, 6,990,\d+ as base64; the API refuses an image whose "
            r"base64 is over 5,242,880 bytes",
        ),
        (
            lambda p: Inspection(Image(png()), Document(pdf(101)), "x"),
            r"Inspection\.scan: the PDF has 101 pages; the API refuses a PDF of more than 100",
        ),
    ],
    ids=["unreadable path", "unsupported image", "unsupported document", "pixels", "bytes", "pdf pages"],
)
async def test_bad_input_is_an_input_error_naming_the_field_before_any_request(
    tmp_path: Path, make: Any, said: str
) -> None:
    fake = api()  # any request would fail the test: the fake has nothing to answer with
    run = Run(model=AnthropicModel(client=fake.client()), store=MemoryStore())
    with pytest.raises(InputError, match=said):
        await run.step(inspector(), make(tmp_path))
    assert fake.requests == []


async def test_an_api_refusal_of_a_block_fails_the_step_with_the_apis_message_recording_nothing() -> None:
    fake = api(fail(400, "invalid_request_error", "messages.0.content.1.image.source: Could not process image"))
    store = MemoryStore()
    run = Run(model=AnthropicModel(client=fake.client()), store=store)
    with pytest.raises(anthropic.BadRequestError, match="Could not process image"):  # the API's own error
        await run.step(inspector(), Inspection(Image(png()), Document(pdf()), "x"))
    assert list(store.records()) == []


async def test_a_record_keeps_each_blob_once_replays_with_no_request_and_one_changed_pixel_misses(
    tmp_path: Path,
) -> None:
    file = tmp_path / "records.json"
    chart = png(8, 6, shade=3)

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(chart), Image(chart)])

    def make_role() -> Role[Finding]:
        return inspector(tool("chart", "Draw a chart.", Query, draw))

    fake = api(reply(use("toolu_c", "chart", json.dumps({"topic": "t"})), stop_reason="tool_use"), reported())
    photo = png(16, 16)
    first = Inspection(Image(photo), Document(pdf()), "x")
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(make_role(), first)
    saved = json.loads(file.read_text())
    (record,) = saved["records"]
    # Three distinct blobs (the photo, the PDF, the chart sent twice), each kept once, by digest.
    assert len(record["blobs"]) == 3
    assert base64.b64encode(photo).decode() in record["blobs"].values()
    assert file.read_text().count(base64.b64encode(chart).decode()) == 1
    assert record["input"]["photo"]["image"].startswith("sha256:")

    again = api()  # no request may be made
    replayed = await Run(model=AnthropicModel(client=again.client()), store=JsonFileStore(file), mode="replay").step(
        make_role(), Inspection(Image(photo), Document(pdf()), "x")
    )
    assert replayed == Finding("a crack") and again.requests == []

    one_pixel = Inspection(Image(png(16, 16, changed=(5, 7))), Document(pdf()), "x")
    with pytest.raises(ReplayMissError, match="input") as miss:
        await Run(model=AnthropicModel(client=again.client()), store=JsonFileStore(file), mode="replay").step(
            make_role(), one_pixel
        )
    assert miss.value.differing == ("input",)
    assert again.requests == []


async def test_a_url_source_is_fingerprinted_by_its_url(tmp_path: Path) -> None:
    file = tmp_path / "records.json"
    url = "https://example.test/part.png"
    fake = api(reported())
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(
        inspector(), Inspection(Image(url), Document(pdf()), "x")
    )
    again = api()
    replay = Run(model=AnthropicModel(client=again.client()), store=JsonFileStore(file), mode="replay")
    assert await replay.step(inspector(), Inspection(Image(url), Document(pdf()), "x")) == Finding("a crack")
    with pytest.raises(ReplayMissError):
        await replay.step(inspector(), Inspection(Image(url + "?v=2"), Document(pdf()), "x"))
    assert again.requests == []


def tool_image(file: Path) -> Media:
    """The one image of the one tool result of the records file's one record, read back."""
    (kept,) = JsonFileStore(file).records()
    result = kept.transcript[2].content[0]
    assert isinstance(result, ToolResultBlock)
    (image,) = result.media
    return image


async def test_a_large_image_is_kept_in_a_blob_file_beside_the_records_and_a_missing_one_is_named(
    tmp_path: Path,
) -> None:
    file = tmp_path / "records.json"
    large = png(120, 120, noisy=True)  # over INLINE_BLOB_BYTES: kept in a file, not in the record
    assert len(large) > INLINE_BLOB_BYTES

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(large)])

    def make_role() -> Role[Finding]:
        return inspector(tool("chart", "Draw a chart.", Query, draw))

    fake = api(reply(use("toolu_c", "chart", json.dumps({"topic": "t"})), stop_reason="tool_use"), reported())
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(
        make_role(), Inspection(Image(png()), Document(pdf()), "x")
    )
    digest = hashlib.sha256(large).hexdigest()
    blob = tmp_path / "agl_blobs" / f"{digest}.png"
    assert blob.read_bytes() == large
    text = file.read_text()
    assert base64.b64encode(large).decode() not in text  # the records file grew by the reference only
    (record,) = json.loads(text)["records"]
    assert record["blobs"][f"sha256:{digest}"] == {"file": f"agl_blobs/{digest}.png", "bytes": len(large)}

    # Read back from another working folder: the blob is found beside the records file, and replays.
    assert tool_image(file).data == large

    blob.unlink()
    image = tool_image(file)
    with pytest.raises(InputError, match=rf"blob file '.*agl_blobs/{digest}\.png', which cannot be read"):
        image.data  # noqa: B018
    # The view still draws, a placeholder naming the missing file; the record is written again without reading it.
    assert f"its blob file agl_blobs/{digest}.png missing" in media_html(image, ())
    (again,) = JsonFileStore(file).records()
    assert again.to_json()["blobs"] == record["blobs"]


async def test_a_text_document_is_kept_as_text_in_the_record_so_a_secret_in_it_is_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = "planted-" + "7d2a" * 6
    monkeypatch.setenv("AGL_TEST_PLANTED_SECRET", planted)  # a secret of the environment, as a key would be
    file = tmp_path / "records.json"
    notes = Document(f"Gauge notes. token={planted}\n".encode() * 2000, media_type="text/plain")  # over 32 KB
    fake = api(reported())
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(
        inspector(), Inspection(Image(png()), notes, "x")
    )
    sent = fake.bodies()[0]["messages"][0]["content"][3]["source"]
    assert sent["type"] == "text" and planted in sent["data"]  # the model reads the document as given
    saved = file.read_text()
    assert planted not in saved and "Gauge notes." in saved  # the record keeps it as text, scrubbed
    assert not (tmp_path / "agl_blobs").exists()


class TextOnly:
    """A backend of one's own that declares it takes text and tools only (as OpenAIModel does)."""

    accepts = frozenset({"text", "tools"})
    network = False

    def __init__(self) -> None:
        self.requests = 0

    def backend_id(self, model: str) -> str:
        return "text-only:1"

    async def stream(self, request: Any) -> Any:
        self.requests += 1
        yield  # pragma: no cover - never reached: the step is refused first


async def test_a_model_that_takes_no_images_is_refused_before_any_request_naming_the_field() -> None:
    model = TextOnly()
    with pytest.raises(InputError, match=r"Inspection\.photo: the model .* does not take images"):
        await Run(model=model).step(inspector(), Inspection(Image(png()), Document(pdf()), "x"))
    assert model.requests == 0


def test_openai_chat_refuses_a_tool_result_with_images_rather_than_dropping_them() -> None:
    from agl_notebook.models.base import ModelRequest
    from agl_notebook.models.openai import chat_params
    from agl_notebook.transcript import Message, ToolUseBlock, user_text

    messages = (
        user_text("Chart it."),
        Message("assistant", (ToolUseBlock("call_1", "chart", {}),)),
        Message("user", (ToolResultBlock("call_1", "The chart.", media=(Image(png()),)),)),
    )
    with pytest.raises(InputError, match=r"Message 2 holds the result of tool call call_1 with 1 image"):
        chat_params(ModelRequest("gpt-4.1", "", messages, (), 100), "gpt-4.1")
