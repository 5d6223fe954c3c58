"""The ``agl-notebook`` command: execute notebooks headlessly, and see, explain and tidy the recordings they keep.

- ``agl-notebook execute NOTEBOOK [--record] [--mode MODE] [--timeout SECONDS] [--output PATH] [--answers JSON]
  [--approvals approve|deny|FILE]`` runs every code cell with nbclient in a fresh ``python3`` kernel started in the
  notebook's folder, with ``AGL_NOTEBOOK_PATH`` set so the kernel reads the recordings saved in the notebook (and
  ``AGL_NOTEBOOK_MODE`` when ``--mode`` is given, ``AGL_NOTEBOOK_ANSWERS`` when ``--answers`` is: the answers to live
  questions, in order; ``AGL_NOTEBOOK_APPROVALS`` when ``--approvals`` is: the decisions on tool calls that ask for
  approval).
  The executed notebook is written back (or to ``--output``) as nbclient leaves it, each finished step's record in
  its output metadata (path 2); with ``--record`` every record is then moved into the notebook metadata (path 3).
  Progress is one updating bar on a terminal, one line per cell otherwise.
- ``agl-notebook consolidate NOTEBOOK`` moves the records found in outputs' metadata into the notebook metadata.
- ``agl-notebook list NOTEBOOK [--json]``: the recordings, and whether a cell still uses each (`._cli_report`).
- ``agl-notebook explain NOTEBOOK CELL``: runs cells 1..CELL headlessly in mode replay with model calls blocked,
  writing nothing, and says which recording each step of CELL replays from, or why the first miss missed.
- ``agl-notebook clear NOTEBOOK (--all | ID...)`` and ``agl-notebook gc NOTEBOOK [--unknown-too]`` remove
  recordings (given ones; or the ones no cell uses), with ``--dry-run``.
- ``agl-notebook batches list|cancel NOTEBOOK``: the Message Batches of the notebook's batch maps, from the states
  their sidecars keep, told or canceled (`._cli_batches`).

Nothing is written unless everything before the write succeeded, and a write is atomic (a temporary file in the
same folder, then `os.replace`), so a failure leaves the original file as it was.

Exit codes: 0 done; 1 the execution failed (a cell raised, timed out, or the kernel died; for ``explain``, a step of
the cell would not replay); 2 the command cannot start (no such file, not a notebook, a bad option or recording id,
or a corrupt recordings block in the notebook metadata for every command but plain ``execute``, which warns, runs,
and writes the block back as it was).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from ._cli_batches import ClientFactory, batches_command
from ._cli_report import (
    MIN_PREFIX,
    SHORT_ID,
    Recording,
    Scan,
    age,
    cost_totals,
    printable,
    printable_json,
    recorded_dollars,
    remove,
    scan,
    table,
    tokens,
)
from ._cli_sidecars import Rewritten, Sidecar, drop, sidecars_of
from ._files import write_atomically
from ._settings import ANSWERS, APPROVALS, BLOCK_MODELS, MODE, NOTEBOOK_PATH, UNDER_NBVAL, set_for_kernels
from .errors import InputError
from .models.prices import current_prices
from .notebook.nbfile import METADATA_KEY, consolidate, read_notebook_json, records_in_notebook
from .replay.modes import MODES
from .replay.records import StepRecord, block_from_json
from .replay.sidecar import namings_in_block, read_sidecar

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Failed(Exception):
    """The execution failed; the message says where and why (exit code 1)."""


def main(argv: list[str] | None = None, *, batch_client: ClientFactory | None = None) -> int:
    """Run the command line; returns the exit code (``batch_client`` makes the client ``batches`` asks with)."""
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command == "clear" and not any(word.startswith("-") for word in extra):
            args.ids += extra  # ids given after an option: clear NOTEBOOK --dry-run ID...
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, or a usage error argparse already printed
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        path = Path(args.notebook)
        if args.command == "execute":
            return _execute(
                path,
                record=args.record,
                mode=args.mode,
                timeout=args.timeout,
                output=Path(args.output) if args.output is not None else None,
                answers=args.answers,
                approvals=args.approvals,
            )
        if args.command == "list":
            return _list(path, as_json=args.json)
        if args.command == "explain":
            return _explain(path, args.cell, timeout=args.timeout)
        if args.command == "clear":
            return _clear(path, args.ids, everything=args.all, dry_run=args.dry_run)
        if args.command == "gc":
            return _gc(path, unknown_too=args.unknown_too, dry_run=args.dry_run)
        if args.command == "batches":
            return batches_command(args.action, path, read_notebook_json(path), say=_say, client=batch_client)
        return _consolidate(path)
    except InputError as e:
        _error(str(e))
        return EXIT_USAGE
    except _Failed as e:
        _error(str(e))
        return EXIT_FAILED
    except KeyboardInterrupt:
        _error("interrupted; nothing was written.")
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agl-notebook",
        description="Execute notebooks that run agl_notebook steps, keep their recordings in the notebook, and "
        "list, explain and tidy those recordings.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    execute = commands.add_parser(
        "execute",
        help="execute a notebook headlessly (nbclient) and write it back",
        description="Execute every code cell in a fresh python3 kernel started in the notebook's folder and write "
        "the executed notebook back (or to --output). Nothing is written if a cell fails.",
    )
    execute.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    execute.add_argument(
        "--record",
        action="store_true",
        help="move every step record into the notebook metadata (where it survives clearing "
        "outputs) instead of leaving it in the outputs' metadata",
    )
    execute.add_argument(
        "--mode",
        choices=MODES,
        help=f"the replay mode for the kernel ({MODE.name}); by default the environment's, else auto",
    )
    execute.add_argument(
        "--timeout",
        type=_positive_int,
        default=None,
        metavar="SECONDS",
        help="the longest one cell may run (default: no limit)",
    )
    execute.add_argument("--output", metavar="PATH", help="write the executed notebook here instead of in place")
    execute.add_argument(
        "--answers",
        type=_answers,
        metavar="JSON",
        help="the answers to the questions steps ask live, in order, as a JSON list "
        f"(e.g. '[\"Saturday\", 3]'; sets {ANSWERS.name} for the kernel); a run.map item's, as an object keyed "
        "by map, item and question (docs/map.md). Without it a live question fails the run, naming it; a replayed "
        "one needs no answer",
    )
    execute.add_argument(
        "--approvals",
        type=_approvals,
        metavar="approve|deny|FILE",
        help="how tool calls that ask for a person's approval are decided: approve all, deny all, or the decisions "
        f"in a JSON file, keyed by tool and arguments (sets {APPROVALS.name} for the kernel). Without it a live "
        "call that asks fails the run before its handler runs, naming the tool; a replayed one needs no decision",
    )

    merge = commands.add_parser(
        "consolidate",
        help="move records from outputs' metadata into the notebook metadata",
        description="Move the step records that finished steps left in their outputs' metadata into the notebook "
        "metadata, where they survive clearing outputs.",
    )
    merge.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")

    listing = commands.add_parser(
        "list",
        help="list the notebook's recordings, and whether a cell still uses each",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="List the recordings kept in the notebook (its metadata and its outputs' metadata), one a "
        "line: id, role, backend (what the record claims it was made with), tokens (input + output), "
        "age, where it is kept, and whether a cell uses it. Nothing runs and nothing is written.\n\n" + _USED_RULE,
    )
    listing.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    listing.add_argument("--json", action="store_true", help="print JSON for programs instead of a table")

    explain = commands.add_parser(
        "explain",
        help="say whether a cell's steps replay and, when one would not, why (runs cells 1..CELL)",
        description="Tell whether the steps of CELL replay from the notebook's recordings and, for the first one "
        "that would not, name the nearest recording and the parts of the step that differ from it. A "
        "step is matched by a fingerprint of its live role, tools and input, which only running the "
        "code gives, so this runs code cells 1 to CELL headlessly (nbclient, a fresh python3 kernel in "
        "the notebook's folder) in mode 'replay' with model calls blocked: no model is called, but the "
        "cells' code does run (with its other effects, files it writes say). The executed copy is kept "
        "in memory and dropped: the notebook file is not written. Exit code 0: every step of CELL "
        "replays; 1: a step would not replay, or a cell failed.",
    )
    explain.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    explain.add_argument(
        "cell",
        metavar="CELL",
        help="the cell: its number, counting every cell from 1 (as execute shows them), or its id",
    )
    explain.add_argument(
        "--timeout",
        type=_positive_int,
        default=None,
        metavar="SECONDS",
        help="the longest one cell may run (default: no limit)",
    )

    clear = commands.add_parser(
        "clear",
        help="remove the given recordings, or all of them",
        description="Remove recordings from the notebook metadata and from outputs' metadata (the outputs "
        "themselves are kept), so those steps run live next time. The file is rewritten atomically.",
    )
    clear.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    clear.add_argument(
        "ids",
        metavar="ID",
        nargs="*",
        help=f"a recording id, or its first {MIN_PREFIX} characters or more (list shows them)",
    )
    clear.add_argument(
        "--all", action="store_true", help="remove every recording, those this version cannot read included"
    )
    clear.add_argument("--dry-run", action="store_true", help="say what would be removed; write nothing")

    gc = commands.add_parser(
        "gc",
        help="remove the recordings no cell uses",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Remove the recordings no cell of the notebook uses (list shows which), from the notebook "
        "metadata and outputs' metadata. Recordings whose use cannot be told are kept unless "
        "--unknown-too is given. The file is rewritten atomically.\n\n" + _USED_RULE,
    )
    gc.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    gc.add_argument(
        "--unknown-too",
        action="store_true",
        help="remove the recordings whose use is unknown (recorded without a cell id) too",
    )
    gc.add_argument("--dry-run", action="store_true", help="say what would be removed; write nothing")

    batches = commands.add_parser(
        "batches",
        help="list or cancel the Message Batches of the notebook's batch maps",
        description="Read the batch state each batch map keeps in its sidecar file (those the notebook names, "
        "and the other sidecar files beside it), and ask the Message Batches API for each batch's status (list) "
        "or cancel those in progress (cancel). Needs the API's credentials, as a live step does. A map run again "
        "re-attaches to its batches; the requests of a canceled one are sent again. Nothing is written.",
    )
    batches.add_argument("action", choices=["list", "cancel"], help="list the batches, or cancel those in progress")
    batches.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    return parser


_USED_RULE = """\
A recording is "used" when a cell that could run its step is still there:
  used     it is kept in the output of a code cell with code, or the cell it names
           (JupyterLab sends a cell id) is a code cell with code;
  unused   the cell it names is gone, is empty, or is no longer a code cell; or it
           names no cell and no code cell has code;
  unknown  it names no cell (headless runs, nbclient and nbval, send no cell id).
