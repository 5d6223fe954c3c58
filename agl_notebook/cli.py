"""The ``agl-notebook`` command: execute notebooks headlessly and move recordings into notebook metadata.

- ``agl-notebook execute NOTEBOOK [--record] [--mode MODE] [--timeout SECONDS] [--output PATH]`` runs every code
  cell with nbclient in a fresh ``python3`` kernel started in the notebook's folder, with ``AGL_NOTEBOOK_PATH`` set
  so the kernel reads the recordings saved in the notebook (and ``AGL_NOTEBOOK_MODE`` when ``--mode`` is given).
  The executed notebook is written back (or to ``--output``) as nbclient leaves it, each finished step's record in
  its output metadata (path 2); with ``--record`` every record is then moved into the notebook metadata (path 3).
- ``agl-notebook consolidate NOTEBOOK`` moves the records found in outputs' metadata into the notebook metadata.

Nothing is written unless everything before the write succeeded, and a write is atomic (a temporary file in the
same folder, then `os.replace`), so a failure leaves the original file as it was.

Exit codes: 0 done; 1 the execution failed (a cell raised, timed out, or the kernel died); 2 the command cannot
start (no such file, not a notebook, a corrupt recordings block, a bad option).
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from .errors import InputError
from .notebook.locate import PATH_VARIABLE
from .notebook.nbfile import METADATA_KEY, consolidate, read_notebook_json, records_in_notebook
from .replay.modes import ENV_VAR, MODES, NBVAL_VARIABLE
from .replay.records import block_from_json

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Failed(Exception):
    """The execution failed; the message says where and why (exit code 1)."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse already printed
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        if args.command == "execute":
            return _execute(Path(args.notebook), record=args.record, mode=args.mode, timeout=args.timeout,
                            output=Path(args.output) if args.output is not None else None)
        return _consolidate(Path(args.notebook))
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
        description="Execute notebooks that run agl_notebook steps, and keep their recordings in the notebook.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    execute = commands.add_parser(
        "execute", help="execute a notebook headlessly (nbclient) and write it back",
        description="Execute every code cell in a fresh python3 kernel started in the notebook's folder and write "
                    "the executed notebook back (or to --output). Nothing is written if a cell fails.")
    execute.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    execute.add_argument("--record", action="store_true",
                         help="move every step record into the notebook metadata (where it survives clearing "
                              "outputs) instead of leaving it in the outputs' metadata")
    execute.add_argument("--mode", choices=MODES,
                         help=f"the replay mode for the kernel ({ENV_VAR}); by default the environment's, else auto")
    execute.add_argument("--timeout", type=_positive_int, default=None, metavar="SECONDS",
                         help="the longest one cell may run (default: no limit)")
    execute.add_argument("--output", metavar="PATH", help="write the executed notebook here instead of in place")

    merge = commands.add_parser(
        "consolidate", help="move records from outputs' metadata into the notebook metadata",
        description="Move the step records that finished steps left in their outputs' metadata into the notebook "
                    "metadata, where they survive clearing outputs.")
    merge.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value}")
    return value


# Commands ----------------------------------------------------------------------------------------------------------


def _execute(path: Path, *, record: bool, mode: str | None, timeout: int | None, output: Path | None) -> int:
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = _existing_notebook_file(path)
    target = _output_path(output) if output is not None else path
    data = read_notebook_json(path)
    if data.get("nbformat") != 4:
        raise InputError(f"{path}: nbformat {data.get('nbformat')!r} is not supported; open and save it with a "
                         "current Jupyter to convert it to nbformat 4.")
    if record:
        _check_metadata_block(data, path)
    else:
        for problem in _metadata_block_problems(data, path):
            _warn(problem)
    # nbformat's reader, not the dict: it joins the lists of lines a saved notebook holds into strings.
    original_text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(original_text, as_version=4)  # type: ignore[no-untyped-call]
    if record:
        # Records the original left in outputs (path 2) are kept even if this execution does not display them again.
        consolidate(nb)

    progress = _Progress(nb, sys.stderr)
    # store_widget_state=False: a step's widgets are closed when it ends, and saving their state would only
    # grow the file (nbclient keeps the state of closed widgets too).
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                                     resources={"metadata": {"path": str(path.parent)}},
                                     on_cell_execute=progress.start, on_cell_executed=progress.done)
    settings: dict[str, str | None] = {PATH_VARIABLE: str(path), NBVAL_VARIABLE: None}
    if mode is not None:
        settings[ENV_VAR] = mode
    started = time.monotonic()
    try:
        with _environment(settings):
            client.execute()
    except CellExecutionError as e:
        progress.end_line("error")
        _print_traceback(getattr(e, "traceback", ""))
        raise _Failed(f"cell {progress.cell_number} raised {e.ename}: {e.evalue}\n"
                      f"Nothing was written; {path} is unchanged.") from None
    except CellTimeoutError:
        progress.end_line("timed out")
        raise _Failed(f"cell {progress.cell_number} ran longer than {timeout} second{_s(timeout or 0)}.\n"
                      f"Nothing was written; {path} is unchanged.") from None
    except DeadKernelError as e:
        progress.end_line("kernel died")
        raise _Failed(f"the kernel died while running cell {progress.cell_number} ({e}).\n"
                      f"Nothing was written; {path} is unchanged.") from None
    except KeyboardInterrupt:
        progress.end_line("interrupted")
        raise
    except Exception as e:  # the kernel could not start, or nbclient failed otherwise
        progress.end_line("failed")
        raise _Failed(f"the notebook could not be executed: {type(e).__name__}: {e}\n"
                      f"Nothing was written; {path} is unchanged.") from None

    moved = consolidate(nb) if record else 0
    if target == path and path.read_text(encoding="utf-8") != original_text:
        # Someone saved the notebook (JupyterLab, say) while it ran: writing would lose their edits.
        raise _Failed(f"{path} changed on disk while it was being executed; nothing was written, so those changes "
                      "are kept. Run it again, or pass --output to write the executed copy elsewhere.")
    _write_atomically(target, _notebook_text(nb))
    found = records_in_notebook(nb)
    summary = f"executed {progress.total} code cell{_s(progress.total)} in {time.monotonic() - started:.1f} s"
    if record:
        summary += (f"; {moved} record{_s(moved)} moved into the notebook metadata "
                    f"({len(found.in_metadata)} there in all)")
    else:
        summary += f"; {len(found.in_outputs)} record{_s(len(found.in_outputs))} in output metadata"
    print(f"{summary}; wrote {target}", file=sys.stderr)
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
        print(f"{path}: no records in outputs' metadata; nothing to move.")
        return EXIT_OK
    _write_atomically(path, _notebook_text(data))
    after = records_in_notebook(data)
    print(f"{path}: moved {moved} record{_s(moved)} into the notebook metadata "
          f"({len(after.in_metadata)} there in all).")
    return EXIT_OK


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


