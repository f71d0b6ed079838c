"""read_ends against the plain reads it stands for (ZRANGE, ZRANGEBYSCORE, ZCOUNT), on
random small queues and on the same queues padded past WHOLE_WALK members (where a
server finds the scores by ZCOUNTs, never reading the members): pending's head and its
lowest priority's first job, the overdue count and due time, and the newest death to
within a 64th of its age (NEAR at least), on both backends."""

from __future__ import annotations

import math

from harm import bounded
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from emq_notebook import watching
from emq_notebook.keyspace import base

Q = "prop"
K = f"emq:{{{Q}}}:"
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
    got = bounded(lambda: conn.run("read_ends", [base(Q)], asked), srv, what="read_ends")
    # a lowest priority of 2^40 is a whole score within the span: named as any other
    assert got[:4] == want, (queue, got, want)
    assert len(got) == 5  # nothing left unread: every member is short
    if top is None:
        assert got[4] is None, (queue, got)
    else:
        assert got[4] is not None and got[4] <= top, (queue, got, top)
        assert top - got[4] <= max(1024, (NOW - top) / 64) + 1, (queue, got, top)
