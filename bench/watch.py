"""What watching costs the server: a dashboard refresh of 1,000 queues on one server and
on 3 primaries, side by side, and a refresh's commands beside foreign keys.

First, two private Valkeys side by side, the same queues on each (`--queues-here`
queues, a backlog, dead letters, a lane, one paused), one of them also holding `--keys`
keys of another application (default 2,000,000). A Dashboard is opened on each (that
first look finds the queues: a SCAN sweep), then refreshed in turn, `--repeat` times:
each refresh's commands are counted by the server (`INFO commandstats`) and timed. The
target: no SCAN in a refresh, and the same commands beside the foreign keys as without
(ratio 1.0). For scale, one whole sweep is timed too (`frames.queues(rescan=True)`).

Then `--queues` queues (default 1,000; a backlog each, dead letters in every third, a
lane in every fourth, one paused) on a private Valkey and on a local 3-primary Valkey
Cluster (tests/cluster.py), side by side: a Dashboard opened on each, then its refresh
and `frames.health` of all, alternating, `--repeat` times, the best kept; beside each
the server CPU (`INFO cpu`, summed over the primaries) and the commands (`INFO
commandstats`: the calls sent, and the commands the scripts ran) a queue, and the load
average. `--no-cluster` skips the cluster.

The last line: `worst refresh of 1,000 queues: X ms (target 300 ms): R`, the slower
side's best refresh and its ratio to the target.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from common import commandstats as stats
from common import connect, server, shared_cpu_flag

import emq_notebook as emq
from emq_notebook import admin, frames, jobs
from emq_notebook.widgets import Dashboard

TESTS = Path(__file__).resolve().parent.parent / "tests"


def args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--keys",
        "--jobs",
        dest="keys",
        type=int,
        default=2_000_000,
        help="foreign keys beside the queues (default 2,000,000; --jobs: the same, as every bench names it)",
    )
    p.add_argument("--queues-here", type=int, default=20, help="queues on each private Valkey (default 20)")
    p.add_argument("--queues", type=int, default=1000, help="queues on the local cluster (default 1,000)")
    p.add_argument("--repeat", type=int, default=3, help="refreshes of each side; the best time counts")
    p.add_argument("--no-cluster", action="store_true", help="skip the cluster part")
    shared_cpu_flag(p)
    return p.parse_args()


def counted(clients: list[redis.Redis], call: Callable[[], Any]) -> tuple[float, dict[str, int]]:
    """(seconds, {command: calls}) of `call()`, less the INFO that counts them."""
    before = stats(clients)
    t = time.perf_counter()
    call()
    took = time.perf_counter() - t
    after = stats(clients)
    sent = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    sent["info"] = sent.get("info", 0) - len(clients)
    return took, {k: n for k, n in sent.items() if n}


def stage(conn: emq.Connection, n: int) -> None:
    """`n` queues: a backlog of 100 each, 10 dead in every third, a lane in every
    fourth, the first paused."""
    pipe = conn.pipeline()
    for i in range(n):
        q = f"q{i:03d}"
        for j in range(100):
            jobs.enqueue(
                conn, q, "{}", max_attempts=1, group="acme" if i % 4 == 0 and j < 10 else None, pipeline=pipe
            )
    pipe.execute()
    for i in range(0, n, 3):
        q = f"q{i:03d}"
        for _ in range(10):
            got = jobs.claim(conn, q, 60_000)
            jobs.fail(conn, q, got.id, "SMTP 550")
    admin.pause(conn, "q000")


def foreign(client: redis.Redis, n: int) -> None:
    for start in range(0, n, 10_000):
        client.mset({f"other:app:{i}": "v" for i in range(start, min(n, start + 10_000))})


def words(sent: dict[str, int]) -> str:
    return ", ".join(f"{k} {n:,}" for k, n in sorted(sent.items(), key=lambda kv: -kv[1]))


def single(opts: argparse.Namespace) -> tuple[float, int]:
    """The two private Valkeys side by side; answers the commands ratio (with over
    without foreign keys) and the SCAN calls of a refresh beside them."""
    with server(shared_cpu=opts.shared_cpu) as bare, server(shared_cpu=opts.shared_cpu) as crowded:
        sides = []
        for srv in (bare, crowded):
            conn = connect(srv)
            stage(conn, opts.queues_here)
            sides.append((conn, redis.Redis(port=srv.port)))
        t = time.perf_counter()
        foreign(sides[1][1], opts.keys)
        stored = time.perf_counter() - t
        print(f"{opts.queues_here} queues on each side; {opts.keys:,} foreign keys stored in {stored:.1f} s")
        boards: list[Dashboard] = []
        for srv, (_, client), name in zip((bare, crowded), sides, ("without", "with"), strict=True):
            # a connection of its own: its first look finds the queues (the sweep)
            fresh = connect(srv)
            took, sent = counted([client], lambda fresh=fresh: boards.append(Dashboard(fresh, auto=False)))
            total, scans = sum(sent.values()), sent.get("scan", 0)
            print(f"open {name} foreign keys: {took * 1000:.0f} ms, SCAN {scans:,}, {total:,} commands")
        times: list[list[float]] = [[], []]
        sents: list[dict[str, int]] = [{}, {}]
        for _ in range(opts.repeat):
            for k, ((_, client), board) in enumerate(zip(sides, boards, strict=True)):
                took, sent = counted([client], board.refresh)
                times[k].append(took)
                sents[k] = sent
        for k, name in enumerate(("without", "with")):
            print(
                f"refresh {name} foreign keys: {min(times[k]) * 1000:.1f} ms (best of {opts.repeat}), "
                f"{sum(sents[k].values()):,} commands, SCAN {sents[k].get('scan', 0)}: {words(sents[k])}"
            )
        crowded_conn = boards[1].conn
        took, sent = counted([sides[1][1]], lambda: frames.queues(crowded_conn, rescan=True))
        print(
            f"for scale, one whole sweep beside {opts.keys:,} keys (the first look, a rescan, the "
            f"background at most once a minute; never a refresh): {took * 1000:.0f} ms, "
            f"SCAN {sent.get('scan', 0):,}"
        )
        print(f"refresh time with/without foreign keys: {min(times[1]) / min(times[0]):.2f}")
        for board in boards:
            board.close()
        return sum(sents[1].values()) / sum(sents[0].values()), sents[1].get("scan", 0)


def cpu_ms(clients: list[redis.Redis]) -> float:
    """The servers' CPU time so far (user and system, ms), summed over `clients`."""
    return sum(
        (float(c.info("cpu")["used_cpu_user"]) + float(c.info("cpu")["used_cpu_sys"])) * 1000 for c in clients
    )


