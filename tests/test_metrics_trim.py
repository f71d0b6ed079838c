"""The throughput record and the latency index are trimmed a bounded number of buckets a
call (lua/includes/metrics.lua `bump_metric`, lua/includes/latency.lua), on both
backends: a claim that opens a new minute trims a hash of a few buckets past its keep
exactly, the oldest first, as before; a hash or an index far past its keep (keep
lowered, buckets another node wrote) loses a bounded number a call (one trim of 100,000
buckets past keep held a claim 454 ms), never its current minute."""

from __future__ import annotations

import re

from helpers import claim_new, minute_now

from emq_notebook import scripts
from emq_notebook.keyspace import base, metrics_key, queue_key

Q = "mailers"
BOUNDS = re.search(r"TRIM_EXACT, TRIM_MOST, TRIM_SAMPLE = (\d+), (\d+), (\d+)", scripts.source("claim2"))
EXACT, MOST, SAMPLE = map(int, BOUNDS.groups())


def test_a_few_buckets_past_keep_are_trimmed_exactly_oldest_first(conn):
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    old = {str(now - 100 - i): "1" for i in range(7)} | {"by hand": "x"}
    conn.client.hset(metrics_key(Q, "claimed"), mapping=old)
    claim_new(conn, Q)
    kept = set(conn.client.hkeys(metrics_key(Q, "claimed")))
    # the 8 written and the current minute's: the one by hand and the 3 oldest go
    current = {k for k in kept if int(k) >= now}
    assert len(current) == 1 and kept - current == {str(now - 100 - i) for i in range(4)}


def test_a_hash_far_past_keep_loses_a_bounded_sample_a_call(conn):
    now = minute_now(conn)
    stale = {str(now - 2000 - i): "1" for i in range(EXACT + 1000)}
    pipe = conn.client.pipeline(transaction=False)
    for start in range(0, len(stale), 1000):
        pipe.hset(metrics_key(Q, "claimed"), mapping=dict(list(stale.items())[start : start + 1000]))
    pipe.execute()
    claim_new(conn, Q)
    left = conn.client.hlen(metrics_key(Q, "claimed"))
    # the current minute's bucket is new; at most a sample of the stale ones went
    assert len(stale) + 1 - SAMPLE <= left < len(stale) + 1
    assert {k for k in conn.client.hkeys(metrics_key(Q, "claimed")) if int(k) >= now}


def test_a_latency_index_far_past_keep_loses_its_oldest_a_bounded_number_a_call(conn):
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "10")
    now = minute_now(conn)
    index = f"{base(Q)}lat:minutes"
    minutes = {str(now - 5000 + i): now - 5000 + i for i in range(MOST + 300)}
    conn.client.zadd(index, minutes)
    conn.client.hset(f"{base(Q)}lat:wait:{now - 5000}", "3", "1")
    claim_new(conn, Q)
    left = conn.client.zcard(index)
    assert left == len(minutes) + 1 - MOST
    assert not conn.client.exists(f"{base(Q)}lat:wait:{now - 5000}")
    assert conn.client.zrange(index, 0, 0) == [str(now - 5000 + MOST)]
