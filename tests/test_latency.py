"""Latency kept on the server: every claim writes `claimed_at`, counts itself and
records its wait; complete and fail record the run; the histograms keep the
metrics retention and go with obliterate. Both backends, both executors."""

from __future__ import annotations

import time

import pytest
from helpers import dump, keys_of

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import BadRow

Q = "lat"
P = f"emq:{{{Q}}}:"
EXECUTORS = ("script", "function")


@pytest.fixture(params=EXECUTORS)
def ex(request, conn, connect_as):
    return connect_as(request.param)


def samples(conn, kind: str) -> dict[str, int]:
    """bucket -> count over every minute of the `kind` histograms."""
    out: dict[str, int] = {}
    for m in conn.client.zrange(P + "lat:minutes", 0, -1):
        for b, n in conn.client.hgetall(P + f"lat:{kind}:{m}").items():
            out[b] = out.get(b, 0) + int(n)
    return out


def bucket_of(ms: int) -> int:
    """The bucket the scripts put `ms` in: 0 for 0 ms, else 1 + floor(log_1.1 ms)."""
    import math

    return 0 if ms < 1 else math.floor(math.log(ms) / math.log(1.1)) + 1


@pytest.mark.parametrize("group", (None, "acme"))
def test_claim_writes_claimed_at_counts_and_records_the_wait(conn, ex, group):
    jobs.enqueue(conn, Q, "x", id="j_1", group=group)
    created = int(conn.client.hget(P + "job:j_1", "created_at"))
    time.sleep(0.03)
    got = (lanes.claim if group else jobs.claim)(ex, Q, 60_000)
    claimed = int(conn.client.hget(P + "job:j_1", "claimed_at"))
    assert got.id == "j_1" and claimed - created >= 30
    assert sum(int(v) for v in conn.client.hvals(P + "metrics:claimed")) == 1
    assert samples(conn, "wait") == {str(bucket_of(claimed - created)): 1}
    time.sleep(0.02)
    jobs.complete(ex, Q, "j_1")
    (run,) = samples(conn, "run").items()
    assert run[1] == 1 and 1.1 ** (int(run[0]) - 1) >= 20 * 0.9


def test_fail_records_the_run_and_a_retry_waits_from_its_due_time(conn, ex):
    jobs.enqueue(conn, Q, "x", id="j_1", backoff_ms=50)
    jobs.claim(ex, Q, 60_000)
    assert jobs.fail(ex, Q, "j_1", "boom") == "retry"
    row = conn.client.hgetall(P + "job:j_1")
    assert int(row["due_at"]) == conn.client.zscore(P + "schedule", "j_1")
    assert sum(samples(conn, "run").values()) == 1
    time.sleep(0.08)
    assert jobs.promote(ex, Q) == 1
    jobs.claim(ex, Q, 60_000)
    claimed = int(conn.client.hget(P + "job:j_1", "claimed_at"))
    # the second wait runs from the due time, not from the job's creation
    wait = claimed - int(row["due_at"])
    assert samples(conn, "wait")[str(bucket_of(wait))] >= 1
    assert sum(samples(conn, "wait").values()) == 2


def test_a_delayed_job_waits_from_its_due_time(conn, ex):
    jobs.enqueue(conn, Q, "x", id="j_1", delay_ms=40)
    row = conn.client.hgetall(P + "job:j_1")
    assert int(row["due_at"]) == int(row["created_at"]) + 40
    time.sleep(0.06)
    jobs.promote(ex, Q)
    jobs.claim(ex, Q, 60_000)
    claimed = int(conn.client.hget(P + "job:j_1", "claimed_at"))
    assert samples(conn, "wait") == {str(bucket_of(claimed - int(row["due_at"]))): 1}


@pytest.mark.parametrize("group", (None, "acme"))
def test_a_bad_metrics_keep_refuses_a_claim_before_any_write(conn, ex, group):
    jobs.enqueue(conn, Q, "x", id="j_1", group=group)
    conn.client.hset(P + "meta", "metrics_keep", "a day")
    before = dump(conn)
    with pytest.raises(BadRow, match="metrics_keep in meta"):
        (lanes.claim if group else jobs.claim)(ex, Q, 60_000)
    assert dump(conn) == before


