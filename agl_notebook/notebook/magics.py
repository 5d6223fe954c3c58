"""The ``%agl`` line magic (``%load_ext agl_notebook``).

- ``%agl`` or ``%agl mode``: the mode in force and where it comes from;
- ``%agl mode auto|replay|refresh|off``: set the mode for this kernel (below a Run's and a step's own);
  ``%agl mode default`` drops it;
- ``%agl list``: the notebook's recordings (role, backend, tokens, cell, occurrence), and which are stale and why:
  not used by the latest run of their cell in this kernel (and how they differ from the one it used), or of a cell
  the saved notebook no longer has;
- ``%agl explain``: why the latest steps that ran live did not replay (the nearest recording, the parts that
  differ);
- ``%agl forget ID|ROLE|all``: forget recordings, so those steps run live next time and their new recordings
  replace the old ones in the notebook;
- ``%agl history [CELL]``: each cell's versions of its steps, newest first, with what changed and the result;
- ``%agl diff A B``: what changed from version A to version B (ids or prefixes, as history names them);
- ``%agl versions N``: keep N versions of each step a refresh replaces (2, the current and the previous, unless
  set; docs/iterating.md).

A command the magic does not take is IPython's `UsageError`: one line saying what is wrong, with the usage, and no
traceback.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from .. import _settings
from ..errors import InputError
from ..replay import modes
from ..replay.explain import recent_misses, stale_reasons
from ..replay.versions import ContentIndex, diff_lines, find_version, history_lines, set_keep_versions, versions_of
from .nbfile import read_notebook_json
from .store import NotebookStore, forget

USAGE = (
    "usage: %agl [mode [auto|replay|refresh|off|default] | list | explain | forget ID|ROLE|all | history [CELL] | "
    "diff A B | versions N]"
)


def agl(line: str) -> str:
    """Run one ``%agl`` command and return what it prints; a `UsageError` for a command it does not take."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise _usage_error(f"%agl {line.strip()}: {e}.") from None
    command, rest = (words[0], words[1:]) if words else ("mode", [])
    if command == "mode":
        return _mode(rest)
    if command == "list" and not rest:
        return _list()
    if command == "explain" and not rest:
        return _explain()
    if command == "forget" and len(rest) == 1:
        return _forget(rest[0])
    if command == "history" and len(rest) <= 1:
        return _history(rest[0] if rest else None)
    if command == "diff" and len(rest) == 2:
        return _diff(rest[0], rest[1])
    if command == "versions" and len(rest) == 1 and rest[0].isdigit():
        try:
            set_keep_versions(int(rest[0]))
        except InputError as e:
            raise _usage_error(f"%agl {e}") from None
        return f"A refresh keeps {rest[0]} version(s) of each step it replaces, the current one included."
    if command == "diff":
        raise _usage_error(f"%agl diff takes two version ids, not {len(rest)}.")
    if command in ("history", "versions"):
        raise _usage_error(f"%agl {command}: unexpected {' '.join(rest)!r}.")
    if command in ("list", "explain"):
        raise _usage_error(f"%agl {command} takes nothing after it, not {' '.join(rest)!r}.")
    if command == "forget":
        raise _usage_error(
            "%agl forget takes one id, role or all" + (f", not {len(rest)}: {' '.join(rest)!r}." if rest else ".")
        )
    raise _usage_error(f"%agl has no command {command!r}.")


def _usage_error(problem: str) -> UsageError:
    """IPython shows a `UsageError` as its one line, with no traceback."""
    return UsageError(f"{problem} {USAGE}")


def _mode(rest: list[str]) -> str:
    if rest:
        if len(rest) > 1:
            raise _usage_error(f"%agl mode takes one mode, not {len(rest)}: {' '.join(rest)!r}.")
        if rest[0] == "default":
            modes.session.magic_mode = None
        elif rest[0] in modes.MODES:
            modes.session.magic_mode = modes.check_mode(rest[0], where="%agl mode")
        else:
            raise _usage_error(
                f"%agl mode: unknown mode {rest[0]!r}; the modes are {', '.join(modes.MODES)}, and "
                "default drops the one set here."
            )
    mode = modes.resolve_mode()
    if modes.session.magic_mode is not None:
        source = "set by %agl mode"
    elif _settings.MODE.text():
        source = f"from {modes.ENV_VAR}"
    else:
        source = "the default under nbval" if modes.session.under_nbval else "the default"
    return f"mode {mode} ({source}; a Run's or a step's own mode wins)"


