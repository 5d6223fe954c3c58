"""A server's tool list as a role offers it: checked, filtered, renamed, digested, and kept as a snapshot.

Everything a server sends is untrusted input. A listing is refused, with an `MCPServerError` naming the server and
the tool, when it would cost more than the limits below or could not be offered to the Messages API: too many tools,
a schema too large or too deep, a ``$ref`` that is not local or that loops back to itself without consuming input,
a name the API refuses (``^[a-zA-Z0-9_-]{1,64}$``), two tools offered under one name.

The **snapshot** is what a step's record keeps of each server (in ``StepRecord.engine["mcp"]``): the offered tools
sorted by name, each with its own digest, and nothing of how the server was reached (no command, URL, environment or
headers). A replay offers the recorded tools from it without starting or reaching the server (docs/mcp.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._canonical import digest
from .._fieldwise import Fieldwise
from ..errors import MCPServerError
from ..payloads import JsonObject, JsonValue
from ..tools import is_tool_name
from .servers import MCPServer

MAX_TOOLS = 256
"""The most tools one server may list (before include/exclude): a larger listing is refused."""
MAX_SCHEMA_BYTES = 64_000
"""The most bytes of JSON one tool's input or output schema may take."""
MAX_LISTING_BYTES = 2_000_000
"""The most bytes of JSON a whole listing may take."""
MAX_SCHEMA_DEPTH = 48
"""The deepest a schema may nest (objects and arrays), so nothing recursive walks a hostile one."""
MAX_DESCRIPTION_CHARS = 10_000
"""The longest description a tool may have."""
SNAPSHOT_FORMAT = 1
"""The format of a snapshot this version writes and reads."""

_DIGITS = 16


@dataclass(frozen=True, eq=False, repr=False)
class OfferedTool(Fieldwise):
    """One tool of a server as a role offers it."""

    name: str
    """The name the model calls it by: the prefix, then the server's name for it."""
    server_name: str
    """The server's own name for it (what ``call_tool`` is sent)."""
    description: str
    """What the model reads."""
    input_schema: JsonObject
    """The JSON Schema its arguments are checked against before the call."""
    output_schema: JsonObject | None = None
    """The JSON Schema its structured result must fit, if it declares one."""
    annotations: JsonObject | None = None
    """The server's hints about it (read-only, destructive...): untrusted, kept for approvals."""

    @property
    def destructive(self) -> bool:
        """Whether its server's hints leave it possibly destructive (the protocol's default).

        It is, unless ``readOnlyHint`` is true or ``destructiveHint`` is false. Untrusted: it may add an approval
        (``Role.ask_destructive``), never remove one.
        """
        hints = self.annotations or {}
        if hints.get("readOnlyHint") is True:
            return False
        return hints.get("destructiveHint") is not False

    @property
    def digest(self) -> str:
        """What the model sees of it, digested: a fingerprint part, so a changed tool makes its steps miss."""
        return digest({"name": self.name, "description": self.description, "input_schema": self.input_schema})[:_DIGITS]

    def to_json(self) -> JsonObject:
        """It as a snapshot keeps it."""
        data: JsonObject = {
            "name": self.name,
            "server_name": self.server_name,
            "description": self.description,
            "input_schema": self.input_schema,
            "digest": self.digest,
        }
        if self.output_schema is not None:
            data["output_schema"] = self.output_schema
        if self.annotations:
            data["annotations"] = self.annotations
        return data


