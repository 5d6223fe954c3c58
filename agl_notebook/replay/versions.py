"""Versions of a step: what a record keeps of what its agent was told, and what changed since its previous version.

A step's record keeps its fingerprint's digests (`StepRecord.parts`) and, since versions, the **contents** of the
parts a person edits (`CONTENT_PARTS`: instructions, tools, the reporting tool, settings), so a later version can say
how they changed. A content is kept once per notebook: a record leaves out a part whose digest another record of its
store holds already (50 steps sharing one 20 KB system text keep it once), and a reader finds it by digest
(`ContentIndex`). A content over `CONTENT_CHARS` is not kept; nor is any by a record made before versions: a change
of such a part is said as "differs", with no diff.

A step's **previous version** is the record of the same cell, role, input and occurrence that a run did not match
(mode ``auto``) or replaced (mode ``refresh``, which keeps it inside the new record, `StepRecord.replaced`). The new
record carries its own **change** summary (`change_summary`, format `CHANGE_FORMAT`), so its view never depends on
the previous record being kept: which parts differ, the instructions as a capped line diff, tools added, removed
and changed, backend and settings before and after, the result field by field (long text as a word diff), and
tokens, dollars, turns and tool calls before and after.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..payloads import JsonObject, JsonValue
from ..transcript import ToolUseBlock

if TYPE_CHECKING:
    from .records import StepRecord

CONTENT_PARTS = ("instructions", "tools", "reporting", "settings")
"""The fingerprint parts whose contents a record keeps, beside their digests."""
CONTENT_CHARS = 200_000
"""A content (a part as canonical JSON, or the instructions' text) longer than this is not kept: its change is said
as "differs". Each distinct content is kept once per notebook, so this bounds what versions add per edit."""
CHANGE_FORMAT = 1
"""The format of a record's ``change`` summary."""
DIFF_LINES = 120
"""The most lines an instructions diff keeps (the rest are counted)."""
LINE_CHARS = 400
"""A diff line, and a before/after value, keeps at most this many characters."""
WORD_DIFF_CHARS = 6_000
"""A word diff keeps at most this many characters of words."""
LONG_TEXT = 120
"""A result field whose text is longer than this (before or after) is shown as a word diff."""
PREVIOUS_RESULT_CHARS = 20_000
"""The previous result a map item's change keeps whole (as JSON) so its score can be computed again, at most."""
KEEP_VERSIONS = 2
"""How many versions of a step a refresh keeps by default: the current one and the one it replaced."""

_keep_versions = KEEP_VERSIONS


def keep_versions() -> int:
    """How many versions of a step a refresh keeps (the current one included): `KEEP_VERSIONS` unless set."""
    return _keep_versions


def set_keep_versions(count: int) -> None:
    """Keep ``count`` versions of each step a refresh replaces (``%agl versions N``; opt-in past 2)."""
    from .._families import InputError

    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100:
        raise InputError(f"versions: expected a whole number of versions from 1 to 100, got {count!r}.")
    global _keep_versions
    _keep_versions = count


def contents_of(
    system: str, tools: Sequence[JsonValue], reporting: JsonValue, settings: JsonValue
) -> dict[str, JsonValue]:
    """The contents of `CONTENT_PARTS` (each left out when over `CONTENT_CHARS`)."""
    contents: JsonObject = {}
    for part, value in (
        ("instructions", system),
        ("tools", list(tools)),
        ("reporting", reporting),
        ("settings", settings),
    ):
        size = len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False))
        if size <= CONTENT_CHARS:
            contents[part] = value
    return contents


