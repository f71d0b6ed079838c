"""Fenced means fenced: a transition either succeeds or refuses and changes nothing,
whatever the row holds, whatever the arguments, whoever calls it late.

On both backends and both executors (`script` and `function`):
- a row (or a lane's meta) with a numeric field no transition can read -- written by
  another node or by hand -- is refused `BadRow` by every single-job transition with
  the keyspace byte-identical, and skipped (left where it is) by the bulk ones;
- numeric arguments are bounded in Python before any I/O (and in Lua before a write);
- a worker whose lease was lost cannot complete or fail a job another claim owns;
- a ghost (a set member whose row is gone) is cleaned where a verb meets it and never
  stops a claim; obliterate's "ok" means nothing is left under `emq:{q}:`.
"""

from __future__ import annotations

import logging
import time

import pytest
from helpers import consistency_problems, dump, kept_conn, keys_of

from emq_notebook import Worker, admin, jobs, lanes, repeat
from emq_notebook.checks import MAX_WHOLE
from emq_notebook.errors import BadInput, BadRow, EMQError, Gone, NotOwner
from emq_notebook.keyspace import audit_key, base

Q = "mail"
P = f"emq:{{{Q}}}:"
EXECUTORS = ("script", "function")
FIELDS = ("attempts", "failures", "stalled", "max_attempts", "backoff", "priority")
BAD = ("three", "", "1e999", "nan")
SHORT = 1  # a lease (or a delay) that is over a moment later: see `until_past`


@pytest.fixture(scope="module")
def clients():
    """One client per backend for the whole module (opened, and the function library
    loaded, once); each test still starts on a flushed keyspace."""
    return {}


@pytest.fixture
def conn(backend, request, clients):
    return kept_conn(clients, backend, request)


@pytest.fixture
def connect_as(conn):
    """Another session on the same server (its own worker token): `connect_as("function")`."""
    return conn.with_executor


@pytest.fixture(params=EXECUTORS)
def ex(request, conn, connect_as):
    """The connection under test, with each executor."""
    return connect_as(request.param)


def until_past(conn, key: str) -> None:
    """Wait until the server's clock is past every score in the sorted set `key` (lease
    deadlines, due times), polling its TIME: a millisecond or two, at most 5 seconds."""
    top = conn.client.zrange(key, -1, -1, withscores=True)
    due = top[0][1] if top else 0
    deadline = time.monotonic() + 5
    while True:
        seconds, micros = conn.client.time()
        if seconds * 1000 + micros // 1000 > due:
            return
        assert time.monotonic() < deadline, f"the server clock never passed {due} in {key}"
        time.sleep(0.001)


def corrupt(conn, job_id: str, field: str, value: str) -> None:
    conn.client.hset(P + "job:" + job_id, field, value)


def refused_unchanged(conn, call, cls=BadRow):
    """`call()` refuses with `cls` and the keyspace is byte-identical before and after."""
    before = dump(conn)
    with pytest.raises(cls):
        call()
    assert dump(conn) == before


# -- 1. a bad row refuses before the first write --------------------------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD)
def test_flat_claim_refuses_a_bad_head_and_pops_nothing(conn, ex, field, value):
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.enqueue(conn, Q, "y", id="j_2")
    corrupt(conn, "j_1", field, value)
    refused_unchanged(conn, lambda: jobs.claim(ex, Q, 60_000))
    # the refusal names the field and the job, so the operator can act on it
    with pytest.raises(BadRow, match=f"{field} in j_1"):
        jobs.claim(ex, Q, 60_000)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", ("three", "1e999"))
def test_grouped_claim_refuses_a_bad_head_and_pops_nothing(conn, ex, field, value):
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
    corrupt(conn, "j_1", field, value)
    refused_unchanged(conn, lambda: lanes.claim(ex, Q, 60_000))


