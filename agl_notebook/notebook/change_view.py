"""What a step's view draws of its change since the previous version (a record's ``change``; docs/iterating.md).

Drawn from the step's own record only, so it is the same live, replayed and saved; collapsed in the static view.
Every value is scrubbed, cut and escaped as the rest of a step's view is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .._view_values import clipped
from ..payloads import JsonValue
from ..replay.versions import NUMBERS, change_words

_LABELS = {"tokens": "tokens", "usd": "dollars", "turns": "turns", "tool_calls": "tool calls"}
_DEL = "background:rgba(220,38,38,0.18);text-decoration:line-through"
_ADD = "background:rgba(22,163,74,0.20)"
_PRE = "margin:4px 0;padding:4px 6px;white-space:pre-wrap;font-size:90%;border:1px solid rgba(127,127,127,0.35)"


def change_text(change: Mapping[str, JsonValue], secrets: tuple[str, ...]) -> list[str]:
    """The lines the plain-text view adds: what changed, and the numbers before and after."""
    lines = [f"  changed since the previous version: {clipped(change_words(change), secrets, 300)}"]
    numbers = _numbers(change)
    if numbers:
        lines.append(f"    {numbers}")
    return lines


def change_html(change: Mapping[str, JsonValue], esc: Callable[[str], str]) -> str:
    """The collapsed section of the HTML view: the summary line names the parts that differ."""
    parts = [
        '<details class="agl-change"><summary title="This step\'s previous version (same cell, role, input and '
        f'occurrence) differs">Changed since the previous version: {esc(change_words(change))}</summary>'
    ]
    instructions = change.get("instructions")
    if isinstance(instructions, dict) and isinstance(instructions.get("lines"), list):
        rows = []
        for line in instructions["lines"]:  # type: ignore[union-attr]
            text = str(line)
            style = _DEL if text.startswith("-") else _ADD if text.startswith("+") else ""
            rows.append(f'<span style="{style}">{esc(text)}</span>' if style else esc(text))
        more = instructions.get("more")
        if isinstance(more, int):
            rows.append(esc(f"… {more:,} more diff lines"))
        parts.append(f'<div><b>instructions</b><pre class="agl-diff" style="{_PRE}">{chr(10).join(rows)}</pre></div>')
    for part in ("tools", "reporting"):
        tools = change.get(part)
        if isinstance(tools, dict):
            said = [
                f"{what} {', '.join(str(n) for n in names)}"
                for what in ("added", "removed", "changed")
                if isinstance(names := tools.get(what), list) and names
            ]
            parts.append(f"<div><b>{part}</b>: {esc('; '.join(said) or 'differs')}</div>")
    for part in ("backend", "settings"):
        value = change.get(part)
        if isinstance(value, dict):
            parts.append(
                f"<div><b>{part}</b>: {esc(_compact(value.get('before')))} → {esc(_compact(value.get('after')))}</div>"
            )
    result = change.get("result")
    if isinstance(result, list) and result:
        rows = []
        for entry in result:
            if not isinstance(entry, dict):
                continue
            name = esc(str(entry.get("field")))
            words = entry.get("words")
            if isinstance(words, list):
                runs = []
                for run in words:
                    if isinstance(run, list) and len(run) == 2:
                        op, text = str(run[0]), str(run[1])
                        style = _DEL if op == "-" else _ADD if op == "+" else ""
                        runs.append(f'<span style="{style}">{esc(text)}</span>' if style else esc(text))
                rows.append(f"<tr><td>{name}</td><td colspan=2>{' '.join(runs)}</td></tr>")
            elif "before" in entry or "after" in entry:
                rows.append(
                    f'<tr><td>{name}</td><td style="{_DEL}">{esc(_compact(entry.get("before")))}</td>'
                    f'<td style="{_ADD}">{esc(_compact(entry.get("after")))}</td></tr>'
                )
            else:
                rows.append(f"<tr><td>{name}</td><td colspan=2>differs</td></tr>")
        parts.append(
            '<div><b>result</b><table class="agl-result-diff"><tr><th>field</th><th>before</th><th>after</th></tr>'
            + "".join(rows)
            + "</table></div>"
        )
    numbers = _numbers(change)
    if numbers:
        parts.append(f"<div>{esc(numbers)}</div>")
    parts.append("</details>")
    return "".join(parts)


def _numbers(change: Mapping[str, JsonValue]) -> str:
    numbers = change.get("numbers")
    if not isinstance(numbers, dict):
        return ""
    said = []
    for name in NUMBERS:
        pair = numbers.get(name)
        if isinstance(pair, list) and len(pair) == 2 and pair != [None, None]:
            before, after = (_number(v, name) for v in pair)
            said.append(f"{_LABELS[name]} {before} → {after}")
    return ", ".join(said)


def _number(value: JsonValue, name: str) -> str:
    if value is None:
        return "?"
    if name == "usd" and isinstance(value, int | float):
        return f"${value:.4f}"
    return str(value)


def _compact(value: JsonValue) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
