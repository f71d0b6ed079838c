"""Grouped lanes on both backends: limits, round-robin, lane pause, the slot accounting."""

from collections import Counter
from typing import Any

import pytest
import redis
from harm import bounded, sent

from emq_notebook import admin, connector, counts, frames, health, jobs, lanes, magics, triage, watching
from emq_notebook.completion import Completer
from emq_notebook.keyspace import WALK_CHUNK, base
from emq_notebook.verbs import Session
from emq_notebook.widgets import Dashboard, HealthView
from emq_notebook.widgets.job_grid import JobsView
from emq_notebook.widgets.lanes_view import LanesView

Q = "work"


def lane_active(conn, g):
    return int(conn.client.hget(f"emq:{{{Q}}}:g:{g}:meta", "active") or 0)


def test_grouped_jobs_wait_in_their_lane(conn):
    jid = jobs.enqueue(conn, Q, "x", group="acme")
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0
    assert jobs.claim(conn, Q, 1000) is None  # the flat claim does not see lanes
    assert lanes.claim(conn, Q, 1000)[0] == jid
    assert lane_active(conn, "acme") == 1


def test_round_robin_across_lanes(conn):
    for g in ("a", "b", "c"):
        lanes.set_limit(conn, Q, g, 10)
        for i in range(2):
            jobs.enqueue(conn, Q, f"{g}{i}", group=g)
    served = [lanes.claim(conn, Q, 1000)[1] for _ in range(6)]
    assert served == ["a0", "b0", "c0", "a1", "b1", "c1"]
    assert lanes.claim(conn, Q, 1000) is None


def test_lane_limit_holds_and_complete_gives_the_slot_back(conn):
    ids = [jobs.enqueue(conn, Q, str(i), group="acme") for i in range(3)]
    lanes.set_limit(conn, Q, "acme", 2)
    a = lanes.claim(conn, Q, 1000)
    b = lanes.claim(conn, Q, 1000)
    assert lanes.claim(conn, Q, 1000) is None  # at its limit
    assert lane_active(conn, "acme") == 2
    jobs.complete(conn, Q, a[0])
    assert lane_active(conn, "acme") == 1
    c = lanes.claim(conn, Q, 1000)
    assert [a[0], b[0], c[0]] == ids


def test_fail_and_expiry_keep_the_count_balanced(conn):
    lanes.set_limit(conn, Q, "acme", 5)
    x = jobs.enqueue(conn, Q, "x", group="acme", max_attempts=1)
    y = jobs.enqueue(conn, Q, "y", group="acme")
    lanes.claim(conn, Q, 1000)
    lanes.claim(conn, Q, 20)
    jobs.fail(conn, Q, x, "bad")
    assert lane_active(conn, "acme") == 1
    import time

    time.sleep(0.05)
    assert jobs.expire_leases(conn, Q) == 1
    assert lane_active(conn, "acme") == 0
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [y]


def test_lane_pause_and_queue_pause(conn):
    jobs.enqueue(conn, Q, "a", group="a")
    jobs.enqueue(conn, Q, "b", group="b")
    lanes.pause_lane(conn, Q, "a")
    assert lanes.claim(conn, Q, 1000)[1] == "b"
    assert lanes.claim(conn, Q, 1000) is None
    lanes.resume_lane(conn, Q, "a")
    admin.pause(conn, Q)
    assert lanes.claim(conn, Q, 1000) is None  # the queue-wide gate covers lanes
    admin.resume(conn, Q)
    assert lanes.claim(conn, Q, 1000)[1] == "a"
    info = lanes.lanes(conn, Q)
    assert info["a"] == {"pending": 0, "active": 1, "limit": 1, "paused": False}


def test_a_retried_grouped_job_returns_to_its_lane(conn):
    jid = jobs.enqueue(conn, Q, "x", group="acme", max_attempts=2, backoff_ms=1)
    lanes.claim(conn, Q, 1000)
    assert jobs.fail(conn, Q, jid, "once") == "retry"
    import time

    time.sleep(0.02)
    jobs.promote(conn, Q)
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]
    assert lanes.claim(conn, Q, 1000) == (jid, "x", 2)


