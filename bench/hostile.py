"""What other nodes and a hostile operator can make one call of the toolkit cost: the
longest call the server ran (SLOWLOG, every call over 0.1 ms logged) and the longest
PING another process waited (`common.Pinger`) for each attack, against the 20 ms bound.

One private Valkey (`common.server`). The attacks (`--jobs` scales the counts):
- audit: `--jobs` small entries, the newest, above 30 entries of 2 MB another node
  wrote, read with `audit.read(limit=...)` (a page sized on the small ones copied the
  large ones whole: 40.6 ms before `@read_audit`);
- drain: 20 lanes another node named 1 MB each, and a lane whose backlog is a string
  (46-55 ms a call before; WRONGTYPE stopped every call);
- ghost: removing ghosts while the queue knows 1,000 lanes named 60 KB each (159 ms
  for one before, 182 ms a bulk call);
- lane: `%emq lane` and a completion prefix of 16 MB typed by the operator (20 and 29
  ms before).

The last line: `worst call against 20 ms: R (X ms)`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import redis
from common import Pinger, connect, logging_slower_than, server, shared_cpu_flag

from emq_notebook import admin, audit, jobs, lanes
from emq_notebook.keyspace import audit_key, base, queue_key

Q = "tenants"


def measured(c: redis.Redis, port: int, name: str, fn: Callable[[], Any]) -> float:
    """Run `fn` once; print and answer its longest server call (ms)."""
    c.slowlog_reset()
    with Pinger(port) as ping:
        start = time.perf_counter()
        try:
            fn()
            said = "done"
        except Exception as exc:  # a typed refusal is an answer too
            said = f"{type(exc).__name__}"
        wall = (time.perf_counter() - start) * 1000
    calls = [e["duration"] / 1000 for e in c.slowlog_get(100_000) if not e["command"].startswith(b"PING")]
    worst = max(calls, default=0.0)
    waited = ping.worst * 1000
    print(f"{name}: {said}, {wall:.0f} ms wall, longest call {worst:.2f} ms, PING worst {waited:.1f} ms")
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2000, help="small audit entries and ghosts (default 2,000)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each attack; the best counts")
    shared_cpu_flag(p)
    ns = p.parse_args()
    worst: dict[str, float] = {}
    with server(shared_cpu=ns.shared_cpu) as srv:
        conn = connect(srv)
        c = logging_slower_than(srv, 100)

        def best(name: str, fn: Callable[[], Any], fill: Callable[[], None]) -> None:
            runs = []
            for _ in range(ns.repeat):
                fill()
                runs.append(measured(c, srv.port, name, fn))
            worst[name] = min(runs)

        def audit_fill() -> None:
            c.delete(audit_key(Q))
            for _ in range(30):
                c.xadd(audit_key(Q), {"verb": "drain", "args": b"\xff" * (2 << 20)})
            pipe = c.pipeline(transaction=False)
            for _ in range(ns.jobs):
                pipe.xadd(audit_key(Q), {"verb": "drain", "outcome": "done"})
            pipe.execute()

        best("audit", lambda: audit.read(conn, Q, limit=ns.jobs + 30), audit_fill)

        def drain_fill() -> None:
            c.flushall()
            c.hset(queue_key(Q, "meta"), "created_at", "1")
            for i in range(20):
                g = b"%02d" % i + b"\xff" * (1 << 20)
                c.sadd(queue_key(Q, "groups"), g)
                c.zadd(base(Q).encode() + b"g:" + g + b":pending", {b"j%d" % i: 0})
            c.sadd(queue_key(Q, "groups"), "strlane")
            c.set(f"{base(Q)}g:strlane:pending", "x")

        best("drain", lambda: admin.drain(conn, Q), drain_fill)

        def ghost_fill() -> None:
            c.flushall()
            c.hset(queue_key(Q, "meta"), "created_at", "1")
            pipe = c.pipeline(transaction=False)
            for i in range(1000):
                pipe.sadd(queue_key(Q, "groups"), f"{i:04d}" + "n" * 60_000)
            pipe.zadd(queue_key(Q, "pending"), {f"ghost{k}": k for k in range(ns.jobs)})
            pipe.execute()

        best("ghost", lambda: jobs.remove_job(conn, Q, "ghost0"), ghost_fill)
        best("ghosts", lambda: admin.remove_jobs(conn, Q, [f"ghost{k}" for k in range(ns.jobs)]), ghost_fill)
        big = "L" * (16 << 20)
        best("lane", lambda: lanes.lane(conn, Q, big), lambda: None)
        best("completion", lambda: lanes.names(conn, Q, big), lambda: None)
    name, ms = max(worst.items(), key=lambda kv: kv[1])
    print(f"worst call against 20 ms: {ms / 20:.2f} ({ms:.2f} ms, {name})")


if __name__ == "__main__":
    main()
