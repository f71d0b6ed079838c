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

    python bench/scale.py [--jobs 1000000] [--repeat 1] [--only FIGURES] [--bad-rows 30000]
    # last line: the worst ratio of a figure to its target (<= 1 meets every target)

`--only` picks figures (the queue is always built, and its enqueue_many measured):
reads (counts, health, snapshot(limit=1000)), snapshot (the full one against its
floor), shell (the magics), bulk (drain, reprocess_dead, obliterate_all against their
floors), harm (reprocess_dead past `--bad-rows` bad rows and as many ghosts at the head
of dead), budget (one call of each bulk verb at the largest budget it takes:
`defaults.MAX_BUDGET`, `MAX_MOVE_BUDGET` for the moves), bullmq. On a
shared machine `--only bulk,harm,budget --repeat 3` measures what the budgets bound,
each bulk verb and its floor alternating, the best run of each kept.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import redis
from common import CpuWait, Pinger, connect, left_behind, payload, server, server_pid, shared_cpu_flag
from peers import bullmq, peers_python

import emq_notebook as emq
from emq_notebook import admin, frames, jobs, moves
from emq_notebook.defaults import BYTE_BUDGET, MAX_BUDGET, MAX_MOVE_BUDGET
from emq_notebook.keyspace import STATES, base, lane_sets, queue_key

Q = "scale"
LANES = 100
KINDS = 50
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

    def __init__(
        self,
        seconds: float,
        pinger: Pinger,
        longest: float,
        result: object = None,
        cpu: float = 0.0,
        off: CpuWait | None = None,
    ):
        self.seconds, self.longest, self.result, self.cpu = seconds, longest, result, cpu
        self.off = f"; {off}" if off else ""
        self.ping, self.p99 = pinger.worst, pinger.quantile(0.99)
        self.slow, self.pings = pinger.over(0.020)

    def pinged(self) -> str:
        """`worst PING 31.2 ms (p99 1.0 ms; 3 of 20,118 over 20 ms)`."""
        return (
            f"worst PING {ms(self.ping)} (p99 {ms(self.p99)}; {self.slow:,} of {self.pings:,} over 20 ms)"
            + self.off
        )


def longest_call(client) -> float:
    """The longest command in SLOWLOG since the last reset, in seconds; then reset."""
    entries = client.slowlog_get(100_000)
    client.slowlog_reset()
    return max((e["duration"] for e in entries), default=0) / 1e6


