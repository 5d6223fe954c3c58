"""Step fingerprints: everything the model sees, plus the backend actually used, as a digest per part.

A step replays only from a record whose every part matches, so a changed prompt, tool, schema, input, model or
script never serves a stale answer. Keeping a digest per part lets a miss say which part differs. The occurrence
number tells identical steps of one cell execution (or one `Run`) apart; it is assigned before the step's first
await, so `asyncio.gather` of identical steps replays them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._canonical import digest
from ..models.base import ToolSpec
from ..payloads import JsonValue
from .records import FORMAT

PARTS = ("role", "backend", "instructions", "tools", "reporting", "input", "settings", "format")
"""The parts of a fingerprint, in the order a miss explanation lists them."""

_PART_DIGITS = 16
_ID_DIGITS = 32


@dataclass(frozen=True)
class Fingerprint:
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
) -> Fingerprint:
    """Fingerprint one step from everything the model sees and the backend that answers."""
    values: dict[str, JsonValue] = {
        "role": role,
        "backend": backend,
        "instructions": system,
        "tools": [_tool_json(t) for t in tools],
        "reporting": _tool_json(reporting) if reporting else None,
        "input": {"type": input_type, "value": input},
        "settings": settings,
        "format": FORMAT,
    }
    parts = {name: digest(values[name])[:_PART_DIGITS] for name in PARTS}
    return Fingerprint(parts, digest(parts)[:_ID_DIGITS])  # type: ignore[arg-type]


def _tool_json(spec: ToolSpec) -> JsonValue:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
