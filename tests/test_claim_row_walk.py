"""A claim measures its head row without walking it: another node's row of many fields
(a hashtable) is not walked field by field by MEMORY USAGE ... SAMPLES 0 (all of them:
a row of 1,000,000 fields held a claim 30 ms, the measure alone 24 to 26 ms); its fields
the claim reads are measured one by one instead (HSTRLEN), and the claim serves it."""

from __future__ import annotations

from harm import bounded

from emq_notebook import jobs

Q = "walk"


def test_a_row_of_many_fields_is_not_walked_to_be_claimed(harm):
    conn, srv = harm
    c = conn.client
    jobs.enqueue(conn, Q, '{"a": 1}', id="j_1")
    c.hset(f"emq:{{{Q}}}:job:j_1", mapping={f"f{i:05d}": "v" for i in range(2_000)})
    if srv is not None:
        c.config_resetstat()
    got = bounded(lambda: jobs.claim(conn, Q, 60_000), srv, what="claim")
    assert got is not None and (got.id, got.payload, got.attempts) == ("j_1", '{"a": 1}', 1)
    if srv is not None:
        walked = c.info("commandstats").get("cmdstat_memory|usage", {}).get("calls", 0)
        assert walked == 0
    # an ordinary row is still measured whole in one MEMORY USAGE on a server, and claimed
    jobs.enqueue(conn, Q, '{"b": 2}', id="j_2")
    got = bounded(lambda: jobs.claim(conn, Q, 60_000), srv, what="claim")
    assert got is not None and (got.id, got.payload) == ("j_2", '{"b": 2}')
    if srv is not None:
        assert c.info("commandstats").get("cmdstat_memory|usage", {}).get("calls", 0) == 1


def test_a_row_of_many_fields_with_a_long_number_is_refused_unread(harm):
    """The row of many fields whose attempts another node made 3 MB: refused as before
    (BadRow), the field measured, not read."""
    conn, srv = harm
    c = conn.client
    jobs.enqueue(conn, Q, "{}", id="j_1")
    c.hset(f"emq:{{{Q}}}:job:j_1", mapping={f"f{i:05d}": "v" for i in range(2_000)})
    c.hset(f"emq:{{{Q}}}:job:j_1", "attempts", "7" * (3 << 20))
    try:
        bounded(lambda: jobs.claim(conn, Q, 60_000), srv, what="claim")
    except Exception as exc:  # the claim's refusal of a row no transition can read
        assert "attempts" in str(exc), exc
    else:
        raise AssertionError("claimed a row whose attempts is no whole number")