def server_cpu(client) -> float:
    """The CPU seconds the server has used (user and system). On a shared machine a
    side's wall time counts whatever else ran; the CPU the server spent on it does not."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def watched(srv, client, work: Callable[[], object]) -> Figure:
    client.slowlog_reset()
    with Pinger(srv.port) as pinger, CpuWait(server_pid(srv)) as off:
        cpu = server_cpu(client)
        t = time.perf_counter()
        result = work()
        took = time.perf_counter() - t
        cpu = server_cpu(client) - cpu
    return Figure(took, pinger, longest_call(client), result, cpu, off)


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
    for key in [queue_key(Q, s) for s in STATES] + [key for _, key in lane_sets(Q, groups)]:
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
        got = bullmq(py, "bullmq_scale.py", srv, phase, str(n), timeout=7200, what=f"bullmq {phase}")
    return Figure(got["seconds"], pinger, longest_call(client), got)


# -- the run -----------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


FIGURES = ("reads", "snapshot", "shell", "bulk", "harm", "budget", "bullmq")


def options() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1_000_000, help="how many jobs (default 1,000,000)")
    p.add_argument(
        "--repeat", type=int, default=1, help="runs of each bulk verb and its floor; the best of each counts"
    )
    p.add_argument(
        "--only", default=",".join(FIGURES), help=f"figures, comma-separated: {', '.join(FIGURES)}"
    )
    p.add_argument(
        "--bad-rows", type=int, default=30_000, help="bad rows (and as many ghosts) for the harm figure"
    )
    shared_cpu_flag(p)
    a = p.parse_args()
    a.only = set(a.only.split(","))
    if a.only - set(FIGURES):
        p.error(f"no figure {', '.join(sorted(a.only - set(FIGURES)))}; pick from {', '.join(FIGURES)}")
    return a


def bad_rows_and_ghosts(client, n: int) -> None:
    """`n` rows no transition can read and `n` members with no row, interleaved at the
    head of dead (the oldest deaths), written by pipeline."""
    pipe = client.pipeline(transaction=False)
    for i in range(2 * n):
        job_id = f"b_{i:07d}"
        if i % 2 == 0:
            pipe.hset(queue_key(Q, "job:" + job_id), mapping={"payload": "{}", "attempts": "three"})
        pipe.zadd(queue_key(Q, "dead"), {job_id: i + 1})
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def at_the_budget(srv, client, conn) -> dict[str, tuple[int, Figure]]:
    """One call of each bulk verb at the most it takes (`MAX_BUDGET`; `MAX_MOVE_BUDGET`
    for the calls that rewrite each job they move) on the staged queue: that budget and
    the call's figure (its longest call)."""
    mb, mm = MAX_BUDGET, MAX_MOVE_BUDGET
    dead = client.zrange(queue_key(Q, "dead"), mm, 2 * mm - 1)  # past the ones the walk moves
    pending = client.zrange(queue_key(Q, "pending"), 0, 2 * mb - 1)
    # MAX_MOVE_BUDGET scheduled jobs made due, as many pending ones claimed with a 1 ms lease
    client.zadd(
        queue_key(Q, "schedule"), dict.fromkeys(client.zrange(queue_key(Q, "schedule"), 0, mm - 1), 0)
    )
    pipe = conn.pipeline()
    keys = [queue_key(Q, "pending"), queue_key(Q, "active"), base(Q)]
    for _ in range(mm):
        conn.run("claim2", keys, [1, conn.token], verb="claim", queue=Q, pipeline=pipe)
    pipe.execute()
    time.sleep(0.01)
    walk = moves.DeadRun(conn, Q, mm, dry_run=True)
    run = moves.DeadRun(conn, Q, mm)
    # each verb with the largest budget it takes, and its call at that budget
    calls = {
        "reprocess_dead dry run": (mm, lambda: walk.step(mm)),
        "reprocess_dead": (mm, lambda: run.step(mm)),
        "reprocess_jobs dry run": (mm, lambda: admin.reprocess_jobs(conn, Q, dead, dry_run=True, budget=mm)),
        "reprocess_jobs": (mm, lambda: admin.reprocess_jobs(conn, Q, dead, budget=mm)),
        "remove_jobs": (mb, lambda: admin.remove_jobs(conn, Q, pending[mb:], budget=mb)),
        "promote": (mm, lambda: jobs.promote(conn, Q, budget=mm)),
        "expire_leases": (mm, lambda: jobs.expire_leases(conn, Q, budget=mm)),
        "enqueue_many": (mm, lambda: jobs.enqueue_many(conn, Q, [payload(i) for i in range(mm)], chunk=mm)),
        "drain": (mb, lambda: conn.run("drain", [base(Q), queue_key(Q, "pending")], [mb, BYTE_BUDGET])),
        "obliterate": (mb, lambda: (admin.pause(conn, Q), admin.obliterate(conn, Q, force=True, budget=mb))),
    }
    return {what: (most, watched(srv, client, call)) for what, (most, call) in calls.items()}


def best_of(runs: list[Figure]) -> Figure:
    return min(runs, key=lambda f: f.seconds)