class ContentIndex:
    """The contents a store's records keep, by (part, digest): how a record's left-out parts are found.

    Each content counts the records that keep it, so a record `remove`d (replaced or forgotten in its store) takes
    its contents out once no other record keeps them: a `RecordIndex` follows its store put by put.
    """

    def __init__(self, records: Iterable[StepRecord] = ()) -> None:
        self._by_digest: dict[tuple[str, str], JsonValue] = {}
        self._keepers: dict[tuple[str, str], int] = {}
        for record in records:
            if record.contents or record.replaced is not None:  # most records keep none: skipped at loop speed
                self.add(record)

    def add(self, record: StepRecord) -> None:
        """Index the contents ``record`` keeps (and those of the versions it keeps inside it)."""
        while record is not None:
            for part, value in record.contents.items():
                digest = record.parts.get(part)
                if digest is not None:
                    key = (part, digest)
                    self._by_digest.setdefault(key, value)
                    self._keepers[key] = self._keepers.get(key, 0) + 1
            record = record.replaced  # type: ignore[assignment]

    def remove(self, record: StepRecord) -> None:
        """Take out what `add` put in for ``record``: a content no other record keeps is gone."""
        while record is not None:
            for part in record.contents:
                digest = record.parts.get(part)
                if digest is None:
                    continue
                key = (part, digest)
                count = self._keepers.get(key, 0)
                if count > 1:
                    self._keepers[key] = count - 1
                elif count == 1:
                    del self._keepers[key], self._by_digest[key]
            record = record.replaced  # type: ignore[assignment]

    def holds(self, part: str, digest: str) -> bool:
        """Whether a record indexed keeps this content."""
        return (part, digest) in self._by_digest

    def content(self, record: StepRecord, part: str) -> tuple[bool, JsonValue]:
        """``(found, value)``: the content of ``part`` of ``record``, its own or found by digest."""
        if part in record.contents:
            return True, record.contents[part]
        digest = record.parts.get(part)
        key = (part, digest or "")
        return (True, self._by_digest[key]) if key in self._by_digest else (False, None)


class RecordIndex:
    """A store's records as a live step's versions look them up, kept up to date as the store changes.

    Their contents (`ContentIndex`) and the records by (role, input digest, occurrence), in the store's order, so
    `previous` finds what `previous_version` finds in ``store.records()`` without a pass over every record: a
    store of 1,000 records paid that pass, and the index's building, on each live step. A store that offers one
    (`IndexedStore`) tells it of every record it puts, replaces or drops.
    """

    def __init__(self, records: Iterable[StepRecord] = ()) -> None:
        self.contents = ContentIndex()
        """The contents the records keep."""
        self._by_key: dict[tuple[str, str, int], list[StepRecord]] = {}
        by_key, add = self._by_key, self.contents.add
        for record in records:  # `put` inlined: the first live step of a store pays this pass once
            if record.contents or record.replaced is not None:
                add(record)
            key = (record.role, record.parts.get("input", ""), record.occurrence)
            same = by_key.get(key)
            if same is None:
                by_key[key] = [record]
            else:
                same.append(record)

    def put(self, record: StepRecord, old: StepRecord | None = None) -> None:
        """Index ``record`` in the place of ``old``, the record of its id it replaces (found by its id if not given)."""
        same = self._by_key.setdefault((record.role, record.parts.get("input", ""), record.occurrence), [])
        if old is None:
            old = next((held for held in same if held.id == record.id), None)
        if old is record:
            return
        if old is not None:
            self.contents.remove(old)
        if record.contents or record.replaced is not None:
            self.contents.add(record)
        at = _place_of(same, old) if old is not None else None
        if at is None:
            same.append(record)
        else:
            same[at] = record

    def remove(self, record: StepRecord) -> None:
        """Forget ``record`` (indexed)."""
        self.contents.remove(record)
        key = (record.role, record.parts.get("input", ""), record.occurrence)
        same = self._by_key.get(key, [])
        at = _place_of(same, record)
        if at is not None:
            del same[at]
        if not same:
            self._by_key.pop(key, None)

    def previous(
        self,
        *,
        cell_id: str | None,
        role: str,
        input_digest: str,
        occurrence: int,
        not_id: str,
        source: str | None = None,
    ) -> StepRecord | None:
        """`previous_version` among the records indexed."""
        same = self._by_key.get((role, input_digest, occurrence))
        if not same:
            return None
        return previous_version(
            same,
            cell_id=cell_id,
            role=role,
            input_digest=input_digest,
            occurrence=occurrence,
            not_id=not_id,
            source=source,
        )


def _place_of(records: list[StepRecord], record: StepRecord) -> int | None:
    """Where ``record`` itself (not an equal one) is in ``records``."""
    return next((i for i, held in enumerate(records) if held is record), None)


