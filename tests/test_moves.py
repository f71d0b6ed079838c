"""Moves by the job (emq_notebook/moves.py), on both backends: reprocess_dead, paced and
controlled, and reprocess_jobs / remove_jobs by id, each call bounded by members and bytes
past bad rows, ghosts and foreign or long ids.

Acting on what was found: `admin.reprocess_jobs` and `admin.remove_jobs` by id, and
their dry runs (a read-only script answering the same words, writing nothing).
Both backends, both executors that run scripts."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import fakeredis
import pytest
import redis
from bad_rows import P, bad_rows_and_ghosts, refused_before_anything_is_sent
from bad_rows import Q as Q_budget
from bad_rows import kill as kill_budget
from dead_letters import long_ids, written_dead, written_rows
from dead_rows import Q as Q_reads
from foreign_ids import Q as Q_long_ids
from foreign_ids import foreign_ids, written
from harm import Events, bounded, replies
from helpers import consistency_problems, dump, server_for, server_url

import emq_notebook as emq
from emq_notebook import admin, footprint, frames, jobs, lanes, magics, moves, repeat, runbook, triage
from emq_notebook.defaults import BYTE_BUDGET, MAX_BUDGET, MAX_MOVE_BUDGET
from emq_notebook.errors import BadInput, BadRow, Gone, Halted, InvalidName, NotScheduled, ReadOnly
from emq_notebook.keyspace import MAX_SERVER_ID

Q = "act"
K = f"emq:{{{Q}}}:"


def kill(conn, job_id: str, error: str = "SMTP 550", **kw) -> str:
    jobs.enqueue(conn, Q, f'{{"id": "{job_id}"}}', id=job_id, max_attempts=1, **kw)
    got = lanes.claim(conn, Q, 60_000) if kw.get("group") else jobs.claim(conn, Q, 60_000)
    assert got.id == job_id
    jobs.fail(conn, Q, job_id, error)
    return job_id


def stage(conn) -> None:
    """Dead flat and grouped jobs, one with an unreadable counter, a pending one, an
    active (locked) one and a ghost in dead (a member with no row)."""
    kill(conn, "j_flat")
    kill(conn, "j_flat2", error="timeout")
    kill(conn, "j_lane", group="acme")
    kill(conn, "j_bad")
    conn.client.hset(K + "job:j_bad", "attempts", "three")
    jobs.enqueue(conn, Q, "{}", id="j_active")
    assert jobs.claim(conn, Q, 60_000).id == "j_active"  # in flight: its lock is held
    jobs.enqueue(conn, Q, "{}", id="j_pending")
    conn.client.zadd(K + "dead", {"j_ghost": 1})


IDS = ["j_flat", "j_lane", "j_bad", "j_active", "j_pending", "j_ghost", "j_never", "j_flat"]


@pytest.fixture(params=["script", "function"])
def executor_conn(request, conn, connect_as):
    return conn if request.param == "script" else connect_as("function")


def test_reprocess_dry_run_writes_nothing_then_the_real_call_answers_the_same(executor_conn):
    conn = executor_conn
    stage(conn)
    before, prints = dump(conn), footprint.footprint(conn, Q)
    preview = admin.reprocess_jobs(conn, Q, IDS, dry_run=True)
    assert dump(conn) == before and footprint.footprint(conn, Q) == prints
    assert preview == {
        "j_flat": "reprocessed",
        "j_lane": "reprocessed",
        "j_bad": "bad_row",
        "j_active": "not_dead",
        "j_pending": "not_dead",
        "j_ghost": "gone",
        "j_never": "gone",
    }
    assert admin.reprocess_jobs(conn, Q, IDS) == preview
    assert conn.client.zscore(K + "pending", "j_flat") == 0
    assert conn.client.zscore(K + "g:acme:pending", "j_lane") == 0  # back to its lane
    assert conn.client.lrange(K + "ring", 0, -1) == ["acme"]
    assert conn.client.zscore(K + "dead", "j_bad") is not None  # left where it was
    assert jobs.get_job(conn, Q, "j_flat")["failures"] == "1"  # counters stay
    assert "last_error" not in jobs.get_job(conn, Q, "j_flat")
    # on the new state the dry run answers what a second real call would
    again = admin.reprocess_jobs(conn, Q, IDS, dry_run=True)
    assert again["j_flat"] == again["j_lane"] == "not_dead"
    assert admin.reprocess_jobs(conn, Q, IDS) == again


def test_remove_dry_run_writes_nothing_then_the_real_call_answers_the_same(executor_conn):
    conn = executor_conn
    stage(conn)
    before = dump(conn)
    preview = admin.remove_jobs(conn, Q, IDS, dry_run=True)
    assert dump(conn) == before
    assert preview == {
        "j_flat": "removed",
        "j_lane": "removed",
        "j_bad": "removed",
        "j_active": "locked",
        "j_pending": "removed",
        "j_ghost": "gone",
        "j_never": "gone",
    }
    assert admin.remove_jobs(conn, Q, IDS) == preview
    assert not conn.client.exists(K + "job:j_flat") and conn.client.exists(K + "job:j_active")
    assert consistency_problems(conn, Q) == []


def test_refusals_keep_the_keyspace_byte_identical(conn):
    stage(conn)
    before = dump(conn)
    assert set(admin.reprocess_jobs(conn, Q, ["j_pending", "j_active", "j_never"]).values()) == {
        "not_dead",
        "gone",
    }
    assert admin.remove_jobs(conn, Q, ["j_active", "j_never"]) == {"j_active": "locked", "j_never": "gone"}
    assert dump(conn) == before


def test_a_frames_index_and_chunks_and_duplicates(conn):
    for i in range(7):
        kill(conn, f"j_{i}", error="SMTP 550" if i % 2 else "timeout")
    found = triage.find(conn, Q, error="SMTP*")
    sent = []
    real = conn.run

    def count(name, keys, args=(), **kw):
        sent.append(len(args) - 2)  # the ids, after the two budgets
        return real(name, keys, args, **kw)

    conn.run = count
    assert admin.reprocess_jobs(conn, Q, found.index, dry_run=True, budget=2) == {
        "j_1": "reprocessed",
        "j_3": "reprocessed",
        "j_5": "reprocessed",
    }
    assert sent == [2, 1]
    assert admin.reprocess_jobs(conn, Q, found) == {
        "j_1": "reprocessed",
        "j_3": "reprocessed",
        "j_5": "reprocessed",
    }  # a frame: its index
    assert sorted(conn.client.zrange(K + "pending", 0, -1)) == ["j_1", "j_3", "j_5"]
    twice = admin.reprocess_jobs(conn, Q, ["j_0", "j_0", "j_2"])
    assert twice == {"j_0": "reprocessed", "j_2": "reprocessed"}
    assert admin.reprocess_jobs(conn, Q, []) == {} and admin.remove_jobs(conn, Q, [], dry_run=True) == {}


def test_bad_ids_are_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for call in (admin.reprocess_jobs, admin.remove_jobs):
        with pytest.raises(BadInput):
            call(nowhere, Q, "j_1")
        with pytest.raises(InvalidName):
            call(nowhere, Q, ["j_1", 7])  # an id is a string; any string is sent as it is
        with pytest.raises(InvalidName):
            call(nowhere, "bad{q}", ["j_1"])
        for budget in (0, MAX_BUDGET + 1):
            with pytest.raises(BadInput):
                call(nowhere, Q, ["j_1"], budget=budget)


def test_a_read_only_session_previews_and_refuses_the_real_call(conn, backend, request):
    stage(conn)
    url = None if backend == "fake" else server_url(backend, server_for(backend, request))
    before = dump(conn)
    for executor in ("script", "function"):
        ro = emq.connect(url, embedded="fake" if url is None else None, executor=executor, read_only=True)
        preview = admin.reprocess_jobs(conn, Q, IDS, dry_run=True)
        assert admin.reprocess_jobs(ro, Q, IDS, dry_run=True) == preview
        assert admin.remove_jobs(ro, Q, IDS, dry_run=True) == admin.remove_jobs(conn, Q, IDS, dry_run=True)
        with pytest.raises(ReadOnly):
            admin.reprocess_jobs(ro, Q, IDS)
        with pytest.raises(ReadOnly):
            admin.remove_jobs(ro, Q, IDS)
    assert dump(conn) == before


# -- A controlled retry (`admin.reprocess_dead` with a rate, a trial and a stop rule) against a real
# Worker, and the single-job moves `jobs.promote_job` and `repeat.run_now`. Both backends.
Q_triage_retry = "retry"
K_triage_retry = f"emq:{{{Q_triage_retry}}}:"


def kill_many(conn, n: int) -> list[str]:
    ids = [f"j_{i:03d}" for i in range(n)]
    for job_id in ids:
        jobs.enqueue(conn, Q_triage_retry, "{}", id=job_id, max_attempts=1)
        jobs.claim(conn, Q_triage_retry, 60_000)
        jobs.fail(conn, Q_triage_retry, job_id, "downstream 503")
    return ids


class Running:
    """A real Worker on its own connection, in a thread, until stopped."""

    def __init__(self, conn, handler):
        self.worker = emq.Worker(conn, Q_triage_retry, handler, idle_sleep=0.01)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            if not self.worker.run_one():
                self.stop.wait(0.01)

    def __enter__(self):
        self.thread.start()
        return self.worker

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


def still_failing(job_id, payload, attempts):
    raise RuntimeError("downstream 503")


def test_a_trial_halts_and_only_its_jobs_moved(conn, connect_as):
    ids = kill_many(conn, 30)
    died = {i: conn.client.zscore(K_triage_retry + "dead", i) for i in ids}
    with Running(connect_as(), still_failing) as worker:
        with pytest.raises(Halted) as caught:
            admin.reprocess_dead(conn, Q_triage_retry, trial=5, stop_if_failing=0.5, watch_s=20)
    halted = caught.value
    assert halted.moved == 5 and 3 <= halted.failed_again <= 5
    assert f"{halted.failed_again} of 5 jobs dead again" in str(halted)
    trial, rest = ids[:5], ids[5:]  # the oldest deaths went first
    for job_id in rest:  # never moved: same death, same counters
        assert conn.client.zscore(K_triage_retry + "dead", job_id) == died[job_id]
        assert jobs.get_job(conn, Q_triage_retry, job_id)["failures"] == "1"
    failed_twice = [i for i in trial if jobs.get_job(conn, Q_triage_retry, i)["failures"] == "2"]
    assert len(failed_twice) >= halted.failed_again and worker.failed >= halted.failed_again
    assert consistency_problems(conn, Q_triage_retry) == []


def test_a_trial_that_passes_moves_the_rest(conn, connect_as):
    ids = kill_many(conn, 12)
    with Running(connect_as(), lambda *job: None) as worker:
        moved = admin.reprocess_dead(conn, Q_triage_retry, trial=4, stop_if_failing=0.5, watch_s=20, budget=3)
        deadline = threading.Event()
        for _ in range(500):
            if worker.completed == len(ids):
                break
            deadline.wait(0.02)
    assert moved == 12 and conn.client.zcard(K_triage_retry + "dead") == 0
    assert worker.completed == 12


def test_a_job_that_dies_again_is_not_moved_again(conn, connect_as):
    ids = kill_many(conn, 40)
    with Running(connect_as(), still_failing):
        moved = admin.reprocess_dead(conn, Q_triage_retry, rate=1_000_000, budget=4)
    assert moved == len(ids)  # each once, though many died again


def test_the_rate_paces_the_moves(conn, monkeypatch):
    kill_many(conn, 20)
    clock = [1000.0]
    slept = []
    monkeypatch.setattr(moves.time, "monotonic", lambda: clock[0])

    def sleep(s):
        slept.append(s)
        clock[0] += s

    monkeypatch.setattr(moves.time, "sleep", sleep)
    sizes = []
    real = conn.run

    def record(name, keys, args=(), **kw):
        if name == "reprocess_dead":
            sizes.append(args[5])  # the jobs a step moves at most
        return real(name, keys, args, **kw)

    conn.run = record
    calls = []
    assert admin.reprocess_dead(conn, Q_triage_retry, rate=20, progress=lambda c, n: calls.append(n)) == 20
    assert sizes == [2] * 10  # rate / 10 a call
    # the millisecond after the run's clock read, then 20 jobs at 20/s: one (simulated) second
    assert slept[0] == 0.001 and sum(slept[1:]) == pytest.approx(1.0)
    assert calls == list(range(2, 21, 2))
    assert admin.reprocess_dead(conn, Q_triage_retry, rate=20) == 0  # nothing dead: nothing moved


def test_limit_and_the_old_path(conn):
    kill_many(conn, 9)
    assert admin.reprocess_dead(conn, Q_triage_retry, trial=2, watch_s=0.2, limit=5, budget=2) == 5
    assert conn.client.zcard(K_triage_retry + "dead") == 4
    assert admin.reprocess_dead(conn, Q_triage_retry, budget=2) == 4


def test_controlled_retry_arguments_are_checked_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for kwargs in (
        {"rate": 0},
        {"rate": -1},
        {"rate": float("nan")},
        {"rate": "50/s"},
        {"trial": 0},
        {"stop_if_failing": 0.5},
        {"trial": 3, "stop_if_failing": 1.5},
        {"trial": 3, "stop_if_failing": 0},
        {"trial": 3, "watch_s": 0},
        {"rate": True},
    ):
        with pytest.raises(BadInput):
            admin.reprocess_dead(nowhere, Q_triage_retry, **kwargs)
    ro = emq.connect("redis://127.0.0.1:1/0", cluster=False, read_only=True)
    with pytest.raises(ReadOnly):
        admin.reprocess_dead(ro, Q_triage_retry, rate=10, trial=2, stop_if_failing=0.5)


# -- promote one job, run a repeatable now -------------------------------------------------


@pytest.mark.parametrize("executor", ["script", "function"])
def test_promote_job(conn, connect_as, executor):
    c = conn if executor == "script" else connect_as("function")
    jobs.enqueue(c, Q_triage_retry, "{}", id="j_later", delay_ms=3_600_000, priority=4)
    jobs.enqueue(c, Q_triage_retry, "{}", id="j_lane", delay_ms=3_600_000, group="acme")
    jobs.enqueue(c, Q_triage_retry, "{}", id="j_now")
    before = dump(c)
    for job_id, refusal in (("j_now", NotScheduled), ("j_none", Gone)):
        with pytest.raises(refusal):
            jobs.promote_job(c, Q_triage_retry, job_id)
    c.client.hset(K_triage_retry + "job:j_lane", "priority", "high")
    with pytest.raises(BadRow):
        jobs.promote_job(c, Q_triage_retry, "j_lane")
    c.client.hset(K_triage_retry + "job:j_lane", "priority", "0")
    assert dump(c) == before
    jobs.promote_job(c, Q_triage_retry, "j_later")
    assert (
        c.client.zscore(K_triage_retry + "pending", "j_later") == 4
        and c.client.zcard(K_triage_retry + "schedule") == 1
    )
    assert jobs.get_job(c, Q_triage_retry, "j_later")["state"] == "pending"
    jobs.promote_job(c, Q_triage_retry, "j_lane")
    assert c.client.zscore(K_triage_retry + "g:acme:pending", "j_lane") == 0
    assert lanes.claim(c, Q_triage_retry, 60_000).id == "j_lane"
    assert consistency_problems(c, Q_triage_retry) == []


def test_run_now_keeps_the_cadence(conn):
    due = repeat.register(
        conn, Q_triage_retry, "nightly", 86_400_000, '{"report": true}', group="acme", max_attempts=2
    )
    job_id = repeat.run_now(conn, Q_triage_retry, "nightly")
    assert conn.client.zscore(K_triage_retry + "repeat", "nightly") == due
    row = jobs.get_job(conn, Q_triage_retry, job_id)
    assert (row["payload"], row["group"], row["max_attempts"]) == ('{"report": true}', "acme", "2")
    assert conn.client.zscore(K_triage_retry + "g:acme:pending", job_id) is not None
    assert repeat.tick(conn, Q_triage_retry) == []  # not due: the run did not count as a beat
    before = dump(conn)
    with pytest.raises(Gone):
        repeat.run_now(conn, Q_triage_retry, "weekly")
    assert dump(conn) == before
    conn.client.hset(K_triage_retry + "repeat:defs", "broken", "{not json")
    conn.client.zadd(K_triage_retry + "repeat", {"broken": due})
    before = dump(conn)
    with pytest.raises(BadRow):
        repeat.run_now(conn, Q_triage_retry, "broken")
    assert dump(conn) == before


def test_reprocess_jobs_at_a_rate(conn, monkeypatch):
    ids = kill_many(conn, 9)
    clock, slept, sizes = [0.0], [], []
    monkeypatch.setattr(moves.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(moves.time, "sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s)))
    real = conn.run

    def record(name, keys, args=(), **kw):
        sizes.append(len(args) - 2)  # the ids, after the two budgets
        return real(name, keys, args, **kw)

    conn.run = record
    seen = []
    words = admin.reprocess_jobs(conn, Q_triage_retry, ids, rate=30, progress=lambda calls, n: seen.append(n))
    assert set(words.values()) == {"reprocessed"} and sizes == [3, 3, 3] and seen == [3, 6, 9]
    assert sum(slept) == pytest.approx(9 / 30)
    with pytest.raises(BadInput):
        admin.reprocess_jobs(conn, Q_triage_retry, ids, rate=0)


# -- Do no harm, the bulk verbs: every call is bounded by the work it does (members examined AND
# bytes), whatever the sets hold -- bad rows, ghosts, ids another node wrote outside the name gate,
# 8 MB payloads, a :logs list of 200,000 lines -- and a run walks each member once, so it never
# re-walks (or re-announces) what it left behind. Both backends; the calls that could hold a server run
# under the harness's watchdog (tests/harm.py). Work is observed in the replies and the events,
# never timed.


def steps(conn) -> list[list]:
    """Every step reply `conn` gets from @reprocess_dead or its dry run, as it comes."""
    seen: list[list] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name.startswith("reprocess_dead"):
            seen.append(reply)
        return reply

    conn.run = run
    return seen


def examined(step: list) -> int:
    """The members a step examined, from its reply: moved, ghosts, bad rows, foreign ids."""
    return int(step[3]) + int(step[4]) + int(step[5]) + len(step[6])


# -- 1. bounded by the work, and each member walked once --------------------------------


def test_each_reprocess_dead_call_examines_at_most_its_budget_past_30000_bad_rows_and_ghosts(harm):
    conn, srv = harm
    bad = bad_rows_and_ghosts(conn, 15_000, 15_000)
    good = [f"j_{i:02d}" for i in range(20)]
    kill_budget(conn, good)
    seen = steps(conn)
    with Events(conn, Q_budget) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q_budget, budget=500), srv, what="reprocess_dead")
    assert (moved, moved.bad_rows, moved.ghosts, moved.foreign) == (20, 15_000, 15_000, [])
    assert all(examined(s) <= 500 for s in seen)
    # each member examined once: 30,020 members in 61 calls, not 30,000 a call
    assert sum(examined(s) for s in seen) == 30_020
    assert len(seen) == math.ceil(30_020 / 500)
    # each bad row announced once in the run, and left in dead; the ghosts dropped
    assert events.bad_rows() == Counter(bad)
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == bad
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good


@pytest.mark.parametrize("how", ["rate", "trial"])
def test_a_paced_or_trial_run_keeps_its_place_past_bad_rows(harm, how):
    conn, srv = harm
    bad = bad_rows_and_ghosts(conn, 1_500, 1_500)
    good = [f"j_{i:02d}" for i in range(12)]
    kill_budget(conn, good)
    seen = steps(conn)
    control = {"rate": {"rate": 500}, "trial": {"trial": 4, "watch_s": 0.05}}[how]
    with Events(conn, Q_budget) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q_budget, budget=400, **control), srv, what=how)
    assert moved == 12 and (moved.bad_rows, moved.ghosts) == (1_500, 1_500)
    assert all(examined(s) <= 400 for s in seen)
    assert sum(examined(s) for s in seen) == 3_012  # never re-walked
    if how == "rate":  # a step moves at most a tenth of a second's worth
        assert all(int(s[3]) <= 50 for s in seen)
    assert events.bad_rows() == Counter(bad)
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good


def limited_head(conn) -> tuple[list[str], list[str], list[str]]:
    """600 bad rows and 600 ghosts at the head of dead, five foreign ids before them (one
    naming a logs list that holds a line), then six good jobs: (bad ids, foreign ids, good)."""
    bad = bad_rows_and_ghosts(conn, 600, 600)
    foreign = [f"x{k}:logs" for k in range(5)]
    conn.client.zadd(P + "dead", dict.fromkeys(foreign, 0.5))
    conn.client.rpush(P + "job:x0:logs", "a line")
    good = [f"j_{i:02d}" for i in range(6)]
    kill_budget(conn, good)
    return bad, foreign, good


LIMITED = {
    "limit 1": {"limit": 1},
    "limit 3": {"limit": 3},
    "paced": {"limit": 3, "rate": 10},  # a step of one job at a time
    "trial": {"limit": 3, "trial": 2, "watch_s": 0.05},
}


@pytest.mark.parametrize("how", sorted(LIMITED))
def test_a_limited_reprocess_dead_moves_its_limit_past_a_head_of_leftovers_in_few_calls(harm, how):
    """A step that moves at most N jobs reads N + 1 members at first, and more only past
    the members it leaves: with 1,205 leftovers at the head it still examines up to its
    budget a call, so a run of one job is three calls, not one per leftover."""
    conn, srv = harm
    bad, foreign, good = limited_head(conn)
    control = LIMITED[how]
    limit = control["limit"]
    before = dump(conn)
    would = bounded(
        lambda: admin.reprocess_dead(conn, Q_budget, dry_run=True, **control), srv, what="the dry run"
    )
    assert dump(conn) == before
    seen = steps(conn)
    with Events(conn, Q_budget) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q_budget, **control), srv, what=how)
    assert moved == would == limit
    assert (moved.bad_rows, moved.ghosts, sorted(moved.foreign)) == (600, 600, foreign)
    assert (would.bad_rows, would.ghosts, sorted(would.foreign)) == (600, 600, foreign)
    # each member walked once, at most the budget a call, in a handful of calls
    walked = 1_205 + limit
    assert sum(examined(s) for s in seen) == walked
    assert all(examined(s) <= 500 for s in seen)
    # (a paced step moves one job, a trial's first steps its trial: a few calls more)
    assert len(seen) == math.ceil(walked / 500) if how.startswith("limit") else len(seen) <= 3 + limit
    # each bad row and foreign id announced once; the oldest good jobs moved, the rest stay
    assert events.bad_rows() == Counter(bad + foreign)
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good[:limit]
    assert conn.client.zrange(P + "dead", 0, -1)[-len(good) + limit :] == good[limit:]
    assert conn.client.lrange(P + "job:x0:logs", 0, -1) == ["a line"]


def test_a_step_of_one_job_on_a_clean_head_examines_one_member(conn):
    kill_budget(conn, [f"j_{i}" for i in range(5)])
    seen = steps(conn)
    assert admin.reprocess_dead(conn, Q_budget, limit=1) == 1
    assert [examined(s) for s in seen] == [1]
    # the place it ended at is the job it moved, and more follow it
    assert seen[0][1:3] == ["j_0", 1]


# -- 3. a budget over the maximum: refused before anything is sent ------------------------

OVER = MAX_BUDGET + 1
# one over the most a call that rewrites each job it moves or writes takes
MOVES_OVER = MAX_MOVE_BUDGET + 1
OVER_BUDGET = {
    "reprocess_dead": lambda c: admin.reprocess_dead(c, Q_budget, budget=MOVES_OVER),
    "reprocess_dead paced": lambda c: admin.reprocess_dead(c, Q_budget, budget=MOVES_OVER, rate=10),
    "reprocess_dead trial": lambda c: admin.reprocess_dead(c, Q_budget, budget=MOVES_OVER, trial=2),
    "reprocess_dead dry run": lambda c: admin.reprocess_dead(c, Q_budget, budget=MOVES_OVER, dry_run=True),
    "reprocess_jobs": lambda c: admin.reprocess_jobs(c, Q_budget, ["j_1"], budget=MOVES_OVER),
    "reprocess_jobs dry run": lambda c: admin.reprocess_jobs(
        c, Q_budget, ["j_1"], budget=MOVES_OVER, dry_run=True
    ),
    "remove_jobs": lambda c: admin.remove_jobs(c, Q_budget, ["j_1"], budget=OVER),
    "remove_jobs dry run": lambda c: admin.remove_jobs(c, Q_budget, ["j_1"], budget=OVER, dry_run=True),
    "drain": lambda c: admin.drain(c, Q_budget, budget=OVER),
    "obliterate": lambda c: admin.obliterate(c, Q_budget, budget=OVER),
    "obliterate_all": lambda c: admin.obliterate_all(c, Q_budget, budget=OVER),
    "enqueue_many": lambda c: jobs.enqueue_many(c, Q_budget, ["{}"], chunk=MOVES_OVER),
    "promote": lambda c: jobs.promote(c, Q_budget, budget=MOVES_OVER),
    "expire_leases": lambda c: jobs.expire_leases(c, Q_budget, budget=MOVES_OVER),
}
MOVES = frozenset(
    verb
    for verb in OVER_BUDGET
    if verb.split()[0] in ("reprocess_dead", "reprocess_jobs", "enqueue_many", "promote", "expire_leases")
)


@pytest.mark.parametrize("verb", sorted(OVER_BUDGET))
def test_a_budget_over_the_maximum_is_refused_before_anything_is_sent(harm, verb):
    conn, srv = harm
    kill_budget(conn, ["j_1"])
    most = MAX_MOVE_BUDGET if verb in MOVES else MAX_BUDGET
    refused_before_anything_is_sent(conn, srv, OVER_BUDGET[verb], f"{most:,}")


# -- 4. the dry run answers what the real call does ---------------------------------------


def mixed_dead(conn, logs: bool = True) -> None:
    """Seven dead members: three that move (one grouped), two bad rows, a ghost, and an
    id naming another job's logs (j_flat's, which hold a line when `logs`)."""
    kill_budget(conn, ["j_flat", "j_flat2"])
    kill_budget(conn, ["j_lane"], group="acme")
    kill_budget(conn, ["j_bad", "j_bad2"])
    conn.client.hset(P + "job:j_bad", "attempts", "three")
    conn.client.hset(P + "job:j_bad2", "priority", "1e999")
    conn.client.zadd(P + "dead", {"j_ghost": 1})
    if logs:
        conn.client.rpush(P + "job:j_flat:logs", "a line")
    conn.client.zadd(P + "dead", {"j_flat:logs": 2})


def test_the_dry_run_of_reprocess_dead_equals_the_real_call_on_the_same_state(conn, backend, request):
    mixed_dead(conn)
    before = dump(conn)
    url = server_url(backend, server_for(backend, request))
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True)
    would = admin.reprocess_dead(ro, Q_budget, budget=2, dry_run=True)
    assert dump(conn) == before  # nothing written, on a read-only session
    with pytest.raises(ReadOnly):
        admin.reprocess_dead(ro, Q_budget)
    moved = admin.reprocess_dead(conn, Q_budget, budget=2)
    assert (would, would.bad_rows, would.ghosts, would.foreign) == (3, 2, 1, ["j_flat:logs"])
    assert (moved, moved.bad_rows, moved.ghosts, moved.foreign) == (would, 2, 1, ["j_flat:logs"])
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == ["j_bad", "j_bad2", "j_flat:logs"]
    assert conn.client.lrange(P + "job:j_flat:logs", 0, -1) == ["a line"]  # never addressed
    assert admin.reprocess_dead(conn, Q_budget, limit=1, dry_run=True) == 0


def test_reprocess_all_dead_dry_run_says_what_the_real_call_moves(ip, conn, capsys):
    mixed_dead(conn, logs=False)  # (the frame of errors the dry run shows reads every member's row)
    magics.SESSION.conn = conn
    frame = ip.run_line_magic("emq", f"reprocess {Q_budget} --all-dead --dry-run")
    said = capsys.readouterr().out
    assert "3 of 7 dead jobs would move; nothing written" in said
    assert "2 bad rows (a field no transition can read) would stay" in said
    assert "1 ghost (a member with no row) would be dropped" in said
    assert "1 job with a foreign id would stay: j_flat:logs" in said
    assert list(frame.columns)[:1] == ["count"]
    ip.run_line_magic("emq", f"reprocess {Q_budget} --all-dead --rate 100000")
    said = capsys.readouterr().out
    assert "reprocessed 3 dead jobs of harm" in said
    assert "1 job with a foreign id left in dead: j_flat:logs" in said


def test_reprocess_all_dead_with_no_rate_walks_once_in_bounded_steps_past_a_logs_id(ip, conn, capsys):
    mixed_dead(conn)  # j_flat's logs list holds a line: an id naming it must never address it
    magics.SESSION.conn = conn
    frame = ip.run_line_magic("emq", f"reprocess {Q_budget} --all-dead --dry-run --budget 2")
    assert "3 of 7 dead jobs would move" in capsys.readouterr().out
    assert int(frame["count"].sum()) == 5  # the rows: not the ghost, not the logs id
    seen = steps(conn)
    ip.run_line_magic("emq", f"reprocess {Q_budget} --all-dead --yes --budget 2")
    said = capsys.readouterr().out
    assert "reprocessed 3 dead jobs of harm" in said
    assert "2 bad rows (a field no transition can read) left in dead" in said
    assert [examined(step) for step in seen] == [2, 2, 2, 1]  # each member once, 2 a call
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == ["j_bad", "j_bad2", "j_flat:logs"]
    assert conn.client.lrange(P + "job:j_flat:logs", 0, -1) == ["a line"]


# -- 5. ids another node wrote outside the name gate --------------------------------------


def foreign_dead(conn) -> list[str]:
    """Seven dead jobs, two of them with ids our gate refuses, written as another node
    writes them (the row, then the dead set)."""
    ids = [f"j_{i}" for i in range(5)]
    kill_budget(conn, ids)
    for job_id in ("ord:17", "a b"):
        conn.client.hset(
            P + "job:" + job_id,
            mapping={"payload": "{}", "attempts": "1", "failures": "1", "max_attempts": "1"}
            | {"state": "dead", "last_error": "boom"},
        )
        conn.client.zadd(P + "dead", {job_id: int(time.time() * 1000)})
    return [*ids, "ord:17", "a b"]


FOREIGN_WAYS = {
    "reprocess_dead paced": lambda c: admin.reprocess_dead(c, Q_budget, rate=1000),
    "reprocess_dead trial": lambda c: admin.reprocess_dead(c, Q_budget, trial=2, watch_s=0.05),
    "reprocess_jobs of find": lambda c: admin.reprocess_jobs(
        c, Q_budget, triage.find(c, Q_budget, error="boom").index
    ),
}


@pytest.mark.parametrize("way", sorted(FOREIGN_WAYS))
def test_foreign_ids_do_not_stop_the_rest(conn, way):
    ids = foreign_dead(conn)
    answer = FOREIGN_WAYS[way](conn)
    assert answer == 7 or answer == dict.fromkeys(ids, "reprocessed")
    assert conn.client.zcard(P + "dead") == 0
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == sorted(ids)
    assert consistency_problems(conn, Q_budget) == []


# ids another node may write: each needs its own JSON escape, or none
ODD_IDS = ["plain_01", "ord:17", "a b", 'say "hi"', "back\\slash", "tab\there", "caf\u00e9", "j.1-2"]
# ids at the edge of the foreign rule (an id ending `:logs` or `:lock` is never addressed)
EDGE_IDS = [":logs", "x:logs", "x:lock", "logs", "lock", ":lo", "x:logsy", "xlogs", "x;lock", "x:LOGS"]


def test_reprocess_dead_announces_every_job_in_json_whatever_its_id(conn):
    written_dead(conn, Q_budget, ODD_IDS)
    with Events(conn, Q_budget) as events:
        moved = admin.reprocess_dead(conn, Q_budget)
    assert moved == len(ODD_IDS)
    assert [e for e in events.seen if e["event"] == "reprocessed"] == [
        {"event": "reprocessed", "job": job_id} for job_id in ODD_IDS
    ]


def test_the_bulk_moves_leave_exactly_the_ids_the_foreign_rule_names(conn):
    written_dead(conn, Q_budget, EDGE_IDS)
    foreign = [i for i in EDGE_IDS if i.endswith((":logs", ":lock"))]
    moved = admin.reprocess_dead(conn, Q_budget)
    assert sorted(moved.foreign) == sorted(foreign) and moved == len(EDGE_IDS) - len(foreign)
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == sorted(foreign)


def test_the_filtered_dry_runs_answer_for_foreign_ids(conn):
    ids = foreign_dead(conn)
    found = triage.find(conn, Q_budget, error="boom").index
    before = dump(conn)
    assert admin.reprocess_jobs(conn, Q_budget, found, dry_run=True) == dict.fromkeys(ids, "reprocessed")
    assert admin.remove_jobs(conn, Q_budget, found, dry_run=True) == dict.fromkeys(ids, "removed")
    assert dump(conn) == before


def test_an_id_naming_another_jobs_subkey_is_never_addressed(conn):
    jobs.enqueue(conn, Q_budget, "{}", id="j_1")
    jobs.add_log(conn, Q_budget, "j_1", "keep me")
    assert jobs.claim(conn, Q_budget, 60_000).id == "j_1"  # its lock is held
    before = {k: dump(conn)[k] for k in (P + "job:j_1", P + "job:j_1:logs", P + "job:j_1:lock")}
    odd = ["j_1:logs", "j_1:lock"]
    conn.client.zadd(P + "dead", dict.fromkeys(odd, 1))
    assert admin.reprocess_jobs(conn, Q_budget, odd) == dict.fromkeys(odd, "foreign_id")
    assert admin.remove_jobs(conn, Q_budget, odd, dry_run=True) == dict.fromkeys(odd, "foreign_id")
    assert admin.remove_jobs(conn, Q_budget, odd) == dict.fromkeys(odd, "foreign_id")
    assert admin.reprocess_dead(conn, Q_budget).foreign == sorted(odd)
    conn.client.zadd(P + "pending", dict.fromkeys(odd, 1))
    assert admin.drain(conn, Q_budget) == 2  # the members leave; no key is built from them
    after = dump(conn)
    assert {k: after[k] for k in before} == before
    assert conn.client.zrange(P + "dead", 0, -1) == sorted(odd)


# -- long ids another node wrote ----------------------------------------------------------

LONG = 20_000  # an id's characters
# what one call of a move takes of them at most: an id counts ID_WORK (16) times its
# length against the byte budget, and the call ends after the member that reaches it
LONG_A_CALL = math.ceil(BYTE_BUDGET / (16 * LONG))


@pytest.mark.parametrize("verb", ["reprocess_dead", "remove_jobs", "drain"])
def test_a_move_of_long_ids_takes_a_few_a_call_as_their_work_costs(harm, verb):
    """A move hashes and copies an id at each key and member it names: 40 ids of 20 KB
    are 800 KB, under one call's byte budget counted once, and one call of them held
    Valkey 41 ms. Counted at their work, a call takes a few."""
    conn, srv = harm
    ids = written_rows(conn, Q_budget, "pending" if verb == "drain" else "dead", long_ids(40, LONG, "i"))
    calls = replies(conn, verb)
    run = {
        "reprocess_dead": lambda: admin.reprocess_dead(conn, Q_budget),
        "remove_jobs": lambda: admin.remove_jobs(conn, Q_budget, ids),
        "drain": lambda: admin.drain(conn, Q_budget),
    }[verb]
    done = bounded(run, srv, what=verb)
    assert (len(done) if verb == "remove_jobs" else done) == 40
    assert len(calls) >= 40 / LONG_A_CALL
    assert not conn.client.zrange(P + ("pending" if verb == "drain" else "dead"), 0, -1)


def test_an_id_over_max_server_id_bytes_is_foreign_left_where_it_is_and_reported_clipped(harm):
    """One id of a megabyte held Valkey 23 ms in a call (4 MB: 95 ms): a script hashes and
    copies it at each key it names. An id over MAX_SERVER_ID bytes is foreign, as one naming
    another job's :logs: no verb addresses it, a move leaves it where it is, and its report
    (the reply, the `bad_row` event) carries its first 200 bytes and its length."""
    conn, srv = harm
    edge, long = "e" * MAX_SERVER_ID, "x" * (MAX_SERVER_ID + 1)
    written_dead(conn, Q_budget, [edge, long])
    with Events(conn, Q_budget) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q_budget), srv, what="reprocess_dead")
    clipped = "x" * 200 + f"... ({MAX_SERVER_ID + 1} bytes)"
    assert (moved, moved.foreign) == (1, [clipped])
    assert [e["job"] for e in events.seen if e["event"] == "bad_row"] == [clipped]
    assert conn.client.zrange(P + "dead", 0, -1) == [long]
    assert conn.client.zrange(P + "pending", 0, -1) == [edge]
    # the bulk verbs by id answer it foreign and send it nowhere
    assert admin.remove_jobs(conn, Q_budget, [long]) == {long: "foreign_id"}
    assert conn.client.exists(P + "job:" + long)
    # a drain takes the member out of its set and builds no key from it
    conn.client.zadd(P + "pending", {long: 5})
    bounded(lambda: admin.drain(conn, Q_budget), srv, what="drain")
    assert not conn.client.zrange(P + "pending", 0, -1) and conn.client.exists(P + "job:" + long)


# -- Do no harm, ids another node wrote long: a move can count a member's id only after it has read
# it, so what a call reads of a set must follow what its byte budget may still spend, not its budget
# of members. Both backends, each call under the harness's watchdog (tests/harm.py); what a call
# reads is counted from the set reads its script sends (MONITOR on Valkey, a spy on the embedded
# server), never timed.
P_long_ids = f"emq:{{{Q_long_ids}}}:"
# a whole set read, as a count of members (a ZRANGE to -1, a ZRANGEBYSCORE with no LIMIT)
WHOLE = 10**9
# the set reads by rank or score a script may send; SORT_RO reads rows by a set's ranks
JOB_SETS = ("pending", "active", "schedule", "dead")
SET_READS = {"zrange", "zrangebyscore", "zrevrange", "zrevrangebyscore", "sort_ro", "sort"}


def asked(words: list[str]) -> int:
    """The members one read of a queue's job set asks for: its LIMIT count, else its
    rank range (0 for a read of another key: the latency history's index)."""
    if not words[1].endswith(JOB_SETS):
        return 0
    up = [w.upper() for w in words]
    if "LIMIT" in up:
        return int(words[up.index("LIMIT") + 2])
    if up[0] in ("ZRANGE", "ZREVRANGE") and not {"BYSCORE", "BYLEX"} & set(up):
        first, last = int(words[2]), int(words[3])
        return WHOLE if last < 0 else max(0, last - first + 1)
    return WHOLE


def set_reads(conn, srv, call: Callable[[], Any]) -> tuple[Any, list[int]]:
    """What `call()` answers, and the members each set read its scripts sent asked for."""
    if srv is None:
        return _spied(call)
    return _monitored(srv, call)


def _spied(call: Callable[[], Any]) -> tuple[Any, list[int]]:
    seen: list[int] = []
    mixin = fakeredis.commands_mixins.scripting_mixin.ScriptingCommandsMixin
    real = mixin._lua_redis_call

    def spy(self, runtime, expected, op, *args):
        words = [x.decode() if isinstance(x, bytes) else str(x) for x in (op, *args[:12])]
        if words[0].lower() in SET_READS:
            seen.append(asked(words))
        return real(self, runtime, expected, op, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mixin, "_lua_redis_call", spy)
        return call(), seen


END = "idattack-monitor-end"


def _monitored(srv, call: Callable[[], Any]) -> tuple[Any, list[int]]:
    seen: list[int] = []
    client = redis.Redis(host="127.0.0.1", port=srv.port, decode_responses=True)
    ready = threading.Event()

    def watch() -> None:
        with client.monitor() as m:
            ready.set()
            for event in m.listen():
                words = event["command"].split(" ")[:12]
                if words[0] == "ECHO" and END in event["command"]:
                    return
                if event.get("client_type") == "lua" and words[0].lower() in SET_READS:
                    seen.append(asked(words))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait(5)
    try:
        return call(), seen
    finally:
        client.echo(END)
        watcher.join(10)


GOOD = [f"ok_{i}" for i in range(5)]
LONG_long_ids = 12


def lap(step: Callable[[], int]) -> int:
    """`step()` called until the jobs behind the long ids moved (one lap: a lap
    announces each id it leaves once); the sum of what it answers."""
    moved = 0
    for _ in range(LONG_long_ids + len(GOOD) + 1):
        moved += step()
        if moved >= len(GOOD):
            break
    return moved


# verb: (the set it walks, the run, what stays in the set)
MOVES_long_ids: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "reprocess_dead": ("dead", lambda conn: admin.reprocess_dead(conn, Q_long_ids)),
    "reprocess_dead dry run": ("dead", lambda conn: admin.reprocess_dead(conn, Q_long_ids, dry_run=True)),
    "reprocess_dead limit 3": ("dead", lambda conn: admin.reprocess_dead(conn, Q_long_ids, limit=3)),
    "promote": ("schedule", lambda conn: lap(lambda: jobs.promote(conn, Q_long_ids))),
    "expire": ("active", lambda conn: lap(lambda: jobs.expire_leases(conn, Q_long_ids))),
    "drain": ("pending", lambda conn: admin.drain(conn, Q_long_ids)),
    "obliterate": ("dead", lambda conn: admin.obliterate_all(conn, Q_long_ids, force=True)),
}


