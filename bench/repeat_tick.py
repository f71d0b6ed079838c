"""What one tick call holds the server, whatever another node wrote in the registry
(issue 27): on a private Valkey, each case's due set is written straight into the
registry, then `@repeat_tick` is called `--ticks` times and SLOWLOG (every command logged)
says its longest call. Run it with this tree and with another on PYTHONPATH to compare
the scripts side by side.

    PYTHONPATH=. python bench/repeat_tick.py [--scale 1.0] [--ticks 3]
    # per case: the longest tick call (ms), the jobs made and the due names left;
    # last line: the worst call `repeat.tick` can make, against 20 ms
"""

from __future__ import annotations

import argparse
import json
import time

import redis
from common import server

import emq_notebook as emq
from emq_notebook import repeat
from emq_notebook.keyspace import base, new_id

MiB = 1 << 20
GOOD = json.dumps({"every": 60_000, "payload": "{}"})


def fill(r: redis.Redis, q: str, n: int, name, definition) -> None:
    p, b = r.pipeline(transaction=False), base(q)
    for i in range(n):
        d = definition(i)
        if d is not None:
            p.hset(b + "repeat:defs", name(i), d)
        p.zadd(b + "repeat", {name(i): 0})
        if i % 2000 == 1999:
            p.execute()
    p.execute()


def worst_tick(r: redis.Redis, conn: emq.Connection, q: str, jobs: int, ticks: int) -> tuple[float, int]:
    r.slowlog_reset()
    made = 0
    for _ in range(ticks):
        made += len(conn.run("repeat_tick", [base(q)], [new_id() for _ in range(jobs)], verb="tick", queue=q))
    log = [e for e in r.slowlog_get(100_000) if e["command"].startswith((b"EVAL", b"FCALL"))]
    return max((e["duration"] for e in log), default=0) / 1000, made


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0, help="the due sets' sizes (1.0: 100,000 names)")
    p.add_argument("--ticks", type=int, default=3)
    a = p.parse_args()
    n = lambda k: max(1, round(k * a.scale))  # noqa: E731
    cases = [
        ("not-JSON definitions", n(20_000), lambda i: f"n{i:06d}", lambda i: "nope", 10),
        ("not-JSON definitions", n(100_000), lambda i: f"N{i:06d}", lambda i: "nope", 10),
        ("names with no definition", n(100_000), lambda i: f"g{i:06d}", lambda i: None, 10),
        (
            "1 MB names not UTF-8, definition 'x'",
            30,
            lambda i: b"\xff" * MiB + b"%d" % i,
            lambda i: "x",
            10,
        ),
        (
            "1 MB names not UTF-8, definitions of 1 MiB + 1",
            20,
            lambda i: b"\xfe" * MiB + str(i).encode(),
            lambda i: "y" * (MiB + 1),
            10,
        ),
        ("definitions of 1 KB not JSON", n(5_000), lambda i: f"k{i:06d}", lambda i: "[" + "x" * 1000, 10),
    ] + [
        (
            f"small good definitions, {jobs:,} jobs a call",
            jobs,
            (lambda j: lambda i: f"v{j}_{i:05d}")(jobs),
            lambda i: GOOD,
            jobs,
        )
        for jobs in (getattr(repeat, "MAX_TICK_JOBS", 250), 500, 1000)
    ]
    with server() as srv:
        r = redis.Redis(port=srv.port, socket_timeout=120)
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        conn = emq.connect(f"redis://127.0.0.1:{srv.port}")
        print(f"TICK_NAMES {getattr(repeat, 'TICK_NAMES', '-')}, ticks a case {a.ticks}")
        # the calls `repeat.tick` can make (the cases past MAX_TICK_JOBS are for scale only)
        most, worst = getattr(repeat, "MAX_TICK_JOBS", 10_000), 0.0
        for k, (what, count, name, definition, jobs) in enumerate(cases):
            q = f"t{k}"
            fill(r, q, count, name, definition)
            time.sleep(0.01)
            ms, made = worst_tick(r, conn, q, jobs, a.ticks)
            due = r.zcount(base(q) + "repeat", "-inf", int(time.time() * 1000))
            print(f"{count:>7,} {what}: longest tick {ms:7.2f} ms, {made:,} jobs made, {due:,} due left")
            r.delete(base(q) + "repeat", base(q) + "repeat:defs")
            if jobs <= most:
                worst = max(worst, ms)
        print(f"worst tick call: {worst:.2f} ms (target 20 ms): {worst / 20:.2f}")


if __name__ == "__main__":
    main()