@pytest.mark.parametrize("field", ("limit", "active"))
@pytest.mark.parametrize("value", BAD)
def test_grouped_claim_refuses_a_bad_lane_meta(conn, ex, field, value):
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
    conn.client.hset(P + "g:acme:meta", field, value)
    refused_unchanged(conn, lambda: lanes.claim(ex, Q, 60_000))


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("verb", ("fail", "complete"))
def test_fail_and_complete_refuse_a_bad_row(conn, connect_as, field, value, verb):
    for executor in EXECUTORS:
        c = connect_as(executor)
        c.client.flushall()
        jobs.enqueue(c, Q, "x", id="j_1", group="acme")
        jobs.enqueue(c, Q, "y", id="j_2")
        assert jobs.claim(c, Q, 60_000).id == "j_2"
        assert lanes.claim(c, Q, 60_000).id == "j_1"
        for job_id in ("j_1", "j_2"):
            corrupt(c, job_id, field, value)
            if verb == "fail":
                refused_unchanged(c, lambda c=c, j=job_id: jobs.fail(c, Q, j, "boom"))
            else:
                refused_unchanged(c, lambda c=c, j=job_id: jobs.complete(c, Q, j))


def test_the_issue_example_a_bad_max_attempts_is_never_lost(conn, ex):
    """`max_attempts="three"` used to reach the row through repeat.register and
    strand the job in active on `fail`; now Python refuses it, and a row that
    holds it anyway (another node) is refused at the claim."""
    with pytest.raises(BadInput):
        repeat.register(ex, Q, "nightly", 1, "{}", max_attempts="three")
    assert dump(conn) == {}
    repeat.register(ex, Q, "nightly", 1, "{}", max_attempts=2)
    until_past(conn, P + "repeat")
    (made,) = repeat.tick(ex, Q)
    corrupt(conn, made, "max_attempts", "three")
    refused_unchanged(conn, lambda: jobs.claim(ex, Q, 60_000))
    assert conn.client.zscore(P + "pending", made) is not None


@pytest.mark.parametrize("verb", ("complete", "fail"))
def test_a_bad_lane_meta_or_metrics_keep_refuses_complete_and_fail(conn, ex, verb):
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
    lanes.claim(ex, Q, 60_000)
    finish = (
        (lambda: jobs.complete(ex, Q, "j_1"))
        if verb == "complete"
        else (lambda: jobs.fail(ex, Q, "j_1", "boom"))
    )
    conn.client.hset(P + "g:acme:meta", "active", "lots")
    refused_unchanged(conn, finish)
    conn.client.hset(P + "g:acme:meta", "active", "1")
    conn.client.hset(P + "meta", "metrics_keep", "a day")
    refused_unchanged(conn, finish)
    conn.client.hdel(P + "meta", "metrics_keep")
    finish()
    assert consistency_problems(conn, Q) == []


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD)
def test_reprocess_refuses_a_bad_dead_row(conn, ex, field, value):
    jobs.enqueue(conn, Q, "x", id="j_1", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_1", "boom")
    corrupt(conn, "j_1", field, value)
    refused_unchanged(conn, lambda: jobs.reprocess_job(ex, Q, "j_1"))


def test_reprocess_refuses_a_grouped_row_whose_lane_meta_is_bad(conn):
    jobs.enqueue(conn, Q, "x", id="j_1", max_attempts=1, group="acme")
    lanes.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_1", "boom")
    conn.client.hset(P + "g:acme:meta", "limit", "nan")
    refused_unchanged(conn, lambda: jobs.reprocess_job(conn, Q, "j_1"))


def _expired(conn, ids, group=None):
    for job_id in ids:
        jobs.enqueue(conn, Q, job_id, id=job_id, group=group)
        (lanes.claim if group else jobs.claim)(conn, Q, SHORT)
    until_past(conn, P + "active")


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD)
def test_expire_skips_a_bad_row_and_leaves_it_in_active(conn, ex, field, value):
    _expired(conn, ["j_1", "j_2", "j_3"])
    corrupt(conn, "j_1", field, value)
    before = dump(conn)
    # the bad row costs its member of the budget, and the next call walks past it
    assert jobs.expire_leases(ex, Q, budget=1) == 0
    assert jobs.expire_leases(ex, Q, budget=1) == 1
    assert jobs.expire_leases(ex, Q) == 1
    assert jobs.expire_leases(ex, Q) == 0
    after = dump(conn)
    assert after[P + "job:j_1"] == before[P + "job:j_1"]
    assert [m for m, _ in after[P + "active"][1]] == ["j_1"]
    assert [m for m, _ in after[P + "pending"][1]] == ["j_2", "j_3"]


