"""What a look that only watches reads (emq_notebook/watching.py), on both backends: the ends
of a queue's sets, and what another node put there.

Do no harm while watching (SPEC 11): a member of many MB another node put at an end of
a queue's sets (pending's head, the first job of its lowest priority, a lane's head, the
schedule's due head, the newest dead) is never read by a watching look (health, a
dashboard refresh, HealthView): no command answers a member's length and a read copies
it whole (30 MB held Valkey 14 to 58 ms). On a private Valkey the look measures it first
(MEMORY USAGE), leaves it on the server and says so (the look's notes,
`health.look`); a score alone (the newest death, the due time, the lowest priority) is
found without its member. On the embedded fakeredis (this process's own memory, no
MEMORY command) the members are read as before. Counted (the bytes the server wrote to
its clients), never timed: bench/big_heads.py has the time each held."""

from __future__ import annotations

import math
from typing import Any

from harm import bounded, written_out
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import frames, health, jobs, watching
from emq_notebook.keyspace import base
from emq_notebook.widgets import Dashboard

# over watching.HEAD_BYTES, and small enough for a quick test
BIG = 3 << 20
Q = "big"


def stage(conn: emq.Connection) -> int:
    """A queue of two priorities, a lane, a due schedule and dead jobs, then another
    node's ids of BIG bytes at each end a look reads; answers the server's time (ms)."""
    for i in range(200):  # more than a listpack holds: a skiplist, whose tail is unmeasured
        jobs.enqueue(conn, Q, "{}", id=f"j_{i:04d}", priority=i % 2)
    jobs.enqueue(conn, Q, "{}", group="acme", id="j_acme")
    c = conn.client
    now = conn.server_ms()
    dead = {f"d_{i:04d}": now - 3 * 3_600_000 - i for i in range(200)}
    c.zadd(f"emq:{{{Q}}}:dead", dead)
    c.zadd(f"emq:{{{Q}}}:schedule", {f"s_{i:04d}": now - 600_000 + i for i in range(200)})
    c.zadd(f"emq:{{{Q}}}:pending", {"A" * BIG: -1, "0" * BIG: 1})  # the head; the band's first
    c.zadd(f"emq:{{{Q}}}:g:acme:pending", {"B" * BIG: -1})
    c.zadd(f"emq:{{{Q}}}:schedule", {"C" * BIG: now - 3_600_000})  # due an hour ago
    c.zadd(f"emq:{{{Q}}}:dead", {"D" * BIG: now - 2 * 3_600_000})  # the newest, 2 h ago
    return now


def test_a_look_never_reads_a_huge_member_at_an_end_and_says_it(harm):
    """Health reads neither huge id on a server (less than a MB crosses the wire for four
    ids of 3 MB), says each left, and still judges from the scores: the schedule due an
    hour ago, the newest dead 2 h ago. Before, each was read: 15 MB sent."""
    conn, srv = harm
    stage(conn)
    look, out = bounded(lambda: written_out(conn, srv, lambda: health.look(conn, [Q])), srv, what="health")
    h = look.frame
    assert h.loc[Q, "schedule"] == 201 and h.loc[Q, "dead"] == 201 and h.loc[Q, "pending"] == 204
    # the due head's score is the oldest a sample knows: an hour
    assert 3_590 <= h.loc[Q, "oldest_pending_s"] <= 3_700
    assert h.loc[Q, "verdict"] == "stuck"
    said = look.notes.get(Q, [])
    if srv is None:  # the embedded fake: no MEMORY command, its own memory; read as before
        assert said == []
        return
    assert out is not None and out < 1 << 20
    assert len(said) == 3, said
    assert said[0].startswith(f"the head of emq:{{{Q}}}:pending not read: about 3.")
    assert said[1].startswith(f"the first job of emq:{{{Q}}}:pending's lowest priority not read")
    assert said[2].startswith(f"the head of a lane of {Q} not read")
    assert all(f"over {watching.HEAD_BYTES:,} bytes" in s for s in said)


def test_the_newest_dead_is_found_without_reading_it(harm):
    """A queue of dead jobs only, the newest of them another node's 3 MB id: its verdict
    says when it died (found by its score alone), and the id is not read on a server."""
    conn, srv = harm
    now = conn.server_ms()
    c = conn.client
    c.hset(f"emq:{{{Q}}}:meta", "created_at", now - 86_400_000)
    c.zadd(f"emq:{{{Q}}}:dead", {f"d_{i:04d}": now - 5 * 3_600_000 - i for i in range(300)})
    c.zadd(f"emq:{{{Q}}}:dead", {"D" * BIG: now - 2 * 3_600_000})
    h, out = bounded(lambda: written_out(conn, srv, lambda: frames.health(conn, [Q])), srv, what="health")
    assert h.loc[Q, "verdict"] == "dead_letters"
    assert h.loc[Q, "why"].startswith("301 dead, the newest 2 h ago")
    if srv is not None:
        assert out is not None and out < 1 << 20


