"""What one claim call holds the server when ghosts lie ahead of the job it serves
(members of pending or of a lane whose row is gone: another node deleted the rows, or
a TTL another node set expired them), and what the claim's bound costs the usual claim.

    python bench/claim_ghosts.py [--jobs 100000]
    # per case: the longest call and the worst PING, unbounded against bounded;
    # claims per second on an ordinary queue, flat and grouped, unbounded against bounded;
    # last line: the worst bounded call against the 20 ms every call must stay under

On a private Valkey (SLOWLOG logs every command) with a PING process alongside, three
cases of `--jobs` ghosts each: ahead of one job in pending, ahead of one job in a
lane, and as many lanes on the ring that no claim can serve (paused, at their limit,
or with an empty backlog) ahead of a lane with a job. Each case is claimed twice from
the same state: by a bench-only copy of the live claim script with its bound cut out
(`CLAIM_SKIPS` and `CLAIM_BYTES` past any count: what the claim did before it was
bounded, in one call), sent EchoMQ's two arguments as the toolkit sent them; then by
the toolkit's `Worker` (`run(max_jobs=1)`, `idle_sleep` 10 s, so an idle poll would
show), which claims in bounded calls until it gets the job. Each side runs `--repeat`
times from a fresh server state (FLUSHALL SYNC, SCRIPT FLUSH) and its best run counts (the
least longest call): this machine is shared, and a call the kernel or the allocator held
up says nothing about the claim; the longest call of every run is printed too.

Then the usual claim: the two scripts side by side on one ordinary queue (no ghosts),
one job at a time, alternating every `CHUNK` claims (ABBA), medians over the chunks,
each side as the toolkit's script executor sends it (the pause HGET, then the EVALSHA);
and the Worker's own `claim()` (the toolkit's whole path) on its own, for scale.
"""

from __future__ import annotations

import hashlib
import time
from statistics import median_high as median

import redis
from common import CpuWait, Pinger, args, connect, ratio_line, server, server_pid

from emq_notebook import Worker, jobs, lanes, scripts
from emq_notebook.keyspace import base, queue_key

Q = "ghosts"
TARGET_MS = 20.0
CHUNK = 100
# the live bound, and the bench-only copy's instead: past any count (cut from the live
# include, so the copy cannot drift: the line must be found)
BOUND = "local CLAIM_SKIPS, CLAIM_BYTES = 500, 1048576"
UNBOUNDED = "local CLAIM_SKIPS, CLAIM_BYTES = 1e18, 1e18"


def unbounded(name: str) -> str:
    source = scripts.source(name)
    assert source.count(BOUND) == 1, f"{name}: the live bound changed; update BOUND"
    return source.replace(BOUND, UNBOUNDED)


def loaded(conn, text: str):
    """The script `text` as a callable, loaded first (no NOSCRIPT round in a count)."""
    conn.client.script_load(text)
    return conn.client.register_script(text)


def ghosts_in(raw: redis.Redis, key: str, n: int, score: int) -> None:
    """`n` members with no row in the sorted set `key`, ahead of any job scored 0."""
    for start in range(0, n, 10_000):
        raw.zadd(key, {f"a{i:07d}": score for i in range(start, min(n, start + 10_000))})


def dead_lanes(raw: redis.Redis, n: int) -> None:
    """`n` lanes on the ring ahead of the rest, none a claim can serve: a third paused,
    a third at their limit, a third with an empty backlog."""
    b = base(Q)
    for start in range(0, n, 5_000):
        pipe = raw.pipeline(transaction=False)
        names = [f"d{i:07d}" for i in range(start, min(n, start + 5_000))]
        for i, g in enumerate(names, start):
            meta = {"ring": "1", "paused": "1"} if i % 3 == 0 else {"ring": "1", "limit": "1"}
            if i % 3 == 1:
                meta["active"] = "1"
            pipe.hset(f"{b}g:{g}:meta", mapping=meta)
        pipe.lpush(queue_key(Q, "ring"), *reversed(names))
        pipe.execute()


def flat(raw: redis.Redis, conn, n: int) -> None:
    jobs.enqueue(conn, Q, "the job", id="zz_real")
    ghosts_in(raw, queue_key(Q, "pending"), n, 0)


def in_a_lane(raw: redis.Redis, conn, n: int) -> None:
    jobs.enqueue(conn, Q, "the job", id="zz_real", group="g1")
    ghosts_in(raw, f"{base(Q)}g:g1:pending", n, -1)


