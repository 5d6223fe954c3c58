"""``agl-notebook consolidate | list | clear | gc``: the recordings a notebook keeps, seen and tidied."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from .._files import write_atomically
from ..errors import InputError
from ..models.prices import current_prices
from ..notebook.nbfile import METADATA_KEY, consolidate, outputs_metadata, read_notebook_json, records_in_notebook
from ..replay.versions import CONTENT_PARTS, ContentIndex, history_lines
from ._common import (
    EXIT_OK,
    _check_metadata_block,
    _existing_notebook_file,
    _read_v4,
    _s,
    _say,
    _warn,
    _warn_unreadable,
)
from .execute import _notebook_text
from .report import (
    MIN_PREFIX,
    SHORT_ID,
    Recording,
    Scan,
    age,
    cost_totals,
    printable_json,
    recorded_dollars,
    remove,
    scan,
    shown_tokens,
    table,
)
from .sidecars import Rewritten, Sidecar, drop, sidecars_of


def _consolidate(path: Path) -> int:
    path = _existing_notebook_file(path)
    data = read_notebook_json(path)
    _check_metadata_block(data, path)
    before = records_in_notebook(data, where=str(path))
    moved = consolidate(data)
    for problem in before.problems:
        _warn(f"{problem} Left where it is.")
    if moved == 0:
        _say(f"{path}: no records in outputs' metadata; nothing to move.")
        return EXIT_OK
    write_atomically(path, _notebook_text(data))
    after = records_in_notebook(data)
    records, namings = len(before.in_outputs), len(before.sidecar_cells)
    what = f"{records} record{_s(records)}"
    if namings:
        what += f" and the naming{_s(namings)} of {namings} sidecar file{_s(namings)}"
    _say(f"{path}: moved {what} into the notebook metadata ({len(after.in_metadata)} records there in all).")
    return EXIT_OK


def _list(path: Path, *, as_json: bool) -> int:
    path = _existing_notebook_file(path)
    data = read_notebook_json(path)
    _check_metadata_block(data, path, refusal="so its recordings cannot be listed")
    sidecars = sidecars_of(data, path.parent, where=str(path))
    found = scan(data, where=str(path), sidecars=sidecars)
    now = datetime.datetime.now(datetime.UTC)
    costs = cost_totals([r.record for r in found.recordings], current_prices())
    if as_json:
        print(
            printable_json(
                {
                    "notebook": str(path),
                    "recordings": [r.to_json(now) for r in found.recordings],
                    "sidecars": [s.to_json() for s in sidecars],
                    "counts": found.counts(),
                    "cost": costs.to_json(),
                    "unreadable": found.unreadable,
                    "problems": found.problems,
                }
            )
        )
        return EXIT_OK
    _warn_unreadable(found)
    for sidecar in sidecars:
        _say(sidecar.describe())
    if not found.recordings:
        _say(f"{path}: no recordings.")
        return EXIT_OK
    rows = [["ID", "ROLE", "BACKEND", "TOKENS", "DOLLARS", "AGE", "KEPT", "USED"]]
    rows += [
        [
            r.record.id[:SHORT_ID],
            r.record.role + _failure_mark(r),
            r.record.backend,
            shown_tokens(r.record),
            recorded_dollars(r.record),
            age(r.record.recorded_at, now),
            "+".join(r.kept),
            f"{r.status} ({r.why})",
        ]
        for r in found.recordings
    ]
    counts = found.counts()
    _say(f"{path}: {len(found.recordings)} recording{_s(len(found.recordings))}")
    _say("\n".join(table(rows)))
    partial = f", {counts.get('partial')} partial" if counts.get("partial") else ""
    _say(f"{counts['used']} used, {counts['unused']} unused, {counts['unknown']} unknown{partial}.")
    if counts["unused"]:
        _say(
            "unused: no output names it, and no cell that recorded or replayed it is in the notebook with code (by "
            "id or by source); `agl-notebook gc` removes these."
        )
    if counts["unknown"]:
        _say(
            "unknown: not proved unused (kept before every cell using a recording was, or its cells cannot be "
            "looked for here); gc keeps these unless --unknown-too."
        )
    if counts.get("partial"):
        _say(
            "partial: the progress of a step waiting for a person, which resumes when its cell runs again; gc keeps "
            "these unless --unknown-too."
        )
    failures = sum(r.record.failure is not None for r in found.recordings)
    if failures:
        _say(
            f"{failures} of them {'is a failure record' if failures == 1 else 'are failure records'}: a map item that "
            "failed or was not run, replayed as such under nbval (mode replay) and run again in mode auto; no cost."
        )
    for line in costs.lines():
        _say(line)
    return EXIT_OK


def _history(path: Path, cell: str | None) -> int:
    path = _existing_notebook_file(path)
    data = read_notebook_json(path)
    _check_metadata_block(data, path, refusal="so its recordings cannot be listed")
    found = scan(data, where=str(path), sidecars=sidecars_of(data, path.parent, where=str(path)))
    _warn_unreadable(found)
    lines = history_lines([r.record for r in found.recordings], cell=cell)
    _say("\n".join(lines) if lines else f"{path}: no recordings{f' of a cell starting {cell!r}' if cell else ''}.")
    return EXIT_OK


def _failure_mark(recording: Recording) -> str:
    """After the role in ``list``'s table: how a failure record's map item ended."""
    failure = recording.record.failure
    if failure is None:
        return ""
    return " (not run)" if failure.status == "not_run" else f" (failed: {failure.type})"


def _clear(path: Path, ids: list[str], *, everything: bool, dry_run: bool) -> int:
    if everything == bool(ids):
        raise InputError(
            "clear: give the ids of the recordings to remove (list shows them), or --all, not both."
            if ids
            else "clear: give the ids of the recordings to remove (list shows them), or --all."
        )
    path = _existing_notebook_file(path)
    data = _read_v4(path)
    _check_metadata_block(data, path)
    sidecars = sidecars_of(data, path.parent, where=str(path))
    found = scan(data, where=str(path), sidecars=sidecars)
    chosen = found.recordings if everything else _chosen(found, ids, path)
    return _remove(path, data, found, chosen, unreadable=everything, dry_run=dry_run, sidecars=sidecars)


def _gc(path: Path, *, unknown_too: bool, dry_run: bool) -> int:
    path = _existing_notebook_file(path)
    data = _read_v4(path)
    _check_metadata_block(data, path)
    sidecars = sidecars_of(data, path.parent, where=str(path))
    found = scan(data, where=str(path), sidecars=sidecars)
    _warn_unreadable(found)
    # A partial record is a waiting step's progress: removed only with the consent --unknown-too gives.
    dropped = ("unused", "unknown", "partial") if unknown_too else ("unused",)
    chosen = [r for r in found.recordings if r.status in dropped]
    if not chosen:
        counts = found.counts()
        kept = f"{counts['used']} used, {counts['unknown']} unknown"
        if counts.get("partial"):
            kept += f", {counts.get('partial')} partial"
        removable = " and ".join(status for status in ("unknown", "partial") if counts.get(status))
        hint = f" (--unknown-too removes the {removable} ones)" if removable else ""
        _say(f"{path}: every recording is used or may be ({kept}){hint}; nothing to remove.")
        return EXIT_OK
    return _remove(path, data, found, chosen, unreadable=False, dry_run=dry_run, sidecars=sidecars)


def _chosen(found: Scan, ids: list[str], path: Path) -> list[Recording]:
    """The recordings the given ids (or id prefixes) name, each exactly once; an `InputError` for any other."""
    chosen: dict[str, Recording] = {}
    for given in ids:
        if len(given) < MIN_PREFIX:
            raise InputError(
                f"clear: {given!r} is too short to name a recording: give at least {MIN_PREFIX} "
                "characters of its id. Nothing was removed."
            )
        matches = [r for r in found.recordings if r.record.id.startswith(given)]
        if not matches:
            raise InputError(
                f"{path}: no recording has an id starting with {given!r} (`agl-notebook list` shows "
                "them). Nothing was removed."
            )
        if len(matches) > 1:
            raise InputError(
                f"{path}: {given!r} starts the ids of {len(matches)} recordings "
                f"({', '.join(r.record.id[:SHORT_ID] for r in matches[:5])}"
                f"{', ...' if len(matches) > 5 else ''}); give more of the id. Nothing was removed."
            )
        chosen[matches[0].record.id] = matches[0]
    return list(chosen.values())


def _remove(
    path: Path,
    data: dict[str, Any],
    found: Scan,
    chosen: list[Recording],
    *,
    unreadable: bool,
    dry_run: bool,
    sidecars: list[Sidecar],
) -> int:
    if not chosen and not (unreadable and found.unreadable):
        _say(f"{path}: no recordings; nothing to remove.")
        return EXIT_OK
    ids = {r.record.id for r in chosen}
    copies = _keep_shared_contents(data, found, ids)
    shared = sum(len(c) for c in copies.values())
    removed = remove(data, ids, unreadable=unreadable)
    # The sidecars first (each rewritten atomically, and named anew in `data`), then the notebook naming them.
    rewritten = [
        drop(data, sidecar, ids, dry_run=dry_run, copies=copies) for sidecar in sidecars if sidecar.read is not None
    ]
    verb = "would remove" if dry_run else "removed"
    if chosen:
        rows = [
            [
                verb,
                r.record.id[:SHORT_ID],
                f"role {r.record.role!r}",
                r.record.backend,
                "+".join(r.kept),
                f"{r.status}: {r.reason}",
            ]
            for r in chosen
        ]
        _say("\n".join(table(rows)))
    places = [
        f"{n} from {where}"
        for n, where in ((removed.from_metadata, "the notebook metadata"), (removed.from_outputs, "outputs' metadata"))
        if n
    ]
    places += [
        f"{done.records} line{_s(done.records)} from the sidecar {done.sidecar.naming.file}"
        for done in rewritten
        if done.records
    ]
    summary = f"{verb} {len(chosen)} recording{_s(len(chosen))}"
    if places:
        summary += f" ({', '.join(places)})"
    if removed.unreadable:
        summary += f" and {removed.unreadable} this version cannot read"
    if shared:
        summary += f", {shared} shared content{_s(shared)} copied into the records still using them"
    replaced = sum(done.replaced for done in rewritten)
    if replaced:
        summary += f", and {replaced} sidecar line{_s(replaced)} a later line of the same id replaced"
    left = len(found.recordings) - len(chosen)
    summary += f"; {left} left in {path}"
    if dry_run:
        _say(f"{summary}. Nothing was written (--dry-run).")
        return EXIT_OK
    write_atomically(path, _notebook_text(data))
    _say(f"{summary}.")
    for done in rewritten:
        _say_rewritten(done)
    return EXIT_OK


def _keep_shared_contents(data: dict[str, Any], found: Scan, ids: set[str]) -> dict[str, dict[str, Any]]:
    """Copy into a kept record each content it left out that only a record being removed keeps (docs/iterating.md).

    A record keeps a long system text only when no other record of the notebook does; removing that other record
    must not take the text from the records that still use it. The copies are made here in the notebook's blocks;
    returned by record id, for `drop` to make them in the sidecar lines of those records.
    """
    kept = [r.record for r in found.recordings if r.record.id not in ids]
    leaving = ContentIndex(r.record for r in found.recordings if r.record.id in ids)
    staying = ContentIndex(kept)
    copies: dict[str, dict[str, Any]] = {}
    given: set[tuple[str, str]] = set()
    for record in kept:
        for part in CONTENT_PARTS:
            digest = record.parts.get(part)
            if digest is None or part in record.contents or staying.holds(part, digest) or (part, digest) in given:
                continue
            has, value = leaving.content(record, part)
            if has:
                copies.setdefault(record.id, {})[part] = value
                given.add((part, digest))
    if not copies:
        return copies
    blocks = [data.get("metadata", {}).get(METADATA_KEY)] + [m.get(METADATA_KEY) for _, _, m in outputs_metadata(data)]
    for block in blocks:
        for item in block.get("records", []) if isinstance(block, dict) else []:
            if isinstance(item, dict) and item.get("id") in copies:
                item["contents"] = {**(item.get("contents") or {}), **copies[item["id"]]}
    return copies


def _say_rewritten(done: Rewritten) -> None:
    file = done.sidecar.naming.file
    if done.removed_file:
        _say(f"removed the sidecar {file}: nothing was left in it; the notebook no longer names it.")
    elif done.records or done.replaced:
        _say(f"rewrote the sidecar {file} (atomically); the notebook names it as it is now.")