def test_a_dashboard_refresh_says_the_head_it_left(harm):
    """The dashboard's overview goes on (a verdict for the queue) and its summary says the
    head left on the server; nothing huge crosses the wire on a server."""
    conn, srv = harm
    jobs.enqueue(conn, Q, "{}", id="j_1")
    conn.client.zadd(f"emq:{{{Q}}}:pending", {"A" * BIG: -1})
    d: Any = bounded(lambda: Dashboard(conn, auto=False), srv, what="opening the dashboard")
    try:
        _, out = bounded(lambda: written_out(conn, srv, d.refresh), srv, what="a refresh")
        assert d.overview.loc[Q, "verdict"] in health.SEVERITY
        if srv is None:
            assert "not read" not in d.summary.value
        else:
            assert out is not None and out < 1 << 20
            assert f"the head of emq:{{{Q}}}:pending not read" in d.summary.value
    finally:
        d.close()


def test_scores_are_found_exactly_where_no_member_is_read(harm):
    """The lowest priority's first job and the due time found by ZCOUNTs alone are the
    ones a plain read finds, on sets of any size, priorities far apart included."""
    conn, srv = harm
    for i in range(300):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i:04d}", priority=(0, 7, 1_000_000)[i % 3])
    now = conn.server_ms()
    asked = [now - 60_000, watching.HEAD_BYTES, watching.measured_only(conn), now]
    got = conn.run("read_ends", [base(Q)], asked)
    assert got[:3] == ["j_0000", "j_0002", None]


def test_scores_past_the_span_at_the_ends_do_not_fail_the_look(harm):
    """Another node's scores of -inf, -1e300 and +inf at the ends of a large pending set
    (a skiplist, its scores searched by ZCOUNTs): the look answers, the lowest priority's
    first job found past them. Before, a head at -inf failed the whole look ('min or max
    is not a float') and one at -1e300 cost a thousand ZCOUNTs and hid the band."""
    conn, srv = harm
    c = conn.client
    c.zadd(f"emq:{{{Q}}}:pending", {f"j_{i:05d}": i % 2 for i in range(5000)})
    now = conn.server_ms()
    asked = [now - 60_000, watching.HEAD_BYTES, watching.measured_only(conn), now]
    for low, high in ((float("-inf"), None), (-1e300, None), (float("-inf"), float("inf"))):
        c.zadd(f"emq:{{{Q}}}:pending", {"low": low})
        if high is not None:
            c.zadd(f"emq:{{{Q}}}:pending", {"high": high})
        got = bounded(lambda: conn.run("read_ends", [base(Q)], asked), srv, what="read_ends")
        # +inf is no priority the toolkit writes: its band is not named (nil past 2^53)
        assert got[:3] == ["low", "j_00001" if high is None else None, None], (low, high, got)
        h = bounded(lambda: frames.health(conn, [Q]), srv, what="health")
        assert h.loc[Q, "pending"] == 5001 + (high is not None)
    # a head of another node's 3 MB at -inf, left on a server: the band found all the same
    c.zrem(f"emq:{{{Q}}}:pending", "high")
    c.zadd(f"emq:{{{Q}}}:pending", {"A" * BIG: float("-inf")})
    got = bounded(lambda: conn.run("read_ends", [base(Q)], asked), srv, what="read_ends")
    assert got[1] == "j_00001" and got[0] in ((None,) if srv else ("A" * BIG,))


def test_a_long_listpack_is_not_searched(harm):
    """A listpack of 20,000 members and a 2 MB one (an operator raised
    zset-max-listpack-entries and -value; another node RESTOREd the sets): each ZCOUNT
    walks it whole, so a look leaves its scores unsearched on a server (a million members:
    87 ms of Valkey before, searching) and says the head it left. Before, a look of it
    sent 60 ZCOUNTs; the fake reads it as before."""
    conn, srv = harm
    c = conn.client
    now = conn.server_ms()
    c.zadd("tmp:p", {f"j_{i:05d}": i % 2 for i in range(20_000)})
    c.zadd("tmp:d", {f"d_{i:05d}": now - 3_600_000 - i for i in range(20_000)})
    if srv is not None:
        c.config_set("zset-max-listpack-entries", 100_000)
        c.config_set("zset-max-listpack-value", 4 << 20)
    for name in ("p", "d"):
        c.restore(f"emq:{{{Q}}}:{'pending' if name == 'p' else 'dead'}", 0, c.dump(f"tmp:{name}"))
    c.delete("tmp:p", "tmp:d")
    c.zadd(f"emq:{{{Q}}}:pending", {"A" * (2 << 20): -1})
    c.zadd(f"emq:{{{Q}}}:dead", {"D" * (2 << 20): now - 60_000})
    asked = [now - 60_000, watching.HEAD_BYTES, watching.measured_only(conn), now]
    if srv is None:
        got = conn.run("read_ends", [base(Q)], asked)
        assert got == ["A" * (2 << 20), "j_00001", None, None, now - 60_000]
        return
    assert c.object("encoding", f"emq:{{{Q}}}:pending") == "listpack"
    assert c.object("encoding", f"emq:{{{Q}}}:dead") == "listpack"
    c.config_resetstat()
    got = bounded(lambda: conn.run("read_ends", [base(Q)], asked), srv, what="read_ends")
    # one ZCOUNT: the schedule's overdue count
    assert c.info("commandstats").get("cmdstat_zcount", {}).get("calls", 0) == 1
    assert got[:5] == [None, None, None, None, None] and got[5] == "head"
    look = bounded(lambda: health.look(conn, [Q]), srv, what="health")
    assert look.frame.loc[Q, "pending"] == 20_001 and look.frame.loc[Q, "dead"] == 20_001
    assert look.notes[Q][0].startswith(f"the head of emq:{{{Q}}}:pending not read")