def stage_many(conn: emq.Connection, n: int) -> None:
    """`n` queues in one pipeline: 20 jobs each, 3 of them in a lane in every fourth queue;
    then 3 dead in every third and the first paused."""
    pipe = conn.pipeline()
    for i in range(n):
        for j in range(20):
            group = "acme" if i % 4 == 0 and j < 3 else None
            jobs.enqueue(conn, f"m{i:04d}", "{}", max_attempts=1, group=group, pipeline=pipe)
    pipe.execute()
    for i in range(0, n, 3):
        for _ in range(3):
            got = jobs.claim(conn, f"m{i:04d}", 60_000)
            jobs.fail(conn, f"m{i:04d}", got.id, "SMTP 550")
    admin.pause(conn, "m0000")


class Side:
    """One server (or cluster) watched: its dashboard, its primaries, its best times."""

    def __init__(self, name: str, url: str, nodes: list[redis.Redis], n: int):
        self.name, self.nodes = name, nodes
        stage_many(emq.connect(url), n)
        self.conn = emq.connect(url)  # a connection of its own: its first look finds the queues
        self.opened, sent = counted(nodes, lambda: setattr(self, "board", Dashboard(self.conn, auto=False)))
        self.open_commands = sum(sent.values())
        self.best: dict[str, float] = {}
        self.cost: dict[str, tuple[float, dict[str, int]]] = {}

    def time(self, what: str, call: Callable[[], Any]) -> None:
        before = cpu_ms(self.nodes)
        took, sent = counted(self.nodes, call)
        cpu = cpu_ms(self.nodes) - before
        if took < self.best.get(what, float("inf")):
            self.best[what] = took
            self.cost[what] = (cpu, sent)

    def say(self, what: str, n: int) -> str:
        cpu, sent = self.cost[what]
        # the scripts' own commands count in commandstats as their names: a call's are the rest
        calls = sum(sent.get(k, 0) for k in ("evalsha", "fcall_ro", "script|exists"))
        ran = sum(v for k, v in sent.items() if k not in ("evalsha", "fcall_ro", "script|exists", "info"))
        return (
            f"{what} of {n:,} queues on {self.name}: {self.best[what] * 1000:.0f} ms, "
            f"server CPU {cpu:.0f} ms, {calls / n:.2f} calls sent a queue, "
            f"{ran / n:.1f} commands run by its scripts a queue, SCAN {sent.get('scan', 0)}"
        )


def many(opts: argparse.Namespace) -> float:
    """`opts.queues` queues on a private Valkey and on the local cluster, side by side;
    answers the slower side's best refresh (seconds)."""
    sys.path.insert(0, str(TESTS))
    from cluster import LocalCluster

    with server(shared_cpu=opts.shared_cpu) as srv:
        sides = [
            Side("one server", f"redis://127.0.0.1:{srv.port}/0", [redis.Redis(port=srv.port)], opts.queues)
        ]
        c = None if opts.no_cluster else LocalCluster().start()
        try:
            if c is not None:
                nodes = [redis.Redis(port=n.port) for n in c.nodes]
                sides.append(Side("3 primaries", c.url, nodes, opts.queues))
            for side in sides:
                print(
                    f"open {opts.queues:,} queues on {side.name}: {side.opened * 1000:.0f} ms, "
                    f"{side.open_commands:,} commands"
                )
            for _ in range(opts.repeat):
                for side in sides:
                    side.time("refresh", side.board.refresh)
                    side.time("frames.health", lambda side=side: frames.health(side.conn))
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            for what in ("refresh", "frames.health"):
                for side in sides:
                    print(f"{side.say(what, opts.queues)} (best of {opts.repeat}; load average {load})")
            for side in sides:
                side.board.close()
            return max(side.best["refresh"] for side in sides)
        finally:
            if c is not None:
                c.stop()


def main() -> None:
    opts = args()
    ratio, scans = single(opts)
    print(f"refresh commands with/without foreign keys: {ratio:.2f} (target 1.0, no SCAN: SCAN {scans})")
    worst = many(opts) * 1000
    print(f"worst refresh of {opts.queues:,} queues: {worst:.0f} ms (target 300 ms): {worst / 300:.2f}")


if __name__ == "__main__":
    main()
