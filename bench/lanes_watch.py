"""What a queue's lanes cost the server: counts, health and a dashboard refresh at
100,000 and 1,000,000 lanes (a lane per tenant, one job each).

One private Valkey (`common.server`), one queue `tenants` with `--jobs` lanes (default
100,000; `--lanes` the same), written straight into the keyspace as many producers would
leave them (the set of known groups, a backlog of one job in each lane, its row). Each
read is run `--repeat` times; for each: the commands the server ran (`INFO
commandstats`, a script's own commands included), the server's CPU time (`INFO cpu`,
user + system) and its longest call (SLOWLOG, every call over 0.1 ms logged), the best
run kept.

Before (the reads this replaced, run here by hand as they were): the lane backlog read
whole (one SMEMBERS of the set, then a ZCARD a lane, pipelined: what `frames.counts` did
on every dashboard refresh), and with health's lane sample (another SMEMBERS and a
ZRANGE of 10 lanes) a dashboard refresh's lane reads. After: `frames.counts` exact
(what `%emq queues` asks: every lane, in calls of `watching.LANES_A_CALL`),
`frames.counts(watch=True)` and `frames.health` (what a look costs: one call of
`watching.LANE_EXACT` lanes), a dashboard's refresh, `lanes.lanes` (the first 1,000) and
`admin.backlog` (exact, before a drain).

The last line: `worst call against 20 ms: R (X ms); refresh/whole read server CPU: r`
(a refresh's server CPU now over its lane reads before). The longest call of a read is
the shortest of its runs' longest: SLOWLOG is a wall clock, and a call the kernel
paused on this shared machine reads longer there than its own work.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import redis
from common import connect, server, shared_cpu_flag

from emq_notebook import admin, frames, health, lanes, watching
from emq_notebook.keyspace import base, queue_key
from emq_notebook.widgets import Dashboard

Q = "tenants"
TARGET_MS = 20.0
# the shortest call SLOWLOG keeps (us)
SLOW_US = 100


def args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--lanes", "--jobs", dest="lanes", type=int, default=100_000, help="lanes (default 100,000)"
    )
    p.add_argument("--repeat", type=int, default=3, help="runs of each read; the best counts (default 3)")
    shared_cpu_flag(p)
    return p.parse_args()


def fill(client: redis.Redis, n: int) -> None:
    """`n` lanes of one job each, its row beside it."""
    root = base(Q)
    for start in range(0, n, 10_000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + 10_000)):
            g, job = f"t{i:07d}", f"j_{i:07d}"
            pipe.sadd(root + "groups", g)
            pipe.zadd(f"{root}g:{g}:pending", {job: 0})
            pipe.hset(f"{root}job:{job}", mapping={"state": "pending", "group": g, "payload": "{}"})
        pipe.execute()
    client.hset(root + "meta", "created_at", int(time.time() * 1000))


def cpu_ms(client: redis.Redis) -> float:
    info = client.info("cpu")
    return 1000 * (float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))


def commands(client: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()}


class Cost:
    """One run of a read: the server's commands, its CPU time and its longest call."""

    def __init__(self, client: redis.Redis, call: Callable[[], Any]):
        client.slowlog_reset()
        before, cpu = commands(client), cpu_ms(client)
        call()
        self.cpu = cpu_ms(client) - cpu
        after = commands(client)
        ours = ("info", "slowlog", "config")
        self.commands = sum(n - before.get(k, 0) for k, n in after.items() if k not in ours)
        log = [e for e in client.slowlog_get(1_000_000) if _name(e["command"]) not in ours]
        worst = max(log, key=lambda e: e["duration"]) if log else None
        self.longest = worst["duration"] / 1000 if worst else 0.0
        self.what = str(worst["command"])[:40] if worst else ""

    def line(self, name: str) -> str:
        return (
            f"{name:<34} {self.commands:>9,} commands  server CPU {self.cpu:8.1f} ms  "
            f"longest call {self.longest:6.2f} ms ({self.what})"
        )


def _name(command: Any) -> str:
    """A SLOWLOG entry's command name, lower case."""
    text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
    return text.split(" ", 1)[0].lower()


