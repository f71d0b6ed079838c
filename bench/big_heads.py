"""What a watching look holds Valkey when another node put a member of many MB at an end of
a queue's sets: the longest call (SLOWLOG, over 0.1 ms logged) and the longest PING another
process waited (`common.Pinger`), the code before the guard and now, side by side.

One private Valkey (`common.server`). For each place (pending's head, the first job of its
lowest priority, a lane's head, the schedule's due head, the newest dead) and each size
(`--sizes`, MB), one queue of 300 small jobs of two priorities, a lane, a schedule and
dead jobs gets one huge member there; then one look of each kind runs, `--repeat` times
on each side, alternating: `frames.health`, a dashboard refresh (`Dashboard.refresh`) and
`frames.counts(watch=True)`. The "before" side runs the code of git ref `--before`
(default ac681cf, the last commit without the guard), extracted to a temporary tree, in
a child process; "now" runs this tree's, the same way.

Then what the guard costs an ordinary look: `--queues` queues (200 by default) of 1,000
pending jobs in two priorities, 300 dead and 50 scheduled (no huge member anywhere):
the server CPU (INFO cpu) of one `frames.health` of all of them, before and now, the
mean of 10 looks, alternating.

The last lines: `health of N queues, server CPU a look: now/before R` and
`worst call before/now: R (before X ms, now Y ms)`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import redis
from common import Pinger, logging_slower_than, server, shared_cpu_flag

ROOT = Path(__file__).resolve().parent.parent
Q = "big"
PLACES = ("head", "band", "lane", "due", "dead")


def stage(c: redis.Redis, place: str, size: int) -> None:
    """The queue, small, then one member of `size` bytes at `place`."""
    c.flushall()
    now = int(c.time()[0]) * 1000
    k = f"emq:{{{Q}}}:"
    c.zadd(k + "pending", {f"j_{i:04d}": i % 2 for i in range(300)})
    for i in range(300):
        c.hset(f"{k}job:j_{i:04d}", mapping={"payload": "{}", "created_at": now, "due_at": now})
    c.hset(k + "meta", "created_at", now - 86_400_000)
    c.sadd(k + "groups", "acme")
    c.zadd(k + "g:acme:pending", {"j_acme": 0})
    c.zadd(k + "schedule", {f"s_{i:04d}": now - 600_000 + i for i in range(200)})
    c.zadd(k + "dead", {f"d_{i:04d}": now - 7_200_000 - i for i in range(200)})
    big = "X" * size
    key, score = {
        "head": ("pending", -1),
        "band": ("pending", 1),
        "lane": ("g:acme:pending", -1),
        "due": ("schedule", now - 3_600_000),
        "dead": ("dead", now - 60_000),
    }[place]
    if place == "band":
        big = "0" * size  # first of its band
    c.zadd(k + key, {big: score})


def stage_many(c: redis.Redis, queues: int) -> None:
    """`queues` ordinary queues: 1,000 pending jobs in two priorities, 300 dead, 50
    scheduled (a few overdue), each job with its row's two time fields."""
    c.flushall()
    now = int(c.time()[0]) * 1000
    pipe = c.pipeline(transaction=False)
    for n in range(queues):
        k = f"emq:{{{Q}{n:03d}}}:"
        pipe.hset(k + "meta", "created_at", now - 86_400_000)
        pipe.zadd(k + "pending", {f"j_{i:04d}": 5 * (i % 2) for i in range(1000)})
        pipe.zadd(k + "dead", {f"d_{i:04d}": now - 3_600_000 - 1000 * i for i in range(300)})
        pipe.zadd(k + "schedule", {f"s_{i:04d}": now - 60_000 + 10_000 * i for i in range(50)})
        for i in range(2):
            pipe.hset(f"{k}job:j_{i:04d}", mapping={"payload": "{}", "created_at": now, "due_at": now})
        pipe.execute()


