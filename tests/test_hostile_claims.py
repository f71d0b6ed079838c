"""The claims against keys of another type where the queue's own should be, and lanes
another node named long (the second hostile pass, lua/includes/activate.lua): a flat
claim's pending, the ring, a lane's meta of another type are refused typed (BadRow
'type', nothing written), where a raw WRONGTYPE stopped every claim and killed the
Worker; a lane whose backlog is of another type holds no job a claim serves and is
passed over, as a drain passes it; a lane named over MAX_ID bytes is passed over unread
(4 lanes of 4 MB held a claim 25.8 ms, bench/hostile_claims.py).

On both backends and both executors (`script` and `function`)."""

from __future__ import annotations

import pytest
from helpers import kept_conn

from emq_notebook import Worker, jobs, lanes
from emq_notebook.errors import BadRow
from emq_notebook.keyspace import queue_key

Q = "mail"
P = f"emq:{{{Q}}}:"
MAX_ID = 65536


@pytest.fixture
def conn(backend, request, kept_clients):
    return kept_conn(kept_clients, backend, request)


def test_a_pending_of_another_type_is_refused_typed(conn, ex):
    conn.client.set(queue_key(Q, "pending"), "another client's")
    with pytest.raises(BadRow, match="type"):
        jobs.claim(ex, Q, 60_000)
    assert conn.client.get(queue_key(Q, "pending")) == "another client's"


def test_a_ring_of_another_type_is_refused_typed(conn, ex):
    conn.client.set(queue_key(Q, "ring"), "another client's")
    with pytest.raises(BadRow, match="type"):
        lanes.claim(ex, Q, 60_000)


def test_a_lane_meta_of_another_type_is_refused_typed_nothing_written(conn, ex):
    jobs.enqueue(conn, Q, "{}", group="acme")
    conn.client.delete(P + "g:acme:meta")
    conn.client.set(P + "g:acme:meta", "x")
    ring = conn.client.lrange(queue_key(Q, "ring"), 0, -1)
    with pytest.raises(BadRow, match="type"):
        lanes.claim(ex, Q, 60_000)
    assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == ring
    assert conn.client.zcard(P + "g:acme:pending") == 1


def test_a_lane_backlog_of_another_type_is_passed_over(conn, ex):
    jobs.enqueue(conn, Q, "{}", group="bad")
    served = jobs.enqueue(conn, Q, "{}", group="good")
    conn.client.delete(P + "g:bad:pending")
    conn.client.set(P + "g:bad:pending", "x")
    got = lanes.claim(ex, Q, 60_000)
    assert got is not None and got[0] == served
    # the lane left the ring (its flag with it), its key untouched
    assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == []
    assert conn.client.hget(P + "g:bad:meta", "ring") is None
    assert conn.client.get(P + "g:bad:pending") == "x"


def test_a_worker_meeting_a_lane_meta_of_another_type_goes_on(conn, ex):
    jobs.enqueue(conn, Q, "{}", group="acme")
    conn.client.delete(P + "g:acme:meta")
    conn.client.set(P + "g:acme:meta", "x")
    w = Worker(ex, Q, lambda *a: None, grouped=True, idle_sleep=0)
    assert w.run(until_empty=True) == 0
    assert w.bad_rows == 1


def test_a_lane_named_over_max_id_is_passed_over_unread(conn, ex):
    long = "L" * (MAX_ID + 1)
    conn.client.hset(P + "g:" + long + ":meta", mapping={"ring": "1"})
    conn.client.zadd(P + "g:" + long + ":pending", {"j": 0})
    conn.client.rpush(queue_key(Q, "ring"), long)
    served = jobs.enqueue(conn, Q, "{}", group="good")
    got = lanes.claim(ex, Q, 60_000)
    assert got is not None and got[0] == served
    assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == []
    # its meta not written (its flag stays), its backlog not read
    assert conn.client.hget(P + "g:" + long + ":meta", "ring") == "1"
    assert conn.client.zcard(P + "g:" + long + ":pending") == 1


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "lane"])
def test_a_head_id_over_max_id_is_dropped_unread(conn, ex, grouped):
    """An id over MAX_ID at the head (another node's, with a row): no job a script
    addresses; dropped as a ghost is, its row left as it was, the job behind served
    (served before: each of the claim's commands copied or hashed it, 17 to 20 ms at 1 MB)."""
    long = "h" * (MAX_ID + 1)
    conn.client.hset(P + "job:" + long, mapping={"payload": "{}", "state": "pending"})
    group = "acme" if grouped else None
    served = jobs.enqueue(conn, Q, "{}", group=group)
    held = P + "g:acme:pending" if grouped else queue_key(Q, "pending")
    conn.client.zadd(held, {long: -1})
    got = (lanes.claim if grouped else jobs.claim)(ex, Q, 60_000)
    assert got is not None and got[0] == served
    assert conn.client.zscore(held, long) is None
    assert conn.client.hgetall(P + "job:" + long) == {"payload": "{}", "state": "pending"}


