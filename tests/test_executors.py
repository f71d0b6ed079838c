"""The native twin: the function executor against the script executor, and the
native line byte for byte."""

import re

import pytest
import redis
from helpers import dump

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import NotDead

Q = "mail"


def restore(conn, snapshot):
    """Put a dumped keyspace back exactly (scores and fields included)."""
    r = conn.client
    r.flushall()
    for key, (kind, val, has_ttl) in snapshot.items():
        if kind == "hash":
            r.hset(key, mapping=val)
        elif kind == "zset":
            r.zadd(key, dict(val))
        elif kind == "list":
            r.rpush(key, *val)
        elif kind == "set":
            r.sadd(key, *val)
        else:
            r.set(key, val)
        if has_ttl:
            r.pexpire(key, 60_000)


def flat_state(conn):
    ids = {}
    ids["dead"] = jobs.enqueue(conn, Q, "d", id="j_dead", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_dead", "boom")
    ids["pending"] = jobs.enqueue(conn, Q, "p", id="j_pending")
    return ids


CASES = [
    ("reprocess dead", lambda c: jobs.reprocess_job(c, Q, "j_dead")),
    ("reprocess pending", lambda c: jobs.reprocess_job(c, Q, "j_pending")),
    ("reprocess missing", lambda c: jobs.reprocess_job(c, Q, "j_none")),
    ("claim", lambda c: jobs.claim(c, Q, 60_000)[:2]),
    ("claim paused", lambda c: (admin.pause(c, Q), jobs.claim(c, Q, 60_000))),
    ("update_data", lambda c: jobs.update_data(c, Q, "j_pending", "new")),
    ("remove", lambda c: jobs.remove_job(c, Q, "j_pending")),
    ("drain", lambda c: admin.drain(c, Q)),
]


def outcome(call, conn):
    try:
        return ("ok", call(conn))
    except Exception as exc:
        return ("refused", type(exc).__name__, getattr(exc, "reason", None))


def strip_volatile(snapshot):
    # the claim writes a lease deadline and `claimed_at` from the server clock, and
    # records a wait whose bucket depends on it: compare their presence and counts
    def steady(key, kind, v):
        if key.endswith(":active"):
            return [(m, 0) for m, _ in v]
        if ":lat:wait:" in key or ":lat:run:" in key:
            return sum(int(n) for n in v.values())
        if kind == "hash" and "claimed_at" in v:
            return {**v, "claimed_at": "<time>"}
        return v

    return {
        re.sub(r":lat:(\w+):\d+$", r":lat:\1:<minute>", k): (kind, steady(k, kind, v), ttl)
        for k, (kind, v, ttl) in snapshot.items()
    }


@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_function_executor_matches_the_script_for_flat_rows(conn, connect_as, name, call):
    flat_state(conn)
    start = dump(conn)
    script_reply = outcome(call, conn)
    script_after = dump(conn)
    restore(conn, start)
    assert dump(conn) == start
    fn = connect_as("function")
    fn.token = conn.token  # the same worker identity on the lock
    function_reply = outcome(call, fn)
    fn.client.function_flush()
    function_after = dump(conn)
    assert function_reply == script_reply
    assert strip_volatile(function_after) == strip_volatile(script_after)


def test_function_claim_is_one_round_trip(conn, connect_as):
    fn = connect_as("function")
    jobs.enqueue(fn, Q, "x")
    jobs.claim(fn, Q, 1000)  # loads the library
    jobs.enqueue(fn, Q, "y")
    sent = []
    real = fn.client.execute_command
    fn.client.execute_command = lambda *a, **k: (sent.append(a[0]), real(*a, **k))[1]
    admin.pause(fn, Q)
    sent.clear()
    assert jobs.claim(fn, Q, 1000) is None
    assert sent == ["FCALL"]
    script = connect_as("script")
    real2 = script.client.execute_command
    script.client.execute_command = lambda *a, **k: (sent.append(a[0]), real2(*a, **k))[1]
    sent.clear()
    assert jobs.claim(script, Q, 1000) is None  # paused: the HGET answers, no script runs
    assert sent == ["HGET"]
    admin.resume(script, Q)
    sent.clear()
    assert jobs.claim(script, Q, 1000)[1] == "y"
    assert sent[0] == "HGET" and sent[1] in ("EVALSHA", "EVAL")


def test_function_reprocess_refuses_a_grouped_dead_row(conn, connect_as):
    fn = connect_as("function")
    jid = jobs.enqueue(fn, Q, "x", group="acme", max_attempts=1)
    lanes.claim(fn, Q, 60_000)
    jobs.fail(fn, Q, jid, "boom")
    before = dump(conn)
    with pytest.raises(NotDead) as info:
        jobs.reprocess_job(fn, Q, jid)
    assert "reprocess lane not native" in info.value.detail
    assert dump(conn) == before
    jobs.reprocess_job(connect_as("script"), Q, jid)  # the script carries it to its lane
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]


def test_native_line_is_echomqs_own_byte_for_byte(conn, connect_as):
    native = connect_as("native")
    sent = []

    def record(*args, **kw):
        sent.append(args)
        raise redis.ResponseError("ERR unknown command 'EMQ.REPROCESS'")

    native.client.execute_command = record
    from emq_notebook.errors import NativeUnavailable

    with pytest.raises(NativeUnavailable):
        jobs.reprocess_job(native, Q, "j_01ABC")
    assert (
        " ".join(map(str, sent[0]))
        == "EMQ.REPROCESS 4 emq:{mail}:job:j_01ABC emq:{mail}:dead emq:{mail}:pending emq:{mail}: j_01ABC"
    )
