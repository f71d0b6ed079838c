"""The queue underneath, on both backends: enqueue, claim and its pause gate,
priorities, retries into dead, lease expiry, promotion, dedup, metrics, events."""

import json
import threading
import time

import pytest

from emq_notebook import Worker, admin, jobs, lanes, repeat
from emq_notebook.errors import BadInput, Gone, NotActive

Q = "mail"


def test_enqueue_writes_the_row_and_pending(conn):
    jid = jobs.enqueue(conn, Q, '{"to": "a"}', priority=0)
    row = jobs.get_job(conn, Q, jid)
    assert row["payload"] == '{"to": "a"}' and row["state"] == "pending"
    assert (row["attempts"], row["failures"], row["stalled"]) == ("0", "0", "0")
    assert conn.client.zscore(f"emq:{{{Q}}}:pending", jid) == 0


def test_claim_serves_priority_then_id_order(conn):
    later = jobs.enqueue(conn, Q, "low", priority=5)
    first = jobs.enqueue(conn, Q, "a")
    second = jobs.enqueue(conn, Q, "b")
    got = [jobs.claim(conn, Q, 5000) for _ in range(4)]
    assert [g[0] for g in got[:3]] == [first, second, later]
    assert got[3] is None
    assert got[0] == (first, "a", 1)
    assert conn.client.zcard(f"emq:{{{Q}}}:active") == 3
    assert conn.client.pttl(f"emq:{{{Q}}}:job:{first}:lock") > 0


def test_pause_gate_answers_none_and_keeps_the_backlog(conn):
    ids = [jobs.enqueue(conn, Q, str(i)) for i in range(3)]
    admin.pause(conn, Q)
    before = conn.client.zrange(f"emq:{{{Q}}}:pending", 0, -1)
    assert jobs.claim(conn, Q, 1000) is None
    assert conn.client.zrange(f"emq:{{{Q}}}:pending", 0, -1) == before == ids
    admin.resume(conn, Q)
    assert jobs.claim(conn, Q, 1000)[0] == ids[0]


def test_claim_scripts_carry_no_pause_logic(conn):
    from emq_notebook import scripts

    for name in ("claim2", "gclaim2"):
        code = [line for line in scripts.source(name).splitlines() if not line.lstrip().startswith("--")]
        # the queue's meta hash (where `paused` lives) is read by a claim script only
        # for the metrics retention, never for the paused field
        assert all("'metrics_keep'" in line for line in code if "'meta'" in line), name
    # and run directly on a paused queue, each script serves its head
    jobs.enqueue(conn, Q, "flat", id="j_f")
    jobs.enqueue(conn, Q, "lane", id="j_g", group="acme")
    admin.pause(conn, Q)
    rest = [f"emq:{{{Q}}}:active", f"emq:{{{Q}}}:"]
    assert conn.run("claim2", [f"emq:{{{Q}}}:pending", *rest], [60_000])[0] == "j_f"
    assert conn.run("gclaim2", [f"emq:{{{Q}}}:ring", *rest], [60_000])[0] == "j_g"


def test_fail_retries_with_backoff_then_dead(conn):
    jid = jobs.enqueue(conn, Q, "x", max_attempts=2, backoff_ms=50)
    jobs.claim(conn, Q, 1000)
    assert jobs.fail(conn, Q, jid, "boom 1") == "retry"
    row = jobs.get_job(conn, Q, jid)
    assert row["state"] == "schedule" and row["failures"] == "1" and row["last_error"] == "boom 1"
    assert jobs.promote(conn, Q) == 0  # not due yet
    time.sleep(0.08)
    assert jobs.promote(conn, Q) == 1
    assert jobs.claim(conn, Q, 1000) == (jid, "x", 2)
    assert jobs.fail(conn, Q, jid, "boom 2") == "dead"
    row = jobs.get_job(conn, Q, jid)
    assert row["state"] == "dead" and row["failures"] == "2" and row["attempts"] == "2"
    assert conn.client.zscore(f"emq:{{{Q}}}:dead", jid) is not None
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{jid}:lock")


