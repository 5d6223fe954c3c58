"""Reliability (docs/reliability.md): a planted secret at the exits of JSON-function agents and of questions asked
outside a step.

The secrets (built at run time) are a profile's header value, echoed back by a real server on 127.0.0.1 in spellings
that do not parse as JSON (a byte-order mark in front, a notice after, every character ``\\u``-escaped, ``/`` as
``\\/``, mixed, HTML-escaped, JSON inside JSON), and a secret-named environment variable's value put in a ``log``
line, in an expression's error and in a question's text. Every place the library writes is searched: the call's
result, its events, its recording, every log handler (the root logger's and agl_notebook's) and stderr.
"""

from __future__ import annotations

import html
import io
import json
import logging
import secrets
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agl_notebook import Run
from agl_notebook._secrets import scrub_text
from agl_notebook.functions import FunctionCallError, load_agent
from tests.support.functions_server import OrdersServer, _every_char_escaped, _mixed, serve
from tests.support.paths import ROOT
from tests.support.reliability_report import ReliabilityNotes

pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

FORMS = ("bom", "notice", "unicode", "mixed", "html", "nested")


def planted_secret() -> str:
    # Characters JSON, HTML and URLs each escape: '/', '"', '<', '&', '>', '+', and a space.
    return f'Zq/9"tk<&> +{secrets.token_hex(8)}'


def spellings(secret: str) -> set[str]:
    as_json = json.dumps(secret)[1:-1]
    return {
        secret,
        as_json,
        as_json.replace("/", "\\/"),
        json.dumps(as_json.replace("/", "\\/"))[1:-1],
        _every_char_escaped(secret),
        _mixed(secret),
        html.escape(secret),
    }


def leaks(text: str, secret: str) -> list[str]:
    """Each spelling of ``secret`` found in ``text``, and whether the scrubber would still find one there."""
    found = [s for s in spellings(secret) if s in text]
    if scrub_text(text, [secret]) != text:
        found.append("a spelling the scrubber finds")
    return found


class Collected(logging.Handler):
    """Every formatted log line a handler receives."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def handlers() -> Iterator[tuple[list[Collected], io.StringIO]]:
    """A handler on the root logger and on each of agl_notebook's loggers, and one writing to a stderr stand-in."""
    names = ("", "agl_notebook", "agl_notebook.functions", "agl_notebook.models.anthropic", "httpx2")
    attached = [(logging.getLogger(n), Collected()) for n in names]
    stderr = io.StringIO()
    to_stderr = logging.StreamHandler(stderr)
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)
    for logger, handler in attached:
        logger.addHandler(handler)
    root.addHandler(to_stderr)
    try:
        yield [h for _, h in attached], stderr
    finally:
        for logger, handler in attached:
            logger.removeHandler(handler)
        root.removeHandler(to_stderr)
        root.setLevel(old_level)


@pytest.fixture
def server() -> Iterator[OrdersServer]:
    yield from serve()


def echo_agent(server: OrdersServer, secret: str) -> Any:
    return load_agent(
        {
            "profiles": {
                "orders": {
                    "baseUrl": server.base_url,
                    "headers": {"Authorization": {"env": "ORDERS_BEARER", "prefix": "Bearer "}},
                }
            },
            "functions": {
                "echo": {
                    "args": {"form": {"type": "str"}},
                    "commands": [
                        {"api": {"profile": "orders", "path": "{ f'/echo-spelled/{form}' }"}},
                        {"set": {"body": "{ result }"}},
                        {"log": "{ body }"},
                        {"return": "{ body }"},
                    ],
                },
                "fail": {
                    "args": {"form": {"type": "str"}},
                    "commands": [
                        {"api": {"profile": "orders", "path": "{ f'/echo-spelled/{form}' }"}},
                        {"set": {"n": "{ int(result) }"}},  # the body in a ValueError's message
                    ],
                },
            },
        },
        environ={"ORDERS_BEARER": secret},
    )


