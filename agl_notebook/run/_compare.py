"""`run.compare`: variants (roles, models, instructions) over the same inputs, one map each, shown as a grid.

Rows are inputs, columns are the reported fields side by side, one column per variant under each field. A cell
**differs** when the variants do not all report the same value for that input and field (a failed item reports
nothing, so its row differs in every field); a field's **agreement** is the share of inputs on which every variant
reports the same value. With a score, each variant's mean carries its 95% interval, and each pair of variants its
paired difference (over the inputs both scored) with its interval and one sentence saying whether it can be told
apart from noise; with more than two variants those intervals are Bonferroni-corrected for the number of pairs
(`agl_notebook.run._stats`, docs/evaluating.md). With repeats (``epochs``) the grid shows each input's first repeat
and the scores are each input's mean over its repeats. Everything drawn is deterministic: no times, no
what-is-spent-now.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from .._secrets import scrub_text, secrets_from_environment
from .._view_values import escaped, shown, value_html
from ..errors import InputError
from ..events import input_label
from ..models.prices import dollars
from ..payloads import JsonValue
from ._stats import Interval, PairedDifference, mean_interval, paired_difference

_MISSING = object()


@dataclass(frozen=True)
class VariantResults:
    """What one variant gave over the inputs, in input order."""

    name: str
    """The variant's name (the key given to `Run.compare`)."""
    results: Sequence[JsonValue]
    """Each input's reported payload as JSON (None where the item failed)."""
    failures: Sequence[str | None]
    """Each input's failure (``Type: message``), or None where it reported."""
    scores: Sequence[float | None] = ()
    """Each input's score, where a score function was given (None where none was computed); with repeats, the
    mean of its repeats' scores."""
    tokens: int = 0
    """The tokens of every item's record."""
    usd: float | None = 0.0
    """What the items' records say they cost, in dollars (None when some item's model had no price)."""
    priced: bool = True
    """Whether any item's record kept a cost (a scripted model's never do: its dollars are shown as ``-``)."""
    usage_unknown: bool = False
    """Whether ``usd`` is None because a server sent no usage (shown "usage unknown", not "price unknown")."""

    @property
    def failed(self) -> int:
        """How many items failed."""
        return sum(f is not None for f in self.failures)

    @property
    def mean_score(self) -> float | None:
        """The mean of the scores computed, or None when there are none."""
        scored = [s for s in self.scores if s is not None]
        return math.fsum(scored) / len(scored) if scored else None