def test_complete_deletes_the_row_and_refuses_when_not_in_flight(conn):
    jid = jobs.enqueue(conn, Q, "x")
    with pytest.raises(NotActive):
        jobs.complete(conn, Q, jid)
    jobs.claim(conn, Q, 1000)
    jobs.add_log(conn, Q, jid, "working")
    jobs.complete(conn, Q, jid)
    assert not conn.client.exists(
        f"emq:{{{Q}}}:job:{jid}", f"emq:{{{Q}}}:job:{jid}:logs", f"emq:{{{Q}}}:job:{jid}:lock"
    )
    with pytest.raises(Gone):
        jobs.complete(conn, Q, jid)


def test_lease_expiry_puts_stalled_jobs_back(conn):
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 60_000)
    assert jobs.expire_leases(conn, Q) == 0
    # the lease runs out: its deadline (the active set's score) set a moment past, not
    # waited for (a busy machine takes longer than a short lease between two calls)
    conn.client.zadd(f"emq:{{{Q}}}:active", {jid: conn.server_ms() - 1})
    assert jobs.expire_leases(conn, Q) == 1
    row = jobs.get_job(conn, Q, jid)
    assert row["state"] == "pending" and row["stalled"] == "1"
    assert jobs.claim(conn, Q, 1000) == (jid, "x", 2)


def test_delay_goes_through_the_schedule(conn):
    jid = jobs.enqueue(conn, Q, "later", delay_ms=40)
    assert jobs.claim(conn, Q, 1000) is None
    assert jobs.get_job(conn, Q, jid)["state"] == "schedule"
    time.sleep(0.06)
    jobs.promote(conn, Q)
    assert jobs.claim(conn, Q, 1000)[0] == jid


def test_dedup_holds_until_the_job_ends(conn):
    a = jobs.enqueue(conn, Q, "x", dedup="order-7")
    assert jobs.enqueue(conn, Q, "y", dedup="order-7") == a
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 1
    jobs.claim(conn, Q, 1000)
    jobs.complete(conn, Q, a)
    b = jobs.enqueue(conn, Q, "z", dedup="order-7")
    assert b != a


def test_an_existing_id_is_not_overwritten(conn):
    jobs.enqueue(conn, Q, "first", id="j_fixed")
    assert jobs.enqueue(conn, Q, "second", id="j_fixed") == "j_fixed"
    assert jobs.get_job(conn, Q, "j_fixed")["payload"] == "first"


def test_metrics_are_bumped_per_minute(conn):
    for ok in (True, True, False):
        jid = jobs.enqueue(conn, Q, "x", max_attempts=1)
        jobs.claim(conn, Q, 1000)
        jobs.complete(conn, Q, jid) if ok else jobs.fail(conn, Q, jid, "e")
    done = conn.client.hgetall(f"emq:{{{Q}}}:metrics:completed")
    failed = conn.client.hgetall(f"emq:{{{Q}}}:metrics:failed")
    assert sum(map(int, done.values())) == 2 and sum(map(int, failed.values())) == 1
    minute = int(time.time() // 60)
    assert all(abs(int(k) - minute) <= 1 for k in done)


def test_metrics_retention_is_bounded(conn):
    mk = f"emq:{{{Q}}}:metrics:completed"
    conn.client.hset(f"emq:{{{Q}}}:meta", "metrics_keep", 3)
    conn.client.hset(mk, mapping={str(m): 1 for m in range(1, 6)})
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 1000)
    jobs.complete(conn, Q, jid)
    fields = sorted(map(int, conn.client.hkeys(mk)))
    assert len(fields) == 3 and fields[:2] == [4, 5]


