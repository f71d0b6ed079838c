"""Job scope (emq_notebook/jobs.py), on both backends: the queue underneath and the per-job
verbs, with the hostile and harm cases that defend them (rows, ghosts, metas, trims and long
fields another node wrote).

The queue underneath, on both backends: enqueue, claim and its pause gate,
priorities, retries into dead, lease expiry, promotion, dedup, metrics, events."""

import json
import re
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis as redis_py
from bad_rows import P as P_budget
from bad_rows import Q as Q_budget
from bad_rows import bad_rows_and_ghosts, kill, refused_before_anything_is_sent
from dead_rows import P as P_reads
from dead_rows import Q as Q_reads
from harm import Events, ScriptReads, bounded, replies, sent, written_out
from helpers import WITH_CLUSTER, claim_new, consistency_problems, dump, kept_conn, keys_of, minute_now
from lost_replies import Q as Q_soak_regressions
from lost_replies import active, lose_replies

import emq_notebook as emq
from emq_notebook import (
    Worker,
    admin,
    decoding,
    footprint,
    frames,
    jobs,
    lanes,
    repeat,
    scripts,
    triage,
    worker,
)
from emq_notebook.connector import Connection
from emq_notebook.defaults import BYTE_BUDGET, MAX_MOVE_BUDGET, MAX_PAYLOAD, MAX_WHOLE_FIELD
from emq_notebook.errors import (
    BadInput,
    BadRow,
    EMQError,
    Gone,
    InvalidName,
    Locked,
    NotActive,
    NotDead,
    ReadOnly,
    WireError,
)
from emq_notebook.keyspace import base, metrics_key, queue_key
from emq_notebook.widgets import JobPanel

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
    # nothing: tests/test_jobs.py)
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


# -- A claim is bounded by the work it does, whatever other nodes left ahead of the job: ghosts
# (members of pending or of a lane whose row is gone) and lanes on the ring no claim can serve. One
# call drops at most CLAIM_SKIPS ghosts and examines at most that many lanes and ghosts on the ring,
# and about CLAIM_BYTES of their ids and names (lua/includes/activate.lua); past the bound it
# answers EchoMQ's `{}`, or "more" to the toolkit, which asks for it (an optional last ARGV), and
# the toolkit's claims and its Worker claim again at once: the job behind the ghosts is served,
# never slept on. On both backends and both executors (`script` and `function`).
P = f"emq:{{{Q}}}:"
LANE = P + "g:acme:pending"
GHOSTS = 5_000
# the bound, read where it is set (the one home of the numbers)
BOUND = re.search(r"local CLAIM_SKIPS, CLAIM_BYTES = (\d+), (\d+)", scripts.source("claim2"))
SKIPS, BYTES = int(BOUND[1]), int(BOUND[2])


def ghosts(conn, key: str, n: int, score: int = -1, width: int = 0) -> None:
    """`n` members with no row in `key`, ahead of any job of priority 0 (ids `a...`,
    padded to `width` bytes)."""
    for start in range(0, n, 1000):
        ids = (f"a{i:07d}".ljust(width, "x") for i in range(start, min(n, start + 1000)))
        conn.client.zadd(key, dict.fromkeys(ids, score))


def one_call(ex, grouped: bool = False, echomq: bool = False):
    """ONE claim call as the toolkit sends it (ASK_MORE last), or as EchoMQ's callers
    do (`echomq`: lease and token only)."""
    name, keys = jobs.claim_transition(Q, grouped)
    if echomq:
        return ex.run(name, keys, [60_000, ex.token], verb="claim", queue=Q)
    return jobs.claim_calls(ex, Q, name, keys, 60_000, calls=1)


def dead_lanes(conn, n: int) -> list[str]:
    """`n` lanes on the ring ahead of the rest, none a claim can serve: paused, at its
    limit, or with nothing waiting, in turn."""
    names = [f"d{i:05d}" for i in range(n)]
    pipe = conn.client.pipeline(transaction=False)
    for i, g in enumerate(names):
        meta = {"ring": "1", "paused": "1"} if i % 3 == 0 else {"ring": "1", "limit": "1"}
        if i % 3 == 1:
            meta["active"] = "1"
            pipe.zadd(P + f"g:{g}:pending", {f"w_{g}": 0})  # waiting, its lane full
            pipe.hset(P + f"job:w_{g}", mapping={"payload": "w", "state": "pending", "group": g})
        pipe.hset(P + f"g:{g}:meta", mapping=meta)
    pipe.lpush(P + "ring", *reversed(names))
    pipe.execute()
    return names


