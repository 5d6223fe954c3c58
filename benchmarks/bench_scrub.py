"""The scrubber on a long text: what a 200 KB reply redrawn live, or a large record, pays at each exit.

Texts (200 KB of words): ``plain`` (no marker), ``anthropic key`` (an ``sk-ant-`` key in the middle), ``auth header``
(an ``Authorization: Bearer`` header written out), ``html, env secret`` (an HTML-escaped text with a secret-named
environment variable set: every known secret's spellings are searched too). Beside each, in the same run:

- ``str.replace``: one C scan replacing a known literal, the least any scrubber can cost (the anchor);
- ``lookbehind regex``: the key-shape regex the scrubber used until 2026-12 (its header spellings as case-insensitive
  lookbehinds, tried at every character), kept here only as a reference.

Each figure is the median of 7 rounds of 5 calls, in ms per call. Run: ``.venv/bin/python benchmarks/bench_scrub.py``.
"""

from __future__ import annotations

import functools
import os
import random
import re
import statistics
import string
import time
from collections.abc import Callable

from agl_notebook._secrets import REDACTED, scrub_text, secrets_from_environment

_PREVIOUS_KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"
    r"|(?i:(?<=authorization: bearer )|(?<=authorization:bearer ))[^\s\"'\\]+"
    r"|(?i:(?<=x-api-key: )|(?<=x-api-key:)|(?<=\"x-api-key\": \")|(?<='x-api-key': ')"
    r"|(?<=\\\"x-api-key\\\": \\\"))[^\s\"'\\]+"
    r"|(?<=Bearer )[A-Za-z0-9._\-]{16,}"
)


def _median_ms(call: Callable[[], object]) -> float:
    rounds = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(5):
            call()
        rounds.append((time.perf_counter() - started) / 5 * 1000)
    return statistics.median(rounds)


def main() -> None:
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_letters, k=rng.randint(2, 9))) for _ in range(5000)]
    body = " ".join(rng.choices(words, k=40_000))[:200_000]
    key = "sk-" + "ant-" + "api03-" + "A" * 30  # built here: no key is written whole in the repository
    os.environ["BENCH_SERVICE_TOKEN"] = "tok-" + "b" * 16
    half = len(body) // 2
    texts = {
        "plain": (body, ()),
        "anthropic key": (body[:half] + " " + key + " " + body[half:], ()),
        "auth header": (body + " Authorization: Bearer " + "x" * 20, ()),
        "html, env secret": (body.replace(" ", " &amp; ", 2000), secrets_from_environment()),
    }
    print(f"{'text (200 KB)':<18} {'scrub_text':>11} {'str.replace':>12} {'ratio':>7} {'lookbehind regex':>17}")
    for name, (text, secrets) in texts.items():
        ours = _median_ms(functools.partial(scrub_text, text, secrets))
        anchor = _median_ms(functools.partial(text.replace, key, REDACTED))
        previous = _median_ms(functools.partial(_PREVIOUS_KEY_SHAPES.sub, REDACTED, text))
        print(f"{name:<18} {ours:>9.2f}ms {anchor:>10.2f}ms {ours / anchor:>6.1f}x {previous:>15.2f}ms")


if __name__ == "__main__":
    main()
