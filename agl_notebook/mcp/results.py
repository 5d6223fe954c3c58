"""What goes between the agent and an MCP tool: its arguments checked against the schema, its result as text.

Arguments are checked with `jsonschema` (imported with the first check) before ``call_tool``; the problems go back to
the agent as a payload's do, each naming its field path. A result's content becomes the text the agent reads:
text as it is; an image as an `Image` inside the tool_result (`ToolText`), or, when the API would refuse it (a media
type it does not take, over its limits), a line saying so; an embedded text resource as its text; structured
content, when no text came with it, as JSON. Audio, which no backend here can send, makes the call an error result
that says so. A result the SDK finds breaking the tool's output schema is an error result naming the tool.
"""

from __future__ import annotations

import copy
import functools
import html
import json
from collections.abc import Callable, Sequence
from typing import Any

from .._canonical import canonical_json
from ..errors import InputError
from ..media import Image, Media
from ..payloads import JsonObject, PayloadSpec
from ..transcript import ToolText
from .listing import OfferedTool

MAX_RESULT_CHARS = 200_000
"""The most characters of one result the agent reads; the rest is cut, and the cut said."""
MAX_PROBLEMS = 20
"""The most schema problems told to the agent for one call."""


def argument_checker(tool: OfferedTool) -> Callable[[JsonObject], tuple[Any, tuple[str, ...]]]:
    """The loop's ``validate`` for ``tool``: the arguments as they came, or the problems found."""
    validator = _validator(canonical_json(tool.input_schema))

    def validate(arguments: JsonObject) -> tuple[Any, tuple[str, ...]]:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
        problems = tuple(
            f"{'.'.join(str(p) for p in e.absolute_path) or '(the arguments)'}: {e.message}"
            for e in errors[:MAX_PROBLEMS]
        )
        if len(errors) > MAX_PROBLEMS:
            problems += (f"... and {len(errors) - MAX_PROBLEMS} more.",)
        return arguments, problems

    return validate


def payload_spec(tool: OfferedTool) -> PayloadSpec:
    """``tool``'s arguments as a payload an approval shows and checks (an edit is checked against its schema)."""
    check = argument_checker(tool)

    def validate(data: Any, path: str, problems: list[str]) -> Any:
        arguments, found = check(data)
        problems.extend(found)
        return copy.deepcopy(arguments)

    return PayloadSpec(dict, tool.input_schema, validate)


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    from jsonschema import validators  # type: ignore[import-untyped]  # loaded with the first MCP tool checked

    schema = json.loads(schema_json)
    return validators.validator_for(schema)(schema)


def result_text(tool: OfferedTool, result: Any, secrets: Sequence[str] = ()) -> tuple[str, bool]:
    """An `mcp.types` CallToolResult as the text the agent reads, and whether it is an error result.

    Its images travel with the text, a `ToolText`. The text is scrubbed of ``secrets`` (the server's own, given to
    it) and of the kernel's, block by block and across two blocks, before it is cut.
    """
    parts: list[str] = []
    images: list[Media] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            where = f"the result of MCP tool {tool.name!r}: image {len(images) + 1}"
            try:
                image = Image.from_base64(block.data, media_type=block.mime_type, where=where)
                image.check(where)
            except InputError as e:  # the API would refuse it: the agent reads why instead
                parts.append(f"[image: {block.mime_type}, {_decoded_size(block.data):,} bytes, not sent: {e}]")
            else:
                images.append(image)
        elif kind == "audio":
            return (
                f"The tool `{tool.name}` returned audio ({block.mime_type}), which agl_notebook cannot send to the "
                "model; ask for a text form of the answer if the tool has one.",
                True,
            )
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(text)
            else:
                parts.append(f"[resource {resource.uri}: {getattr(resource, 'mime_type', None) or 'binary'} data]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[content of type {kind!r} left out]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(_scrubbed(parts, secrets))
    if len(text) > MAX_RESULT_CHARS:
        text = f"{text[:MAX_RESULT_CHARS]}\n[cut: {len(text) - MAX_RESULT_CHARS:,} more characters]"
    return (ToolText(text, tuple(images)) if images else text), bool(result.is_error)


def output_schema_broken(tool: OfferedTool, message: str, secrets: Sequence[str] = ()) -> tuple[str, bool]:
    """The error result of a call whose result the SDK found breaking the tool's output schema."""
    message = _scrubbed([message], secrets)[0][:500]  # the SDK's message quotes the result
    return (
        f"The result of `{tool.name}` does not fit the tool's own output schema, so it was not used: {message}",
        True,
    )


def _scrubbed(parts: list[str], secrets: Sequence[str]) -> list[str]:
    """Each text scrubbed, and a secret that one ends and the next begins (as written, JSON- or HTML-escaped) too.

    A server's blocks are joined with a newline, so a secret split across two is whole in neither, nor in the join.
    """
    from .._secrets import REDACTED, scrub_text, secrets_from_environment

    known = (*secrets, *secrets_from_environment())
    mark = "\x00"  # one scrub of the blocks joined by a character no secret holds: 100,000 blocks take 0.1 s
    if len(parts) > 1 and not any(mark in part for part in parts):
        parts = scrub_text(mark.join(parts), known).split(mark)
    else:
        parts = [scrub_text(part, known) for part in parts]
    spellings = {s for secret in known for s in (secret, json.dumps(secret)[1:-1], html.escape(secret)) if len(s) > 1}
    for i in range(len(parts) - 1):
        before, after = parts[i], parts[i + 1]
        for spelled in spellings:
            # No spelling is whole in either block now: one found across their meeting point crosses it.
            tail, head = before[-(len(spelled) - 1) :], after[: len(spelled) - 1]
            at = (tail + head).find(spelled)
            if at >= 0:
                cut = len(tail) - at
                before, after = before[:-cut] + REDACTED, after[len(spelled) - cut :]
        parts[i], parts[i + 1] = before, after
    return parts


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=") if data else 0
