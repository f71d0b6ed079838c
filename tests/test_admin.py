"""Queue scope on both backends and a local Valkey Cluster: pause/resume, bounded drain, bounded obliterate
down to a zero footprint, bulk reprocess and remove; refusals change nothing."""

import json
import time

import pytest
from helpers import BACKENDS, WITH_CLUSTER, consistency_problems, dump, keys_of
from lost_replies import Q as Q_soak_regressions
from lost_replies import lose_replies

from emq_notebook import admin, jobs, lanes, repeat
from emq_notebook.errors import ActiveJobs, NotPaused, WireError
from emq_notebook.keyspace import queue_key

Q = "mail"


@pytest.fixture(params=WITH_CLUSTER)
def backend(request):
    return request.param


def events(conn, q, action):
    """Every event `action()` publishes on q's channel, in order. A marker published on
    the same channel after the action comes back after all of them (one channel's
    messages arrive in order), so nothing is waited for once it is here."""
    channel = f"emq:{{{q}}}:events"
    ps = conn.client.pubsub()
    ps.subscribe(channel)
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    action()
    marker = f"end of the action {time.time_ns()}"
    conn.client.publish(channel, marker)
    out = []
    deadline = time.time() + 5
    while time.time() < deadline:
        m = ps.get_message(timeout=0.1)
        if m and m["type"] == "message":
            if m["data"] == marker:
                break
            out.append(json.loads(m["data"]))
    else:
        raise AssertionError(f"the marker never came back; seen {out}")
    ps.close()
    return out


def test_pause_and_resume_are_a_field_and_idempotent(conn):
    ids = [jobs.enqueue(conn, Q, str(i)) for i in range(3)]
    before = dump(conn)
    admin.pause(conn, Q)
    admin.pause(conn, Q)
    assert admin.is_paused(conn, Q)
    after = dump(conn)
    # the only change is the paused field on meta: no set moved
    assert {k: v for k, v in after.items() if not k.endswith(":meta")} == {
        k: v for k, v in before.items() if not k.endswith(":meta")
    }
    assert after[f"emq:{{{Q}}}:meta"][1]["paused"] == "1"
    admin.resume(conn, Q)
    admin.resume(conn, Q)
    assert not admin.is_paused(conn, Q)
    assert dump(conn) == before
    assert conn.client.zrange(f"emq:{{{Q}}}:pending", 0, -1) == ids


def test_pause_and_resume_publish_events(conn):
    seen = events(conn, Q, lambda: (admin.pause(conn, Q), admin.resume(conn, Q)))
    assert [e["event"] for e in seen] == ["paused", "resumed"]


def test_drain_spares_active_lanes_in_flight_and_the_repeat_registry(conn):
    active = jobs.enqueue(conn, Q, "in flight")
    jobs.claim(conn, Q, 60_000)
    pending = [jobs.enqueue(conn, Q, str(i), dedup=f"d{i}") for i in range(5)]
    for p in pending:
        jobs.add_log(conn, Q, p, "queued")
    g_active = jobs.enqueue(conn, Q, "g2", group="beta")
    assert lanes.claim(conn, Q, 60_000)[0] == g_active
    grouped = jobs.enqueue(conn, Q, "g", group="acme")
    later = jobs.enqueue(conn, Q, "later", delay_ms=60_000)
    repeat.register(conn, Q, "digest", 60_000, "{}")
    assert admin.drain(conn, Q) == 6  # 5 pending + 1 lane backlog
    for p in pending + [grouped]:
        assert not conn.client.exists(f"emq:{{{Q}}}:job:{p}", f"emq:{{{Q}}}:job:{p}:logs")
    assert conn.client.hlen(f"emq:{{{Q}}}:dedup") == 0  # dedup keys released
    assert jobs.get_job(conn, Q, active)["state"] == "active"
    assert jobs.get_job(conn, Q, later)["state"] == "schedule"
    assert conn.client.zcard(f"emq:{{{Q}}}:active") == 2
    assert repeat.registered(conn, Q)[0]["name"] == "digest"
    assert admin.drain(conn, Q, include_schedule=True) == 1
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{later}")
    assert jobs.get_job(conn, Q, g_active)["state"] == "active"


def test_drain_is_bounded_and_answers_the_total(conn):
    for i in range(25):
        jobs.enqueue(conn, Q, str(i))
    steps = []
    assert admin.drain(conn, Q, budget=10, progress=lambda calls, n: steps.append(n)) == 25
    assert steps == [10, 20, 25]
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0


def test_obliterate_refuses_a_running_queue_and_changes_nothing(conn):
    jobs.enqueue(conn, Q, "x")
    before = dump(conn)
    with pytest.raises(NotPaused) as info:
        admin.obliterate(conn, Q)
    assert info.value.reason == "not_paused"
    assert dump(conn) == before


