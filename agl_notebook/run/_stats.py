"""Intervals a person can trust: a cluster bootstrap over inputs, paired differences, and one plain sentence.

What is estimated. Each input has a score per repeat (``epochs``); its **input score** is the mean of the scores
its repeats gave. A variant's mean score is the mean of its input scores, so every input weighs the same however
many of its repeats scored. Resampling inputs with replacement and taking each drawn input's repeats with it is the
bootstrap that "resamples repeats as clusters of their input": the resample mean is the mean of the drawn input
scores. A paired difference between two variants is the same over the inputs both scored, of B's input score minus
A's. The 95% interval is the percentile interval of `RESAMPLES` resample means (the `_low`/`_high` order statistics
below, stated exactly); with ``comparisons`` > 1 each interval is widened to ``1 - 0.05 / comparisons`` (Bonferroni).

Deterministic. The only randomness is `random.Random(seed).random()`: Python guarantees that ``random()`` gives the
same sequence for the same integer seed on every platform and in every later version (the `random` module's docs,
"Notes on Reproducibility"); nothing else of `random` (``randrange``, ``choices``, ``binomialvariate``) is promised,
so nothing else is used. numpy's default generator is not used at all (its streams may change between releases), so
an interval is the same whether or not numpy is installed. Every other step is IEEE basic arithmetic (correctly
rounded on every platform), `math.fsum` (exact) and `math.sqrt` (correctly rounded); no ``log``/``exp``, whose
last bit may differ between C libraries (only the sample size asked for with several comparisons reads a normal
quantile through `math.erf`, and only to round it up to a whole number of inputs).

Fast. A resample mean depends only on how many draws land on each distinct input score: the counts are a
multinomial over the G distinct values, drawn as G - 1 binomials, each by inversion of its distribution table (built
once per (value, draws left) and cached). Scores that are numbers or bools over many inputs take few distinct values,
so 10,000 inputs cost a few thousand table look-ups, not 20 million draws (benchmarks/bench_stats.py). With many
distinct values (a judge's free scores) the draws are made one by one when that is cheaper.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import operator
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

RESAMPLES = 2000
"""How many bootstrap resamples every interval is read from."""
SEED = 33_2026
"""The bootstrap's base seed. Each interval's stream is seeded from it and a digest of the values resampled, so the
same scores always give the same interval, while different score arrays do not share one stream (a shared stream
would make every interval err the same way: a fixed seed alone left the calibration test's intervals 5% narrow)."""
LEVEL = 0.95
"""The intervals' confidence, before any correction for several comparisons."""
DETECTABLE = 0.05
"""The difference the "how many inputs would be needed" sentence is about (on the scores' own scale)."""
Z_LEVEL = 1.959963984540054
"""The normal quantile at 0.975: a two-sided 5% test."""
Z_POWER = 0.8416212335729143
"""The normal quantile at 0.80: 80% power."""
_WIDTH = 8.0
"""A binomial table reaches this many SDs (and 6 values more) either side of its mode: the rest is never drawn."""


MAX_SCORE = 1e100
"""The largest score (either way): sums of squares of differences over a billion inputs of such scores stay finite."""


def averageable(value: float) -> bool:
    """Not NaN, not infinite, and small enough that sums of it (and of its squares) cannot overflow."""
    return -MAX_SCORE <= value <= MAX_SCORE  # NaN compares false; a huge int is compared exactly, never converted


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap interval."""

    mean: float
    """The mean of the input scores."""
    low: float
    """The interval's lower end."""
    high: float
    """The interval's upper end."""
    n: int
    """How many inputs it rests on."""
    level: float = LEVEL
    """The interval's confidence (after any correction)."""

    def text(self) -> str:
        """``0.72 (95% CI 0.68 to 0.76)``, the way the views show it; one input gives no interval, and says so."""
        if self.n < 2:  # a bootstrap of one value is that value: "CI 1 to 1" would claim a certainty it lacks
            return f"{_fmt(self.mean, self)} ({_pct(self.level)} CI needs 2 inputs or more; {self.n} scored)"
        return f"{_fmt(self.mean, self)} ({_pct(self.level)} CI {_fmt(self.low, self)} to {_fmt(self.high, self)})"


@dataclass(frozen=True)
class PairedDifference:
    """B's mean score minus A's over the inputs both scored, with its interval and the sentence that says it."""

    a: str
    """The first variant's name."""
    b: str
    """The second variant's name."""
    interval: Interval
    """The difference (b - a) and its interval."""
    sd: float
    """The sample standard deviation of the per-input differences."""
    comparisons: int = 1
    """How many pairs were compared at once (the Bonferroni correction's divisor)."""
    detectable: float = DETECTABLE
    """The difference the sample-size sentence is about."""

    @property
    def needed(self) -> int | None:
        """Inputs needed to see `detectable` at 80% power, two-sided 5% (per comparison); None when they never differ.

        The normal-approximation sample size for a paired difference from the observed SD of the differences:
        ``n = ((z_{1-alpha/2} + z_{0.80}) * sd / delta) ** 2``, rounded up, with alpha = 0.05 / comparisons.
        """
        if self.sd == 0.0 or self.detectable <= 0:
            return None
        z = Z_LEVEL if self.comparisons == 1 else _z(1 - 0.05 / (2 * self.comparisons))
        return math.ceil(((z + Z_POWER) * self.sd / self.detectable) ** 2)

    def sentence(self) -> str:
        """One sentence from the interval only: who is better and by how much, or that noise cannot be told apart."""
        i = self.interval
        ci = f"{_pct(i.level)} CI" + (
            f", Bonferroni-corrected for {self.comparisons} comparisons" if self.comparisons > 1 else ""
        )
        if i.n == 1:  # its interval is the one difference itself, which would read as a sure one
            return (
                f"No difference between {self.a} and {self.b} can be told from n = 1 input ({self.b} - {self.a} = "
                f"{_fmt(i.mean, i)} on it): an interval needs 2 inputs or more."
            )
        if i.low > 0:
            return (
                f"{self.b} is better than {self.a} by {_fmt(i.mean, i)} ({ci} {_fmt(i.low, i)} to "
                f"{_fmt(i.high, i)}, n = {i.n})."
            )
        if i.high < 0:
            return (
                f"{self.a} is better than {self.b} by {_fmt(-i.mean, i)} ({ci} {_fmt(-i.high, i)} to "
                f"{_fmt(-i.low, i)}, n = {i.n})."
            )
        if i.n == 0:
            return f"{self.a} and {self.b} have no input both scored: nothing can be said."
        if self.sd == 0.0:
            return f"{self.a} and {self.b} scored the same on every one of the n = {i.n} inputs: no difference."
        return (
            f"No difference between {self.a} and {self.b} can be told apart from noise at n = {i.n} "
            f"({self.b} - {self.a} = {_fmt(i.mean, i)}, {ci} {_fmt(i.low, i)} to {_fmt(i.high, i)}); about "
            f"{self.needed:,} inputs would be needed to see {self.detectable:g} (normal-approximation sample size "
            f"for a paired difference, 80% power, from the observed SD {self.sd:.2g})."
        )


def input_scores(repeats: Sequence[Sequence[float | None]]) -> list[float | None]:
    """Each input's score: the exact mean of its repeats' scores (None where none scored)."""
    out: list[float | None] = []
    for scores in repeats:
        given = [float(s) for s in scores if s is not None]
        out.append(math.fsum(given) / len(given) if given else None)
    return out


def mean_interval(
    values: Sequence[float | None], *, comparisons: int = 1, resamples: int = RESAMPLES, seed: int | None = None
) -> Interval | None:
    """The mean of the input scores given (None skipped) and its bootstrap interval; None when there are none."""
    given = [float(v) for v in values if v is not None]
    if not given:
        return None
    level = 1 - (1 - LEVEL) / comparisons
    low, high = bootstrap(given, level=level, resamples=resamples, seed=seed)
    return Interval(math.fsum(given) / len(given), low, high, len(given), level)


def paired_difference(
    a_name: str,
    a: Sequence[float | None],
    b_name: str,
    b: Sequence[float | None],
    *,
    comparisons: int = 1,
    detectable: float = DETECTABLE,
    resamples: int = RESAMPLES,
    seed: int | None = None,
) -> PairedDifference:
    """B minus A over the inputs both scored (input scores, in input order), its interval and sentence."""
    diffs = [y - x for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    level = 1 - (1 - LEVEL) / comparisons
    if not diffs:
        return PairedDifference(a_name, b_name, Interval(0.0, 0.0, 0.0, 0, level), 0.0, comparisons, detectable)
    mean = math.fsum(diffs) / len(diffs)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
    low, high = bootstrap(diffs, level=level, resamples=resamples, seed=seed)
    return PairedDifference(a_name, b_name, Interval(mean, low, high, len(diffs), level), sd, comparisons, detectable)


def bootstrap(
    values: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int | None = None
) -> tuple[float, float]:
    """The percentile interval of the mean of ``values`` (input scores) over ``resamples`` bootstrap resamples.

    The resample means are sorted; the interval is the ``floor(alpha/2 * R)``-th and the
    ``ceil((1 - alpha/2) * R) - 1``-th of them (from 0), alpha = 1 - level.
    """
    n = len(values)
    counts: dict[float, int] = {}
    for v in values:
        # Rounded to 12 decimals (correctly, by `round`): 2/3 - 1/3 and 1/3 - 0 are one value, not two, so repeats'
        # means give as few distinct values as they really take. It moves no interval by more than 5e-13.
        v = round(v, 12) + 0.0  # + 0.0: -0.0 is 0.0
        counts[v] = counts.get(v, 0) + 1
    # A fixed order (the draws do not depend on the input order), the most common value last: it takes the draws
    # left, and the rarer values before it spread the counts left over fewer tables.
    distinct = sorted(counts, key=lambda v: (counts[v], v))
    if len(distinct) == 1:
        return distinct[0], distinct[0]
    rng = random.Random(_seed(distinct, counts) if seed is None else seed)
    if _grouped_cost(n, len(distinct)) < n * resamples:
        means = _grouped_means(distinct, [counts[v] for v in distinct], n, resamples, rng)
    else:
        means = _direct_means(sorted(values), resamples, rng)
    means.sort()
    alpha = 1 - level
    low = means[min(resamples - 1, math.floor(alpha / 2 * resamples))]
    high = means[max(0, math.ceil((1 - alpha / 2) * resamples) - 1)]
    return low, high


def _seed(distinct: list[float], counts: dict[float, int]) -> int:
    """The stream's seed for these values: `SEED` and the values' exact digits and counts, digested (sha256)."""
    text = f"{SEED}:" + ";".join(f"{v.hex()}x{counts[v]}" for v in distinct)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _grouped_cost(n: int, groups: int) -> float:
    """About what the grouped draw costs, counted in single draws.

    G tables per distinct count left (an entry is built in C, about a quarter of a draw made in Python), and a
    look-up per group and resample.
    """
    return groups * (8 * math.sqrt(n) + 1) * (_WIDTH * math.sqrt(n) + 13) / 4 + groups * RESAMPLES


def _direct_means(values: list[float], resamples: int, rng: random.Random) -> list[float]:
    """Resample means drawn one input at a time (many distinct values, few inputs)."""
    n = len(values)
    draw = rng.random
    return [math.fsum(values[int(draw() * n)] for _ in range(n)) / n for _ in range(resamples)]


def _grouped_means(distinct: list[float], counts: list[int], n: int, resamples: int, rng: random.Random) -> list[float]:
    """Resample means from multinomial counts over the distinct values, drawn as successive binomials.

    The count of value g among the draws left is Binomial(left, counts[g] / (counts[g] + ... + counts[G-1])). The
    draws go value by value; within a value, the resamples with the same draws left share one table and draw in
    resample order.
    """
    draw = rng.random
    left = [n] * resamples
    columns: list[list[int]] = []
    for g in range(len(distinct) - 1):
        rest = sum(counts[g:])
        by_left: dict[int, list[int]] = {}
        for r, m in enumerate(left):
            by_left.setdefault(m, []).append(r)
        taken = [0] * resamples
        for m in sorted(by_left):
            start, cumulative = _binomial_table(m, counts[g], rest)
            top, last = cumulative[-1], len(cumulative) - 1
            for r in by_left[m]:
                taken[r] = start + bisect.bisect_right(cumulative, draw() * top, 0, last)
        columns.append(taken)
        left = [m - k for m, k in zip(left, taken, strict=True)]
    columns.append(left)
    fsum, mul = math.fsum, operator.mul
    return [fsum(map(mul, row, distinct)) / n for row in zip(*columns, strict=True)]


def _binomial_table(trials: int, hits: int, total: int) -> tuple[int, list[float]]:
    """Binomial(trials, hits/total) as (its first value, the cumulative weights from there), cut `_WIDTH` SDs out.

    Built outward from the mode with the ratio of successive probabilities (basic arithmetic only, multiplied and
    summed in one fixed order), so the same table on every platform; the probability beyond the cut (about 1e-15
    for a binomial near its normal shape) is never drawn.
    """
    if hits == 0:
        return 0, [1.0]
    if hits == total:
        return trials, [1.0]
    p = hits / total
    odds = hits / (total - hits)
    mode = min(trials, math.floor((trials + 1) * p))
    reach = int(_WIDTH * math.sqrt(trials * p * (1 - p))) + 6
    top = min(trials, mode + reach)
    bottom = max(0, mode - reach)
    # w[k+1] / w[k] = (trials - k) / (k + 1) * odds, and w[mode] = 1.
    up = list(accumulate([(trials - k) / (k + 1) * odds for k in range(mode, top)], operator.mul, initial=1.0))
    down = list(accumulate([k / (trials - k + 1) / odds for k in range(mode, bottom, -1)], operator.mul))
    down.reverse()
    return bottom, list(accumulate(down + up))


def _z(q: float) -> float:
    """The standard normal quantile at ``q`` (bisection on `math.erf`: only for several comparisons' sample size)."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _pct(level: float) -> str:
    text = f"{level * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _fmt(value: float, interval: Interval) -> str:
    """Two decimals, three when the interval is narrower than 0.02 (it would read as a point), 3 digits when none."""
    width = abs(interval.high - interval.low)
    text = f"{value:.3g}" if width == 0 else f"{value:.3f}" if width < 0.02 else f"{value:.2f}"
    return text.lstrip("-") if float(text) == 0 else text  # never "-0.00"
