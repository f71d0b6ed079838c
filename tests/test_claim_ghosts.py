"""A claim is bounded by the work it does, whatever other nodes left ahead of the job:
ghosts (members of pending or of a lane whose row is gone) and lanes on the ring no
claim can serve. One call drops at most CLAIM_SKIPS ghosts and examines at most that
many lanes and ghosts on the ring, and about CLAIM_BYTES of their ids and names
(lua/includes/activate.lua); past the bound it answers EchoMQ's `{}`, or "more" to the
toolkit, which asks for it (an optional last ARGV), and the toolkit's claims and its
Worker claim again at once: the job behind the ghosts is served, never slept on.

On both backends and both executors (`script` and `function`).
"""

from __future__ import annotations

import re

import pytest
from helpers import consistency_problems, dump, kept_conn

from emq_notebook import Worker, jobs, lanes, scripts, worker
from emq_notebook.keyspace import base, queue_key

Q = "mail"
P = f"emq:{{{Q}}}:"
LANE = P + "g:acme:pending"
GHOSTS = 5_000
# the bound, read where it is set (the one home of the numbers)
BOUND = re.search(r"local CLAIM_SKIPS, CLAIM_BYTES = (\d+), (\d+)", scripts.source("claim2"))
SKIPS, BYTES = int(BOUND[1]), int(BOUND[2])


@pytest.fixture
def conn(backend, request, kept_clients):
    return kept_conn(kept_clients, backend, request)


def ghosts(conn, key: str, n: int, score: int = -1, width: int = 0) -> None:
    """`n` members with no row in `key`, ahead of any job of priority 0 (ids `a...`,
    padded to `width` bytes)."""
    for start in range(0, n, 1000):
        ids = (f"a{i:07d}".ljust(width, "x") for i in range(start, min(n, start + 1000)))
        conn.client.zadd(key, dict.fromkeys(ids, score))


def one_call(ex, grouped: bool = False, echomq: bool = False):
    """ONE claim call as the toolkit sends it (ASK_MORE last), or as EchoMQ's callers
    do (`echomq`: lease and token only)."""
    name, keys = jobs.claim_transition(Q, grouped)
    if echomq:
        return ex.run(name, keys, [60_000, ex.token], verb="claim", queue=Q)
    return jobs.claim_calls(ex, Q, name, keys, 60_000, calls=1)


def test_the_bound_is_a_few_hundred():
    # a ghost is a ZRANGE, an HMGET, an EXISTS and a ZREM: 500 hold Valkey a few ms
    # (bench/claim_ghosts.py); every test below holds more ghosts than a call takes
    assert 100 <= SKIPS <= 1000 and GHOSTS > 2 * SKIPS


@pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
def test_a_flat_claim_call_drops_at_most_its_bound_of_ghosts(conn, ex, echomq):
    jobs.enqueue(conn, Q, "the job", id="j_real")
    ghosts(conn, P + "pending", GHOSTS)
    # stopped at its bound: "more" to the toolkit, EchoMQ's {} (None) to its callers
    assert one_call(ex, echomq=echomq) == (None if echomq else jobs.MORE)
    assert conn.client.zcard(P + "pending") == GHOSTS + 1 - SKIPS
    # the ghosts dropped are the head's, the job untouched
    assert conn.client.zrange(P + "pending", 0, 0) == [f"a{SKIPS:07d}"]
    assert conn.client.hget(P + "job:j_real", "state") == "pending"
    assert one_call(ex, echomq=echomq) == (None if echomq else jobs.MORE)
    assert conn.client.zcard(P + "pending") == GHOSTS + 1 - 2 * SKIPS
    # jobs.claim makes up to CLAIM_CALLS calls: 5,000 ghosts are within them
    assert GHOSTS <= jobs.CLAIM_CALLS * SKIPS
    assert jobs.claim(ex, Q, 60_000).id == "j_real"
    assert jobs.claim(ex, Q, 60_000) is None
    assert consistency_problems(conn, Q) == []


@pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
def test_a_lane_claim_call_drops_at_most_its_bound_and_keeps_the_lane_on_the_ring(conn, ex, echomq):
    jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")
    ghosts(conn, LANE, GHOSTS)
    assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
    # the lane counts one of the bound, its ghosts the rest
    dropped = GHOSTS + 1 - conn.client.zcard(LANE)
    assert 0 < dropped <= SKIPS
    # stopped inside the lane: it stays at the ring's head, flagged, for the next call
    assert conn.client.lrange(P + "ring", 0, -1) == ["acme"]
    assert conn.client.hget(P + "g:acme:meta", "ring") == "1"
    assert conn.client.hget(P + "job:j_real", "state") == "pending"
    assert lanes.claim(ex, Q, 60_000).id == "j_real"
    assert conn.client.zcard(LANE) == 0
    assert consistency_problems(conn, Q) == []


