"""Lanes at scale, on both backends. A drain walks the lanes on from where its last
call stopped (lua/drain.lua with a lane cursor): each call examines a bounded number of
lanes, never the whole groups set (an SMEMBERS of 100,000 lanes and a ZRANGE each,
every call, held Valkey over 100 ms), and every lane's backlog is drained all the same,
whatever the lanes' names. A removed ghost is looked for in every lane only while the
lanes are few (refusals.lua GHOST_LANES)."""

from __future__ import annotations

import pytest

import emq_notebook as emq
from emq_notebook import admin, jobs, watching
from emq_notebook import lanes as lanes_
from emq_notebook.errors import Gone
from emq_notebook.keyspace import base, queue_key

Q = "tenants"
# lua/drain.lua LANES_A_CALL
LANES_A_CALL = 2000


def lanes(conn: emq.Connection, names: list[str], jobs_each: int = 1, every: int = 1) -> int:
    """Lanes written as another node lays them out: the groups set, and every `every`th
    lane's backlog of `jobs_each` jobs with their rows (the rest known, empty). Answers
    the jobs made."""
    pipe = conn.client.pipeline(transaction=False)
    pipe.hset(queue_key(Q, "meta"), "created_at", "1")
    made = 0
    for i, g in enumerate(names):
        pipe.sadd(queue_key(Q, "groups"), g)
        for k in range(jobs_each if i % every == 0 else 0):
            job = f"j{i}-{k}"
            pipe.zadd(f"{base(Q)}g:{g}:pending", {job: 0})
            pipe.hset(f"{base(Q)}job:{job}", mapping={"state": "pending", "group": g, "payload": "{}"})
            made += 1
    pipe.execute()
    return made


def left(conn: emq.Connection, names: list[str]) -> int:
    pipe = conn.client.pipeline(transaction=False)
    for g in names:
        pipe.zcard(f"{base(Q)}g:{g}:pending")
    return sum(pipe.execute())


def test_a_drain_of_many_lanes_walks_them_a_bounded_number_a_call(conn):
    # 4,500 known lanes, most of them empty: 90 jobs in all, well within one call's budget
    names = [f"t{i:05d}" for i in range(4_500)]
    made = lanes(conn, names, jobs_each=2, every=100)
    calls: list[int] = []
    assert admin.drain(conn, Q, budget=1_000, progress=lambda c, n: calls.append(n)) == made == 90
    assert left(conn, names) == 0
    assert conn.client.scan(0, match=f"{base(Q)}job:*", count=100_000)[1] == []
    # a lane looked at is a unit of the budget (1,000 a call, a page of SSCAN more at most):
    # about five calls; the whole set in each call looked at 4,500 lanes in one
    assert 4 <= len(calls) <= 6, calls
    assert calls[-1] == made


def test_a_call_that_stops_inside_a_page_of_lanes_goes_on_from_it(conn):
    # a budget smaller than a page of lanes: calls end inside pages and look at them again
    names = [f"t{i:04d}" for i in range(300)]
    made = lanes(conn, names, jobs_each=3)
    steps: list[int] = []
    assert admin.drain(conn, Q, budget=7, progress=lambda c, n: steps.append(n)) == made
    assert left(conn, names) == 0
    # each call drains a job or walks on past a page of lanes looked at
    assert all(b >= a for a, b in zip(steps, steps[1:], strict=False))
    assert len(steps) <= made + 300 // 8


def test_lanes_with_long_names_or_bytes_not_utf8_are_drained_and_every_call_moves_on(conn):
    # 120 lanes named 20 KB each: 2.4 MB of names, over a call's byte budget; and a few
    # names of bytes that are not UTF-8
    names = [f"{i:03d}" + "n" * 20_000 for i in range(120)] + ["\udcff\udcfe", "caf\udce9"]
    made = lanes(conn, names)
    steps: list[int] = []
    assert admin.drain(conn, Q, budget=1_000, progress=lambda c, n: steps.append(n)) == made
    assert left(conn, names) == 0
    assert len(steps) <= made + 1  # a call drains a job at least, or ends the walk


def test_a_lane_whose_backlog_is_another_type_is_passed_over_and_the_rest_drained(conn):
    # another client wrote a string and a hash where two lanes' backlogs live: each call
    # of the drain stopped there on WRONGTYPE, so the queue could never be drained
    names = [f"t{i:03d}" for i in range(40)]
    made = lanes(conn, names, jobs_each=2)
    conn.client.sadd(queue_key(Q, "groups"), "strlane", "hashlane")
    conn.client.set(f"{base(Q)}g:strlane:pending", "x")
    conn.client.hset(f"{base(Q)}g:hashlane:pending", "a", "b")
    assert admin.drain(conn, Q, budget=7) == made
    assert left(conn, names) == 0
    assert conn.client.get(f"{base(Q)}g:strlane:pending") == "x"  # another's key, untouched
    # an older client's call (no cursor) passes them over alike
    made = lanes(conn, names, jobs_each=1)
    n, more = conn.run("drain", [base(Q), queue_key(Q, "pending")], [1_000, 1 << 20])
    assert (n, more) == (made, 0)


