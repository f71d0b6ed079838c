"""Grouped lanes on both backends: limits, round-robin, lane pause, the slot accounting."""

from emq_notebook import admin, jobs, lanes

Q = "work"


def lane_active(conn, g):
    return int(conn.client.hget(f"emq:{{{Q}}}:g:{g}:meta", "active") or 0)


def test_grouped_jobs_wait_in_their_lane(conn):
    jid = jobs.enqueue(conn, Q, "x", group="acme")
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0
    assert jobs.claim(conn, Q, 1000) is None  # the flat claim does not see lanes
    assert lanes.claim(conn, Q, 1000)[0] == jid
    assert lane_active(conn, "acme") == 1


def test_round_robin_across_lanes(conn):
    for g in ("a", "b", "c"):
        lanes.set_limit(conn, Q, g, 10)
        for i in range(2):
            jobs.enqueue(conn, Q, f"{g}{i}", group=g)
    served = [lanes.claim(conn, Q, 1000)[1] for _ in range(6)]
    assert served == ["a0", "b0", "c0", "a1", "b1", "c1"]
    assert lanes.claim(conn, Q, 1000) is None


def test_lane_limit_holds_and_complete_gives_the_slot_back(conn):
    ids = [jobs.enqueue(conn, Q, str(i), group="acme") for i in range(3)]
    lanes.set_limit(conn, Q, "acme", 2)
    a = lanes.claim(conn, Q, 1000)
    b = lanes.claim(conn, Q, 1000)
    assert lanes.claim(conn, Q, 1000) is None  # at its limit
    assert lane_active(conn, "acme") == 2
    jobs.complete(conn, Q, a[0])
    assert lane_active(conn, "acme") == 1
    c = lanes.claim(conn, Q, 1000)
    assert [a[0], b[0], c[0]] == ids


def test_fail_and_expiry_keep_the_count_balanced(conn):
    lanes.set_limit(conn, Q, "acme", 5)
    x = jobs.enqueue(conn, Q, "x", group="acme", max_attempts=1)
    y = jobs.enqueue(conn, Q, "y", group="acme")
    lanes.claim(conn, Q, 1000)
    lanes.claim(conn, Q, 20)
    jobs.fail(conn, Q, x, "bad")
    assert lane_active(conn, "acme") == 1
    import time

    time.sleep(0.05)
    assert jobs.expire_leases(conn, Q) == 1
    assert lane_active(conn, "acme") == 0
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [y]


def test_lane_pause_and_queue_pause(conn):
    jobs.enqueue(conn, Q, "a", group="a")
    jobs.enqueue(conn, Q, "b", group="b")
    lanes.pause_lane(conn, Q, "a")
    assert lanes.claim(conn, Q, 1000)[1] == "b"
    assert lanes.claim(conn, Q, 1000) is None
    lanes.resume_lane(conn, Q, "a")
    admin.pause(conn, Q)
    assert lanes.claim(conn, Q, 1000) is None  # the queue-wide gate covers lanes
    admin.resume(conn, Q)
    assert lanes.claim(conn, Q, 1000)[1] == "a"
    info = lanes.lanes(conn, Q)
    assert info["a"] == {"pending": 0, "active": 1, "limit": 1, "paused": False}


def test_a_retried_grouped_job_returns_to_its_lane(conn):
    jid = jobs.enqueue(conn, Q, "x", group="acme", max_attempts=2, backoff_ms=1)
    lanes.claim(conn, Q, 1000)
    assert jobs.fail(conn, Q, jid, "once") == "retry"
    import time

    time.sleep(0.02)
    jobs.promote(conn, Q)
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
    assert lanes.claim(conn, Q, 1000) == (jid, "x", 2)
