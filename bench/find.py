"""triage.find and triage.errors on a big dead set, against what one would do without
them: frames.snapshot(state="dead") and a pandas filter on the same data. Another
process PINGs the server meanwhile (the worst round trip: the server must never be
blocked for long).

The dead set: `--jobs` dead jobs (default 1,000,000), 100-byte payloads, 50 error
signatures whose texts carry numbers, quoted addresses and request UUIDs; the search
`find(error="refused by billing:*")` matches 1% of them.

    python bench/find.py [--jobs 1000000] [--repeat 1]
    # last line: find/(snapshot+filter), errors/(snapshot+filter), the worst PING during
    # ours (and, beside it, during the snapshot: on a loaded machine the pinger's own
    # scheduling shows in both); the line before it, the longest server call of each
    # (SLOWLOG), which the do-no-harm bound holds at 20 ms
"""

from __future__ import annotations

import fnmatch
import time
import uuid

from common import args, connect, payload, ratio_line, server
from destroy import Pinger

from emq_notebook import frames, triage
from emq_notebook.keyspace import queue_key

Q = "bench"
# 50 signatures: 10 ways to fail x 5 upstreams (words only: a number is not a signature)
FAILURES = [
    "refused",
    "timed out",
    "reset",
    "throttled",
    "rejected",
    "unreachable",
    "garbled",
    "truncated",
    "forbidden",
    "overloaded",
]
UPSTREAMS = ["billing", "mailer", "search", "storage", "ledger"]
GLOB = "refused by billing:*"
FILL_BATCH = 5000


def template(i: int) -> int:
    """The error signature of job i: number 0 for 1% of the jobs, the other 49 share the rest."""
    return 0 if i % 100 == 0 else 1 + i % 49


def error_text(i: int) -> str:
    t = template(i)
    return (
        f"{FAILURES[t // 5]} by {UPSTREAMS[t % 5]}: upstream answered {500 + i % 4} for "
        f"'user{i}@example.com' after {i % 997}ms, request {uuid.UUID(int=i * 7919)}"
    )


def fill_dead(conn, n: int) -> None:
    """`n` dead rows as @fail leaves them (the contract's fields), written straight."""
    root, dead = queue_key(Q, ""), queue_key(Q, "dead")
    now = int(time.time() * 1000)
    conn.client.hset(root + "meta", "created_at", str(now))
    for start in range(0, n, FILL_BATCH):
        pipe = conn.client.pipeline(transaction=False)
        members = {}
        for i in range(start, min(n, start + FILL_BATCH)):
            job_id = f"j{i:07d}"
            pipe.hset(
                root + "job:" + job_id,
                mapping={
                    "payload": payload(i),
                    "attempts": "1",
                    "failures": "1",
                    "stalled": "0",
                    "max_attempts": "1",
                    "priority": "0",
                    "backoff": "1000",
                    "created_at": str(now - n + i),
                    "state": "dead",
                    "last_error": error_text(i),
                },
            )
            members[job_id] = now - n + i
        pipe.zadd(dead, members)
        pipe.execute()


def longest_call_ms(client) -> float:
    """The longest command the server ran since the last SLOWLOG RESET, in ms (calls
    over 1 ms are logged: see `main`)."""
    return max((e["duration"] for e in client.slowlog_get(10_000)), default=0) / 1000


def main() -> None:
    a = args(1_000_000, __doc__)
    regex = fnmatch.translate(GLOB)
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        t = time.perf_counter()
        fill_dead(conn, a.jobs)
        print(f"filled {a.jobs:,} dead jobs in {time.perf_counter() - t:.1f}s")
        expected = sum(1 for i in range(a.jobs) if template(i) == 0)
        worst = worst_theirs = 0.0
        timings: dict[str, list[float]] = {"find": [], "errors": [], "snapshot+filter": []}
        longest = {"find": 0.0, "errors": 0.0}
        conn.client.config_set("slowlog-log-slower-than", 1000)
        conn.client.config_set("slowlog-max-len", 10_000)
        for _ in range(a.repeat):
            with Pinger(srv.port) as pinger:
                conn.client.slowlog_reset()
                t = time.perf_counter()
                found = triage.find(conn, Q, error=GLOB, limit=None)
                timings["find"].append(time.perf_counter() - t)
                longest["find"] = max(longest["find"], longest_call_ms(conn.client))
                conn.client.slowlog_reset()
                t = time.perf_counter()
                errors = triage.errors(conn, Q)
                timings["errors"].append(time.perf_counter() - t)
                longest["errors"] = max(longest["errors"], longest_call_ms(conn.client))
            worst = max(worst, pinger.worst)
            assert len(found) == expected, (len(found), expected)
            assert len(errors) == 50 and int(errors["count"].sum()) == a.jobs, errors
            with Pinger(srv.port) as pinger:
                t = time.perf_counter()
                snap = frames.snapshot(conn, Q, states="dead")
                theirs = snap[snap["last_error"].str.match(regex)]
                timings["snapshot+filter"].append(time.perf_counter() - t)
            worst_theirs = max(worst_theirs, pinger.worst)
            assert list(theirs.index) == list(found.index)
            del snap, theirs
    best = {k: min(v) for k, v in timings.items()}
    print(f"jobs: {a.jobs:,} dead, 50 signatures; find({GLOB!r}) matches {expected:,}")
    for k, v in best.items():
        print(f"{k:>16}: {v:.2f}s")
    base = best["snapshot+filter"]
    print(
        f"longest server call: find {longest['find']:.1f} ms, "
        f"errors {longest['errors']:.1f} ms (target <= 20)"
    )
    print(
        f"{ratio_line('find/(snapshot+filter)', best['find'] / base, '<= 0.3')}, "
        f"{ratio_line('errors/(snapshot+filter)', best['errors'] / base, '<= 0.3')}; "
        f"worst PING during ours: {worst * 1000:.1f} ms (target <= 20; "
        f"during the snapshot: {worst_theirs * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    main()