# -- A queue with many lanes (a lane per tenant): every read of its lanes walks the set of known
# groups on the server a page at a time (`@read_lanes`, `@lane_backlog`), never one SMEMBERS of the
# whole set nor a command per lane from the client. Exact where an operator asks (`lanes.lanes`,
# `watching.backlog`, `admin.job_count` / `backlog`): the same figures as the whole read they
# replace, in as many bounded calls as it takes. Bounded where the toolkit only watches (health's
# lane sample, completion, the Lanes tab, the jobs grid's total): the same commands at 10 times the
# lanes. Both backends; the page sizes are shrunk (monkeypatch) so a few hundred lanes span many
# pages. Work is counted (the commands sent, the lanes a reply says it examined), never timed.
Q_lanes_paging = "tenants"
P = base(Q_lanes_paging)
# the most lanes a walk reads past its budget: a chunk (keyspace.WALK_CHUNK, rendered
# into lua/includes/chunks.lua) and the rest of a bucket SSCAN answers whole (up to 7 in
# Valkey's, and a chained one)
CHUNK = WALK_CHUNK + 14


@pytest.fixture
def small_pages(monkeypatch):
    """Pages of a few lanes, so a few hundred lanes take many calls."""
    monkeypatch.setattr(watching, "LANES_A_CALL", 23)
    monkeypatch.setattr(lanes, "LANE_ROWS_A_CALL", 11)
    monkeypatch.setattr(lanes, "NAMES_A_CALL", 17)
    monkeypatch.setattr(watching, "LANE_EXACT", 13)


def made(conn, names: list[str | bytes], jobs_in=lambda k: 1 + k % 3, rows: bool = False) -> None:
    """Lanes written straight into the keyspace, as another node (or many tenants) may
    have: each in the set of known groups with `jobs_in(k)` jobs in its backlog (their
    rows when asked: the lane reads never read one), some with a limit and an active
    count."""
    pipe = conn.client.pipeline(transaction=False)
    for k, g in enumerate(names):
        raw = g.encode("utf-8", "surrogateescape") if isinstance(g, str) else g
        pipe.sadd(P + "groups", raw)
        pipe.zadd(P.encode() + b"g:" + raw + b":pending", {f"j_{k}_{i}": i for i in range(jobs_in(k))})
        for i in range(jobs_in(k) if rows else 0):
            pipe.hset(f"{P}job:j_{k}_{i}", mapping={"state": "pending", "group": raw, "payload": "{}"})
        if k % 5 == 0:
            pipe.hset(P.encode() + b"g:" + raw + b":meta", mapping={"limit": 3, "active": k % 3})
        if k % 7 == 0:
            pipe.hset(P.encode() + b"g:" + raw + b":meta", "paused", "1")
        if k % 500 == 499:
            pipe.execute()
    pipe.hset(P + "meta", "created_at", 1)
    pipe.execute()


def whole_read(conn) -> dict[str, dict]:
    """What the reads this file covers answered before: SMEMBERS of the set, then a ZCARD
    and an HMGET a lane (the old `lanes.lanes`), the lanes by name."""
    r = conn.client
    groups = sorted(r.smembers(P + "groups"))
    pipe = r.pipeline(transaction=False)
    for g in groups:
        pipe.zcard(f"{P}g:{g}:pending")
        pipe.hmget(f"{P}g:{g}:meta", "limit", "active", "paused")
    got = pipe.execute()
    return {
        g: {
            "pending": got[2 * i],
            "active": int(got[2 * i + 1][1] or 0),
            "limit": int(got[2 * i + 1][0] or 1),
            "paused": got[2 * i + 1][2] is not None,
        }
        for i, g in enumerate(groups)
    }


def tenants(n: int) -> list[str | bytes]:
    return [f"t{k:05d}" for k in range(n)]


def count_commands(patcher: pytest.MonkeyPatch, name: Any) -> Counter:
    """The commands the client sends while `patcher` holds (plain and pipelined), by
    `name(command)`."""
    commands: Counter = Counter()
    for cls in (redis.Redis, redis.client.Pipeline):
        real = cls.execute_command

        def spy(self, *args, _real=real, **kw):
            commands[name(str(args[0]))] += 1
            return _real(self, *args, **kw)

        patcher.setattr(cls, "execute_command", spy)
    return commands


