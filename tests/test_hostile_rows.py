"""The per-job verbs against keys of another type where a job's own should be (the third
hostile pass): another client wrote a list, a string or a set where the job's row
`emq:{q}:job:<id>` (a hash) should be, or a string where its `:logs` list should be.
Every verb refuses typed (`BadRow`, field `type`: a raw WRONGTYPE reached the operator
before, a traceback in the magic and no refusal a caller catches) and writes nothing;
`remove_job` removes the key (jobs.remove_job says why). A lane's meta of another type
refuses a reprocess or a promote into it the same way.

On both backends and both executors (`script` and `function`)."""

from __future__ import annotations

import pytest
from helpers import dump, kept_conn

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import BadRow, Gone
from emq_notebook.keyspace import queue_key

Q = "mail"
P = f"emq:{{{Q}}}:"

# another client's key of each type
OTHER = {
    "list": lambda c, k: c.rpush(k, "another client's"),
    "string": lambda c, k: c.set(k, "another client's"),
    "set": lambda c, k: c.sadd(k, "another client's"),
}


@pytest.fixture
def conn(backend, request, kept_clients):
    return kept_conn(kept_clients, backend, request)


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


@pytest.mark.parametrize("kind", sorted(OTHER))
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_row_of_another_type_is_refused_typed_nothing_written(conn, ex, verb, kind):
    make, call = VERBS[verb]
    jid = make(conn)
    turned(conn, P + "job:" + jid, kind)
    before = dump(conn)
    with pytest.raises(BadRow, match="type") as refused:
        call(ex, jid)
    assert refused.value.note.startswith("field type in")
    assert dump(conn) == before


@pytest.mark.parametrize("verb", ["log", "logs"])
def test_logs_of_another_type_are_refused_typed_nothing_written(conn, ex, verb):
    make, call = VERBS[verb]
    jid = make(conn)
    jobs.add_log(conn, Q, jid, "first")
    turned(conn, P + "job:" + jid + ":logs", "string")
    before = dump(conn)
    with pytest.raises(BadRow, match="type") as refused:
        call(ex, jid)
    assert refused.value.note == f"field type in logs {jid}"
    assert dump(conn) == before


def test_checks_before_the_type_keep_their_refusals(conn, ex):
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
def test_a_move_into_a_lane_whose_meta_is_of_another_type_is_refused_typed(conn, ex, how):
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


def test_the_bulk_reprocess_answers_bad_row_for_a_lane_meta_of_another_type(conn, ex):
    jid = dead_job(conn, group="acme")
    turned(conn, P + "g:acme:meta", "string")
    before = dump(conn)
    assert admin.reprocess_jobs(ex, Q, [jid], dry_run=True) == {jid: "bad_row"}
    assert admin.reprocess_jobs(ex, Q, [jid]) == {jid: "bad_row"}
    assert dump(conn) == before


def test_the_due_promotion_passes_over_a_lane_meta_of_another_type(conn, ex):
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
def test_the_bulk_reprocess_answers_bad_row_for_a_row_of_another_type(conn, ex, kind):
    jid = dead_job(conn)
    turned(conn, P + "job:" + jid, kind)
    before = dump(conn)
    assert admin.reprocess_jobs(ex, Q, [jid], dry_run=True) == {jid: "bad_row"}
    assert admin.reprocess_jobs(ex, Q, [jid]) == {jid: "bad_row"}
    assert dump(conn) == before


@pytest.mark.parametrize("kind", sorted(OTHER))
def test_remove_job_removes_a_row_of_another_type(conn, ex, kind):
    """The one verb that clears a row no other can read: the key is the job's, under the
    queue's own keyspace, and the operator named it (jobs.remove_job)."""
    jid = dead_job(conn)
    turned(conn, P + "job:" + jid, kind)
    jobs.remove_job(ex, Q, jid)
    assert conn.client.exists(P + "job:" + jid) == 0
    assert conn.client.zscore(queue_key(Q, "dead"), jid) is None
    with pytest.raises(Gone):
        jobs.remove_job(ex, Q, jid)


def test_remove_job_leaves_a_locked_row_of_another_type(conn, ex):
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
def test_a_move_into_a_lane_paused_long_never_copies_its_meta(harm, monkeypatch, how):
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
    harm, monkeypatch, field
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