def main() -> None:
    a = options()
    n, part = a.jobs, shape(a.jobs)
    print(
        f"jobs: {n:,} (pending {part['pending']:,}, schedule {part['schedule']:,}, "
        f"dead {part['dead']:,}, grouped {part['grouped']:,} in {min(LANES, part['grouped'])} lanes), "
        f"100-byte payloads; budget {admin.DEFAULT_BUDGET:,} a call (at most {MAX_BUDGET:,}; "
        f"{MAX_MOVE_BUDGET:,} for a move), "
        f"{BYTE_BUDGET:,} bytes",
        flush=True,
    )
    py = peers_python() if "bullmq" in a.only else None
    payloads = [payload(i) for i in range(n)]
    targets: list[tuple[str, float, float]] = []  # (what, value, target): value/target <= 1 meets it

    def say(line: str) -> None:
        print(line, flush=True)

    with server(shared_cpu=a.shared_cpu) as srv:
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
        targets.append(("enqueue_many longest call", enq.longest, 0.020))

        if "reads" in a.only:  # reads that must not read rows
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

        if "snapshot" in a.only:  # the full snapshot, each side in its own process
            full = {
                side: full_snapshot(srv, client, side)
                for side in ("arrow strings", "object strings", "floor")
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

        if "shell" in a.only:  # the magics in a real IPython shell
            for line, f in ipython_cells(srv, client).items():
                say(f"{line}: {ms(f.seconds)} (target 100 ms)")
                targets.append((line, f.seconds, 0.100))

        ours: dict[str, list[Figure]] = {"drain": [], "reprocess_dead": [], "obliterate_all": []}
        floors: dict[str, list[Figure]] = {verb: [] for verb in ours}
        if "bulk" in a.only:  # the bulk verbs, bounded, and the same work in ONE script

            def obliterate() -> int:
                admin.pause(conn, Q)
                return admin.obliterate_all(conn, Q)

            root = [base(Q)]
            for run in range(a.repeat):
                if run:
                    client.flushall()
                    stage(conn, n, payloads)
                ours["drain"].append(watched(srv, client, lambda: admin.drain(conn, Q)))
                ours["reprocess_dead"].append(watched(srv, client, lambda: admin.reprocess_dead(conn, Q)))
                ours["obliterate_all"].append(watched(srv, client, obliterate))
                assert ours["drain"][-1].result == part["pending"] + part["grouped"]
                assert ours["reprocess_dead"][-1].result == part["dead"]
                assert not left_behind(client), left_behind(client)[:20]
                client.flushall()
                stage(conn, n, payloads)
                floors["drain"].append(watched(srv, client, lambda: client.eval(FLOOR_DRAIN, 1, *root)))
                floors["reprocess_dead"].append(
                    watched(srv, client, lambda: client.eval(FLOOR_REPROCESS, 1, *root))
                )
                floors["obliterate_all"].append(
                    watched(srv, client, lambda: client.eval(FLOOR_OBLITERATE, 1, *root))
                )
                assert floors["drain"][-1].result == ours["drain"][-1].result
                assert not left_behind(client), left_behind(client)[:20]
            if a.repeat > 1:
                for verb, runs in ours.items():
                    say(
                        f"{verb} runs: "
                        + ", ".join(
                            f"{f.seconds:.2f}s (longest call {ms(f.longest)}) / floor {fl.seconds:.2f}s"
                            for f, fl in zip(runs, floors[verb], strict=True)
                        )
                    )

        if "harm" in a.only:  # reprocess_dead past bad rows and ghosts, each walked once
            client.flushall()
            stage(conn, n, payloads)
            bad_rows_and_ghosts(client, a.bad_rows)
            steps: list[int] = []
            f = watched(
                srv, client, lambda: admin.reprocess_dead(conn, Q, progress=lambda c, m: steps.append(m))
            )
            assert f.result == part["dead"] and f.result.bad_rows == f.result.ghosts == a.bad_rows, f.result
            say(
                f"reprocess_dead past {a.bad_rows:,} bad rows and {a.bad_rows:,} ghosts at the head of dead: "
                f"{f.seconds:.2f}s in {len(steps):,} calls, longest call {ms(f.longest)} (target 20 ms), "
                f"{f.pinged()}"
            )
            targets.append(("reprocess_dead past bad rows, longest call", f.longest, 0.020))

        if "budget" in a.only:  # one call of each bulk verb at the largest budget it takes
            client.flushall()
            stage(conn, n, payloads)
            for what, (most, f) in at_the_budget(srv, client, conn).items():
                say(f"{what} at budget {most:,}: longest call {ms(f.longest)} (target 20 ms){f.off}")
                targets.append((f"{what} at its largest budget, longest call", f.longest, 0.020))

        # BullMQ on a queue of the same shape
        peer: dict[str, Figure] = {}
        if py is not None:
            client.flushall()
            peer = {
                phase: bullmq_phase(py, srv, client, phase, n)
                for phase in ("add-dead", "fail", "add-rest", "drain", "retry", "obliterate")
            }
            assert client.dbsize() == 0, client.dbsize()

    if peer:
        adds = peer["add-dead"].seconds + peer["add-rest"].seconds
        say(
            f"bullmq addBulk (chunks of 1,000): {n / adds:,.0f} jobs/s ({adds:.1f}s), "
            f"{max(peer['add-dead'], peer['add-rest'], key=lambda f: f.ping).pinged()}, longest call "
            f"{ms(max(peer['add-dead'].longest, peer['add-rest'].longest))}   [set-up: a Worker failed "
            f"{part['dead']:,} in {peer['fail'].seconds:.1f}s]"
        )
    if ours["drain"]:
        say(
            f"{'':>16} {'ours':>9} {'worst PING':>11} {'longest call':>13} | {'floor':>9} {'PING':>10} "
            f"| {'bullmq':>9} {'PING':>10}"
        )
        for verb, theirs in zip(ours, ("drain", "retry", "obliterate"), strict=True):
            f, fl = best_of(ours[verb]), best_of(floors[verb])
            bq = peer.get(theirs)
            bullmq = (
                f"{bq.seconds:>8.2f}s {ms(bq.ping):>10}   (bullmq {theirs})" if bq else "(bullmq not run)"
            )
            say(
                f"{verb:>16} {f.seconds:>8.2f}s {ms(f.ping):>11} {ms(f.longest):>13} | {fl.seconds:>8.2f}s "
                f"{ms(fl.ping):>10} | {bullmq}"
            )
            say(f"{'':>16} ours: {f.pinged()}" + (f"; bullmq's longest call {ms(bq.longest)}" if bq else ""))
            cpu, floor_cpu = min(r.cpu for r in ours[verb]), min(r.cpu for r in floors[verb])
            say(
                f"{'':>16} server CPU (the least of the runs): ours {cpu:.2f}s, floor {floor_cpu:.2f}s: "
                f"{cpu / max(floor_cpu, 1e-9):.2f}x (the PING process's own PINGs in both)"
            )
            if bq and bq.result["note"]:
                say(f"{'':>16} bullmq {theirs}: {bq.result['note']}")
            targets.append((f"{verb} worst PING", f.ping, 0.020))
            targets.append((f"{verb} longest call", f.longest, 0.020))
            targets.append((f"{verb}/floor", f.seconds / fl.seconds, 2.0))
        total = sum(best_of(r).seconds for r in ours.values())
        floor_total = sum(best_of(r).seconds for r in floors.values())
        theirs_total = (
            f", bullmq {sum(peer[p].seconds for p in ('drain', 'retry', 'obliterate')):.2f}s" if peer else ""
        )
        say(
            f"bulk verbs in all: ours {total:.2f}s, floor {floor_total:.2f}s: {total / floor_total:.2f}x "
            f"(target 2.0){theirs_total}"
        )
    say("ratios to target (<= 1 meets it): " + ", ".join(f"{w} {v / t:.2f}" for w, v, t in targets))
    what, value, target = max(targets, key=lambda x: x[1] / x[2])
    print(f"worst ratio to target: {value / target:.2f} ({what})")


if __name__ == "__main__":
    main()