def on_the_ring(raw: redis.Redis, conn, n: int) -> None:
    jobs.enqueue(conn, Q, "the job", id="zz_real", group="g1")
    dead_lanes(raw, n)


CASES = (
    ("ghosts ahead of a job in pending", flat, "claim2", False),
    ("ghosts ahead of a job in a lane", in_a_lane, "gclaim2", True),
    ("lanes no claim serves ahead of a lane's job", on_the_ring, "gclaim2", True),
)


def calls(raw: redis.Redis, *texts: str) -> tuple[float, float, int]:
    """Since SLOWLOG's last reset: the longest call of the scripts `texts` (the claims,
    ms), the longest command of any other kind the client sent (the Worker's
    housekeeping, the pause read), and how many claim calls there were. The bench's own
    SLOWLOG commands are not counted."""
    log = [e for e in raw.slowlog_get(1_000_000) if not e["command"].startswith(b"SLOWLOG")]
    shas = tuple(b"EVALSHA " + hashlib.sha1(t.encode()).hexdigest().encode() for t in texts)
    claims = [e["duration"] / 1000 for e in log if e["command"].startswith(shas)]
    others = [e["duration"] / 1000 for e in log if not e["command"].startswith(shas)]
    return max(claims), max(others, default=0.0), len(claims)


# one side's run: its longest claim call, its longest other command, its claim calls,
# its worst PING (ms), its seconds to the job, the server's time off its CPU meanwhile
Side = tuple[float, float, int, float, float, str]


def fresh(raw: redis.Redis) -> None:
    """An empty keyspace and a new Lua interpreter, the memory of both given back
    before a side starts: FLUSHALL SYNC frees on the spot (a lazy flush frees in a
    thread of its own, and with libc malloc the next command to allocate meanwhile
    waited 200 ms here), and SCRIPT FLUSH drops the interpreter, so the garbage of the
    unbounded call (a table of 100,000 ghosts) is not collected in the bounded calls."""
    raw.execute_command("FLUSHALL", "SYNC")
    raw.execute_command("SCRIPT", "FLUSH", "SYNC")
    raw.slowlog_reset()


def one_side(srv, conn, raw: redis.Redis, case, n: int, side: str) -> Side:
    """One side of a case from a fresh state: (its longest claim call, its longest other
    command, its claim calls, its worst PING (ms), its seconds to the job, the server's
    time off its CPU meanwhile)."""
    about, stage, name, grouped = case
    fresh(raw)
    stage(raw, conn, n)
    copy = loaded(conn, unbounded(name))
    _, keys = jobs.claim_transition(Q, grouped)
    for script in (name, "promote", "expire", "repeat_tick"):  # what the Worker sends
        conn.client.script_load(scripts.source(script))
    raw.slowlog_reset()
    worker = Worker(conn, Q, lambda *job: None, grouped=grouped, idle_sleep=10.0)
    t = time.perf_counter()
    with Pinger(srv.port) as ping, CpuWait(server_pid(srv)) as off:
        if side == "unbounded":
            assert raw.hget(queue_key(Q, "meta"), "paused") is None
            got = jobs.claimed(copy(keys=keys, args=[60_000, conn.token]))
            done = 1 if got and got.id == "zz_real" else 0
        else:
            done = worker.run(max_jobs=1)
    took = time.perf_counter() - t
    longest, other, count = calls(raw, unbounded(name), scripts.source(name))
    assert done == 1, f"{about}, {side}: the job was not served"
    return longest, other, count, ping.worst * 1000, took, str(off)


def ghost_case(srv, conn, raw: redis.Redis, case, n: int, repeat: int) -> tuple[float, float]:
    """One case, unbounded then bounded, each from the same state, `repeat` runs; prints
    each side's best run (the least longest call: this machine is shared) and the
    longest call of every run; answers the bounded side's best longest call (of any
    command) and that run's worst PING (ms)."""
    print(f"{n:,} {case[0]}:")
    worst = (0.0, 0.0)
    for side in ("unbounded", "bounded"):
        runs = [one_side(srv, conn, raw, case, n, side) for _ in range(repeat)]
        longest, other, count, ping, took, off = min(runs, key=lambda r: max(r[0], r[1]))
        print(
            f"  {side:>9}: longest claim call {longest:7.2f} ms of {count:,} ({took:.2f} s to the "
            f"job; any other command {other:.2f} ms at most); worst PING {ping:7.2f} ms; {off}"
        )
        print(f"  {'':>9}  longest claim call of each run: {', '.join(f'{r[0]:.2f}' for r in runs)} ms")
        worst = (max(longest, other), ping)
    return worst