def spied(conn, monkeypatch) -> tuple[Counter, list[tuple[str, Any]]]:
    """The commands the client sends from now on (plain and pipelined, by name), and each
    script run with its reply (`conn.run`, pipelined runs as None)."""
    commands = count_commands(monkeypatch, str.upper)
    runs: list[tuple[str, Any]] = []
    real_run = conn.run

    def run(name, keys, args=(), **kw):
        reply = real_run(name, keys, args, **kw)
        if kw.get("pipeline") is None:
            runs.append((name, reply))
        return reply

    monkeypatch.setattr(conn, "run", run)
    real_execute = connector.Pipeline.execute

    def execute(self, *a, **kw):
        queued = {at: call.name for at, (_, call) in self._runs.items()}
        replies = real_execute(self, *a, **kw)
        runs.extend((queued[at], reply) for at, reply in enumerate(replies) if at in queued)
        return replies

    monkeypatch.setattr(connector.Pipeline, "execute", execute)
    return commands, runs


# -- exact where asked ------------------------------------------------------------------


def test_a_few_hundred_lanes_in_many_pages_read_as_the_whole_read_did(conn, small_pages, monkeypatch):
    made(conn, tenants(300))
    old = whole_read(conn)
    commands, runs = spied(conn, monkeypatch)
    listed = lanes.lanes(conn, Q_lanes_paging, limit=None)
    assert dict(listed) == old and listed.total == 300 and listed.complete
    assert watching.backlog(conn, Q_lanes_paging) == sum(v["pending"] for v in old.values()) == 600
    assert admin.job_count(conn, Q_lanes_paging) == admin.backlog(conn, Q_lanes_paging) == 600
    assert "SMEMBERS" not in commands
    # no command per lane from the client: a page of lanes a call, each within its budget
    assert commands["ZCARD"] <= 3 * 4 and "HMGET" not in commands
    pages = [reply for name, reply in runs if name == "read_lanes"]
    sums = [reply for name, reply in runs if name == "lane_backlog"]
    assert len(pages) >= 300 // (lanes.LANE_ROWS_A_CALL + CHUNK)
    assert all(int(p[1]) <= lanes.LANE_ROWS_A_CALL + CHUNK for p in pages)
    assert len(sums) >= 3 * 300 // (watching.LANES_A_CALL + CHUNK)
    assert all(int(s[1]) <= watching.LANES_A_CALL + CHUNK for s in sums)


def test_a_listing_takes_a_limit_and_says_how_many_lanes_there_are(conn, small_pages):
    made(conn, tenants(300))
    first = lanes.lanes(conn, Q_lanes_paging, limit=30)
    assert len(first) == 30 and first.total == 300 and not first.complete
    old = whole_read(conn)
    assert all(first[g] == old[g] for g in first)
    assert list(first) == sorted(first)
    # the default is a page an operator reads: every lane of a small queue, as before
    assert dict(lanes.lanes(conn, Q_lanes_paging)) == old


def test_one_lane_by_its_name_and_the_names_a_completion_offers(conn, small_pages):
    made(conn, tenants(300))
    old = whole_read(conn)
    assert lanes.lane(conn, Q_lanes_paging, "t00010") == old["t00010"]
    assert lanes.lane(conn, Q_lanes_paging, "t00007")["paused"] is True
    assert lanes.lane(conn, Q_lanes_paging, "nobody") is None
    # one call: the names met in the first NAMES_A_CALL lanes (and one chunk) that match
    found = lanes.names(conn, Q_lanes_paging, "t0001")
    assert found == sorted(found) and set(found) <= {g for g in old if g.startswith("t0001")}
    assert len(lanes.names(conn, Q_lanes_paging)) <= lanes.NAMES_A_CALL + CHUNK