def test_obliterate_refuses_jobs_in_flight_unless_forced(conn):
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 60_000)
    admin.pause(conn, Q)
    before = dump(conn)
    with pytest.raises(ActiveJobs) as info:
        admin.obliterate(conn, Q)
    assert info.value.reason == "active"
    assert dump(conn) == before
    assert admin.obliterate(conn, Q, force=True) == "ok"
    assert keys_of(conn, Q) == []
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{jid}:lock")


def build_everything(conn, q, n):
    """A queue with something in every structure the toolkit writes."""
    for i in range(n):
        jid = jobs.enqueue(
            conn, q, json.dumps({"i": i}), dedup=f"k{i}" if i % 3 == 0 else None, max_attempts=1
        )
        if i % 4 == 0:
            jobs.add_log(conn, q, jid, "line")
    for i in range(5):
        jobs.enqueue(conn, q, "g", group=f"g{i % 2}")
    jobs.enqueue(conn, q, "later", delay_ms=60_000)
    for _ in range(3):
        got = jobs.claim(conn, q, 60_000)
        jobs.fail(conn, q, got[0], "boom")
    got = jobs.claim(conn, q, 60_000)
    jobs.complete(conn, q, got[0])
    lanes.claim(conn, q, 60_000)
    lanes.set_limit(conn, q, "g1", 3)
    repeat.register(conn, q, "digest", 60_000, "{}")
    # what no set references: an orphan row, orphan logs, a stray lock
    conn.client.hset(f"emq:{{{q}}}:job:j_orphan", "payload", "lost")
    conn.client.rpush(f"emq:{{{q}}}:job:j_gone:logs", "left behind")
    conn.client.set(f"emq:{{{q}}}:job:j_stray:lock", "x", px=60_000)


def test_obliterate_all_leaves_a_zero_footprint(conn):
    build_everything(conn, Q, 40)
    jobs.enqueue(conn, "neighbour", "keep me", id="j_keep")
    admin.pause(conn, Q)
    seen = []
    calls = admin.obliterate_all(conn, Q, force=True, budget=7, progress=lambda c, left: seen.append(left))
    assert calls > 5 and seen == sorted(seen, reverse=True)
    assert keys_of(conn, Q) == []
    assert jobs.get_job(conn, "neighbour", "j_keep")["payload"] == "keep me"


def test_obliterate_calls_are_bounded_by_the_budget(conn):
    n, budget = 45, 10
    for i in range(n):
        jobs.enqueue(conn, Q, str(i))
    admin.pause(conn, Q)
    left = [admin.job_count(conn, Q)]
    replies = []
    while True:
        replies.append(admin.obliterate(conn, Q, budget=budget))
        left.append(admin.job_count(conn, Q))
        if replies[-1] == "ok":
            break
    # EchoMQ's bounded sweep: ceil(45/10) = 5 calls, none touching more than the budget
    assert replies == ["more"] * 4 + ["ok"]
    assert all(a - b <= budget for a, b in zip(left, left[1:], strict=False))
    assert keys_of(conn, Q) == []


def test_every_obliterate_call_leaves_a_consistent_queue(conn):
    # found by the model (tests/test_model.py): a bounded call that deleted a job
    # kept its dedup key, so a later enqueue answered the deleted id and was lost
    old = jobs.enqueue(conn, Q, "old", dedup="invoice-7")
    flying = jobs.enqueue(conn, Q, "g", group="acme")
    lanes.claim(conn, Q, 60_000)
    admin.pause(conn, Q)
    assert admin.obliterate(conn, Q, force=True, budget=1) == "more"  # the in-flight one
    assert conn.client.hget(f"emq:{{{Q}}}:g:acme:meta", "active") == "0"  # its slot given back
    assert admin.obliterate(conn, Q, force=True, budget=1) == "more"  # the pending one
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{old}", f"emq:{{{Q}}}:job:{flying}")
    fresh = jobs.enqueue(conn, Q, "new", dedup="invoice-7")
    assert fresh != old and jobs.get_job(conn, Q, fresh)["payload"] == "new"


def test_obliterate_of_an_exact_multiple_takes_one_more_call(conn):
    for i in range(20):
        jobs.enqueue(conn, Q, str(i))
    admin.pause(conn, Q)
    assert admin.obliterate_all(conn, Q, budget=10) == 3
    assert keys_of(conn, Q) == []


def test_obliterate_publishes_and_the_queue_can_be_reused(conn):
    jobs.enqueue(conn, Q, "x")
    admin.pause(conn, Q)
    seen = events(conn, Q, lambda: admin.obliterate_all(conn, Q))
    assert seen[-1] == {"event": "obliterated"}
    jid = jobs.enqueue(conn, Q, "fresh")
    assert jobs.claim(conn, Q, 1000)[0] == jid  # not paused any more: meta went too