@pytest.mark.parametrize("verb", sorted(MOVES_long_ids))
def test_a_move_past_long_ids_reads_a_set_a_chunk_at_a_time(harm, verb):
    """Twelve ids of 69 KB at the head of the set, then five jobs: an id costs a move
    16 times its bytes, so a call examines one of them, and the set read it sends must
    ask for no more than that: a call that read its budget of members first (501) copied
    35 MB out of the set to examine 70 KB (34 ms on Valkey for 300 such ids). Every
    long id is reported once, never moved, and the jobs behind them move."""
    conn, srv = harm
    key, run = MOVES_long_ids[verb]
    foreign = foreign_ids(LONG_long_ids)
    written(conn, key, foreign)
    written(conn, key, GOOD, first=100)
    if verb == "obliterate":
        conn.client.hset(P_long_ids + "meta", "paused", "1")
    with Events(conn, Q_long_ids) as events:
        done, reads = set_reads(conn, srv, lambda: bounded(lambda: run(conn), srv, what=verb))
    # a call examines one long id, or the five jobs: it reads a chunk at a time (1, 2,
    # 4...), never a budget's worth of members
    assert reads and max(reads) <= len(GOOD), reads
    left = conn.client.zrange(P_long_ids + key, 0, -1)
    if verb in ("drain", "obliterate"):
        assert left == []
        assert all(conn.client.exists(P_long_ids + "job:" + i) for i in foreign) == (verb == "drain")
        return
    moving = verb != "reprocess_dead dry run"
    moved = 3 if verb.endswith("limit 3") else len(GOOD)
    assert done == moved
    assert left == foreign + (GOOD[moved:] if moving else GOOD)
    clipped = [i[:200] + f"... ({len(i)} bytes)" for i in foreign]
    if verb.startswith("reprocess_dead"):
        assert done.foreign == clipped
    if moving:
        assert sorted(e["job"] for e in events.seen if e["event"] == "bad_row") == clipped


