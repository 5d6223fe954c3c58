"""Step fingerprints: everything the model sees, plus the backend actually used, as a digest per part.

A step replays only from a record whose every part matches, so a changed prompt, tool, schema, input, model or
script never serves a stale answer. Keeping a digest per part lets a miss say which part differs. The occurrence
number tells identical steps of one cell execution (or one `Run`) apart; it is assigned before the step's first
await, so `asyncio.gather` of identical steps replays them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .._canonical import canonical_json, digest
from .._fieldwise import Fieldwise
from ..models.base import ToolSpec
from ..payloads import JsonValue
from .records import FORMAT

PARTS = ("role", "backend", "instructions", "tools", "reporting", "input", "settings", "format")
"""The parts of a fingerprint, in the order a miss explanation lists them (extra parts follow, by name)."""


def part_names(*parts: Mapping[str, str]) -> tuple[str, ...]:
    """`PARTS`, then every extra part any of ``parts`` (a fingerprint's, a record's) has, in the order first seen."""
    names = list(PARTS)
    for digests in parts:
        names.extend(name for name in digests if name not in names)
    return tuple(names)


_PART_DIGITS = 16
_ID_DIGITS = 32


@dataclass(frozen=True, eq=False, repr=False)
class Fingerprint(Fieldwise):
    """A step's fingerprint before its occurrence number is known."""

    parts: dict[str, str]
    """A digest per part."""
    base: str
    """The digest of all parts: identical steps share it."""

    def with_occurrence(self, occurrence: int) -> str:
        """The record id of occurrence ``occurrence`` of this step."""
        return digest({"base": self.base, "occurrence": occurrence})[:_ID_DIGITS]


def fingerprint(
    *,
    role: str,
    backend: str,
    system: str,
    tools: tuple[ToolSpec, ...],
    reporting: ToolSpec | None,
    input_type: str,
    input: JsonValue,
    settings: dict[str, JsonValue],
    extra: Mapping[str, JsonValue] | None = None,
) -> Fingerprint:
    """Fingerprint one step from everything the model sees and the backend that answers.

    ``extra`` adds named parts (a unit of work's agent and function, say), each digested like the others and
    listed after `PARTS` when a miss is explained; a name may not be one of `PARTS`.
    """
    parts = {
        "role": _cached("role", role, lambda: role),
        "backend": _cached("backend", backend, lambda: backend),
        "instructions": _cached("instructions", system, lambda: system),
        "tools": _cached("tools", tuple(_tool_key(t) for t in tools), lambda: [_tool_json(t) for t in tools]),
        "reporting": _cached(
            "reporting",
            _tool_key(reporting) if reporting else None,
            lambda: _tool_json(reporting) if reporting else None,
        ),
        "input": digest({"type": input_type, "value": input})[:_PART_DIGITS],
        "settings": digest(settings)[:_PART_DIGITS],
        "format": _FORMAT_DIGEST,
    }
    for name, value in (extra or {}).items():
        if name in parts:
            raise ValueError(f"The extra fingerprint part {name!r} would replace a standard part.")
        parts[name] = digest(value)[:_PART_DIGITS]
    return Fingerprint(parts, digest(parts)[:_ID_DIGITS])  # type: ignore[arg-type]


# The parts a role shares across its steps are digested once per distinct value: a step's fingerprint then costs
# two small digests (input, settings) and one of the part digests. Bounded, since a notebook has few roles.
_PART_CACHE: dict[tuple[str, object], str] = {}
_PART_CACHE_LIMIT = 4096
_FORMAT_DIGEST = digest(FORMAT)[:_PART_DIGITS]


def _cached(part: str, key: object, value: Callable[[], JsonValue]) -> str:
    found = _PART_CACHE.get((part, key))
    if found is None:
        if len(_PART_CACHE) >= _PART_CACHE_LIMIT:
            _PART_CACHE.clear()
        found = _PART_CACHE[(part, key)] = digest(value())[:_PART_DIGITS]
    return found


def _tool_key(spec: ToolSpec) -> object:
    # The schema is a dict (unhashable) but is made once per payload type: its canonical JSON is the key.
    key = (spec.name, spec.description, _schema_key(spec.input_schema))
    return (*key, True) if spec.strict else key


_SCHEMA_KEYS: dict[int, tuple[object, str]] = {}


def _schema_key(schema: dict[str, JsonValue]) -> str:
    # Keyed by identity and holding the schema alive, so an id is never reused for another schema while cached.
    entry = _SCHEMA_KEYS.get(id(schema))
    if entry is None or entry[0] is not schema:
        if len(_SCHEMA_KEYS) >= _PART_CACHE_LIMIT:
            _SCHEMA_KEYS.clear()
        entry = _SCHEMA_KEYS[id(schema)] = (schema, canonical_json(schema))
    return entry[1]


def tool_json(spec: ToolSpec) -> JsonValue:
    """A tool as its fingerprint part digests it (what a record keeps as the part's contents)."""
    return _tool_json(spec)


def _tool_json(spec: ToolSpec) -> JsonValue:
    data: dict[str, JsonValue] = {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
    if spec.strict:  # only when set, so every record made before strict tools still matches
        data["strict"] = True
    return data