@pytest.mark.parametrize("how", ["complete", "fail"])
def test_a_finish_on_a_row_turned_another_type_is_refused_typed(conn, ex, how):
    """Another client wrote a list where a claimed job's row was: complete and fail refuse
    BadRow 'type' (a raw WRONGTYPE before), nothing written; the Worker counts it lost."""
    jid = jobs.enqueue(conn, Q, "{}")
    assert jobs.claim(ex, Q, 60_000)[0] == jid
    conn.client.delete(P + "job:" + jid)
    conn.client.rpush(P + "job:" + jid, "another client's")
    with pytest.raises(BadRow, match="type"):
        if how == "complete":
            jobs.complete(ex, Q, jid)
        else:
            jobs.fail(ex, Q, jid, "boom")
    assert conn.client.zscore(queue_key(Q, "active"), jid) is not None
    assert conn.client.lrange(P + "job:" + jid, 0, -1) == ["another client's"]


def test_a_finish_in_a_lane_whose_meta_turned_another_type_is_refused_typed(conn, ex):
    jid = jobs.enqueue(conn, Q, "{}", group="acme")
    assert lanes.claim(ex, Q, 60_000)[0] == jid
    conn.client.delete(P + "g:acme:meta")
    conn.client.set(P + "g:acme:meta", "x")
    with pytest.raises(BadRow, match="type"):
        jobs.complete(ex, Q, jid)
    assert conn.client.zscore(queue_key(Q, "active"), jid) is not None


def test_a_worker_whose_job_turned_another_type_goes_on(conn, ex):
    first = jobs.enqueue(conn, Q, "{}")
    jobs.enqueue(conn, Q, "{}")

    def handler(job_id, payload, attempts):
        if job_id == first:
            conn.client.delete(P + "job:" + job_id)
            conn.client.set(P + "job:" + job_id, "another client's")

    w = Worker(ex, Q, handler, idle_sleep=0)
    assert w.run(until_empty=True) == 2
    assert (w.lost, w.completed) == (1, 1)


def test_lane_metas_another_node_wrote_long_are_measured_never_copied(harm, monkeypatch):
    """10 lanes on the ring whose `paused` holds 100 KB, ahead of a lane with a job: each
    meta's fields measured first, `paused` only asked whether it is there (the claim's
    HMGET copied each whole: 300 of 1 MB held a claim 143 ms, bench/hostile_claims.py)."""
    from harm import ScriptReads

    conn, srv = harm
    for i in range(10):
        conn.client.hset(P + f"g:p{i}:meta", mapping={"ring": "1", "paused": "y" * 100_000})
        conn.client.rpush(queue_key(Q, "ring"), f"p{i}")
    served = jobs.enqueue(conn, Q, "{}", group="good")
    reads = ScriptReads(conn, srv, monkeypatch, "gclaim2")
    got = lanes.claim(conn, Q, 60_000)
    assert got is not None and got[0] == served
    assert sum(reads.copied()) < 1_000
    # the paused lanes left the ring, their metas as they were but the flag
    assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == []
    assert conn.client.hstrlen(P + "g:p0:meta", "paused") == 100_000


def test_a_head_row_of_long_numbers_is_refused_without_copying_them(harm, monkeypatch):
    """The head row's numbers another node wrote 1 MB long: refused BadRow as before,
    each measured first and none copied (8 fields of 3 MB held every claim call 30 to 40
    ms only to refuse it); its times 1 MB long: served, the wait not measured."""
    from harm import ScriptReads

    conn, srv = harm
    conn.client.hset(P + "job:wide", mapping={"payload": "{}", "attempts": "9" * 1_000_000})
    conn.client.zadd(queue_key(Q, "pending"), {"wide": -1})
    reads = ScriptReads(conn, srv, monkeypatch, "claim2")
    with pytest.raises(BadRow, match="attempts"):
        jobs.claim(conn, Q, 60_000)
    conn.client.delete(P + "job:wide")
    times = {"created_at": "1" * 1_000_000, "due_at": "2" * 1_000_000}
    conn.client.hset(P + "job:late", mapping={"payload": "{}", **times})
    conn.client.zadd(queue_key(Q, "pending"), {"late": -1})
    got = jobs.claim(conn, Q, 60_000)
    assert got is not None and got[0] == "late"
    assert all(copied < 1_000 for copied in reads.copied())
    assert conn.client.hstrlen(P + "job:late", "created_at") == 1_000_000


def test_a_finish_in_a_lane_paused_long_never_copies_its_meta(harm, monkeypatch):
    """Another node paused a lane writing 1 MB there: completing a job of it measures the
    meta's fields (reads.lua `measured_lane_counts`), the check, the slot given back and the
    wake each copied `paused` before (16 MB: 53 ms a complete)."""
    from harm import ScriptReads

    conn, srv = harm
    jid = jobs.enqueue(conn, Q, "{}", group="acme")
    jobs.enqueue(conn, Q, "{}", group="acme")
    assert lanes.claim(conn, Q, 60_000)[0] == jid
    conn.client.hset(P + "g:acme:meta", "paused", "y" * 1_000_000)
    reads = ScriptReads(conn, srv, monkeypatch, "complete")
    jobs.complete(conn, Q, jid)
    assert sum(reads.copied()) < 1_000
    # the slot given back, the paused lane not woken
    assert conn.client.hget(P + "g:acme:meta", "active") == "0"
    assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == []
