"""What the Message Batches engine keeps to re-attach: its batches, which requests each holds, which have results.

The state is plain JSON (docs/batches.md, "Re-attaching")::

    {"format": 1, "waves": [{"wave": 1, "batches": [
        {"id": "msgbatch_...", "requests": {"<custom_id>": "<digest>", ...}, "ended": false,
         "results": {"<custom_id>": "succeeded" | "errored" | "expired" | "canceled", ...}}]}]}

A batch the API no longer knows, whose requests were sent again, carries ``"gone": true``.

A request is known by its ``custom_id`` (derived from the participant's key and the request's number in its step)
and the digest of its parameters: a later session asking the same request again (the same conversation, after a
restart) finds the batch that holds it instead of submitting it twice; a request whose parameters changed is a new
request.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from ..errors import InputError
from ..payloads import JsonObject, JsonValue

__all__ = ["FORMAT", "BatchState", "KnownBatch", "custom_id"]

FORMAT = 1
"""The state format this version writes and reads."""

MAX_CUSTOM_ID = 64
"""The longest ``custom_id`` the API takes (characters of ``[a-zA-Z0-9_-]``)."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")
_RESULT_TYPES = frozenset({"succeeded", "errored", "expired", "canceled"})
_FAILED = frozenset({"errored", "expired", "canceled"})


def custom_id(key: str, number: int) -> str:
    """The ``custom_id`` of request ``number`` (1, 2, ...) of the participant keyed ``key``.

    A readable prefix of the key (unsafe characters as ``_``), a digest of the whole key (so keys alike in their
    prefix stay apart) and the number: ``review_3-5f1c0a9e2b7d-2``. Deterministic, at most 64 characters.
    """
    suffix = f"-{hashlib.sha256(key.encode()).hexdigest()[:12]}-{number}"
    prefix = _UNSAFE.sub("_", key).strip("_")[: MAX_CUSTOM_ID - len(suffix)] or "item"
    return prefix + suffix


def request_digest(body: bytes) -> str:
    """The digest by which a request is known again: its encoded parameters'."""
    return hashlib.sha256(body).hexdigest()[:24]


@dataclass
class KnownBatch:
    """One batch the engine created (in this session or an earlier one)."""

    id: str
    """The API's batch id."""
    wave: int
    """The wave it was created in."""
    requests: dict[str, str]
    """Its requests: custom_id to digest of the parameters."""
    ended: bool = False
    """Its processing has ended and its results were read."""
    results: dict[str, str] = field(default_factory=dict)
    """The type of each request's result, once read."""
    gone: bool = False
    """The API no longer knows it (its requests were sent again): no request is answered from it."""

    def to_json(self) -> JsonObject:
        """The batch as the state keeps it."""
        data: JsonObject = {
            "id": self.id,
            "requests": dict(self.requests),
            "ended": self.ended,
            "results": dict(self.results),
        }
        if self.gone:
            data["gone"] = True
        return data


class BatchState:
    """The batches of one engine, by wave, and which batch holds each request (the newest, after a retry)."""

    def __init__(self) -> None:
        self.batches: list[KnownBatch] = []
        """Every batch, in the order created."""
        self._holding: dict[str, KnownBatch] = {}

    def add(self, batch: KnownBatch) -> None:
        """Keep a batch just created (it holds its requests from now on)."""
        self.batches.append(batch)
        for cid in batch.requests:
            self._holding[cid] = batch

    def merge(self, other: BatchState) -> None:
        """Keep the batches of ``other`` not kept already (a saved state taken up by a running engine)."""
        known = {batch.id for batch in self.batches}
        for batch in other.batches:
            if batch.id not in known:
                self.add(batch)

    def holding(self, custom_id: str, digest: str) -> KnownBatch | None:
        """The batch that holds this very request, unless its result there was a failure (it is asked again)."""
        batch = self._holding.get(custom_id)
        if (
            batch is None
            or batch.gone
            or batch.requests.get(custom_id) != digest
            or batch.results.get(custom_id) in _FAILED
        ):
            return None
        return batch

    def gone(self, batch_id: str) -> None:
        """Note that the API no longer knows a batch: its requests are sent again."""
        for batch in self.batches:
            if batch.id == batch_id:
                batch.gone = True

    def ended(self, batch_id: str, results: dict[str, str]) -> None:
        """Note that a batch ended, with the type of each of its results."""
        for batch in self.batches:
            if batch.id == batch_id:
                batch.ended = True
                batch.results = results

    def to_json(self) -> JsonObject:
        """The whole state, as plain JSON."""
        waves: dict[int, list[JsonValue]] = {}
        for batch in self.batches:
            waves.setdefault(batch.wave, []).append(batch.to_json())
        return {"format": FORMAT, "waves": [{"wave": w, "batches": b} for w, b in sorted(waves.items())]}

    @classmethod
    def from_json(cls, data: JsonValue, *, where: str = "state") -> BatchState:
        """Read a state written by `to_json`.

        Raises:
            InputError: It is not such a state; the message names the part that is wrong.
        """
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected the engine's state (an object with 'format' and 'waves').")
        if data.get("format") != FORMAT:
            raise InputError(f"{where}.format: this version reads format {FORMAT}, found {data.get('format')!r}.")
        waves = data.get("waves")
        if not isinstance(waves, list):
            raise InputError(f"{where}.waves: expected a list.")
        state = cls()
        for i, wave in enumerate(waves):
            here = f"{where}.waves[{i}]"
            number = wave.get("wave") if isinstance(wave, dict) else None
            if not isinstance(wave, dict) or not isinstance(number, int) or isinstance(number, bool):
                raise InputError(f"{here}: expected an object with a 'wave' number and 'batches'.")
            batches = wave.get("batches")
            if not isinstance(batches, list):
                raise InputError(f"{here}.batches: expected a list.")
            for j, batch in enumerate(batches):
                state.add(_batch(batch, number, f"{here}.batches[{j}]"))
        return state


def _batch(data: JsonValue, wave: int, where: str) -> KnownBatch:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise InputError(f"{where}: expected an object with the batch's 'id'.")
    requests = _strings(data.get("requests"), f"{where}.requests")
    results = _strings(data.get("results", {}), f"{where}.results")
    odd = sorted(set(results.values()) - _RESULT_TYPES)
    if odd:
        raise InputError(f"{where}.results: unknown result type {odd[0]!r}.")
    ended = data.get("ended", False)
    gone = data.get("gone", False)
    for name, flag in (("ended", ended), ("gone", gone)):
        if not isinstance(flag, bool):
            raise InputError(f"{where}.{name}: expected true or false.")
    return KnownBatch(str(data["id"]), wave, requests, bool(ended), results, bool(gone))


def _strings(data: JsonValue, where: str) -> dict[str, str]:
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError(f"{where}: expected an object of strings.")
    return {k: str(v) for k, v in data.items()}
