"""Job scope on both backends and a local Valkey Cluster: each per-job verb succeeds, and each refusal is
typed and leaves the whole keyspace byte-identical."""

import json
import time

import pytest
from helpers import WITH_CLUSTER, dump

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import Gone, Locked, NotDead

Q = "mail"


@pytest.fixture(params=WITH_CLUSTER)
def backend(request):
    return request.param


def dead_job(conn, q=Q, group=None, payload="x"):
    jid = jobs.enqueue(conn, q, payload, max_attempts=1, group=group)
    got = (lanes.claim if group else jobs.claim)(conn, q, 60_000)
    assert got[0] == jid
    assert jobs.fail(conn, q, jid, "boom") == "dead"
    return jid


MISSING = [
    ("update_data", lambda c: jobs.update_data(c, Q, "j_none", "{}")),
    ("update_progress", lambda c: jobs.update_progress(c, Q, "j_none", "10")),
    ("add_log", lambda c: jobs.add_log(c, Q, "j_none", "line")),
    ("get_job_logs", lambda c: jobs.get_job_logs(c, Q, "j_none")),
    ("remove_job", lambda c: jobs.remove_job(c, Q, "j_none", dedup="k")),
    ("reprocess_job", lambda c: jobs.reprocess_job(c, Q, "j_none")),
    ("get_job", lambda c: jobs.get_job(c, Q, "j_none")),
]


@pytest.mark.parametrize("name,call", MISSING, ids=[m[0] for m in MISSING])
def test_a_missing_row_refuses_gone_and_writes_nothing(conn, name, call):
    jobs.enqueue(conn, Q, "other")
    before = dump(conn)
    with pytest.raises(Gone) as info:
        call(conn)
    assert info.value.reason == "gone" and info.value.job == "j_none"
    assert dump(conn) == before  # no stray :logs list, no row


def test_update_data_replaces_the_payload(conn):
    jid = jobs.enqueue(conn, Q, '{"to": "typo"}')
    jobs.update_data(conn, Q, jid, '{"to": "fixed"}')
    row = jobs.get_job(conn, Q, jid)
    assert row["payload"] == '{"to": "fixed"}' and row["state"] == "pending"


def test_update_progress_writes_and_publishes(conn):
    jid = jobs.enqueue(conn, Q, "x")
    ps = conn.client.pubsub()
    ps.subscribe(f"emq:{{{Q}}}:events")
    ps.get_message(timeout=1)
    jobs.update_progress(conn, Q, jid, "42")
    msg = None
    deadline = time.time() + 2
    while msg is None and time.time() < deadline:
        m = ps.get_message(timeout=0.2)
        msg = m if m and m["type"] == "message" else None
    ps.close()
    assert json.loads(msg["data"]) == {"event": "progress", "job": jid, "progress": "42"}
    assert jobs.get_job(conn, Q, jid)["progress"] == "42"


def test_logs_append_in_order_and_trim(conn):
    jid = jobs.enqueue(conn, Q, "x")
    assert jobs.get_job_logs(conn, Q, jid) == []
    assert [jobs.add_log(conn, Q, jid, f"l{i}") for i in range(3)] == [1, 2, 3]
    assert jobs.get_job_logs(conn, Q, jid) == ["l0", "l1", "l2"]
    assert jobs.add_log(conn, Q, jid, "l3", keep=2) == 2
    assert jobs.get_job_logs(conn, Q, jid) == ["l2", "l3"]


@pytest.mark.parametrize("where", ["pending", "schedule", "dead"])
def test_remove_job_from_any_set(conn, where):
    if where == "dead":
        jid = dead_job(conn)
    else:
        jid = jobs.enqueue(conn, Q, "x", delay_ms=60_000 if where == "schedule" else 0, dedup="k1")
    jobs.add_log(conn, Q, jid, "line")
    jobs.remove_job(conn, Q, jid, dedup="k1")
    assert [k for k in dump(conn) if ":job:" in k or k.endswith(":" + where)] == []
    assert not conn.client.hexists(f"emq:{{{Q}}}:dedup", "k1")