def test_lane_names_another_node_wrote(conn, small_pages):
    """Names that are not UTF-8, long, with spaces and colons, empty, and one over
    65,536 bytes (no key is built of it: it is counted as skipped, its jobs not)."""
    odd: list[str | bytes] = [b"\xff\xfe-tenant", "L" * 5000, "tenant 42:x", "", "ünï"]
    foreign = "F" * 70_000
    made(conn, [*tenants(150), *odd, foreign], jobs_in=lambda k: 1 if k < 155 else 4)
    old = whole_read(conn)
    walked = watching.backlogs(conn, [Q_lanes_paging])[Q_lanes_paging]
    assert walked.jobs == sum(v["pending"] for v in old.values()) - 4 == 155
    assert walked.skipped == 1 and walked.lanes == 156
    listed = lanes.lanes(conn, Q_lanes_paging, limit=None)
    assert listed.skipped == 1 and foreign not in listed
    assert dict(listed) == {g: v for g, v in old.items() if g != foreign}
    assert listed["\udcff\udcfe-tenant"]["pending"] == 1  # read as surrogateescape, as every read
    assert lanes.lane(conn, Q_lanes_paging, "\udcff\udcfe-tenant") == old["\udcff\udcfe-tenant"]
    assert admin.job_count(conn, Q_lanes_paging) == 155


def test_a_meta_another_node_wrote_reads_as_no_count(conn, small_pages):
    made(conn, tenants(40))
    conn.client.hset(P + "g:t00001:meta", mapping={"limit": "x" * 100, "active": "many"})
    conn.client.hset(P + "g:t00002:meta", "limit", "7" * 40)  # longer than any whole number
    listed = lanes.lanes(conn, Q_lanes_paging, limit=None)
    assert listed["t00001"]["limit"] is None and listed["t00001"]["active"] is None
    assert listed["t00002"]["limit"] is None and listed["t00002"]["active"] == 0
    assert lanes.lane(conn, Q_lanes_paging, "t00001") == listed["t00001"]
    assert lanes.lane(conn, Q_lanes_paging, "t00002") == listed["t00002"]


def test_a_call_reads_about_its_byte_budget_of_names(conn, monkeypatch):
    """Names of 20 KB count 16 times their bytes (a key is built of each): with a budget
    of 64 KB a call takes one chunk of them, not the set."""
    monkeypatch.setattr(watching, "BYTE_BUDGET", 64 << 10)
    made(conn, [f"{k:03d}" + "n" * 20_000 for k in range(40)], jobs_in=lambda k: 1)
    commands, runs = spied(conn, monkeypatch)
    assert watching.backlog(conn, Q_lanes_paging) == 40
    sums = [int(reply[1]) for name, reply in runs if name == "lane_backlog"]
    # a call stops at the chunk in hand: 1 lane asked first, and SSCAN's bucket
    assert sum(sums) == 40 and len(sums) >= 3 and max(sums) <= 1 + 14
    assert len(lanes.lanes(conn, Q_lanes_paging, limit=None)) == 40


# -- bounded where the toolkit watches ---------------------------------------------------


def lanes_made(conn, n: int) -> None:
    """`n` lanes of two jobs each, with their rows (a page of jobs is as many lanes)."""
    conn.client.flushall()
    made(conn, tenants(n), jobs_in=lambda k: 2, rows=True)


def counted_look(call, conn, srv, client: list, server: list) -> None:
    """One look after a first (a pass begun, a script loaded): the commands the client
    sent, and on Valkey those the server ran, appended to `client` and `server`."""
    call()
    client.append(client_sent(call))
    if srv is not None:
        server.append(sum(sent(conn, srv, call).values()))


def same_work(client: list, server: list) -> None:
    """The two looks' work the same (the client's commands) or close (the server's), and
    never the whole set of lanes."""
    assert client[0] == client[1] and "smembers" not in client[1], client
    if server:
        assert server[1] < 2 * server[0], server


def client_sent(call) -> Counter:
    """The commands `call()` sends from the client, by name (plain and pipelined)."""
    with pytest.MonkeyPatch.context() as mp:
        seen = count_commands(mp, str.lower)
        call()
    return seen


