"""``agl-notebook execute``: every code cell run headlessly with nbclient, the recordings kept."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from .._files import write_atomically
from .._settings import ANSWERS, APPROVALS, MODE, NOTEBOOK_PATH, RUNNER, UNDER_NBVAL, set_for_kernels
from ..notebook.nbfile import METADATA_KEY, consolidate, records_in_notebook
from ._common import (
    _ANSI,
    EXIT_OK,
    _check_metadata_block,
    _executes,
    _existing_notebook_file,
    _Failed,
    _metadata_block_problems,
    _output_path,
    _read_v4,
    _s,
    _say,
    _warn,
)

EXECUTE_RUNNER = "agl-notebook execute"
"""What `AGL_NOTEBOOK_RUNNER` says in the kernels this command starts."""

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
    # RUNNER: a headless error (a question with no answer) then names this command's --answers.
    settings: dict[str, str | None] = {
        NOTEBOOK_PATH.name: str(path),
        UNDER_NBVAL.name: None,
        RUNNER.name: EXECUTE_RUNNER,
    }
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