class TestClaimGhosts:
    @pytest.fixture
    def conn(self, backend, request, kept_clients):
        return kept_conn(kept_clients, backend, request)

    def test_the_bound_is_a_few_hundred(self):
        # a ghost is a ZRANGE, an HMGET, an EXISTS and a ZREM: 500 hold Valkey a few ms
        # (bench/claim_ghosts.py); every test below holds more ghosts than a call takes
        assert 100 <= SKIPS <= 1000 and GHOSTS > 2 * SKIPS

    @pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
    def test_a_flat_claim_call_drops_at_most_its_bound_of_ghosts(self, conn, ex, echomq):
        jobs.enqueue(conn, Q, "the job", id="j_real")
        ghosts(conn, P + "pending", GHOSTS)
        # stopped at its bound: "more" to the toolkit, EchoMQ's {} (None) to its callers
        assert one_call(ex, echomq=echomq) == (None if echomq else jobs.MORE)
        assert conn.client.zcard(P + "pending") == GHOSTS + 1 - SKIPS
        # the ghosts dropped are the head's, the job untouched
        assert conn.client.zrange(P + "pending", 0, 0) == [f"a{SKIPS:07d}"]
        assert conn.client.hget(P + "job:j_real", "state") == "pending"
        assert one_call(ex, echomq=echomq) == (None if echomq else jobs.MORE)
        assert conn.client.zcard(P + "pending") == GHOSTS + 1 - 2 * SKIPS
        # jobs.claim makes up to CLAIM_CALLS calls: 5,000 ghosts are within them
        assert GHOSTS <= jobs.CLAIM_CALLS * SKIPS
        assert jobs.claim(ex, Q, 60_000).id == "j_real"
        assert jobs.claim(ex, Q, 60_000) is None
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
    def test_a_lane_claim_call_drops_at_most_its_bound_and_keeps_the_lane_on_the_ring(self, conn, ex, echomq):
        jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")
        ghosts(conn, LANE, GHOSTS)
        assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
        # the lane counts one of the bound, its ghosts the rest
        dropped = GHOSTS + 1 - conn.client.zcard(LANE)
        assert 0 < dropped <= SKIPS
        # stopped inside the lane: it stays at the ring's head, flagged, for the next call
        assert conn.client.lrange(P + "ring", 0, -1) == ["acme"]
        assert conn.client.hget(P + "g:acme:meta", "ring") == "1"
        assert conn.client.hget(P + "job:j_real", "state") == "pending"
        assert lanes.claim(ex, Q, 60_000).id == "j_real"
        assert conn.client.zcard(LANE) == 0
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
    def test_a_ring_of_more_lanes_no_claim_serves_than_the_bound(self, conn, ex, echomq):
        jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")  # acme at the ring's tail
        n = 2 * SKIPS + SKIPS // 2
        names = dead_lanes(conn, n)
        assert conn.client.llen(P + "ring") == n + 1
        assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
        # the lanes examined left the ring (and their flag), as the lanes a claim passes over do
        assert conn.client.llen(P + "ring") == n + 1 - SKIPS
        assert conn.client.lindex(P + "ring", 0) == names[SKIPS]
        assert conn.client.hget(P + f"g:{names[SKIPS - 1]}:meta", "ring") is None
        assert conn.client.hget(P + f"g:{names[SKIPS]}:meta", "ring") == "1"
        assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
        got = one_call(ex, grouped=True, echomq=echomq)
        assert got.id == "j_real"
        assert lanes.claim(ex, Q, 60_000) is None
        assert conn.client.llen(P + "ring") == 0

    def test_a_call_stopped_inside_a_lane_goes_on_there(self, conn, ex):
        jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")
        dead_lanes(conn, SKIPS // 2)
        ghosts(conn, LANE, SKIPS)
        # the dead lanes and acme count SKIPS // 2 + 1, the ghosts dropped the rest
        assert one_call(ex, grouped=True) == jobs.MORE
        assert conn.client.lrange(P + "ring", 0, -1) == ["acme"]
        assert conn.client.zcard(LANE) == SKIPS + 1 - (SKIPS - SKIPS // 2 - 1)
        assert one_call(ex, grouped=True).id == "j_real"

    def test_long_ghost_ids_count_their_bytes(self, conn, ex):
        # 20 KB ids: each counts 16 times its bytes (reads.lua ID_WORK), so a call drops as
        # many as CLAIM_BYTES covers, one past it at most
        width = 20_000
        jobs.enqueue(conn, Q, "the job", id="j_real")
        ghosts(conn, P + "pending", 10, width=width)
        per_call = -(-BYTES // (16 * width))
        assert one_call(ex) == jobs.MORE
        assert conn.client.zcard(P + "pending") == 11 - per_call
        assert jobs.claim(ex, Q, 60_000).id == "j_real"

    @pytest.mark.parametrize("grouped", (False, True), ids=("flat", "lane"))
    def test_a_worker_gets_the_job_behind_the_ghosts_without_sleeping(self, conn, ex, grouped, monkeypatch):
        key = LANE if grouped else P + "pending"
        jobs.enqueue(conn, Q, "the job", id="j_real", group="acme" if grouped else None)
        ghosts(conn, key, GHOSTS)
        # each claim call the worker sends, and the ghosts it dropped
        dropped: list[int] = []
        run = ex.run

        def counted(name, *a, **kw):
            if name not in ("claim2", "gclaim2"):
                return run(name, *a, **kw)
            before = conn.client.zcard(key)
            got = run(name, *a, **kw)
            dropped.append(before - conn.client.zcard(key) - (got not in (None, jobs.MORE)))
            return got

        monkeypatch.setattr(ex, "run", counted)
        slept: list[float] = []
        monkeypatch.setattr(worker.time, "sleep", slept.append)
        served: list[str] = []
        w = Worker(ex, Q, lambda job_id, *_: served.append(job_id), grouped=grouped, idle_sleep=60)
        assert w.run(max_jobs=1) == 1
        assert served == ["j_real"] and slept == []
        # every call within the bound; as few calls as the bound allows, and one more
        assert max(dropped) <= SKIPS
        assert len(dropped) <= -(-GHOSTS // (SKIPS - 1)) + 1
        # until_empty: a claim that stopped at its bound is no empty queue
        ghosts(conn, key, GHOSTS)
        jobs.enqueue(conn, Q, "the second", id="j_second", group="acme" if grouped else None)
        dropped.clear()
        assert w.run(until_empty=True) == 1
        assert served == ["j_real", "j_second"] and slept == []
        assert max(dropped) <= SKIPS
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("grouped", (False, True), ids=("flat", "lane"))
    def test_within_the_bound_the_toolkits_call_writes_what_echomqs_does(self, conn, ex, grouped):
        # ghosts and lanes no claim serves, fewer than the bound, ahead of the jobs: the
        # toolkit's call (ASK_MORE last) and EchoMQ's (lease and token) answer and write
        # the same, claim after claim (the clock's values aside: lease deadlines, claimed_at)
        from test_transitions import restore, strip_volatile

        group = "acme" if grouped else None
        for i in range(3):
            jobs.enqueue(conn, Q, f"job {i}", id=f"j_{i}", group=group)
        if grouped:
            lanes.set_limit(conn, Q, "acme", 2)
            dead_lanes(conn, 7)
        ghosts(conn, LANE if grouped else P + "pending", 30)
        ex.token = "the worker"
        for _ in range(4):
            start = dump(conn)
            theirs, their_writes = one_call(ex, grouped, echomq=True), dump(conn)
            restore(conn, start)
            ours, our_writes = one_call(ex, grouped), dump(conn)
            assert ours == theirs and strip_volatile(our_writes) == strip_volatile(their_writes)
        assert ours is None

    def test_a_worker_on_a_paused_queue_behind_ghosts_idles(self, conn, monkeypatch):
        # a paused queue answers None, never "more": the worker sleeps its interval
        jobs.enqueue(conn, Q, "the job", id="j_real")
        ghosts(conn, P + "pending", GHOSTS)
        conn.client.hset(P + "meta", "paused", "1")
        for executor in ("script", "function"):
            w = Worker(conn.with_executor(executor), Q, lambda *_: None, idle_sleep=0)
            assert w.run(until_empty=True) == 0 and not w.more
        assert conn.client.zcard(P + "pending") == GHOSTS + 1

    def test_the_claim_sends_echomqs_arguments_to_a_native_command(self, conn, monkeypatch):
        # an EchoMQ node's EMQ.CLAIM is sent lease and token, as EchoMQ's callers send them
        native = conn.with_executor("native")
        sent: list[list] = []
        monkeypatch.setattr(
            native, "_native", lambda command, keys, args: sent.append([command, *args]) or []
        )
        assert jobs.claim(native, Q, 60_000) is None
        assert sent == [["EMQ.CLAIM", "60000", native.token]]
        assert jobs.claim_transition(Q) == ("claim2", [P + "pending", P + "active", base(Q)])
        assert jobs.claim_transition(Q, True) == ("gclaim2", [queue_key(Q, "ring"), P + "active", base(Q)])

    def test_percent_emq_claim_says_what_is_still_ahead_when_it_gave_up(self, conn):
        from emq_notebook.grammar import parse
        from emq_notebook.verbs import Session, execute

        said: list[str] = []
        session = Session(say=said.append)
        session.conn = conn
        ghosts(conn, queue_key(Q, "pending"), SKIPS * jobs.CLAIM_CALLS + 100)
        job = jobs.enqueue(conn, Q, "{}", id="z_real")
        assert execute(session, parse(f"claim {Q}")) is None
        assert said == [
            f"no job claimed from {Q}: 101 members of pending still ahead, none servable within "
            f"{jobs.CLAIM_CALLS} bounded calls (members with no row, or lanes at their limit or "
            "paused): claim again to go on"
        ]
        said.clear()
        assert execute(session, parse(f"claim {Q}"))[0] == job
        assert execute(session, parse(f"claim {Q}")) is None
        assert said == [f"no job claimed from {Q}: nothing ready"]

    def test_a_member_whose_key_is_another_type_never_stops_the_queue_untyped(self, conn, ex):
        from emq_notebook.errors import BadRow

        # `x:logs` names job x's logs list: no job, dropped as a ghost; the job behind is served
        x = jobs.enqueue(conn, Q, "{}", id="x")
        jobs.add_log(conn, Q, x, "a line")
        conn.client.zadd(queue_key(Q, "pending"), {"x:logs": -5})
        got = jobs.claim(ex, Q, 60_000)
        assert got is not None and got[0] == x
        assert conn.client.zscore(queue_key(Q, "pending"), "x:logs") is None
        assert conn.client.llen(f"{P}job:x:logs") == 1  # job x's logs untouched
        # a row key of another type under an ordinary id: a row no transition can read,
        # refused typed with nothing popped
        conn.client.set(f"{P}job:y", "a string")
        conn.client.zadd(queue_key(Q, "pending"), {"y": -5})
        with pytest.raises(BadRow, match="type"):
            jobs.claim(ex, Q, 60_000)
        assert conn.client.zscore(queue_key(Q, "pending"), "y") == -5


# -- A claim measures its head row without walking it: another node's row of many fields (a
# hashtable) is not walked field by field by MEMORY USAGE ... SAMPLES 0 (all of them: a row of
# 1,000,000 fields held a claim 30 ms, the measure alone 24 to 26 ms); its fields the claim reads
# are measured one by one instead (HSTRLEN), and the claim serves it.
Q_claim_row_walk = "walk"


def test_a_row_of_many_fields_is_not_walked_to_be_claimed(harm):
    conn, srv = harm
    c = conn.client
    jobs.enqueue(conn, Q_claim_row_walk, '{"a": 1}', id="j_1")
    c.hset(f"emq:{{{Q_claim_row_walk}}}:job:j_1", mapping={f"f{i:05d}": "v" for i in range(2_000)})
    if srv is not None:
        c.config_resetstat()
    got = bounded(lambda: jobs.claim(conn, Q_claim_row_walk, 60_000), srv, what="claim")
    assert got is not None and (got.id, got.payload, got.attempts) == ("j_1", '{"a": 1}', 1)
    if srv is not None:
        walked = c.info("commandstats").get("cmdstat_memory|usage", {}).get("calls", 0)
        assert walked == 0
    # an ordinary row is still measured whole in one MEMORY USAGE on a server, and claimed
    jobs.enqueue(conn, Q_claim_row_walk, '{"b": 2}', id="j_2")
    got = bounded(lambda: jobs.claim(conn, Q_claim_row_walk, 60_000), srv, what="claim")
    assert got is not None and (got.id, got.payload) == ("j_2", '{"b": 2}')
    if srv is not None:
        assert c.info("commandstats").get("cmdstat_memory|usage", {}).get("calls", 0) == 1


def test_a_row_of_many_fields_with_a_long_number_is_refused_unread(harm):
    """The row of many fields whose attempts another node made 3 MB: refused as before
    (BadRow), the field measured, not read."""
    conn, srv = harm
    c = conn.client
    jobs.enqueue(conn, Q_claim_row_walk, "{}", id="j_1")
    c.hset(f"emq:{{{Q_claim_row_walk}}}:job:j_1", mapping={f"f{i:05d}": "v" for i in range(2_000)})
    c.hset(f"emq:{{{Q_claim_row_walk}}}:job:j_1", "attempts", "7" * (3 << 20))
    try:
        bounded(lambda: jobs.claim(conn, Q_claim_row_walk, 60_000), srv, what="claim")
    except Exception as exc:  # the claim's refusal of a row no transition can read
        assert "attempts" in str(exc), exc
    else:
        raise AssertionError("claimed a row whose attempts is no whole number")


# -- jobs.enqueue_many against N single enqueues, on both backends and both executors: the same rows
# and sets (footprints compared), dedup, delay, group, bounded calls, and bad input that writes
# nothing at all.


@pytest.fixture(params=("script", "function"))
def many(request, conn, connect_as):
    """A connection to the (flushed) backend with the executor under test."""
    return conn if request.param == "script" else connect_as("function")


def normalised(conn) -> dict:
    """The queue's footprint with the clock taken out: `created_at` masked and each
    scheduled job's due time (its score and its row's `due_at`) as its delay from its
    own `created_at`."""
    fp = footprint.footprint(conn, Q)
    created = {
        k[len(base(Q)) + 4 :]: int(v["created_at"])
        for k, (kind, v) in fp.items()
        if kind == "hash" and k.startswith(base(Q) + "job:")
    }
    out = {}
    for key, (kind, value) in fp.items():
        if kind == "hash":
            at = {
                "created_at": lambda v: "<t>",
                "due_at": lambda v, row=value: int(v) - int(row["created_at"]),
            }
            value = {f: at[f](v) if f in at else v for f, v in value.items()}
        elif key == base(Q) + "schedule":
            value = [(m, score - created[m]) for m, score in value]
        out[key] = (kind, value)
    return out


# each batch: (payloads, options) as given to enqueue_many, in order
BATCHES = [
    (['{"n": 1}', '{"n": 2}', '{"n": 3}'], {}),
    (['{"d": 1}', '{"d": 2}', '{"d": 3}', '{"d": 4}'], {"dedup": ["k1", "k1", None, "k2"]}),
    (['{"g": 1}', '{"g": 2}'], {"group": "acme"}),
    (['{"g": 3}'], {"group": "acme", "delay": 60_000}),
    (['{"s": 1}', '{"s": 2}'], {"delay": 3_600_000, "dedup": ["k2", "k3"]}),
    (['{"p": 1}'], {"priority": 5, "max_attempts": 1, "backoff_ms": 250}),
]


def singles(conn, ids_by_batch):
    """The same jobs through `enqueue`, one call each, with the ids enqueue_many chose."""
    answers = []
    for (payloads, opts), ids in zip(BATCHES, ids_by_batch, strict=True):
        keys = opts.get("dedup") or [None] * len(payloads)
        for payload, key, jid in zip(payloads, keys, ids, strict=True):
            answers.append(
                jobs.enqueue(
                    conn,
                    Q,
                    payload,
                    id=jid,
                    group=opts.get("group"),
                    delay_ms=opts.get("delay", 0),
                    priority=opts.get("priority", 0),
                    max_attempts=opts.get("max_attempts", 3),
                    dedup=key,
                    backoff_ms=opts.get("backoff_ms", 1000),
                )
            )
    return answers


@pytest.mark.parametrize("chunk", (1, 2, MAX_MOVE_BUDGET))
def test_the_same_rows_and_sets_as_single_enqueues(conn, many, chunk):
    ids_by_batch = [jobs.enqueue_many(many, Q, payloads, chunk=chunk, **opts) for payloads, opts in BATCHES]
    bulk = normalised(conn)
    conn.client.flushall()
    one_by_one = singles(conn, ids_by_batch)
    assert one_by_one == [i for ids in ids_by_batch for i in ids]
    assert normalised(conn) == bulk
    # what was written, read back: 3 flat + 3 new (k1 once, k2) + 2 lane + 1 due + 1 new (k3) + 1
    assert conn.client.zcard(base(Q) + "pending") == 7
    assert conn.client.zcard(base(Q) + "g:acme:pending") == 2
    assert conn.client.zcard(base(Q) + "schedule") == 2
    assert conn.client.lrange(base(Q) + "ring", 0, -1) == ["acme"]


def test_dedup_answers_the_holder_and_writes_nothing_for_it(conn, many):
    held = jobs.enqueue(conn, Q, "{}", dedup="welcome:1")
    before = dump(conn)
    ids = jobs.enqueue_many(many, Q, ["{}", "{}", "{}"], dedup=["welcome:1", "welcome:2", "welcome:2"])
    assert ids[0] == held and ids[1] == ids[2] != held
    assert conn.client.hgetall(base(Q) + "dedup") == {"welcome:1": held, "welcome:2": ids[1]}
    assert conn.client.hget(base(Q) + "job:" + ids[1], "dedup") == "welcome:2"
    assert conn.client.zrange(base(Q) + "pending", 0, -1) == [held, ids[1]]
    assert set(dump(conn)) - set(before) == {base(Q) + "job:" + ids[1]}


def test_delay_schedules_and_group_fills_one_lane(conn, many):
    t = time.time() * 1000
    due = jobs.enqueue_many(many, Q, ["{}"] * 3, delay=90_000)
    lane = jobs.enqueue_many(many, Q, ["{}"] * 4, group="acme", chunk=3)
    scores = dict(conn.client.zrange(base(Q) + "schedule", 0, -1, withscores=True))
    assert sorted(scores) == sorted(due)
    assert all(t + 90_000 - 5_000 <= s <= t + 90_000 + 60_000 for s in scores.values())
    assert all(conn.client.hget(base(Q) + "job:" + i, "state") == "schedule" for i in due)
    assert conn.client.zrange(base(Q) + "g:acme:pending", 0, -1) == lane  # id order is enqueue order
    assert conn.client.smembers(base(Q) + "groups") == {"acme"}
    assert conn.client.lrange(base(Q) + "wake", 0, -1) == ["acme"]
    assert not conn.client.exists(base(Q) + "pending")


def test_one_added_event_per_created_job(conn, many):
    ps = conn.client.pubsub()
    ps.subscribe(base(Q) + "events")
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    ids = jobs.enqueue_many(many, Q, ["{}"] * 4, group="acme", dedup=["a", "a", None, None])
    seen = []
    deadline = time.time() + 1.0
    while time.time() < deadline:
        m = ps.get_message(timeout=0.1)
        if m and m["type"] == "message":
            seen.append(json.loads(m["data"]))
    ps.close()
    assert seen == [{"event": "added", "job": i, "group": "acme"} for i in (ids[0], ids[2], ids[3])]


def test_the_added_event_is_json_for_ids_and_groups_another_node_writes(conn, many):
    """The script is a wire contract: another node may send ids and a group our name
    gate refuses; each event still reads back as the values sent."""
    ps = conn.client.pubsub()
    ps.subscribe(base(Q) + "events")
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    odd = ["plain_1", 'say "hi"', "back\\slash", "caf\u00e9", "tab\there", "a/b"]
    groups = ("", "tenant 42", 'ten"ant', "t\u00e9")
    for k, group in enumerate(groups):
        argv: list[object] = [group, 0, 0, 3, 1000]
        for job_id in odd:
            argv += [f"g{k}-{job_id}", "{}", ""]
        many.run("enqueue_many", [base(Q)], argv)
    seen = []
    deadline = time.time() + 2.0
    while time.time() < deadline and len(seen) < 4 * len(odd):
        m = ps.get_message(timeout=0.1)
        if m and m["type"] == "message":
            seen.append(json.loads(m["data"]))
    ps.close()
    assert seen == [
        {"event": "added", "job": f"g{k}-{job_id}"} | ({"group": group} if group else {})
        for k, group in enumerate(groups)
        for job_id in odd
    ]


def test_calls_are_bounded_by_the_chunk(conn, many):
    sent = []
    real = many.run

    def counted(name, keys, args=(), **kw):
        sent.append((name, len(args)))
        return real(name, keys, args, **kw)

    many.run = counted
    ids = jobs.enqueue_many(many, Q, [str(i) for i in range(7)], chunk=3)
    assert sent == [("enqueue_many", 5 + 9), ("enqueue_many", 5 + 9), ("enqueue_many", 5 + 3)]
    assert len(set(ids)) == 7 and conn.client.zrange(base(Q) + "pending", 0, -1) == ids
    assert jobs.enqueue_many(many, Q, []) == [] and len(sent) == 3  # nothing to send
    sent.clear()
    jobs.enqueue_many(many, Q, ["{}"] * (jobs.CHUNK + 1))  # the default chunk
    assert [n for _, n in sent] == [5 + 3 * jobs.CHUNK, 5 + 3]


def test_calls_are_bounded_by_bytes_not_characters(conn, many):
    """Two payloads of 350,000 euro signs are 700,000 characters together but 2.1 MB on
    the wire: over `BYTE_BUDGET`, so they go in two calls."""
    sent = []
    real = many.run

    def counted(name, keys, args=(), **kw):
        sent.append(len(args))
        return real(name, keys, args, **kw)

    many.run = counted
    text = json.dumps({"note": "\u20ac" * 350_000}, ensure_ascii=False)
    assert len(text) < BYTE_BUDGET // 2 < len(text.encode())
    ids = jobs.enqueue_many(many, Q, [text, text])
    assert sent == [5 + 3, 5 + 3] and len(ids) == 2


BAD = [
    ("a payload that is not a string", dict(payloads=["{}", {"to": 1}, "{}"]), BadInput),
    ("payloads as one string", dict(payloads="{}"), BadInput),
    ("dedup as one string", dict(payloads=["{}", "{}"], dedup="k"), BadInput),
    ("dedup shorter than the payloads", dict(payloads=["{}", "{}"], dedup=["k"]), BadInput),
    ("a dedup key with a newline", dict(payloads=["{}", "{}"], dedup=[None, "a\nb"]), InvalidName),
    ("a group that escapes its key", dict(payloads=["{}"], group="a:b"), InvalidName),
    ("a negative delay", dict(payloads=["{}"], delay=-1), BadInput),
    ("a delay over a year", dict(payloads=["{}"], delay=400 * 86_400_000), BadInput),
    ("a fractional priority", dict(payloads=["{}"], priority=1.5), BadInput),
    ("zero attempts", dict(payloads=["{}"], max_attempts=0), BadInput),
    ("a zero chunk", dict(payloads=["{}"], chunk=0), BadInput),
    ("a chunk over the maximum budget", dict(payloads=["{}"], chunk=MAX_MOVE_BUDGET + 1), BadInput),
    ("a bad queue name", dict(q="a b", payloads=["{}"]), InvalidName),
]


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_bad_input_writes_nothing(conn, many, case):
    _, given, error = case
    jobs.enqueue(conn, Q, "{}", id="j_before")
    before = dump(conn)
    given = {"q": Q, **given}
    # the bad entry is last in its list, after good ones and across chunks: nothing is sent
    with pytest.raises(error):
        jobs.enqueue_many(many, given.pop("q"), given.pop("payloads"), **{"chunk": 1, **given})
    assert dump(conn) == before


def test_a_read_only_session_refuses_before_any_write(conn):
    ro = Connection(conn.client, conn.label, read_only=True)
    before = dump(conn)
    with pytest.raises(ReadOnly):
        jobs.enqueue_many(ro, Q, ["{}"])
    assert dump(conn) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["", "soon", "0", "3", "1000", "j_a", "{}", ""],  # a delay that is not whole
        ["", "0", "0", "three", "1000", "j_a", "{}", ""],  # attempts that are not whole
        ["", "0", "0", "3", "1000", "j_a", "{}", "", "j_b", "{}"],  # a job without its dedup slot
    ],
    ids=["delay", "attempts", "broken triple"],
)
def test_the_script_checks_its_whole_chunk_before_the_first_write(conn, many, argv):
    before = dump(conn)
    with pytest.raises(EMQError):
        many.run("enqueue_many", [base(Q)], argv, verb="enqueue_many", queue=Q)
    assert dump(conn) == before


# -- The claims against keys of another type where the queue's own should be, and lanes another node
# named long (the second hostile pass, lua/includes/activate.lua): a flat claim's pending, the ring,
# a lane's meta of another type are refused typed (BadRow 'type', nothing written), where a raw
# WRONGTYPE stopped every claim and killed the Worker; a lane whose backlog is of another type holds
# no job a claim serves and is passed over, as a drain passes it; a lane named over MAX_ID bytes is
# passed over unread (4 lanes of 4 MB held a claim 25.8 ms, bench/hostile_claims.py). On both
# backends and both executors (`script` and `function`).
MAX_ID = 65536


class TestHostileClaims:
    @pytest.fixture
    def conn(self, backend, request, kept_clients):
        return kept_conn(kept_clients, backend, request)

    def test_a_pending_of_another_type_is_refused_typed(self, conn, ex):
        conn.client.set(queue_key(Q, "pending"), "another client's")
        with pytest.raises(BadRow, match="type"):
            jobs.claim(ex, Q, 60_000)
        assert conn.client.get(queue_key(Q, "pending")) == "another client's"

    def test_a_ring_of_another_type_is_refused_typed(self, conn, ex):
        conn.client.set(queue_key(Q, "ring"), "another client's")
        with pytest.raises(BadRow, match="type"):
            lanes.claim(ex, Q, 60_000)

    def test_a_lane_meta_of_another_type_is_refused_typed_nothing_written(self, conn, ex):
        jobs.enqueue(conn, Q, "{}", group="acme")
        conn.client.delete(P + "g:acme:meta")
        conn.client.set(P + "g:acme:meta", "x")
        ring = conn.client.lrange(queue_key(Q, "ring"), 0, -1)
        with pytest.raises(BadRow, match="type"):
            lanes.claim(ex, Q, 60_000)
        assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == ring
        assert conn.client.zcard(P + "g:acme:pending") == 1

    def test_a_lane_backlog_of_another_type_is_passed_over(self, conn, ex):
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

    def test_a_worker_meeting_a_lane_meta_of_another_type_goes_on(self, conn, ex):
        jobs.enqueue(conn, Q, "{}", group="acme")
        conn.client.delete(P + "g:acme:meta")
        conn.client.set(P + "g:acme:meta", "x")
        w = Worker(ex, Q, lambda *a: None, grouped=True, idle_sleep=0)
        assert w.run(until_empty=True) == 0
        assert w.bad_rows == 1

    def test_a_lane_named_over_max_id_is_passed_over_unread(self, conn, ex):
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
    def test_a_head_id_over_max_id_is_dropped_unread(self, conn, ex, grouped):
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
    def test_a_finish_on_a_row_turned_another_type_is_refused_typed(self, conn, ex, how):
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

    def test_a_finish_in_a_lane_whose_meta_turned_another_type_is_refused_typed(self, conn, ex):
        jid = jobs.enqueue(conn, Q, "{}", group="acme")
        assert lanes.claim(ex, Q, 60_000)[0] == jid
        conn.client.delete(P + "g:acme:meta")
        conn.client.set(P + "g:acme:meta", "x")
        with pytest.raises(BadRow, match="type"):
            jobs.complete(ex, Q, jid)
        assert conn.client.zscore(queue_key(Q, "active"), jid) is not None

    def test_a_worker_whose_job_turned_another_type_goes_on(self, conn, ex):
        first = jobs.enqueue(conn, Q, "{}")
        jobs.enqueue(conn, Q, "{}")

        def handler(job_id, payload, attempts):
            if job_id == first:
                conn.client.delete(P + "job:" + job_id)
                conn.client.set(P + "job:" + job_id, "another client's")

        w = Worker(ex, Q, handler, idle_sleep=0)
        assert w.run(until_empty=True) == 2
        assert (w.lost, w.completed) == (1, 1)

    def test_lane_metas_another_node_wrote_long_are_measured_never_copied(self, harm, monkeypatch):
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

    def test_a_head_row_of_long_numbers_is_refused_without_copying_them(self, harm, monkeypatch):
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

    def test_a_finish_in_a_lane_paused_long_never_copies_its_meta(self, harm, monkeypatch):
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


# -- The queue's meta hash as another node may write it long: its `paused` field of 1 MB (any value
# pauses, as the seed reads it) and its `metrics_keep` of 1 MB of digits (no whole number a keep can
# be). The function executor's claims, which fold the pause gate into their one call (EMQ.CLAIM's
# form), ask whether `paused` is there (HEXISTS: their HMGET copied the value at every claim poll);
# every claim, complete and fail measures `metrics_keep` before reading it (HSTRLEN: refused BadRow
# as a bad keep always was, nothing copied). The script executor's gate is the seed's own HGET in
# its own round trip (`admin.is_paused`), kept as the seed has it. On both backends; the bytes
# counted, not timed.
LONG = 1_000_000


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "lane"])
def test_a_long_paused_value_pauses_a_function_claim_never_copied(harm, monkeypatch, grouped):
    conn, srv = harm
    jobs.enqueue(conn, Q, "{}", group="acme" if grouped else None)
    conn.client.hset(queue_key(Q, "meta"), "paused", "y" * LONG)
    assert admin.is_paused(conn, Q)
    ex = conn.with_executor("function")
    # the function executor runs the claim's native twin under the claim's own name
    reads = ScriptReads(ex, srv, monkeypatch, "gclaim2" if grouped else "claim2")
    claim = lanes.claim if grouped else jobs.claim
    got, sent = written_out(conn, srv, lambda: claim(ex, Q, 60_000))
    assert got is None
    if sent is not None:  # a server: the claim's empty answer, not the value
        assert sent < 100_000  # its INFO reply counted too
    assert reads.calls and sum(reads.copied()) < 1_000
    admin.resume(conn, Q)
    assert claim(ex, Q, 60_000) is not None


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_long_metrics_keep_is_refused_as_a_bad_keep_without_copying_it(harm, monkeypatch, executor):
    conn, srv = harm
    jid = jobs.enqueue(conn, Q, "{}")
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "9" * LONG)
    ex = conn.with_executor(executor)
    reads = ScriptReads(ex, srv, monkeypatch, "claim2")
    with pytest.raises(BadRow, match="metrics_keep"):
        jobs.claim(ex, Q, 60_000)
    assert reads.calls and sum(reads.copied()) < 1_000
    assert conn.client.zrange(queue_key(Q, "pending"), 0, -1) == [jid]  # nothing popped
    # a keep an operator mends is read as before
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "60")
    assert jobs.claim(ex, Q, 60_000)[0] == jid
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "9" * LONG)
    reads = ScriptReads(ex, srv, monkeypatch, "complete")
    with pytest.raises(BadRow, match="metrics_keep"):
        jobs.complete(ex, Q, jid)
    assert reads.calls and sum(reads.copied()) < 1_000