async def test_escaped_echoes_of_a_secret_in_bodies_that_do_not_parse_reach_no_exit(
    server: OrdersServer,
    handlers: tuple[list[Collected], io.StringIO],
    reliability: ReliabilityNotes,
) -> None:
    secret = planted_secret()
    agent = echo_agent(server, secret)
    places: list[tuple[str, str]] = []
    for form in FORMS:
        events: list[Any] = []
        run = Run(on_event=events.append)
        body = await agent.call("echo", {"form": form}, run=run)
        assert isinstance(body, str) and "[REDACTED]" in body, (form, body)
        with pytest.raises(FunctionCallError) as raised:
            await agent.call("fail", {"form": form}, run=run)
        recording = await agent.record("echo", {"form": form})
        places += [
            (f"{form}: the result", body),
            (f"{form}: the events", repr(events)),
            (f"{form}: the recording", json.dumps(recording.tape, ensure_ascii=False)),
            (f"{form}: the error", "".join(traceback.format_exception(raised.value))),
            (f"{form}: the error's info", repr(raised.value.error)),
        ]
    assert [r.headers["authorization"] for r in server.received] == [f"Bearer {secret}"] * (3 * len(FORMS))
    collected, stderr = handlers
    places += [(f"log handler {i}", "\n".join(h.lines)) for i, h in enumerate(collected)]
    places.append(("stderr", stderr.getvalue()))
    assert any("[REDACTED]" in text for where, text in places if where.startswith("log")), "nothing was logged"
    found = [(where, leaks(text, secret)) for where, text in places if leaks(text, secret)]
    assert found == []
    reliability.note(
        "Secrets",
        "a profile's header value echoed by a real server in bodies that do not parse as JSON: behind a BOM, "
        "before a notice, every character \\u-escaped, '/' as '\\/', mixed, HTML-escaped, JSON in JSON",
        f"no spelling of it in any of the {len(places)} places searched (results, events, recordings, "
        "FunctionCallError tracebacks, every log handler, stderr)",
        secrets_found=0,
        places_searched=len(places),
    )


async def test_log_lines_and_function_errors_holding_an_environment_secret_reach_no_exit(
    monkeypatch: pytest.MonkeyPatch,
    handlers: tuple[list[Collected], io.StringIO],
    reliability: ReliabilityNotes,
) -> None:
    token = "svc-" + secrets.token_hex(12)
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    agent = load_agent(
        {
            "functions": {
                "main": {
                    "args": {"token": {"type": "str"}},
                    "commands": [
                        {"log": "{ f'using {token}' }"},
                        {"log": "{ {'nested': [token], token: 1} }"},
                        {"set": {"table": "{ {token: 1, 'other': 2} }"}},
                        {"set": {"n": "{ table[token + '!'] }"}},  # KeyError naming the key and the keys
                    ],
                },
                "parse": {"args": {"token": {}}, "commands": [{"return": "{ int(token) }"}]},
            }
        }
    )
    errors: list[str] = []
    for function in ("main", "parse"):
        with pytest.raises(FunctionCallError) as raised:
            await agent.call(function, {"token": token}, run=Run())
        errors += [str(raised.value), repr(raised.value.error), "".join(traceback.format_exception(raised.value))]
        logging.getLogger("agl_notebook.functions").exception("the call failed", exc_info=raised.value)
    collected, stderr = handlers
    places = [*errors, *("\n".join(h.lines) for h in collected), stderr.getvalue()]
    assert "using [REDACTED]" in "\n".join(collected[0].lines)
    assert "no key" in errors[0] and "[REDACTED]" in errors[0]
    assert [p[:300] for p in places if token in p] == []
    reliability.note(
        "Secrets",
        "a secret-named variable's value in `log` lines (text and JSON) and in expression errors (a KeyError "
        "naming it, int() of it) that end the call",
        f"absent from the FunctionCallError (message, info, formatted traceback) and from every handler of the "
        f"root logger and agl_notebook's loggers, and stderr: {len(places)} places",
        secrets_found=0,
        places_searched=len(places),
    )


