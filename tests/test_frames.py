"""Frames checked against the keyspace, on both backends."""

import time

import pandas as pd

from emq_notebook import admin, frames, jobs, repeat

Q = "mail"


def test_snapshot_has_one_row_per_job_with_its_set_and_row(conn):
    p = jobs.enqueue(conn, Q, '{"p": 1}', id="j_p", priority=2)
    g = jobs.enqueue(conn, Q, '{"g": 1}', id="j_g", group="acme")
    s = jobs.enqueue(conn, Q, '{"s": 1}', id="j_s", delay_ms=60_000)
    d = jobs.enqueue(conn, Q, '{"d": 1}', id="j_0d", max_attempts=1)
    a = jobs.enqueue(conn, Q, '{"a": 1}', id="j_a")
    assert jobs.claim(conn, Q, 60_000)[0] == d      # priority 0, first id
    jobs.fail(conn, Q, d, "boom")
    assert jobs.claim(conn, Q, 60_000)[0] == a
    jobs.update_progress(conn, Q, a, "30")
    snap = frames.snapshot(conn, Q)
    assert set(snap.index) == {p, g, s, d, a}
    assert snap.loc[p, "state"] == "pending" and snap.loc[p, "priority"] == 2 and pd.isna(snap.loc[p, "at"])
    assert snap.loc[g, "state"] == "pending" and snap.loc[g, "group"] == "acme"
    assert snap.loc[s, "state"] == "schedule"
    assert snap.loc[d, "state"] == "dead" and snap.loc[d, "last_error"] == "boom"
    assert snap.loc[d, "failures"] == 1 and snap.loc[d, "attempts"] == 1
    assert snap.loc[a, "state"] == "active" and snap.loc[a, "progress"] == "30"
    # the set score as a timestamp: the schedule's due time matches the zset
    due = conn.client.zscore(f"emq:{{{Q}}}:schedule", s)
    assert snap.loc[s, "at"] == pd.Timestamp(due, unit="ms", tz="UTC")
    assert snap.loc[a, "at"] > pd.Timestamp.now(tz="UTC")
    dead = frames.snapshot(conn, Q, states="dead")
    assert list(dead.index) == [d]
    assert frames.snapshot(conn, Q, states=("pending",), limit=1).shape[0] == 2   # flat + lane


def test_snapshot_of_an_empty_queue(conn):
    snap = frames.snapshot(conn, "empty")
    assert snap.empty and list(snap.columns) == frames.COLUMNS


def test_queues_and_counts(conn):
    for i in range(3):
        jobs.enqueue(conn, "a", str(i))
    jobs.enqueue(conn, "a", "x", group="g1")
    jobs.enqueue(conn, "b", "y", delay_ms=60_000)
    repeat.register(conn, "b", "tick", 60_000, "{}")
    admin.pause(conn, "b")
    assert frames.queues(conn) == ["a", "b"]
    c = frames.counts(conn)
    assert c.loc["a"].to_dict() == {"pending": 4, "active": 0, "schedule": 0, "dead": 0,
                                    "paused": False, "lanes": 1, "repeatables": 0}
    assert c.loc["b", "schedule"] == 1 and bool(c.loc["b", "paused"]) and c.loc["b", "repeatables"] == 1


def test_metrics_frame_is_time_indexed(conn):
    minute = int(time.time() // 60)
    conn.client.hset(f"emq:{{{Q}}}:metrics:completed", mapping={minute - 120: 4, minute: 2})
    conn.client.hset(f"emq:{{{Q}}}:metrics:failed", mapping={minute: 1})
    conn.client.hset(f"emq:{{{Q}}}:metrics:claimed", mapping={minute - 120: 5, minute: 3, "by hand": 9})
    m = frames.metrics(conn, Q)
    assert isinstance(m.index, pd.DatetimeIndex) and list(m.columns) == ["claimed", "completed", "failed"]
    assert m["completed"].tolist() == [4, 2] and m["failed"].tolist() == [0, 1]
    assert m["claimed"].tolist() == [5, 3]
    assert frames.metrics(conn, Q, since_ms=3_600_000)["completed"].tolist() == [2]
