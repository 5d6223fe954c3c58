"""A role names an OpenAI-compatible model by a string: ``"openai:<model>"`` or ``"openai:<model>@<server URL>"``.

Through the real ``openai`` client against the fake Chat Completions server on the loopback interface: the string's
server is the one asked, its backend id the one recorded, ``OPENAI_API_KEY`` is never sent to it, and the step
replays with no request. A string not of the form is an `InputError` naming it when the role is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agl_notebook import Role, Run, role
from agl_notebook.errors import InputError
from agl_notebook.models import resolve_backend_id, resolve_model
from agl_notebook.models.openai import NO_KEY, OpenAIModel, model_from_string
from agl_notebook.replay.stores import MemoryStore
from tests.models_openai.test_openai_backend import researcher
from tests.support.openai_api import call, chat_server, fake_key, reply
from tests.support.steps import Answer


def answer(_body: dict[str, Any]) -> list[str]:
    return reply(calls=(call(0, "c", "report", '{"summary": "from the string"}'),))


async def test_a_role_s_model_string_names_model_and_server_records_and_replays_with_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planted = fake_key()
    monkeypatch.setenv("OPENAI_API_KEY", planted)  # a person's OpenAI key: never for another host
    with chat_server(answer) as served:
        named = f"openai:llama3.2@{served.url}"
        store = MemoryStore()
        assert await Run(store=store).step(researcher(named), "x") == Answer("from the string")
        assert served.requests == 1 and served.authorizations == [f"Bearer {NO_KEY}"]
        (record,) = list(store.records())
        assert record.backend == f"openai:llama3.2@{served.url}" == resolve_backend_id(named)
        assert planted not in json.dumps(record.to_json())
        assert await Run(store=store, mode="replay").step(researcher(named), "x") == Answer("from the string")
        assert served.requests == 1  # the replay asked nothing
    # One backend per model and server, so its client and connections are reused by every step.
    assert resolve_model(named) is resolve_model(named) is model_from_string(named)


async def test_a_bare_model_string_goes_where_openai_base_url_says_without_the_openai_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planted = fake_key()
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    # Unset: OpenAI's own server, which alone is sent OPENAI_API_KEY (as OpenAIModel("gpt-4.1") is).
    bare = model_from_string("openai:gpt-4.1")
    assert bare.backend_id("") == OpenAIModel("gpt-4.1").backend_id("") == resolve_backend_id("openai:gpt-4.1")
    assert bare.backend_id("") == "openai:gpt-4.1@https://api.openai.com:443/v1"
    assert bare._key() == planted
    with chat_server(answer) as served:
        monkeypatch.setenv("OPENAI_BASE_URL", served.url)
        store = MemoryStore()
        assert await Run(store=store).step(researcher("openai:gpt-4.1"), "x") == Answer("from the string")
        (record,) = list(store.records())
        assert record.backend == f"openai:gpt-4.1@{served.url}" == resolve_backend_id("openai:gpt-4.1")
        assert served.authorizations == [f"Bearer {NO_KEY}"]  # the loopback server is not OpenAI's
        assert OpenAIModel("gpt-4.1").backend_id("") == record.backend  # the class reads the variable too
        assert await Run(store=store, mode="replay").step(researcher("openai:gpt-4.1"), "x") == Answer(
            "from the string"
        )
        assert served.requests == 1


@pytest.mark.parametrize(
    "named",
    [
        "openai:@cf/meta/llama-3.1-8b-instruct",  # Cloudflare's names start with "@"
        "openai:qwen2.5:7b@http://localhost:11434/v1",
        "openai:gpt-4.1@https://api.openai.com/v1",
        "openai:m@http://[::1]:8080/v1",
    ],
)
def test_model_strings_of_the_form_are_taken(named: str) -> None:
    made: Role[None] = Role("r", instructions="Do it.", model=named)
    assert resolve_backend_id(made.model) == model_from_string(named).backend_id("")  # type: ignore[arg-type]


SECRET_PARTS = ("userinfo", "query")


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ("openai:", "names no model"),
        ("openai:@http://localhost:11434/v1", "names no model"),
        ("openai:gpt 4.1", "white space"),
        ("openai: gpt-4.1", "white space"),
        ("openai:llama3@localhost:11434/v1", "without a scheme"),
        ("openai:deepseek-chat@api.deepseek.com", "without a scheme"),
        ("openai:llama3@", "without a scheme"),
        ("openai:llama3@ftp://localhost/v1", "no http or https server"),
        ("openai:llama3@http://", "no http or https server"),
        ("openai:llama3@http://localhost:port/v1", "not a URL"),
        ("userinfo", "holds a key"),
        ("query", "holds a key"),
    ],
)
def test_a_malformed_model_string_is_an_input_error_naming_it_when_the_role_is_made(named: str, said: str) -> None:
    planted = fake_key()
    if named == "userinfo":
        named = f"openai:llama3@http://me:{planted}@localhost:11434/v1"
    elif named == "query":
        named = f"openai:llama3@http://localhost:11434/v1?key={planted}"
    makers: list[Callable[[], object]] = [
        lambda: Role("researcher", instructions="Do it.", model=named),
        lambda: role(model=named),
    ]
    for make in makers:
        with pytest.raises(InputError) as raised:
            make()
        message = str(raised.value)
        assert said in message and ("Role 'researcher'" in message or "role(model=...)" in message)
        assert planted not in message  # a key in the string is never echoed
        if planted not in named:
            assert repr(named) in message or "llama3" in message
