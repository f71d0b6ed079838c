"""Valkey Cluster: a local 3-primary cluster (tests/cluster.py). The operator
plane's own tests also run here (test_admin.py, test_jobs.py: `[cluster]`);
this file checks what only a cluster has: queues spread over primaries, the
function library on each, auto-detection, `%emq connect --cluster`, and a
runbook under nbval."""

from __future__ import annotations

import pytest
import redis
from helpers import open_conn
from nbtools import ROOT, runbooks
from redis.cluster import RedisCluster

import emq_notebook as emq
from emq_notebook import admin, frames, jobs, lanes, scripts

QUEUES = [f"q{i}" for i in range(12)]


@pytest.fixture
def conn(cluster):
    return open_conn("cluster", cluster)


def owners(conn, queues) -> set[str]:
    """The primaries that hold these queues' slots."""
    return {conn.client.get_node_from_key(f"emq:{{{q}}}:meta").name for q in queues}


def test_a_cluster_node_is_recognised_and_each_queue_lives_on_one_slot(conn, cluster):
    assert conn.cluster and isinstance(conn.client, RedisCluster)
    assert not emq.connect(cluster.url, cluster=False).cluster
    jobs.enqueue(conn, "mail", "{}", id="j_1", dedup="once", group="acme")
    jobs.add_log(conn, "mail", "j_1", "line")
    slots = {conn.client.keyslot(k) for k in conn.scan("emq:{mail}:*")}
    assert len(slots) == 1 and len(conn.scan("emq:{mail}:*")) >= 5


def test_queues_and_counts_span_every_primary(conn):
    for i, q in enumerate(QUEUES):
        for _ in range(i % 3 + 1):
            jobs.enqueue(conn, q, "{}")
    assert len(owners(conn, QUEUES)) == 3  # spread over all three
    assert frames.queues(conn) == sorted(QUEUES)
    counts = frames.counts(conn)
    assert list(counts.index) == sorted(QUEUES)
    assert counts.loc["q5", "pending"] == 3 and int(counts["pending"].sum()) == 24


def test_the_function_library_is_on_every_primary(cluster):
    conn = open_conn("cluster", cluster, executor="function")
    for q in QUEUES[:6]:
        jobs.enqueue(conn, q, "{}", id="j_1")
        assert jobs.claim(conn, q, 1000)[0] == "j_1"
    version, _ = scripts.library()
    answers = conn.client.execute_command("FCALL_RO", "emq_version", 0, target_nodes=RedisCluster.PRIMARIES)
    assert sorted(answers.values()) == [version] * 3
    # one primary loses the library: a new connection finds out and loads it again
    node = conn.client.get_primaries()[1]
    redis.Redis(host=node.host, port=node.port).function_flush()
    again = emq.connect(cluster.url, executor="function")
    for q in QUEUES[6:]:
        jobs.enqueue(again, q, "{}", id="j_2")
        assert jobs.claim(again, q, 1000)[0] == "j_2"


def test_bulk_verbs_across_the_cluster(conn):
    for q in QUEUES[:4]:
        for i in range(30):
            jobs.enqueue(conn, q, "{}", group="g" if i % 2 else None, max_attempts=1)
        lanes.set_limit(conn, q, "g", 30)
        while got := jobs.claim(conn, q, 60_000) or lanes.claim(conn, q, 60_000):
            jobs.fail(conn, q, got[0], "boom")
        assert admin.reprocess_dead(conn, q, budget=7) == 30
        assert admin.drain(conn, q, budget=7) == 30
        admin.pause(conn, q)
        assert admin.obliterate_all(conn, q, budget=7) >= 1
    assert frames.queues(conn) == []


def test_the_magic_connects_with_cluster(cluster, ip):
    from IPython.utils.capture import capture_output

    from emq_notebook.magics import SESSION

    try:
        with capture_output() as out:
            ip.run_cell(f"%emq connect --cluster {cluster.url}")
            ip.run_cell("%emq enqueue spread '{}' --id j_1")
            result = ip.run_cell("%emq status spread")
        assert SESSION.conn.cluster and "connected:" in out.stdout
        assert result.result.loc["spread", "pending"] == 1
    finally:
        SESSION.conn = emq.connect(embedded="fake")


def test_a_runbook_runs_on_the_cluster(cluster, tmp_path):
    emq.connect(cluster.url).client.flushall()  # an empty server: the demo's queue is its own
    demo = ROOT / "notebooks" / "demos" / "04-retire-a-queue.ipynb"
    run = runbooks([demo], tmp_path, {"EMQ_URL": cluster.url})
    assert run.returncode == 0, run.stdout[-4000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_a_thousand_queues_open_and_refresh_in_a_fixed_number_of_pipelines(conn, monkeypatch):
    """1,000 queues over the three primaries: the dashboard opens and refreshes and
    `frames.health` answers all of them, each read in ONE pipeline of one `@read_watch`
    call a queue (redis-py's cluster pipeline sends each primary its calls at once, each
    to the node holding its queue's slot), as for 10 queues, and no refresh walks the
    keyspace."""
    from emq_notebook.connector import Pipeline
    from emq_notebook.widgets import Dashboard

    many = [f"m{i:04d}" for i in range(1000)]
    pipe = conn.pipeline()
    for q in many:
        jobs.enqueue(conn, q, "{}", pipeline=pipe)
    pipe.execute()
    assert len(owners(conn, many)) == 3
    runs: list[int] = []
    real = Pipeline.execute

    def counted(self, *args, **kw):
        replies = real(self, *args, **kw)
        runs.append(len(replies))
        return replies

    monkeypatch.setattr(Pipeline, "execute", counted)
    scans = []
    real_scan = conn.directory._scan_once
    monkeypatch.setattr(conn.directory, "_scan_once", lambda sweep: (scans.append(1), real_scan(sweep)))
    d = Dashboard(conn, auto=False)
    try:
        assert len(d.overview) == 1000 and set(d.overview["verdict"]) == {"growing"}
        opened = len(scans)
        runs.clear()
        d.refresh()
        assert len(scans) == opened  # no SCAN on a refresh
        assert runs == [1000]
        runs.clear()
        h = frames.health(conn)
        assert list(h.index) == sorted(many) and (h["pending"] == 1).all() and runs == [1000]
        # the same one pipeline for 10 queues as for 1,000
        runs.clear()
        frames.health(conn, many[:10])
        assert runs == [10]
    finally:
        d.close()


def test_each_audit_stream_lives_in_its_queues_slot(conn):
    """pause's and remove's entries are written by their transitions' twins (one slot, one
    call), drain's `started` entry before its first call and its closing one after its
    reply; `audit.read` of every queue finds the streams on every primary."""
    from emq_notebook import audit
    from emq_notebook.keyspace import audit_key

    for q in QUEUES:
        admin.pause(conn, q)
        jobs.enqueue(conn, q, "{}", id="j")
        jobs.remove_job(conn, q, "j")
        admin.drain(conn, q)
        assert conn.client.keyslot(audit_key(q)) == conn.client.keyslot(f"emq:{{{q}}}:meta")
        assert conn.client.xlen(audit_key(q)) == 4
    assert len(owners(conn, QUEUES)) == 3
    read = audit.read(conn)
    assert sorted(set(read.queue)) == sorted(QUEUES) and set(read.verb) == {"pause", "remove", "drain"}
