"""Two reads whose one call grew with the data, side by side with what replaced them, on
one private Valkey: the longest single server call of each (SLOWLOG, every command over
0.1 ms logged), the best of `--repeat` runs.

- Reading the audit trail (`%emq audit --limit N`): one `XREVRANGE ... COUNT N` of the
  whole read (what `audit.read` sent before) against `audit.read`, which reads a stream a
  page at a time (`audit.FIRST_PAGE` entries, then as many as `defaults.BYTE_BUDGET`
  bytes hold). The stream holds `--jobs` entries of about 300 bytes (a pause's) and a
  second queue's `--jobs`/30 entries of about 30 KB (100 ids of 200 characters, the most
  an entry the toolkit writes holds).
- Draining a queue of many lanes (`admin.drain`): `--jobs` lanes of one job each. Before,
  each call read the whole set of known lanes (SMEMBERS) and looked at every lane from
  the first, so a call grew with the lanes (and the calls, with the lanes drained):
  the script still answers an older client's call so, without a cursor, and that is the
  side it is measured against. After: each call walks the lanes on from the cursor the
  last answered.

    python bench/bounded_reads.py [--jobs 100000] [--repeat 3]
    # last line: longest call now/before (worst of the two reads): R
"""

from __future__ import annotations

import time

from common import args, connect, server

from emq_notebook import admin, audit
from emq_notebook.keyspace import audit_key, base, queue_key

SLOWLOG_LEN = 100_000
# the calls SLOWLOG keeps (us): Valkey logs a script's own commands too, and a log of the
# hundreds of thousands a drain of 100,000 lanes runs held one of its calls up to a second
# (the log's own memory, libc malloc), so only those over 0.1 ms are kept
LOGGED_OVER_US = 100
PIPE = 10_000
PAUSE = {
    "verb": "pause",
    "outcome": "done",
    "count": "0",
    "ids": '{"first": [], "digest": ""}',
    "who": "ops@host",
}
IDS = ", ".join(['"' + "j" * 198 + '"'] * 100)
BULK = {**PAUSE, "verb": "reprocess", "count": "4000", "ids": '{"first": [' + IDS + '], "digest": "d"}'}
QUEUES = ("pauses", "bulk")


def longest(raw, call) -> tuple[float, float]:
    """The longest server call `call` made (ms) and its wall time (s: the client's
    work included, so the two sides of a read differ by what the client makes of it)."""
    raw.slowlog_reset()
    raw.config_set("slowlog-log-slower-than", LOGGED_OVER_US)
    t = time.perf_counter()
    call()
    took = time.perf_counter() - t
    raw.config_set("slowlog-log-slower-than", -1)
    log = raw.slowlog_get(SLOWLOG_LEN)
    return max((e["duration"] for e in log if b"SLOWLOG" not in e["command"][:8]), default=0) / 1000, took


def fill_audit(raw, n: int) -> None:
    for q, entry, count in (("pauses", PAUSE, n), ("bulk", BULK, max(1, n // 30))):
        for start in range(0, count, PIPE):
            pipe = raw.pipeline(transaction=False)
            for _ in range(start, min(count, start + PIPE)):
                pipe.xadd(audit_key(q), entry)
            pipe.execute()


def whole_read(raw, q: str, limit: int) -> None:
    """`audit.read` before: one XREVRANGE of the whole read."""
    raw.xrevrange(audit_key(q), "+", "-", count=limit)


def fill_lanes(raw, n: int, q: str) -> None:
    for start in range(0, n, PIPE):
        pipe = raw.pipeline(transaction=False)
        for i in range(start, min(n, start + PIPE)):
            g = f"t{i:07d}"
            pipe.sadd(queue_key(q, "groups"), g)
            pipe.zadd(f"{base(q)}g:{g}:pending", {f"j{i}": 0})
            pipe.hset(f"{base(q)}job:j{i}", mapping={"state": "pending", "group": g, "payload": "{}"})
        pipe.execute()
    raw.hset(queue_key(q, "meta"), "created_at", "1")


def drain_without_cursor(conn, q: str, budget: int = 1000) -> None:
    """An older client's drain: calls without a cursor, each looking at every lane."""
    keys = [base(q), queue_key(q, "pending")]
    while True:
        _, more = conn.run("drain", keys, [budget, 1 << 20])
        if not more:
            return


def main() -> None:
    a = args(100_000, __doc__)
    n = a.jobs
    with server() as srv:
        conn = connect(srv)
        raw = conn.client
        # only a measured call's commands logged, never the fills'
        raw.config_set("slowlog-log-slower-than", -1)
        raw.config_set("slowlog-max-len", SLOWLOG_LEN)
        fill_audit(raw, n)
        rows = []
        for q, limit in (("pauses", n), ("bulk", max(1, n // 30))):
            old = lambda q=q, limit=limit: whole_read(raw, q, limit)  # noqa: E731
            new = lambda q=q, limit=limit: audit.read(conn, q, limit=limit)  # noqa: E731
            before = min(longest(raw, old) for _ in range(a.repeat))
            after = min(longest(raw, new) for _ in range(a.repeat))
            rows.append((f"%emq audit {q} --limit {limit:,}", before, after))
        # each side drains its own copy of the lanes, made afresh before each run
        drains: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(a.repeat):
            for side, q in (("before", "old"), ("after", "new")):
                fill_lanes(raw, n, q)
                go = (
                    (lambda q=q: drain_without_cursor(conn, q))
                    if side == "before"
                    else (lambda q=q: admin.drain(conn, q))
                )
                drains[side].append(longest(raw, go))
        rows.append((f"drain of {n:,} lanes of one job", min(drains["before"]), min(drains["after"])))
    print(f"{'read':40} {'before: longest call, wall':>28} {'now: longest call, wall':>26}")
    for name, (b_ms, b_s), (a_ms, a_s) in rows:
        print(f"{name:40} {b_ms:12.1f} ms {b_s:9.2f} s {a_ms:12.1f} ms {a_s:9.2f} s")
    worst = max(a_ms / max(b_ms, 1e-3) for _, (b_ms, _), (a_ms, _) in rows)
    print(f"longest call now/before (worst of the two reads): {worst:.2f}")


if __name__ == "__main__":
    main()
