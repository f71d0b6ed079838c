"""Moves by the job (emq_notebook/moves.py), on both backends: reprocess_dead, paced and
controlled, and reprocess_jobs / remove_jobs by id, each call bounded by members and bytes
past bad rows, ghosts and foreign or long ids.

Acting on what was found: `admin.reprocess_jobs` and `admin.remove_jobs` by id, and
their dry runs (a read-only script answering the same words, writing nothing).
Both backends, both executors that run scripts."""

from __future__ import annotations

import pytest
from helpers import consistency_problems, dump, server_for, server_url

import emq_notebook as emq
from emq_notebook import admin, footprint, jobs, lanes, triage
from emq_notebook.defaults import MAX_BUDGET
from emq_notebook.errors import BadInput, InvalidName, ReadOnly

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