def test_an_id_of_max_server_id_bytes_of_multibyte_characters_moves_and_one_byte_more_stays(harm):
    """The byte length decides, on both sides: 21,845 three-byte characters and one
    byte are 65,536 bytes (moved); one more byte is foreign (left, reported clipped to
    its first whole characters within 200 bytes)."""
    conn, srv = harm
    edge = "€" * 21_845 + "a"
    over = "€" * 21_845 + "ab"
    assert len(edge.encode()) == MAX_SERVER_ID and len(over.encode()) == MAX_SERVER_ID + 1
    written_dead(conn, Q_long_ids, [edge, over])
    moved = bounded(lambda: admin.reprocess_dead(conn, Q_long_ids), srv, what="reprocess_dead")
    assert moved == 1
    assert conn.client.zrange(P_long_ids + "pending", 0, -1) == [edge]
    assert conn.client.zrange(P_long_ids + "dead", 0, -1) == [over]
    # its head whole characters: 66 euro signs (198 bytes), not 200 bytes ending mid-sign
    assert moved.foreign == ["€" * 66 + f"... ({MAX_SERVER_ID + 1} bytes)"]
    assert admin.remove_jobs(conn, Q_long_ids, [over, edge]) == {over: "foreign_id", edge: "removed"}


@pytest.mark.parametrize("verb", ["reprocess_dead", "drain"])
def test_a_chunk_after_short_ids_asks_for_at_most_eight_members(harm, verb):
    """A move learns an id's length only by reading it: 60 short members, then long ids.
    The chunks grow 1, 2, 4, 8 and stay there, so the chunk that meets the long ids
    copies at most 7 of them past the one that ends the step (at 64 a chunk, 63 ids of
    1 MB held Valkey 123 ms; at 8, 7 of them 13 ms)."""
    conn, srv = harm
    key, run = MOVES_long_ids[verb]
    short = [f"s_{i:03d}" for i in range(60)]
    pipe = conn.client.pipeline(transaction=False)
    for i, job_id in enumerate(short):  # rows no transition reads (left) or drains
        pipe.hset(P_long_ids + "job:" + job_id, mapping={"payload": "{}", "attempts": "three"})
        pipe.zadd(P_long_ids + key, {job_id: i})
    pipe.execute()
    written(conn, key, foreign_ids(LONG_long_ids), first=100)
    _, reads = set_reads(conn, srv, lambda: bounded(lambda: run(conn), srv, what=verb))
    assert reads and max(reads) <= 8, reads
    assert conn.client.zcard(P_long_ids + key) == (0 if verb == "drain" else len(short) + LONG_long_ids)