# -- The per-job verbs against keys of another type where a job's own should be (the third hostile
# pass): another client wrote a list, a string or a set where the job's row `emq:{q}:job:<id>` (a
# hash) should be, or a string where its `:logs` list should be. Every verb refuses typed (`BadRow`,
# field `type`: a raw WRONGTYPE reached the operator before, a traceback in the magic and no refusal
# a caller catches) and writes nothing; `remove_job` removes the key (jobs.remove_job says why). A
# lane's meta of another type refuses a reprocess or a promote into it the same way. On both
# backends and both executors (`script` and `function`).
# another client's key of each type
OTHER = {
    "list": lambda c, k: c.rpush(k, "another client's"),
    "string": lambda c, k: c.set(k, "another client's"),
    "set": lambda c, k: c.sadd(k, "another client's"),
}


def dead_job(conn, group=None) -> str:
    jid = jobs.enqueue(conn, Q, "{}", group=group, max_attempts=1)
    claim = jobs.claim if group is None else lanes.claim
    assert claim(conn, Q, 60_000)[0] == jid
    jobs.fail(conn, Q, jid, "boom")
    assert conn.client.zscore(queue_key(Q, "dead"), jid) is not None
    return jid


def scheduled_job(conn, group=None) -> str:
    jid = jobs.enqueue(conn, Q, "{}", group=group, delay_ms=3_600_000)
    assert conn.client.zscore(queue_key(Q, "schedule"), jid) is not None
    return jid


