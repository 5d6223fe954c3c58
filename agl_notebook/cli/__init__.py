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
- ``agl-notebook list NOTEBOOK [--json]``: the recordings, and whether a cell still uses each (`.report`).
- ``agl-notebook explain NOTEBOOK CELL``: runs cells 1..CELL headlessly in mode replay with model calls blocked,
  writing nothing, and says which recording each step of CELL replays from, or why the first miss missed.
- ``agl-notebook clear NOTEBOOK (--all | ID...)`` and ``agl-notebook gc NOTEBOOK [--unknown-too]`` remove
  recordings (given ones; or the ones no cell uses), with ``--dry-run``.
- ``agl-notebook batches list|cancel|forget NOTEBOOK``: the Message Batches of the notebook's batch maps, from the
  states their sidecars keep, told, canceled or forgotten (a reset line appended) (`.batches`).

Nothing is written unless everything before the write succeeded, and a write is atomic (a temporary file in the
same folder, then `os.replace`), so a failure leaves the original file as it was.

``agl-notebook --version`` prints the installed version.

Exit codes: 0 done; 1 the execution failed (a cell raised, timed out, or the kernel died; for ``explain``, a step of
the cell would not replay); 2 the command cannot start (no such file, not a notebook, a bad option or recording id,
or a corrupt recordings block in the notebook metadata for every command but plain ``execute``, which warns, runs,
and writes the block back as it was); 141 the reader of its output went away (``agl-notebook list NB | head``): the
rest of the output is dropped quietly, as a shell's own commands do on SIGPIPE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .. import __version__
from .._settings import ANSWERS, APPROVALS, MODE
from ..errors import InputError
from ..notebook.nbfile import read_notebook_json
from ..replay.modes import MODES
from ._common import EXIT_FAILED, EXIT_USAGE, _error, _Failed, _say
from .batches import ClientFactory, batches_command
from .execute import _execute
from .explain import _explain
from .records import _clear, _consolidate, _gc, _history, _list
from .report import MIN_PREFIX

EXIT_BROKEN_PIPE = 141
"""The reader of the output went away: 128 + SIGPIPE, what a shell reports for a command ended by it."""


def main(argv: list[str] | None = None, *, batch_client: ClientFactory | None = None) -> int:
    """Run the command line; returns the exit code (``batch_client`` makes the client ``batches`` asks with)."""
    try:
        code = _main(argv, batch_client=batch_client)
        sys.stdout.flush()  # here, while the broken pipe can still be caught, rather than at the interpreter's exit
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush at exit does not fail a second time.

    What the Python documentation advises for SIGPIPE (library/signal.html, "Note on SIGPIPE").
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture): nothing left to flush
        pass


def _main(argv: list[str] | None, *, batch_client: ClientFactory | None) -> int:
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
        if args.command == "history":
            return _history(path, args.cell)
        if args.command == "clear":
            return _clear(path, args.ids, everything=args.all, dry_run=args.dry_run)
        if args.command == "gc":
            return _gc(path, unknown_too=args.unknown_too, dry_run=args.dry_run)
        if args.command == "batches":
            return batches_command(
                args.action, path, read_notebook_json(path), say=_say, client=batch_client, map_key=args.map
            )
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
    parser.add_argument("--version", action="version", version=f"agl-notebook {__version__}")
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

    history = commands.add_parser(
        "history",
        help="list each cell's versions of its steps, newest first, with what changed",
        description="List the versions of each step the notebook keeps (same cell, role, input and occurrence), "
        "newest first: its id (a version a refresh replaced is named ID~1), when it was recorded, what changed "
        "since the version before it, and its result's headline. Nothing runs and nothing is written.",
    )
    history.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    history.add_argument("--cell", default=None, help="only the cell whose id starts with this")

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
        help="list, cancel or forget the Message Batches of the notebook's batch maps",
        description="Read the batch state each batch map keeps in its sidecar file (those the notebook names, "
        "and the other sidecar files beside it), and ask the Message Batches API for each batch's status (list) "
        "or cancel those in progress (cancel); both need the API's credentials, as a live step does, and write "
        "nothing. A map run again re-attaches to its batches; the requests of a canceled one are sent again. "
        "forget asks nothing of the API: it appends to each map's sidecar a state with no batch (never rewriting "
        "the file), so the map run again sends its unfinished items in a new batch: the way out when the API no "
        "longer knows a batch (deleted, another workspace's key, results past 29 days).",
    )
    batches.add_argument(
        "action",
        choices=["list", "cancel", "forget"],
        help="list the batches, cancel those in progress, or forget them (a reset line appended to the sidecar)",
    )
    batches.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    batches.add_argument("--map", metavar="KEY", help="only the batch map of this key (its sidecar KEY.agl.jsonl)")
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
