"""Claim throughput: executor="function" (the pause read folded into one FCALL,
one round trip) against executor="script" (EchoMQ's separate gate: HGET of
the paused field, then EVALSHA @claim2, two round trips), on the same jobs.

    python bench/claim.py [--jobs 20000]      # last line: function/script claims per second
"""

from __future__ import annotations

import time

from common import args, connect, fill, ratio_line, server, side_by_side

from emq_notebook import jobs

Q = "bench"


def run(conn, n: int) -> float:
    """Fill `n` pending jobs, claim them all one by one; the seconds the claims took."""
    conn.client.flushall()
    fill(conn, Q, n)
    t = time.perf_counter()
    claimed = 0
    while jobs.claim(conn, Q, 60_000) is not None:
        claimed += 1
    took = time.perf_counter() - t
    assert claimed == n, claimed
    return took


def main() -> None:
    a = args(20_000, __doc__)
    with server() as srv:
        function, script = connect(srv, "function"), connect(srv, "script")
        fn, sc = side_by_side(a.repeat, lambda: run(function, a.jobs), lambda: run(script, a.jobs))
    print(f"jobs: {a.jobs:,}, claimed one at a time")
    print(f"function: {a.jobs / fn:,.0f} claims/s   script: {a.jobs / sc:,.0f} claims/s")
    print(ratio_line("function/script throughput", sc / fn, ">= 1.6"))


if __name__ == "__main__":
    main()
