"""Canonical JSON and digests: one spelling of a value, so equal values hash equal across runs and machines."""

from __future__ import annotations

import hashlib
import json

from .payloads import JsonValue

# Made once: ``json.dumps`` with any option builds a new encoder per call, a few microseconds of every digest (a
# step takes four or more). The same options, so the same text.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: JsonValue) -> str:
    """``value`` as JSON with sorted keys, no spaces and unescaped Unicode."""
    return _ENCODER.encode(value)


def digest(value: JsonValue) -> str:
    """The sha256 of ``value``'s canonical JSON, as hex."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
