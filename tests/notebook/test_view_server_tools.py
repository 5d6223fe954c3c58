"""Server tool rows and citations in the step view, from a hostile record: escaped, scrubbed, and only http(s) links.

A record is data a notebook carries (anyone may have written it), so each value a server tool block or a citation
holds is drawn escaped, scrubbed of secrets in every spelling, and a URL becomes a link only when it is ``http`` or
``https``: ``javascript:``, ``data:``, a scheme in capitals, a URL with a space or a control character are shown as
text. The live drawing and the final one go through the same renderer; both are checked.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from agl_notebook.events import ReplyBlockKept, StepFinished, StepStarted, TextCited
from agl_notebook.models.prices import RecordedCost
from agl_notebook.notebook.render import StepTrace, render_html, render_text
from agl_notebook.notebook.server_view import safe_url
from agl_notebook.payloads import JsonObject
from agl_notebook.server_tools import scripted_code_execution, scripted_fetch, scripted_search
from tests.notebook.test_view_thinking import assert_no_secret, planted, spellings

HOSTILE_URLS = [
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    " javascript:alert(2)",
    "data:text/html,<script>alert(3)</script>",
    "vbscript:msgbox(4)",
    "https://ok.test/a b",
    "https://ok.test/\nnext",
    "//evil.test/no-scheme",
    "https:/no-host",
]


class Links(HTMLParser):
    """Every href and every script or event-handler attribute in a drawing."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "iframe", "img", "object", "embed"):
            self.scripts.append(tag)
        for name, value in attrs:
            if name == "href":
                self.hrefs.append(value or "")
            if name.startswith("on"):
                self.scripts.append(name)


def drawn(trace: StepTrace, secrets: tuple[str, ...]) -> list[str]:
    return [render_html(trace, secrets), render_html(trace, secrets, live=True)]


def hostile_trace(secret: str = "") -> StepTrace:
    trace = StepTrace("researcher")
    trace.apply(StepStarted("researcher", "go", "anthropic:claude-sonnet-5-5"))
    results = [(f"<script>alert('{i}')</script>{url}", url) for i, url in enumerate(HOSTILE_URLS)]
    results.append(('Fine " onmouseover="alert(5)', 'https://ok.test/?q="><svg/onload=alert(6)>'))
    results.append((f"title with {secret}", f"https://ok.test/{secret}"))
    for block in scripted_search("srvtoolu_<1>", "<b>query</b>", results):
        trace.apply(ReplyBlockKept(block))
    for block in scripted_fetch("s2", "javascript:alert(7)", "<img src=x onerror=alert(8)>", "never drawn " + secret):
        trace.apply(ReplyBlockKept(block))
    for block in scripted_code_execution("s3", f"echo '<script>{secret}</script>'", stdout=f"<b>{secret}</b>"):
        trace.apply(ReplyBlockKept(block))
    trace.apply(ReplyBlockKept({"type": "web_search_tool_result", "tool_use_id": "s9", "content": {"x": "<i>"}}))
    citations: tuple[JsonObject, ...] = (
        {"type": "web_search_result_location", "url": "javascript:alert(9)", "title": "<svg onload=alert(10)>"},
        {
            "type": "web_search_result_location",
            "url": "https://ok.test/cited",
            "title": "Cited <em>",
            "cited_text": "<q>",
        },
        {
            "type": "char_location",
            "document_index": 0,
            "document_title": "<doc>",
            "start_char_index": 1,
            "end_char_index": 9,
        },
    )
    trace.apply(TextCited("The claim.", citations))
    trace.apply(StepFinished("researcher", None, 1))
    return trace


def test_safe_url_takes_http_and_https_with_a_host_only() -> None:
    assert safe_url("https://ok.test/x?y=1") == "https://ok.test/x?y=1"
    assert safe_url("HTTP://ok.test") == "HTTP://ok.test"
    for url in HOSTILE_URLS:
        assert safe_url(url) is None, url


