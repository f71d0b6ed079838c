"""Helpers the tests share: connections to each backend, the keyspace dump used
for byte-compares, and the consistency check of a queue. Fixtures live in
conftest.py; tests import these from here (`from helpers import dump`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import emq_notebook as emq
from emq_notebook.footprint import keyspace
from emq_notebook.keyspace import AUDIT_PREFIX

BACKENDS = ("fake", "valkey")
WITH_CLUSTER = (*BACKENDS, "cluster")


def server_url(backend: str, srv) -> str | None:
    if backend == "valkey":
        return f"redis://127.0.0.1:{srv.port}/0"
    return srv.url if backend == "cluster" else None


def open_conn(backend: str, srv, executor: str = "script") -> emq.Connection:
    """A flushed connection; a cluster node is recognised by `connect` itself."""
    if backend == "fake":
        conn = emq.connect(embedded="fake", executor=executor)
    else:
        conn = emq.connect(server_url(backend, srv), executor=executor)
        assert conn.cluster == (backend == "cluster")
    conn.client.flushall()
    conn.client.function_flush()
    return conn


def server_for(backend: str, request):
    return request.getfixturevalue(backend) if backend in ("valkey", "cluster") else None


def dump(conn) -> dict:
    """The whole keyspace as plain data, for byte-compares before and after:
    {key: (type, value, has a time to live)} (`emq_notebook.footprint.keyspace`).
    The audit trail's streams (`emq:audit:{q}`) are left out: a refusal changes no
    key of the queue and still leaves its record there."""
    return {k: v for k, v in keyspace(conn, expiry=True).items() if not k.startswith(AUDIT_PREFIX)}


def keys_of(conn, q: str) -> list[str]:
    return sorted(conn.client.scan_iter(match=f"emq:{{{q}}}:*", count=1000))


def consistency_problems(conn, q: str) -> list[str]:
    """What is structurally wrong with queue `q` (empty when sound): every row in exactly
    one state set or lane, every id in a set has a row, no orphan `:logs` / `:lock`, each
    lane's active count equals its jobs in flight, every dedup key held by a live job."""
    r, prefix = conn.client, f"emq:{{{q}}}:"
    keys = set(r.scan_iter(match=prefix + "*", count=1000))
    rows = {
        k[len(prefix) + 4 :]
        for k in keys
        if k.startswith(prefix + "job:") and not k.endswith((":logs", ":lock"))
    }
    problems = [
        f"orphan {k}" for k in keys if k.endswith((":logs", ":lock")) and k[len(prefix) + 4 : -5] not in rows
    ]
    # the reads go in a few pipelined round trips; what is read is the same
    pipe = r.pipeline(transaction=False)
    states = ("pending", "active", "schedule", "dead")
    for state in states:
        pipe.zrange(prefix + state, 0, -1)
    pipe.smembers(prefix + "groups")
    pipe.hgetall(prefix + "dedup")
    *members, groups, dedup = pipe.execute()
    place: dict[str, list[str]] = {}
    for state, ids in zip(states, members, strict=True):
        for m in ids:
            place.setdefault(m, []).append(state)
    groups = sorted(groups)
    for g in groups:
        pipe.zrange(prefix + f"g:{g}:pending", 0, -1)
        pipe.hget(prefix + f"g:{g}:meta", "active")
    lane_reads = pipe.execute()
    for g, ids in zip(groups, lane_reads[0::2], strict=True):
        for m in ids:
            place.setdefault(m, []).append(f"lane {g}")
    problems += [f"{i} is in {where}" for i, where in place.items() if len(where) != 1]
    problems += [f"{i} is in a set but has no row" for i in set(place) - rows]
    problems += [f"row {i} is in no set" for i in rows - set(place)]
    flying = [i for i in place if place[i] == ["active"] and i in rows]
    for i in flying:
        pipe.hget(prefix + "job:" + i, "group")
    in_flight: dict[str, int] = {}
    for g in pipe.execute():
        if g:
            in_flight[g] = in_flight.get(g, 0) + 1
    for g, counted in zip(groups, lane_reads[1::2], strict=True):
        if int(counted or 0) != in_flight.get(g, 0):
            problems.append(f"lane {g} counts {int(counted or 0)} in flight, holds {in_flight.get(g, 0)}")
    problems += [f"dedup {k} held by {v}, which has no row" for k, v in dedup.items() if v not in rows]
    return problems


def notebook_html(ip, value) -> str:
    """`value` as a notebook's kernel renders it to HTML (its HTML formatter on, as
    there; a terminal IPython keeps it off)."""
    as_html = ip.display_formatter.formatters["text/html"]
    enabled, as_html.enabled = as_html.enabled, True
    try:
        return as_html(value)
    finally:
        as_html.enabled = enabled


def kept_conn(clients: dict, backend: str, request) -> emq.Connection:
    """A module's one connection for `backend` (kept in the module's `clients` dict:
    opened, and the function library loaded, once), on a flushed keyspace, script executor."""
    if backend not in clients:
        clients[backend] = open_conn(backend, server_for(backend, request))
    clients[backend].client.flushall()
    return clients[backend].with_executor("script")


def say_identity(monkeypatch, values) -> None:
    """Records made meanwhile carry `values(conn)` as their identity's values (in
    `AUDIT_WHO`'s order): read by the recorder for an entry its transition's twin writes,
    and by `audit.identity` for one written after."""
    from emq_notebook.audit import identities, recorder

    monkeypatch.setattr(recorder, "_who_values", values)
    monkeypatch.setattr(identities, "_who_values", values)


def minute_now(conn) -> int:
    """The server's clock in whole minutes (the metrics' buckets, the latency index)."""
    seconds, _ = conn.client.time()
    return seconds // 60


def claim_new(conn, q: str) -> None:
    """Enqueue a job on `q` and claim it: one claim, which records its metrics and latency
    (and trims them)."""
    from emq_notebook import jobs

    jobs.enqueue(conn, q, "{}")
    assert jobs.claim(conn, q, 60_000) is not None


def until(condition: Callable[[], object], seconds: float = 10.0) -> object:
    """Wait for `condition()` (a background thread's work), at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def worked(conn, q: str, n: int, fail: int = 0, error: str = "boom") -> list[str]:
    """Enqueue `n` jobs on `q` and work them: the first `fail` raise `error` (one
    attempt, so dead)."""
    from emq_notebook import Worker, jobs

    ids = [jobs.enqueue(conn, q, str(i), max_attempts=1) for i in range(n)]
    broken = set(ids[:fail])

    def handler(job_id, payload, attempts):
        if job_id in broken:
            raise RuntimeError(error)

    Worker(conn, q, handler).run(until_empty=True)
    return ids


def failed(conn, q: str, n: int = 3, error: str = "boom") -> list[str]:
    """`n` dead jobs on `q` (payload `{"n": i}`), each claimed and failed with `error`."""
    from emq_notebook import jobs

    ids = []
    for i in range(n):
        jid = jobs.enqueue(conn, q, f'{{"n": {i}}}', max_attempts=1)
        jobs.claim(conn, q, 60_000)
        jobs.fail(conn, q, jid, error)
        ids.append(jid)
    return ids


@contextlib.contextmanager
def lost_server(backend: str) -> Iterator[emq.Connection]:
    """A connection that has lost its server: the embedded one emulating a lost
    connection, or a real client at a port where nothing listens."""
    from emq_notebook import connector

    if backend == "fake":
        conn = emq.connect(embedded="fake")
        connector.fake_server().connected = False
    else:
        conn = emq.connect("redis://127.0.0.1:1/0")
    try:
        yield conn
    finally:
        connector.fake_server().connected = True
