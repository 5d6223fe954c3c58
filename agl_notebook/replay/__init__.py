"""Replay: step records, fingerprints, stores, modes and miss explanations (a layer of docs/architecture.md)."""

from .._secrets import REDACTED, scrub
from .explain import ReplayMissError, explain_miss, nearest_record
from .fingerprint import PARTS, Fingerprint, fingerprint
from .modes import ENV_VAR, MODES, Mode, resolve_mode
from .records import FORMAT, RecordedQuestion, RecordsBlock, StepRecord, block_from_json, block_to_json
from .stores import JsonFileStore, MemoryStore, RecordingWarning, Store

__all__ = [
    "ENV_VAR",
    "FORMAT",
    "MODES",
    "PARTS",
    "REDACTED",
    "Fingerprint",
    "JsonFileStore",
    "MemoryStore",
    "Mode",
    "RecordedQuestion",
    "RecordingWarning",
    "RecordsBlock",
    "ReplayMissError",
    "StepRecord",
    "Store",
    "block_from_json",
    "block_to_json",
    "explain_miss",
    "fingerprint",
    "nearest_record",
    "resolve_mode",
    "scrub",
]
