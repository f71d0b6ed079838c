"""Queue scope on both backends and a local Valkey Cluster: pause/resume, bounded drain, bounded obliterate
down to a zero footprint, bulk reprocess and remove; refusals change nothing."""

import json
import time

import pytest
from bad_rows import P
from bad_rows import Q as Q_budget
from harm import bounded
from helpers import BACKENDS, WITH_CLUSTER, consistency_problems, dump, keys_of
from lost_replies import Q as Q_soak_regressions
from lost_replies import lose_replies

import emq_notebook as emq
from emq_notebook import admin, jobs, lanes, repeat, scripts, watching
from emq_notebook import lanes as lanes_
from emq_notebook.errors import ActiveJobs, Gone, NotPaused, WireError
from emq_notebook.keyspace import base, queue_key

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


# -- Lanes at scale, on both backends. A drain walks the lanes on from where its last call stopped
# (lua/drain.lua with a lane cursor): each call examines a bounded number of lanes, never the whole
# groups set (an SMEMBERS of 100,000 lanes and a ZRANGE each, every call, held Valkey over 100 ms),
# and every lane's backlog is drained all the same, whatever the lanes' names. A removed ghost is
# looked for in every lane only while the lanes are few (refusals.lua GHOST_LANES).
Q_drain_lanes = "tenants"
# lua/drain.lua LANES_A_CALL
LANES_A_CALL = 2000


def lanes_drain_lanes(conn: emq.Connection, names: list[str], jobs_each: int = 1, every: int = 1) -> int:
    """Lanes written as another node lays them out: the groups set, and every `every`th
    lane's backlog of `jobs_each` jobs with their rows (the rest known, empty). Answers
    the jobs made."""
    pipe = conn.client.pipeline(transaction=False)
    pipe.hset(queue_key(Q_drain_lanes, "meta"), "created_at", "1")
    made = 0
    for i, g in enumerate(names):
        pipe.sadd(queue_key(Q_drain_lanes, "groups"), g)
        for k in range(jobs_each if i % every == 0 else 0):
            job = f"j{i}-{k}"
            pipe.zadd(f"{base(Q_drain_lanes)}g:{g}:pending", {job: 0})
            pipe.hset(
                f"{base(Q_drain_lanes)}job:{job}", mapping={"state": "pending", "group": g, "payload": "{}"}
            )
            made += 1
    pipe.execute()
    return made


def left_drain_lanes(conn: emq.Connection, names: list[str]) -> int:
    pipe = conn.client.pipeline(transaction=False)
    for g in names:
        pipe.zcard(f"{base(Q_drain_lanes)}g:{g}:pending")
    return sum(pipe.execute())


