"""``agl-notebook explain``: which recording each step of a cell replays from, or why it would not."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .._settings import BLOCK_MODELS, MODE, NOTEBOOK_PATH, UNDER_NBVAL, set_for_kernels
from ..errors import InputError
from ..notebook.nbfile import METADATA_KEY
from ..replay.records import StepRecord, block_from_json
from ..replay.sidecar import namings_in_block, read_sidecar
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    _cell_index,
    _check_metadata_block,
    _existing_notebook_file,
    _Failed,
    _read_v4,
    _s,
    _say,
)
from .execute import _client, _failures, _print_traceback, _Progress
from .report import (
    SHORT_ID,
    scan,
)
from .sidecars import sidecars_of


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