MAGIC_LINES = 200
"""The most lines ``%agl list`` and ``%agl history`` print: their text is saved in the notebook with the cell, and a
10,000-item map would otherwise print a line an item (the command line's `agl-notebook list` and `history` show all)."""


def _bounded(lines: list[str], command: str) -> str:
    """``lines`` joined, at most `MAGIC_LINES` of them, then how many were left out and where to read them all."""
    if len(lines) <= MAGIC_LINES:
        return "\n".join(lines)
    left = len(lines) - MAGIC_LINES
    return "\n".join(
        [
            *lines[:MAGIC_LINES],
            f"... and {left:,} more lines: `agl-notebook {command} NOTEBOOK` in a terminal shows them all.",
        ]
    )


def _list() -> str:
    store = NotebookStore()
    records = store.records()
    if not records:
        return f"No recordings in {store!r}."
    cells = _saved_cells(store.path)
    stale = stale_reasons(records, cells=cells)
    lines = [f"{len(records)} recording(s) in {store!r}:"]
    for r in records:
        tokens = r.usage.input_tokens + r.usage.output_tokens
        number = cells.get(r.cell_id) if cells is not None and r.cell_id else None
        cell = f"cell {number}" if number else f"cell id {r.cell_id}" if r.cell_id else "cell unknown"
        lines.append(
            f"  {r.id[:12]}  role {r.role!r}  {r.backend}  {tokens} tokens  {cell}  occurrence {r.occurrence + 1}"
        )
        if r.id in stale:
            lines.append(f"      {stale[r.id]}")
    if stale:
        lines.append(f"{len(stale)} stale: `%agl forget ID` forgets one, so it is neither replayed nor saved again.")
    return _bounded(lines, "list")


def _saved_cells(path: Path | None) -> dict[str, int] | None:
    """The saved notebook's cell ids and their numbers (from 1); None when it cannot be read or has no ids."""
    if path is None:
        return None
    try:
        cells = read_notebook_json(path)["cells"]
    except InputError:  # the store has warned of it already
        return None
    numbers = {
        cell["id"]: n
        for n, cell in enumerate(cells, start=1)
        if isinstance(cell, dict) and isinstance(cell.get("id"), str) and cell["id"]
    }
    return numbers or None


def _explain() -> str:
    misses = recent_misses()
    if not misses:
        return "Every step so far replayed or was run in another mode: nothing to explain."
    return "\n".join(f"- {m.explain()}" for m in misses[-10:])


def _forget(what: str) -> str:
    store = NotebookStore()
    chosen = [
        r for r in store.records() if what == "all" or r.role == what or (len(what) >= 6 and r.id.startswith(what))
    ]
    if not chosen:
        return f"No recording matches {what!r}: give an id (at least 6 characters), a role name, or all."
    forget(r.id for r in chosen)
    return (
        f"Forgot {len(chosen)} recording(s): those steps run live next time, and their new recordings replace "
        "the old ones in the notebook."
    )


def _history(cell: str | None) -> str:
    store = NotebookStore()
    lines = history_lines(store.records(), cell=cell)
    if not lines:
        where = f" of a cell whose id starts with {cell!r}" if cell else ""
        return f"No recordings{where} in {store!r}."
    return _bounded(lines, "history")


def _diff(first: str, second: str) -> str:
    records = NotebookStore().records()
    named = versions_of(records)
    found = []
    for given in (first, second):
        version = find_version(named, given)
        if isinstance(version, str):
            raise _usage_error(f"%agl diff: {version}.")
        found.append(version)
    (a_name, a), (b_name, b) = found
    return "\n".join([f"{a_name[:14]} -> {b_name[:14]}", *diff_lines(a, b, ContentIndex(records))])


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%agl``."""

    def magic(line: str) -> None:
        print(agl(line))

    ipython.register_magic_function(magic, magic_kind="line", magic_name="agl")
