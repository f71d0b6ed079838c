"""Every operator verb on a million-job queue, with a PING process alongside, side
by side with BullMQ 3.4.4 (bench/peers.py's venv) on a queue of the same shape.

The queue: 40% pending, 20% scheduled an hour out, 30% dead (50 error kinds), 10%
grouped in 100 lanes, 100-byte payloads, built with `jobs.enqueue_many`. Measured:
enqueue_many (jobs/s) against BullMQ's addBulk in chunks of 1,000; `frames.counts`
and `frames.health`; `frames.snapshot(limit=1000)`; the full `frames.snapshot`
against the pipelined floor, with and without Arrow-backed strings (peak RSS);
`drain` of the pending, `reprocess_dead` of the dead and `obliterate_all` of the
rest, each against ONE unbounded script doing the same work (the floor) and
against BullMQ's drain, retryJobs and obliterate; `%emq status` and `%emq jobs
--state dead` in a real IPython shell. Each figure names its target; the worst
PING is the slowest PING another process saw meanwhile, and "longest call" the
longest single command the server ran (SLOWLOG), which is what a PING waits on.

    python bench/scale.py [--jobs 1000000]
    # last line: the worst ratio of a figure to its target (<= 1 meets every target)
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing as mp
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import redis
from common import Pinger, args, connect, payload, server
from peers import peers_python

import emq_notebook as emq
from emq_notebook import admin, frames, jobs
from emq_notebook.keyspace import STATES, base, queue_key

Q = "scale"
LANES = 100
KINDS = 50
HERE = Path(__file__).resolve().parent
HOUR = 3_600_000


def shape(n: int) -> dict[str, int]:
    """How many jobs of each kind (bench/bullmq_scale.py splits N the same way)."""
    dead, schedule, grouped = n * 3 // 10, n * 2 // 10, n // 10
    return {"dead": dead, "schedule": schedule, "grouped": grouped, "pending": n - dead - schedule - grouped}


def error_text(i: int) -> str:
    """One of `KINDS` failure causes (letters, so they stay apart once numbers are masked)."""
    k = i % KINDS
    return f"kind {chr(97 + k // 26)}{chr(97 + k % 26)} failed for user{i}"


# -- the queue ---------------------------------------------------------------------


def build(conn, n: int, payloads: list[str]) -> None:
    """The whole queue through enqueue_many: the future dead first (one attempt each),
    so they head pending and the set-up claims them; then pending, schedule, lanes."""
    part = shape(n)
    cut = 0

    def take(k: int) -> list[str]:
        nonlocal cut
        cut += k
        return payloads[cut - k : cut]

    jobs.enqueue_many(conn, Q, take(part["dead"]), max_attempts=1)
    jobs.enqueue_many(conn, Q, take(part["pending"]))
    jobs.enqueue_many(conn, Q, take(part["schedule"]), delay=HOUR)
    lanes = min(LANES, part["grouped"]) or 1
    for k in range(lanes):
        size = part["grouped"] // lanes + (1 if k < part["grouped"] % lanes else 0)
        jobs.enqueue_many(conn, Q, take(size), group=f"lane{k:03d}")


def kill(conn, count: int) -> None:
    """Set-up, untimed: claim the head of pending and fail it, `count` times, through
    the real scripts (pipelined): each goes dead with one of the error kinds."""
    keys = [queue_key(Q, "pending"), queue_key(Q, "active"), base(Q)]
    done = 0
    while done < count:
        size = min(1000, count - done)
        pipe = conn.pipeline()
        for _ in range(size):
            conn.run("claim2", keys, [600_000, conn.token], verb="claim", queue=Q, pipeline=pipe)
        claimed = pipe.execute()
        pipe = conn.pipeline()
        for i, job in enumerate(claimed):
            jobs.fail(conn, Q, job.id, error_text(done + i), pipeline=pipe)
        assert set(pipe.execute()) == {"dead"}
        done += size


def stage(conn, n: int, payloads: list[str]) -> None:
    build(conn, n, payloads)
    kill(conn, shape(n)["dead"])


# -- measuring ---------------------------------------------------------------------


class Figure:
    """One measured thing: seconds, the PINGs and the longest server call meanwhile."""

    def __init__(self, seconds: float, pinger: Pinger, longest: float, result: object = None):
        self.seconds, self.longest, self.result = seconds, longest, result
        self.ping, self.p99 = pinger.worst, pinger.quantile(0.99)
        self.slow, self.pings = pinger.over(0.020)

    def pinged(self) -> str:
        """`worst PING 31.2 ms (p99 1.0 ms; 3 of 20,118 over 20 ms)`."""
        return f"worst PING {ms(self.ping)} (p99 {ms(self.p99)}; {self.slow:,} of {self.pings:,} over 20 ms)"


def longest_call(client) -> float:
    """The longest command in SLOWLOG since the last reset, in seconds; then reset."""
    entries = client.slowlog_get(100_000)
    client.slowlog_reset()
    return max((e["duration"] for e in entries), default=0) / 1e6


def watched(srv, client, work: Callable[[], object]) -> Figure:
    client.slowlog_reset()
    with Pinger(srv.port) as pinger:
        t = time.perf_counter()
        result = work()
        took = time.perf_counter() - t
    return Figure(took, pinger, longest_call(client), result)


def quick(srv, client, work: Callable[[], object], tries: int = 5) -> Figure:
    """A read an operator repeats: the best of `tries`, the worst PING over all of them."""
    client.slowlog_reset()
    with Pinger(srv.port) as pinger:
        times = []
        for _ in range(tries):
            t = time.perf_counter()
            result = work()
            times.append(time.perf_counter() - t)
    return Figure(min(times), pinger, longest_call(client), result)


# -- the full snapshot, each side in a fresh process (its own peak RSS) -------------


def floor_snapshot(client: redis.Redis) -> pd.DataFrame:
    """What a person writes by hand: the ids of every set and lane, pipelined HGETALL
    in batches of 1,000, one DataFrame."""
    groups = sorted(client.smembers(queue_key(Q, "groups")))
    pipe = client.pipeline(transaction=False)
    for key in [queue_key(Q, s) for s in STATES] + [queue_key(Q, f"g:{g}:pending") for g in groups]:
        pipe.zrange(key, 0, -1)
    ids = [i for members in pipe.execute() for i in members]
    rows = []
    for start in range(0, len(ids), 1000):
        pipe = client.pipeline(transaction=False)
        for job_id in ids[start : start + 1000]:
            pipe.hgetall(queue_key(Q, "job:" + job_id))
        rows.extend(pipe.execute())
    return pd.DataFrame.from_records(rows, index=ids)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _snapshot_child(port: int, side: str, out) -> None:
    conn = emq.connect(f"redis://127.0.0.1:{port}/0")
    if side == "object strings":
        frames.TEXT = object
    before = _rss()
    t = time.perf_counter()
    frame = floor_snapshot(conn.client) if side == "floor" else frames.snapshot(conn, Q)
    took = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.put((took, peak - before, int(frame.memory_usage(deep=True).sum()), len(frame)))


def full_snapshot(srv, client, side: str) -> Figure:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_snapshot_child, args=(srv.port, side, out))
    client.slowlog_reset()
    with Pinger(srv.port) as pinger:
        child.start()
        took, rss, memory, rows = out.get(timeout=3600)
        child.join()
    return Figure(took, pinger, longest_call(client), {"rss": rss, "memory": memory, "rows": rows})


# -- a real IPython shell ----------------------------------------------------------


def ipython_cells(srv, client) -> dict[str, Figure]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shaken = io.StringIO()

    def cell(line: str) -> None:
        with contextlib.redirect_stdout(shaken):
            assert shell.run_cell(line).success, shaken.getvalue()[-2000:]

    cell("%load_ext emq_notebook")
    cell(f"%emq connect redis://127.0.0.1:{srv.port}/0")
    return {
        line: quick(srv, client, lambda line=line: cell(line))
        for line in (f"%emq status {Q}", f"%emq jobs {Q} --state dead")
    }


# -- the floors: the same work in ONE unbounded script -----------------------------

FLOOR_DRAIN = """
local n = 0
local sets = {KEYS[1] .. 'pending'}
for _, g in ipairs(redis.call('SMEMBERS', KEYS[1] .. 'groups')) do
  sets[#sets + 1] = KEYS[1] .. 'g:' .. g .. ':pending'
end
for _, sk in ipairs(sets) do
  for _, id in ipairs(redis.call('ZRANGE', sk, 0, -1)) do
    local jk = KEYS[1] .. 'job:' .. id
    redis.call('DEL', jk, jk .. ':logs')
    n = n + 1
  end
  redis.call('DEL', sk)
end
return n
"""
FLOOR_REPROCESS = """
local ids = redis.call('ZRANGE', KEYS[1] .. 'dead', 0, -1)
for _, id in ipairs(ids) do
  local jk = KEYS[1] .. 'job:' .. id
  redis.call('HDEL', jk, 'last_error')
  redis.call('HSET', jk, 'state', 'pending')
  redis.call('ZADD', KEYS[1] .. 'pending', 0, id)
end
redis.call('DEL', KEYS[1] .. 'dead')
return #ids
"""
FLOOR_OBLITERATE = """
local n = 0
for _, s in ipairs({'active', 'pending', 'schedule', 'dead'}) do
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1] .. s, 0, -1)) do
    local jk = KEYS[1] .. 'job:' .. id
    redis.call('DEL', jk, jk .. ':logs', jk .. ':lock')
    n = n + 1
  end
  redis.call('DEL', KEYS[1] .. s)
