"""The latency histograms' arithmetic: buckets, merging, percentiles. Pure, no I/O.

The scripts (`lua/includes/latency.lua`) count each wait or run, in whole ms,
into a log-spaced bucket: bucket 0 holds 0 ms, bucket b >= 1 holds
[1.1^(b-1), 1.1^b) ms. A bucket is read back as the geometric middle of the
whole numbers it holds, so any value in it is within 5% of what is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .decoding import whole_text

RATIO = 1.1
_LOG = math.log(RATIO)

Histogram = dict[int, int]


def bucket(ms: float) -> int:
    """The bucket the scripts count `ms` in."""
    return 0 if ms < 1 else math.floor(math.log(ms) / _LOG) + 1


def value(b: int) -> float:
    """What bucket `b` reads back as, in ms: the geometric middle of its whole numbers."""
    if b <= 0:
        return 0.0
    lo, hi = RATIO ** (b - 1), RATIO**b
    first, last = math.ceil(lo), math.ceil(hi) - 1
    if last < first:  # no whole number inside: the middle of the bounds
        return math.sqrt(lo * hi)
    return math.sqrt(first * last)


def parse(raw: Mapping[str, str] | None) -> Histogram:
    """A hash read from the server (bucket -> count, as text) as ints; a field that is
    not a whole number (written by hand) is left out."""
    out: Histogram = {}
    for b, n in (raw or {}).items():
        bucket, count = whole_text(b, signed=True), whole_text(n)
        if bucket is not None and count is not None:
            out[bucket] = out.get(bucket, 0) + count
    return out


def merge(histograms: Iterable[Histogram]) -> Histogram:
    out: Histogram = {}
    for h in histograms:
        for b, n in h.items():
            out[b] = out.get(b, 0) + n
    return out


def count(h: Histogram) -> int:
    return sum(h.values())


def percentile(h: Histogram, p: float) -> float:
    """The `p` quantile (0 < p <= 1) by nearest rank: the value of the bucket holding
    the ceil(p * n)-th smallest sample. NaN for an empty histogram."""
    n = count(h)
    if n == 0:
        return math.nan
    rank = max(1, math.ceil(p * n - 1e-9))  # 0.95 * 60 is 57, not 57.000...1
    seen = 0
    for b in sorted(h):
        seen += h[b]
        if seen >= rank:
            return value(b)
    return value(max(h))  # not reached: the ranks add up to n
