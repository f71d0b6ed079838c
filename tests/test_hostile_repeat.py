"""The repeat tick against a `repeat:reported` hash another node filled (the second
hostile pass, lua/repeat_tick.lua): a report is compared by its length before it is
read, so a long one is never copied (100 reports of 4 MB held a tick 279 ms,
bench/hostile_claims.py). Both backends; work is observed as the bytes the tick's
reading commands copied (test_harm_row_bytes.ScriptReads), never timed."""

from __future__ import annotations

from harm import Events, ScriptReads

from emq_notebook import repeat

Q = "ticks"
P = f"emq:{{{Q}}}:"
REPORTED = P + "repeat:reported"


def test_long_reports_another_node_wrote_are_never_copied(harm, monkeypatch):
    conn, srv = harm
    names = [f"bad_{i:02d}" for i in range(20)]
    pipe = conn.client.pipeline(transaction=False)
    for name in names:
        pipe.zadd(P + "repeat", {name: 0})
        pipe.hset(P + "repeat:defs", name, "not json")
        pipe.hset(REPORTED, name, "r" * 1_000_000)
    pipe.execute()
    reads = ScriptReads(conn, srv, monkeypatch, "repeat_tick")
    with Events(conn, Q) as events:
        repeat.tick(conn, Q)
    # each definition read (8 bytes) and no report: each was measured first (HSTRLEN)
    assert [c[1] for c in reads.calls[0]] == [P + "repeat:defs"] * len(names)
    assert reads.copied() == [8 * len(names)]
    # each is reported again (its report was another's), TICK_REPORTS a call
    assert len([e for e in events.seen if e["event"] == "bad_row"]) == repeat.TICK_REPORTS
    assert conn.client.hstrlen(REPORTED, names[0]) < 200