@runtime_checkable
class IndexedStore(Protocol):
    """A store that keeps a `RecordIndex` of its records up to date (the memory, file and notebook stores)."""

    def version_index(self) -> RecordIndex:
        """Its records, indexed: the same records as ``records()`` gives, in the same order."""
        ...


def with_versions_kept(
    record: StepRecord, *, contents: JsonObject, change: JsonObject | None, replaced: StepRecord | None
) -> StepRecord:
    """``dataclasses.replace(record, contents=..., change=..., replaced=...)``, for a fifth of its cost.

    These fields decide neither a record's kind nor its format, so its ``__init__`` (twenty-odd fields, and a walk
    of its transcript for kept blocks) need not run again: a live step of a role pays this once.
    """
    copy = object.__new__(type(record))
    fields = copy.__dict__
    fields.update(record.__dict__)
    fields["contents"], fields["change"], fields["replaced"] = contents, change, replaced
    return copy


def deduplicated(contents: Mapping[str, JsonValue], parts: Mapping[str, str], index: ContentIndex) -> JsonObject:
    """``contents`` without the parts the index holds already (another record of the store keeps them)."""
    return {part: value for part, value in contents.items() if not index.holds(part, parts.get(part, ""))}


def previous_version(
    records: Iterable[StepRecord],
    *,
    cell_id: str | None,
    role: str,
    input_digest: str,
    occurrence: int,
    not_id: str,
    source: str | None = None,
) -> StepRecord | None:
    """The newest finished record of the same cell, role, input and occurrence as a step, other than its own.

    The cell is known by its id, or (a headless kernel is told none) by ``source``, the digest of its source.
    """
    found: StepRecord | None = None
    for record in records:
        if (
            record.id != not_id
            and record.failure is None
            and record.partial is None
            and record.role == role
            and record.occurrence == occurrence
            and record.parts.get("input") == input_digest
            and _same_cell(record, cell_id, source)
            and (found is None or record.recorded_at >= found.recorded_at)
        ):
            found = record
    return found


def _same_cell(record: StepRecord, cell_id: str | None, source: str | None) -> bool:
    if cell_id is not None and (record.cell_id == cell_id or any(use.cell_id == cell_id for use in record.cells)):
        return True
    if source is not None and any(use.source == source for use in record.cells):
        return True
    return cell_id is None and source is None and record.cell_id is None  # outside a notebook: one place


class VersionIndex:
    """A map's previous records by (role, input digest, occurrence): one lookup per item, not a search.

    Only records of the map's own cell pair (by the cell's id, or in a headless kernel its source's digest): the same
    rows mapped in another cell, under another model or role, are another experiment, not this map's previous run.
    """

    def __init__(self, records: Iterable[StepRecord], *, cell_id: str | None = None, source: str | None = None) -> None:
        self._by_key: dict[tuple[str, str, int], list[StepRecord]] = {}
        self._cell_id, self._source = cell_id, source
        for record in records:
            if record.partial is None:
                key = (record.role, record.parts.get("input", ""), record.occurrence)
                self._by_key.setdefault(key, []).append(record)

    def previous(self, role: str, input_digest: str, occurrence: int, not_id: str) -> StepRecord | None:
        """The newest record (finished or a failure record) of this key and cell other than ``not_id``."""
        found: StepRecord | None = None
        for record in self._by_key.get((role, input_digest, occurrence), ()):
            if (
                record.id != not_id
                and (found is None or record.recorded_at >= found.recorded_at)
                and _same_cell(record, self._cell_id, self._source)
            ):
                found = record
        return found


