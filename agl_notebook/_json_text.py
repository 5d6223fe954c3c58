"""JSON text to search, never to keep: the fastest encoder at hand, for a text only read and then dropped.

A live step's record is scrubbed as one JSON text (`replay.stores`): is there anything to scrub? The standard
encoder took about half of what recording adds to a step (a record's 2 KB of small objects: 19 µs, where orjson
takes 1.6). A text that is kept (a notebook's record, a digest's canonical form) stays the standard encoder's: its
spelling is part of a format. This one is compact (no space after ``,`` and ``:``), which the scrubber reads as it
reads the spaced one, and writes a non-finite float as ``null`` (no secret is a number).
"""

from __future__ import annotations

from collections.abc import Callable

_dumps: Callable[[object], bytes] | None = None
_loaded = False


def json_to_search(value: object) -> str | None:
    """``value`` as compact JSON text, or None where the fast encoder is missing or cannot spell it.

    A dataclass is spelled as an object of its fields (orjson's own walk, at C speed): a field whose name starts with
    ``_`` would be left out, so the records' dataclasses have none (tests/core/test_json_text.py). None for what
    only the standard encoder spells (integers past 64 bits, a lone surrogate, bytes, keys that are not strings):
    the caller then encodes it the standard way.
    """
    global _dumps, _loaded
    if not _loaded:  # imported when first used: `import agl_notebook` stays as fast as before
        _loaded = True
        try:
            import orjson
        except ImportError:  # installed without its wheel (a platform orjson does not build for): the standard way
            _dumps = None
        else:
            _dumps = orjson.dumps
    if _dumps is None:
        return None
    try:
        return _dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError, a TypeError: a value it cannot spell
        return None