# a read of every dead row: the scan of a find, and of the error signatures
SCANS: dict[str, Callable[[Any], Any]] = {
    "find": lambda conn: triage.find(conn, Q_long_ids, min_attempts=1),
    "errors": lambda conn: triage.errors(conn, Q_long_ids),
}


@pytest.mark.parametrize("verb", sorted(SCANS))
def test_a_scan_after_short_rows_asks_for_at_most_eight_members(harm, verb):
    """A find or an errors scan reads rows a chunk at a time, and the chunk that meets
    long ids after short rows builds a key of each for every field it reads: at 64 a
    chunk, 64 ids of 1 MB after 63 short rows held Valkey 111 ms in one find step."""
    conn, srv = harm
    written_dead(conn, Q_long_ids, [f"s_{i:03d}" for i in range(60)])
    written(conn, "dead", foreign_ids(LONG_long_ids), first=10**6)
    _, reads = set_reads(conn, srv, lambda: bounded(lambda: SCANS[verb](conn), srv, what=verb))
    assert reads and max(reads) <= 8, reads


# the readers of a page of ids: a snapshot's pages, a completion's 300 ids
PAGES: dict[str, Callable[[Any], Any]] = {
    "snapshot": lambda conn: list(frames.snapshot(conn, Q_long_ids, states="dead").index),
    "completion": lambda conn: frames.members_page(conn, P_long_ids + "dead", 0, 300)[0],
    # a runbook's sample of a state: its first ids
    "runbook sample": lambda conn: runbook.members(conn, Q_long_ids, "dead", n=400)[1],
}