def best(client: redis.Redis, call: Callable[[], Any], repeat: int) -> Cost:
    """The run of least server CPU, its longest call the shortest of the runs' longest
    (a call the kernel paused on a shared machine is longer in SLOWLOG, a wall clock,
    than its own work)."""
    runs = [Cost(client, call) for _ in range(repeat)]
    kept = min(runs, key=lambda c: c.cpu)
    shortest = min(runs, key=lambda c: c.longest)
    kept.longest, kept.what = shortest.longest, shortest.what
    return kept


def whole_read(conn: Any) -> int:
    """Before: the lane backlog as `frames.counts` read it on every refresh."""
    groups = conn.client.smembers(queue_key(Q, "groups"))
    pipe = conn.client.pipeline(transaction=False)
    for g in groups:
        pipe.zcard(f"{base(Q)}g:{g}:pending")
    return sum(pipe.execute())


def whole_refresh(conn: Any) -> None:
    """Before: a refresh's lane reads: its counts (the whole read), and health's lane
    sample (another SMEMBERS, a ZRANGE of 10 lanes)."""
    whole_read(conn)
    groups = sorted(conn.client.smembers(queue_key(Q, "groups")))[:10]
    pipe = conn.client.pipeline(transaction=False)
    for g in groups:
        pipe.zrange(f"{base(Q)}g:{g}:pending", 0, 0)
    pipe.execute()


def main() -> None:
    opts = args()
    with server(shared_cpu=opts.shared_cpu) as srv:
        conn = connect(srv)
        client = redis.Redis(port=srv.port)
        t = time.perf_counter()
        fill(client, opts.lanes)
        print(f"{opts.lanes:,} lanes of one job made in {time.perf_counter() - t:.1f} s")
        # every call over 0.1 ms logged (a whole read's million ZCARDs are not: they would
        # push its SMEMBERS out of the log)
        client.config_set("slowlog-log-slower-than", SLOW_US)
        client.config_set("slowlog-max-len", 100_000)
        board = Dashboard(conn, auto=False)  # the first look: finds the queue, begins a pass
        conn.directory.wait(120)  # its sweep of the keyspace (once a minute at most) ended
        # and no other sweep starts while the reads are measured: a sweep's SCAN steps are
        # the directory's cost (bench/watch.py), not the lanes'
        stopped = conn.directory.clock()
        conn.directory.clock = lambda: stopped
        assert whole_read(conn) == frames.counts(conn, [Q]).loc[Q, "pending"] == opts.lanes
        costs = {
            "before: lane backlog read whole": best(client, lambda: whole_read(conn), opts.repeat),
            "before: a refresh's lane reads": best(client, lambda: whole_refresh(conn), opts.repeat),
            "frames.counts (exact)": best(client, lambda: frames.counts(conn, [Q]), opts.repeat),
            "frames.counts (watch=True)": best(
                client, lambda: frames.counts(conn, [Q], watch=True), opts.repeat
            ),
            "health.health": best(client, lambda: health.health(conn, [Q]), opts.repeat),
            "dashboard refresh": best(client, board.refresh, opts.repeat),
            "lanes.lanes (first 1,000)": best(client, lambda: lanes.lanes(conn, Q), opts.repeat),
            "admin.backlog (exact)": best(client, lambda: admin.backlog(conn, Q), opts.repeat),
        }
        board.close()
        print(f"{opts.lanes:,} lanes (best of {opts.repeat} runs by server CPU):")
        for name, cost in costs.items():
            print("  " + cost.line(name))
        before = costs["before: a refresh's lane reads"]
        after = costs["dashboard refresh"]
        print(
            f"a watching look sums {watching.LANE_EXACT:,} lanes of a queue: a pass over "
            f"{opts.lanes:,} takes {-(-opts.lanes // watching.LANE_EXACT):,} refreshes"
        )
        ours = [c for name, c in costs.items() if not name.startswith("before")]
        worst = max(c.longest for c in ours)
        print(
            f"worst call against 20 ms: {worst / TARGET_MS:.2f} ({worst:.2f} ms); "
            f"refresh/whole read server CPU: {after.cpu / max(before.cpu, 0.001):.3f}"
        )


if __name__ == "__main__":
    main()