def turned(conn, key: str, kind: str) -> None:
    conn.client.delete(key)
    OTHER[kind](conn.client, key)


# each per-job verb: (the job it needs, the call)
VERBS = {
    "reprocess": (dead_job, lambda ex, jid: jobs.reprocess_job(ex, Q, jid)),
    "promote": (scheduled_job, lambda ex, jid: jobs.promote_job(ex, Q, jid)),
    "data": (lambda c: jobs.enqueue(c, Q, "{}"), lambda ex, jid: jobs.update_data(ex, Q, jid, "{}")),
    "progress": (lambda c: jobs.enqueue(c, Q, "{}"), lambda ex, jid: jobs.update_progress(ex, Q, jid, 50)),
    "log": (lambda c: jobs.enqueue(c, Q, "{}"), lambda ex, jid: jobs.add_log(ex, Q, jid, "a line")),
    "logs": (lambda c: jobs.enqueue(c, Q, "{}"), lambda ex, jid: jobs.get_job_logs(ex, Q, jid)),
    "job": (lambda c: jobs.enqueue(c, Q, "{}"), lambda ex, jid: jobs.get_job(ex, Q, jid)),
}


class TestHostileRows:
    @pytest.fixture
    def conn(self, backend, request, kept_clients):
        return kept_conn(kept_clients, backend, request)

    @pytest.mark.parametrize("kind", sorted(OTHER))
    @pytest.mark.parametrize("verb", sorted(VERBS))
    def test_a_row_of_another_type_is_refused_typed_nothing_written(self, conn, ex, verb, kind):
        make, call = VERBS[verb]
        jid = make(conn)
        turned(conn, P + "job:" + jid, kind)
        before = dump(conn)
        with pytest.raises(BadRow, match="type") as refused:
            call(ex, jid)
        assert refused.value.note.startswith("field type in")
        assert dump(conn) == before

    @pytest.mark.parametrize("verb", ["log", "logs"])
    def test_logs_of_another_type_are_refused_typed_nothing_written(self, conn, ex, verb):
        make, call = VERBS[verb]
        jid = make(conn)
        jobs.add_log(conn, Q, jid, "first")
        turned(conn, P + "job:" + jid + ":logs", "string")
        before = dump(conn)
        with pytest.raises(BadRow, match="type") as refused:
            call(ex, jid)
        assert refused.value.note == f"field type in logs {jid}"
        assert dump(conn) == before

    def test_checks_before_the_type_keep_their_refusals(self, conn, ex):
        """A row of another type that is not in dead (or schedule) refuses as before:
        NotDead / NotScheduled come first, as for a hash; a missing row is Gone."""
        from emq_notebook.errors import NotDead, NotScheduled

        jid = jobs.enqueue(conn, Q, "{}")
        turned(conn, P + "job:" + jid, "list")
        with pytest.raises(NotDead):
            jobs.reprocess_job(ex, Q, jid)
        with pytest.raises(NotScheduled):
            jobs.promote_job(ex, Q, jid)
        with pytest.raises(Gone):
            jobs.update_data(ex, Q, "j_none", "{}")

    @pytest.mark.parametrize("how", ["reprocess", "promote"])
    def test_a_move_into_a_lane_whose_meta_is_of_another_type_is_refused_typed(self, conn, ex, how):
        """A grouped dead (or scheduled) job whose lane meta another client turned into a
        string: refused BadRow 'type' naming the lane (a raw WRONGTYPE before), nothing written.
        (The function executor refuses a grouped reprocess before it reads the lane.)"""
        jid = (dead_job if how == "reprocess" else scheduled_job)(conn, group="acme")
        turned(conn, P + "g:acme:meta", "string")
        before = dump(conn)
        if how == "reprocess" and ex.executor == "function":
            from emq_notebook.errors import NotDead

            with pytest.raises(NotDead):
                jobs.reprocess_job(ex, Q, jid)
        else:
            with pytest.raises(BadRow, match="type") as refused:
                (jobs.reprocess_job if how == "reprocess" else jobs.promote_job)(ex, Q, jid)
            assert refused.value.note == "field type in lane acme"
        assert dump(conn) == before

    def test_the_bulk_reprocess_answers_bad_row_for_a_lane_meta_of_another_type(self, conn, ex):
        jid = dead_job(conn, group="acme")
        turned(conn, P + "g:acme:meta", "string")
        before = dump(conn)
        assert admin.reprocess_jobs(ex, Q, [jid], dry_run=True) == {jid: "bad_row"}
        assert admin.reprocess_jobs(ex, Q, [jid]) == {jid: "bad_row"}
        assert dump(conn) == before

    def test_the_due_promotion_passes_over_a_lane_meta_of_another_type(self, conn, ex):
        """The Worker's housekeeping (jobs.promote, every poll) meeting a due grouped job whose
        lane meta another client turned into a string: the job stays where it is, said as a
        bad row, and the promotion goes on (a raw WRONGTYPE stopped it, and the Worker with it)."""
        from emq_notebook import Worker

        jid = jobs.enqueue(conn, Q, "{}", group="acme", delay_ms=1)
        turned(conn, P + "g:acme:meta", "string")
        due = conn.client.zscore(queue_key(Q, "schedule"), jid)
        conn.client.zadd(queue_key(Q, "schedule"), {jid: due - 10})
        assert jobs.promote(ex, Q) == 0
        assert conn.client.zscore(queue_key(Q, "schedule"), jid) is not None
        assert conn.client.get(P + "g:acme:meta") == "another client's"
        w = Worker(ex, Q, lambda *a: None, idle_sleep=0)
        assert w.run(until_empty=True) == 0

    @pytest.mark.parametrize("kind", sorted(OTHER))
    def test_the_bulk_reprocess_answers_bad_row_for_a_row_of_another_type(self, conn, ex, kind):
        jid = dead_job(conn)
        turned(conn, P + "job:" + jid, kind)
        before = dump(conn)
        assert admin.reprocess_jobs(ex, Q, [jid], dry_run=True) == {jid: "bad_row"}
        assert admin.reprocess_jobs(ex, Q, [jid]) == {jid: "bad_row"}
        assert dump(conn) == before

    @pytest.mark.parametrize("kind", sorted(OTHER))
    def test_remove_job_removes_a_row_of_another_type(self, conn, ex, kind):
        """The one verb that clears a row no other can read: the key is the job's, under the
        queue's own keyspace, and the operator named it (jobs.remove_job)."""
        jid = dead_job(conn)
        turned(conn, P + "job:" + jid, kind)
        jobs.remove_job(ex, Q, jid)
        assert conn.client.exists(P + "job:" + jid) == 0
        assert conn.client.zscore(queue_key(Q, "dead"), jid) is None
        with pytest.raises(Gone):
            jobs.remove_job(ex, Q, jid)

    def test_remove_job_leaves_a_locked_row_of_another_type(self, conn, ex):
        jid = jobs.enqueue(conn, Q, "{}")
        turned(conn, P + "job:" + jid, "list")
        conn.client.set(P + "job:" + jid + ":lock", "w1")
        before = dump(conn)
        from emq_notebook.errors import Locked

        with pytest.raises(Locked):
            jobs.remove_job(ex, Q, jid)
        assert dump(conn) == before

    # -- a lane's meta another node wrote long (the measured reading, reads.lua) ------------

    @pytest.mark.parametrize("how", ["promote_job", "reprocess2", "reprocess_jobs", "reprocess_jobs_check"])
    def test_a_move_into_a_lane_paused_long_never_copies_its_meta(self, harm, monkeypatch, how):
        """Another node paused a lane writing 1 MB there: a promote or a reprocess into it (one
        job, the bulk move and its dry run) measures the meta's fields and only asks whether
        `paused` is there (reads.lua `measured_lane_counts`); each copied it whole before
        (`lane_counts`' HMGET), as the claims did (16 MB: 53 ms a complete). The job lands in
        its lane, the paused lane stays off the ring."""
        from harm import ScriptReads

        conn, _srv = harm
        jid = (scheduled_job if how == "promote_job" else dead_job)(conn, group="acme")
        conn.client.hset(P + "g:acme:meta", "paused", "y" * 1_000_000)
        reads = ScriptReads(conn, _srv, monkeypatch, how)
        if how == "promote_job":
            jobs.promote_job(conn, Q, jid)
        elif how == "reprocess2":
            jobs.reprocess_job(conn, Q, jid)
        else:
            answer = "reprocessed"
            assert admin.reprocess_jobs(conn, Q, [jid], dry_run=how.endswith("check")) == {jid: answer}
        assert reads.copied() and sum(reads.copied()) < 1_000
        if how != "reprocess_jobs_check":
            assert conn.client.zscore(P + "g:acme:pending", jid) is not None
            assert conn.client.lrange(queue_key(Q, "ring"), 0, -1) == []
        assert conn.client.hstrlen(P + "g:acme:meta", "paused") == 1_000_000

    @pytest.mark.parametrize("field", ["limit", "active"])
    def test_a_promote_into_a_lane_of_a_long_count_is_refused_as_before_never_copying_it(
        self, harm, monkeypatch, field
    ):
        """A lane meta's `limit` or `active` another node wrote 1 MB long: the promote refuses
        BadRow naming the field, as before, having measured it (HSTRLEN), not copied it."""
        from harm import ScriptReads

        conn, _srv = harm
        jid = scheduled_job(conn, group="acme")
        conn.client.hset(P + "g:acme:meta", field, "7" * 1_000_000)
        before = dump(conn)
        reads = ScriptReads(conn, _srv, monkeypatch, "promote_job")
        with pytest.raises(BadRow) as refused:
            jobs.promote_job(conn, Q, jid)
        assert refused.value.note == f"field {field} in lane acme"
        assert reads.copied() and sum(reads.copied()) < 1_000
        assert dump(conn) == before