def test_events_reach_a_subscriber(conn):
    ps = conn.client.pubsub()
    ps.subscribe(f"emq:{{{Q}}}:events")
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 1000)
    jobs.update_progress(conn, Q, jid, "50")
    jobs.complete(conn, Q, jid)
    seen = []
    deadline = time.time() + 3
    while len(seen) < 4 and time.time() < deadline:
        m = ps.get_message(timeout=0.2)
        if m and m["type"] == "message":
            seen.append(json.loads(m["data"]))
    ps.close()
    assert [e["event"] for e in seen] == ["added", "active", "progress", "completed"]
    assert seen[2] == {"event": "progress", "job": jid, "progress": "50"}


def test_repeatables_produce_and_survive(conn):
    repeat.register(conn, Q, "digest", 300, '{"kind": "digest"}')
    assert repeat.tick(conn, Q) == []
    time.sleep(0.35)
    made = repeat.tick(conn, Q)
    assert len(made) == 1 and jobs.get_job(conn, Q, made[0])["payload"] == '{"kind": "digest"}'
    assert repeat.tick(conn, Q) == []  # next beat is in the future
    [entry] = repeat.registered(conn, Q)
    assert entry["name"] == "digest" and entry["every_ms"] == 300
    assert repeat.unregister(conn, Q, "digest") and repeat.registered(conn, Q) == []


def test_bad_arguments_are_typed(conn):
    for call in (
        lambda: jobs.claim(conn, Q, 0),
        lambda: jobs.claim(conn, Q, -5),
        lambda: jobs.enqueue(conn, Q, {"not": "a string"}),
        lambda: jobs.enqueue(conn, Q, "x", max_attempts=0),
        lambda: admin.drain(conn, Q, budget=0),
    ):
        with pytest.raises(BadInput):
            call()
    assert conn.client.dbsize() == 0


def test_worker_makes_a_real_incident(conn):
    for i in range(4):
        jobs.enqueue(conn, Q, json.dumps({"n": i}), max_attempts=1)

    def handler(job_id, payload, attempts):
        if json.loads(payload)["n"] % 2:
            raise ValueError("odd payload")

    w = Worker(conn, Q, handler)
    assert w.run(until_empty=True) == 4
    assert (w.completed, w.failed) == (2, 2)
    dead = conn.client.zrange(f"emq:{{{Q}}}:dead", 0, -1)
    assert len(dead) == 2
    assert jobs.get_job(conn, Q, dead[0])["last_error"] == "ValueError: odd payload"


def test_two_workers_never_share_a_job(conn, connect_as):
    for i in range(60):
        jobs.enqueue(conn, Q, str(i))
    seen: list[str] = []
    lock = threading.Lock()

    def handler(job_id, payload, attempts):
        with lock:
            seen.append(job_id)

    workers = [Worker(connect_as(), Q, handler) for _ in range(2)]
    threads = [threading.Thread(target=w.run, kwargs={"until_empty": True}) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(seen) == 60 and len(set(seen)) == 60


def test_a_wire_fault_on_the_pause_read_reads_as_not_paused(conn, monkeypatch):
    # EchoMQ.Admin's paused?/2: `_ -> false`. A fault on the HGET alone lets the claim go on
    # (on a paused queue the claim that goes on reads the field itself and serves
    # nothing: tests/test_soak_regressions.py)
    import redis as redis_py

    jid = jobs.enqueue(conn, Q, "x")
    real = conn.client.execute_command

    def flaky(*args, **kwargs):
        if args[:1] == ("HGET",) and args[-1] == "paused":
            raise redis_py.ConnectionError("injected: connection reset during the pause read")
        return real(*args, **kwargs)

    monkeypatch.setattr(conn.client, "execute_command", flaky)
    assert jobs.claim(conn, Q, 1000)[0] == jid


def test_a_server_gone_at_the_pause_read_is_never_a_blind_claim():
    # the fault persists: the claim script meets it too and raises, it never answers "empty"
    import emq_notebook as emq
    from emq_notebook.errors import WireError

    nowhere = emq.connect("redis://127.0.0.1:1/0")
    with pytest.raises(WireError):
        jobs.claim(nowhere, Q, 1000)
    with pytest.raises(WireError):
        lanes.claim(nowhere, Q, 1000)