@dataclass(frozen=True)
class Comparison:
    """The grid of several variants over the same inputs (`Run.compare`'s result)."""

    inputs: Sequence[str]
    """Each input's label, in order (a row each)."""
    variants: Sequence[VariantResults]
    """Each variant's results, in the order they were given (a column each under every field)."""
    epochs: int = 1
    """How many times each input ran per variant."""
    fields: tuple[str, ...] = field(init=False)
    """The reported fields, in the order the first variant that reported each gave them."""

    def __post_init__(self) -> None:
        seen: dict[str, None] = {}
        for variant in self.variants:
            if len(variant.results) != len(self.inputs) or len(variant.failures) != len(self.inputs):
                raise InputError(f"variant {variant.name!r} has {len(variant.results)} results for {len(self.inputs)}")
            for result in variant.results:
                for name in _fields(result):
                    seen.setdefault(name, None)
        object.__setattr__(self, "fields", tuple(seen))

    def value(self, row: int, field_name: str, variant: int) -> object:
        """What ``variant`` reported for ``field_name`` on input ``row`` (a sentinel when it reported nothing)."""
        result = self.variants[variant].results[row]
        if self.variants[variant].failures[row] is not None:
            return _MISSING
        if isinstance(result, dict):
            return result.get(field_name, _MISSING)
        return result if field_name == "value" else _MISSING

    def differs(self, row: int, field_name: str) -> bool:
        """Whether the variants do not all report the same value for ``field_name`` on input ``row``."""
        values = [_canonical(self.value(row, field_name, v)) for v in range(len(self.variants))]
        return any(v is None for v in values) or len(set(values)) > 1

    @property
    def agreement(self) -> dict[str, float]:
        """Each field's agreement: the share of inputs on which every variant reports the same value."""
        rows = len(self.inputs)
        return {f: (sum(not self.differs(r, f) for r in range(rows)) / rows if rows else 1.0) for f in self.fields}

    @cached_property
    def intervals(self) -> dict[str, Interval | None]:
        """Each variant's mean score with its 95% interval (None: no score), by name."""
        return {v.name: mean_interval(v.scores) for v in self.variants}

    @cached_property
    def differences(self) -> list[PairedDifference]:
        """Per pair of scored variants (in the order given: the later minus the earlier), the paired difference.

        With more than one pair, each interval is Bonferroni-corrected: at ``1 - 0.05 / pairs``.
        """
        scored = [v for v in self.variants if any(s is not None for s in v.scores)]
        pairs = [(a, b) for i, a in enumerate(scored) for b in scored[i + 1 :]]
        return [paired_difference(a.name, a.scores, b.name, b.scores, comparisons=len(pairs)) for a, b in pairs]

    @property
    def sentences(self) -> list[str]:
        """What each paired difference says, in a sentence (see `differences`)."""
        return [d.sentence() for d in self.differences]

    def to_pandas(self) -> Any:
        """The grid as a DataFrame: a row per input, its label, a column per (field, variant), each failure.

        Raises:
            InputError: pandas is not installed (``pip install 'agl_notebook[pandas]'``).
        """
        try:
            import pandas as pd  # type: ignore[import-untyped]  # optional, and without stubs
        except ImportError:
            raise InputError("comparison.to_pandas() needs pandas: pip install 'agl_notebook[pandas]'.") from None

        columns: dict[tuple[str, str], list[object]] = {("input", ""): list(self.inputs)}
        for f in self.fields:
            for v, variant in enumerate(self.variants):
                columns[(f, variant.name)] = [_plain(self.value(r, f, v)) for r in range(len(self.inputs))]
        secrets = secrets_from_environment()  # a failure's message may hold one, as in every view
        for variant in self.variants:
            columns[("failure", variant.name)] = [
                None if f is None else scrub_text(f, secrets) for f in variant.failures
            ]
        frame = pd.DataFrame(columns, index=pd.RangeIndex(len(self.inputs), name="index"))
        frame.columns = pd.MultiIndex.from_tuples(list(columns), names=["field", "variant"])
        return frame

    def summary_rows(self) -> list[list[str]]:
        """Per variant: its name, tokens, dollars, failures and mean score, as text."""
        rows = [["variant", "tokens", "dollars", "failures", "mean score"]]
        for v in self.variants:
            interval = self.intervals[v.name]
            rows.append(
                [
                    v.name,
                    f"{v.tokens:,}",
                    "-" if not v.priced else _unknown(v) if v.usd is None else dollars(v.usd),
                    str(v.failed),
                    "-" if interval is None else interval.text(),
                ]
            )
        return rows

    def render_text(self, secrets: tuple[str, ...] | None = None) -> str:
        """The deterministic ``text/plain`` of the comparison: the variants, then each field's agreement.

        Scrubbed of ``secrets`` (default: the environment's), each name before it is drawn.
        """
        secrets = secrets_from_environment() if secrets is None else secrets
        lines = [f"agl_notebook compare: {len(self.variants)} variants over {len(self.inputs)} inputs{self._repeats()}"]
        lines += ["  " + "  ".join(shown(cell, secrets) for cell in row) for row in self.summary_rows()]
        lines += [f"  agreement on {shown(f, secrets)}: {rate:.0%}" for f, rate in self.agreement.items()]
        lines += [f"  {shown(sentence, secrets)}" for sentence in self.sentences]
        return "\n".join(lines)

    def render_html(self, secrets: tuple[str, ...] | None = None) -> str:
        """The deterministic ``text/html``: the grid with every differing cell marked, the variants, agreement.

        Every text is scrubbed of ``secrets`` (default: the environment's), then capped, then escaped; a reported
        value is drawn as a step's view draws it (an object as rows, ``None`` as ``null`` in code type).
        """
        secrets = secrets_from_environment() if secrets is None else secrets

        def esc(text: str) -> str:
            return escaped(text, secrets)

        head1 = "".join(f'<th colspan="{len(self.variants)}">{esc(f)}</th>' for f in self.fields)
        head2 = "".join(f"<th>{esc(v.name)}</th>" for _ in self.fields for v in self.variants)
        body = []
        for r, label in enumerate(self.inputs):
            cells = []
            for f in self.fields:
                mark = ' class="agl-differs" style="background:rgba(181,71,8,0.18)"' if self.differs(r, f) else ""
                for v in range(len(self.variants)):
                    cells.append(
                        f"<td{mark}>{_cell_html(self.value(r, f, v), self.variants[v].failures[r], secrets)}</td>"
                    )
            body.append(f"<tr><th>{esc(label)}</th>{''.join(cells)}</tr>")
        summary = "".join(
            "<tr>"
            + "".join(f"<{'th' if i == 0 else 'td'}>{esc(c)}</{'th' if i == 0 else 'td'}>" for c in row)
            + "</tr>"
            for i, row in enumerate(self.summary_rows())
        )
        agreement = ", ".join(f"{esc(f)}: {rate:.0%}" for f, rate in self.agreement.items())
        sentences = "".join(f'<div class="agl-difference">{esc(sentence)}</div>' for sentence in self.sentences)
        repeats = f"<div>{esc(self._repeats().strip(' ,'))}</div>" if self.epochs > 1 else ""
        return (
            f'<div class="agl-compare" style="{_BOX}">'
            f'<table class="agl-grid" style="{_TABLE}"><tr><th rowspan="2">input</th>{head1}</tr><tr>{head2}</tr>'
            f"{''.join(body)}</table>"
            f'<table class="agl-variants" style="{_TABLE}">{summary}</table>'
            f"<div>agreement: {agreement}</div>{sentences}{repeats}</div>"
        )

    def _repeats(self) -> str:
        return f", each {self.epochs} times (the grid shows the first)" if self.epochs > 1 else ""

    # What a cell shows: scrubbed like every view (an input or an error message may hold a secret), each value
    # before it is cut or escaped.
    def __repr__(self) -> str:
        return self.render_text()

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        secrets = secrets_from_environment()
        return {"text/plain": self.render_text(secrets), "text/html": self.render_html(secrets)}


