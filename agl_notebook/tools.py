"""Tools an agent can call, and the reporting tool it hands back a step's result through."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._fieldwise import Fieldwise
from .errors import InputError
from .media import Media
from .payloads import JsonObject, PayloadSpec, payload_spec

if TYPE_CHECKING:
    from .approvals import ApprovalPolicy  # loaded by the first tool that has one

P = TypeVar("P")

# The Messages API's rule for tool names; checked when the tool is built rather than when the API refuses it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_tool_name(name: object) -> bool:
    """Whether ``name`` is a valid tool name: 1 to 64 letters, digits, '_' or '-' (the Messages API's rule)."""
    return isinstance(name, str) and _TOOL_NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolResult(Fieldwise):
    """What a tool's handler returns to the agent."""

    text: str
    """What the agent reads back from the call."""
    rejected: bool = False
    """True tells the agent the call failed, False that it succeeded."""
    images: Sequence[Media] = ()
    """Images (or documents) returned beside the text (a chart, a screenshot): sent inside the tool_result, kept in
    the record."""

    def __post_init__(self) -> None:
        images = tuple(self.images) if isinstance(self.images, list | tuple) else (self.images,)
        for i, image in enumerate(images):
            if not isinstance(image, Media):
                raise InputError(f"ToolResult(images=...)[{i}]: expected an Image or a Document, not {image!r}.")
        object.__setattr__(self, "images", images)


@dataclass(frozen=True, eq=False, repr=False)
class Tool(Fieldwise, Generic[P]):
    """A tool an agent can call. Build it with `tool()`."""

    name: str
    """The name the agent calls it by, unique within a role."""
    description: str
    """The whole of what the agent reads to decide this is the tool it wants."""
    payload: type[P]
    """The dataclass the agent's arguments are checked against and built into."""
    handler: Callable[[P], Awaitable[ToolResult]] = field(repr=False, compare=False)
    """The coroutine function awaited with the built payload."""
    spec: PayloadSpec = field(repr=False, compare=False)
    """The compiled payload: its JSON Schema and validator."""
    approval: ApprovalPolicy = field(default=None, repr=False, compare=False)
    """Who decides whether a call runs: None (it runs), ``"ask"`` (a person) or a policy function; not part of the
    fingerprint (docs/roles-and-tools.md, "Approvals")."""
    strict: bool = False
    """Whether the API guarantees arguments that fit the schema (strict tool use); in the fingerprint only when True."""

    @property
    def input_schema(self) -> JsonObject:
        """The JSON Schema of the arguments, as the model reads it."""
        return self.spec.schema


@dataclass(frozen=True, eq=False, repr=False)
class ReportingTool(Fieldwise, Generic[P]):
    """The tool an agent reports a step's result through. Build it with `reporting_tool()`."""

    name: str
    """The name the agent calls it by, unique among the role's tools."""
    description: str
    """The whole of what the agent reads to decide this is the tool it wants."""
    payload: type[P]
    """The dataclass the step's result is returned as."""
    spec: PayloadSpec = field(repr=False, compare=False)
    """The compiled payload: its JSON Schema and validator."""
    strict: bool = False
    """Whether the API guarantees a payload that fits the schema (strict tool use); fingerprinted only when True."""

    @property
    def input_schema(self) -> JsonObject:
        """The JSON Schema of the payload, as the model reads it."""
        return self.spec.schema


def tool(
    name: str,
    description: str,
    payload: type[P],
    handler: Callable[[P], Awaitable[ToolResult]],
    *,
    approval: ApprovalPolicy = None,
    strict: bool = False,
) -> Tool[P]:
    """Build a tool an agent can call.

    Args:
        name: The name the agent calls it by, unique within a `Role`.
        description: The whole of what the agent reads to decide this is the tool it wants.
        payload: The dataclass the agent's arguments are checked against and built into.
        handler: The coroutine function awaited with the built payload; its `ToolResult` goes back to the agent.
        approval: Whether a call runs at once (None, the default), waits for a person to approve, edit or deny it
            (``"ask"``), or is decided per call by ``approval(payload, request)`` returning ``"approve"``,
            ``"deny"`` (or ``Deny(message)``) or ``"ask"``. Decided after the arguments pass validation, before the
            handler runs; recorded like answers; not part of the fingerprint.
        strict: Offer the tool with a strict schema, so the API guarantees arguments that fit it (strict tool
            use; the loop still validates them). Needs a backend that declares it (Claude does).

    Raises:
        InputError: An empty name or description, a name the Messages API would refuse, a payload that can't be
            saved as JSON, a handler that is not callable, an approval that is none of the above, or (strict) a
            payload field strict mode cannot express, named.
    """
    _check_name_and_description("tool", name, description)
    if not callable(handler):
        raise InputError(f"tool {name!r}: the handler must be an async function of the payload, not {handler!r}.")
    if inspect.isfunction(handler) and not inspect.iscoroutinefunction(handler):
        raise InputError(
            f"tool {name!r}: the handler {handler.__qualname__} must be an async function (async def) returning "
            "a ToolResult."
        )
    if approval is not None:
        from .approvals import check_policy

        check_policy(f"tool {name!r}", approval)
    spec = _spec("tool", name, payload)
    if _strict_flag("tool", name, strict):
        check_strict(f"tool {name!r}", spec.schema)
    return Tool(name, description, payload, handler, spec, approval, strict)


def with_report_instruction(system: str, tool_name: str, *, ends: str) -> str:
    """``system`` followed by how to hand back the result: call ``tool_name``, which ends ``ends``.

    The one wording of the instruction for roles and JSON functions. It is part of the system text, so of every
    recorded step's fingerprint: changing a character of it makes every recording stale.
    """
    head = f"{system.rstrip()}\n\n" if system.strip() else ""
    return f"{head}When you have the result, hand it back by calling the `{tool_name}` tool. Calling it ends {ends}."


def reporting_tool(name: str, description: str, payload: type[P], *, strict: bool = False) -> ReportingTool[P]:
    """Declare the tool an agent reports a step's result through.

    Args:
        name: The name the agent calls it by, unique among the role's tools.
        description: The whole of what the agent reads to decide this is the tool it wants.
        payload: The dataclass the step's result is returned as.
        strict: Offer it with a strict schema, so the API guarantees a payload that fits it (strict tool use).

    Raises:
        InputError: An empty name or description, a payload that can't be saved as JSON, or (strict) a payload
            field strict mode cannot express, named.
    """
    _check_name_and_description("reporting_tool", name, description)
    spec = _spec("reporting_tool", name, payload)
    if _strict_flag("reporting_tool", name, strict):
        check_strict(f"reporting_tool {name!r}", spec.schema)
    return ReportingTool(name, description, payload, spec, strict)


def _check_name_and_description(kind: str, name: object, description: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{kind}(): the name must be a non-empty string, not {name!r}.")
    if not _TOOL_NAME.fullmatch(name):
        raise InputError(
            f"{kind} {name!r}: a tool name may use only letters, digits, '_' and '-', at most 64 characters."
        )
    if not isinstance(description, str) or not description.strip():
        raise InputError(
            f"{kind} {name!r}: the description must be non-empty; it is the whole of what the agent reads to "
            "decide this is the tool it wants."
        )


def _spec(kind: str, name: str, payload: Any) -> PayloadSpec:
    try:
        return payload_spec(payload)
    except InputError as e:
        raise InputError(f"{kind} {name!r}: {e}") from None


def _strict_flag(kind: str, name: str, strict: object) -> bool:
    if not isinstance(strict, bool):
        raise InputError(f"{kind} {name!r}: strict takes True or False, not {strict!r}.")
    return strict


# Strict tool use (docs/roles-and-tools.md, "Strict tools"): the API compiles a strict schema into a grammar and
# takes only a subset of JSON Schema. This is the subset the installed SDK's own `transform_schema` keeps (what it
# drops it moves into the description, unenforced), plus ``default``, an annotation the API reads but does not
# enforce; a payload using anything else is refused here, naming the field, rather than by the API mid-run.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "description", "title", "default", "enum", "const", "anyOf", "allOf", "$ref", "$defs",
        "definitions", "properties", "required", "additionalProperties", "items", "minItems", "format",
    }
)  # fmt: skip
_STRICT_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
STRICT_TOOLS_PER_REQUEST = 20
"""The most strict tools one request may offer (the API's limit)."""
STRICT_OPTIONAL_PARAMETERS = 24
"""The most optional parameters across all strict schemas of one request (the API's limit)."""
STRICT_UNION_PARAMETERS = 16
"""The most parameters typed as a union (``anyOf`` or a list of types) across all strict schemas of a request."""