# -- The metrics and latency trims against what another node wrote into them (the second hostile
# pass, lua/includes/metrics.lua and latency.lua), on both backends: names that read as numbers past
# any minute never make a claim trim the count it just made, nor the latency it just recorded; a
# trim reads a bounded number of bytes of names a call (a metrics hash of 4,000 names of 10 KB held
# a claim 659 ms, a latency index of 600 minutes of 100 KB 279 ms: bench/hostile_claims.py). Work is
# observed as what a claim deleted, never timed; the fake measures no key (MEMORY USAGE), so its
# hash of long names is still read by name whole, and only Valkey's trim is held to the bytes there.
Q_trims = "mailers"
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
    conn.client.hset(queue_key(Q_trims, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    conn.client.hset(
        metrics_key(Q_trims, "claimed"), mapping={"9" * 20 + f"{i:03d}": "1" for i in range(100)}
    )
    claim_new(conn, Q_trims)
    kept = conn.client.hgetall(metrics_key(Q_trims, "claimed"))
    mine = current(kept, now)
    assert len(mine) == 1 and kept[mine.pop()] == "1"
    assert len(kept) == 5


def test_a_metrics_hash_of_long_names_is_trimmed_within_its_bytes_on_valkey(conn, backend):
    """300 names of 10 KB (3 MB): Valkey measures the hash over TRIM_BYTES and samples
    names a call within about TRIM_BYTES of them (it read and deleted all 296 before);
    the fake measures no key and trims exactly, as before. The claim's bucket stays."""
    conn.client.hset(queue_key(Q_trims, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    size = 10_000
    pipe = conn.client.pipeline(transaction=False)
    for i in range(300):
        pipe.hset(metrics_key(Q_trims, "claimed"), f"{i:04d}" + "x" * size, "1")
    pipe.execute()
    claim_new(conn, Q_trims)
    kept = conn.client.hkeys(metrics_key(Q_trims, "claimed"))
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
    conn.client.hset(queue_key(Q_trims, "meta"), "metrics_keep", "5")
    index = f"{base(Q_trims)}lat:minutes"
    size = 20_000
    conn.client.zadd(index, {f"{i:03d}" + "m" * size: i for i in range(50)})
    claim_new(conn, Q_trims)
    left = conn.client.zrange(index, 0, -1)
    per_call = -(-TRIM_BYTES // ((size + 3) * ID_WORK))
    assert 51 - per_call == len(left)
    assert left[0].startswith(f"{per_call:03d}")


def test_minutes_another_node_scored_later_never_trim_the_latency_just_recorded(conn):
    """20 members scored past any minute: the minute the claim recorded ranked first and
    its latency hash was deleted at once. Now the trim stops at it."""
    conn.client.hset(queue_key(Q_trims, "meta"), "metrics_keep", "5")
    index = f"{base(Q_trims)}lat:minutes"
    conn.client.zadd(index, {f"f{i}": 10**15 + i for i in range(20)})
    now = minute_now(conn)
    claim_new(conn, Q_trims)
    recorded = [m for m in conn.client.zrange(index, 0, -1) if not m.startswith("f")]
    assert len(recorded) == 1 and int(recorded[0]) in (now, now + 1)
    assert conn.client.exists(f"{base(Q_trims)}lat:wait:{recorded[0]}")
    assert conn.client.zcard(index) == 21


# -- The throughput record and the latency index are trimmed a bounded number of buckets a call
# (lua/includes/metrics.lua `bump_metric`, lua/includes/latency.lua), on both backends: a claim that
# opens a new minute trims a hash of a few buckets past its keep exactly, the oldest first, as
# before; a hash or an index far past its keep (keep lowered, buckets another node wrote) loses a
# bounded number a call (one trim of 100,000 buckets past keep held a claim 454 ms), never its
# current minute.
Q_metrics_trim = "mailers"
BOUNDS = re.search(r"TRIM_EXACT, TRIM_MOST, TRIM_SAMPLE = (\d+), (\d+), (\d+)", scripts.source("claim2"))
EXACT, MOST_metrics_trim, SAMPLE = map(int, BOUNDS.groups())


def test_a_few_buckets_past_keep_are_trimmed_exactly_oldest_first(conn):
    conn.client.hset(queue_key(Q_metrics_trim, "meta"), "metrics_keep", "5")
    now = minute_now(conn)
    old = {str(now - 100 - i): "1" for i in range(7)} | {"by hand": "x"}
    conn.client.hset(metrics_key(Q_metrics_trim, "claimed"), mapping=old)
    claim_new(conn, Q_metrics_trim)
    kept = set(conn.client.hkeys(metrics_key(Q_metrics_trim, "claimed")))
    # the 8 written and the current minute's: the one by hand and the 3 oldest go
    current = {k for k in kept if int(k) >= now}
    assert len(current) == 1 and kept - current == {str(now - 100 - i) for i in range(4)}


def test_a_hash_far_past_keep_loses_a_bounded_sample_a_call(conn):
    now = minute_now(conn)
    stale = {str(now - 2000 - i): "1" for i in range(EXACT + 1000)}
    pipe = conn.client.pipeline(transaction=False)
    for start in range(0, len(stale), 1000):
        pipe.hset(
            metrics_key(Q_metrics_trim, "claimed"), mapping=dict(list(stale.items())[start : start + 1000])
        )
    pipe.execute()
    claim_new(conn, Q_metrics_trim)
    left = conn.client.hlen(metrics_key(Q_metrics_trim, "claimed"))
    # the current minute's bucket is new; at most a sample of the stale ones went
    assert len(stale) + 1 - SAMPLE <= left < len(stale) + 1
    assert {k for k in conn.client.hkeys(metrics_key(Q_metrics_trim, "claimed")) if int(k) >= now}


def test_a_latency_index_far_past_keep_loses_its_oldest_a_bounded_number_a_call(conn):
    conn.client.hset(queue_key(Q_metrics_trim, "meta"), "metrics_keep", "10")
    now = minute_now(conn)
    index = f"{base(Q_metrics_trim)}lat:minutes"
    minutes = {str(now - 5000 + i): now - 5000 + i for i in range(MOST_metrics_trim + 300)}
    conn.client.zadd(index, minutes)
    conn.client.hset(f"{base(Q_metrics_trim)}lat:wait:{now - 5000}", "3", "1")
    claim_new(conn, Q_metrics_trim)
    left = conn.client.zcard(index)
    assert left == len(minutes) + 1 - MOST_metrics_trim
    assert not conn.client.exists(f"{base(Q_metrics_trim)}lat:wait:{now - 5000}")
    assert conn.client.zrange(index, 0, 0) == [str(now - 5000 + MOST_metrics_trim)]


# -- Job scope on both backends and a local Valkey Cluster: each per-job verb succeeds, and each
# refusal is typed and leaves the whole keyspace byte-identical.


def dead_job_job_verbs(conn, q=Q, group=None, payload="x"):
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


class TestJobVerbs:
    @pytest.fixture(params=WITH_CLUSTER)
    def backend(self, request):
        return request.param

    @pytest.mark.parametrize("name,call", MISSING, ids=[m[0] for m in MISSING])
    def test_a_missing_row_refuses_gone_and_writes_nothing(self, conn, name, call):
        jobs.enqueue(conn, Q, "other")
        before = dump(conn)
        with pytest.raises(Gone) as info:
            call(conn)
        assert info.value.reason == "gone" and info.value.job == "j_none"
        assert dump(conn) == before  # no stray :logs list, no row

    def test_update_data_replaces_the_payload(self, conn):
        jid = jobs.enqueue(conn, Q, '{"to": "typo"}')
        jobs.update_data(conn, Q, jid, '{"to": "fixed"}')
        row = jobs.get_job(conn, Q, jid)
        assert row["payload"] == '{"to": "fixed"}' and row["state"] == "pending"

    def test_update_progress_writes_and_publishes(self, conn):
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

    def test_logs_append_in_order_and_trim(self, conn):
        jid = jobs.enqueue(conn, Q, "x")
        assert jobs.get_job_logs(conn, Q, jid) == []
        assert [jobs.add_log(conn, Q, jid, f"l{i}") for i in range(3)] == [1, 2, 3]
        assert jobs.get_job_logs(conn, Q, jid) == ["l0", "l1", "l2"]
        assert jobs.add_log(conn, Q, jid, "l3", keep=2) == 2
        assert jobs.get_job_logs(conn, Q, jid) == ["l2", "l3"]

    @pytest.mark.parametrize("where", ["pending", "schedule", "dead"])
    def test_remove_job_from_any_set(self, conn, where):
        if where == "dead":
            jid = dead_job_job_verbs(conn)
        else:
            jid = jobs.enqueue(conn, Q, "x", delay_ms=60_000 if where == "schedule" else 0, dedup="k1")
        jobs.add_log(conn, Q, jid, "line")
        jobs.remove_job(conn, Q, jid, dedup="k1")
        assert [k for k in dump(conn) if ":job:" in k or k.endswith(":" + where)] == []
        assert not conn.client.hexists(f"emq:{{{Q}}}:dedup", "k1")

    def test_remove_refuses_a_locked_job_untouched(self, conn):
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

    def test_removing_an_in_flight_grouped_job_gives_its_slot_back(self, conn):
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

    def test_reprocess_moves_dead_to_pending_and_keeps_counters(self, conn):
        jid = dead_job_job_verbs(conn)
        conn.client.hset(f"emq:{{{Q}}}:job:{jid}", "stalled", "2")
        jobs.reprocess_job(conn, Q, jid)
        row = jobs.get_job(conn, Q, jid)
        assert row["state"] == "pending" and "last_error" not in row
        assert (row["attempts"], row["failures"], row["stalled"]) == ("1", "1", "2")
        assert conn.client.zscore(f"emq:{{{Q}}}:pending", jid) == 0
        assert conn.client.zscore(f"emq:{{{Q}}}:dead", jid) is None

    def test_reprocess_refuses_a_job_not_dead(self, conn):
        jid = jobs.enqueue(conn, Q, "x")
        before = dump(conn)
        with pytest.raises(NotDead) as info:
            jobs.reprocess_job(conn, Q, jid)
        assert info.value.reason == "not_dead"
        assert str(info.value) == f"refused: reprocess {Q} {jid} — not_dead"
        assert dump(conn) == before

    def test_reprocess_on_a_paused_queue_waits_in_pending(self, conn):
        jid = dead_job_job_verbs(conn)
        admin.pause(conn, Q)
        jobs.reprocess_job(conn, Q, jid)
        assert conn.client.zscore(f"emq:{{{Q}}}:pending", jid) == 0
        assert jobs.claim(conn, Q, 1000) is None
        admin.resume(conn, Q)
        assert jobs.claim(conn, Q, 1000)[0] == jid

    def test_reprocess_returns_a_grouped_job_to_its_lane_and_the_ring(self, conn):
        jid = dead_job_job_verbs(conn, group="acme")
        assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == []
        wake_before = conn.client.llen(f"emq:{{{Q}}}:wake")
        jobs.reprocess_job(conn, Q, jid)
        assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
        assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0
        assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == ["acme"]
        assert conn.client.llen(f"emq:{{{Q}}}:wake") == wake_before + 1
        assert lanes.claim(conn, Q, 1000)[0] == jid

    def test_reprocess_to_a_paused_lane_does_not_join_the_ring(self, conn):
        jid = dead_job_job_verbs(conn, group="acme")
        lanes.pause_lane(conn, Q, "acme")
        jobs.reprocess_job(conn, Q, jid)
        assert conn.client.lrange(f"emq:{{{Q}}}:ring", 0, -1) == []
        lanes.resume_lane(conn, Q, "acme")
        assert lanes.claim(conn, Q, 1000)[0] == jid


# -- Latency kept on the server: every claim writes `claimed_at`, counts itself and records its
# wait; complete and fail record the run; the histograms keep the metrics retention and go with
# obliterate. Both backends, both executors.
Q_latency = "lat"
P_latency = f"emq:{{{Q_latency}}}:"
EXECUTORS = ("script", "function")


def samples(conn, kind: str) -> dict[str, int]:
    """bucket -> count over every minute of the `kind` histograms."""
    out: dict[str, int] = {}
    for m in conn.client.zrange(P_latency + "lat:minutes", 0, -1):
        for b, n in conn.client.hgetall(P_latency + f"lat:{kind}:{m}").items():
            out[b] = out.get(b, 0) + int(n)
    return out


def bucket_of(ms: int) -> int:
    """The bucket the scripts put `ms` in: 0 for 0 ms, else 1 + floor(log_1.1 ms)."""
    import math

    return 0 if ms < 1 else math.floor(math.log(ms) / math.log(1.1)) + 1


class TestLatency:
    @pytest.fixture(params=EXECUTORS)
    def ex(self, request, conn, connect_as):
        return connect_as(request.param)

    @pytest.mark.parametrize("group", (None, "acme"))
    def test_claim_writes_claimed_at_counts_and_records_the_wait(self, conn, ex, group):
        jobs.enqueue(conn, Q_latency, "x", id="j_1", group=group)
        created = int(conn.client.hget(P_latency + "job:j_1", "created_at"))
        time.sleep(0.03)
        got = (lanes.claim if group else jobs.claim)(ex, Q_latency, 60_000)
        claimed = int(conn.client.hget(P_latency + "job:j_1", "claimed_at"))
        assert got.id == "j_1" and claimed - created >= 30
        assert sum(int(v) for v in conn.client.hvals(P_latency + "metrics:claimed")) == 1
        assert samples(conn, "wait") == {str(bucket_of(claimed - created)): 1}
        time.sleep(0.02)
        jobs.complete(ex, Q_latency, "j_1")
        (run,) = samples(conn, "run").items()
        assert run[1] == 1 and 1.1 ** (int(run[0]) - 1) >= 20 * 0.9

    def test_fail_records_the_run_and_a_retry_waits_from_its_due_time(self, conn, ex):
        jobs.enqueue(conn, Q_latency, "x", id="j_1", backoff_ms=50)
        jobs.claim(ex, Q_latency, 60_000)
        assert jobs.fail(ex, Q_latency, "j_1", "boom") == "retry"
        row = conn.client.hgetall(P_latency + "job:j_1")
        assert int(row["due_at"]) == conn.client.zscore(P_latency + "schedule", "j_1")
        assert sum(samples(conn, "run").values()) == 1
        time.sleep(0.08)
        assert jobs.promote(ex, Q_latency) == 1
        jobs.claim(ex, Q_latency, 60_000)
        claimed = int(conn.client.hget(P_latency + "job:j_1", "claimed_at"))
        # the second wait runs from the due time, not from the job's creation
        wait = claimed - int(row["due_at"])
        assert samples(conn, "wait")[str(bucket_of(wait))] >= 1
        assert sum(samples(conn, "wait").values()) == 2

    def test_a_delayed_job_waits_from_its_due_time(self, conn, ex):
        jobs.enqueue(conn, Q_latency, "x", id="j_1", delay_ms=40)
        row = conn.client.hgetall(P_latency + "job:j_1")
        assert int(row["due_at"]) == int(row["created_at"]) + 40
        time.sleep(0.06)
        jobs.promote(ex, Q_latency)
        jobs.claim(ex, Q_latency, 60_000)
        claimed = int(conn.client.hget(P_latency + "job:j_1", "claimed_at"))
        assert samples(conn, "wait") == {str(bucket_of(claimed - int(row["due_at"]))): 1}

    @pytest.mark.parametrize("group", (None, "acme"))
    def test_a_bad_metrics_keep_refuses_a_claim_before_any_write(self, conn, ex, group):
        jobs.enqueue(conn, Q_latency, "x", id="j_1", group=group)
        conn.client.hset(P_latency + "meta", "metrics_keep", "a day")
        before = dump(conn)
        with pytest.raises(BadRow, match="metrics_keep in meta"):
            (lanes.claim if group else jobs.claim)(ex, Q_latency, 60_000)
        assert dump(conn) == before

    def test_a_row_with_unreadable_times_is_served_unmeasured(self, conn, ex):
        """Another node's row may carry no `created_at`, or a bad one: the claim and the
        complete go through, counted, with no sample where there is nothing to measure."""
        jobs.enqueue(conn, Q_latency, "x", id="j_1")
        jobs.enqueue(conn, Q_latency, "y", id="j_2")
        conn.client.hset(P_latency + "job:j_1", "created_at", "yesterday")
        conn.client.hdel(P_latency + "job:j_2", "created_at")
        assert jobs.claim(ex, Q_latency, 60_000).id == "j_1"
        assert jobs.claim(ex, Q_latency, 60_000).id == "j_2"
        assert samples(conn, "wait") == {}
        assert sum(int(v) for v in conn.client.hvals(P_latency + "metrics:claimed")) == 2
        conn.client.hset(P_latency + "job:j_1", "claimed_at", "soon")
        jobs.complete(ex, Q_latency, "j_1")
        jobs.complete(ex, Q_latency, "j_2")
        assert sum(samples(conn, "run").values()) == 1

    def test_the_histograms_keep_the_metrics_retention(self, conn, ex):
        """Past `metrics_keep` minutes, the oldest minutes' hashes go (and leave the index)."""
        now_minute = int(conn.client.time()[0]) // 60
        old = [now_minute - 10 + i for i in range(5)]
        for m in old:
            conn.client.zadd(P_latency + "lat:minutes", {str(m): m})
            conn.client.hset(P_latency + f"lat:wait:{m}", "40", 1)
            conn.client.hset(P_latency + f"lat:run:{m}", "40", 1)
            conn.client.hset(P_latency + "metrics:claimed", str(m), 1)
        conn.client.hset(P_latency + "meta", "metrics_keep", 3)
        jobs.enqueue(conn, Q_latency, "x", id="j_1")
        jobs.claim(ex, Q_latency, 60_000)
        claim_minute = int(conn.client.hget(P_latency + "job:j_1", "claimed_at")) // 60_000
        kept = [int(m) for m in conn.client.zrange(P_latency + "lat:minutes", 0, -1)]
        assert kept == [old[3], old[4], claim_minute]
        for m in old[:3]:
            assert not conn.client.exists(P_latency + f"lat:wait:{m}", P_latency + f"lat:run:{m}")
        assert conn.client.hlen(P_latency + "metrics:claimed") == 3

    def test_obliterate_leaves_no_histogram_behind(self, conn, ex):
        for i in range(5):
            jobs.enqueue(conn, Q_latency, str(i), id=f"j_{i}", group="acme" if i % 2 else None)
        for _ in range(3):
            got = jobs.claim(ex, Q_latency, 60_000) or lanes.claim(ex, Q_latency, 60_000)
            jobs.complete(ex, Q_latency, got.id)
        assert conn.client.exists(P_latency + "lat:minutes", P_latency + "metrics:claimed") == 2
        admin.pause(ex, Q_latency)
        admin.obliterate_all(ex, Q_latency, force=True, budget=2)
        assert keys_of(conn, Q_latency) == []

    def test_a_damaged_histogram_never_fails_a_transition(self, conn, ex):
        """The recording runs after a transition's writes: a histogram key of another type,
        or a bucket holding no count, is met quietly and the transition still happens whole."""
        jobs.enqueue(conn, Q_latency, "x", id="j_1")
        jobs.enqueue(conn, Q_latency, "y", id="j_2")
        minute = int(conn.client.time()[0]) // 60
        for m in (minute, minute + 1):  # the claim may fall in the next minute
            conn.client.set(P_latency + f"lat:wait:{m}", "not a hash")
            conn.client.hset(P_latency + f"lat:run:{m}", mapping={str(b): "lots" for b in range(80)})
        assert jobs.claim(ex, Q_latency, 60_000).id == "j_1"
        jobs.complete(ex, Q_latency, "j_1")
        assert (
            conn.client.get(P_latency + f"lat:wait:{minute}") == "not a hash"
            or conn.client.get(P_latency + f"lat:wait:{minute + 1}") == "not a hash"
        )
        runs = [conn.client.hgetall(P_latency + f"lat:run:{m}") for m in (minute, minute + 1)]
        assert sum(1 for h in runs for v in h.values() if v == "1") == 1  # restarted at 1
        conn.client.delete(P_latency + "lat:minutes")
        conn.client.set(P_latency + "lat:minutes", "not a zset")
        assert jobs.claim(ex, Q_latency, 60_000).id == "j_2"
        jobs.fail(ex, Q_latency, "j_2", "boom")
        assert conn.client.zscore(P_latency + "schedule", "j_2") is not None


# -- Do no harm, one field whole: no read copies a job row's field over `defaults.MAX_WHOLE_FIELD`
# (it shows as `decoding.not_read`, its length, its bytes left on the server), nor a whole row of
# many fields in one call. `get_job` (and `%emq job`, the job panel) reads a row through
# `@read_job`, about a byte budget a call, each field's length before its bytes; a snapshot's
# payload too large for `@read_rows` is read the same way (`jobs.whole_field`). Both backends, under
# the harness's watchdog (tests/harm.py); the bound is made 2 MiB here so a field of twice it stays
# small. Work is observed in the replies, the plain commands sent and (on Valkey) the bytes the
# server wrote, never timed.
Q_whole_field = "whole"
P_whole_field = f"emq:{{{Q_whole_field}}}:"
BOUND_whole_field = 2 << 20
OVER = 2 * BOUND_whole_field  # a field of twice the bound: never read
BETWEEN = BOUND_whole_field - 1000  # over a call's byte budget, within the bound: one plain HGET


@pytest.fixture
def _small_bound(monkeypatch):
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", BOUND_whole_field)


def plain(conn) -> list[tuple]:
    """Every plain command `conn` sends from now on (its parts), as it goes."""
    seen: list[tuple] = []
    real = conn.command

    def command(*parts: Any) -> Any:
        seen.append(parts)
        return real(*parts)

    conn.command = command
    return seen


def script_bytes(reply: list) -> int:
    return sum(len(v) for v in reply if isinstance(v, str))


@pytest.mark.usefixtures("_small_bound")
def test_the_bound_reads_every_payload_the_toolkit_writes():
    assert MAX_WHOLE_FIELD >= 2 * MAX_PAYLOAD and MAX_WHOLE_FIELD > BYTE_BUDGET


@pytest.mark.usefixtures("_small_bound")
def test_a_field_over_the_bound_shows_its_length_and_its_bytes_never_cross_the_wire(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, '{"n": 1}')
    conn.client.hset(
        P_whole_field + "job:" + job_id, mapping={"last_error": "e" * OVER, "progress": "p" * BETWEEN}
    )
    calls, commands = replies(conn, "read_job"), plain(conn)
    row, out = written_out(
        conn, srv, lambda: bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    )
    assert row["last_error"] == decoding.not_read(OVER) == f"<{OVER:,} bytes: over MAX_WHOLE_FIELD, not read>"
    assert isinstance(row["last_error"], decoding.NotRead)
    assert row["progress"] == "p" * BETWEEN and row["payload"] == '{"n": 1}' and row["state"] == "pending"
    # the script answered both long fields by their lengths; one plain HGET read the one
    # within the bound, none the one over it
    assert all(script_bytes(reply) <= BYTE_BUDGET for reply in calls)
    assert [p[2] for p in commands if p[0] == "HGET"] == ["progress"]
    assert not [p for p in commands if p[0] in ("HGETALL", "HVALS")]
    if out is not None:  # Valkey wrote about the field read, not the one left
        assert BETWEEN < out < BETWEEN + 100_000
    # the dict keeps every field of the row (a row of 6 MB is read by the job's own names)
    assert set(row) == set(conn.client.hkeys(P_whole_field + "job:" + job_id))


@pytest.mark.usefixtures("_small_bound")
def test_a_payload_the_toolkit_wrote_reads_whole_under_the_bound(harm, monkeypatch):
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", MAX_WHOLE_FIELD)
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, "x" * MAX_PAYLOAD)
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    assert row["payload"] == "x" * MAX_PAYLOAD


@pytest.mark.usefixtures("_small_bound")
def test_a_row_of_many_fields_is_read_by_its_job_fields_not_whole(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, '{"n": 2}')
    key = P_whole_field + "job:" + job_id
    pipe = conn.client.pipeline(transaction=False)
    for start in range(0, 50_000, 5_000):
        pipe.hset(key, mapping={f"f{i:05d}": "v" for i in range(start, start + 5_000)})
    pipe.execute()
    calls = replies(conn, "read_job")
    counted = sent(
        conn, srv, lambda: bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    )
    row = jobs.get_job(conn, Q_whole_field, job_id)
    fields = conn.client.hlen(key)
    assert row[jobs.OTHER_FIELDS] == (
        f"<{fields:,} fields: over ROW_FIELDS ({jobs.ROW_FIELDS:,}), only the job's own read>"
    )
    assert row["payload"] == '{"n": 2}' and row["state"] == "pending" and "f00001" not in row
    # no call listed the row: its count alone, then the job's own fields by name
    assert [len(reply) for reply in calls[:2]] == [1, 1 + 2 * len(jobs.JOB_FIELDS)]
    assert not {"hgetall", "hkeys", "hvals", "hscan"} & set(counted)


@pytest.mark.usefixtures("_small_bound")
def test_a_row_of_up_to_row_fields_within_a_byte_budget_is_listed_in_one_call(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, "{}")
    key = P_whole_field + "job:" + job_id
    conn.client.hset(key, mapping={f"f{i:04d}": f"{i:04d}" * 100 for i in range(jobs.ROW_FIELDS - 20)})
    calls, commands = replies(conn, "read_job"), plain(conn)
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    assert not commands
    if srv is None:  # no MEMORY USAGE: the job's own fields, the rest counted
        assert row[jobs.OTHER_FIELDS] == (
            f"<{conn.client.hlen(key):,} fields: not measured within BYTE_BUDGET "
            f"({BYTE_BUDGET:,} bytes), only the job's own read>"
        )
        assert row["payload"] == "{}" and "f0001" not in row and len(calls) == 2
        return
    # 390 KB of fields: one call lists and reads them all
    assert row == conn.client.hgetall(key) and jobs.OTHER_FIELDS not in row
    assert len(calls) == 1 and len(calls[0]) == 1 + 2 * len(row)


def names_sent(calls: list) -> int:
    """The longest text a `@read_job` reply held (a name or a value)."""
    return max((len(v) for reply in calls for v in reply if isinstance(v, str)), default=0)


@pytest.mark.usefixtures("_small_bound")
@pytest.mark.parametrize(
    "names",
    [
        pytest.param({b"N" * (4 * BYTE_BUDGET): "v"}, id="one-name-of-4-budgets"),
        pytest.param({(b"%04d" % i) + b"n" * 4096: "v" for i in range(600)}, id="600-names-of-4KB"),
    ],
)
def test_a_row_of_long_field_names_is_read_by_its_job_fields_never_listed(harm, names):
    """No command gives a name's length: a row whose names and values measure over a byte
    budget (one MEMORY USAGE) is read by the job's own names, its names never copied nor
    sent back; the same on the fake and for a user the ACL denies MEMORY."""
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, '{"n": 3}')
    key = P_whole_field + "job:" + job_id
    conn.client.hset(key, mapping=names)
    fields = conn.client.hlen(key)
    calls, commands = replies(conn, "read_job"), plain(conn)
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    assert row["payload"] == '{"n": 3}' and row["state"] == "pending"
    assert row[jobs.OTHER_FIELDS] == (
        f"<{fields:,} fields: not measured within BYTE_BUDGET ({BYTE_BUDGET:,} bytes), "
        "only the job's own read>"
    )
    assert max(map(len, row)) < 100 and names_sent(calls) < 100 and not commands
    assert [len(reply) for reply in calls] == [1, 1 + 2 * len(jobs.JOB_FIELDS)]
    if srv is None:
        return
    counted = sent(conn, srv, lambda: jobs.get_job(conn, Q_whole_field, job_id))
    assert counted["memory|usage"] == 1 and not {"hgetall", "hkeys", "hvals", "hscan"} & set(counted)
    conn.client.acl_setuser(
        "nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-memory"]
    )
    denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
    assert bounded(lambda: jobs.get_job(denied, Q_whole_field, job_id), srv, what="get_job") == row


@pytest.mark.usefixtures("_small_bound")
def test_an_ordinary_row_of_other_fields_is_listed_on_valkey_and_counted_without_memory(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, "{}")
    key = P_whole_field + "job:" + job_id
    conn.client.hset(key, mapping={"tenant": "acme", "trace": "t-1"})
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    if srv is None:
        assert "tenant" not in row and row[jobs.OTHER_FIELDS].startswith(f"<{conn.client.hlen(key)} fields")
        return
    assert row == conn.client.hgetall(key) and list(row) == list(conn.client.hkeys(key))
    conn.client.acl_setuser(
        "nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-memory"]
    )
    denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
    assert "tenant" not in jobs.get_job(denied, Q_whole_field, job_id)


@pytest.mark.usefixtures("_small_bound")
def test_a_long_name_is_never_sent_back_to_the_server(harm, monkeypatch):
    """A field named over SHORT_NAME whose value a call left unread (a row measured
    within the budget: only where the budget is spent on the job's own fields first) is
    shown by its length, not asked again by its name."""
    monkeypatch.setattr(jobs, "SHORT_NAME", 8)
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, "{}")
    row = {"payload": "{}", "a_long_name": 70, "state": 7}
    monkeypatch.setattr(
        jobs,
        "_read_job",
        lambda *a: (
            pytest.fail(f"a read by name: {a[3]}") if "a_long_name" in a[3] else (3, {"state": "pending"})
        ),
    )
    got = jobs._whole_fields(conn, Q_whole_field, job_id, P_whole_field + "job:" + job_id, row)
    assert got == {"payload": "{}", "a_long_name": decoding.not_read(70, "SHORT_NAME"), "state": "pending"}