def test_a_row_with_unreadable_times_is_served_unmeasured(conn, ex):
    """Another node's row may carry no `created_at`, or a bad one: the claim and the
    complete go through, counted, with no sample where there is nothing to measure."""
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.enqueue(conn, Q, "y", id="j_2")
    conn.client.hset(P + "job:j_1", "created_at", "yesterday")
    conn.client.hdel(P + "job:j_2", "created_at")
    assert jobs.claim(ex, Q, 60_000).id == "j_1"
    assert jobs.claim(ex, Q, 60_000).id == "j_2"
    assert samples(conn, "wait") == {}
    assert sum(int(v) for v in conn.client.hvals(P + "metrics:claimed")) == 2
    conn.client.hset(P + "job:j_1", "claimed_at", "soon")
    jobs.complete(ex, Q, "j_1")
    jobs.complete(ex, Q, "j_2")
    assert sum(samples(conn, "run").values()) == 1


def test_the_histograms_keep_the_metrics_retention(conn, ex):
    """Past `metrics_keep` minutes, the oldest minutes' hashes go (and leave the index)."""
    now_minute = int(conn.client.time()[0]) // 60
    old = [now_minute - 10 + i for i in range(5)]
    for m in old:
        conn.client.zadd(P + "lat:minutes", {str(m): m})
        conn.client.hset(P + f"lat:wait:{m}", "40", 1)
        conn.client.hset(P + f"lat:run:{m}", "40", 1)
        conn.client.hset(P + "metrics:claimed", str(m), 1)
    conn.client.hset(P + "meta", "metrics_keep", 3)
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.claim(ex, Q, 60_000)
    claim_minute = int(conn.client.hget(P + "job:j_1", "claimed_at")) // 60_000
    kept = [int(m) for m in conn.client.zrange(P + "lat:minutes", 0, -1)]
    assert kept == [old[3], old[4], claim_minute]
    for m in old[:3]:
        assert not conn.client.exists(P + f"lat:wait:{m}", P + f"lat:run:{m}")
    assert conn.client.hlen(P + "metrics:claimed") == 3


def test_obliterate_leaves_no_histogram_behind(conn, ex):
    for i in range(5):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i}", group="acme" if i % 2 else None)
    for _ in range(3):
        got = jobs.claim(ex, Q, 60_000) or lanes.claim(ex, Q, 60_000)
        jobs.complete(ex, Q, got.id)
    assert conn.client.exists(P + "lat:minutes", P + "metrics:claimed") == 2
    admin.pause(ex, Q)
    admin.obliterate_all(ex, Q, force=True, budget=2)
    assert keys_of(conn, Q) == []


def test_a_damaged_histogram_never_fails_a_transition(conn, ex):
    """The recording runs after a transition's writes: a histogram key of another type,
    or a bucket holding no count, is met quietly and the transition still happens whole."""
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.enqueue(conn, Q, "y", id="j_2")
    minute = int(conn.client.time()[0]) // 60
    for m in (minute, minute + 1):  # the claim may fall in the next minute
        conn.client.set(P + f"lat:wait:{m}", "not a hash")
        conn.client.hset(P + f"lat:run:{m}", mapping={str(b): "lots" for b in range(80)})
    assert jobs.claim(ex, Q, 60_000).id == "j_1"
    jobs.complete(ex, Q, "j_1")
    assert (
        conn.client.get(P + f"lat:wait:{minute}") == "not a hash"
        or conn.client.get(P + f"lat:wait:{minute + 1}") == "not a hash"
    )
    runs = [conn.client.hgetall(P + f"lat:run:{m}") for m in (minute, minute + 1)]
    assert sum(1 for h in runs for v in h.values() if v == "1") == 1  # restarted at 1
    conn.client.delete(P + "lat:minutes")
    conn.client.set(P + "lat:minutes", "not a zset")
    assert jobs.claim(ex, Q, 60_000).id == "j_2"
    jobs.fail(ex, Q, "j_2", "boom")
    assert conn.client.zscore(P + "schedule", "j_2") is not None