def test_expire_skips_a_grouped_row_whose_lane_meta_is_bad(conn, ex):
    _expired(conn, ["j_1"], group="acme")
    _expired(conn, ["j_2"])
    conn.client.hset(P + "g:acme:meta", "active", "")
    before = dump(conn)
    assert jobs.expire_leases(ex, Q) == 1
    after = dump(conn)
    assert after[P + "g:acme:meta"] == before[P + "g:acme:meta"]
    assert after[P + "job:j_1"] == before[P + "job:j_1"]
    assert [m for m, _ in after[P + "active"][1]] == ["j_1"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD)
def test_promote_skips_a_bad_row_and_leaves_it_scheduled(conn, ex, field, value):
    for job_id in ("j_1", "j_2"):
        jobs.enqueue(conn, Q, job_id, id=job_id, delay_ms=1)
    until_past(conn, P + "schedule")
    corrupt(conn, "j_1", field, value)
    before = dump(conn)
    # the bad row costs its member of the budget, and the next call walks past it
    assert jobs.promote(ex, Q, budget=1) == 0
    assert jobs.promote(ex, Q) == 1
    assert jobs.promote(ex, Q) == 0
    after = dump(conn)
    assert after[P + "job:j_1"] == before[P + "job:j_1"]
    assert [m for m, _ in after[P + "schedule"][1]] == ["j_1"]
    assert [m for m, _ in after[P + "pending"][1]] == ["j_2"]


def _dead(conn, ids, group=None):
    for job_id in ids:
        jobs.enqueue(conn, Q, job_id, id=job_id, max_attempts=1, group=group)
        got = (lanes.claim if group else jobs.claim)(conn, Q, 60_000)
        jobs.fail(conn, Q, got.id, "boom")


def test_reprocess_dead_skips_bad_rows_and_never_loops_on_them(conn, ex):
    _dead(conn, ["j_1", "j_2"])
    _dead(conn, ["j_3"], group="acme")
    _dead(conn, ["j_4"])
    corrupt(conn, "j_1", "attempts", "three")
    corrupt(conn, "j_2", "priority", "1e999")
    conn.client.hset(P + "g:acme:meta", "limit", "many")
    before = dump(conn)
    # budget 1 and three bad rows at the head: the loop still ends, having moved j_4
    assert admin.reprocess_dead(ex, Q, budget=1) == 1
    after = dump(conn)
    for job_id in ("j_1", "j_2", "j_3"):
        assert after[P + "job:" + job_id] == before[P + "job:" + job_id]
    assert [m for m, _ in after[P + "dead"][1]] == ["j_1", "j_2", "j_3"]
    assert [m for m, _ in after[P + "pending"][1]] == ["j_4"]
    assert admin.reprocess_dead(ex, Q) == 0


def test_bulk_verbs_announce_what_they_skipped(conn, ex):
    _dead(conn, ["j_1"])
    corrupt(conn, "j_1", "failures", "x")
    sub = conn.client.pubsub()
    sub.subscribe(P + "events")
    sub.get_message(timeout=1)
    admin.reprocess_dead(ex, Q)
    msg = None
    for _ in range(20):
        msg = sub.get_message(timeout=0.2)
        if msg and msg["type"] == "message":
            break
    sub.close()
    assert msg and '"event":"bad_row"' in msg["data"] and '"job":"j_1"' in msg["data"]