def test_a_lane_named_over_max_id_bytes_is_passed_over_as_the_walks_of_the_lanes_do(conn):
    # another node's lanes named 70,000 bytes: no key is built of such a name (a drain
    # building them read every one with its SSCAN page: 20 of 1 MB held Valkey 46 ms a
    # call); its backlog stays, as watching.backlog counts it skipped
    long_names = [f"{i:02d}" + "x" * 70_000 for i in range(4)]
    names = [f"t{i}" for i in range(10)]
    made = lanes(conn, names)
    lanes(conn, long_names)
    assert admin.drain(conn, Q, budget=1_000) == made
    assert left(conn, names) == 0
    assert left(conn, long_names) == len(long_names)
    assert watching.backlogs(conn, [Q])[Q].skipped == len(long_names)


def test_an_older_clients_drain_call_without_a_cursor_answers_as_before(conn):
    names = [f"t{i}" for i in range(30)]
    made = lanes(conn, names, jobs_each=2)
    keys = [base(Q), queue_key(Q, "pending")]
    total = 0
    while True:
        n, more = conn.run("drain", keys, [25, 1 << 20])
        total += n
        if not more:
            break
    assert total == made and left(conn, names) == 0


def test_a_ghost_is_looked_for_in_every_lane_only_while_the_lanes_are_few(conn):

    first = jobs.enqueue(conn, Q, "a", group="t0500", id="j_first")
    second = jobs.enqueue(conn, Q, "b", group="t0500", id="j_second")
    lane = f"{base(Q)}g:t0500:pending"
    # few lanes: the ghost leaves its lane too
    conn.client.delete(f"{base(Q)}job:{first}")
    with pytest.raises(Gone):
        jobs.remove_job(conn, Q, first)
    assert conn.client.zrange(lane, 0, -1) == [second]
    # 1,200 lanes known (over GHOST_LANES, refusals.lua): the ghost stays in its lane,
    # where the lane's claim drops it at the head
    conn.client.sadd(queue_key(Q, "groups"), *[f"t{i:04d}" for i in range(1_200)])
    conn.client.zadd(lane, {"j_ghost": -1})
    conn.client.zadd(queue_key(Q, "pending"), {"j_ghost": 0})
    with pytest.raises(Gone):
        jobs.remove_job(conn, Q, "j_ghost")
    assert conn.client.zscore(queue_key(Q, "pending"), "j_ghost") is None
    assert conn.client.zrange(lane, 0, -1) == ["j_ghost", second]
    claimed = lanes_.claim(conn, Q, 60_000)
    assert claimed is not None and claimed[0] == second
    assert conn.client.zcard(lane) == 0


def test_a_ghost_is_looked_for_only_in_the_lanes_whose_names_fit_a_calls_bytes(conn):
    # 300 lanes another node named 10 KB each (3 MB of names, each key built of one):
    # one ghost's remove read them whole (SMEMBERS) and built a key of each (1,000 lanes
    # of 60 KB: Valkey held 159 ms); it looks in as many as GHOST_BYTES of names cover
    names = [f"{i:03d}" + "n" * 10_000 for i in range(300)]
    lanes(conn, names, jobs_each=0)
    pipe = conn.client.pipeline(transaction=False)
    for g in names:
        pipe.zadd(f"{base(Q)}g:{g}:pending", {"j_ghost": 0})
    pipe.zadd(queue_key(Q, "pending"), {"j_ghost": 0})
    pipe.execute()
    with pytest.raises(Gone):
        jobs.remove_job(conn, Q, "j_ghost")
    assert conn.client.zscore(queue_key(Q, "pending"), "j_ghost") is None
    still = left(conn, names)
    assert 0 < still < len(names)  # some lanes looked in, not all 300
    # a bulk remove counts the names it reads against its bytes: each call moves on, and
    # its dry run answers the same words
    ids = [f"j_g{i}" for i in range(40)]
    conn.client.zadd(queue_key(Q, "pending"), dict.fromkeys(ids, 0))
    assert admin.remove_jobs(conn, Q, ids, dry_run=True) == dict.fromkeys(ids, "gone")
    assert admin.remove_jobs(conn, Q, ids) == dict.fromkeys(ids, "gone")
    assert conn.client.zcard(queue_key(Q, "pending")) == 0


def test_a_ghosts_lane_whose_backlog_is_another_type_is_passed_over(conn):
    # another client wrote a string where one lane's backlog lives: removing a ghost
    # stopped there on WRONGTYPE, so the ghost could never be removed
    names = [f"t{i}" for i in range(5)]
    lanes(conn, names, jobs_each=0)
    conn.client.sadd(queue_key(Q, "groups"), "strlane")
    conn.client.set(f"{base(Q)}g:strlane:pending", "x")
    for g in names:
        conn.client.zadd(f"{base(Q)}g:{g}:pending", {"j_ghost": 0})
    conn.client.zadd(queue_key(Q, "pending"), {"j_ghost": 0, "j_other": 1})
    with pytest.raises(Gone):
        jobs.remove_job(conn, Q, "j_ghost")
    assert left(conn, names) == 0
    assert conn.client.get(f"{base(Q)}g:strlane:pending") == "x"
    assert admin.remove_jobs(conn, Q, ["j_other"]) == {"j_other": "gone"}
