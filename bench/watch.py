"""What watching costs the server: one dashboard refresh, its commands and its time.

Two private Valkeys side by side, the same queues on each (`--queues-here` queues,
a backlog, dead letters, a lane, one paused), one of them also holding `--keys`
keys of another application (default 2,000,000). A Dashboard is opened on each
(that first look finds the queues: a SCAN sweep), then refreshed in turn,
`--repeat` times: each refresh's commands are counted by the server (`INFO
commandstats`) and timed, the best time kept. The target: no SCAN in a refresh,
and the same commands beside the foreign keys as without (ratio 1.0). For scale,
one whole sweep is timed too (`frames.queues(rescan=True)`): the first look, a
rescan and the background (at most once a minute) do one; a refresh never does.

Then a local 3-primary Valkey Cluster (tests/cluster.py) with `--queues` queues
(default 1,000), one job each: the dashboard's open and its refresh, timed, and the
commands of a refresh summed over the primaries. `--no-cluster` skips it.

The last line: `refresh commands with/without foreign keys: R (target 1.0, no SCAN)`.
"""

from __future__ import annotations

import argparse
import statistics
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


def cluster(opts: argparse.Namespace) -> None:
    sys.path.insert(0, str(TESTS))
    from cluster import LocalCluster

    c = LocalCluster().start()
    try:
        conn = emq.connect(c.url)
        pipe = conn.pipeline()
        for i in range(opts.queues):
            jobs.enqueue(conn, f"m{i:04d}", "{}", pipeline=pipe)
        pipe.execute()
        nodes = [redis.Redis(port=n.port) for n in c.nodes]
        fresh = emq.connect(c.url)
        board: list[Dashboard] = []
        opened, sent = counted(nodes, lambda: board.append(Dashboard(fresh, auto=False)))
        total = sum(sent.values())
        print(
            f"cluster, {opts.queues:,} queues, 3 primaries: open {opened * 1000:.0f} ms, {total:,} commands"
        )
        times = []
        for _ in range(opts.repeat):
            took, sent = counted(nodes, board[0].refresh)
            times.append(took)
        per = sum(sent.values())
        print(
            f"cluster refresh: {min(times) * 1000:.0f} ms (best of {opts.repeat}, median "
            f"{statistics.median(times) * 1000:.0f} ms), {per:,} commands ({per / opts.queues:.1f} a queue), "
            f"SCAN {sent.get('scan', 0)}"
        )
        took, _ = counted(nodes, lambda: frames.health(fresh))
        print(f"cluster frames.health of all {opts.queues:,}: {took * 1000:.0f} ms")
        board[0].close()
    finally:
        c.stop()


def main() -> None:
    opts = args()
    ratio, scans = single(opts)
    if not opts.no_cluster:
        cluster(opts)
    print(f"refresh commands with/without foreign keys: {ratio:.2f} (target 1.0, no SCAN: SCAN {scans})")


if __name__ == "__main__":
    main()