@pytest.mark.parametrize(
    "look",
    [
        "health",
        "completion",
        "lanes tab",
        "jobs grid",
        "%emq lane",
    ],
)
def test_a_look_costs_the_same_at_ten_times_the_lanes(harm, small_pages, monkeypatch, look):
    """The commands a look sends from the client are the same at 200 and 2,000 lanes, and
    on Valkey the commands the server runs for it, its scripts' own included (INFO
    commandstats), do not grow with the lanes either (a whole read ran ten times as many)."""
    conn, srv = harm
    monkeypatch.setattr("emq_notebook.widgets.lanes_view.SHOWN_LANES", 10)
    # the jobs grid's page of 100 jobs is 50 lanes: one page of lanes at either size
    monkeypatch.setattr(lanes, "LANE_ROWS_A_CALL", 64)
    session = Session(say=lambda _: None)
    session.conn = conn

    def line(text: str) -> Any:
        from emq_notebook.grammar import parse
        from emq_notebook.verbs import execute

        return execute(session, parse(text))

    client, server = [], []
    for n in (200, 2000):
        bounded(lambda n=n: lanes_made(conn, n), srv, what="making the lanes")
        counts = _counts(conn, n)
        view = LanesView(conn, Q_lanes_paging)
        grid = JobsView(conn, Q_lanes_paging, state="pending")
        looks = {
            # health given its counts (as the dashboard gives them): its own reads
            "health": lambda counts=counts: health.health(conn, counts=counts),
            "completion": lambda: Completer(session).words(f"lane {Q_lanes_paging} t0001"),
            "lanes tab": view.refresh,
            "jobs grid": grid.refresh,
            "%emq lane": lambda: line(f"lane {Q_lanes_paging} nobody"),
        }
        counted_look(looks[look], conn, srv, client, server)
        view.close()
        grid.close()
    same_work(client, server)


