"""Server tool blocks, citations and the container for the fake Anthropic API, built from the SDK's own models.

Every block and event here is an ``anthropic.types`` model dumped to JSON (``to_dict(mode="json")``), its ``type``
put first as the API sends it, so the stream's format is the SDK's. The blocks go into
`tests.support.anthropic_api.reply` as `Opaque` blocks: their start JSON, their deltas, and ``kept``, the JSON the
library must send back on every later turn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.support.anthropic_api import MESSAGE_STOP, Event, Opaque, _api_order, message_start, opaque, reply


def _dumped(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = _api_order(model.to_dict(mode="json"))
    return data


def server_call(id: str, name: str, tool_input: dict[str, Any]) -> Opaque:
    """A ``server_tool_use`` block: an empty input at its start, the input streamed as one ``input_json_delta``."""
    from anthropic.types import InputJSONDelta, ServerToolUseBlock

    start = _dumped(ServerToolUseBlock(type="server_tool_use", id=id, name=name, input={}))  # type: ignore[arg-type]
    delta = _dumped(InputJSONDelta(type="input_json_delta", partial_json=json.dumps(tool_input)))
    return opaque(start, delta, kept={**start, "input": tool_input})


def search_result(tool_use_id: str, results: list[tuple[str, str]]) -> Opaque:
    """A ``web_search_tool_result`` block holding ``results`` (title, url), each with encrypted content."""
    from anthropic.types import WebSearchResultBlock, WebSearchToolResultBlock

    block = WebSearchToolResultBlock(
        type="web_search_tool_result",
        tool_use_id=tool_use_id,
        content=[
            WebSearchResultBlock(
                type="web_search_result", title=title, url=url, encrypted_content=f"EqgfEnc{i}+fake==", page_age=None
            )
            for i, (title, url) in enumerate(results)
        ],
    )
    return opaque(_dumped(block))


def search_error(tool_use_id: str, code: str) -> Opaque:
    """A ``web_search_tool_result`` whose content is an error."""
    from anthropic.types import WebSearchToolResultBlock, WebSearchToolResultErrorObject

    content = WebSearchToolResultErrorObject(type="web_search_tool_result_error", error_code=code)  # type: ignore[arg-type]
    return opaque(
        _dumped(WebSearchToolResultBlock(type="web_search_tool_result", tool_use_id=tool_use_id, content=content))
    )


def fetch_result(tool_use_id: str, url: str, title: str, text: str) -> Opaque:
    """A ``web_fetch_tool_result`` block: the page as a plain-text document."""
    from anthropic.types import DocumentBlock, PlainTextSource, WebFetchBlock, WebFetchToolResultBlock

    page = DocumentBlock(
        type="document",
        title=title,
        citations=None,
        source=PlainTextSource(type="text", media_type="text/plain", data=text),
    )
    block = WebFetchToolResultBlock(
        type="web_fetch_tool_result",
        tool_use_id=tool_use_id,
        content=WebFetchBlock(type="web_fetch_result", url=url, retrieved_at="2026-12-01T10:00:00Z", content=page),
    )
    return opaque(_dumped(block))


def bash_result(tool_use_id: str, stdout: str, stderr: str = "", return_code: int = 0) -> Opaque:
    """A ``bash_code_execution_tool_result`` block with the command's output."""
    from anthropic.types import BashCodeExecutionResultBlock, BashCodeExecutionToolResultBlock

    block = BashCodeExecutionToolResultBlock(
        type="bash_code_execution_tool_result",
        tool_use_id=tool_use_id,
        content=BashCodeExecutionResultBlock(
            type="bash_code_execution_result", stdout=stdout, stderr=stderr, return_code=return_code, content=[]
        ),
    )
    return opaque(_dumped(block))


def web_citation(url: str, title: str, cited_text: str) -> dict[str, Any]:
    """A ``web_search_result_location`` citation, as a ``citations_delta`` carries it."""
    from anthropic.types import CitationsWebSearchResultLocation

    return _dumped(
        CitationsWebSearchResultLocation(
            type="web_search_result_location",
            url=url,
            title=title,
            cited_text=cited_text,
            encrypted_index="Eo8fIdx+fake",
        )
    )


def cited_text(text: str, *citations: dict[str, Any]) -> Opaque:
    """A text block that starts with empty ``citations``, gets each citation as a ``citations_delta``, then its text
    as a ``text_delta``: the order the API streams a cited passage in. Kept as ``{"type", "text", "citations"}``."""
    from anthropic.types import CitationsDelta, TextBlock, TextDelta

    start = _dumped(TextBlock(type="text", text="", citations=[]))
    deltas: list[dict[str, Any]] = [{"type": "citations_delta", "citation": c} for c in citations]
    for delta in deltas:  # the SDK reads each as its own CitationsDelta (the nested citation keeps the API's order)
        assert CitationsDelta.model_validate(delta).citation.type == delta["citation"]["type"]
    deltas.append(_dumped(TextDelta(type="text_delta", text=text)))
    return opaque(start, *deltas, kept={"type": "text", "text": text, "citations": list(citations)})


def message_delta_with(
    stop_reason: str, *, searches: int = 0, fetches: int = 0, container: str | None = None, output_tokens: int = 5
) -> Event:
    """A ``message_delta`` with the searches and fetches Anthropic ran and the container the reply used."""
    from anthropic.types import Container, MessageDeltaUsage, RawMessageDeltaEvent, ServerToolUsage
    from anthropic.types.raw_message_delta_event import Delta

    event = RawMessageDeltaEvent(
        type="message_delta",
        delta=Delta(
            stop_reason=stop_reason,  # type: ignore[arg-type]
            stop_sequence=None,
            container=Container(id=container, expires_at=datetime(2026, 12, 2, 12, tzinfo=UTC)) if container else None,
        ),
        usage=MessageDeltaUsage(
            output_tokens=output_tokens,
            server_tool_use=ServerToolUsage(web_search_requests=searches, web_fetch_requests=fetches),
        ),
    )
    return "message_delta", _dumped(event)


def server_reply(
    *blocks: Any, stop_reason: str, searches: int = 0, fetches: int = 0, container: str | None = None
) -> list[Event]:
    """`reply` with its ``message_delta`` replaced by one that counts server tool use and names the container."""
    events = reply(*blocks, stop_reason=stop_reason)
    assert events[-2][0] == "message_delta" and events[-1] == MESSAGE_STOP
    events[-2] = message_delta_with(stop_reason, searches=searches, fetches=fetches, container=container)
    return events


__all__ = [
    "bash_result",
    "cited_text",
    "fetch_result",
    "message_delta_with",
    "message_start",
    "search_error",
    "search_result",
    "server_call",
    "server_reply",
    "web_citation",
]