@pytest.mark.usefixtures("_small_bound")
def test_fields_and_names_that_are_not_utf8_read_back_byte_for_byte(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q_whole_field, "{}")
    key = P_whole_field + "job:" + job_id
    conn.client.hset(key, mapping={b"\xff\xfename": b"\xfe\xffvalue"})
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    if srv is not None:  # listed (no MEMORY USAGE on the fake: the job's own fields)
        assert row["\udcff\udcfename"] == "\udcfe\udcffvalue"
    conn.client.hset(key, mapping={"progress": b"\xfe" * BETWEEN, "last_error": b"\xff" * OVER})
    row = bounded(lambda: jobs.get_job(conn, Q_whole_field, job_id), srv, what="get_job")
    assert decoding.wire(row["progress"]) == b"\xfe" * BETWEEN
    assert row["last_error"] == decoding.not_read(OVER)


@pytest.mark.usefixtures("_small_bound")
def test_a_missing_row_is_gone_and_a_field_gone_meanwhile_is_left_out(harm):
    conn, srv = harm
    with pytest.raises(Gone):
        jobs.get_job(conn, Q_whole_field, "j_none")
    assert jobs.whole_field(conn, Q_whole_field, "j_none", "payload") is None
    job_id = jobs.enqueue(conn, Q_whole_field, "{}")
    conn.client.hset(P_whole_field + "job:" + job_id, "progress", "p" * BETWEEN)
    real = conn.command

    def command(*parts: Any) -> Any:
        conn.client.hdel(P_whole_field + "job:" + job_id, "progress")  # another node, between the two reads
        return real(*parts)

    conn.command = command
    assert "progress" not in jobs.get_job(conn, Q_whole_field, job_id)