def _counts(conn, n: int):
    """The counts row the dashboard hands health (the lanes' own figure is not health's)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "pending": 2 * n,
                "active": 0,
                "schedule": 0,
                "dead": 0,
                "paused": False,
                "lanes": n,
                "repeatables": 0,
            }
        ],
        index=pd.Index([Q_lanes_paging], name="queue"),
    )


def test_health_samples_the_heads_of_a_few_lanes(conn, small_pages, monkeypatch):
    made(conn, tenants(300))
    commands, runs = spied(conn, monkeypatch)
    health.health(conn, counts=_counts(conn, 300))
    walks = [reply for name, reply in runs if name == "lane_backlog"]
    assert "SMEMBERS" not in commands
    # no lane's pending set read from the client; the rows read are the sampled heads
    assert "ZRANGE" not in commands or commands["ZRANGE"] <= 2
    assert all(int(w[1]) <= health.LANE_WALK + CHUNK for w in walks)
    assert all(len(w) - 4 <= health.LANE_SAMPLE for w in walks)


def test_the_magics_lane_verb_reads_one_lane(conn, small_pages, capsys, ip):
    made(conn, tenants(300))
    magics.SESSION.conn = conn
    assert ip.run_line_magic("emq", f"lane {Q_lanes_paging} t00005") == whole_read(conn)["t00005"]
    assert ip.run_line_magic("emq", f"lane {Q_lanes_paging} nobody") is None
    said = capsys.readouterr().out
    assert said.startswith(f"no lane nobody in {Q_lanes_paging} (lanes: t") and said.rstrip().endswith(", …)")


# -- the counts and the listings of pending jobs -------------------------------------------


def test_counts_asked_for_are_exact_in_bounded_calls(conn, small_pages, monkeypatch):
    made(conn, tenants(300))
    commands, runs = spied(conn, monkeypatch)
    look = counts.look(conn, [Q_lanes_paging])
    c = look.frame
    assert c.loc[Q_lanes_paging, "pending"] == 600 and c.loc[Q_lanes_paging, "lanes"] == 300
    assert look.notes == {} and "SMEMBERS" not in commands and commands["ZCARD"] <= 5
    sums = [int(reply[1]) for name, reply in runs if name == "lane_backlog"]
    assert sum(sums) == 300 and max(sums) <= watching.LANES_A_CALL + CHUNK
    # every queue listed (`%emq queues`): the same figures
    assert frames.counts(conn).loc[Q_lanes_paging, "pending"] == 600


def test_a_watching_look_sums_a_page_of_lanes_and_says_so(conn, small_pages):
    made(conn, tenants(300))
    made_small = ["a", "b"]
    pipe = conn.client.pipeline(transaction=False)
    for g in made_small:
        pipe.sadd("emq:{few}:groups", g)
        pipe.zadd(f"emq:{{few}}:g:{g}:pending", {f"j_{g}": 0})
    pipe.hset("emq:{few}:meta", "created_at", 1)
    pipe.execute()
    looks = []
    for _ in range(60):
        look = counts.look(conn, [Q_lanes_paging, "few"], watch=True)
        c = look.frame
        looks.append((int(c.loc[Q_lanes_paging, "pending"]), look.note(Q_lanes_paging)))
        assert c.loc["few", "pending"] == 2 and "few" not in look.notes  # few lanes: exact
        if "as of a pass" in looks[-1][1]:
            break
    first, last = looks[0], looks[-1]
    assert first[0] < 600 and first[1].startswith("at least: lanes counted so far")
    assert len(looks) >= 300 // (watching.LANE_EXACT + CHUNK)  # a page of lanes a look
    assert last[0] == 600 and "as of a pass over 300 lanes that ended" in last[1]
    # the next pass goes on in the background of the next looks; the last figure stands
    more = conn.client.zadd(P + "g:t00001:pending", {"j_new": 9})
    assert (
        more == 1 and frames.counts(conn, [Q_lanes_paging], watch=True).loc[Q_lanes_paging, "pending"] == 600
    )
    assert frames.counts(conn, [Q_lanes_paging]).loc[Q_lanes_paging, "pending"] == 601  # asked for: exact


def test_the_views_say_when_a_figure_is_a_pass(conn, small_pages):
    made(conn, tenants(300))
    d = Dashboard(conn, auto=False, queue=Q_lanes_paging)
    view = HealthView(conn)
    try:
        assert "pending of <b>tenants</b>: at least: lanes counted so far" in d.summary.value
        assert "pending: at least: lanes counted so far" in d.parts["Overview"].counts.value
        assert "pending of <b>tenants</b>:" in view.summary.value
        assert Q_lanes_paging in health.look(conn, [Q_lanes_paging]).notes
    finally:
        d.close()
        view.close()


@pytest.mark.parametrize("look", ["dashboard refresh", "HealthView refresh", "frames.health", "%emq health"])
def test_a_refresh_costs_the_same_at_ten_times_the_lanes(harm, small_pages, look):
    """The regression: a refresh read the set of known groups whole and sent a ZCARD a
    lane (100,000 lanes: 100,010 commands, 83 ms of Valkey a refresh). Now the commands
    a refresh sends are the same at 200 and at 2,000 lanes, and Valkey's own count, its
    scripts' commands included, does not grow with them."""
    conn, srv = harm
    session = Session(say=lambda _: None)
    session.conn = conn
    client, server = [], []
    for n in (200, 2000):
        bounded(lambda n=n: lanes_made(conn, n), srv, what="making the lanes")
        d = Dashboard(conn, auto=False, queue=Q_lanes_paging)
        view = HealthView(conn)

        def line(text: str) -> Any:
            from emq_notebook.grammar import parse
            from emq_notebook.verbs import execute

            return execute(session, parse(text))

        looks = {
            "dashboard refresh": d.refresh,
            "HealthView refresh": view.refresh,
            "frames.health": lambda: frames.health(conn),
            "%emq health": lambda: line("health"),
        }
        counted_look(looks[look], conn, srv, client, server)
        d.close()
        view.close()
    same_work(client, server)


def test_a_snapshot_and_a_search_of_pending_read_every_lane_once(conn, small_pages):
    made(conn, tenants(120), rows=True)
    pipe = conn.client.pipeline(transaction=False)
    pipe.sadd(P + "groups", *[f"idle{k}" for k in range(50)])  # lanes with nothing waiting
    pipe.execute()
    old = whole_read(conn)
    every = {f"j_{k}_{i}" for k in range(120) for i in range(old[f"t{k:05d}"]["pending"])}
    snap = frames.snapshot(conn, Q_lanes_paging, "pending", limit=None)
    assert set(snap.index) == every and len(snap) == len(every) == 240
    assert set(snap["group"]) == {f"t{k:05d}" for k in range(120)}
    part = frames.snapshot(conn, Q_lanes_paging, "pending", limit=50, offset=100)
    assert list(part.index) == list(snap.index[100:150])
    assert set(triage.find(conn, Q_lanes_paging, state="pending", limit=None).index) == every
    # a page at a time, each page from where the one before ended (a place in a lane)
    seen: list[str] = []
    after = None
    while True:
        page = triage.find(conn, Q_lanes_paging, state="pending", limit=7, after=after)
        seen += list(page.index)
        after = page.attrs["next"]
        if after is None or page.empty:
            break
    assert sorted(seen) == sorted(every) and len(seen) == len(every)
    assert triage.errors(conn, Q_lanes_paging, state="pending")["count"].sum() == 240  # no last_error: ""