def dead_lanes(conn, n: int) -> list[str]:
    """`n` lanes on the ring ahead of the rest, none a claim can serve: paused, at its
    limit, or with nothing waiting, in turn."""
    names = [f"d{i:05d}" for i in range(n)]
    pipe = conn.client.pipeline(transaction=False)
    for i, g in enumerate(names):
        meta = {"ring": "1", "paused": "1"} if i % 3 == 0 else {"ring": "1", "limit": "1"}
        if i % 3 == 1:
            meta["active"] = "1"
            pipe.zadd(P + f"g:{g}:pending", {f"w_{g}": 0})  # waiting, its lane full
            pipe.hset(P + f"job:w_{g}", mapping={"payload": "w", "state": "pending", "group": g})
        pipe.hset(P + f"g:{g}:meta", mapping=meta)
    pipe.lpush(P + "ring", *reversed(names))
    pipe.execute()
    return names


@pytest.mark.parametrize("echomq", (False, True), ids=("toolkit", "echomq"))
def test_a_ring_of_more_lanes_no_claim_serves_than_the_bound(conn, ex, echomq):
    jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")  # acme at the ring's tail
    n = 2 * SKIPS + SKIPS // 2
    names = dead_lanes(conn, n)
    assert conn.client.llen(P + "ring") == n + 1
    assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
    # the lanes examined left the ring (and their flag), as the lanes a claim passes over do
    assert conn.client.llen(P + "ring") == n + 1 - SKIPS
    assert conn.client.lindex(P + "ring", 0) == names[SKIPS]
    assert conn.client.hget(P + f"g:{names[SKIPS - 1]}:meta", "ring") is None
    assert conn.client.hget(P + f"g:{names[SKIPS]}:meta", "ring") == "1"
    assert one_call(ex, grouped=True, echomq=echomq) == (None if echomq else jobs.MORE)
    got = one_call(ex, grouped=True, echomq=echomq)
    assert got.id == "j_real"
    assert lanes.claim(ex, Q, 60_000) is None
    assert conn.client.llen(P + "ring") == 0