def test_remove_refuses_a_locked_job_untouched(conn):
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 60_000)  # the :lock key is held
    before = dump(conn)
    with pytest.raises(Locked) as info:
        jobs.remove_job(conn, Q, jid)
    assert info.value.reason == "locked"
    assert dump(conn) == before
    other = jobs.enqueue(conn, Q, "y")
    conn.client.hset(f"emq:{{{Q}}}:job:{other}", "lock", "worker-7")  # a lock field
    before = dump(conn)
    with pytest.raises(Locked):
        jobs.remove_job(conn, Q, other)
    assert dump(conn) == before


def test_removing_an_in_flight_grouped_job_gives_its_slot_back(conn):
    jid = jobs.enqueue(conn, Q, "x", group="acme")
    waiting = jobs.enqueue(conn, Q, "y", group="acme")
    lanes.claim(conn, Q, 60_000)
    assert lanes.claim(conn, Q, 60_000) is None  # limit 1: the lane is full
    # the worker died; its lock lapsed before the lease sweep ran
    conn.client.delete(f"emq:{{{Q}}}:job:{jid}:lock")
    jobs.remove_job(conn, Q, jid)
    assert conn.client.hget(f"emq:{{{Q}}}:g:acme:meta", "active") == "0"
    assert conn.client.zscore(f"emq:{{{Q}}}:active", jid) is None
    assert lanes.claim(conn, Q, 60_000)[0] == waiting


def test_reprocess_moves_dead_to_pending_and_keeps_counters(conn):
    jid = dead_job(conn)
    conn.client.hset(f"emq:{{{Q}}}:job:{jid}", "stalled", "2")
    jobs.reprocess_job(conn, Q, jid)
    row = jobs.get_job(conn, Q, jid)
    assert row["state"] == "pending" and "last_error" not in row
    assert (row["attempts"], row["failures"], row["stalled"]) == ("1", "1", "2")
    assert conn.client.zscore(f"emq:{{{Q}}}:pending", jid) == 0
    assert conn.client.zscore(f"emq:{{{Q}}}:dead", jid) is None


def test_reprocess_refuses_a_job_not_dead(conn):
    jid = jobs.enqueue(conn, Q, "x")
    before = dump(conn)
    with pytest.raises(NotDead) as info:
        jobs.reprocess_job(conn, Q, jid)
    assert info.value.reason == "not_dead"
    assert str(info.value) == f"refused: reprocess {Q} {jid} — not_dead"
    assert dump(conn) == before


def test_reprocess_on_a_paused_queue_waits_in_pending(conn):
    jid = dead_job(conn)
    admin.pause(conn, Q)
    jobs.reprocess_job(conn, Q, jid)
    assert conn.client.zscore(f"emq:{{{Q}}}:pending", jid) == 0
    assert jobs.claim(conn, Q, 1000) is None
    admin.resume(conn, Q)
    assert jobs.claim(conn, Q, 1000)[0] == jid


def test_reprocess_returns_a_grouped_job_to_its_lane_and_the_ring(conn):
    jid = dead_job(conn, group="acme")
    assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == []
    wake_before = conn.client.llen(f"emq:{{{Q}}}:wake")
    jobs.reprocess_job(conn, Q, jid)
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0
    assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == ["acme"]
    assert conn.client.llen(f"emq:{{{Q}}}:wake") == wake_before + 1
    assert lanes.claim(conn, Q, 1000)[0] == jid


def test_reprocess_to_a_paused_lane_does_not_join_the_ring(conn):
    jid = dead_job(conn, group="acme")
    lanes.pause_lane(conn, Q, "acme")
    jobs.reprocess_job(conn, Q, jid)
    assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == []
    lanes.resume_lane(conn, Q, "acme")
    assert lanes.claim(conn, Q, 1000)[0] == jid