"Used" does not promise the step still replays (an edited cell may ask something
else): `agl-notebook explain NOTEBOOK CELL` tells."""


def _answers(text: str) -> str:
    """A JSON list of answers, or an object of map items' answers, passed on to the kernel as it was given."""
    try:
        answers = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON list of answers: {e.msg} at column {e.colno}") from None
    if isinstance(answers, dict) and answers:
        problem = _map_answers_problem(answers)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text
    if not isinstance(answers, list):
        kind = {dict: "object", str: "string", bool: "boolean", int: "number", float: "number"}.get(
            type(answers), "null"
        )
        raise argparse.ArgumentTypeError(
            f"expected a JSON list of answers, not a JSON {kind} (give one answer as a list of one: '[\"Saturday\"]')"
        )
    return text


def _map_answers_problem(answers: dict[str, object]) -> str | None:
    """What is wrong with answers for map items (``{"<map key>": {"<item index>": {"<question>": answer}}}``)."""
    shape = '{"<map key>": {"<item index>": {"<question text>": <answer>}}}'
    for key, items in answers.items():
        if not isinstance(items, dict):
            return f"answers for map items are keyed by map, item and question, {shape}; {key!r} is not an object"
        for index, questions in items.items():
            if not index.isdigit() or not isinstance(questions, dict):
                return (
                    f"answers for map items are keyed by map, item and question, {shape}; in {key!r}, {index!r} "
                    "must be an item index with an object of answers by question"
                )
    return None


def _approvals(text: str) -> str:
    """``approve``, ``deny``, or a decisions file (made absolute: the kernel starts in the notebook's folder)."""
    if text.strip().lower() in ("approve", "deny"):
        return text.strip().lower()
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"expected approve, deny, or a JSON file of decisions; {text!r} is none")
    return str(path.resolve())


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value}")
    return value


# Commands ----------------------------------------------------------------------------------------------------------


def _execute(
    path: Path,
    *,
    record: bool,
    mode: str | None,
    timeout: int | None,
    output: Path | None,
    answers: str | None = None,
    approvals: str | None = None,
) -> int:
    import nbformat

    path = _existing_notebook_file(path)
    target = _output_path(output) if output is not None else path
    data = _read_v4(path)
    if record:
        _check_metadata_block(data, path)
    else:
        # Running needs nothing from the block and changes nothing in it: it is written back as it was (only
        # --record, which would replace it, refuses), so a damaged block never stops a person running the notebook.
        for problem in _metadata_block_problems(data, path):
            _warn(
                f"{problem}\nThe recordings block is corrupt: its steps run live, and it is written back as it is "
                "(fix it by hand, or remove it to record again)."
            )
    # nbformat's reader, not the dict: it joins the lists of lines a saved notebook holds into strings.
    original_text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(original_text, as_version=4)  # type: ignore[no-untyped-call]
    if record:
        # Records the original left in outputs (path 2) are kept even if this execution does not display them again.
        consolidate(nb)

    progress = _Progress(nb, sys.stderr)
    client = _client(nb, path, timeout, progress)
    settings: dict[str, str | None] = {NOTEBOOK_PATH.name: str(path), UNDER_NBVAL.name: None}
    if mode is not None:
        settings[MODE.name] = mode
    if answers is not None:
        settings[ANSWERS.name] = answers
    if approvals is not None:
        settings[APPROVALS.name] = approvals
    started = time.monotonic()
    with _failures(progress, timeout, f"Nothing was written; {path} is unchanged."), set_for_kernels(settings):
        client.execute()
    progress.close()

    named = len(records_in_notebook(nb).sidecar_cells) if record else 0  # sidecar namings in outputs, moved too
    moved = consolidate(nb) - named if record else 0
    if target == path and path.read_text(encoding="utf-8") != original_text:
        # Someone saved the notebook (JupyterLab, say) while it ran: writing would lose their edits.
        raise _Failed(
            f"{path} changed on disk while it was being executed; nothing was written, so those changes "
            "are kept. Run it again, or pass --output to write the executed copy elsewhere."
        )
    write_atomically(target, _notebook_text(nb))
    found = records_in_notebook(nb)
    summary = f"executed {progress.total} code cell{_s(progress.total)} in {time.monotonic() - started:.1f} s"
    if record:
        summary += (
            f"; {moved} record{_s(moved)} moved into the notebook metadata ({len(found.in_metadata)} there in all)"
        )
        if named:
            summary += f", and the naming{_s(named)} of {named} sidecar file{_s(named)}"
    else:
        summary += f"; {len(found.in_outputs)} record{_s(len(found.in_outputs))} in output metadata"
    _say(f"{summary}; wrote {target}", file=sys.stderr)
    return EXIT_OK


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
            r.record.role,
            r.record.backend,
            str(tokens(r.record)),
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
    _say(f"{counts['used']} used, {counts['unused']} unused, {counts['unknown']} unknown.")
    if counts["unused"]:
        _say("unused: the cell that ran it is gone, empty or not code any more; `agl-notebook gc` removes these.")
    if counts["unknown"]:
        _say(
            "unknown: the cell that ran it cannot be told (a headless run sends no cell id); gc keeps these "
            "unless --unknown-too."
        )
    for line in costs.lines():
        _say(line)
    return EXIT_OK


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
    dropped = ("unused", "unknown") if unknown_too else ("unused",)
    chosen = [r for r in found.recordings if r.status in dropped]
    if not chosen:
        counts = found.counts()
        kept = f"{counts['used']} used, {counts['unknown']} unknown"
        hint = " (--unknown-too removes the unknown ones)" if counts["unknown"] else ""
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
    removed = remove(data, ids, unreadable=unreadable)
    # The sidecars first (each rewritten atomically, and named anew in `data`), then the notebook naming them.
    rewritten = [drop(data, sidecar, ids, dry_run=dry_run) for sidecar in sidecars if sidecar.read is not None]
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


def _say_rewritten(done: Rewritten) -> None:
    file = done.sidecar.naming.file
    if done.removed_file:
        _say(f"removed the sidecar {file}: nothing was left in it; the notebook no longer names it.")
    elif done.records or done.replaced:
        _say(f"rewrote the sidecar {file} (atomically); the notebook names it as it is now.")


def _explain(path: Path, cell: str, *, timeout: int | None) -> int:
    import nbformat
    from nbclient.exceptions import CellExecutionError

    path = _existing_notebook_file(path)
    data = _read_v4(path)
    _check_metadata_block(data, path, refusal="so no step can replay from it")
    index = _cell_index(data, cell, path)
    sidecars = sidecars_of(data, path.parent, where=str(path))
    known = {r.record.id for r in scan(data, where=str(path), sidecars=sidecars).recordings}
    nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)  # type: ignore[no-untyped-call]
    nb.cells = nb.cells[: index + 1]
    progress = _Progress(nb, sys.stderr)
    client = _client(nb, path, timeout, progress)
    # Replay only, and a model call fails loudly even where the notebook's code sets a mode of its own.
    settings: dict[str, str | None] = {
        NOTEBOOK_PATH.name: str(path),
        UNDER_NBVAL.name: None,
        MODE.name: "replay",
        BLOCK_MODELS.name: "1",
    }
    failed: tuple[int, CellExecutionError, dict[str, Any]] | None = None
    with _failures(progress, timeout, "Nothing was written."), set_for_kernels(settings), client.setup_kernel():
        for number, code_cell in enumerate(nb.cells):
            try:
                client.execute_cell(code_cell, number, execution_count=client.code_cells_executed + 1)
            except CellExecutionError as e:
                progress.end_line("error")
                failed = (number, e, _miss_details(client, number) if e.ename == "ReplayMissError" else {})
                break
    progress.close()
    if failed is not None:
        return _explain_failure(index, *failed)
    return _explain_success(index, nb.cells[index], known, path.parent)