class TestDrainLanes:
    # conftest's backends: this module's own `backend` adds the cluster
    @pytest.fixture(params=BACKENDS)
    def backend(self, request):
        return request.param

    def test_a_drain_of_many_lanes_walks_them_a_bounded_number_a_call(self, conn):
        # 4,500 known lanes, most of them empty: 90 jobs in all, well within one call's budget
        names = [f"t{i:05d}" for i in range(4_500)]
        made = lanes_drain_lanes(conn, names, jobs_each=2, every=100)
        calls: list[int] = []
        assert (
            admin.drain(conn, Q_drain_lanes, budget=1_000, progress=lambda c, n: calls.append(n))
            == made
            == 90
        )
        assert left_drain_lanes(conn, names) == 0
        assert conn.client.scan(0, match=f"{base(Q_drain_lanes)}job:*", count=100_000)[1] == []
        # a lane looked at is a unit of the budget (1,000 a call, a page of SSCAN more at most):
        # about five calls; the whole set in each call looked at 4,500 lanes in one
        assert 4 <= len(calls) <= 6, calls
        assert calls[-1] == made

    def test_a_call_that_stops_inside_a_page_of_lanes_goes_on_from_it(self, conn):
        # a budget smaller than a page of lanes: calls end inside pages and look at them again
        names = [f"t{i:04d}" for i in range(300)]
        made = lanes_drain_lanes(conn, names, jobs_each=3)
        steps: list[int] = []
        assert admin.drain(conn, Q_drain_lanes, budget=7, progress=lambda c, n: steps.append(n)) == made
        assert left_drain_lanes(conn, names) == 0
        # each call drains a job or walks on past a page of lanes looked at
        assert all(b >= a for a, b in zip(steps, steps[1:], strict=False))
        assert len(steps) <= made + 300 // 8

    def test_lanes_with_long_names_or_bytes_not_utf8_are_drained_and_every_call_moves_on(self, conn):
        # 120 lanes named 20 KB each: 2.4 MB of names, over a call's byte budget; and a few
        # names of bytes that are not UTF-8
        names = [f"{i:03d}" + "n" * 20_000 for i in range(120)] + ["\udcff\udcfe", "caf\udce9"]
        made = lanes_drain_lanes(conn, names)
        steps: list[int] = []
        assert admin.drain(conn, Q_drain_lanes, budget=1_000, progress=lambda c, n: steps.append(n)) == made
        assert left_drain_lanes(conn, names) == 0
        assert len(steps) <= made + 1  # a call drains a job at least, or ends the walk

    def test_a_lane_whose_backlog_is_another_type_is_passed_over_and_the_rest_drained(self, conn):
        # another client wrote a string and a hash where two lanes' backlogs live: each call
        # of the drain stopped there on WRONGTYPE, so the queue could never be drained
        names = [f"t{i:03d}" for i in range(40)]
        made = lanes_drain_lanes(conn, names, jobs_each=2)
        conn.client.sadd(queue_key(Q_drain_lanes, "groups"), "strlane", "hashlane")
        conn.client.set(f"{base(Q_drain_lanes)}g:strlane:pending", "x")
        conn.client.hset(f"{base(Q_drain_lanes)}g:hashlane:pending", "a", "b")
        assert admin.drain(conn, Q_drain_lanes, budget=7) == made
        assert left_drain_lanes(conn, names) == 0
        assert conn.client.get(f"{base(Q_drain_lanes)}g:strlane:pending") == "x"  # another's key, untouched
        # an older client's call (no cursor) passes them over alike
        made = lanes_drain_lanes(conn, names, jobs_each=1)
        n, more = conn.run(
            "drain", [base(Q_drain_lanes), queue_key(Q_drain_lanes, "pending")], [1_000, 1 << 20]
        )
        assert (n, more) == (made, 0)

    def test_a_lane_named_over_max_id_bytes_is_passed_over_as_the_walks_of_the_lanes_do(self, conn):
        # another node's lanes named 70,000 bytes: no key is built of such a name (a drain
        # building them read every one with its SSCAN page: 20 of 1 MB held Valkey 46 ms a
        # call); its backlog stays, as watching.backlog counts it skipped
        long_names = [f"{i:02d}" + "x" * 70_000 for i in range(4)]
        names = [f"t{i}" for i in range(10)]
        made = lanes_drain_lanes(conn, names)
        lanes_drain_lanes(conn, long_names)
        assert admin.drain(conn, Q_drain_lanes, budget=1_000) == made
        assert left_drain_lanes(conn, names) == 0
        assert left_drain_lanes(conn, long_names) == len(long_names)
        assert watching.backlogs(conn, [Q_drain_lanes])[Q_drain_lanes].skipped == len(long_names)

    def test_an_older_clients_drain_call_without_a_cursor_answers_as_before(self, conn):
        names = [f"t{i}" for i in range(30)]
        made = lanes_drain_lanes(conn, names, jobs_each=2)
        keys = [base(Q_drain_lanes), queue_key(Q_drain_lanes, "pending")]
        total = 0
        while True:
            n, more = conn.run("drain", keys, [25, 1 << 20])
            total += n
            if not more:
                break
        assert total == made and left_drain_lanes(conn, names) == 0

    def test_a_ghost_is_looked_for_in_every_lane_only_while_the_lanes_are_few(self, conn):

        first = jobs.enqueue(conn, Q_drain_lanes, "a", group="t0500", id="j_first")
        second = jobs.enqueue(conn, Q_drain_lanes, "b", group="t0500", id="j_second")
        lane = f"{base(Q_drain_lanes)}g:t0500:pending"
        # few lanes: the ghost leaves its lane too
        conn.client.delete(f"{base(Q_drain_lanes)}job:{first}")
        with pytest.raises(Gone):
            jobs.remove_job(conn, Q_drain_lanes, first)
        assert conn.client.zrange(lane, 0, -1) == [second]
        # 1,200 lanes known (over GHOST_LANES, refusals.lua): the ghost stays in its lane,
        # where the lane's claim drops it at the head
        conn.client.sadd(queue_key(Q_drain_lanes, "groups"), *[f"t{i:04d}" for i in range(1_200)])
        conn.client.zadd(lane, {"j_ghost": -1})
        conn.client.zadd(queue_key(Q_drain_lanes, "pending"), {"j_ghost": 0})
        with pytest.raises(Gone):
            jobs.remove_job(conn, Q_drain_lanes, "j_ghost")
        assert conn.client.zscore(queue_key(Q_drain_lanes, "pending"), "j_ghost") is None
        assert conn.client.zrange(lane, 0, -1) == ["j_ghost", second]
        claimed = lanes_.claim(conn, Q_drain_lanes, 60_000)
        assert claimed is not None and claimed[0] == second
        assert conn.client.zcard(lane) == 0

    def test_a_ghost_is_looked_for_only_in_the_lanes_whose_names_fit_a_calls_bytes(self, conn):
        # 300 lanes another node named 10 KB each (3 MB of names, each key built of one):
        # one ghost's remove read them whole (SMEMBERS) and built a key of each (1,000 lanes
        # of 60 KB: Valkey held 159 ms); it looks in as many as GHOST_BYTES of names cover
        names = [f"{i:03d}" + "n" * 10_000 for i in range(300)]
        lanes_drain_lanes(conn, names, jobs_each=0)
        pipe = conn.client.pipeline(transaction=False)
        for g in names:
            pipe.zadd(f"{base(Q_drain_lanes)}g:{g}:pending", {"j_ghost": 0})
        pipe.zadd(queue_key(Q_drain_lanes, "pending"), {"j_ghost": 0})
        pipe.execute()
        with pytest.raises(Gone):
            jobs.remove_job(conn, Q_drain_lanes, "j_ghost")
        assert conn.client.zscore(queue_key(Q_drain_lanes, "pending"), "j_ghost") is None
        still = left_drain_lanes(conn, names)
        assert 0 < still < len(names)  # some lanes looked in, not all 300
        # a bulk remove counts the names it reads against its bytes: each call moves on, and
        # its dry run answers the same words
        ids = [f"j_g{i}" for i in range(40)]
        conn.client.zadd(queue_key(Q_drain_lanes, "pending"), dict.fromkeys(ids, 0))
        assert admin.remove_jobs(conn, Q_drain_lanes, ids, dry_run=True) == dict.fromkeys(ids, "gone")
        assert admin.remove_jobs(conn, Q_drain_lanes, ids) == dict.fromkeys(ids, "gone")
        assert conn.client.zcard(queue_key(Q_drain_lanes, "pending")) == 0

    def test_a_ghosts_lane_whose_backlog_is_another_type_is_passed_over(self, conn):
        # another client wrote a string where one lane's backlog lives: removing a ghost
        # stopped there on WRONGTYPE, so the ghost could never be removed
        names = [f"t{i}" for i in range(5)]
        lanes_drain_lanes(conn, names, jobs_each=0)
        conn.client.sadd(queue_key(Q_drain_lanes, "groups"), "strlane")
        conn.client.set(f"{base(Q_drain_lanes)}g:strlane:pending", "x")
        for g in names:
            conn.client.zadd(f"{base(Q_drain_lanes)}g:{g}:pending", {"j_ghost": 0})
        conn.client.zadd(queue_key(Q_drain_lanes, "pending"), {"j_ghost": 0, "j_other": 1})
        with pytest.raises(Gone):
            jobs.remove_job(conn, Q_drain_lanes, "j_ghost")
        assert left_drain_lanes(conn, names) == 0
        assert conn.client.get(f"{base(Q_drain_lanes)}g:strlane:pending") == "x"
        assert admin.remove_jobs(conn, Q_drain_lanes, ["j_other"]) == {"j_other": "gone"}