def _check_metadata_block(data: dict[str, Any], path: Path) -> None:
    """Refuse a notebook whose records block is corrupt: rewriting it would lose the recordings it holds."""
    problems = _metadata_block_problems(data, path)
    if problems:
        raise InputError(f"{problems[0]}\nThe recordings block is corrupt, so the notebook was not written (that "
                         f"would replace the block). Fix metadata[{METADATA_KEY!r}] by hand, or remove it to "
                         "record again.")


# Execution ---------------------------------------------------------------------------------------------------------


class _Progress:
    """One line on stderr per executed code cell: ``[3/12] cell 5 ... ok 0.4 s``."""

    def __init__(self, nb: Any, stream: TextIO) -> None:
        self._stream = stream
        self.total = sum(1 for cell in nb.cells if _executes(cell))
        self.count = 0
        self.cell_number = 0
        """The 1-based position in the notebook of the cell executing (or last executed)."""
        self._started = 0.0
        self._open = False

    def start(self, cell: Any, cell_index: int) -> None:
        """Before a code cell runs."""
        self.count += 1
        self.cell_number = cell_index + 1
        self._started = time.monotonic()
        self._stream.write(f"[{self.count}/{self.total}] cell {self.cell_number} ...")
        self._stream.flush()
        self._open = True

    def done(self, cell: Any, cell_index: int, execute_reply: Mapping[str, Any] | None) -> None:
        """After a code cell ran (nbclient calls it before raising for a cell's error)."""
        status = (execute_reply or {}).get("content", {}).get("status")
        if status != "error":
            self.end_line(f"ok {time.monotonic() - self._started:.1f} s")

    def end_line(self, text: str) -> None:
        """Close the current line, if one is open."""
        if self._open:
            self._stream.write(f" {text}\n")
            self._stream.flush()
            self._open = False


def _executes(cell: Any) -> bool:
    """Whether nbclient executes this cell (its rule: a non-empty code cell not tagged ``skip-execution``)."""
    return bool(cell.get("cell_type") == "code" and str(cell.get("source", "")).strip()
                and "skip-execution" not in cell.get("metadata", {}).get("tags", []))


@contextmanager
def _environment(settings: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, remove) environment variables for the kernel to inherit, restoring them afterwards."""
    saved = {name: os.environ.get(name) for name in settings}
    try:
        for name, value in settings.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _print_traceback(traceback: str) -> None:
    text = _ANSI.sub("", traceback or "").rstrip()
    if text:
        print(text, file=sys.stderr)


# Writing -----------------------------------------------------------------------------------------------------------


def _notebook_text(nb: Any) -> str:
    """The notebook in nbformat's own layout (indent 1, sorted keys, multi-line strings as lists of lines)."""
    import nbformat

    text: str = nbformat.writes(nbformat.from_dict(nb))  # type: ignore[no-untyped-call]
    return text if text.endswith("\n") else text + "\n"


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, keeping the file's permissions."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# Messages ----------------------------------------------------------------------------------------------------------


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _error(message: str) -> None:
    print(f"agl-notebook: error: {message}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"agl-notebook: warning: {message}", file=sys.stderr)