@pytest.mark.parametrize("field", FIELDS)
def test_drain_reads_no_number_so_a_bad_row_drains(conn, ex, field):
    jobs.enqueue(conn, Q, "x", id="j_1", dedup="k1")
    jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
    corrupt(conn, "j_1", field, "three")
    corrupt(conn, "j_2", field, "three")
    assert admin.drain(ex, Q, budget=1) == 2
    assert consistency_problems(conn, Q) == []
    assert conn.client.exists(P + "job:j_1", P + "job:j_2") == 0


def test_obliterate_goes_through_bad_rows_and_bad_lane_meta(conn, ex):
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
    jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
    lanes.claim(conn, Q, 60_000)
    corrupt(conn, "j_1", "attempts", "three")
    conn.client.hset(P + "g:acme:meta", "active", "lots")
    admin.pause(conn, Q)
    calls = 0
    while admin.obliterate(ex, Q, force=True, budget=1) == "more":
        calls += 1
        assert calls < 50
    assert keys_of(conn, Q) == []


def test_repeat_tick_skips_a_bad_definition(conn, ex):
    repeat.register(ex, Q, "good", 1, "{}")
    repeat.register(ex, Q, "bad", 1, "{}")
    defs = P + "repeat:defs"
    for bad in (
        '{"every": "soon", "payload": "{}"}',
        "not json",
        '{"every": 1}',
        '{"every": 1, "payload": "{}", "max_attempts": "three"}',
    ):
        conn.client.hset(defs, "bad", bad)
        conn.client.zadd(P + "repeat", {"bad": 0})
        until_past(conn, P + "repeat")
        before = dump(conn)
        made = repeat.tick(ex, Q, max_jobs=1)
        assert len(made) == 1 and jobs.get_job(conn, Q, made[0])["payload"] == "{}"
        after = dump(conn)
        assert after[defs] == before[defs]
        assert dict(after[P + "repeat"][1])["bad"] == 0


# -- 2. out-of-range arguments: refused before any I/O ---------------------------

OUT_OF_RANGE = [
    ("claim lease", lambda c: jobs.claim(c, Q, lease_ms=10**19)),
    ("claim lease over a year", lambda c: jobs.claim(c, Q, lease_ms=400 * 86_400_000)),
    ("grouped claim lease", lambda c: lanes.claim(c, Q, lease_ms=10**19)),
    ("priority", lambda c: jobs.enqueue(c, Q, "x", priority=10**20)),
    ("priority 2**53+1", lambda c: jobs.enqueue(c, Q, "x", priority=2**53 + 1)),
    ("delay", lambda c: jobs.enqueue(c, Q, "x", delay_ms=10**19)),
    ("backoff", lambda c: jobs.enqueue(c, Q, "x", backoff_ms=10**19)),
    ("max_attempts", lambda c: jobs.enqueue(c, Q, "x", max_attempts=2**53)),
    ("max_attempts float", lambda c: jobs.enqueue(c, Q, "x", max_attempts=2.0)),
    ("expire budget", lambda c: jobs.expire_leases(c, Q, budget=2**60)),
    ("promote budget", lambda c: jobs.promote(c, Q, budget=2**60)),
    ("drain budget", lambda c: admin.drain(c, Q, budget=2**60)),
    ("obliterate budget", lambda c: admin.obliterate(c, Q, budget=10**30)),
    ("keep", lambda c: jobs.add_log(c, Q, "j_1", "line", keep=2**64)),
    ("lane limit", lambda c: lanes.set_limit(c, Q, "acme", 10**20)),
    ("repeat every", lambda c: repeat.register(c, Q, "r", 10**19, "{}")),
    ("repeat max_attempts", lambda c: repeat.register(c, Q, "r", 1000, "{}", max_attempts=0)),
    ("tick max_jobs", lambda c: repeat.tick(c, Q, max_jobs=10**9)),
]


@pytest.mark.parametrize("name,call", OUT_OF_RANGE, ids=[n for n, _ in OUT_OF_RANGE])
def test_out_of_range_arguments_refused_before_any_io(conn, ex, name, call):
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
    before = dump(conn)
    with pytest.raises(BadInput):
        call(ex)
    assert dump(conn) == before