# -- the snapshot, find, %emq job, the job panel -----------------------------------------


def dead_with_payload(conn, body: str) -> str:
    job_id = jobs.enqueue(conn, Q_whole_field, "{}", max_attempts=1)
    jobs.claim(conn, Q_whole_field)
    jobs.fail(conn, Q_whole_field, job_id, "boom")
    conn.client.hset(P_whole_field + "job:" + job_id, "payload", body)
    return job_id


@pytest.mark.usefixtures("_small_bound")
def test_the_snapshot_shows_a_payload_over_the_bound_as_its_length(harm):
    conn, srv = harm
    big = dead_with_payload(conn, "needle" + "y" * OVER)
    near = dead_with_payload(conn, "z" * BETWEEN)
    commands = plain(conn)
    frame, out = written_out(
        conn,
        srv,
        lambda: bounded(lambda: frames.snapshot(conn, Q_whole_field, states="dead"), srv, what="snapshot"),
    )
    assert frame.loc[big, "payload"] == decoding.not_read(OVER + 6)
    assert frame.loc[near, "payload"] == "z" * BETWEEN
    assert [p[2] for p in commands if p[0] == "HGET"] == ["payload"]
    if out is not None:
        assert out < BETWEEN + 100_000
    # a payload that was not read matches no payload glob
    found = bounded(lambda: triage.find(conn, Q_whole_field, payload="*needle*"), srv, what="find")
    assert list(found.index) == []
    assert list(triage.find(conn, Q_whole_field, payload="z*").index) == [near]


