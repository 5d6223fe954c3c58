"""``agl-notebook batches list | cancel | forget NOTEBOOK``: the Message Batches of a notebook's batch maps.

A batch map keeps its engine's state in its sidecar file (line kind ``batch_state``, `agl_notebook.run._map`;
docs/batches.md): the sidecars the notebook names and the other sidecar files beside it are read, and each state's
batches are asked of the API (`models.batch_replies.batch_statuses`, `cancel_batches`) with a client made from the
environment as the live backend makes one (or the one a caller's factory makes: the tests' fake). ``list`` and
``cancel`` write nothing: canceling is the API's, and a map re-attaching to a canceled batch sends its canceled
requests again.

``forget`` asks nothing of the API: for a batch the API no longer knows (deleted, another workspace's, results past
29 days), it appends to each map's sidecar a state line with no batch (the ``batch_state`` line the map reads last),
so the next run sends the map's unfinished items in a new batch. It never rewrites the file: every earlier line
(records, earlier states) stays as it was, byte for byte.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, MissingCredentialsError
from ..notebook.nbfile import records_in_notebook
from ..payloads import JsonValue
from ..replay.sidecar import SUFFIX, SidecarWriter, read_sidecar

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from ..models.batch_replies import BatchStatus

ClientFactory = Callable[[], Awaitable["AsyncAnthropic"]]
"""What makes the client the command asks the API with."""

ENGINE_STATE = "batch_state"  # the line kind a batch map writes (agl_notebook.run._map.ENGINE_STATE)


@dataclass(frozen=True)
class MapBatches:
    """One batch map's saved engine state, as found beside the notebook."""

    key: str
    """The map's key."""
    file: Path
    """Its sidecar file."""
    named: bool
    """The notebook names the file (else it was only found beside it)."""
    state: JsonValue
    """The engine's latest state."""


def batch_states(nb: dict[str, Any], folder: Path, *, where: str) -> tuple[list[MapBatches], list[str]]:
    """Every batch map's latest state in the sidecars ``nb`` names and the others in ``folder``; and what was wrong."""
    named = set(records_in_notebook(nb, where=where).sidecars)
    found: list[MapBatches] = []
    problems: list[str] = []
    for path in sorted(folder.glob("*" + SUFFIX)):
        try:
            read = read_sidecar(path)
        except InputError as e:
            if path.name in named:
                problems.append(str(e))
            continue
        latest = read.latest(ENGINE_STATE)
        if latest is not None:
            found.append(MapBatches(read.key, path, path.name in named, latest.get("state")))
    return found, problems


async def _from_environment() -> AsyncAnthropic:
    from ..models.anthropic import _client_from_environment

    return await _client_from_environment(None)


def batches_command(
    action: str,
    path: Path,
    nb: dict[str, Any],
    *,
    say: Callable[[str], None],
    client: ClientFactory | None = None,
    map_key: str | None = None,
) -> int:
    """List, cancel or forget the batches of the notebook at ``path`` (read as ``nb``); the exit code.

    ``map_key`` limits the command to that map's sidecar.

    Raises:
        InputError: No credentials for the API (exit 2), no map keyed ``map_key``, or a saved state that is not
            an engine's.
    """
    maps, problems = batch_states(nb, path.parent, where=str(path))
    for problem in problems:
        say(f"warning: {problem}")
    if map_key is not None:
        maps = [found for found in maps if found.key == map_key]
        if not maps:
            raise InputError(f"No batch map {map_key!r} of {path.name} keeps a batch state beside it.")
    if not maps:
        say(f"No batch map of {path.name} keeps a batch state beside it (no sidecar with a batch_state line).")
        return 0
    if action == "forget":
        return _forget(maps, say)
    return asyncio.run(_ask(action, maps, say, client or _from_environment))


FORGOTTEN: JsonValue = {"format": 1, "waves": []}
"""The state a ``forget`` line holds: no batch (what any version reads as a map that never sent one)."""


def _forget(maps: list[MapBatches], say: Callable[[str], None]) -> int:
    """Append a state with no batch to each map's sidecar: its next run sends its unfinished items in a new batch."""
    from ..models.batch_state import BatchState

    for found in maps:
        where = f"map {found.key!r} ({found.file.name}{'' if found.named else ', not named by the notebook'})"
        try:
            batches = BatchState.from_json(found.state).batches
        except InputError as e:
            raise InputError(f"{found.file}: its batch_state line: {e}") from None
        if not batches:
            say(f"{where}: no batch to forget (its latest state holds none); nothing written.")
            continue
        ids = [b.id for b in batches]
        line = {"kind": ENGINE_STATE, "state": FORGOTTEN, "forgotten": ids}
        try:
            # Appended under the sidecar's lock; the file is never rewritten, its earlier bytes stay as they were.
            SidecarWriter(found.file, found.key).append([json.dumps(line, separators=(",", ":"))])
        except OSError as e:
            raise InputError(f"{found.file}: cannot append to it ({e}); nothing was forgotten.") from None
        say(
            f"{where}: forgot {len(ids)} batch(es) ({', '.join(ids)}): a reset line was appended; running the map "
            "again sends its unfinished items in a new batch (its finished ones replay)."
        )
        say(
            "  A forgotten batch still in progress goes on and is billed: `agl-notebook batches cancel` before "
            "forgetting stops it."
        )
    return 0


async def _ask(action: str, maps: list[MapBatches], say: Callable[[str], None], make: ClientFactory) -> int:
    import anthropic

    from ..models.batch_replies import batch_statuses, cancel_batches

    try:
        client = await make()
    except MissingCredentialsError as e:
        raise InputError(f"batches {action} asks the Message Batches API: {e}") from None
    failed = 0
    try:
        for found in maps:
            where = f"map {found.key!r} ({found.file.name}{'' if found.named else ', not named by the notebook'})"
            try:
                if action == "cancel":
                    statuses = await cancel_batches(client, found.state)
                    say(f"{where}: {len(statuses)} batch(es) canceled" + ("" if statuses else " (none in progress)"))
                else:
                    statuses = await batch_statuses(client, found.state)
                    say(f"{where}: {len(statuses)} batch(es)")
            except InputError as e:
                raise InputError(f"{found.file}: its batch_state line: {e}") from None
            except anthropic.APIError as e:
                failed += 1
                say(f"{where}: the API refused: {e}")
                continue
            for status in statuses:
                say("  " + describe(status))
    finally:
        await client.close()
    return 1 if failed else 0


def describe(status: BatchStatus) -> str:
    """One batch as a line: its wave, id, status, counts, and when it expires (or ended)."""
    counts = ", ".join(f"{n} {name}" for name, n in status.request_counts.items())
    when = f"ended {status.ended_at}" if status.ended_at is not None else f"expires {status.expires_at}"
    return f"wave {status.wave}: {status.batch_id} {status.processing_status}: {counts}; {when}"
