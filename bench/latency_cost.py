"""What the latency recording costs: the claim + complete cycle with the recording
(the live @claim2 and @complete: `claimed_at` on the row, the `claimed` count, the
wait and run histograms) against the same cycle without it (a bench-only copy of
the two scripts, made here from the live sources with those writes cut out), on
the same jobs, alternating the two sides in one run.

    python bench/latency_cost.py [--jobs 20000]    # last line: with/without seconds per cycle

Both sides call the scripts the same way (EVALSHA, one job at a time, claim then
complete), so the ratio is the server-side cost of the recording plus its reply
path, nothing else. The sides alternate every few hundred cycles on the same
queue, so a burst of load on this shared machine falls on both.
"""

from __future__ import annotations

import time
from statistics import median_high as median

from common import args, connect, fill, ratio_line, server

from emq_notebook import scripts
from emq_notebook.keyspace import base, job_key, queue_key

Q = "bench"
CHUNK = 50

# each cut: (the live text, what the bench-only copy has instead); every one must be
# found, so the copy cannot silently drift from the live scripts
CLAIM_CUTS = [
    (
        "  local keep\n  if kept == nil then keep = metrics_keep(base) else keep = keep_of(kept) end\n"
        "  if not keep then return nil, bad_row('metrics_keep', 'meta') end\n  return keep\n",
        "  return 1440\n",
    ),
    (
        "CLAIM_READS[N_WHOLES + 1], CLAIM_READS[N_WHOLES + 2], CLAIM_READS[N_WHOLES + 3] = "
        "'payload', 'created_at', 'due_at'",
        "CLAIM_READS[N_WHOLES + 1] = 'payload'",
    ),
    ("  local at = string.format('%.0f', now)\n", ""),
    (
        "redis.call('HSET', jk, 'state', 'active', 'claimed_at', at, 'owner', token)",
        "redis.call('HSET', jk, 'state', 'active', 'owner', token)",
    ),
    (
        "redis.call('HSET', jk, 'state', 'active', 'claimed_at', at)",
        "redis.call('HSET', jk, 'state', 'active')",
    ),
    ("  bump_metric(base, 'claimed', now, keep)\n", ""),
    (
        "  local created, due = whole_of(read[2]), whole_of(read[3])\n"
        "  local ready = (created and due and math.max(created, due)) or created or due\n"
        "  if ready then record_latency(base, 'wait', now - ready, now, keep) end\n",
        "",
    ),
]
COMPLETE_CUTS = [
    ("'owner', 'claimed_at')", "'owner')"),
    (
        "local claimed_at = whole_of(row[4])\n"
        "if claimed_at then record_latency(base, 'run', now - claimed_at, now, keep) end\n",
        "",
    ),
]


def without_recording(name: str, cuts: list[tuple[str, str]]) -> str:
    """The live script `name` with the latency recording cut out (every cut must match)."""
    source = scripts.source(name)
    for live, instead in cuts:
        assert source.count(live) >= 1, f"{name}: the live script changed; update the cut {live!r}"
        source = source.replace(live, instead)
    assert "record_latency(base" not in source.split("local function record_latency")[-1], name
    return source


def cycles(conn, claim_sha: str, complete_sha: str, n: int) -> float:
    """Claim and complete `n` jobs one at a time with these scripts; the seconds taken."""
    keys = (queue_key(Q, "pending"), queue_key(Q, "active"), base(Q))
    active, root = queue_key(Q, "active"), base(Q)
    evalsha = conn.client.evalsha
    t = time.perf_counter()
    for _ in range(n):
        got = evalsha(claim_sha, 3, *keys, 60_000, "bench")
        evalsha(complete_sha, 3, job_key(Q, got[0]), active, root, got[0], "bench")
    return time.perf_counter() - t


def server_cpu(conn) -> float:
    """The server process's CPU seconds so far (user + system, INFO cpu)."""
    cpu = conn.client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def run(conn, live: tuple[str, str], bare: tuple[str, str], n: int) -> tuple[list[float], list[float]]:
    """`n` cycles a side on one queue of 2n jobs, the sides alternating every `CHUNK`
    cycles, so both meet the same queue sizes and the same machine load: for each
    side, its chunks' wall seconds and server CPU microseconds, a cycle."""
    conn.client.flushall()
    fill(conn, Q, 2 * n)
    wall: list[list[float]] = [[], []]
    server: list[list[float]] = [[], []]
    for i, start in enumerate(range(0, 2 * n, CHUNK)):
        size = min(CHUNK, 2 * n - start)
        side = (0, 1, 1, 0)[i % 4]  # ABBA: neither side always goes first
        sides = (live, bare)[side]
        before = server_cpu(conn)
        wall[side].append(cycles(conn, *sides, size) / size)
        server[side].append((server_cpu(conn) - before) * 1e6 / size)
    assert conn.client.zcard(queue_key(Q, "pending")) == 0
    return wall, server


def main() -> None:
    a = args(20_000, __doc__)
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        load = conn.client.script_load
        live = (load(scripts.source("claim2")), load(scripts.source("complete")))
        bare = (
            load(without_recording("claim2", CLAIM_CUTS)),
            load(without_recording("complete", COMPLETE_CUTS)),
        )
        # the two sides write what they should: the live one records, the copy does not
        for (claim, complete), recorded in ((live, 2), (bare, 0)):
            conn.client.flushall()
            fill(conn, Q, 3)
            cycles(conn, claim, complete, 3)
            written = conn.client.exists(queue_key(Q, "lat:minutes"), queue_key(Q, "metrics:claimed"))
            assert written == recorded
            assert conn.client.exists(queue_key(Q, "metrics:completed")) == 1
        runs = [run(conn, live, bare, a.jobs) for _ in range(a.repeat)]
    # a chunk's time is its cycles' mean; the median chunk of each side is robust to the
    # bursts of load other processes put on this shared machine
    wall = [median([t for w, _ in runs for t in w[side]]) for side in (0, 1)]
    spent = [median([t for _, s in runs for t in s[side]]) for side in (0, 1)]
    per_run = [median(w[0]) / median(w[1]) for w, _ in runs]
    print(
        f"jobs: {a.jobs:,} a side, claimed and completed one at a time, sides alternating "
        f"every {CHUNK} cycles, {a.repeat} runs; medians over the chunks"
    )
    print(f"with the recording: {1 / wall[0]:,.0f} cycles/s   without: {1 / wall[1]:,.0f} cycles/s")
    print(f"server CPU: {spent[0]:.1f} us a cycle with, {spent[1]:.1f} without: {spent[0] / spent[1]:.2f}")
    print(f"wall time ratio of each run: {', '.join(f'{r:.3f}' for r in per_run)}")
    print(ratio_line("with/without seconds per cycle", wall[0] / wall[1], "<= 1.10"))


if __name__ == "__main__":
    main()