def _explain_failure(index: int, number: int, e: Any, details: dict[str, Any]) -> int:
    """Report the error of cell ``number`` (0-based) while explaining cell ``index``."""
    where = f"cell {number + 1}" if number == index else f"cell {number + 1}, before cell {index + 1},"
    if e.ename == "ReplayMissError":
        _say(f"{where} would not replay: {e.evalue}")
        nearest, differing = details.get("nearest"), details.get("differing") or []
        if isinstance(nearest, str):
            _say(f"nearest recording: {nearest[:SHORT_ID]}; differs in: {', '.join(map(str, differing))}")
        if number != index:
            _say(f"cell {index + 1} was not reached.")
        return EXIT_FAILED
    if e.ename == "ModelCallBlockedError":
        _say(f"{where} would call a model: {e.evalue}")
        return EXIT_FAILED
    _print_traceback(getattr(e, "traceback", ""))
    raise _Failed(
        f"{where} raised {e.ename}: {e.evalue}" + ("" if number == index else f"\ncell {index + 1} was not reached.")
    )


def _explain_success(index: int, cell: Any, known: set[str], folder: Path | None = None) -> int:
    shown: list[StepRecord] = []
    maps: list[str] = []
    for output in cell.get("outputs", []):
        block = output.get("metadata", {}).get(METADATA_KEY)
        if block is not None:
            try:
                shown.extend(block_from_json(block, where="output").records)
            except InputError:
                continue
            for naming in namings_in_block(block, where="output")[0]:
                try:
                    count = len(read_sidecar((folder or Path()) / naming.file, naming=naming).records)
                except InputError as e:
                    maps.append(f"map {naming.key!r} names its sidecar, which cannot be read: {e}")
                    continue
                maps.append(f"map {naming.key!r} replays from its sidecar {naming.file} ({count} record{_s(count)})")
    for line in maps:
        _say(f"cell {index + 1}: {line}.")
    if maps and not shown:
        return EXIT_OK
    if not shown:
        _say(f"cell {index + 1} ran and showed no step: nothing in it replays from a recording (or needs one).")
        return EXIT_OK
    for record in shown:
        what = f"a step of role {record.role!r} ({record.backend})"
        if record.id in known:
            _say(f"cell {index + 1}: {what} replays from recording {record.id[:SHORT_ID]}.")
        else:
            _say(
                f"cell {index + 1}: {what} ran live instead of replaying, because the cell's code sets a mode "
                f"of its own (a Run's or a step's mode wins over {MODE.name}); its new recording "
                f"{record.id[:SHORT_ID]} was not saved."
            )
    return EXIT_OK


