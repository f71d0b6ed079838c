"""A controlled retry (`admin.reprocess_dead` with a rate, a trial and a stop rule)
against a real Worker, and the single-job moves `jobs.promote_job` and
`repeat.run_now`. Both backends."""

from __future__ import annotations

import threading

import pytest
from helpers import consistency_problems, dump

import emq_notebook as emq
from emq_notebook import admin, jobs, lanes, moves, repeat
from emq_notebook.errors import BadInput, BadRow, Gone, Halted, NotScheduled, ReadOnly

Q = "retry"
K = f"emq:{{{Q}}}:"


def kill_many(conn, n: int) -> list[str]:
    ids = [f"j_{i:03d}" for i in range(n)]
    for job_id in ids:
        jobs.enqueue(conn, Q, "{}", id=job_id, max_attempts=1)
        jobs.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, job_id, "downstream 503")
    return ids


class Running:
    """A real Worker on its own connection, in a thread, until stopped."""

    def __init__(self, conn, handler):
        self.worker = emq.Worker(conn, Q, handler, idle_sleep=0.01)
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
    died = {i: conn.client.zscore(K + "dead", i) for i in ids}
    with Running(connect_as(), still_failing) as worker:
        with pytest.raises(Halted) as caught:
            admin.reprocess_dead(conn, Q, trial=5, stop_if_failing=0.5, watch_s=20)
    halted = caught.value
    assert halted.moved == 5 and 3 <= halted.failed_again <= 5
    assert f"{halted.failed_again} of 5 jobs dead again" in str(halted)
    trial, rest = ids[:5], ids[5:]  # the oldest deaths went first
    for job_id in rest:  # never moved: same death, same counters
        assert conn.client.zscore(K + "dead", job_id) == died[job_id]
        assert jobs.get_job(conn, Q, job_id)["failures"] == "1"
    failed_twice = [i for i in trial if jobs.get_job(conn, Q, i)["failures"] == "2"]
    assert len(failed_twice) >= halted.failed_again and worker.failed >= halted.failed_again
    assert consistency_problems(conn, Q) == []


def test_a_trial_that_passes_moves_the_rest(conn, connect_as):
    ids = kill_many(conn, 12)
    with Running(connect_as(), lambda *job: None) as worker:
        moved = admin.reprocess_dead(conn, Q, trial=4, stop_if_failing=0.5, watch_s=20, budget=3)
        deadline = threading.Event()
        for _ in range(500):
            if worker.completed == len(ids):
                break
            deadline.wait(0.02)
    assert moved == 12 and conn.client.zcard(K + "dead") == 0
    assert worker.completed == 12


def test_a_job_that_dies_again_is_not_moved_again(conn, connect_as):
    ids = kill_many(conn, 40)
    with Running(connect_as(), still_failing):
        moved = admin.reprocess_dead(conn, Q, rate=1_000_000, budget=4)
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
    assert admin.reprocess_dead(conn, Q, rate=20, progress=lambda c, n: calls.append(n)) == 20
    assert sizes == [2] * 10  # rate / 10 a call
    # the millisecond after the run's clock read, then 20 jobs at 20/s: one (simulated) second
    assert slept[0] == 0.001 and sum(slept[1:]) == pytest.approx(1.0)
    assert calls == list(range(2, 21, 2))
    assert admin.reprocess_dead(conn, Q, rate=20) == 0  # nothing dead: nothing moved


def test_limit_and_the_old_path(conn):
    kill_many(conn, 9)
    assert admin.reprocess_dead(conn, Q, trial=2, watch_s=0.2, limit=5, budget=2) == 5
    assert conn.client.zcard(K + "dead") == 4
    assert admin.reprocess_dead(conn, Q, budget=2) == 4


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
            admin.reprocess_dead(nowhere, Q, **kwargs)
    ro = emq.connect("redis://127.0.0.1:1/0", cluster=False, read_only=True)
    with pytest.raises(ReadOnly):
        admin.reprocess_dead(ro, Q, rate=10, trial=2, stop_if_failing=0.5)


# -- promote one job, run a repeatable now -------------------------------------------------


@pytest.mark.parametrize("executor", ["script", "function"])
def test_promote_job(conn, connect_as, executor):
    c = conn if executor == "script" else connect_as("function")
    jobs.enqueue(c, Q, "{}", id="j_later", delay_ms=3_600_000, priority=4)
    jobs.enqueue(c, Q, "{}", id="j_lane", delay_ms=3_600_000, group="acme")
    jobs.enqueue(c, Q, "{}", id="j_now")
    before = dump(c)
    for job_id, refusal in (("j_now", NotScheduled), ("j_none", Gone)):
        with pytest.raises(refusal):
            jobs.promote_job(c, Q, job_id)
    c.client.hset(K + "job:j_lane", "priority", "high")
    with pytest.raises(BadRow):
        jobs.promote_job(c, Q, "j_lane")
    c.client.hset(K + "job:j_lane", "priority", "0")
    assert dump(c) == before
    jobs.promote_job(c, Q, "j_later")
    assert c.client.zscore(K + "pending", "j_later") == 4 and c.client.zcard(K + "schedule") == 1
    assert jobs.get_job(c, Q, "j_later")["state"] == "pending"
    jobs.promote_job(c, Q, "j_lane")
    assert c.client.zscore(K + "g:acme:pending", "j_lane") == 0
    assert lanes.claim(c, Q, 60_000).id == "j_lane"
    assert consistency_problems(c, Q) == []


def test_run_now_keeps_the_cadence(conn):
    due = repeat.register(conn, Q, "nightly", 86_400_000, '{"report": true}', group="acme", max_attempts=2)
    job_id = repeat.run_now(conn, Q, "nightly")
    assert conn.client.zscore(K + "repeat", "nightly") == due
    row = jobs.get_job(conn, Q, job_id)
    assert (row["payload"], row["group"], row["max_attempts"]) == ('{"report": true}', "acme", "2")
    assert conn.client.zscore(K + "g:acme:pending", job_id) is not None
    assert repeat.tick(conn, Q) == []  # not due: the run did not count as a beat
    before = dump(conn)
    with pytest.raises(Gone):
        repeat.run_now(conn, Q, "weekly")
    assert dump(conn) == before
    conn.client.hset(K + "repeat:defs", "broken", "{not json")
    conn.client.zadd(K + "repeat", {"broken": due})
    before = dump(conn)
    with pytest.raises(BadRow):
        repeat.run_now(conn, Q, "broken")
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
    words = admin.reprocess_jobs(conn, Q, ids, rate=30, progress=lambda calls, n: seen.append(n))
    assert set(words.values()) == {"reprocessed"} and sizes == [3, 3, 3] and seen == [3, 6, 9]
    assert sum(slept) == pytest.approx(9 / 30)
    with pytest.raises(BadInput):
        admin.reprocess_jobs(conn, Q, ids, rate=0)