def change_summary(
    before: StepRecord, after: StepRecord, index: ContentIndex, *, keep_result: bool = False
) -> JsonObject:
    """What changed from ``before`` to ``after``: everything a view of ``after`` draws of it (format 1).

    ``keep_result``: keep the previous result whole (a map item's, up to `PREVIOUS_RESULT_CHARS`), so a map can
    score it again on replay.
    """
    old_parts, new_parts = before.parts, after.parts
    # Before's parts in order, then after's new ones: each edit's summary is made on every live step of a role.
    differs = [p for p, digest in old_parts.items() if p != "format" and new_parts.get(p) != digest]
    differs += [p for p, digest in new_parts.items() if p not in old_parts and p != "format" and digest is not None]
    change: JsonObject = {"format": CHANGE_FORMAT, "previous": before.id, "previous_recorded_at": before.recorded_at}
    unknown: list[JsonValue] = []
    for part in differs:
        if part not in CONTENT_PARTS:
            continue
        had, old = index.content(before, part)
        has, new = index.content(after, part)
        if not (had and has):
            unknown.append(part)
            continue
        key = (part, before.parts.get(part, ""), after.parts.get(part, ""))
        said = _SAID.get(key)
        if said is None:  # each edit is said once: a map's thousands of items share it
            if part == "instructions" and isinstance(old, str) and isinstance(new, str):
                said = line_diff(old, new)
            elif part in ("tools", "reporting"):
                said = _tools_change(old, new)
            else:
                said = _before_after_keys(old, new)
            if len(_SAID) >= _SAID_LIMIT:
                _SAID.clear()
            _SAID[key] = said
        change[part] = said
    if "backend" in differs:
        change["backend"] = {"before": before.backend, "after": after.backend}
    result = _result_change(before, after)
    if result:
        differs.append("result")
        change["result"] = result
    if before.failure is not None:
        change["previous_failure"] = {"type": before.failure.type, "message": _cut(before.failure.message)}
    if keep_result and before.failure is None:
        text = json.dumps(before.result, ensure_ascii=False)
        if len(text) <= PREVIOUS_RESULT_CHARS:
            change["previous_result"] = before.result
    change["differs"] = list(differs)
    if unknown:
        change["unknown"] = unknown
    old_numbers, new_numbers = _numbers(before), _numbers(after)
    change["numbers"] = {name: [old_numbers[i], new_numbers[i]] for i, name in enumerate(NUMBERS)}
    return change


_SAID: dict[tuple[str, str, str], JsonObject] = {}
_SAID_LIMIT = 256

NUMBERS = ("tokens", "usd", "turns", "tool_calls")
"""The numbers a change says before and after."""


def _numbers(record: StepRecord) -> tuple[JsonValue, ...]:
    """`NUMBERS` of a record, in their order, in one pass over its transcript."""
    turns = calls = 0
    for message in record.transcript:
        if message.role == "assistant":
            turns += 1
            for block in message.content:  # not ``tool_uses``, which builds a tuple per message
                if isinstance(block, ToolUseBlock):
                    calls += 1
    usd = record.cost.usd if record.cost is not None else None
    return record.usage.tokens, usd, turns, calls