def check_strict(where: str, schema: JsonObject) -> None:
    """Raise an `InputError` naming the first field of ``schema`` strict mode cannot express, if any."""
    problems: list[str] = []
    _strict_walk(schema, "", schema, problems, ())
    if problems:
        raise InputError(
            f"{where} can't be strict: {problems[0]} Strict tool use takes a subset of JSON Schema (no fixed-length "
            "tuples, no numeric or length bounds, no patterns); drop strict=True or change the field "
            '(docs/roles-and-tools.md, "Strict tools").'
        )


def check_strict_request(where: str, schemas: list[tuple[str, JsonObject]]) -> None:
    """Raise an `InputError` when the strict tools of one request pass the API's per-request limits."""
    if len(schemas) > STRICT_TOOLS_PER_REQUEST:
        raise InputError(
            f"{where} offers {len(schemas)} strict tools; the API takes at most {STRICT_TOOLS_PER_REQUEST} per "
            "request. Make fewer of them strict."
        )
    optional = unions = 0
    for _, schema in schemas:
        o, u = _strict_counts(schema)
        optional, unions = optional + o, unions + u
    if optional > STRICT_OPTIONAL_PARAMETERS:
        raise InputError(
            f"{where}: its strict tools ({', '.join(n for n, _ in schemas)}) have {optional} optional fields in all; "
            f"the API takes at most {STRICT_OPTIONAL_PARAMETERS} per request. Make fewer tools strict."
        )
    if unions > STRICT_UNION_PARAMETERS:
        raise InputError(
            f"{where}: its strict tools ({', '.join(n for n, _ in schemas)}) have {unions} optional (X | None) or "
            f"union fields in all; the API takes at most {STRICT_UNION_PARAMETERS} per request. Make fewer tools "
            "strict."
        )