def cost(port: int, queues: int) -> dict:
    """In the child: the server CPU (ms) of one health look of `queues` queues, the mean of 10."""
    import emq_notebook as emq
    from emq_notebook import frames

    conn = emq.connect(f"redis://127.0.0.1:{port}/0")
    c = redis.Redis(port=port)
    names = [f"{Q}{n:03d}" for n in range(queues)]
    frames.health(conn, names)

    def cpu() -> float:
        got = c.info("cpu")
        return float(got["used_cpu_sys"]) + float(got["used_cpu_user"])

    before = cpu()
    for _ in range(10):
        frames.health(conn, names)
    return {"cpu": (cpu() - before) / 10 * 1000}


def look(port: int, kind: str) -> dict:
    """In the child: one warm look (scripts loaded, the queue known), then the measured one."""
    import emq_notebook as emq
    from emq_notebook import frames
    from emq_notebook.widgets import Dashboard

    conn = emq.connect(f"redis://127.0.0.1:{port}/0")
    c = redis.Redis(port=port)
    board = Dashboard(conn, auto=False) if kind == "dashboard" else None
    run = {
        "health": lambda: frames.health(conn, [Q]),
        "dashboard": lambda: board.refresh(),
        "counts": lambda: frames.counts(conn, [Q], watch=True),
    }[kind]
    run()
    c.slowlog_reset()
    with Pinger(port) as ping:
        run()
    calls = [e["duration"] / 1000 for e in c.slowlog_get(10_000) if not e["command"].startswith(b"PING")]
    if board is not None:
        board.close()
    return {"call": max(calls, default=0.0), "ping": ping.worst * 1000}


def side(tree: Path, port: int, kind: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{Path(__file__).parent}"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(port), kind],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        port, kind = int(sys.argv[2]), sys.argv[3]
        said = cost(port, int(kind[5:])) if kind.startswith("cost:") else look(port, kind)
        print(json.dumps(said))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,10,30", help="member sizes in MB (default 1,10,30)")
    p.add_argument("--places", default=",".join(PLACES), help=f"where (default {','.join(PLACES)})")
    p.add_argument("--looks", default="health,dashboard,counts", help="which looks")
    p.add_argument("--before", default="ac681cf", help="the git ref of the code before (default ac681cf)")
    p.add_argument("--repeat", type=int, default=2, help="looks of each side; the worst counts")
    p.add_argument("--queues", type=int, default=200, help="ordinary queues the cost is measured on")
    shared_cpu_flag(p)
    ns = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ns.before], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        worst = {"before": 0.0, "now": 0.0}
        with server(shared_cpu=ns.shared_cpu) as srv:
            c = logging_slower_than(srv, 100, keep=10_000)
            for mb in (float(s) for s in ns.sizes.split(",")):
                for place in ns.places.split(","):
                    stage(c, place, int(mb * (1 << 20)))
                    for kind in ns.looks.split(","):
                        got: dict[str, list[dict]] = {"before": [], "now": []}
                        for _ in range(ns.repeat):
                            for name, tree in (("before", before), ("now", ROOT)):
                                got[name].append(side(tree, srv.port, kind))
                        said = []
                        for name in ("before", "now"):
                            call = max(g["call"] for g in got[name])
                            ping = max(g["ping"] for g in got[name])
                            worst[name] = max(worst[name], call)
                            said.append(f"{name} call {call:6.2f} ms, PING {ping:6.1f} ms")
                        print(f"{mb:g} MB at {place:5} {kind:9}: " + " | ".join(said), flush=True)
            stage_many(c, ns.queues)
            spent: dict[str, list[float]] = {"before": [], "now": []}
            for _ in range(max(2, ns.repeat)):
                for name, tree in (("before", before), ("now", ROOT)):
                    spent[name].append(side(tree, srv.port, f"cost:{ns.queues}")["cpu"])
            b, n = statistics.median(spent["before"]), statistics.median(spent["now"])
            print(
                f"health of {ns.queues} queues, server CPU a look: now/before {n / b:.2f} "
                f"(before {b:.1f} ms, now {n:.1f} ms)",
                flush=True,
            )
        ratio = worst["before"] / max(worst["now"], 0.001)
        print(
            f"worst call before/now: {ratio:.1f} (before {worst['before']:.1f} ms, now {worst['now']:.1f} ms)"
        )


if __name__ == "__main__":
    main()