def line_diff(old: str, new: str) -> JsonObject:
    """A unified diff of two texts by line, at most `DIFF_LINES` lines of at most `LINE_CHARS` characters."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", n=2, lineterm=""))[2:]
    kept = [_cut(line) for line in lines[:DIFF_LINES]]
    diff: JsonObject = {"lines": list(kept)}
    if len(lines) > DIFF_LINES:
        diff["more"] = len(lines) - DIFF_LINES
    return diff


def word_diff(old: str, new: str) -> list[JsonValue]:
    """Two texts as runs of words: ``[op, text]`` with op ``=`` (both), ``-`` (before only), ``+`` (after only)."""
    a, b = old.split(" "), new.split(" ")
    runs: list[JsonValue] = []
    used = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        pieces = [("=", a[i1:i2])] if tag == "equal" else [("-", a[i1:i2]), ("+", b[j1:j2])]
        for op, words in pieces:
            if not words:
                continue
            text = " ".join(words)
            if used + len(text) > WORD_DIFF_CHARS:
                runs.append(["…", f"{len(text) - max(0, WORD_DIFF_CHARS - used):,} more characters"])
                return runs
            used += len(text)
            runs.append([op, text])
    return runs


def _result_change(before: StepRecord, after: StepRecord) -> list[JsonValue]:
    if before.failure is not None or after.failure is not None:
        return [] if before.failure is not None and after.failure is not None else [{"field": "(result)"}]
    old, new = before.result, after.result
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        old, new = {"result": old}, {"result": new}
    fields: list[JsonValue] = []
    for name in dict.fromkeys([*old, *new]):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > LONG_TEXT:
            fields.append({"field": name, "words": word_diff(a, b)})
        else:
            fields.append({"field": name, "before": _short(a), "after": _short(b)})
    return fields


def _tools_change(old: JsonValue, new: JsonValue) -> JsonObject:
    def by_name(value: JsonValue) -> dict[str, JsonValue]:
        specs = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        return {str(s.get("name")): s for s in specs if isinstance(s, dict)}

    a, b = by_name(old), by_name(new)
    added: list[JsonValue] = [n for n in sorted(b) if n not in a]
    removed: list[JsonValue] = [n for n in sorted(a) if n not in b]
    changed: list[JsonValue] = [n for n in sorted(a) if n in b and a[n] != b[n]]
    return {"added": added, "removed": removed, "changed": changed}


def _before_after_keys(old: JsonValue, new: JsonValue) -> JsonObject:
    a = old if isinstance(old, dict) else {}
    b = new if isinstance(new, dict) else {}
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    return {"before": {k: _short(a.get(k)) for k in keys}, "after": {k: _short(b.get(k)) for k in keys}}


def _short(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False)
        return value if len(text) <= LINE_CHARS else _cut(text)
    return value


def _cut(text: str) -> str:
    if len(text) <= LINE_CHARS:
        return text  # whole: the record it goes into is scrubbed as a whole
    # Scrubbed before it is cut: a record is scrubbed when it is kept, and the piece of a secret a cut leaves is no
    # longer the secret the scrubber looks for.
    text = _scrubbed([text])[0]
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + f"… ({len(text) - LINE_CHARS:,} more characters)"


def change_words(change: Mapping[str, JsonValue]) -> str:
    """One line naming what changed: ``instructions, result`` (a part whose contents were not kept says so)."""
    differs = change.get("differs")
    unknown = change.get("unknown")
    names = [str(d) for d in differs] if isinstance(differs, list) else []
    unknown_names = {str(u) for u in unknown} if isinstance(unknown, list) else set()
    if not names:
        return "nothing that a record keeps"
    return ", ".join(f"{n} (differs; not kept before)" if n in unknown_names else n for n in names)


# History: a cell's versions, newest first, and any two side by side ----------------------------------------------

VERSION_MARK = "~"
"""A version kept inside a record is named by the record's id, this mark and how far back it is (``~1``)."""


def versions_of(records: Iterable[StepRecord]) -> list[tuple[str, StepRecord]]:
    """Every version the records hold, named: each record by its id, each version kept inside it as ``id~n``."""
    named: list[tuple[str, StepRecord]] = []
    for record in records:
        inner, depth = record, 0
        while inner is not None:
            named.append((record.id if depth == 0 else f"{record.id}{VERSION_MARK}{depth}", inner))
            inner, depth = inner.replaced, depth + 1  # type: ignore[assignment]
    return named


def history_lines(records: Iterable[StepRecord], *, cell: str | None = None) -> list[str]:
    """A cell's versions newest first (every cell's, by cell), each with what changed and its result's headline.

    Versions of one step are those of one cell, role, input and occurrence. ``cell``: a cell id, or a prefix of one.
    """
    groups: dict[tuple[str, str, str, int], list[tuple[str, StepRecord]]] = {}
    for name, record in versions_of(records):
        cell_id = record.cell_id or next((c.cell_id for c in record.cells if c.cell_id), None) or "(unknown cell)"
        if cell is not None and not cell_id.startswith(cell):
            continue
        key = (cell_id, record.role, record.parts.get("input", ""), record.occurrence)
        groups.setdefault(key, []).append((name, record))
    lines: list[str] = []
    for (cell_id, role, _, occurrence), versions in groups.items():
        # Newest first: by time, then (made within one second) a later record before an earlier one, and a record
        # before the versions kept inside it.
        order = {id(nv): n for n, nv in enumerate(versions)}
        versions.sort(key=lambda nv: (nv[1].recorded_at, VERSION_MARK not in nv[0], order[id(nv)]), reverse=True)
        label = _input_label(versions[0][1].input)
        lines.append(
            f"cell {cell_id}: role {role!r} on {label} (occurrence {occurrence + 1}), {len(versions)} version(s)"
        )
        for name, record in versions:
            changed = change_words(record.change) if record.change is not None else "(no previous version)"
            lines.append(
                f"  {name[:14] if VERSION_MARK not in name else name[:12] + name[name.index(VERSION_MARK) :]}"
                f"  {record.recorded_at or '?'}  changed: {changed}  result: {headline(record)}"
            )
    return _scrubbed(lines)