def _field(path: str) -> str:
    return f"the field {path!r}" if path else "the arguments"


def _strict_walk(node: object, path: str, root: JsonObject, problems: list[str], refs: tuple[str, ...]) -> None:
    if problems:
        return
    if not isinstance(node, dict):
        problems.append(f"{_field(path)} has the schema {node!r}, not an object.")
        return
    for key in node:
        if key not in _STRICT_KEYWORDS:
            problems.append(f"{_field(path)} uses {key!r} ({key}={node[key]!r}), which strict mode cannot express.")
            return
    kinds = node.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in _STRICT_TYPES:
            problems.append(f"{_field(path)} has the type {kind!r}, which strict mode does not take.")
            return
    plain = [
        *(node["enum"] if isinstance(node.get("enum"), list) else []),
        *([node["const"]] if "const" in node else []),
    ]
    for value in plain:
        if isinstance(value, dict | list):
            problems.append(f"{_field(path)} allows the value {value!r}; strict mode takes only plain values there.")
            return
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        problems.append(f"{_field(path)} has the format {node['format']!r}, which strict mode does not take.")
        return
    if "minItems" in node and node["minItems"] not in (0, 1):
        problems.append(
            f"{_field(path)} needs at least {node['minItems']} items (minItems); strict mode takes only 0 or 1."
        )
        return
    if kinds == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            problems.append(f"{_field(path)} is an object without additionalProperties: false, which strict needs.")
            return
        properties = node.get("properties", {})
        for name, child in properties.items() if isinstance(properties, dict) else ():
            _strict_walk(child, f"{path}.{name}" if path else str(name), root, problems, refs)
    if "items" in node:
        _strict_walk(node["items"], f"{path}[]", root, problems, refs)
    for key in ("anyOf", "allOf"):
        for child in node.get(key, ()) if isinstance(node.get(key), list) else ():
            _strict_walk(child, path, root, problems, refs)
    ref = node.get("$ref")
    if ref is not None:
        target = _local_ref(root, ref)
        if target is None:
            problems.append(f"{_field(path)} refers to {ref!r}; strict mode takes only references inside the schema.")
        elif ref in refs:
            problems.append(f"{_field(path)} refers to {ref!r} recursively; strict mode takes no recursive schemas.")
        else:
            _strict_walk(target, path, root, problems, (*refs, ref))


def _local_ref(root: JsonObject, ref: object) -> object | None:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    node: object = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _strict_counts(node: object) -> tuple[int, int]:
    """How many optional fields and how many union-typed fields a schema has, at any depth."""
    if isinstance(node, list):
        counts = [_strict_counts(n) for n in node]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)
    if not isinstance(node, dict):
        return 0, 0
    optional = unions = 0
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = node.get("required", [])
        optional += sum(1 for name in properties if not isinstance(required, list) or name not in required)
    if "anyOf" in node or isinstance(node.get("type"), list):
        unions += 1
    for key, child in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(child, dict):
            o, u = _strict_counts(list(child.values()))
        elif key in ("items", "anyOf", "allOf"):
            o, u = _strict_counts(child)
        else:
            continue
        optional, unions = optional + o, unions + u
    return optional, unions
