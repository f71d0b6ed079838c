"""The queue's meta hash as another node may write it long: its `paused` field of 1 MB
(any value pauses, as the seed reads it) and its `metrics_keep` of 1 MB of digits (no
whole number a keep can be). The function executor's claims, which fold the pause gate
into their one call (EMQ.CLAIM's form), ask whether `paused` is there (HEXISTS: their
HMGET copied the value at every claim poll); every claim, complete and fail measures
`metrics_keep` before reading it (HSTRLEN: refused BadRow as a bad keep always was,
nothing copied). The script executor's gate is the seed's own HGET in its own round
trip (`admin.is_paused`), kept as the seed has it. On both backends; the bytes counted,
not timed."""

from __future__ import annotations

import pytest
from harm import ScriptReads, written_out

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import BadRow
from emq_notebook.keyspace import queue_key

Q = "mail"
LONG = 1_000_000


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "lane"])
def test_a_long_paused_value_pauses_a_function_claim_never_copied(harm, monkeypatch, grouped):
    conn, srv = harm
    jobs.enqueue(conn, Q, "{}", group="acme" if grouped else None)
    conn.client.hset(queue_key(Q, "meta"), "paused", "y" * LONG)
    assert admin.is_paused(conn, Q)
    ex = conn.with_executor("function")
    # the function executor runs the claim's native twin under the claim's own name
    reads = ScriptReads(ex, srv, monkeypatch, "gclaim2" if grouped else "claim2")
    claim = lanes.claim if grouped else jobs.claim
    got, sent = written_out(conn, srv, lambda: claim(ex, Q, 60_000))
    assert got is None
    if sent is not None:  # a server: the claim's empty answer, not the value
        assert sent < 100_000  # its INFO reply counted too
    assert reads.calls and sum(reads.copied()) < 1_000
    admin.resume(conn, Q)
    assert claim(ex, Q, 60_000) is not None


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_long_metrics_keep_is_refused_as_a_bad_keep_without_copying_it(harm, monkeypatch, executor):
    conn, srv = harm
    jid = jobs.enqueue(conn, Q, "{}")
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "9" * LONG)
    ex = conn.with_executor(executor)
    reads = ScriptReads(ex, srv, monkeypatch, "claim2")
    with pytest.raises(BadRow, match="metrics_keep"):
        jobs.claim(ex, Q, 60_000)
    assert reads.calls and sum(reads.copied()) < 1_000
    assert conn.client.zrange(queue_key(Q, "pending"), 0, -1) == [jid]  # nothing popped
    # a keep an operator mends is read as before
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "60")
    assert jobs.claim(ex, Q, 60_000)[0] == jid
    conn.client.hset(queue_key(Q, "meta"), "metrics_keep", "9" * LONG)
    reads = ScriptReads(ex, srv, monkeypatch, "complete")
    with pytest.raises(BadRow, match="metrics_keep"):
        jobs.complete(ex, Q, jid)
    assert reads.calls and sum(reads.copied()) < 1_000
