"""Files: the one atomic writer and the one JSON-file reader every part of the package uses.

A write goes through a temporary file in the same folder, flushed to disk, given the permissions of the file it
replaces, then renamed over it: a crash or a full disk leaves the old file or the new one, never half of one, and a
notebook someone made read-only for the group stays so. A read names the file and what is wrong with it.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from .errors import InputError


def write_atomically(path: Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8, newlines kept as they are; bytes as they are) to ``path``, keeping its mode.

    A new file gets the permissions the umask allows, as ``open`` would give it; missing folders are made.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    import tempfile  # lazily: it costs a few ms of `import agl_notebook`, and only a write needs it

    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_json_file(path: Path, *, kind: str | None = None) -> Any:
    """The JSON value in ``path``, or an `InputError` naming the file and what is wrong.

    Args:
        path: The file.
        kind: What the file should be (``"notebook"``), named in the error when it is not JSON.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot be read ({e}).") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        what = f"not a {kind}: invalid JSON" if kind else "invalid JSON"
        if isinstance(e, json.JSONDecodeError):
            where = f" at line {e.lineno}, column {e.colno} ({e.msg})"
        elif isinstance(e, RecursionError):
            where = " (nested too deeply)"
        else:
            where = number_too_long(text)
        raise InputError(f"{path}: {what}{where}.") from None


def number_too_long(text: str) -> str:
    """Where JSON ``text`` holds a number too long to read, for a message (its parse raised ValueError).

    Python refuses to convert an integer of more than 4,300 digits (`sys.get_int_max_str_digits`: converting one
    takes quadratic time), so ``json.loads`` raises a plain ValueError for one, without its position.
    """
    import re

    limit = sys.get_int_max_str_digits() or 4300
    for found in re.finditer(rf"-?\d{{{limit + 1},}}", text):
        before = text[: found.start()]
        if before.count('"') - before.count('\\"') & 1:
            continue  # inside a string, most likely: strings may hold digits
        line = before.count("\n") + 1
        column = found.start() - (before.rfind("\n") + 1) + 1
        return (
            f" at line {line}, column {column} (a number of {len(found.group().lstrip('-')):,} digits; "
            f"numbers of more than {limit:,} digits are not read)"
        )
    return f" (a number of more than {limit:,} digits, which is not read)"