def test_reprocess_dead_in_bounded_calls(conn):
    ids = []
    for i in range(12):
        ids.append(jobs.enqueue(conn, Q, str(i), max_attempts=1, group="acme" if i < 2 else None))
    for _ in range(12):
        got = jobs.claim(conn, Q, 1000) or __import__("emq_notebook").lanes.claim(conn, Q, 1000)
        jobs.fail(conn, Q, got[0], "boom")
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 12
    steps = []
    assert admin.reprocess_dead(conn, Q, budget=5, limit=11, progress=lambda c, n: steps.append(n)) == 11
    assert steps == [5, 10, 11]
    assert admin.reprocess_dead(conn, Q) == 1
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 0
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 10
    assert conn.client.zcard(f"emq:{{{Q}}}:g:acme:pending") == 2
    row = jobs.get_job(conn, Q, ids[5])
    assert row["failures"] == "1" and "last_error" not in row and row["state"] == "pending"
    assert admin.reprocess_dead(conn, Q) == 0


def test_remove_jobs_answers_per_id(conn):
    a = jobs.enqueue(conn, Q, "a")
    b = jobs.enqueue(conn, Q, "b")
    jobs.claim(conn, Q, 60_000)  # a is now held
    c = jobs.enqueue(conn, Q, "c", group="acme")
    assert admin.remove_jobs(conn, Q, [a, b, c, "j_nope"]) == {
        a: "locked",
        b: "removed",
        c: "removed",
        "j_nope": "gone",
    }
    assert jobs.get_job(conn, Q, a)["state"] == "active"
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{b}", f"emq:{{{Q}}}:job:{c}")
    assert conn.client.zcard(f"emq:{{{Q}}}:g:acme:pending") == 0


@pytest.mark.parametrize("loop", ["drain", "obliterate_all", "reprocess_dead"])
def test_an_interrupt_between_calls_leaves_a_consistent_queue(conn, loop):
    for i in range(30):
        jobs.enqueue(
            conn,
            Q,
            str(i),
            group="acme" if i % 3 == 0 else None,
            dedup=f"k{i}" if i % 2 else None,
            max_attempts=1,
        )
    lanes.set_limit(conn, Q, "acme", 30)
    for _ in range(12):  # some dead, some in flight
        got = jobs.claim(conn, Q, 60_000) or lanes.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, got[0], "boom")
    in_flight = [lanes.claim(conn, Q, 60_000)[0], jobs.claim(conn, Q, 60_000)[0]]
    admin.pause(conn, Q)

    def interrupt(calls, _done):
        if calls == 2:
            raise KeyboardInterrupt  # Ctrl-C / the notebook's stop button

    run = {
        "drain": lambda p: admin.drain(conn, Q, budget=3, progress=p),
        "obliterate_all": lambda p: admin.obliterate_all(conn, Q, force=True, budget=3, progress=p),
        "reprocess_dead": lambda p: admin.reprocess_dead(conn, Q, budget=3, progress=p),
    }[loop]
    with pytest.raises(KeyboardInterrupt):
        run(interrupt)
    assert consistency_problems(conn, Q) == []
    run(None)  # and it converges when run again
    assert consistency_problems(conn, Q) == []
    if loop == "obliterate_all":
        assert keys_of(conn, Q) == []
    elif loop == "drain":
        assert admin.job_count(conn, Q) == conn.client.zcard(f"emq:{{{Q}}}:dead") + len(in_flight)
    else:
        assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 0


# -- Regression tests for what the soak (tests/soak/) found, one per bug, on both backends. Each
# fault is injected at the client (a reply read that fails after the server ran the command, or a
# failed pause read), so the fake runs it too.


class TestSoakRegressions:
    # conftest's backends: this module's own `backend` adds the cluster
    @pytest.fixture(params=BACKENDS)
    def backend(self, request):
        return request.param

    def test_a_drain_whose_reply_is_lost_does_not_lose_its_count_silently(self, conn, monkeypatch):
        for i in range(30):
            jobs.enqueue(conn, Q_soak_regressions, str(i), id=f"j_{i:02d}")
        steps: list = []
        lose_replies(conn, monkeypatch)
        with pytest.raises(WireError):
            admin.drain(
                conn, Q_soak_regressions, budget=10, progress=lambda calls, total: steps.append(total)
            )
        # the first call drained 10 and its answer was lost: the drain stops there, it does not
        # go on answering a total that leaves those 10 out
        assert steps == []
        assert conn.client.zcard(queue_key(Q_soak_regressions, "pending")) == 20
