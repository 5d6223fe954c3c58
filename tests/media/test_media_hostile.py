"""Hostile and broken images and documents (issue 28), each refused before any request with an InputError naming the
field, through the real ``anthropic`` client against the fake API (which has nothing to answer with, so any request
fails the test).

What each shows: a path that is not a regular file (a FIFO, a device) is refused before it is opened, never read
(reading one may never end); a file over the API's limit is refused from its size, before its bytes are read; bytes
that are not the media type their path's suffix or ``media_type=`` says (a PDF that is not a PDF, a PNG given as a
GIF) are refused, not sent for the API to refuse; a URL holding a user name or password, or with no host, is refused
without repeating the password; a secret in a path is scrubbed from the error naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import traceback
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from agl_notebook import Document, Image, Role, Run, describe, reporting_tool
from agl_notebook.errors import InputError
from agl_notebook.media import IMAGE_MAX_BYTES
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay.stores import MemoryStore, RecordingWarning
from tests.notebook.test_view_thinking import assert_no_secret, planted
from tests.support.anthropic_api import api
from tests.support.media import pdf, png


@dataclass(frozen=True)
class Inspection:
    photo: Image = describe("The photo of the part.")
    scan: Document = describe("The inspection sheet.")


@dataclass(frozen=True)
class Finding:
    text: str = describe("What was found.")


def inspector() -> Role[Finding]:
    return Role(
        name="inspector",
        instructions="Inspect the part.",
        tools=[reporting_tool("report", "Report the finding.", Finding)],
        model="claude-haiku-4-5",
    )


async def refused(value: Inspection, said: str) -> InputError:
    fake = api()
    with pytest.raises(InputError, match=said) as raised:
        await Run(model=AnthropicModel(client=fake.client()), store=MemoryStore()).step(inspector(), value)
    assert fake.requests == []
    return raised.value


async def test_a_fifo_or_a_device_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "photo.png"
    os.mkfifo(fifo)  # opening it for reading waits for a writer forever

    def unblock() -> None:  # so a reader that opened it fails this test rather than hang it
        time.sleep(3)
        with contextlib.suppress(OSError):  # no reader: nothing to unblock
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=unblock, daemon=True).start()
    await refused(Inspection(Image(fifo), Document(pdf())), r"Inspection\.photo: .*photo\.png.* not a regular file")
    # A device: /dev/null (empty) stands for /dev/zero, whose reading would never end (nor its memory).
    await refused(
        Inspection(Image(png()), Document("/dev/null", media_type="application/pdf")),
        r"Inspection\.scan: '/dev/null' is not a regular file",
    )


async def test_a_file_over_the_limit_is_refused_from_its_size_before_its_bytes_are_read(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as f:
        f.write(png())
        f.truncate(40 * IMAGE_MAX_BYTES)  # a sparse 200 MB file: its size costs no disk
    tracemalloc.start()
    try:
        await refused(Inspection(Image(big), Document(pdf())), r"Inspection\.photo: the image is 209,715,200 bytes")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < IMAGE_MAX_BYTES, f"{peak:,} bytes were allocated to refuse it"


async def test_a_path_with_a_nul_character_is_an_input_error() -> None:
    await refused(
        Inspection(Image("photo\0.png"), Document(pdf())),
        r"Inspection\.photo: cannot read the image at 'photo\\x00\.png' \(embedded null byte\)",
    )


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (
            lambda p: Inspection(Image(png()), Document(p("scan.pdf", b"Hello, not a PDF."))),
            r"Inspection\.scan: the document is given as application/pdf, but its bytes are not one",
        ),
        (
            lambda p: Inspection(Image(png()), Document(p("empty.pdf", b""))),
            r"Inspection\.scan: the document is given as application/pdf, but its bytes are not one",
        ),
        (
            lambda p: Inspection(Image(png()), Document(b"<html>", media_type="application/pdf")),
            r"Inspection\.scan: the document is given as application/pdf, but its bytes are not one",
        ),
        (
            lambda p: Inspection(Image(png(), media_type="image/gif"), Document(pdf())),
            r"Inspection\.photo: the image is given as image/gif, but its bytes are image/png",
        ),
        (
            lambda p: Inspection(Image(p("photo.gif", b"GIF-ish but not a GIF")), Document(pdf())),
            r"Inspection\.photo: the image is given as image/gif, but its bytes are not one",
        ),
    ],
    ids=["text named .pdf", "empty .pdf", "declared pdf", "png declared gif", "not a gif named .gif"],
)
async def test_bytes_that_are_not_the_media_type_given_are_refused(tmp_path: Path, make: Any, said: str) -> None:
    def file(name: str, data: bytes) -> Path:
        (tmp_path / name).write_bytes(data)
        return tmp_path / name

    await refused(make(file), said)


async def test_a_url_with_a_password_or_no_host_is_refused_without_repeating_the_password() -> None:
    password = planted()[8:32]
    error = await refused(
        Inspection(Image(f"https://ann:{password}@photos.test/gauge.png"), Document(pdf())),
        r"Inspection\.photo: the URL holds a user name or password",
    )
    assert password not in str(error)
    await refused(Inspection(Image(png()), Document("https://")), r"Inspection\.scan: the URL 'https://' has no host")


async def test_a_secret_in_a_path_is_scrubbed_from_the_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = planted().replace("/", "_")  # a file name holds no slash
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    error = await refused(Inspection(Image(tmp_path / f"{secret}.png"), Document(pdf())), r"cannot read the image")
    assert_no_secret("".join(traceback.format_exception(error)), secret)  # its causes too, which a cell shows
    assert "[REDACTED].png" in str(error)


async def test_a_blob_file_replaced_by_a_fifo_or_a_larger_file_is_refused_unread_and_the_view_stands(
    tmp_path: Path,
) -> None:
    # A notebook's folder is data anyone may have written: its blob file may be a FIFO (or a link to /dev/zero).
    from agl_notebook import ToolResult, tool
    from agl_notebook.notebook.media_view import media_html
    from agl_notebook.replay.stores import JsonFileStore
    from tests.media.test_media_requests import Inspection as Inspected
    from tests.media.test_media_requests import Query, tool_image
    from tests.media.test_media_requests import inspector as inspector_with
    from tests.support.anthropic_api import reply, use

    file = tmp_path / "records.json"
    large = png(120, 120, noisy=True)  # over INLINE_BLOB_BYTES: kept in a blob file

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(large)])

    role = inspector_with(tool("chart", "Chart.", Query, draw))
    fake = api(
        reply(use("toolu_c", "chart", '{"topic": "t"}'), stop_reason="tool_use"),
        reply(use("toolu_r", "report", '{"text": "a crack"}'), stop_reason="tool_use"),
    )
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(
        role, Inspected(Image(png()), Document(pdf()), "x")
    )
    (blob,) = (tmp_path / "agl_blobs").iterdir()
    blob.unlink()
    os.mkfifo(blob)

    def unblock() -> None:  # so a reader that opened it fails this test rather than hang it
        time.sleep(3)
        with contextlib.suppress(OSError):
            os.close(os.open(blob, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=unblock, daemon=True).start()
    image = tool_image(file)
    with pytest.raises(InputError, match="is not a regular file"):
        image.data  # noqa: B018
    assert "missing" in media_html(image, ())  # a placeholder: the view stands

    blob.unlink()
    with blob.open("wb") as f:  # larger than recorded: not the recorded file, never read
        f.truncate(40 * IMAGE_MAX_BYTES)
    with pytest.raises(InputError, match="no longer holds the recorded image"):
        tool_image(file).data  # noqa: B018


@pytest.mark.parametrize("media_type", ["image/svg+xml", "image/png"])
async def test_a_records_image_whose_bytes_are_no_image_draws_a_placeholder_and_the_view_stands(
    tmp_path: Path, media_type: str
) -> None:
    # A record is data anyone may have written: its blob may be an SVG (or anything) under any media type.
    import base64
    import json

    from agl_notebook import ToolResult, tool
    from agl_notebook.notebook.media_view import media_html
    from agl_notebook.notebook.render import StepTrace, render_html, render_text
    from agl_notebook.replay.stores import JsonFileStore
    from tests.media.test_media_requests import Inspection as Inspected
    from tests.media.test_media_requests import Query
    from tests.media.test_media_requests import inspector as inspector_with
    from tests.support.anthropic_api import reply, use

    chart = png(8, 6, shade=9)

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(chart)])

    file = tmp_path / "records.json"
    fake = api(
        reply(use("toolu_c", "chart", '{"topic": "t"}'), stop_reason="tool_use"),
        reply(use("toolu_r", "report", '{"text": "a crack"}'), stop_reason="tool_use"),
    )
    inspection = Inspected(Image(png()), Document(pdf()), "x")
    role = inspector_with(tool("chart", "Chart.", Query, draw))
    await Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(file)).step(role, inspection)
    saved = json.loads(file.read_text())
    (record,) = saved["records"]
    digest = "sha256:" + hashlib.sha256(chart).hexdigest()
    record["blobs"][digest] = base64.b64encode(b"<svg onload=alert(1)></svg>").decode()
    record["transcript"][2]["content"][0]["content"][1]["source"]["media_type"] = media_type
    file.write_text(json.dumps(saved))

    events: list[Any] = []
    replay = Run(
        model=AnthropicModel(client=api().client()), store=JsonFileStore(file), mode="replay", on_event=events.append
    )
    await replay.step(role, inspection)
    trace = StepTrace("inspector")
    for event in events:
        trace.apply(event)
    page, text = render_html(trace, ()), render_text(trace, ())
    assert "cannot be read as an image" in page and "cannot be read as an image" in text
    assert "svg" not in page and "blob file" not in page
    document = Document.from_base64(record["blobs"][digest], media_type=None, where="record x")
    assert "cannot be read as a document" in media_html(document, ())


async def test_the_api_limits_of_5_mb_an_image_and_32_mb_a_request_are_on_the_base64_sent() -> None:
    # The API measures an image's base64 ("image exceeds 5 MB maximum: 6405384 bytes > 5242880 bytes" for a 4.8 MB
    # file), and a request's body, in which a PDF is base64: a file's bytes are three quarters of what is sent.
    largest = IMAGE_MAX_BYTES * 3 // 4  # its base64 is exactly 5 MB
    image = png(10, 10)
    await refused(
        Inspection(Image(image + b"\0" * (largest + 1 - len(image))), Document(pdf())),
        rf"Inspection\.photo: the image is {largest + 1:,} bytes, 5,242,884 as base64; the API refuses an image "
        r"whose base64 is over 5,242,880 bytes",
    )
    Image(image + b"\0" * (largest - len(image))).check("Inspection.photo")  # exactly at the limit: taken
    scan = pdf()
    await refused(
        Inspection(Image(png()), Document(scan + b"\0" * (25 * 1024 * 1024 - len(scan)))),
        r"Inspection\.scan: the document is 26,214,400 bytes, 34,952,536 as base64; a request holds at most "
        r"33,554,432 bytes",
    )


async def test_a_tools_text_document_holding_a_secret_draws_the_same_live_and_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record keeps a text document as text, scrubbed: the replay must still name it by what was sent (its size
    # and digest), as the live view did, or nbval sees the two differ.
    from agl_notebook import ToolResult, tool
    from agl_notebook.notebook.render import StepTrace, render_html, render_text
    from agl_notebook.replay.stores import JsonFileStore
    from tests.media.test_media_requests import Inspection as Inspected
    from tests.media.test_media_requests import Query
    from tests.media.test_media_requests import inspector as inspector_with
    from tests.support.anthropic_api import reply, use

    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    notes = f"notes {secret}".encode()

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Notes.", images=[Document(notes, media_type="text/plain", title="Notes")])

    role = inspector_with(tool("notes", "Notes.", Query, draw))
    file = tmp_path / "records.json"

    async def drawn(mode: Literal["auto", "replay"]) -> tuple[str, str]:
        fake = api(
            reply(use("toolu_c", "notes", '{"topic": "t"}'), stop_reason="tool_use"),
            reply(use("toolu_r", "report", '{"text": "a crack"}'), stop_reason="tool_use"),
        )
        events: list[Any] = []
        run = Run(
            model=AnthropicModel(client=fake.client()), store=JsonFileStore(file), mode=mode, on_event=events.append
        )
        await run.step(role, Inspected(Image(png()), Document(pdf()), "x"))  # as a cell makes it, each run
        trace = StepTrace("inspector")
        for event in events:
            trace.apply(event)
        return render_html(trace, (secret,)), render_text(trace, (secret,))

    live = await drawn("auto")
    assert f"text, {len(notes):,} bytes, sha256:{hashlib.sha256(notes).hexdigest()[:12]}" in live[0]
    assert secret not in file.read_text()
    assert await drawn("replay") == live
    (kept,) = JsonFileStore(file).records()  # written again as it was read: the same record
    assert json.loads(file.read_text())["records"][0] == json.loads(json.dumps(kept.to_json()))


KERNEL_SETUP = """\
import os
from dataclasses import dataclass
from pathlib import Path
from agl_notebook import Document, Image, Role, Run, ScriptedModel, ToolResult, describe, reporting_tool, tool