_PROBE = (
    "(lambda e: print(__import__('json').dumps({'nearest': getattr(getattr(e, 'nearest', None), 'id', None), "
    "'differing': [str(p) for p in getattr(e, 'differing', ()) or ()]})))"
    "(getattr(__import__('sys'), 'last_value', None))"
)


def _miss_details(client: Any, number: int) -> dict[str, Any]:
    """The nearest record's id and the differing parts of the miss that just failed a cell, from the kernel."""
    import nbformat

    probe = nbformat.v4.new_code_cell(_PROBE)  # type: ignore[no-untyped-call]
    hooks = client.on_cell_execute, client.on_cell_executed
    client.on_cell_execute = client.on_cell_executed = None  # not a cell of the notebook: no progress line
    try:
        client.execute_cell(probe, number, store_history=False)
        text = "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")
        details = json.loads(text)
    except Exception:  # the message itself says what differs; the id is a bonus
        return {}
    finally:
        client.on_cell_execute, client.on_cell_executed = hooks
    return details if isinstance(details, dict) else {}


# Checks ------------------------------------------------------------------------------------------------------------


def _existing_notebook_file(path: Path) -> Path:
    if not path.exists():
        raise InputError(f"{path}: no such file.")
    if not path.is_file():
        raise InputError(f"{path}: not a file.")
    return path.resolve()


def _output_path(output: Path) -> Path:
    if output.is_dir():
        raise InputError(f"--output {output}: is a folder; give the path of the notebook file to write.")
    folder = output.resolve().parent
    if not folder.is_dir():
        raise InputError(f"--output {output}: the folder {folder} does not exist.")
    return output.resolve()


def _metadata_block_problems(data: dict[str, Any], path: Path) -> list[str]:
    """What makes the notebook metadata's records block unusable as a whole (each record is checked elsewhere)."""
    metadata = data.get("metadata")
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        return [f"{path}: the notebook metadata is not an object."]
    if METADATA_KEY not in metadata:
        return []
    try:
        block_from_json(metadata[METADATA_KEY], where=f"{path}: metadata[{METADATA_KEY!r}]")
    except InputError as e:
        return [str(e)]
    return []


def _check_metadata_block(
    data: dict[str, Any], path: Path, *, refusal: str = "so the notebook was not written (that would replace the block)"
) -> None:
    """Refuse a notebook whose records block is corrupt: rewriting it would lose the recordings it holds."""
    problems = _metadata_block_problems(data, path)
    if problems:
        raise InputError(
            f"{problems[0]}\nThe recordings block is corrupt, {refusal}. Fix "
            f"metadata[{METADATA_KEY!r}] by hand, or remove it to record again."
        )


def _read_v4(path: Path) -> dict[str, Any]:
    """The notebook's JSON; an `InputError` unless it is an nbformat 4 notebook (what nbclient and writing need)."""
    data = read_notebook_json(path)
    if data.get("nbformat") != 4:
        raise InputError(
            f"{path}: nbformat {data.get('nbformat')!r} is not supported; open and save it with a "
            "current Jupyter to convert it to nbformat 4."
        )
    return data


