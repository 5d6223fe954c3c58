"""Reading an agent file: JSON with every pair of every object kept, and problems named by their JSON paths.

An agent file is parsed with an ``object_pairs_hook`` that keeps every key of every object in order, duplicates
included (`PairedObject`): in a command block a repeated key is a second command, kept in its place; anywhere else a
repeated key is reported as a problem, never dropped silently. Paths name commands by position whatever the
block's spelling, so ``functions.lookupOrder.commands[1].api`` is the second command of ``lookupOrder``, an ``api``
command, in ``{"log": ..., "api": ...}`` and in ``[{"log": ...}, {"api": ...}]`` alike.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._files import number_too_long
from ...errors import InputError
from ...payloads import JsonValue


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an agent file."""

    path: str
    """Where: a JSON path such as ``functions.lookupOrder.commands[1].api``."""
    message: str
    """What is wrong and what to do about it."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class AgentInvalidError(InputError):
    """An agent file has problems; ``problems`` lists every one, in file order."""

    def __init__(self, problems: list[Problem], *, source: str = "the agent") -> None:
        self.problems = tuple(problems)
        """Every problem found."""
        listed = "\n".join(f"- {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"{source} has {count} problem{'s' if count != 1 else ''}; nothing was run:\n{listed}")


class PairedObject(dict[str, Any]):
    """A JSON object as read from a file: a dict (the last value of each key) that keeps every pair in order.

    ``pairs`` holds repeated keys too, which a dict (and `agl_notebook.payloads.JsonObject`) cannot.
    """

    pairs: list[tuple[str, Any]]


def _object(pairs: list[tuple[str, Any]]) -> PairedObject:
    obj = PairedObject(pairs)
    obj.pairs = pairs
    return obj


def pairs_of(value: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every key and value of an object in order, duplicates included when it was read from a file."""
    found = getattr(value, "pairs", None)
    return list(found) if found is not None else list(value.items())


def parse_json(text: str, *, source: str = "the agent file") -> Any:
    """Parse JSON text keeping duplicate keys (`PairedObject`).

    Raises:
        AgentInvalidError: It is not JSON; the problem gives the line and column.
    """
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise AgentInvalidError(
            [Problem("", f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.")], source=source
        ) from None
    except RecursionError:
        raise AgentInvalidError([Problem("", "not readable: the JSON is nested too deeply.")], source=source) from None
    except ValueError:  # a number of more than 4,300 digits, which Python refuses to convert
        raise AgentInvalidError([Problem("", f"not readable{number_too_long(text)}.")], source=source) from None


MAX_NESTING = 100
"""How deeply an agent file's JSON may nest (objects and lists in one another): deeper is refused before any check
walks it, so a hostile file meets a problem naming where, never Python's recursion limit."""


def nesting_problem(data: Any, limit: int = MAX_NESTING) -> Problem | None:
    """A problem naming where ``data`` first nests more than ``limit`` levels deep, else None.

    A walk without recursion: an iterator per level, and the keys that lead to the current level (the path is
    spelled only for the problem).
    """
    keys: list[str | int] = []
    levels: list[Any] = [iter([("", data)])]
    while levels:
        for key, value in levels[-1]:
            if isinstance(value, Mapping):
                inner: Any = iter(pairs_of(value))
            elif isinstance(value, list):
                inner = enumerate(value)
            else:
                continue
            keys[len(levels) - 1 :] = [key]
            if len(levels) > limit:
                path = ""
                for k in keys[1:]:
                    path = f"{path}[{k}]" if isinstance(k, int) else key_path(path, k)
                return Problem(path, f"nested more than {limit} levels deep (objects and lists in one another).")
            levels.append(inner)
            break
        else:
            levels.pop()
    return None


def read_source(source: object) -> tuple[Any, str]:
    """The agent's JSON and a name for messages, from a path, JSON text or a dict."""
    if not isinstance(source, str | Path):
        return source, "the agent"  # a dict, or something else the validator will name
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return parse_json(source, source="the agent text"), "the agent text"
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"Cannot read the agent file {path}: {e}.") from None
    return parse_json(text, source=str(path)), str(path)


def key_path(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` for a key that is not a plain name."""
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def kind_of(value: object) -> str:
    """What kind of JSON value ``value`` is, as messages say it ("a string", "an object")."""
    return {
        type(None): "null",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
    }.get(type(value), "an object" if isinstance(value, Mapping) else type(value).__name__)


def suggest(word: str, options: Any) -> str:
    """A hint naming the option closest to ``word`` (' Did you mean ...?'), or '' when none is close."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def shorten_repr(text: str) -> str:
    """``repr(text)``, at most 60 characters."""
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:59] + "…"


def expression_of(value: str) -> str | None:
    """The expression of a dynamic string ``"{ expr }"``, else None."""
    if len(value) >= 2 and value[0] == "{" and value[-1] == "}":
        return value[1:-1]
    return None


def is_constant(raw: Any) -> bool:
    """True when a value as written holds no dynamic string."""
    if isinstance(raw, str):
        return expression_of(raw) is None
    if isinstance(raw, list):
        return all(is_constant(v) for v in raw)
    if isinstance(raw, Mapping):
        return all(is_constant(v) for _, v in pairs_of(raw))
    return True


def plain_json(value: Any) -> JsonValue:
    """A value as plain JSON, for fingerprints.

    An object with repeated keys becomes ``{"$pairs": [[key, value], ...]}``, so nothing is lost.
    """
    if isinstance(value, Mapping):
        pairs = pairs_of(value)
        if len({k for k, _ in pairs}) != len(pairs):
            return {"$pairs": [[k, plain_json(v)] for k, v in pairs]}
        return {k: plain_json(v) for k, v in pairs}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return repr(value)
