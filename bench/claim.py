"""Claim throughput: executor="function" (the pause read folded into one FCALL,
one round trip) against executor="script" (EchoMQ's separate gate: HGET of
the paused field, then EVALSHA @claim2, two round trips), on the same jobs.

    python bench/claim.py [--jobs 20000]      # last line: function/script claims per second

Both sides claim from ONE queue of 2 x jobs, one job at a time, alternating every
`CHUNK` claims (ABBA, so neither side always goes first), and each side's figure is
its median chunk: the two meet the same queue sizes and the same moments of this
shared machine, where whole runs taken one after the other (best of 5 each) read
1.42 to 1.81 on an idle machine within minutes.
"""

from __future__ import annotations

import time
from statistics import median_high as median

from common import args, connect, fill, ratio_line, server

from emq_notebook import jobs
from emq_notebook.keyspace import queue_key

Q = "bench"
CHUNK = 100


def claims(conn, n: int) -> float:
    """Claim `n` jobs one by one; the seconds that took."""
    t = time.perf_counter()
    for _ in range(n):
        assert jobs.claim(conn, Q, 60_000) is not None
    return time.perf_counter() - t


def run(sides, n: int) -> tuple[list[float], list[float]]:
    """`n` claims a side from one queue of 2n jobs, the sides alternating every
    `CHUNK` claims: for each side, its chunks' seconds a claim."""
    sides[0].client.flushall()
    fill(sides[0], Q, 2 * n)
    per: list[list[float]] = [[], []]
    for i, start in enumerate(range(0, 2 * n, CHUNK)):
        size = min(CHUNK, 2 * n - start)
        side = (0, 1, 1, 0)[i % 4]
        per[side].append(claims(sides[side], size) / size)
    assert sides[0].client.zcard(queue_key(Q, "pending")) == 0
    assert jobs.claim(sides[0], Q, 60_000) is None
    return per[0], per[1]


def main() -> None:
    a = args(20_000, __doc__)
    with server(shared_cpu=a.shared_cpu) as srv:
        sides = (connect(srv, "function"), connect(srv, "script"))
        runs = [run(sides, a.jobs) for _ in range(a.repeat)]
    fn = median([t for f, _ in runs for t in f])
    sc = median([t for _, s in runs for t in s])
    per_run = [median(s) / median(f) for f, s in runs]
    print(
        f"jobs: {a.jobs:,} a side, claimed one at a time, sides alternating every {CHUNK} "
        f"claims, {a.repeat} runs; medians over the chunks"
    )
    print(f"function: {1 / fn:,.0f} claims/s   script: {1 / sc:,.0f} claims/s")
    print(f"ratio of each run: {', '.join(f'{r:.2f}' for r in per_run)}")
    print(ratio_line("function/script throughput", sc / fn, ">= 1.6"))


if __name__ == "__main__":
    main()
