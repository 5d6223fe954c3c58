"""Reliability (docs/reliability.md): a planted API key leaks nowhere agl_notebook writes, draws or logs.

The key (built at runtime, never spelled out in this file) is put in ANTHROPIC_API_KEY, and a second secret in an
environment variable whose name says it is one; both are then fed through every path: the step's input, the model's
text (echoed by the fake API), a tool's result, a question's answer, the reported result, an error raised by a tool and
an API error message. The saved JSON file, every record, every view bundle (text/plain, text/html and metadata) and
every log line captured at DEBUG are searched for them.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from agl_notebook import Claude, Role, Run, ToolResult, reporting_tool, tool
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.replay import REDACTED, JsonFileStore
from tests.support.anthropic_api import BASE_URL, FakeAPI, api, error_response, reply, text, use
from tests.support.reliability_report import ReliabilityNotes
from tests.support.steps import Answer, Query, which
from tests.support.widgets import FakeDisplay, recording_comms, views_on

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)


def planted_key() -> str:
    return "sk-ant-" + "api03-" + secrets.token_hex(8) + "x" * 24


def planted_token() -> str:
    return "svc-" + secrets.token_hex(12)  # not key-shaped: only its environment variable's name marks it


@dataclass
class Planted:
    key: str
    token: str
    folder: Path
    fake: FakeAPI | None = None
    displays: list[FakeDisplay] = field(default_factory=list)
    searched: int = 0  # places searched so far

    @property
    def both(self) -> str:
        return f"{self.key} and {self.token}"

    def run(self, fake: FakeAPI, *, live: bool = False) -> Run:
        self.fake = fake
        self.displays = []
        client = anthropic.AsyncAnthropic(
            api_key=os.environ["ANTHROPIC_API_KEY"],
            base_url=BASE_URL,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(fake.handle)),
            max_retries=0,
        )

        return Run(
            model=AnthropicModel(client=client),
            answers=[f"the answer is {self.both}"] * 4,
            store=JsonFileStore(self.folder / "records.json"),
            view=views_on(self.displays, live=live),
        )

    def role(self, run: Run, *, broken: bool = False) -> Role[Answer]:
        async def look_up(query: Query) -> ToolResult:
            answer = await run.terminal.show(which, text="Which credential should I use?")
            if broken:
                raise PermissionError(f"login refused for {self.both}")
            return ToolResult(f"config: ANTHROPIC_API_KEY={self.key} token={self.token}; you said {answer}")

        return Role(
            name="researcher",
            instructions="Look things up, then report.",
            tools=[
                tool("look_up", "Look a thing up.", Query, look_up),
                reporting_tool("report", "Report what you found.", Answer),
            ],
            model=Claude.SONNET,
        )

    def places(self, caplog: pytest.LogCaptureFixture, *, sdk_logs: bool) -> Iterator[tuple[str, str]]:
        """Every place a secret could have been written to, as (where, text).

        Log lines are all of them (``sdk_logs``) or only agl_notebook's own and those of anything else than the
        anthropic SDK and its HTTP client, whose DEBUG request logs are checked separately
        (test_the_sdks_debug_logs_leak_no_secret)."""
        path = self.folder / "records.json"
        if path.exists():
            yield "the store file", path.read_text(encoding="utf-8")
        for record in JsonFileStore(path).records():
            yield f"record {record.id}", json.dumps(record.to_json())
        for i, display in enumerate(self.displays):
            for bundle, metadata in [*display.shown, *display.updates]:
                yield f"view {i} text/plain", bundle["text/plain"]
                yield f"view {i} text/html", bundle["text/html"]
                yield f"view {i} metadata", json.dumps(metadata)
        for entry in caplog.records:
            if sdk_logs or not entry.name.startswith(("anthropic", "httpx")):
                yield f"log {entry.name}", entry.getMessage() + (entry.exc_text or "")
        if sdk_logs:
            yield "log text", caplog.text

    def assert_nowhere(self, caplog: pytest.LogCaptureFixture, *, sdk_logs: bool = False) -> int:
        """Search every place; fail naming each leak. Returns how many places were searched."""
        searched = 0
        leaks: list[str] = []
        for where, found in self.places(caplog, sdk_logs=sdk_logs):
            searched += 1
            leaks += [
                f"the {name} leaked into {where}"
                for name, secret in (("API key", self.key), ("secret token", self.token))
                if secret in found
            ]
        assert not leaks, leaks
        self.searched += searched
        return searched

    def note(self, reliability: ReliabilityNotes, tried: str) -> None:
        reliability.note(
            "Secrets",
            tried,
            f"the key and a secret-named variable's value appear in none of the "
            f"{self.searched} places searched (store file, records, view bundles and metadata, logs)",
            secrets_found=0,
            places_searched=self.searched,
        )


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Planted:
    key, token = planted_key(), planted_token()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    caplog.set_level(logging.DEBUG)
    return Planted(key, token, tmp_path)


def tool_turn() -> list[Any]:
    return reply(text("Let me look."), use("toolu_1", "look_up", '{"text": "credentials"}'), stop_reason="tool_use")


async def test_a_successful_step_leaks_no_secret(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes
) -> None:
    k = planted
    fake = api(
        tool_turn(),
        reply(
            text(f"I see {k.both}."),
            use("toolu_2", "report", json.dumps({"summary": f"found {k.both}"})),
            stop_reason="tool_use",
        ),
    )
    run = k.run(fake)
    answer = await run.step(k.role(run), f"Use {k.both} to look it up.")
    assert answer == Answer(f"found {k.both}")  # the caller's own value, returned as is
    assert all(r.headers["authorization"] == f"Bearer {k.key}" for r in fake.requests)  # the key was in play
    (record,) = JsonFileStore(k.folder / "records.json").records()
    assert record.input == f"Use {REDACTED} and {REDACTED} to look it up."
    assert record.result == {"summary": f"found {REDACTED} and {REDACTED}"}
    assert record.questions[0].answer == f"the answer is {REDACTED} and {REDACTED}"
    assert REDACTED in k.displays[0].shown[0][0]["text/html"]
    assert any(e.name.startswith(("anthropic", "httpx")) for e in caplog.records), "no DEBUG logs were captured"
    assert k.assert_nowhere(caplog) >= 5  # the file, its record, and the view's three parts
    k.note(
        reliability,
        "a key in the environment (as the SDK's key) and in a secret-named variable, both also in "
        "the input, the model's text, a tool's result, the answer to a question and the reported payload",
    )


async def test_a_tool_error_carrying_a_secret_is_drawn_scrubbed(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes
) -> None:
    k = planted
    run = k.run(api(tool_turn(), tool_turn()))
    with pytest.raises(PermissionError) as raised:
        await run.step(k.role(run, broken=True), f"Use {k.both}.")
    # The raised error is the tool's own exception object: the library cannot (and should not) rewrite a user's
    # exception, so its str() still holds what the tool put in it. What the library itself draws, records and logs
    # of it must not.
    assert k.key in str(raised.value)
    assert run.store.records() == ()
    assert not (k.folder / "records.json").exists()
    ((bundle, metadata),) = k.displays[0].shown
    assert (
        f"error: PermissionError in the handler of tool look_up: login refused for {REDACTED} and {REDACTED}"
        in bundle["text/plain"]
    )
    assert metadata == {}
    k.assert_nowhere(caplog)
    # The next step of the same Run still works, and still leaks nothing.
    fake = k.fake
    assert fake is not None
    fake.responses.append(lambda: _report(f"ok {k.both}"))
    assert await run.step(k.role(run), "again") == Answer(f"ok {k.both}")
    k.assert_nowhere(caplog)
    k.note(reliability, "both secrets in a tool's exception message, then a next step")


def _report(summary: str) -> httpx2.Response:
    from tests.support.anthropic_api import stream_response

    return stream_response(reply(use("toolu_9", "report", json.dumps({"summary": summary})), stop_reason="tool_use"))


async def test_an_api_error_echoing_the_key_is_drawn_and_logged_scrubbed(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes
) -> None:
    k = planted
    run = k.run(api(lambda: error_response(401, "authentication_error", f"invalid x-api-key: {k.key} ({k.token})")))
    with pytest.raises(anthropic.AuthenticationError) as raised:
        await run.step(k.role(run), "Look it up.")
    # The SDK's exception object carries the API's message verbatim; as above, only what the library draws,
    # records and logs of it is checked.
    assert raised.value.status_code == 401
    assert run.store.records() == ()
    ((bundle, _),) = k.displays[0].shown
    assert "error: AuthenticationError: " in bundle["text/plain"]
    assert REDACTED in bundle["text/plain"]
    k.assert_nowhere(caplog)
    k.note(reliability, "a 401 whose message echoes the key and the token")


def test_the_key_is_never_spelled_in_this_file() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    assert ("sk-ant-" + "api03-") not in source


async def test_the_sdks_debug_logs_leak_no_secret(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes
) -> None:
    k = planted
    run = k.run(api(lambda: _report("done")))
    await run.step(k.role(run), f"Use {k.both}.")
    k.assert_nowhere(caplog, sdk_logs=True)
    k.note(reliability, "the SDK's DEBUG request logs of a step whose input holds both secrets")


async def test_the_sdk_logs_no_auth_header(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes
) -> None:
    # The key as the auth header (not as content the person typed) never reaches any log line, the SDK's included.
    k = planted
    run = k.run(api(lambda: _report("done")))
    await run.step(k.role(run), "Nothing secret in here.")
    assert any(e.name.startswith("anthropic") for e in caplog.records)
    k.assert_nowhere(caplog, sdk_logs=True)
    k.note(reliability, "the key as the x-api-key/authorization header, in every log line at DEBUG")


async def test_the_live_widget_messages_leak_no_secret(
    planted: Planted, caplog: pytest.LogCaptureFixture, reliability: ReliabilityNotes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The live (widget) view too: every comm message sent while the step runs and asks its question is searched.
    sent = recording_comms(monkeypatch)
    k = planted
    fake = api(
        tool_turn(),
        reply(
            text(f"I see {k.both}."),
            use("toolu_2", "report", json.dumps({"summary": f"found {k.both}"})),
            stop_reason="tool_use",
        ),
    )
    run = k.run(fake, live=True)
    await run.step(k.role(run), f"Use {k.both} to look it up.")
    assert sent, "no widget message was sent"
    wire = json.dumps(sent, default=repr)
    assert k.key not in wire
    assert k.token not in wire
    k.searched += 1  # the widget messages, one place
    assert k.displays and k.displays[0].updates, "the live view was never replaced by its final bundle"
    k.assert_nowhere(caplog)
    k.note(reliability, "both secrets through a live widget view: every comm message sent while the step runs and asks")