def test_the_largest_whole_numbers_are_stored_exactly(conn, ex):
    jobs.enqueue(ex, Q, "x", id="j_1", priority=MAX_WHOLE, max_attempts=MAX_WHOLE)
    row = jobs.get_job(conn, Q, "j_1")
    assert row["priority"] == str(MAX_WHOLE) and row["max_attempts"] == str(MAX_WHOLE)
    assert conn.client.zscore(P + "pending", "j_1") == MAX_WHOLE


def test_a_claim_script_called_with_a_bad_lease_writes_nothing(conn, ex):
    """Another node calling the script with a lease SET PX cannot take is refused
    before the pop (the Python side never sends one)."""
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
    keys = [P + "pending", P + "active", base(Q)]
    for lease in ("10000000000000000000", "0", "1.5", "soon"):
        for name in ("claim2", "gclaim2"):
            before = dump(conn)
            k = keys if name == "claim2" else [P + "ring", *keys[1:]]
            with pytest.raises(EMQError):
                conn.run(name, k, [lease, "tok"])
            assert dump(conn) == before


# -- 3. a stale worker cannot win ---------------------------------------------------


@pytest.mark.parametrize("verb", ("complete", "fail"))
@pytest.mark.parametrize("group", (None, "acme"))
def test_a_worker_whose_lease_was_lost_is_refused_not_owner(conn, connect_as, verb, group):
    for executor in EXECUTORS:
        first, second = connect_as(executor), connect_as(executor)
        conn.client.flushall()
        claim = lanes.claim if group else jobs.claim
        jobs.enqueue(conn, Q, "x", id="j_1", group=group, max_attempts=5)
        assert claim(first, Q, SHORT).id == "j_1"
        until_past(conn, P + "active")
        assert jobs.expire_leases(conn, Q) == 1
        assert claim(second, Q, 60_000) == ("j_1", "x", 2)
        stale = (
            (lambda first=first: jobs.complete(first, Q, "j_1"))
            if verb == "complete"
            else (lambda first=first: jobs.fail(first, Q, "j_1", "late"))
        )
        refused_unchanged(conn, stale, NotOwner)
        jobs.complete(second, Q, "j_1")
        assert consistency_problems(conn, Q) == []


def test_the_owner_is_on_the_row_so_an_expired_lock_key_does_not_open_the_fence(conn, ex):
    other = ex.with_executor(ex.executor)
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.claim(ex, Q, 60_000)
    conn.client.delete(P + "job:j_1:lock")  # the PX lock key gone, the job still in active
    refused_unchanged(conn, lambda: jobs.fail(other, Q, "j_1", "late"), NotOwner)
    assert jobs.fail(ex, Q, "j_1", "boom") == "retry"


def test_claimed_is_a_named_tuple_of_three(conn):
    jobs.enqueue(conn, Q, "x", id="j_1")
    got = jobs.claim(conn, Q, 60_000)
    assert got == ("j_1", "x", 1) and got.id == "j_1" and got.payload == "x" and got.attempts == 1
    assert jobs.Claimed._fields == ("id", "payload", "attempts")


def test_worker_survives_a_lost_lease_and_a_vanished_job(conn, connect_as, caplog):
    thief = connect_as("script")
    for i in range(3):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i}", max_attempts=5)

    def handler(job_id, payload, attempts):
        if job_id == "j_0":  # the lease runs out and another worker takes it
            until_past(conn, P + "active")
            jobs.expire_leases(thief, Q)
            jobs.claim(thief, Q, 60_000)
        elif job_id == "j_1":  # an operator finished it under the worker
            jobs.complete(conn, Q, job_id)
            raise RuntimeError("and then the handler failed")

    w = Worker(conn, Q, handler, lease_ms=SHORT * 5)
    with caplog.at_level(logging.WARNING, logger="emq_notebook.worker"):
        assert w.run(max_jobs=3) == 3
    assert (w.completed, w.failed, w.lost) == (1, 0, 2)
    assert sum("refused" in r.getMessage() for r in caplog.records) == 2