@dataclass(frozen=True, eq=False, repr=False)
class ServerTools(Fieldwise):
    """The tools one server offers a role, sorted by name."""

    server: str
    """The server's name (`MCPServer.name`)."""
    tools: tuple[OfferedTool, ...]

    def parts(self) -> dict[str, str]:
        """Its fingerprint parts: ``mcp:<tool name>`` to each tool's digest."""
        return {f"mcp:{t.name}": t.digest for t in self.tools}

    def snapshot(self) -> JsonObject:
        """What a record keeps of it."""
        return {"format": SNAPSHOT_FORMAT, "tools": [t.to_json() for t in self.tools]}

    def named(self, name: str) -> OfferedTool | None:
        """The tool offered as ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)


def offered_tools(server: MCPServer, listed: Sequence[Mapping[str, Any]]) -> ServerTools:
    """Check a live listing (each tool as the SDK dumps it, by alias) and keep the tools ``server`` offers.

    Raises:
        MCPServerError: The listing breaks a limit or holds a tool that cannot be offered (see the module's text).
    """
    where = f"The MCP server {server.name!r}"
    if len(listed) > MAX_TOOLS:
        raise MCPServerError(
            f"{where} lists {len(listed)} tools, more than the {MAX_TOOLS} agl_notebook accepts from one server.",
            server=server.name,
        )
    total = 0
    kept: list[OfferedTool] = []
    seen: dict[str, str] = {}
    for raw in listed:
        name = raw.get("name")
        if not isinstance(name, str):
            raise MCPServerError(f"{where} listed a tool without a name.", server=server.name)
        if server.include is not None and name not in server.include:
            continue
        if name in server.exclude:
            continue
        about = f"{where}, tool {name!r}"
        offered = server.prefix + name
        if not is_tool_name(offered):
            raise MCPServerError(
                f"{about}: the name {offered!r} cannot be offered to the model (the Messages API takes 1 to 64 "
                "letters, digits, '_' or '-'); leave it out with exclude=[...] or shorten the prefix.",
                server=server.name,
                tool=name,
            )
        if offered in seen:
            raise MCPServerError(
                f"{about}: two of its tools are offered as {offered!r}.", server=server.name, tool=name
            )
        seen[offered] = name
        description = raw.get("description") or raw.get("title") or name
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
            raise MCPServerError(
                f"{about}: its description is not text of at most {MAX_DESCRIPTION_CHARS} characters.",
                server=server.name,
                tool=name,
            )
        input_schema = _schema(raw.get("inputSchema"), about, "input", server.name, name)
        if input_schema is None:
            raise MCPServerError(f"{about}: it has no input schema.", server=server.name, tool=name)
        output_schema = _schema(raw.get("outputSchema"), about, "output", server.name, name)
        total += len(json.dumps(input_schema)) + len(json.dumps(output_schema)) + len(description)
        if total > MAX_LISTING_BYTES:
            raise MCPServerError(
                f"{where}: its tools' schemas take more than the {MAX_LISTING_BYTES:,} bytes agl_notebook accepts "
                "from one server; offer fewer with include=[...].",
                server=server.name,
            )
        annotations = raw.get("annotations")
        kept.append(
            OfferedTool(
                offered,
                name,
                description,
                input_schema,
                output_schema,
                dict(annotations) if isinstance(annotations, Mapping) else None,
            )
        )
    listed_names = [raw.get("name") for raw in listed]
    # A typo, or a name given with the prefix: with include the tool would silently not be offered, with exclude a
    # tool the person meant to keep from the agent would silently be offered.
    for option, names in (("include", server.include), ("exclude", server.exclude)):
        missing = [n for n in names or () if n not in listed_names]
        if missing:
            prefix = f" (names are the server's, before the prefix {server.prefix!r})" if server.prefix else ""
            listed_text = ", ".join(sorted(str(n)[:64] for n in listed_names)[:20]) or "no tools"
            from .._secrets import scrub_text, secrets_from_environment

            said = f"{option} names {', '.join(map(repr, missing))}, which the server does not list{prefix}; it lists "
            said = scrub_text(said + listed_text, (*server.secrets(), *secrets_from_environment()))  # names it chose
            raise MCPServerError(f"{where}: {said}.", server=server.name)
    return ServerTools(server.name, tuple(sorted(kept, key=lambda t: t.name)))


def from_snapshot(server: str, snapshot: JsonValue) -> ServerTools:
    """The tools a record's snapshot kept (a replay offers them; nothing is asked of the server).

    Raises:
        MCPServerError: The snapshot is not one this version reads (a damaged record).
    """
    damaged = MCPServerError(
        f"The recorded tool list of the MCP server {server!r} is damaged; run the step in mode 'refresh' with the "
        "server available to record it again.",
        server=server,
    )
    tools = snapshot.get("tools") if isinstance(snapshot, dict) and snapshot.get("format") == SNAPSHOT_FORMAT else None
    if not isinstance(tools, list):
        raise damaged
    kept = []
    for t in tools:
        if not isinstance(t, dict):
            raise damaged
        name, server_name, description = t.get("name"), t.get("server_name"), t.get("description")
        schema, output, annotations = t.get("input_schema"), t.get("output_schema"), t.get("annotations")
        if not (isinstance(name, str) and isinstance(server_name, str) and isinstance(description, str)):
            raise damaged
        if (
            not isinstance(schema, dict)
            or not isinstance(output, dict | None)
            or not isinstance(annotations, dict | None)
        ):
            raise damaged
        kept.append(OfferedTool(name, server_name, description, schema, output, annotations))
    return ServerTools(server, tuple(sorted(kept, key=lambda t: t.name)))


def check_unique(lists: Iterable[ServerTools], own: Iterable[str], role: str) -> None:
    """Refuse two tools of one role offered under one name: across servers, or a server's and the role's own."""
    taken = dict.fromkeys(own, "the role's own tools")
    for server in lists:
        for t in server.tools:
            if t.name in taken:
                raise MCPServerError(
                    f"Role {role!r}: the tool {t.name!r} of the MCP server {server.server!r} has the name of one of "
                    f"{taken[t.name]}; give the server a prefix (MCPServer.stdio(..., prefix='...')).",
                    server=server.server,
                    tool=t.server_name,
                )
            taken[t.name] = f"the MCP server {server.server!r}'s tools"


def _schema(value: object, about: str, which: str, server: str, tool: str) -> JsonObject | None:
    if value is None and which == "output":
        return None
    if not isinstance(value, dict):
        raise MCPServerError(f"{about}: its {which} schema is not a JSON object.", server=server, tool=tool)
    _check_shape(value, about, which, server, tool)
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise MCPServerError(f"{about}: its {which} schema is not JSON ({e}).", server=server, tool=tool) from None
    if size > MAX_SCHEMA_BYTES:
        raise MCPServerError(
            f"{about}: its {which} schema takes {size:,} bytes, more than the {MAX_SCHEMA_BYTES:,} agl_notebook "
            "accepts; leave the tool out with exclude=[...].",
            server=server,
            tool=tool,
        )
    if which == "input" and value.get("type", "object") != "object":
        raise MCPServerError(
            f"{about}: its input schema must describe an object (type 'object'), not {value.get('type')!r}.",
            server=server,
            tool=tool,
        )
    _check_refs(value, about, which, server, tool)
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]  # loaded with the first listing

    try:
        validators.validator_for(value).check_schema(value)
    except exceptions.SchemaError as e:
        raise MCPServerError(
            f"{about}: its {which} schema is not a valid JSON Schema: {e.message}", server=server, tool=tool
        ) from None
    return value


def _check_shape(value: object, about: str, which: str, server: str, tool: str) -> None:
    """Refuse a schema nested deeper than `MAX_SCHEMA_DEPTH`, walking it without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise MCPServerError(
                f"{about}: its {which} schema nests deeper than {MAX_SCHEMA_DEPTH} levels.", server=server, tool=tool
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


# Keywords whose subschemas apply to the same instance: a $ref reached through these alone consumes no input, so a
# loop of them would never end (a validator would raise RecursionError).
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")


def _check_refs(schema: JsonObject, about: str, which: str, server: str, tool: str) -> None:
    """Refuse a ``$ref`` that is not local (``#...``) or that loops back without consuming input."""

    def resolve(ref: str) -> object:
        node: object = schema
        for token in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise MCPServerError(
                    f"{about}: its {which} schema has a $ref {ref!r} that points nowhere.", server=server, tool=tool
                )
        return node

    def in_place_refs(node: object) -> list[str]:
        found: list[str] = []
        stack = [node]
        while stack:
            current = stack.pop()
            if not isinstance(current, dict):
                continue
            ref = current.get("$ref")
            if ref is not None:
                found.append(ref if isinstance(ref, str) else "")
            for key in _IN_PLACE:
                sub = current.get(key)
                if isinstance(sub, list):
                    stack.extend(sub)
                elif isinstance(sub, dict):
                    stack.extend(sub.values() if key == "dependentSchemas" else [sub])
        return found

    # Every $ref anywhere must be local.
    stack: list[object] = [schema]
    refs: set[str] = set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref is not None:
                if not isinstance(ref, str) or not ref.startswith("#"):
                    raise MCPServerError(
                        f"{about}: its {which} schema has a $ref {ref!r} outside the schema; only local references "
                        "('#/...') are followed, and never fetched.",
                        server=server,
                        tool=tool,
                    )
                refs.add(ref)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    # A loop of in-place references: follow each chain, depth-first, with the chain so far.
    edges = {"#": in_place_refs(schema)} | {ref: in_place_refs(resolve(ref)) for ref in sorted(refs)}  # one order
    done: set[str] = set()
    for start in edges:
        path: list[str] = []
        on_path: set[str] = set()
        work: list[tuple[str, bool]] = [(start, False)]
        while work:
            ref, leaving = work.pop()
            if leaving:
                on_path.discard(ref)
                path.pop()
                done.add(ref)
                continue
            if ref in on_path:
                loop = " -> ".join([*path[path.index(ref) :], ref])
                raise MCPServerError(
                    f"{about}: its {which} schema's references loop without consuming input ({loop}).",
                    server=server,
                    tool=tool,
                )
            if ref in done:
                continue
            on_path.add(ref)
            path.append(ref)
            work.append((ref, True))
            work.extend((nxt, False) for nxt in edges.get(ref, ()))