def headline(record: StepRecord) -> str:
    """A record's result in a few words: its first field's value, or how it failed."""
    if record.failure is not None:
        return f"failed ({record.failure.type})"
    if record.partial is not None:
        return "waiting (partial)"
    text = json.dumps(record.result, ensure_ascii=False, sort_keys=True)
    return _scrubbed_cut(text, 80)


def _input_label(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return repr(_scrubbed_cut(text, 40))


def find_version(named: Sequence[tuple[str, StepRecord]], given: str) -> tuple[str, StepRecord] | str:
    """The version a name or prefix (at least 6 characters) gives, or why none does (one line)."""
    if len(given) < 6:
        return f"{given!r} is too short to name a version: give at least 6 characters of its id"
    matches = [(n, r) for n, r in named if n == given] or [(n, r) for n, r in named if n.startswith(given)]
    if not matches:
        return f"no version has an id starting with {given!r} (%agl history lists them)"
    if len({n for n, _ in matches}) > 1:
        return f"{given!r} starts the ids of {len(matches)} versions; give more of the id"
    return matches[0]


def diff_lines(a: StepRecord, b: StepRecord, index: ContentIndex) -> list[str]:
    """What changed from version ``a`` to version ``b``, as lines of text."""
    change = change_summary(a, b, index)
    lines = [f"changed: {change_words(change)}"]
    instructions = change.get("instructions")
    if isinstance(instructions, dict):
        lines.append("instructions:")
        lines += [f"  {line}" for line in instructions.get("lines", [])]  # type: ignore[union-attr]
        if isinstance(instructions.get("more"), int):
            lines.append(f"  … {instructions['more']:,} more diff lines")
    for part in ("tools", "reporting"):
        tools = change.get(part)
        if isinstance(tools, dict):
            said = [f"{w} {', '.join(map(str, n))}" for w in ("added", "removed", "changed") if (n := tools.get(w))]  # type: ignore[arg-type]
            lines.append(f"{part}: {'; '.join(said) or 'differs'}")
    for part in ("backend", "settings"):
        value = change.get(part)
        if isinstance(value, dict):
            lines.append(f"{part}: {_json(value.get('before'))} -> {_json(value.get('after'))}")
    result = change.get("result")
    if isinstance(result, list):
        for entry in result:
            if not isinstance(entry, dict):
                continue
            words = entry.get("words")
            if isinstance(words, list):
                shown = " ".join(
                    f"[-{run[1]}-]" if run[0] == "-" else f"{{+{run[1]}+}}" if run[0] == "+" else str(run[1])
                    for run in words
                    if isinstance(run, list) and len(run) == 2
                )
                lines.append(f"result {entry.get('field')}: {shown}")
            else:
                lines.append(
                    f"result {entry.get('field')}: {_json(entry.get('before'))} -> {_json(entry.get('after'))}"
                )
    numbers = change.get("numbers")
    if isinstance(numbers, dict):
        lines.append(
            ", ".join(
                f"{name} {_json(pair[0])} -> {_json(pair[1])}"
                for name, pair in numbers.items()
                if isinstance(pair, list)
            )
        )
    return _scrubbed(lines)  # an exit: the versions' texts were kept as the agent read them


def _json(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _scrubbed_cut(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters, scrubbed before it is cut (a secret's piece is no longer the secret)."""
    if len(text) <= chars:
        return text  # whole: the lines it goes into are scrubbed
    text = _scrubbed([text])[0]
    return text if len(text) <= chars else text[:chars] + "…"


def _scrubbed(lines: list[str]) -> list[str]:
    from .._secrets import scrub_text, secrets_from_environment

    secrets = secrets_from_environment()
    return [scrub_text(line, secrets) for line in lines]