def test_worker_survives_a_claim_refused_bad_row(conn, caplog):
    jobs.enqueue(conn, Q, "x", id="j_1")
    corrupt(conn, "j_1", "attempts", "three")
    w = Worker(conn, Q, lambda *a: None, idle_sleep=0)
    with caplog.at_level(logging.WARNING, logger="emq_notebook.worker"):
        assert w.run(max_jobs=1, until_empty=True) == 0
    assert w.bad_rows == 1 and "bad row" in caplog.text


# -- 5. ghosts ------------------------------------------------------------------------


def test_remove_cleans_a_ghost_and_still_answers_gone(conn, ex):
    for state in ("pending", "active", "schedule", "dead"):
        conn.client.zadd(P + state, {"ghost": 1})
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
    conn.client.zadd(P + "g:acme:pending", {"ghost": 0})
    with pytest.raises(Gone):
        jobs.remove_job(ex, Q, "ghost")
    assert consistency_problems(conn, Q) == []
    # an id in no set: gone, and nothing at all changes
    refused_unchanged(conn, lambda: jobs.remove_job(ex, Q, "j_none"), Gone)


def test_remove_jobs_cleans_ghosts(conn, ex):
    conn.client.zadd(P + "dead", {"ghost": 1})
    jobs.enqueue(conn, Q, "x", id="j_1")
    assert admin.remove_jobs(ex, Q, ["ghost", "j_1"]) == {"ghost": "gone", "j_1": "removed"}
    assert keys_of(conn, Q) == [P + "meta"]


# -- 7. an id given twice ------------------------------------------------------------------


def test_remove_jobs_answers_what_happened_to_an_id_given_twice(conn, ex):
    jobs.enqueue(conn, Q, "x", id="a")
    jobs.enqueue(conn, Q, "y", id="b")
    jobs.claim(conn, Q, 60_000)  # a is held now
    jobs.enqueue(conn, Q, "z", id="c")
    assert admin.remove_jobs(ex, Q, ["c", "a", "c", "b", "a", "none", "none"]) == {
        "c": "removed",
        "a": "locked",
        "b": "removed",
        "none": "gone",
    }
    assert list(admin.remove_jobs(ex, Q, ["c", "a", "c"])) == ["c", "a"]
    assert consistency_problems(conn, Q) == []


def test_reprocess_dead_drops_ghosts_uncounted(conn, ex):
    _dead(conn, ["j_1"])
    conn.client.zadd(P + "dead", {"ghost": 0, "ghost2": 1})
    assert admin.reprocess_dead(ex, Q) == 1
    assert conn.client.zcard(P + "dead") == 0
    assert consistency_problems(conn, Q) == []


@pytest.mark.parametrize("group", (None, "acme"))
def test_a_ghost_at_the_head_never_stops_a_claim(conn, ex, group):
    jobs.enqueue(conn, Q, "x", id="j_1", group=group)
    jobs.enqueue(conn, Q, "y", id="j_2", group=group)
    pending = P + ("g:acme:pending" if group else "pending")
    conn.client.zadd(pending, {"a_ghost": -1, "b_ghost": -1})
    claim = lanes.claim if group else jobs.claim
    assert claim(ex, Q, 60_000).id == "j_1"
    if group:
        lanes.set_limit(conn, Q, group, 2)
    assert claim(ex, Q, 60_000).id == "j_2"
    assert claim(ex, Q, 60_000) is None
    assert consistency_problems(conn, Q) == []


def test_expire_and_promote_drop_ghosts_uncounted(conn, ex):
    _expired(conn, ["j_1"])
    jobs.enqueue(conn, Q, "s", id="j_2", delay_ms=1)
    until_past(conn, P + "schedule")
    conn.client.zadd(P + "active", {"ghost": 0})
    conn.client.zadd(P + "schedule", {"ghost": 0})
    assert jobs.expire_leases(ex, Q) == 1
    assert jobs.promote(ex, Q) == 1
    assert consistency_problems(conn, Q) == []