# -- Do no harm, the bulk verbs: every call is bounded by the work it does (members examined AND
# bytes), whatever the sets hold -- bad rows, ghosts, ids another node wrote outside the name gate,
# 8 MB payloads, a :logs list of 200,000 lines -- and a run walks each member once, so it never
# re-walks (or re-announces) what it left behind. Both backends; the calls that could hold a server run
# under the harness's watchdog (tests/harm.py). Work is observed in the replies and the events,
# never timed.

# -- 2. big values ------------------------------------------------------------------------


def big_jobs(conn) -> None:
    """Four jobs with an 8 MB payload (another node's: over what the toolkit writes),
    then one with a :logs list of 200,000 lines."""
    big = "x" * (8 << 20)
    for i in range(4):
        jobs.enqueue(conn, Q_budget, "{}", id=f"j_big{i}")
        conn.client.hset(P + f"job:j_big{i}", "payload", big)
    jobs.enqueue(conn, Q_budget, "{}", id="j_logs")
    pipe = conn.client.pipeline(transaction=False)
    for _ in range(20):
        pipe.rpush(P + "job:j_logs:logs", *(f"line {i}" for i in range(10_000)))
    pipe.execute()


class TestHarmBudget:
    # conftest's backends: this module's own `backend` adds the cluster
    @pytest.fixture(params=BACKENDS)
    def backend(self, request):
        return request.param

    def test_drain_of_big_payloads_and_long_logs_returns_a_call_per_big_row(self, harm):
        conn, srv = harm
        big_jobs(conn)
        drained: list[int] = []
        n = bounded(
            lambda: admin.drain(conn, Q_budget, progress=lambda c, k: drained.append(k)), srv, what="drain"
        )
        # each 8 MB payload spends a call's bytes: a call of its own, then the rest
        assert n == 5 and drained == [1, 2, 3, 4, 5]
        assert keys_of(conn, Q_budget) == [P + "meta"]

    def test_obliterate_of_big_payloads_and_long_logs_returns_and_leaves_nothing(self, harm):
        conn, srv = harm
        big_jobs(conn)
        admin.pause(conn, Q_budget)
        left: list[int] = []
        calls = bounded(
            lambda: admin.obliterate_all(conn, Q_budget, progress=lambda c, k: left.append(k)),
            srv,
            what="obliterate",
        )
        assert left == [4, 3, 2, 1] and calls == 5  # one 8 MB row a call, then the rest
        assert keys_of(conn, Q_budget) == []

    # -- 6. EchoMQ's own callers send no byte budget -------------------------------------------

    def test_echomqs_own_drain_and_obliterate_layouts_answer_as_echomq_does(self, conn):
        """EchoMQ's Elixir Admin sends drain no ARGV and obliterate two: the byte budget is
        an optional last argument, so their replies are EchoMQ's."""
        for i in range(5):
            jobs.enqueue(conn, Q_budget, "x" * 100, id=f"j_{i}")
        assert (
            conn.client.evalsha(conn.client.script_load(scripts.source("drain")), 2, P, P + "pending") == 5
        )  # the count drained, unbounded
        for i in range(5):
            jobs.enqueue(conn, Q_budget, "x" * 100, id=f"j_{i}")
        admin.pause(conn, Q_budget)
        sha = conn.client.script_load(scripts.source("obliterate"))
        # five jobs at two a call: 1 (:more), 1, then the last job and the rest, 0 (:ok)
        assert [conn.client.evalsha(sha, 2, P + "meta", P, "", "2") for _ in range(3)] == [1, 1, 0]
        assert keys_of(conn, Q_budget) == []

    def test_obliterate_keeps_the_throughput_record_whole_between_calls(self, conn):
        """The latency minutes go in the call that deletes the metrics hashes, however small
        the budget and however many minutes the history spans."""
        for i in range(3):
            jobs.enqueue(conn, Q_budget, "{}", id=f"j_{i}")
        jobs.complete(conn, Q_budget, jobs.claim(conn, Q_budget, 60_000).id)
        for minute in (1, 2, 3):  # a history spanning more minutes than the budget
            conn.client.zadd(P + "lat:minutes", {str(minute): minute})
            conn.client.hset(P + f"lat:wait:{minute}", "0", "1")
        admin.pause(conn, Q_budget)
        while admin.obliterate(conn, Q_budget, budget=1) == "more":
            metrics = conn.client.exists(P + "metrics:claimed", P + "metrics:completed")
            minutes = conn.client.exists(P + "lat:minutes", *(P + f"lat:wait:{m}" for m in (1, 2, 3)))
            assert (metrics, minutes) in ((2, 4), (0, 0))
        assert keys_of(conn, Q_budget) == []