def ordinary(conn, raw: redis.Redis, n: int, grouped: bool) -> None:
    """2n ordinary jobs (100 lanes of limit 2n when `grouped`)."""
    fresh(raw)
    group = (lambda i: f"lane{i % 100:03d}") if grouped else (lambda i: None)
    for start in range(0, 2 * n, 1000):
        pipe = conn.pipeline()
        for i in range(start, min(2 * n, start + 1000)):
            jobs.enqueue(conn, Q, "x" * 100, id=f"j{i:07d}", group=group(i), pipeline=pipe)
        pipe.execute()
    if grouped:
        for i in range(100):
            lanes.set_limit(conn, Q, f"lane{i:03d}", 2 * n)


def throughput(conn, raw: redis.Redis, n: int, grouped: bool) -> tuple[float, float]:
    """Claims a second, unbounded (EchoMQ's two arguments) against bounded (the
    toolkit's three), the sides alternating ABBA every CHUNK claims on one queue."""
    ordinary(conn, raw, n, grouped)
    name, keys = jobs.claim_transition(Q, grouped)
    copy, live = loaded(conn, unbounded(name)), loaded(conn, scripts.source(name))
    meta = queue_key(Q, "meta")
    sides = (
        lambda: jobs.claimed(copy(keys=keys, args=[60_000, conn.token])),
        lambda: jobs.claimed(live(keys=keys, args=[60_000, conn.token, jobs.ASK_MORE])),
    )
    per: list[list[float]] = [[], []]
    for i, start in enumerate(range(0, 2 * n, CHUNK)):
        size = min(CHUNK, 2 * n - start)
        side = (0, 1, 1, 0)[i % 4]
        claim = sides[side]
        t = time.perf_counter()
        for _ in range(size):
            assert raw.hget(meta, "paused") is None
            assert claim() is not None
        per[side].append((time.perf_counter() - t) / size)
    return 1 / median(per[0]), 1 / median(per[1])


def worker_rate(conn, raw: redis.Redis, n: int, grouped: bool) -> float:
    """Claims a second of `Worker.claim()`, the toolkit's whole path, on n ordinary jobs."""
    ordinary(conn, raw, n // 2, grouped)
    worker = Worker(conn, Q, lambda *job: None, lease_ms=60_000, grouped=grouped)
    t = time.perf_counter()
    for _ in range(n):
        assert worker.claim() is not None
    return n / (time.perf_counter() - t)


def main() -> None:
    a = args(100_000, __doc__, repeat=3)
    n_claims = min(a.jobs, 20_000)
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        raw = redis.Redis(port=srv.port)
        raw.config_set("slowlog-log-slower-than", 0)
        raw.config_set("slowlog-max-len", 1_000_000)
        worst_call = worst_ping = 0.0
        for case in CASES:
            longest, ping = ghost_case(srv, conn, raw, case, a.jobs, a.repeat)
            worst_call, worst_ping = max(worst_call, longest), max(worst_ping, ping)
        raw.config_set("slowlog-log-slower-than", 10_000)
        print(
            f"the usual claim, {n_claims:,} claims a side, sides alternating every {CHUNK} "
            f"(ABBA), {a.repeat} runs; medians over the chunks"
        )
        for grouped in (False, True):
            runs = [throughput(conn, raw, n_claims, grouped) for _ in range(a.repeat)]
            before, after = median(r[0] for r in runs), median(r[1] for r in runs)
            rate = worker_rate(conn, raw, n_claims, grouped)
            print(
                f"  {'grouped' if grouped else 'flat':>7}: unbounded {before:,.0f} claims/s, "
                f"bounded {after:,.0f} claims/s (bounded/unbounded {after / before:.2f}; "
                f"runs {', '.join(f'{r[1] / r[0]:.2f}' for r in runs)}); "
                f"Worker.claim() {rate:,.0f} claims/s"
            )
    print(f"worst PING during the bounded claims: {worst_ping:.2f} ms")
    print(ratio_line("worst call/20 ms", worst_call / TARGET_MS, "<= 1"))


if __name__ == "__main__":
    main()
