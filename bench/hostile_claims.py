"""What other nodes can make one call of the claims, their metrics and latency trims and
the repeat tick cost: the longest call the server ran (SLOWLOG, every call over 0.1 ms
logged) and the longest PING another process waited (`common.Pinger`), against 20 ms.

    python bench/hostile_claims.py [--scale 1] [--repeat 3] [--only NAME ...]

One private Valkey (`common.server`); each attack filled from a flushed server, then
run through the toolkit (the Worker, `jobs.claim`, `lanes.claim`, `repeat.tick`),
`--repeat` times: the best run counts (SLOWLOG is a wall clock on a shared machine).
The last line: `worst call against 20 ms: R (X ms, name)`.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from common import connect, logging_slower_than, server, shared_cpu_flag
from hostile import measured

from emq_notebook import Worker, jobs, lanes, repeat
from emq_notebook.keyspace import base, metrics_key, queue_key

Q = "tenants"
B = base(Q).encode()


def worker(conn, grouped: bool = False, jobs_: int = 1) -> Callable[[], Any]:
    def run() -> None:
        w = Worker(conn, Q, lambda *a: None, grouped=grouped, idle_sleep=10)
        got = w.run(max_jobs=jobs_, timeout=30)
        print(f"  worker: {got} job(s), bad_rows {w.bad_rows}")

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None, help="attack names to run")
    p.add_argument("--scale", type=float, default=1.0, help="the attacks' counts times this (default 1)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each attack; the best counts (default 3)")
    shared_cpu_flag(p)
    ns = p.parse_args()

    def n(count: int) -> int:
        """`count` at the run's scale (one at least)."""
        return max(1, int(count * ns.scale))

    worst: dict[str, float] = {}
    with server(shared_cpu=ns.shared_cpu) as srv:
        conn = connect(srv)
        c = logging_slower_than(srv, 100)

        def case(name: str, fill: Callable[[], None], fn: Callable[[], Any]) -> None:
            if ns.only and name not in ns.only:
                return
            runs = []
            for _ in range(ns.repeat):
                c.flushall()
                c.hset(queue_key(Q, "meta"), "created_at", "1")
                fill()
                runs.append(measured(c, srv.port, name, fn))
            worst[name] = min(runs)

        def job(group: str | None = None) -> None:
            jobs.enqueue(conn, Q, "{}", group=group, priority=0)

        def head_1mb_row() -> None:
            # a job another node wrote with an id of 1 MB, at the head of pending
            jid = b"h" * (1 << 20)
            c.hset(B + b"job:" + jid, mapping={"payload": "{}", "state": "pending", "attempts": "0"})
            c.zadd(queue_key(Q, "pending"), {jid: 0})

        case("flat-head-1MB-id-row", head_1mb_row, lambda: jobs.claim(conn, Q))

        def head_4mb_ghost() -> None:
            c.zadd(queue_key(Q, "pending"), {b"g" * (4 << 20): 0})
            job()

        case("flat-head-4MB-ghost", head_4mb_ghost, worker(conn))

        def head_wide_row() -> None:
            # the head row's numbers and times another node wrote 3 MB each (the claim
            # refuses it BadRow, every call: the Worker idles between)
            fields = ("attempts", "failures", "stalled", "max_attempts", "backoff", "priority")
            row = {f: b"9" * (3 << 20) for f in (*fields, "created_at", "due_at")}
            c.hset(B + b"job:wide", mapping={"payload": "{}", **row})
            c.zadd(queue_key(Q, "pending"), {"wide": -1})

        case("flat-head-row-8-fields-3MB", head_wide_row, lambda: jobs.claim(conn, Q))

        def ghosts_100k() -> None:
            pipe = c.pipeline(transaction=False)
            for i in range(n(300)):
                pipe.zadd(queue_key(Q, "pending"), {b"%04d" % i + b"\xfe" * 100_000: 0})
            pipe.execute()
            job()

        case("flat-300-ghosts-100KB", ghosts_100k, worker(conn))

        def big_lanes(size: int, n: int) -> Callable[[], None]:
            def fill() -> None:
                pipe = c.pipeline(transaction=False)
                for i in range(n):
                    g = b"%04d" % i + b"\xff" * size
                    pipe.hset(B + b"g:" + g + b":meta", mapping={"ring": "1", "paused": "1"})
                    pipe.rpush(queue_key(Q, "ring"), g)
                pipe.execute()
                job("ok")

            return fill

        case("ring-200-lanes-1MB", big_lanes(1 << 20, n(200)), worker(conn, grouped=True))
        case("ring-4-lanes-4MB", big_lanes(4 << 20, 4), worker(conn, grouped=True))
        case("ring-2000-lanes-60KB", big_lanes(60_000, n(2000)), worker(conn, grouped=True))

        def small_then_big() -> None:
            # 15 lanes no claim serves, then 16 of 4 MB: read 16 names at a time, the
            # ring's 5th read copied the 16 long names at once
            pipe = c.pipeline(transaction=False)
            for i in range(31):
                g = b"s%02d" % i + (b"\xff" * (4 << 20) if i >= 15 else b"")
                pipe.hset(B + b"g:" + g + b":meta", mapping={"ring": "1", "paused": "1"})
                pipe.rpush(queue_key(Q, "ring"), g)
            pipe.execute()
            job("ok")

        case("ring-15-then-16-lanes-4MB", small_then_big, worker(conn, grouped=True))

        def wrong_types() -> None:
            # a lane whose backlog is a string, ahead of one with a job; a lane whose
            # meta is a string is refused typed (the Worker counts it and idles)
            job("bad")
            job("ok")
            c.delete(B + b"g:bad:pending")
            c.set(B + b"g:bad:pending", "x")

        case("lane-backlog-string", wrong_types, worker(conn, grouped=True))

        def odd_metas() -> None:
            # 300 lanes on the ring whose meta another node wrote `paused` of 1 MB
            pipe = c.pipeline(transaction=False)
            for i in range(n(300)):
                g = b"p%03d" % i
                pipe.hset(B + b"g:" + g + b":meta", mapping={"ring": "1", "paused": b"y" * (1 << 20)})
                pipe.rpush(queue_key(Q, "ring"), g)
            pipe.execute()
            job("ok")

        case("ring-300-metas-paused-1MB", odd_metas, worker(conn, grouped=True))

        claimed: list[str] = []

        def paused_long() -> None:
            # a job claimed from a lane another node then paused writing 16 MB there
            claimed[:] = [jobs.enqueue(conn, Q, "{}", group="acme")]
            lanes.claim(conn, Q)
            c.hset(B + b"g:acme:meta", "paused", b"y" * (16 << 20))

        case("complete-lane-paused-16MB", paused_long, lambda: jobs.complete(conn, Q, claimed[0]))

        def concurrent_ghosts() -> None:
            c.zadd(queue_key(Q, "pending"), {f"b{i:08d}": -1 for i in range(n(5_000))})
            job()

        def race() -> None:
            # another client adds 1,000 ghosts ahead of the job every 10 ms for 2 s while
            # the Worker claims: each call stays bounded, and the job is served once it stops
            other = redis.Redis(port=srv.port)
            stop = threading.Event()

            def add() -> None:
                k, end = 0, time.monotonic() + 2
                while time.monotonic() < end and not stop.is_set():
                    other.zadd(queue_key(Q, "pending"), {f"a{k + i:08d}": -1 for i in range(1000)})
                    k += 1000
                    time.sleep(0.01)

            t = threading.Thread(target=add)
            t.start()
            time.sleep(0.1)
            try:
                worker(conn)()
            finally:
                stop.set()
                t.join()

        case("concurrent-ghosts-2s", concurrent_ghosts, race)

        def lane_ghosts() -> None:
            job("a")
            pipe = c.pipeline(transaction=False)
            for i in range(n(300)):
                pipe.zadd(B + b"g:a:pending", {b"%04d" % i + b"\xfe" * 100_000: -1})
            pipe.execute()

        case("lane-300-ghosts-100KB", lane_ghosts, worker(conn, grouped=True))

        def metrics_names(size: int, n: int) -> Callable[[], None]:
            def fill() -> None:
                c.hset(queue_key(Q, "meta"), "metrics_keep", "5")
                pipe = c.pipeline(transaction=False)
                for i in range(n):
                    pipe.hset(metrics_key(Q, "claimed"), b"%05d" % i + b"9" * size, "1")
                pipe.execute()
                job()

            return fill

        case("metrics-4000-names-10KB", metrics_names(10_000, n(4000)), lambda: jobs.claim(conn, Q))
        case("metrics-5000-names-100KB", metrics_names(100_000, n(5000)), lambda: jobs.claim(conn, Q))

        def latency_names() -> None:
            c.hset(queue_key(Q, "meta"), "metrics_keep", "5")
            pipe = c.pipeline(transaction=False)
            for i in range(n(600)):
                pipe.zadd(B + b"lat:minutes", {b"%04d" % i + b"m" * 100_000: i})
            pipe.execute()
            job()

        case("latency-600-minutes-100KB", latency_names, lambda: jobs.claim(conn, Q))

        def reported_huge() -> None:
            pipe = c.pipeline(transaction=False)
            for i in range(n(100)):
                name = b"bad%03d" % i
                pipe.hset(B + b"repeat:defs", name, "not json")
                pipe.zadd(B + b"repeat", {name: 0})
                pipe.hset(B + b"repeat:reported", name, b"x" * (4 << 20))
            pipe.execute()

        case("repeat-reported-100x4MB", reported_huge, lambda: repeat.tick(conn, Q))

        def repeat_defs(
            n: int, text: Callable[[int], bytes], name: Callable[[int], bytes]
        ) -> Callable[[], None]:
            def fill() -> None:
                pipe = c.pipeline(transaction=False)
                for i in range(n):
                    pipe.zadd(B + b"repeat", {name(i): 0})
                    pipe.hset(B + b"repeat:defs", name(i), text(i))
                    if i % 1000 == 999:
                        pipe.execute()
                pipe.execute()

            return fill

        def ticks(n: int) -> Callable[[], None]:
            def run() -> None:
                for _ in range(n):
                    repeat.tick(conn, Q)

            return run

        big = b'{"every": 1000, "payload": "' + b"p" * (8 << 20) + b'"}'
        case("repeat-20-defs-8MB", repeat_defs(n(20), lambda i: big, lambda i: b"big%02d" % i), ticks(3))
        bad = repeat_defs(n(5000), lambda i: b"not json", lambda i: b"bad%05d" % i)
        case("repeat-5000-bad-defs", bad, ticks(12))

        def no_defs() -> None:
            for start in range(0, n(100_000), 10_000):
                c.zadd(
                    B + b"repeat", {b"gone%06d" % i: 0 for i in range(start, min(n(100_000), start + 10_000))}
                )

        case("repeat-100000-no-defs", no_defs, ticks(3))
        nonutf8 = repeat_defs(
            n(200), lambda i: b"\xff not json", lambda i: b"%03d" % i + b"\xfe\xff" * 50_000
        )
        case("repeat-200-names-100KB-not-utf8", nonutf8, ticks(10))

    name, ms = max(worst.items(), key=lambda kv: kv[1])
    print(f"worst call against 20 ms: {ms / 20:.2f} ({ms:.2f} ms, {name})")


if __name__ == "__main__":
    main()