# -- 4. obliterate: "ok" means nothing is left -------------------------------------------


def _filler(conn, n: int) -> None:
    """Keys of another queue, so the keyspace is larger than one call's SCAN pass."""
    pipe = conn.client.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"emq:{{other}}:k{i}", "1")
    pipe.execute()


@pytest.mark.parametrize("filler", (0, 6000))
def test_obliterate_finds_keys_made_between_bounded_calls(conn, ex, filler):
    _filler(conn, filler)
    for i in range(150):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i:03d}")
    admin.pause(conn, Q)
    assert admin.obliterate(ex, Q, budget=100) == "more"
    # orphans made by hand (or by another node) while the sweep is half-way
    pipe = conn.client.pipeline(transaction=False)
    for i in range(300):
        pipe.rpush(P + f"job:o{i}:logs", "line")
    pipe.execute()
    calls = 0
    while admin.obliterate(ex, Q, budget=100) == "more":
        calls += 1
        assert calls < 1000
    assert keys_of(conn, Q) == []
    # and one key more than the filler: the queue's audit stream, outside its footprint
    assert conn.client.dbsize() == filler + 1 and conn.client.exists(audit_key(Q))


# -- 1. (again) the metrics record never fails a transition half-way ----------------------


@pytest.mark.parametrize("verb", ("complete", "fail"))
@pytest.mark.parametrize("damage", ("bucket", "type"))
def test_a_damaged_metrics_hash_never_strands_a_job(conn, ex, verb, damage):
    """complete and fail bump the metrics after their writes: a bucket that holds no
    count (or a metrics key that is not a hash) once raised there, leaving a failed
    job in no set at all."""
    kind = "completed" if verb == "complete" else "failed"
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.claim(ex, Q, 60_000)
    key = P + "metrics:" + kind
    if damage == "bucket":
        for minute in range(int(time.time() // 60) - 1, int(time.time() // 60) + 3):
            conn.client.hset(key, str(minute), "lots")
    else:
        conn.client.set(key, "not a hash")
    if verb == "complete":
        jobs.complete(ex, Q, "j_1")
    else:
        assert jobs.fail(ex, Q, "j_1", "boom") == "retry"
    assert consistency_problems(conn, Q) == []
    if damage == "bucket":
        assert "1" in conn.client.hvals(key)
    else:
        assert conn.client.get(key) == "not a hash"


def _sweep_under_way(conn, ex, budget):
    """Bounded obliterate calls until the SCAN sweep has kept a cursor in meta."""
    for _ in range(1000):
        assert admin.obliterate(ex, Q, budget=budget) == "more"
        if conn.client.hget(P + "meta", "sweep") not in (None, "0"):
            return
    pytest.fail("the sweep never kept a cursor")


def test_a_resumed_queue_is_swept_again_from_the_beginning(conn, ex):
    """The issue's reproduction: a bounded obliterate leaves its cursor in meta; the
    queue is resumed and gets more keys (orphan logs, no job in any set), then is
    paused and obliterated again. The old cursor would skip the keys behind it and
    answer "ok" with keys left; resume restarts the sweep."""
    _filler(conn, 6000)
    for i in range(150):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i:03d}")
    admin.pause(conn, Q)
    _sweep_under_way(conn, ex, budget=100)
    admin.resume(ex, Q)
    pipe = conn.client.pipeline(transaction=False)
    for i in range(300):
        pipe.rpush(P + f"job:o{i}:logs", "line")
    pipe.execute()
    admin.pause(ex, Q)
    calls = 0
    while admin.obliterate(ex, Q, budget=100) == "more":
        calls += 1
        assert calls < 1000
    assert keys_of(conn, Q) == []
    assert conn.client.dbsize() == 6000 + 1 and conn.client.exists(audit_key(Q))