# -- read_ends against the plain reads it stands for (ZRANGE, ZRANGEBYSCORE, ZCOUNT), on random
# small queues and on the same queues padded past WHOLE_WALK members (where a server finds the
# scores by ZCOUNTs, never reading the members): pending's head and its lowest priority's first job,
# the overdue count and due time, and the newest death to within a 64th of its age (NEAR at least),
# on both backends.
Q_read_ends_property = "prop"
K = f"emq:{{{Q_read_ends_property}}}:"
NOW = 1_796_000_000_000
YEAR = 365 * 86_400_000

# another node's scores past the span too: no score read of them (nil past 2^53)
_hostile = st.sampled_from([math.inf, -math.inf, 1e300, -1e300, 2.0**60])
_priorities = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([1_000_000, 2**40]),
    st.floats(-3, 3).map(lambda x: round(x, 2)),
    _hostile,
)
_times = st.one_of(st.integers(-3 * YEAR, YEAR).map(lambda d: NOW + d), _hostile)
SPAN = 2**53
_sets = st.fixed_dictionaries(
    {
        "pending": st.lists(_priorities, max_size=20),
        "schedule": st.lists(_times, max_size=10),
        "dead": st.lists(_times, max_size=10),
        "pad": st.sampled_from(["", "pending", "dead", "schedule"]),
    }
)


def expected(c, due_at: int):
    pending, schedule, dead = K + "pending", K + "schedule", K + "dead"
    head = band = overdue = due = newest = None
    first = c.zrange(pending, 0, 0, withscores=True)
    if first:
        head = first[0][0]
        last = c.zrange(pending, -1, -1, withscores=True)[0][1]
        if last != first[0][1] and abs(last) <= SPAN:
            band = c.zrangebyscore(pending, last, last, start=0, num=1)[0]
    n = c.zcount(schedule, "-inf", due_at)
    if n:
        low = c.zrange(schedule, 0, 0, withscores=True)[0][1]
        overdue, due = n, math.floor(low) if abs(low) <= SPAN else None
    top = c.zrange(dead, -1, -1, withscores=True)
    if top and abs(top[0][1]) <= SPAN:
        newest = top[0][1]
    return [head, band, overdue, due], newest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(queue=_sets)
# a last priority that is a fraction (another node's 0.5) behind 5,000 jobs of 0: the
# search found its whole part and named no band (CI found it)
@example(queue={"pending": [0.5], "schedule": [], "dead": [], "pad": "pending"})
def test_read_ends_answers_what_the_plain_reads_say(harm, queue):
    conn, srv = harm
    c = conn.client
    c.flushall()
    if queue["pending"]:
        c.zadd(K + "pending", {f"j_{i:03d}": p for i, p in enumerate(queue["pending"])})
    if queue["schedule"]:
        c.zadd(K + "schedule", {f"s_{i:03d}": t for i, t in enumerate(queue["schedule"])})
    if queue["dead"]:
        c.zadd(K + "dead", {f"d_{i:03d}": t for i, t in enumerate(queue["dead"])})
    if queue["pad"]:  # past WHOLE_WALK: a skiplist searched by ZCOUNTs on a server
        score = {"pending": 0, "dead": NOW - 4 * YEAR, "schedule": NOW + 2 * YEAR}[queue["pad"]]
        c.zadd(K + queue["pad"], {f"p_{i:05d}": score for i in range(5000)})
    due_at = NOW - 60_000
    want, top = expected(c, due_at)
    asked = [due_at, watching.HEAD_BYTES, watching.measured_only(conn), NOW]
    got = bounded(lambda: conn.run("read_ends", [base(Q_read_ends_property)], asked), srv, what="read_ends")
    # a lowest priority of 2^40 is a whole score within the span: named as any other
    assert got[:4] == want, (queue, got, want)
    assert len(got) == 5  # nothing left unread: every member is short
    if top is None:
        assert got[4] is None, (queue, got)
    else:
        assert got[4] is not None and got[4] <= top, (queue, got, top)
        assert top - got[4] <= max(1024, (NOW - top) / 64) + 1, (queue, got, top)