def test_a_hostile_records_titles_and_urls_are_escaped_and_only_http_links_are_links() -> None:
    trace = hostile_trace()
    for page in drawn(trace, ()):
        parser = Links()
        parser.feed(page)
        assert parser.scripts == [], "no script, image or event handler from the record"
        assert all(h.startswith(("https://ok.test", "HTTPS://", "http://")) for h in parser.hrefs), parser.hrefs
        assert "https://ok.test/cited" in parser.hrefs
        # The quote-breaking URL is a link to itself, its quote escaped inside the attribute.
        assert 'href="https://ok.test/?q=&quot;&gt;&lt;svg/onload=alert(6)&gt;"' in page
        for url in HOSTILE_URLS:  # each shown as text, escaped
            assert f"<code>{html.escape(url)}</code>" in page, url
        assert "&lt;script&gt;alert(&#x27;0&#x27;)&lt;/script&gt;" in page
        assert "Fetched</b>: &lt;img src=x onerror=alert(8)&gt; <code>javascript:alert(7)</code>" in page
        assert "never drawn" not in page, "a fetched page's text is not drawn"
        assert "encrypted" not in page
        # The citations: numbered, the javascript: one a number with no link, the document named by its location.
        assert re.search(r'<span class="agl-citation" title="&lt;svg onload=alert\(10\)&gt;">\[1\]</span>', page)
        assert 'class="agl-citation" href="https://ok.test/cited"' in page
        assert "&lt;doc&gt; · document 1, characters 1–9" in page
        # A result whose call is not in the reply is drawn on its own, its JSON escaped.
        assert "&lt;i&gt;" in page
    plain = render_text(trace, ())
    assert "web_search (run by Anthropic): ok" in plain and "web_fetch (run by Anthropic): ok" in plain
    assert "source [1]: <svg onload=alert(10)> (javascript:alert(9))" in plain  # text/plain: shown, never a link


@pytest.mark.parametrize("form", ["plain", "json-escaped", "html-escaped", "html-numeric"])
def test_a_secret_in_a_search_result_or_code_output_is_scrubbed_in_every_view(form: str) -> None:
    secret = planted()
    trace = hostile_trace(spellings(secret)[form])
    for page in [*drawn(trace, (secret,)), render_text(trace, (secret,))]:
        assert_no_secret(page, secret)
    page = render_html(trace, (secret,))
    if form == "plain":  # a URL that held a secret is shown as text, never a link carrying it
        assert "https://ok.test/[REDACTED]" in page and 'href="https://ok.test/[REDACTED]' not in page


def test_code_execution_shows_not_priced_beside_the_recorded_cost() -> None:
    trace = hostile_trace()
    trace.take_cost(RecordedCost(0.0123, "2026-12-01"), 1000)
    assert "code execution not priced (billed by container time)" in render_html(trace, ())
    assert "code execution not priced" in render_text(trace, ())
    searched_only = StepTrace("r")
    for block in scripted_search("s1", "q", [("T", "https://ok.test")]):
        searched_only.apply(ReplyBlockKept(block))
    searched_only.take_cost(RecordedCost(0.0123, "2026-12-01"), 1000)
    assert "not priced" not in render_html(searched_only, ())


def test_an_error_result_and_a_failed_command_are_drawn_as_such() -> None:
    trace = StepTrace("r")
    for block in scripted_search("s1", "q", [], error="max_uses_exceeded"):
        trace.apply(ReplyBlockKept(block))
    for block in scripted_code_execution("s2", "exit 3", stderr="boom", return_code=3):
        trace.apply(ReplyBlockKept(block))
    trace.apply(ReplyBlockKept({"type": "server_tool_use", "id": "s3", "name": "web_fetch", "input": {"url": "u"}}))
    page, plain = render_html(trace, ()), render_text(trace, ())
    assert "error: max_uses_exceeded" in page and "<code>max_uses_exceeded</code>" in page
    assert "exit code 3" in page and "boom" in page
    assert "web_fetch (run by Anthropic): no result" in plain
    assert "running…" in render_html(trace, (), live=True)  # live, a call whose result has not come yet


def test_a_url_that_held_a_secret_draws_the_same_live_and_replayed_from_its_scrubbed_record() -> None:
    # Live, the URL holds the secret and is shown as text; the record keeps it scrubbed, "[REDACTED]" in its place,
    # and the replay must draw it the same (nbval compares the two), never as a link.
    secret = planted()
    live = render_html(hostile_trace(secret), (secret,))
    replayed = render_html(hostile_trace("[REDACTED]"), (secret,))
    assert 'href="https://ok.test/[REDACTED]' not in replayed
    assert replayed == live