def test_a_call_stopped_inside_a_lane_goes_on_there(conn, ex):
    jobs.enqueue(conn, Q, "the job", id="j_real", group="acme")
    dead_lanes(conn, SKIPS // 2)
    ghosts(conn, LANE, SKIPS)
    # the dead lanes and acme count SKIPS // 2 + 1, the ghosts dropped the rest
    assert one_call(ex, grouped=True) == jobs.MORE
    assert conn.client.lrange(P + "ring", 0, -1) == ["acme"]
    assert conn.client.zcard(LANE) == SKIPS + 1 - (SKIPS - SKIPS // 2 - 1)
    assert one_call(ex, grouped=True).id == "j_real"


def test_long_ghost_ids_count_their_bytes(conn, ex):
    # 20 KB ids: each counts 16 times its bytes (reads.lua ID_WORK), so a call drops as
    # many as CLAIM_BYTES covers, one past it at most
    width = 20_000
    jobs.enqueue(conn, Q, "the job", id="j_real")
    ghosts(conn, P + "pending", 10, width=width)
    per_call = -(-BYTES // (16 * width))
    assert one_call(ex) == jobs.MORE
    assert conn.client.zcard(P + "pending") == 11 - per_call
    assert jobs.claim(ex, Q, 60_000).id == "j_real"


@pytest.mark.parametrize("grouped", (False, True), ids=("flat", "lane"))
def test_a_worker_gets_the_job_behind_the_ghosts_without_sleeping(conn, ex, grouped, monkeypatch):
    key = LANE if grouped else P + "pending"
    jobs.enqueue(conn, Q, "the job", id="j_real", group="acme" if grouped else None)
    ghosts(conn, key, GHOSTS)
    # each claim call the worker sends, and the ghosts it dropped
    dropped: list[int] = []
    run = ex.run

    def counted(name, *a, **kw):
        if name not in ("claim2", "gclaim2"):
            return run(name, *a, **kw)
        before = conn.client.zcard(key)
        got = run(name, *a, **kw)
        dropped.append(before - conn.client.zcard(key) - (got not in (None, jobs.MORE)))
        return got

    monkeypatch.setattr(ex, "run", counted)
    slept: list[float] = []
    monkeypatch.setattr(worker.time, "sleep", slept.append)
    served: list[str] = []
    w = Worker(ex, Q, lambda job_id, *_: served.append(job_id), grouped=grouped, idle_sleep=60)
    assert w.run(max_jobs=1) == 1
    assert served == ["j_real"] and slept == []
    # every call within the bound; as few calls as the bound allows, and one more
    assert max(dropped) <= SKIPS
    assert len(dropped) <= -(-GHOSTS // (SKIPS - 1)) + 1
    # until_empty: a claim that stopped at its bound is no empty queue
    ghosts(conn, key, GHOSTS)
    jobs.enqueue(conn, Q, "the second", id="j_second", group="acme" if grouped else None)
    dropped.clear()
    assert w.run(until_empty=True) == 1
    assert served == ["j_real", "j_second"] and slept == []
    assert max(dropped) <= SKIPS
    assert consistency_problems(conn, Q) == []


@pytest.mark.parametrize("grouped", (False, True), ids=("flat", "lane"))
def test_within_the_bound_the_toolkits_call_writes_what_echomqs_does(conn, ex, grouped):
    # ghosts and lanes no claim serves, fewer than the bound, ahead of the jobs: the
    # toolkit's call (ASK_MORE last) and EchoMQ's (lease and token) answer and write
    # the same, claim after claim (the clock's values aside: lease deadlines, claimed_at)
    from test_executors import restore, strip_volatile

    group = "acme" if grouped else None
    for i in range(3):
        jobs.enqueue(conn, Q, f"job {i}", id=f"j_{i}", group=group)
    if grouped:
        lanes.set_limit(conn, Q, "acme", 2)
        dead_lanes(conn, 7)
    ghosts(conn, LANE if grouped else P + "pending", 30)
    ex.token = "the worker"
    for _ in range(4):
        start = dump(conn)
        theirs, their_writes = one_call(ex, grouped, echomq=True), dump(conn)
        restore(conn, start)
        ours, our_writes = one_call(ex, grouped), dump(conn)
        assert ours == theirs and strip_volatile(our_writes) == strip_volatile(their_writes)
    assert ours is None


def test_a_worker_on_a_paused_queue_behind_ghosts_idles(conn, monkeypatch):
    # a paused queue answers None, never "more": the worker sleeps its interval
    jobs.enqueue(conn, Q, "the job", id="j_real")
    ghosts(conn, P + "pending", GHOSTS)
    conn.client.hset(P + "meta", "paused", "1")
    for executor in ("script", "function"):
        w = Worker(conn.with_executor(executor), Q, lambda *_: None, idle_sleep=0)
        assert w.run(until_empty=True) == 0 and not w.more
    assert conn.client.zcard(P + "pending") == GHOSTS + 1


def test_the_claim_sends_echomqs_arguments_to_a_native_command(conn, monkeypatch):
    # an EchoMQ node's EMQ.CLAIM is sent lease and token, as EchoMQ's callers send them
    native = conn.with_executor("native")
    sent: list[list] = []
    monkeypatch.setattr(native, "_native", lambda command, keys, args: sent.append([command, *args]) or [])
    assert jobs.claim(native, Q, 60_000) is None
    assert sent == [["EMQ.CLAIM", "60000", native.token]]
    assert jobs.claim_transition(Q) == ("claim2", [P + "pending", P + "active", base(Q)])
    assert jobs.claim_transition(Q, True) == ("gclaim2", [queue_key(Q, "ring"), P + "active", base(Q)])


def test_percent_emq_claim_says_what_is_still_ahead_when_it_gave_up(conn):
    from emq_notebook.grammar import parse
    from emq_notebook.verbs import Session, execute

    said: list[str] = []
    session = Session(say=said.append)
    session.conn = conn
    ghosts(conn, queue_key(Q, "pending"), SKIPS * jobs.CLAIM_CALLS + 100)
    job = jobs.enqueue(conn, Q, "{}", id="z_real")
    assert execute(session, parse(f"claim {Q}")) is None
    assert said == [
        f"no job claimed from {Q}: 101 members of pending still ahead, none servable within "
        f"{jobs.CLAIM_CALLS} bounded calls (members with no row, or lanes at their limit or "
        "paused): claim again to go on"
    ]
    said.clear()
    assert execute(session, parse(f"claim {Q}"))[0] == job
    assert execute(session, parse(f"claim {Q}")) is None
    assert said == [f"no job claimed from {Q}: nothing ready"]


def test_a_member_whose_key_is_another_type_never_stops_the_queue_untyped(conn, ex):
    from emq_notebook.errors import BadRow

    # `x:logs` names job x's logs list: no job, dropped as a ghost; the job behind is served
    x = jobs.enqueue(conn, Q, "{}", id="x")
    jobs.add_log(conn, Q, x, "a line")
    conn.client.zadd(queue_key(Q, "pending"), {"x:logs": -5})
    got = jobs.claim(ex, Q, 60_000)
    assert got is not None and got[0] == x
    assert conn.client.zscore(queue_key(Q, "pending"), "x:logs") is None
    assert conn.client.llen(f"{P}job:x:logs") == 1  # job x's logs untouched
    # a row key of another type under an ordinary id: a row no transition can read,
    # refused typed with nothing popped
    conn.client.set(f"{P}job:y", "a string")
    conn.client.zadd(queue_key(Q, "pending"), {"y": -5})
    with pytest.raises(BadRow, match="type"):
        jobs.claim(ex, Q, 60_000)
    assert conn.client.zscore(queue_key(Q, "pending"), "y") == -5
