"""The one scrubber finds a secret in every spelling an encoder gives it, whether or not the text around it parses;
and questions and approvals asked outside a step are drawn, saved and printed scrubbed."""

from __future__ import annotations

import asyncio
import html
import json
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from ipywidgets.widgets.widget import _instances

from agl_notebook._secrets import REDACTED, scrub, scrub_text
from agl_notebook.notebook import view as view_module
from agl_notebook.screens import ChoiceInput, Screen, TextInput
from agl_notebook.terminals import ConsoleTerminal
from tests.notebook.test_approval_form import request
from tests.support.widgets import FakeDisplay, from_browser

SECRET = 'p/4"x<&>y é😀\\z+q'  # every character an encoder escapes: / " < & > space é, a non-BMP one, \ and +


def every_char_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else json.dumps(c)[1:-1] for c in text)


SPELLINGS = {
    "raw": SECRET,
    "json": json.dumps(SECRET, ensure_ascii=False)[1:-1],
    "json ascii": json.dumps(SECRET)[1:-1],
    "json with \\/": json.dumps(SECRET)[1:-1].replace("/", "\\/"),
    "json in json": json.dumps(json.dumps(SECRET)[1:-1])[1:-1],
    "every char \\u": every_char_escaped(SECRET),
    "upper-case \\u": every_char_escaped(SECRET).upper().replace("\\U", "\\u"),
    "html": html.escape(SECRET),
    "html numeric": "".join(f"&#{ord(c)};" for c in SECRET),
    "html hex": "".join(f"&#x{ord(c):X};" for c in SECRET),
    "url": quote(SECRET, safe=""),
    "url plus": quote_plus(SECRET),
    "url keeping /": quote(SECRET),
    "mixed": "".join(
        (c, f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else c, html.escape(c), quote(c, safe=""))[i % 4]
        for i, c in enumerate(SECRET)
    ),
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
@pytest.mark.parametrize(
    "around",
    ["{}", '\ufeff{{"a": "{}"}}', '{{"a": "{}"}}\nserved by nginx', "<p>{}</p>", "x={}&y=1", '{{"cut": "{}'],
    ids=["alone", "behind a BOM", "before a notice", "in HTML", "in a query", "cut short"],
)
def test_every_spelling_is_scrubbed_in_text_that_need_not_parse(spelling: str, around: str) -> None:
    text = around.format(spelling)
    clean = scrub_text(text, [SECRET])
    assert clean == around.format(REDACTED)


QUOTED = "k'ey\"<\x01\x7f\U0010ffff é/9"  # both quotes, control characters, a non-BMP character repr escapes
REPR_SPELLINGS = {
    "repr": repr(QUOTED)[1:-1],
    "ascii": ascii(QUOTED)[1:-1],
    "repr of repr": repr(repr(QUOTED)[1:-1])[1:-1],
    "repr in json": json.dumps(repr(QUOTED)[1:-1])[1:-1],
    "repr in html": html.escape(repr(QUOTED)[1:-1]),
}


@pytest.mark.parametrize("spelling", REPR_SPELLINGS.values(), ids=REPR_SPELLINGS.keys())
def test_a_secret_quoted_by_pythons_repr_is_scrubbed(spelling: str) -> None:
    # An error message quoting a value with !r (int()'s ValueError, a KeyError) escapes ' as \' and more.
    text = f"invalid literal for int() with base 10: '{spelling}'"
    assert scrub_text(text, [QUOTED]) == f"invalid literal for int() with base 10: '{REDACTED}'"
    assert scrub_text(r"it\'s \x41 and \U0001f600", [QUOTED]) == r"it\'s \x41 and \U0001f600"


def test_json_stays_json_and_ordinary_escapes_are_left_alone() -> None:
    text = json.dumps({"a": f"see {SECRET}", "b": "line\nbreak \\u0041 100% &amp; more", "c": "p/4"})
    clean = scrub_text(text, [SECRET])
    assert json.loads(clean) == {"a": f"see {REDACTED}", "b": "line\nbreak \\u0041 100% &amp; more", "c": "p/4"}
    assert scrub({"k": [json.dumps(SECRET).replace("/", "\\/")]}, [SECRET]) == {"k": [f'"{REDACTED}"']}


def test_a_secret_inside_another_goes_whole() -> None:
    assert scrub_text("tok-1234-extra and tok-1234", ["tok-1234", "tok-1234-extra"]) == f"{REDACTED} and {REDACTED}"


# Questions and approvals outside a step ----------------------------------------------------------------------


class StandaloneDisplay(FakeDisplay):
    def update(self, bundle: dict[str, Any], *, metadata: dict[str, Any] | None = None, raw: bool) -> None:
        self.updates.append((bundle, metadata or {}))


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    planted = 'svc-<b>&"' + "d4e5f6a7b8c9"
    monkeypatch.setenv("MY_SERVICE_TOKEN", planted)
    return planted


def _leaks(text: str, secret: str) -> bool:
    return secret in text or html.escape(secret) in text or json.dumps(secret)[1:-1] in text


async def test_a_question_outside_a_step_is_drawn_and_left_scrubbed(
    token: str, sent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython.display

    display = StandaloneDisplay()
    monkeypatch.setattr(IPython.display, "display", display)
    screen: Screen[Any] = Screen(f"Use {token}?", [ChoiceInput(f"Key {token}", [token, "other"])])
    task = asyncio.create_task(view_module.standalone_ask(screen))
    await asyncio.sleep(0)
    ((bundle, _),) = display.shown
    widget = _instances[bundle[WIDGET_MIME]["model_id"]]
    drawn = json.dumps([widget.title, widget.fields, bundle], ensure_ascii=False)
    assert not _leaks(drawn, token) and REDACTED in widget.title
    shown_option = widget.fields[0]["options"][0]
    assert shown_option == REDACTED
    from_browser(widget, {"kind": "submit", "attempt": 1, "values": [shown_option]})
    assert await asyncio.wait_for(task, 5) == [token]  # the option the scrubbed one stands for
    ((final, _),) = display.updates
    assert final["text/plain"] == f"Question: Use {REDACTED}?\nAnswer: {REDACTED}"
    assert not _leaks(json.dumps(final), token) and not _leaks(json.dumps(sent, default=repr), token)


async def test_an_approval_outside_a_step_is_drawn_scrubbed_and_an_edit_keeps_what_was_not_changed(
    token: str, sent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython.display

    display = StandaloneDisplay()
    monkeypatch.setattr(IPython.display, "display", display)
    asked = {"place": {"city": token, "zip": "10115"}, "days": 2, "units": ["C"]}
    task = asyncio.create_task(view_module.standalone_approval(request(asked)))
    await asyncio.sleep(0)
    ((bundle, _),) = display.shown
    widget = _instances[bundle[WIDGET_MIME]["model_id"]]
    assert widget.arguments["place"]["city"] == REDACTED
    edited = json.loads(json.dumps(widget.arguments))
    edited["days"] = 3
    from_browser(widget, {"kind": "edit", "attempt": 1, "arguments": edited})
    decision = await asyncio.wait_for(task, 5)
    assert decision.arguments == {**asked, "days": 3}  # the city the person left alone is the original
    ((final, _),) = display.updates
    wire = json.dumps([bundle, final, widget.arguments, widget.fields, sent], default=repr)
    assert not _leaks(wire, token)


async def test_the_console_prints_questions_and_calls_scrubbed(
    token: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(["", "fine", "y"])
    monkeypatch.setattr("builtins.input", lambda prompt="": (print(prompt, end=""), next(answers))[1])
    terminal = ConsoleTerminal()
    monkeypatch.setattr(TextInput, "parse", lambda self, raw: _refuse(raw, token))
    assert await terminal.ask(Screen(f"Say {token}", [TextInput(f"Label {token}", str)])) == "fine"
    decision = await terminal.ask_approval(request({"place": {"city": token, "zip": "1"}, "days": 1, "units": []}))
    assert decision.decision == "approve"
    out = capsys.readouterr()
    assert REDACTED in out.out and REDACTED in out.err
    assert not _leaks(out.out + out.err, token)


def _refuse(raw: str, token: str) -> str:
    from agl_notebook.errors import InputError

    if not raw:
        raise InputError(f"empty; type something other than {token}")
    return raw


WIDGET_MIME = view_module.WIDGET_MIME


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from tests.support.widgets import recording_comms

    return recording_comms(monkeypatch)


@pytest.mark.parametrize("secret", [SECRET, "sk-plain-secret-0042", "two words"])
@pytest.mark.parametrize("around", ["", "plain words ", "a \\n escape ", "fish & chips ", "100% ", "1+1 "])
def test_the_shortcut_for_text_with_no_escape_finds_what_the_full_pattern_finds(secret: str, around: str) -> None:
    """Text holding no character an escape begins with is scrubbed by ``str.replace``: the same as the regex."""
    from agl_notebook._secrets import _patterns

    (spellings,) = _patterns((secret,))
    for text in (f"{around}{secret} and {secret}", f"{around}{quote_plus(secret)}", f"{around}{html.escape(secret)}"):
        assert spellings.sub(text) == spellings.pattern.sub(REDACTED, text), text
    assert spellings.sub(f"{around}{secret}").count(REDACTED) == 1


HEADER_VALUE = "hv" + "9" * 14  # built here: no header value is written whole in the repository


@pytest.mark.parametrize(
    "written",
    [
        f"Authorization: Bearer {HEADER_VALUE}",
        f"authorization:bearer {HEADER_VALUE}",
        f"AUTHORIZATION: BEARER {HEADER_VALUE}",
        f"x-api-key: {HEADER_VALUE}",
        f"X-Api-Key:{HEADER_VALUE}",
        json.dumps({"x-api-key": HEADER_VALUE}),
        json.dumps({"x-api-key": HEADER_VALUE}, separators=(",", ":")),  # compact, as a record is searched
        json.dumps(json.dumps({"x-api-key": HEADER_VALUE}, separators=(",", ":"))),
        repr({"x-api-key": HEADER_VALUE}),
        json.dumps(json.dumps({"X-API-KEY": HEADER_VALUE})),  # the header inside a JSON string
    ],
)
def test_an_auth_header_written_out_loses_its_value_in_any_case_and_quoting(written: str) -> None:
    text = "before " * 30_000 + written + " after"  # long: the markers are found without a regex at every character
    scrubbed = scrub_text(text)
    assert HEADER_VALUE not in scrubbed
    assert scrubbed.count(REDACTED) == 1
    assert scrubbed.startswith("before before") and scrubbed.endswith(" after")


def test_header_values_are_replaced_alone_each_once_and_json_stays_json() -> None:
    other = "ov" + "8" * 14
    record = json.dumps({"headers": {"x-api-key": HEADER_VALUE, "authorization": f"Bearer {other}"}, "n": 1})
    scrubbed = scrub_text(f"x-api-key: {HEADER_VALUE} and Bearer {other}")
    assert scrubbed == f"x-api-key: {REDACTED} and Bearer {REDACTED}"
    assert json.loads(scrub_text(record)) == {
        "headers": {"x-api-key": REDACTED, "authorization": f"Bearer {REDACTED}"},
        "n": 1,
    }
    assert scrub_text("a bearer of news, x-api-key missing") == "a bearer of news, x-api-key missing"