def _cell_index(data: dict[str, Any], cell: str, path: Path) -> int:
    """The 0-based index of the code cell named by its 1-based number or its id."""
    cells: list[Any] = data["cells"]
    index = int(cell) - 1 if cell.isdigit() and 1 <= int(cell) <= len(cells) else None
    if index is None:
        index = next((i for i, c in enumerate(cells) if isinstance(c, dict) and c.get("id") == cell), None)
    if index is None:
        raise InputError(f"{path}: no cell {cell!r}: give a cell number from 1 to {len(cells)}, or a cell id.")
    chosen = cells[index]
    if not isinstance(chosen, dict) or chosen.get("cell_type") != "code":
        kind = chosen.get("cell_type") if isinstance(chosen, dict) else None
        raise InputError(
            f"{path}: cell {index + 1} is a {kind or 'malformed'} cell, not a code cell: no step runs there."
        )
    if not _executes(chosen):
        raise InputError(
            f"{path}: cell {index + 1} is not executed headlessly (it has no code, or is tagged "
            "skip-execution): no step runs there."
        )
    return index


def _warn_unreadable(found: Scan) -> None:
    for problem in found.problems:
        _warn(f"{problem} Left as it is.")


# Execution ---------------------------------------------------------------------------------------------------------


def _client(nb: Any, path: Path, timeout: int | None, progress: _Progress) -> Any:
    """An nbclient client for ``nb``, its kernel started in the notebook's folder, reporting to ``progress``."""
    import nbclient

    # store_widget_state=False: a step's widgets are closed when it ends, and saving their state would only
    # grow the file (nbclient keeps the state of closed widgets too).
    return nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_execute=progress.start,
        on_cell_executed=progress.done,
    )