# As a step's view: no text colour (none reads in every theme), a translucent tint for what differs.
_BOX = "border:1px solid rgba(127,127,127,0.45);border-radius:6px;padding:6px 10px;margin:4px 0"
_TABLE = "border-collapse:collapse;margin:4px 0"
_CELL_SCROLL = "max-height:12em;overflow:auto"  # a long value scrolls inside its cell: a row stays a few lines tall


def _fields(result: JsonValue) -> list[str]:
    if isinstance(result, dict):
        return list(result)
    return [] if result is None else ["value"]


def _canonical(value: object) -> str | None:
    return None if value is _MISSING else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _plain(value: object) -> object:
    return None if value is _MISSING else value


def _cell_html(value: object, failure: str | None, secrets: tuple[str, ...]) -> str:
    if failure is not None:
        return escaped(f"failed: {failure}", secrets)
    if value is _MISSING:
        return ""
    return value_html(cast(JsonValue, value), secrets, scroll=_CELL_SCROLL)


async def run_compare(
    run: Any,
    variants: Mapping[str, Any],
    inputs: object,
    *,
    score: Any = None,
    name: str | None,
    map_options: Mapping[str, Any],
) -> Comparison:
    """Map each variant over ``inputs`` (one after another, each a map of its own records), then build the grid."""
    __tracebackhide__ = True
    if not isinstance(variants, Mapping) or not variants:
        raise InputError("run.compare takes a mapping of variant names to roles: {'opus': role_a, 'haiku': role_b}.")
    for key in variants:
        if not isinstance(key, str) or not key.strip():
            raise InputError(f"run.compare: each variant is named by a non-empty string, not {key!r}.")
    base = name or "compare"
    results: list[VariantResults] = []
    labels: list[str] | None = None
    epochs = map_options.get("epochs", 1)
    if epochs != 1:
        from ._map import check_epochs  # loaded already or now: the maps below need it

        check_epochs(epochs, "run.compare")
    for key, role in variants.items():
        mapped = await run.map(role, inputs, score=score, name=f"{base}-{key}", **map_options)
        every = mapped.items
        items = every[:: mapped.epochs]  # each input's first repeat: the grid's cells
        if labels is None:
            labels = [input_label(item.input_json) or f"input {item.index}" for item in items]
        usd = [item.cost.usd if item.cost is not None else 0.0 for item in every]
        kept = any(item.cost is not None for item in every)
        results.append(
            VariantResults(
                key,
                [item.result_json if item.status == "done" else None for item in items],
                [None if item.status == "done" else _failure(item.error) for item in items],
                [None if s is None else float(s) for s in mapped.scores],
                tokens=sum(item.tokens for item in every),
                usd=None if any(u is None for u in usd) else sum(u for u in usd if u is not None),
                priced=kept,
                usage_unknown=any(item.cost is not None and item.cost.usage_unknown for item in every),
            )
        )
    return Comparison(labels or [], results, epochs=epochs)


def _failure(error: BaseException | None) -> str:
    from ._map_state import error_name  # loaded already: the map that gave the error

    return "not run" if error is None else f"{error_name(error)}: {error}"


def _unknown(variant: VariantResults) -> str:
    """Why a variant's dollars are unknown: a server that sent no usage, or a model with no price."""
    return "usage unknown" if variant.usage_unknown else "price unknown"
