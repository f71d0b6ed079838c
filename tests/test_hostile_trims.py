"""The metrics and latency trims against what another node wrote into them (the second
hostile pass, lua/includes/metrics.lua and latency.lua), on both backends: names that
read as numbers past any minute never make a claim trim the count it just made, nor the
latency it just recorded; a trim reads a bounded number of bytes of names a call (a
metrics hash of 4,000 names of 10 KB held a claim 659 ms, a latency index of 600 minutes
of 100 KB 279 ms: bench/hostile_claims.py). Work is observed as what a claim deleted,
never timed; the fake measures no key (MEMORY USAGE), so its hash of long names is still
read by name whole, and only Valkey's trim is held to the bytes there."""

from __future__ import annotations

import re

from helpers import claim_new, minute_now

from emq_notebook import scripts
from emq_notebook.keyspace import base, metrics_key, queue_key

Q = "mailers"
SOURCE = scripts.source("claim2")
TRIM_BYTES = 1048576
ID_WORK = int(re.search(r"local ID_WORK = (\d+)", SOURCE).group(1))
MOST = int(re.search(r"TRIM_EXACT, TRIM_MOST, TRIM_SAMPLE = \d+, (\d+), \d+", SOURCE).group(1))


def current(names, now: int) -> set[str]:
    """The names among `names` that are this minute's bucket (or the next's)."""
    return {n for n in names if n.isdigit() and len(n) < 12 and now <= int(n) <= now + 1}


def test_names_that_read_past_any_minute_never_trim_the_claims_own_count(conn):
    """100 names of 23 digits another node wrote (tonumber read them as 1e22, later than
    any minute): the claim's own bucket sorted first and went, its count lost. Now they
    are no buckets and go first."""
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    conn.client.hset(metrics_key(Q, "claimed"), mapping={"9" * 20 + f"{i:03d}": "1" for i in range(100)})
    claim_new(conn, Q)
    kept = conn.client.hgetall(metrics_key(Q, "claimed"))
    mine = current(kept, now)
    assert len(mine) == 1 and kept[mine.pop()] == "1"
    assert len(kept) == 5


def test_a_metrics_hash_of_long_names_is_trimmed_within_its_bytes_on_valkey(conn, backend):
    """300 names of 10 KB (3 MB): Valkey measures the hash over TRIM_BYTES and samples
    names a call within about TRIM_BYTES of them (it read and deleted all 296 before);
    the fake measures no key and trims exactly, as before. The claim's bucket stays."""
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    size = 10_000
    pipe = conn.client.pipeline(transaction=False)
    for i in range(300):
        pipe.hset(metrics_key(Q, "claimed"), f"{i:04d}" + "x" * size, "1")
    pipe.execute()
    claim_new(conn, Q)
    kept = conn.client.hkeys(metrics_key(Q, "claimed"))
    assert len(current(kept, now)) == 1
    gone = 301 - len(kept)
    if backend == "valkey":
        assert 1 <= gone <= TRIM_BYTES // size + 1
    else:
        assert gone == 296


def test_a_latency_index_of_long_members_is_trimmed_within_its_bytes(conn):
    """50 members of 20 KB past keep: a claim trimmed all 46 over keep at once (each
    hashed and copied at both its keys); now about TRIM_BYTES of them counted ID_WORK
    times each, oldest first."""
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "5")
    index = f"{base(Q)}lat:minutes"
    size = 20_000
    conn.client.zadd(index, {f"{i:03d}" + "m" * size: i for i in range(50)})
    claim_new(conn, Q)
    left = conn.client.zrange(index, 0, -1)
    per_call = -(-TRIM_BYTES // ((size + 3) * ID_WORK))
    assert 51 - per_call == len(left)
    assert left[0].startswith(f"{per_call:03d}")


def test_minutes_another_node_scored_later_never_trim_the_latency_just_recorded(conn):
    """20 members scored past any minute: the minute the claim recorded ranked first and
    its latency hash was deleted at once. Now the trim stops at it."""
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "5")
    index = f"{base(Q)}lat:minutes"
    conn.client.zadd(index, {f"f{i}": 10**15 + i for i in range(20)})
    now = minute_now(conn)
    claim_new(conn, Q)
    recorded = [m for m in conn.client.zrange(index, 0, -1) if not m.startswith("f")]
    assert len(recorded) == 1 and int(recorded[0]) in (now, now + 1)
    assert conn.client.exists(f"{base(Q)}lat:wait:{recorded[0]}")
    assert conn.client.zcard(index) == 21