@contextmanager
def _failures(progress: _Progress, timeout: int | None, unchanged: str) -> Iterator[None]:
    """Turn what stops an execution into `_Failed` with where and why (and ``unchanged``), closing the progress."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    try:
        yield
    except CellExecutionError as e:
        progress.end_line("error")
        _print_traceback(getattr(e, "traceback", ""))
        raise _Failed(f"cell {progress.cell_number} raised {e.ename}: {e.evalue}\n{unchanged}") from None
    except CellTimeoutError:
        progress.end_line("timed out")
        raise _Failed(
            f"cell {progress.cell_number} ran longer than {timeout} second{_s(timeout or 0)}.\n{unchanged}"
        ) from None
    except DeadKernelError as e:
        progress.end_line("kernel died")
        raise _Failed(f"the kernel died while running cell {progress.cell_number} ({e}).\n{unchanged}") from None
    except KeyboardInterrupt:
        progress.end_line("interrupted")
        raise
    except Exception as e:  # the kernel could not start, or nbclient failed otherwise
        progress.end_line("failed")
        raise _Failed(f"the notebook could not be executed: {type(e).__name__}: {e}\n{unchanged}") from None


class _Progress:
    """Progress on stderr, per executed code cell.

    On a terminal, one bar updated in place (``[#####.....] 12/40 cells``); otherwise one line per cell
    (``[3/12] cell 5 ... ok 0.4 s``), which logs keep readable.
    """

    WIDTH = 20
    """Characters of the bar."""

    def __init__(self, nb: Any, stream: TextIO, *, tty: bool | None = None) -> None:
        self._stream = stream
        self._tty = _isatty(stream) if tty is None else tty
        self.total = sum(1 for cell in nb.cells if _executes(cell))
        self.count = 0
        self.cell_number = 0
        """The 1-based position in the notebook of the cell executing (or last executed)."""
        self._started = 0.0
        self._began = time.monotonic()
        self._open = False

    def start(self, cell: Any, cell_index: int) -> None:
        """Before a code cell runs."""
        self.count += 1
        self.cell_number = cell_index + 1
        self._started = time.monotonic()
        if self._tty:
            self._bar(self.count - 1, f"cell {self.cell_number} ...")
        else:
            self._stream.write(f"[{self.count}/{self.total}] cell {self.cell_number} ...")
            self._stream.flush()
        self._open = True

    def done(self, cell: Any, cell_index: int, execute_reply: Mapping[str, Any] | None) -> None:
        """After a code cell ran (nbclient calls it before raising for a cell's error)."""
        status = (execute_reply or {}).get("content", {}).get("status")
        if status == "error":
            return
        if self._tty:
            self._bar(self.count, f"{time.monotonic() - self._began:.1f} s")
        else:
            self.end_line(f"ok {time.monotonic() - self._started:.1f} s")

    def end_line(self, text: str) -> None:
        """Close the current line, if one is open (with ``text`` saying how the cell ended)."""
        if not self._open:
            return
        if self._tty:
            self._bar(self.count - 1, f"cell {self.cell_number} {text}")
            self._stream.write("\n")
            self._stream.flush()
        else:
            self._stream.write(f" {text}\n")
            self._stream.flush()
        self._open = False

    def close(self) -> None:
        """After the last cell: end the bar's line (the per-cell lines are ended already)."""
        if self._tty and self._open:
            self._stream.write("\n")
            self._stream.flush()
        self._open = False

    def _bar(self, done: int, note: str) -> None:
        filled = self.WIDTH * done // self.total if self.total else self.WIDTH
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(f"\r[{bar}] {done}/{self.total} cells  {note}\x1b[K")
        self._stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a stand-in without isatty, or a closed stream
        return False


def _source(cell: Mapping[str, Any]) -> str:
    """A cell's source as one string (a saved notebook may hold it as a list of lines)."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _executes(cell: Any) -> bool:
    """Whether nbclient executes this cell (its rule: a non-empty code cell not tagged ``skip-execution``)."""
    tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell.get("metadata"), Mapping) else []
    return bool(
        cell.get("cell_type") == "code"
        and _source(cell).strip()
        and "skip-execution" not in (tags if isinstance(tags, list) else [])
    )


def _print_traceback(traceback: str) -> None:
    text = _ANSI.sub("", traceback or "").rstrip()
    if text:
        _say(text, file=sys.stderr)


# Writing -----------------------------------------------------------------------------------------------------------


def _notebook_text(nb: Any) -> str:
    """The notebook in nbformat's own layout (indent 1, sorted keys, multi-line strings as lists of lines).

    The notebook metadata's records block is written apart, in the same layout, and put in its place: nbformat
    copies and converts the whole notebook twice before writing it, which for a notebook holding many recordings
    (tens of MB) took seconds per MB and a gigabyte of memory. The block needs none of it (it is plain JSON).
    """
    import uuid

    import nbformat

    metadata = nb.get("metadata")
    block = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    if block is not None:
        marker = json.dumps(f"agl-notebook-records-{uuid.uuid4().hex}")
        nb = {**nb, "metadata": {**metadata, METADATA_KEY: json.loads(marker)}}  # shallow: the caller's is kept
    text: str = nbformat.writes(nbformat.from_dict(nb))  # type: ignore[no-untyped-call]
    text = text if text.endswith("\n") else text + "\n"
    if block is None:
        return text
    at = text.index(marker)
    line = text[text.rindex("\n", 0, at) + 1 : at]
    indent = line[: len(line) - len(line.lstrip(" "))]
    encoded = json.dumps(block, indent=1, sort_keys=True, ensure_ascii=False, separators=(",", ": "))
    return text[:at] + encoded.replace("\n", "\n" + indent) + text[at + len(marker) :]


# Messages ----------------------------------------------------------------------------------------------------------


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _say(text: str, *, file: TextIO | None = None) -> None:
    """Print ``text`` made `printable` line by line: whatever a notebook holds reaches the terminal inert."""
    print("\n".join(printable(line, keep="\t") for line in text.split("\n")), file=file or sys.stdout)


def _error(message: str) -> None:
    _say(f"agl-notebook: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    _say(f"agl-notebook: warning: {message}", file=sys.stderr)