@pytest.mark.parametrize("reader", sorted(PAGES))
def test_a_page_of_ids_after_short_ones_asks_for_at_most_eight_long_ones_a_read(harm, reader):
    """A page is read by `@read_members`, a chunk at a time within a byte budget: one
    ZRANGE of 300 ids (100 short, then ids of 69 KB) copied them all at once (with ids
    of 1 MB, 176 ms)."""
    conn, srv = harm
    short = [f"s_{i:03d}" for i in range(100)]
    written(conn, "dead", short)
    written(conn, "dead", foreign_ids(LONG_long_ids), first=10**6)
    client_side: list[tuple] = []
    real = conn.command

    def command(*parts):
        if str(parts[0]).upper().startswith(("ZRANGE", "ZREVRANGE")):
            client_side.append(parts[:4])
        return real(*parts)

    conn.command = command
    got, reads = set_reads(conn, srv, lambda: bounded(lambda: PAGES[reader](conn), srv, what=reader))
    assert got[:100] == short and len(got) == 100 + LONG_long_ids
    assert client_side == [] and reads and max(reads) <= 8, (client_side, reads)


@pytest.mark.parametrize("verb", ["remove_jobs", "reprocess_jobs"])
@pytest.mark.parametrize("char", ["a", "\N{GRINNING FACE}"])
def test_a_verb_by_id_sends_a_call_about_the_ids_it_can_take(harm, verb, char):
    """A script counts an id 16 times its bytes, so a call takes about one id of 64 KB:
    ids sent past what it takes go again with the next call. Counted by characters,
    once, a call was sent 16 ASCII ids of 64 KB (64 of four-byte characters: 4 MB a
    call, 10 ms of the server's time to parse) to take one. Each call is sent about
    what it takes, and every id is answered."""
    conn, srv = harm
    per = MAX_SERVER_ID // len(char.encode())
    ids = [f"{i:04d}" + char * (per - 4 // len(char.encode()) - 1) for i in range(6)]
    ids = [i + "a" * (MAX_SERVER_ID - len(i.encode())) for i in ids]
    assert {len(i.encode()) for i in ids} == {MAX_SERVER_ID}
    written_dead(conn, Q_long_ids, ids)
    sent: list[tuple[int, int]] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name == verb:
            sent.append((len(args) - 2, len(reply)))
        return reply

    conn.run = run
    words = bounded(lambda: getattr(admin, verb)(conn, Q_long_ids, ids), srv, what=verb)
    assert set(words.values()) == {"removed" if verb == "remove_jobs" else "reprocessed"}
    # each call is answered for what it was sent, within one id
    assert all(n - answered <= 1 for n, answered in sent), sent
    assert sum(n for n, _ in sent) <= len(ids) + len(sent)


def test_a_bad_row_event_names_its_long_id_whole_once_and_clipped_in_its_error(harm):
    """A bad row whose id (another node's) is 60 KB of bytes that are not UTF-8: its
    event carries the id whole in `job` (a person may remove that job by it) and clipped
    in `error`, the refusal's text, so the event's repair to UTF-8 text runs over the
    id once, not twice."""
    conn, srv = harm
    raw = b"\xff" * 60_000
    job_id = raw.decode("utf-8", "surrogateescape")
    conn.client.hset(P_long_ids.encode() + b"job:" + raw, mapping={"payload": "{}", "attempts": "three"})
    conn.client.zadd(P_long_ids.encode() + b"dead", {raw: 1})
    with Events(conn, Q_long_ids) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q_long_ids), srv, what="reprocess_dead")
    assert (moved, moved.bad_rows) == (0, 1)
    (event,) = [e for e in events.seen if e["event"] == "bad_row"]
    assert event["job"] == "\\xff" * 60_000
    assert event["error"] == "EMQSTATE bad row attempts in " + "\\xff" * 200 + "... (60000 bytes)"
    assert conn.client.zrange(P_long_ids + "dead", 0, -1) == [job_id]