async def test_a_secret_never_arrives_at_another_host_or_outside_the_base_path(
    reliability: ReliabilityNotes,
) -> None:
    secret = "tok-" + secrets.token_hex(12)
    servers: Any = serve()
    other: Any = serve()
    good, evil = next(servers), next(other)
    try:
        agent = load_agent(
            {
                "profiles": {
                    "orders": {
                        "baseUrl": good.base_url + "/v1",
                        "headers": {"Authorization": {"env": "ORDERS_TOKEN", "prefix": "Bearer "}},
                    }
                },
                "functions": {
                    "get": {
                        "args": {"orderId": {"type": "str"}},
                        "commands": [{"api": {"profile": "orders", "path": "{ f'/orders/{orderId}' }"}}],
                        "onError": [{"return": "{ {'type': exc.type, 'message': exc.message} }"}],
                    }
                },
            },
            environ={"ORDERS_TOKEN": secret},
        )
        port = evil.base_url.rsplit(":", 1)[1].split("/")[0]
        escapes = [
            "../../admin",
            "../..",
            "%2e%2e/%2E%2E/admin",
            "..%2F..%2Fadmin",
            "x/..%2f..%2f..%2fadmin",
            "%252e%252e/%252e%252e/admin",
            ".%2e/.%2e/admin",
            "..\\..\\admin",
            "a/../../../admin",
            f"x/../../..//127.0.0.1:{port}/api",
            "1?apikey=stolen",
            "1#fragment",
            "1\r\nHost: evil",
        ]
        for order_id in escapes:
            result: Any = await agent.call("get", {"orderId": order_id}, run=Run())
            assert [r.path for r in (*good.received, *evil.received)] == [], order_id
            assert result["type"] == "ApiError", (order_id, result)
        # A path whose dot segments stay under the base path goes there, sent and shown as resolved.
        events: list[Any] = []
        await agent.call("get", {"orderId": "a/../ORD-1"}, run=Run(on_event=events.append))
        assert [r.path for r in good.received] == ["/api/v1/orders/ORD-1"]
        assert evil.received == []
        assert f"{good.base_url}/v1/orders/ORD-1" in repr(events)
    finally:
        servers.close()
        other.close()
    reliability.note(
        "Secrets",
        f"{len(escapes)} paths from a model-like argument in an f-string path: '..' and '.%2e' segments, %2e%2e, "
        "%2F, double-encoded dots, backslashes, '?', '#', a CRLF, another authority after '//'",
        "each an ApiError before the secret is read; two real servers on 127.0.0.1 received nothing; a path whose "
        "'..' stays under the base path arrives there, resolved as shown",
        secrets_found=0,
    )


def test_a_real_kernel_saves_no_secret_of_a_question_an_approval_or_a_function_error(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    from tests.support.kernel_harness import Kernel

    token = "svc-" + secrets.token_hex(12)
    kernel = Kernel(cwd=tmp_path, env={"MY_SERVICE_TOKEN": token, "PYTHONPATH": str(ROOT)})
    try:
        kernel.run(
            "import os\nfrom agl_notebook.notebook.terminal import WidgetTerminal\n"
            "token = os.environ['MY_SERVICE_TOKEN']"
        )
        asked = kernel.execute(
            "from agl_notebook.screens import Screen, ChoiceInput\n"
            "answer = await WidgetTerminal().ask(\n"
            "    Screen(f'Use {token}?', [ChoiceInput(f'Key {token}', [token, 'other'])])\n)"
        )
        kernel.wait_for(lambda: any("fields" in kernel.widgets[c] for c in kernel.widget_ids("AnyModel")))
        (form,) = [c for c in kernel.widget_ids("AnyModel") if "fields" in kernel.widgets[c]]
        drawn = json.dumps(kernel.widgets[form])
        kernel.submit_form(form, [kernel.widgets[form]["fields"][0]["options"][0]])
        assert kernel.wait_reply(asked)["content"]["status"] == "ok"
        kernel.run("assert answer == token, answer")  # the option the scrubbed one stands for
        failed = kernel.execute(
            "from agl_notebook import Run\nfrom agl_notebook.functions import load_agent\n"
            "agent = load_agent({'functions': {'main': {'args': {'t': {}}, 'commands': [{'return': '{ int(t) }'}]}}})\n"
            "await agent.call('main', {'t': token}, run=Run())"
        )
        reply = kernel.wait_reply(failed)["content"]
        assert reply["status"] == "error" and reply["ename"] == "FunctionCallError"
        saved = json.dumps([kernel.final_outputs(asked), kernel.final_outputs(failed), reply])
    finally:
        kernel.close()
    assert "[REDACTED]" in saved and "[REDACTED]" in drawn
    where = [saved[max(0, i - 300) : i + 60] for i in range(len(saved)) if saved.startswith(token, i)]
    assert where == [] and token not in drawn
    reliability.note(
        "Secrets",
        "a secret-named variable's value in a question's text and options outside a step, and in a JSON function's "
        "expression error, in a real kernel",
        "absent from the question form's widget state, the cell's saved outputs and the FunctionCallError traceback",
        secrets_found=0,
        places_searched=3,
    )