end
for _, g in ipairs(redis.call('SMEMBERS', KEYS[1] .. 'groups')) do
  redis.call('DEL', KEYS[1] .. 'g:' .. g .. ':pending', KEYS[1] .. 'g:' .. g .. ':meta')
end
for _, m in ipairs(redis.call('ZRANGE', KEYS[1] .. 'lat:minutes', 0, -1)) do
  redis.call('DEL', KEYS[1] .. 'lat:wait:' .. m, KEYS[1] .. 'lat:run:' .. m)
end
redis.call('DEL', KEYS[1] .. 'groups', KEYS[1] .. 'ring', KEYS[1] .. 'wake', KEYS[1] .. 'meta',
  KEYS[1] .. 'metrics:completed', KEYS[1] .. 'metrics:failed', KEYS[1] .. 'metrics:claimed',
  KEYS[1] .. 'lat:minutes')
return n
"""


# -- BullMQ ------------------------------------------------------------------------


def bullmq_phase(py: Path, srv, client, phase: str, n: int) -> Figure:
    """One phase of bench/bullmq_scale.py in the peers' venv, watched by a pinger; the
    seconds are the ones the peer measured around its own call."""
    client.slowlog_reset()
    with Pinger(srv.port) as pinger:
        run = subprocess.run(
            [py, str(HERE / "bullmq_scale.py"), f"redis://127.0.0.1:{srv.port}/0", phase, str(n), payload(0)],
            capture_output=True,
            text=True,
            timeout=7200,
        )
    if run.returncode != 0:
        sys.exit(f"bullmq {phase} failed:\n{run.stderr[-3000:]}")
    got = json.loads(run.stdout.strip().splitlines()[-1])
    return Figure(got["seconds"], pinger, longest_call(client), got)


# -- the run -----------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def main() -> None:
    a = args(1_000_000, __doc__, repeat=1)
    n, part = a.jobs, shape(a.jobs)
    print(
        f"jobs: {n:,} (pending {part['pending']:,}, schedule {part['schedule']:,}, "
        f"dead {part['dead']:,}, grouped {part['grouped']:,} in {min(LANES, part['grouped'])} lanes), "
        "100-byte payloads",
        flush=True,
    )
    py = peers_python()
    payloads = [payload(i) for i in range(n)]
    targets: list[tuple[str, float, float]] = []  # (what, value, target): value/target <= 1 meets it

    def say(line: str) -> None:
        print(line, flush=True)

    with server() as srv:
        conn = connect(srv)
        # the floors run one script for seconds: a client with no socket timeout
        client = redis.Redis(port=srv.port, decode_responses=True, socket_timeout=None)
        client.config_set("slowlog-log-slower-than", 1000)
        client.config_set("slowlog-max-len", 100_000)

        # enqueue_many, then the dead made by the real claim and fail (untimed)
        enq = watched(srv, client, lambda: build(conn, n, payloads))
        t = time.perf_counter()
        kill(conn, part["dead"])
        counts = frames.counts(conn, [Q]).loc[Q]
        assert (counts["pending"], counts["schedule"], counts["dead"]) == (
            part["pending"] + part["grouped"],
            part["schedule"],
            part["dead"],
        ), counts
        say(
            f"enqueue_many: {n / enq.seconds:,.0f} jobs/s ({enq.seconds:.1f}s), {enq.pinged()}, "
            f"longest call {ms(enq.longest)}   [set-up: {part['dead']:,} claimed and failed in "
            f"{time.perf_counter() - t:.1f}s]"
        )
        targets.append(("enqueue_many worst PING", enq.ping, 0.020))

        # reads that must not read rows
        c = quick(srv, client, lambda: frames.counts(conn, [Q]))
        say(f"frames.counts: {ms(c.seconds)} (target 50 ms), {c.pinged()}")
        targets.append(("frames.counts", c.seconds, 0.050))
        health = getattr(frames, "health", None)
        if health is None:
            say("health: not built")
        else:
            h = quick(srv, client, lambda: health(conn, [Q]))
            say(f"frames.health: {ms(h.seconds)} (target 50 ms), {h.pinged()}")
            targets.append(("frames.health", h.seconds, 0.050))
        s = quick(srv, client, lambda: frames.snapshot(conn, Q, limit=1000))
        assert len(s.result) == 1000
        say(f"frames.snapshot(limit=1000): {ms(s.seconds)} (target 50 ms), {s.pinged()}")
        targets.append(("snapshot(limit=1000)", s.seconds, 0.050))

        # the full snapshot, each side in its own process
        full = {
            side: full_snapshot(srv, client, side) for side in ("arrow strings", "object strings", "floor")
        }
        for side, f in full.items():
            assert f.result["rows"] == n, f.result
            name = "floor (pipelined HGETALL)" if side == "floor" else f"frames.snapshot, {side}"
            say(
                f"{name:>32}: {f.seconds:.2f}s, peak RSS +{f.result['rss'] / 2**20:,.0f} MiB, frame "
                f"{f.result['memory'] / 2**20:,.0f} MiB, {f.pinged()}"
            )
        arrow, plain = full["arrow strings"].result, full["object strings"].result
        say(
            f"Arrow-backed strings: frame {arrow['memory'] / plain['memory']:.2f}x, peak RSS "
            f"{arrow['rss'] / plain['rss']:.2f}x the object-string frame's"
        )
        ratio = full["arrow strings"].seconds / full["floor"].seconds
        say(f"snapshot/floor: {ratio:.2f} (target 1.25)")
        targets.append(("snapshot()/floor", ratio, 1.25))

        # the magics in a real IPython shell
        for line, f in ipython_cells(srv, client).items():
            say(f"{line}: {ms(f.seconds)} (target 100 ms)")
            targets.append((line, f.seconds, 0.100))

        # the bulk verbs, bounded
        def obliterate() -> int:
            admin.pause(conn, Q)
            return admin.obliterate_all(conn, Q)

        ours = {
            "drain": watched(srv, client, lambda: admin.drain(conn, Q)),
            "reprocess_dead": watched(srv, client, lambda: admin.reprocess_dead(conn, Q)),
            "obliterate_all": watched(srv, client, obliterate),
        }
        assert ours["drain"].result == part["pending"] + part["grouped"]
        assert ours["reprocess_dead"].result == part["dead"]
        assert client.dbsize() == 0, sorted(client.scan_iter(count=1000))[:20]

        # the floors, on the same queue built again
        client.flushall()
        stage(conn, n, payloads)
        root = [base(Q)]
        floors = {
            "drain": watched(srv, client, lambda: client.eval(FLOOR_DRAIN, 1, *root)),
            "reprocess_dead": watched(srv, client, lambda: client.eval(FLOOR_REPROCESS, 1, *root)),
            "obliterate_all": watched(srv, client, lambda: client.eval(FLOOR_OBLITERATE, 1, *root)),
        }
        assert floors["drain"].result == ours["drain"].result
        assert client.dbsize() == 0, sorted(client.scan_iter(count=1000))[:20]

        # BullMQ on a queue of the same shape
        client.flushall()
        peer = {
            phase: bullmq_phase(py, srv, client, phase, n)
            for phase in ("add-dead", "fail", "add-rest", "drain", "retry", "obliterate")
        }
        assert client.dbsize() == 0, client.dbsize()

    adds = peer["add-dead"].seconds + peer["add-rest"].seconds
    say(
        f"bullmq addBulk (chunks of 1,000): {n / adds:,.0f} jobs/s ({adds:.1f}s), "
        f"{max(peer['add-dead'], peer['add-rest'], key=lambda f: f.ping).pinged()}, longest call "
        f"{ms(max(peer['add-dead'].longest, peer['add-rest'].longest))}   [set-up: a Worker failed "
        f"{part['dead']:,} in {peer['fail'].seconds:.1f}s]"
    )
    say(
        f"{'':>16} {'ours':>9} {'worst PING':>11} {'longest call':>13} | {'floor':>9} {'PING':>10} "
        f"| {'bullmq':>9} {'PING':>10}"
    )
    for (verb, f), theirs in zip(ours.items(), ("drain", "retry", "obliterate"), strict=True):
        fl, bq = floors[verb], peer[theirs]
        say(
            f"{verb:>16} {f.seconds:>8.2f}s {ms(f.ping):>11} {ms(f.longest):>13} | {fl.seconds:>8.2f}s "
            f"{ms(fl.ping):>10} | {bq.seconds:>8.2f}s {ms(bq.ping):>10}   (bullmq {theirs})"
        )
        say(f"{'':>16} ours: {f.pinged()}; bullmq's longest call {ms(bq.longest)}")
        if bq.result["note"]:
            say(f"{'':>16} bullmq {theirs}: {bq.result['note']}")
        targets.append((f"{verb} worst PING", f.ping, 0.020))
        targets.append((f"{verb}/floor", f.seconds / fl.seconds, 2.0))
    total, floor_total = sum(f.seconds for f in ours.values()), sum(f.seconds for f in floors.values())
    say(
        f"bulk verbs in all: ours {total:.2f}s, floor {floor_total:.2f}s: {total / floor_total:.2f}x "
        f"(target 2.0), bullmq {sum(peer[p].seconds for p in ('drain', 'retry', 'obliterate')):.2f}s"
    )
    say("ratios to target (<= 1 meets it): " + ", ".join(f"{w} {v / t:.2f}" for w, v, t in targets))
    what, value, target = max(targets, key=lambda x: x[1] / x[2])
    print(f"worst ratio to target: {value / target:.2f} ({what})")


if __name__ == "__main__":
    main()