@pytest.mark.parametrize("verb", ["reprocess_dead", "promote", "drain"])
def test_foreign_ids_at_the_head_hold_the_jobs_behind_them_a_few_calls(harm, verb):
    """A foreign id names no key and is reported clipped: a move only reads it, so it
    costs its bytes once. Counted as an id addressed (16 times), each call passed one
    id of 69 KB: 30 of them held the jobs behind them 30 calls (a worker's promote: 30
    of its loops; 10,000 such ids, 10,000 loops). A call now passes about 15."""
    conn, srv = harm
    key = {"reprocess_dead": "dead", "promote": "schedule", "drain": "pending"}[verb]
    written(conn, key, foreign_ids(30))
    written(conn, key, GOOD, first=100)
    calls = replies(conn, verb)
    if verb == "promote":
        bounded(lambda: lap(lambda: jobs.promote(conn, Q_long_ids)), srv, what=verb)
    else:
        bounded(lambda: getattr(admin, verb)(conn, Q_long_ids), srv, what=verb)
    assert len(calls) <= 3, len(calls)
    left = conn.client.zcard(P_long_ids + key)
    assert left == (0 if verb == "drain" else 30)


# -- Do no harm, the reads (bench/harm.py found each): a job's long `:logs` list is read in pages
# bounded by lines and bytes; a payload too large for a script is read with a plain HGET, never
# inside one; a snapshot's call stops at about a byte budget; find, errors and the snapshot pass
# over a member whose id names another job's `:logs` list (its "row" key is a list); a runbook finds
# its queue without a SCAN. Both backends, every call that could hold a server under the harness's
# watchdog (tests/harm.py). Work is observed in the replies, never timed.


# -- a member whose id names another job's :logs list ------------------------------------


def test_the_dead_run_leaves_an_id_naming_another_jobs_logs(dead_with_a_logs_id):
    conn, srv, rows = dead_with_a_logs_id
    said = bounded(lambda: admin.reprocess_dead(conn, Q_reads, dry_run=True), srv, what="reprocess_dead")
    assert int(said) == len(rows) and said.foreign == ["j_0:logs"]