S = os.environ["AGL_TEST_PLANTED_TOKEN"]

@dataclass(frozen=True)
class Inspection:
    photo: Image = describe("The photo.")
    remote: Image = describe("A photo the API fetches.")
    sheet: Document = describe("The sheet.")
    notes: Document = describe("The notes.")

@dataclass(frozen=True)
class Topic:
    topic: str = describe("What to draw.")

@dataclass(frozen=True)
class Seen:
    text: str = describe("What was seen.")

async def draw(topic: Topic) -> ToolResult:
    return ToolResult("Chart " + S, images=[
        Image(Path("big.png").read_bytes()),
        Document(("tool notes " + S).encode(), media_type="text/plain", title="Notes " + S),
    ])

MODEL = ScriptedModel([{"calls": [{"name": "draw", "args": {"topic": "wear"}}]},
                       {"calls": [{"name": "report", "args": {"text": "ok"}}]}])
role = Role(name="looker", instructions="Look.",
            tools=[tool("draw", "Draw.", Topic, draw), reporting_tool("report", "Report.", Seen)])"""

KERNEL_STEP = """\
await Run(model=MODEL).step(role, Inspection(
    Image("photo.png"),
    Image("https://img.example/a.png?token=" + S),
    Document("sheet.pdf", title="<b>Sheet</b> " + S),
    Document(("notes " + S).encode(), media_type="text/plain"),
))"""


def test_secrets_in_a_url_a_title_and_text_documents_are_in_no_saved_output_and_the_replay_equals_the_live_run(
    tmp_path: Path, clean_environment: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import html

    from agl_notebook.cli import main
    from tests.support.nbval import nbval
    from tests.support.oracle_notebook import nbformat, v4

    secret = planted()
    monkeypatch.setenv("AGL_TEST_PLANTED_TOKEN", secret)
    (tmp_path / "photo.png").write_bytes(png(20, 10))
    (tmp_path / "big.png").write_bytes(png(130, 130, shade=7, noisy=True))  # in a blob file, drawn as a thumbnail
    (tmp_path / "sheet.pdf").write_bytes(pdf(2))
    path = tmp_path / "looker.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(KERNEL_SETUP), v4.new_code_cell(KERNEL_STEP)]), path)
    assert main(["execute", str(path), "--record"]) == 0

    saved = path.read_text() + "".join(p.read_bytes().decode("latin-1") for p in (tmp_path / "agl_blobs").iterdir())
    for spelled in (secret, json.dumps(secret)[1:-1], html.escape(secret), secret[8:20]):
        assert spelled not in saved
    done = nbval(path, {"AGL_TEST_PLANTED_TOKEN": secret})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 model calls" in done.stdout


async def test_a_blob_folder_that_is_a_file_is_a_warning_naming_it_and_the_paid_answer_is_kept(tmp_path: Path) -> None:
    # Not a raw FileExistsError from deep inside the store: what was wrong, and where; and the step, paid for, still
    # returns its answer and keeps its record.
    from agl_notebook import ToolResult, tool
    from agl_notebook.replay.stores import JsonFileStore
    from tests.media.test_media_requests import Inspection as Inspected
    from tests.media.test_media_requests import Query
    from tests.media.test_media_requests import inspector as inspector_with
    from tests.support.anthropic_api import reply, use

    (tmp_path / "agl_blobs").write_text("a file in the blob folder's place")
    large = png(120, 120, noisy=True)  # over INLINE_BLOB_BYTES: kept in a blob file

    async def draw(query: Query) -> ToolResult:
        return ToolResult("Chart.", images=[Image(large)])

    fake = api(
        reply(use("toolu_c", "chart", '{"topic": "t"}'), stop_reason="tool_use"),
        reply(use("toolu_r", "report", '{"text": "a crack"}'), stop_reason="tool_use"),
    )
    run = Run(model=AnthropicModel(client=fake.client()), store=JsonFileStore(tmp_path / "records.json"))
    with pytest.warns(RecordingWarning, match=r"agl_blobs.*cannot be written \(.*\).*kept without it") as told:
        answer = await run.step(
            inspector_with(tool("chart", "Chart.", Query, draw)), Inspected(Image(png()), Document(pdf()), "x")
        )
    assert answer.text == "a crack" and len(told) == 1
    assert [r.result for r in run.store.records()] == [{"text": "a crack"}]
    assert (tmp_path / "agl_blobs").read_text() == "a file in the blob folder's place"