def test_percent_emq_queues_only_watches_unless_exact(conn, small_pages, monkeypatch):
    # SPEC 11: `%emq queues` is a look that watches: its commands depend on the queues
    # shown, never on their lanes; `--exact` sums every lane, in bounded calls
    from emq_notebook.grammar import parse
    from emq_notebook.verbs import execute

    made(conn, tenants(300))
    said: list[str] = []
    session = Session(say=said.append)
    session.conn = conn
    commands, runs = spied(conn, monkeypatch)
    frame = execute(session, parse("queues"))
    # one call a queue, its lanes' step in it
    assert [name for name, _ in runs] == ["read_watch"] and int(frame.loc[Q_lanes_paging, "pending"]) < 600
    assert any(line.startswith(f"{Q_lanes_paging}: at least: lanes counted so far") for line in said)
    said.clear()
    runs.clear()
    exact = execute(session, parse("queues --exact"))
    assert int(exact.loc[Q_lanes_paging, "pending"]) == 600 and said == []
    assert len([1 for name, _ in runs if name == "lane_backlog"]) > 1


def test_a_lane_name_or_prefix_over_max_id_bytes_is_answered_before_any_io(conn, monkeypatch):
    # what the operator types: `%emq lane <16 MB>` named it at five commands (Valkey held
    # 20 ms at each), a completion's prefix of 16 MB was matched against every name (29
    # ms); no walk answers such a name and no key is built of one
    from emq_notebook.errors import InvalidName
    from emq_notebook.keyspace import MAX_SERVER_ID, queue_key

    lanes_ = lanes
    conn.client.hset(queue_key("big", "meta"), "created_at", "1")
    conn.client.sadd(queue_key("big", "groups"), "a", "b")
    long_name = "L" * (MAX_SERVER_ID + 1)
    asked: list[str] = []
    run, pipeline = conn.run, conn.pipeline
    monkeypatch.setattr(conn, "run", lambda name, *a, **k: asked.append(name) or run(name, *a, **k))
    monkeypatch.setattr(conn, "pipeline", lambda *a, **k: asked.append("pipeline") or pipeline(*a, **k))
    with pytest.raises(InvalidName, match="over 65,536 bytes"):
        lanes_.lane(conn, "big", long_name)
    assert lanes_.names(conn, "big", long_name) == []
    assert asked == []
    # a name or prefix within the bound is read as before
    assert lanes_.names(conn, "big", "a") == ["a"]
    assert lanes_.lane(conn, "big", "a") is not None


def test_a_key_of_another_type_is_counted_empty_and_said_never_blinding_the_look(conn):
    # another client's string where a queue's groups set, a state set and its meta live
    from emq_notebook import jobs

    jobs.enqueue(conn, "fine", "{}")
    jobs.enqueue(conn, Q_lanes_paging, "{}")
    conn.client.set(P + "groups", "not a set")
    conn.client.set(P + "dead", "not a zset")
    for watch in (False, True):
        look = counts.look(conn, ["fine", Q_lanes_paging], watch=watch)
        c = look.frame
        assert c.loc["fine", "pending"] == 1 and c.loc[Q_lanes_paging, "pending"] == 1
        assert c.loc[Q_lanes_paging, "lanes"] == 0 and c.loc[Q_lanes_paging, "dead"] == 0
        assert look.notes == {Q_lanes_paging: [f"{P}dead, {P}groups hold another type: counted as empty"]}
    # every queue listed, the dashboard's look: the other queues are read all the same
    assert frames.counts(conn, watch=True).loc["fine", "pending"] == 1
