"""What a live step costs beyond the wire's own work (issue 35), and the behaviours the cuts must keep.

The Anthropic backend sends every attempt with the SDK's retries off (it retries itself, the wait capped and
shown). A copy of the client per request cost a step 0.3 ms of CPU (the SDK's constructor, and a worker thread
hop to look the platform up before a new client's first request); the copy is now made once per client and made
again only when the client's settings change, so what a person assigns to the client later is still sent.

The secrets of the environment are read again only once the environment changed (every record kept asks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anthropic
import anthropic._base_client as sdk_base
import pytest

from agl_notebook import Claude, Role, Run, reporting_tool
from agl_notebook._secrets import _is_secret_name, secrets_from_environment
from agl_notebook.models.anthropic import AnthropicModel
from tests.support.anthropic_api import api, reply, use
from tests.support.steps import Query


@dataclass(frozen=True)
class Summary:
    title: str


RESEARCHER: Role[Summary] = Role(
    "researcher",
    "Look it up.",
    tools=[reporting_tool("report_summary", "Hand back the summary.", Summary)],
    model=Claude.OPUS,
)


def _report() -> list[Any]:
    return reply(use("toolu_1", "report_summary", '{"title": "done"}'), stop_reason="tool_use")


def _fake_key(which: str) -> str:
    return "-".join(["test", which, "not", "a", "key"])


async def test_the_client_is_copied_once_for_many_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    copies: list[object] = []
    platforms: list[object] = []
    copy = anthropic.AsyncAnthropic.copy
    get_platform = sdk_base.get_platform

    def counted_copy(self: anthropic.AsyncAnthropic, **kwargs: Any) -> anthropic.AsyncAnthropic:
        copies.append(kwargs)
        return copy(self, **kwargs)

    def counted_platform() -> Any:
        platforms.append(None)
        return get_platform()

    fake = api(*(_report() for _ in range(4)))
    client = fake.client()
    monkeypatch.setattr(anthropic.AsyncAnthropic, "copy", counted_copy)
    monkeypatch.setattr(anthropic.AsyncAnthropic, "with_options", counted_copy)
    monkeypatch.setattr(sdk_base, "get_platform", counted_platform)
    run = Run(model=AnthropicModel(client=client), mode="off")
    for i in range(4):
        await run.step(RESEARCHER, Query(f"question {i}"))
    assert len(fake.requests) == 4
    assert copies == [{"max_retries": 0}]  # one copy with the SDK's retries off, not one per request
    assert len(platforms) == 1  # so the platform is looked up once, not before every request
    assert {r.headers["x-stainless-retry-count"] for r in fake.requests} == {"0"}


async def test_settings_assigned_to_the_client_later_are_sent() -> None:
    fake = api(*(_report() for _ in range(3)))
    client = fake.client()
    run = Run(model=AnthropicModel(client=client), mode="off")
    await run.step(RESEARCHER, Query("first"))
    client.api_key = _fake_key("rotated")
    await run.step(RESEARCHER, Query("second"))
    client.base_url = "http://elsewhere.test"
    await run.step(RESEARCHER, Query("third"))
    first, second, third = fake.requests
    assert _fake_key("rotated") not in first.headers["authorization"]
    assert second.headers["authorization"] == f"Bearer {_fake_key('rotated')}"
    assert (second.url.host, third.url.host) == ("anthropic.test", "elsewhere.test")


async def test_each_client_gets_its_own_copy() -> None:
    first, second = api(_report(), _report()), api(_report())
    backend_a, backend_b = AnthropicModel(client=first.client()), AnthropicModel(client=second.client())
    run = Run(model=backend_a, mode="off")
    await run.step(RESEARCHER, Query("a"))
    await Run(model=backend_b, mode="off").step(RESEARCHER, Query("b"))
    await run.step(RESEARCHER, Query("a again"))
    assert (len(first.requests), len(second.requests)) == (2, 1)


def test_the_environment_is_read_again_only_once_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_TEST_SERVICE_TOKEN", _fake_key("service"))
    first = secrets_from_environment()
    looked_up = _is_secret_name.cache_info()
    assert secrets_from_environment() == first
    after = _is_secret_name.cache_info()
    assert (after.hits, after.misses) == (looked_up.hits, looked_up.misses)  # no variable read again


def test_a_secret_set_changed_or_removed_later_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    assert _fake_key("first") not in secrets_from_environment()
    monkeypatch.setenv("AGL_TEST_DB_PASSWORD", _fake_key("first"))
    assert _fake_key("first") in secrets_from_environment()
    monkeypatch.setenv("AGL_TEST_DB_PASSWORD", _fake_key("second"))
    found = secrets_from_environment()
    assert _fake_key("second") in found and _fake_key("first") not in found
    os.environ.update({"AGL_TEST_API_KEY": _fake_key("third")})
    monkeypatch.delenv("AGL_TEST_DB_PASSWORD")
    found = secrets_from_environment()
    assert _fake_key("third") in found and _fake_key("second") not in found
    del os.environ["AGL_TEST_API_KEY"]
    assert _fake_key("third") not in secrets_from_environment()


def test_an_environment_given_is_read_as_given() -> None:
    given = {"SOME_SECRET": _fake_key("given"), "PLAIN": _fake_key("plain")}
    assert secrets_from_environment(given) == (_fake_key("given"),)
    given["OTHER_TOKEN"] = _fake_key("other-one")
    assert secrets_from_environment(given) == (_fake_key("other-one"), _fake_key("given"))


def test_a_key_registered_in_code_after_the_environment_was_read_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    from agl_notebook import _secrets

    monkeypatch.setattr(_secrets, "_REGISTERED", set())
    before = secrets_from_environment()  # read and kept
    planted = "registered-" + "k" * 12  # built at run time, never a real key
    assert planted not in before
    _secrets.register_secret(planted)
    assert planted in secrets_from_environment()  # the environment is unchanged, yet the key is named
