"""Do no harm, a long error found by its signature: `errors` counts every `last_error`
over the step's bytes under `triage.long_error_signature()` without copying it, and
`find(signature=long_error_signature())` finds exactly those rows the same way: each
row's `last_error` measured on the server (HSTRLEN), never read there, so one step
examines its budget of members whatever their texts hold. Both backends, under the
harness's watchdog; the server's work is observed in the scripts' replies and the
reading commands they ran, never timed."""

from __future__ import annotations

import pytest
from harm import ScriptReads, bounded, replies

from emq_notebook import decoding, triage
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.keyspace import base

Q = "longerrors"
P = base(Q)
LONG = 2 * 10**6  # a 2 MB traceback another node wrote


def dead(conn, job_id: str, error: str | None, score: int) -> str:
    """Dead row `job_id` that failed with `error` (None: no last_error), as @fail leaves it."""
    row = {"payload": "{}", "attempts": "1", "state": "dead"}
    if error is not None:
        row["last_error"] = decoding.wire(error)
    conn.client.hset(P + "job:" + job_id, mapping=row)
    conn.client.zadd(P + "dead", {job_id: score})
    return job_id


def not_utf8(size: int) -> str:
    """`size` bytes that are no UTF-8 text (as the client reads them: surrogates)."""
    head = "Traceback \udcff\udcfe ñ "
    return head + "\udcc3(" * ((size - decoding.wire_size(head)) // 2)


def seeded(conn) -> list[str]:
    """Short errors, 100 KB ones (one not UTF-8), a text of exactly a budget, one with
    no error, a member with no row, and among them the long ones: 2 MB (one not UTF-8)
    and one byte over the budget. Answers the long ones' ids, in set order."""
    long = []
    score = iter(range(1_000))
    for i in range(30):
        dead(conn, f"s_{i:02d}", f"upstream timed out after {i} ms", next(score))
        if i == 3:
            dead(conn, "m_1", "Traceback " + "t" * 100_000, next(score))
            long.append(dead(conn, "l_1", "T" * LONG, next(score)))
        if i == 10:
            dead(conn, "m_2", not_utf8(100_000), next(score))
            dead(conn, "edge", "e" * BYTE_BUDGET, next(score))  # not over it
            long.append(dead(conn, "l_2", not_utf8(LONG), next(score)))
        if i == 20:
            dead(conn, "none", None, next(score))
            conn.client.zadd(P + "dead", {"ghost": next(score)})
            long.append(dead(conn, "l_3", "y" * (BYTE_BUDGET + 1), next(score)))
    return long


def test_find_by_the_long_error_signature_finds_the_rows_errors_counted_under_it(harm, monkeypatch):
    conn, srv = harm
    long = seeded(conn)
    sig = triage.long_error_signature()
    counted = bounded(lambda: triage.errors(conn, Q), srv, what="errors")
    assert counted.loc[sig, "count"] == len(long) == 3
    assert counted.loc[sig, "sample_id"] == long[0]
    steps = replies(conn, "find")
    reads = ScriptReads(conn, srv, monkeypatch, "find")
    got = bounded(lambda: triage.find(conn, Q, signature=sig, limit=None), srv, what="find")
    assert list(got.index) == long
    # shown as a snapshot shows them: each read whole by itself, after the search
    assert got.loc["l_1", "last_error"] == "T" * LONG
    assert got.loc["l_3", "last_error"] == "y" * (BYTE_BUDGET + 1)
    assert decoding.wire_size(got.loc["l_2", "last_error"]) == LONG
    # the search copied no text (its reading commands copied the matches' short fields),
    # and one step examined every member
    assert len(steps) == 1
    assert sum(reads.copied()) < 1_000
    # a glob beside it narrows nothing further: no long text matches a glob
    assert bounded(lambda: triage.find(conn, Q, signature=sig, error="T*"), srv).empty
    # and the other signatures find theirs, as before
    short = triage.find(conn, Q, signature="upstream timed out after <num> ms", limit=None)
    assert list(short.index) == [f"s_{i:02d}" for i in range(30)]


@pytest.mark.parametrize("filters", [{"min_attempts": 1}, {"min_attempts": 1, "created_after": 0}])
def test_the_long_error_signature_holds_beside_other_filters(harm, filters):
    """With three filters a row of ordinary size is measured whole on Valkey (its
    last_error read with it): such a row holds no long text, and is not found."""
    conn, srv = harm
    long = seeded(conn)
    for job_id in ["l_1", "l_2", "l_3", "s_00", "m_1", "edge"]:
        conn.client.hset(P + "job:" + job_id, "created_at", "1714566896000")
    got = bounded(
        lambda: triage.find(conn, Q, signature=triage.long_error_signature(), limit=None, **filters), srv
    )
    assert list(got.index) == long