@pytest.mark.usefixtures("_small_bound")
def test_emq_job_and_the_job_panel_show_a_field_over_the_bound_as_its_length(conn, emq_line, ip):
    conn.client.flushall()
    job_id = dead_with_payload(conn, "q" * OVER)
    marker = decoding.not_read(OVER)
    assert emq_line(f"job {Q_whole_field} {job_id}")["payload"] == marker
    panel = JobPanel(conn, Q_whole_field, job_id)
    assert panel.payload.value == marker
    text = ip.display_formatter.format(panel)[0]["text/plain"]
    assert marker in text and "q" * 1000 not in text


# -- Regression tests for what the soak (tests/soak/) found, one per bug, on both backends. Each
# fault is injected at the client (a reply read that fails after the server ran the command, or a
# failed pause read), so the fake runs it too.


def fail_pause_reads(conn, monkeypatch) -> list:
    """Every HGET of the paused field meets a wire fault; other commands go through."""
    real = conn.client.execute_command
    seen: list = []

    def flaky(*args, **kwargs):
        if args[:1] == ("HGET",) and args[-1] == "paused":
            seen.append(args)
            raise redis_py.ConnectionError("injected: connection reset during the pause read")
        return real(*args, **kwargs)

    monkeypatch.setattr(conn.client, "execute_command", flaky)
    return seen


def test_a_claim_whose_reply_is_lost_is_not_sent_again(conn, monkeypatch):
    for i in range(3):
        jobs.enqueue(conn, Q_soak_regressions, str(i), id=f"j_{i}")
    lost = lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        jobs.claim(conn, Q_soak_regressions, 60_000)
    # the one claim that ran took the head; no second job was taken behind the caller's back
    assert [r[0] for r in lost] == ["j_0"]
    assert active(conn) == ["j_0"]
    assert conn.client.zrange(queue_key(Q_soak_regressions, "pending"), 0, -1) == ["j_1", "j_2"]


def test_a_complete_whose_reply_is_lost_raises_rather_than_answering_gone(conn, monkeypatch):
    jobs.enqueue(conn, Q_soak_regressions, "x", id="j_1")
    jobs.claim(conn, Q_soak_regressions, 60_000)
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):  # unknown outcome, not a false `Gone`
        jobs.complete(conn, Q_soak_regressions, "j_1")
    assert not conn.client.exists(queue_key(Q_soak_regressions, "job:j_1"))  # it did complete, once


def test_a_removal_whose_reply_is_lost_is_never_reported_gone(conn, monkeypatch):
    jobs.enqueue(conn, Q_soak_regressions, "x", id="j_1")
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        admin.remove_jobs(conn, Q_soak_regressions, ["j_1"])
    assert admin.remove_jobs(conn, Q_soak_regressions, ["j_1"]) == {"j_1": "gone"}  # asked again, knowingly


# Bug 2: a wire fault on the claim's pause read reads as "not paused" (EchoMQ's own
# paused?/2), and the gate-less @claim2 then served a PAUSED queue once the fault
# had passed. The claim that goes on now reads the paused field itself.


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "grouped"])
def test_a_faulted_pause_read_never_serves_a_paused_queue(conn, monkeypatch, grouped):
    jobs.enqueue(conn, Q_soak_regressions, "x", id="j_1", group="acme" if grouped else None)
    admin.pause(conn, Q_soak_regressions)
    seen = fail_pause_reads(conn, monkeypatch)
    claim = lanes.claim if grouped else jobs.claim
    assert claim(conn, Q_soak_regressions, 60_000) is None
    assert seen and active(conn) == []
    monkeypatch.undo()
    admin.resume(conn, Q_soak_regressions)
    assert claim(conn, Q_soak_regressions, 60_000)[0] == "j_1"


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "grouped"])
def test_a_faulted_pause_read_on_a_running_queue_still_claims(conn, monkeypatch, grouped):
    # EchoMQ's own rule stands: the fault reads as not paused and the claim goes on
    jobs.enqueue(conn, Q_soak_regressions, "x", id="j_1", group="acme" if grouped else None)
    fail_pause_reads(conn, monkeypatch)
    assert jobs.paused_for_claim(conn, Q_soak_regressions) is None  # faulted: falsy, "not paused"
    claim = lanes.claim if grouped else jobs.claim
    assert claim(conn, Q_soak_regressions, 60_000)[0] == "j_1"


# -- Do no harm, the bulk verbs: every call is bounded by the work it does (members examined AND
# bytes), whatever the sets hold -- bad rows, ghosts, ids another node wrote outside the name gate,
# 8 MB payloads, a :logs list of 200,000 lines -- and a run walks each member once, so it never
# re-walks (or re-announces) what it left behind. Both backends; the calls that could hold a server run
# under the harness's watchdog (tests/harm.py). Work is observed in the replies and the events,
# never timed.


@pytest.mark.parametrize("verb", ["promote", "expire_leases"])
def test_housekeeping_laps_past_bad_rows_and_announces_each_once_a_lap(harm, verb):
    conn, srv = harm
    key = "schedule" if verb == "promote" else "active"
    bad = bad_rows_and_ghosts(conn, 600, 600, key)
    for i in range(5):  # due (or expired) a moment after they are added
        jobs.enqueue(conn, Q_budget, "{}", id=f"j_{i}", delay_ms=1 if verb == "promote" else 0)
    if verb == "expire_leases":
        while jobs.claim(conn, Q_budget, 1):
            pass
    time.sleep(0.01)
    call = getattr(jobs, verb)
    with Events(conn, Q_budget) as events:
        moved = [bounded(lambda: call(conn, Q_budget, budget=500), srv, what=verb) for _ in range(3)]
    # 1,205 due members: three calls of at most 500, the good ones last
    assert moved == [0, 0, 5]
    assert events.bad_rows() == Counter(bad)
    assert conn.client.zcard(P_budget + key) == 600  # the bad rows stay; the ghosts left
    with Events(conn, Q_budget) as again:
        assert call(conn, Q_budget, budget=500) == 0  # a new lap from the head
    assert set(again.bad_rows().values()) == {1} and len(again.bad_rows()) == 500


def test_enqueue_many_splits_large_payloads_by_bytes(conn):
    sent: list[tuple[int, int]] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        triples = args[5:]
        sent.append((len(triples) // 3, sum(len(str(a)) for a in triples)))
        return real(name, keys, args, **kw)

    conn.run = run
    payloads = ["x" * 300_000] * 12 + ["y" * 1_500_000] + ["{}"] * 3
    ids = jobs.enqueue_many(conn, Q_budget, payloads)
    # about a megabyte a call; a payload larger than that goes alone
    assert [jobs_in for jobs_in, _ in sent] == [3, 3, 3, 3, 1, 3]
    assert all(size <= BYTE_BUDGET or jobs_in == 1 for jobs_in, size in sent)
    assert conn.client.zrange(P_budget + "pending", 0, -1) == ids
    assert conn.client.hstrlen(P_budget + "job:" + ids[12], "payload") == 1_500_000


# a payload one byte over, counted in bytes: "é" is two
OVER_PAYLOAD = {
    "enqueue": lambda c: jobs.enqueue(c, Q_budget, "x" * (MAX_PAYLOAD + 1)),
    "enqueue_many": lambda c: jobs.enqueue_many(c, Q_budget, ["{}", "é" * (MAX_PAYLOAD // 2) + "x"]),
    "update_data": lambda c: jobs.update_data(c, Q_budget, "j_1", "x" * (MAX_PAYLOAD + 1)),
    "repeat.register": lambda c: repeat.register(
        c, Q_budget, "nightly", 60_000, "é" * (MAX_PAYLOAD // 2) + "x"
    ),
}


@pytest.mark.parametrize("verb", sorted(OVER_PAYLOAD))
def test_a_payload_over_the_maximum_is_refused_before_anything_is_sent(harm, verb):
    conn, srv = harm
    kill(conn, ["j_1"])
    refused_before_anything_is_sent(conn, srv, OVER_PAYLOAD[verb], f"{MAX_PAYLOAD:,}")


def test_a_payload_of_the_maximum_is_written_whole(harm):
    conn, srv = harm
    kill(conn, ["j_1"])
    most = "é" * (MAX_PAYLOAD // 2)
    bounded(lambda: jobs.update_data(conn, Q_budget, "j_1", most), srv, what="update_data")
    assert conn.client.hstrlen(P_budget + "job:j_1", "payload") == MAX_PAYLOAD


# -- Do no harm, the reads (bench/harm.py found each): a job's long `:logs` list is read in pages
# bounded by lines and bytes; a payload too large for a script is read with a plain HGET, never
# inside one; a snapshot's call stops at about a byte budget; find, errors and the snapshot pass
# over a member whose id names another job's `:logs` list (its "row" key is a list); a runbook finds
# its queue without a SCAN. Both backends, every call that could hold a server under the harness's
# watchdog (tests/harm.py). Work is observed in the replies, never timed.

# -- a job's logs ------------------------------------------------------------------------


def test_a_long_logs_list_is_read_in_pages_and_its_last_lines_answered(harm):
    conn, srv = harm
    jobs.enqueue(conn, Q_reads, "{}", id="j_1")
    lines = [f"line {i}" for i in range(30_000)]
    for start in range(0, len(lines), 5_000):
        conn.client.rpush(P_reads + "job:j_1:logs", *lines[start : start + 5_000])
    pages = replies(conn, "get_logs")

    last = bounded(lambda: jobs.get_job_logs(conn, Q_reads, "j_1"), srv, what="get_job_logs")
    assert last == lines[-jobs.LOG_LINES :] and last.total == 30_000
    every = bounded(lambda: jobs.get_job_logs(conn, Q_reads, "j_1", limit=None), srv, what="get_job_logs")
    assert every == lines and every.total == 30_000
    # each call read one page at most: its length, its first line's index, its lines
    assert all(len(p) - 2 <= jobs.PAGE_LINES for p in pages) and len(pages) == 2 + 6
    assert jobs.get_job_logs(conn, Q_reads, "j_1", limit=3) == lines[-3:]


def test_an_ordinary_logs_list_is_one_call_with_the_same_reply(harm):
    conn, _ = harm
    jobs.enqueue(conn, Q_reads, "{}", id="j_1")
    for line in ("l0", "l1", "l2"):
        jobs.add_log(conn, Q_reads, "j_1", line)
    pages = replies(conn, "get_logs")
    got = jobs.get_job_logs(conn, Q_reads, "j_1")
    assert got == ["l0", "l1", "l2"] and got.total == 3 and len(pages) == 1
    # the script called as before (no page asked) answers the lines alone
    keys = [P_reads + "job:j_1", P_reads + "job:j_1:logs", P_reads]
    assert conn.run("get_logs", keys, []) == ["l0", "l1", "l2"]


def test_a_logs_list_of_long_lines_pages_by_bytes(harm):
    conn, srv = harm
    jobs.enqueue(conn, Q_reads, "{}", id="j_1")
    line = "x" * 100_000
    conn.client.rpush(P_reads + "job:j_1:logs", *[line] * 40)
    pages = replies(conn, "get_logs")
    got = bounded(lambda: jobs.get_job_logs(conn, Q_reads, "j_1"), srv, what="get_job_logs")
    assert got == [line] * 40
    # a page stops after the line that reaches the byte budget
    assert max(len(p) - 2 for p in pages) == BYTE_BUDGET // 100_000 + 1
