"""Frames checked against the keyspace, on both backends; and do no harm, frames.py's
reads (bench/harm.py found each), under the harness's watchdog (tests/harm.py), work
observed in the replies and the commands Valkey ran, never timed: a snapshot's call stops
at about a byte budget, a payload too large for a script is read with a plain HGET, a
read of rows keeps its call's byte budget across the fields of a row and the rows of a
chunk, and copies no field over the longest it is sent (`TestHarmRowFields`)."""

import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from dead_rows import BIG, dead_row, long_dead
from dead_rows import P as P_reads
from dead_rows import Q as Q_reads
from harm import bounded, commands_sent, replies, written_out
from long_fields import BETWEEN, FIELD, OVER, dead, longest_value, small_bounds
from long_fields import P as P_row_fields
from long_fields import Q as Q_row_fields

import emq_notebook as emq
from emq_notebook import admin, decoding, frames, jobs, repeat
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.errors import BadInput
from emq_notebook.keyspace import base

Q = "mail"


def test_snapshot_has_one_row_per_job_with_its_set_and_row(conn):
    p = jobs.enqueue(conn, Q, '{"p": 1}', id="j_p", priority=2)
    g = jobs.enqueue(conn, Q, '{"g": 1}', id="j_g", group="acme")
    s = jobs.enqueue(conn, Q, '{"s": 1}', id="j_s", delay_ms=60_000)
    d = jobs.enqueue(conn, Q, '{"d": 1}', id="j_0d", max_attempts=1)
    a = jobs.enqueue(conn, Q, '{"a": 1}', id="j_a")
    assert jobs.claim(conn, Q, 60_000)[0] == d  # priority 0, first id
    jobs.fail(conn, Q, d, "boom")
    assert jobs.claim(conn, Q, 60_000)[0] == a
    jobs.update_progress(conn, Q, a, "30")
    snap = frames.snapshot(conn, Q)
    assert set(snap.index) == {p, g, s, d, a}
    assert snap.loc[p, "state"] == "pending" and snap.loc[p, "priority"] == 2 and pd.isna(snap.loc[p, "at"])
    assert snap.loc[g, "state"] == "pending" and snap.loc[g, "group"] == "acme"
    assert snap.loc[s, "state"] == "schedule"
    assert snap.loc[d, "state"] == "dead" and snap.loc[d, "last_error"] == "boom"
    assert snap.loc[d, "failures"] == 1 and snap.loc[d, "attempts"] == 1
    assert snap.loc[a, "state"] == "active" and snap.loc[a, "progress"] == "30"
    # the set score as a timestamp: the schedule's due time matches the zset
    due = conn.client.zscore(f"emq:{{{Q}}}:schedule", s)
    assert snap.loc[s, "at"] == pd.Timestamp(due, unit="ms", tz="UTC")
    assert snap.loc[a, "at"] > pd.Timestamp.now(tz="UTC")
    dead = frames.snapshot(conn, Q, states="dead")
    assert list(dead.index) == [d]
    assert list(frames.snapshot(conn, Q, states=("pending",), limit=1).index) == [p]  # flat before lanes


def plain(frame):
    """A frame as {id: {column: value}}, a missing value as None whatever the dtype."""
    return frame.astype(object).where(frame.notna(), None).to_dict("index")


def test_limit_caps_the_rows_in_all_in_snapshot_order(conn):
    flat = [jobs.enqueue(conn, Q, "{}", id=f"j_p{i}") for i in range(3)]
    lane_a = [jobs.enqueue(conn, Q, "{}", id=f"j_a{i}", group="a") for i in range(2)]
    lane_b = [jobs.enqueue(conn, Q, "{}", id=f"j_b{i}", group="b") for i in range(2)]
    later = [jobs.enqueue(conn, Q, "{}", id=f"j_s{i}", delay_ms=60_000) for i in range(2)]
    everything = frames.snapshot(conn, Q)
    assert list(everything.index) == flat + later + lane_a + lane_b  # states, then the lanes
    for n in (1, 3, 4, 6, 9, 50):
        capped = frames.snapshot(conn, Q, limit=n)
        # (a text column with no text is object, as pandas infers it: dtypes may differ)
        assert plain(capped) == plain(everything.head(n))
    assert list(frames.snapshot(conn, Q, states=("schedule", "pending"), limit=3).index) == later + flat[:1]
    assert frames.snapshot(conn, Q, states="dead", limit=5).empty


def test_a_limited_snapshot_reads_only_the_rows_it_shows(conn):
    ids = [jobs.enqueue(conn, Q, "{}") for _ in range(30)] + [
        jobs.enqueue(conn, Q, "{}", group=f"g{i % 3}") for i in range(30)
    ]
    asked = []
    real = conn.run

    def recorded(name, keys, args=(), **kw):
        if name == "read_rows":
            asked.append(list(args[2 + len(frames.FIELDS) :]))  # the ids after the fields
        return real(name, keys, args, **kw)

    conn.run = recorded
    assert list(frames.snapshot(conn, Q, limit=4).index) == ids[:4]
    assert asked == [ids[:4]]


@pytest.mark.parametrize("limit", [0, -3, 2.5, True, "2"])
def test_snapshot_limit_is_a_whole_number_from_one(conn, limit):
    for i in range(10):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i}")
    with pytest.raises(BadInput, match="limit"):
        frames.snapshot(conn, Q, limit=limit)
    assert len(frames.snapshot(conn, Q, limit=3)) == 3
    assert len(frames.snapshot(conn, Q, limit=None)) == 10


def test_snapshot_of_an_empty_queue(conn):
    snap = frames.snapshot(conn, "empty")
    assert snap.empty and list(snap.columns) == frames.COLUMNS


def test_queues_and_counts(conn):
    for i in range(3):
        jobs.enqueue(conn, "a", str(i))
    jobs.enqueue(conn, "a", "x", group="g1")
    jobs.enqueue(conn, "b", "y", delay_ms=60_000)
    repeat.register(conn, "b", "tick", 60_000, "{}")
    admin.pause(conn, "b")
    assert frames.queues(conn) == ["a", "b"]
    c = frames.counts(conn)
    assert c.loc["a"].to_dict() == {
        "pending": 4,
        "active": 0,
        "schedule": 0,
        "dead": 0,
        "paused": False,
        "lanes": 1,
        "repeatables": 0,
    }
    assert c.loc["b", "schedule"] == 1 and bool(c.loc["b", "paused"]) and c.loc["b", "repeatables"] == 1


def test_metrics_frame_is_time_indexed(conn):
    minute = int(time.time() // 60)
    conn.client.hset(f"emq:{{{Q}}}:metrics:completed", mapping={minute - 120: 4, minute: 2})
    conn.client.hset(f"emq:{{{Q}}}:metrics:failed", mapping={minute: 1})
    conn.client.hset(f"emq:{{{Q}}}:metrics:claimed", mapping={minute - 120: 5, minute: 3, "by hand": 9})
    m = frames.metrics(conn, Q)
    assert isinstance(m.index, pd.DatetimeIndex) and list(m.columns) == ["claimed", "completed", "failed"]
    assert m["completed"].tolist() == [4, 2] and m["failed"].tolist() == [0, 1]
    assert m["claimed"].tolist() == [5, 3]
    assert frames.metrics(conn, Q, since_ms=3_600_000)["completed"].tolist() == [2]


def test_snapshot_pages_with_offset_cover_each_set_once_in_set_order(conn):
    ids = [jobs.enqueue(conn, Q, str(i), id=f"j_{i:03d}", delay_ms=60_000 + i) for i in range(23)]
    lane = [jobs.enqueue(conn, Q, str(i), id=f"j_g{i}", group="acme") for i in range(3)]
    pages = [frames.snapshot(conn, Q, states="schedule", limit=10, offset=o) for o in (0, 10, 20, 30)]
    assert [len(p) for p in pages] == [10, 10, 3, 0]
    assert [i for p in pages for i in p.index] == ids  # due order, no overlap, no gap
    assert list(pages[3].columns) == frames.COLUMNS
    # pending: the flat backlog, then each lane, paged as one order
    page = frames.snapshot(conn, Q, states="pending", limit=2, offset=1)
    assert list(page.index) == lane[1:3]
    assert frames.snapshot(conn, Q, states="schedule", offset=20).index.tolist() == ids[20:]


def test_snapshot_refuses_a_bad_offset_before_any_io():
    import emq_notebook as emq
    from emq_notebook.errors import BadInput

    nowhere = emq.connect("redis://127.0.0.1:1/0")
    for bad in (-1, 2.5, "3", True):
        try:
            frames.snapshot(nowhere, Q, offset=bad)
        except BadInput as exc:
            assert "offset" in str(exc)
        else:
            raise AssertionError(f"offset {bad!r} was accepted")


def test_a_resp2_client_reads_the_same_snapshot(conn, backend, request):
    """redis-py speaks RESP3 by default; the raw ZRANGE WITHSCORES reply is read in
    either protocol's shape."""
    import fakeredis
    import redis

    from emq_notebook import connector, decoding

    jobs.enqueue(conn, Q, "{}", id="j_p", priority=3)
    jobs.enqueue(conn, Q, "{}", id="j_s", delay_ms=60_000)
    jobs.enqueue(conn, Q, "{}", id="j_g", group="acme")
    if backend == "fake":
        client = fakeredis.FakeRedis(
            server=connector.fake_server(), decode_responses=True, encoding_errors=decoding.ERRORS, protocol=2
        )
    else:
        kw = conn.client.connection_pool.connection_kwargs
        client = redis.Redis(
            host=kw["host"],
            port=kw["port"],
            decode_responses=True,
            encoding_errors=decoding.ERRORS,
            protocol=2,
        )
    resp2 = connector.Connection(client, "resp2")
    assert plain(frames.snapshot(resp2, Q)) == plain(frames.snapshot(conn, Q))
    assert plain(frames.snapshot(resp2, Q, limit=2)) == plain(frames.snapshot(conn, Q).head(2))


def test_a_set_of_long_non_ascii_ids_is_read_whole_when_a_page_stops_on_its_bytes(conn, monkeypatch):
    # a page the script ends at its byte budget is not the set's end: its ids are counted
    # in bytes as the server counts them, not in characters (two bytes each here)
    monkeypatch.setattr(frames, "BYTE_BUDGET", 3000)
    key = f"emq:{{{Q}}}:schedule"
    ids = [f"{'é' * 50}{i:03d}" for i in range(200)]
    conn.client.zadd(key, {m: i for i, m in enumerate(ids)})
    got, scores = frames._ranks(conn, key, 0, None)
    assert got == ids and scores == [float(i) for i in range(200)]


# -- dead letters newest first, paged on the server ---------------------------------------
def test_dead_page_of_100000_dead_reads_newest_first(conn):
    """100,000 dead rows (another node's, scored by their time of death): each page is
    the next newest deaths, whatever its place in the set (one server call a page, the
    cost the same at the end as at the start: bench/README.md); the oldest order and the
    attempts order are the server's too."""
    from dead_letters import hundred_thousand_dead

    q, n = "deadpage", 100_000
    hundred_thousand_dead(conn, q, n)
    for start in (0, 100, 50_000, n - 100):
        page = frames.dead_page(conn, q, start, 100)
        want = [f"d{i:06d}" for i in range(n - 1 - start, n - 101 - start, -1)]
        assert list(page.index) == want
        assert page["at"].is_monotonic_decreasing and (page["state"] == "dead").all()
        assert page.attrs["total"] == n
    past = frames.dead_page(conn, q, n - 50, 100)  # the last page: the 50 oldest
    assert list(past.index) == [f"d{i:06d}" for i in range(49, -1, -1)]
    assert list(frames.dead_page(conn, q, 0, 3, by="oldest").index) == ["d000000", "d000001", "d000002"]
    top = frames.dead_page(conn, q, 0, 100, by="attempts")
    # among the 1,000 newest: the most attempts first, then the newest
    assert top.attrs["ranked"] == 1_000 and list(top["attempts"]) == [7] * 100
    sevens = [i for i in range(n - 1, n - 1_001, -1) if (1 + i % 7) == 7]
    assert list(top.index) == [f"d{i:06d}" for i in sevens[:100]]
    with pytest.raises(BadInput):
        frames.dead_page(conn, q, 0, 5, by="size")
    with pytest.raises(BadInput):
        frames.dead_page(conn, q, 0, 1_001)


def test_a_snapshot_reads_a_payload_too_large_for_a_script_with_a_plain_read(harm):
    conn, srv = harm
    big = "y" * BIG
    for i in range(5):
        dead_row(conn, f"j_{i}", body=big if i == 2 else "{}", score=i)
    calls = replies(conn, "read_rows")
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert frame.loc["j_2", "payload"] == big and list(frame.index) == [f"j_{i}" for i in range(5)]
    # the script never carried it: the row came back without it, its place marked
    assert [len(row) for reply in calls for row in reply] == [8, 8, 9, 8, 8]
    assert all(
        sum(len(v) for row in reply for v in row if isinstance(v, str)) < BYTE_BUDGET for reply in calls
    )


def straddling_dead(conn) -> dict[str, dict[str, str]]:
    """1,203 dead members across three `frames.BATCH`es of 500: ordinary rows; payloads
    of exactly a byte budget (read in the script, ending its call), one byte over (read
    with a plain HGET), two halves that straddle a budget; members with no row; ids
    naming another job's :logs and :lock; a last_error that is not UTF-8. Answers each
    id's row as the server holds it ({} for none)."""
    odd: dict[int, Any] = {
        497: "P" * BYTE_BUDGET,
        498: "O" * (BYTE_BUDGET + 1),
        499: None,  # a member with no row
        500: "j_00010:logs",
        501: "H" * (BYTE_BUDGET // 2 + 1),
        502: "h" * (BYTE_BUDGET // 2 + 1),
        999: "Q" * (BYTE_BUDGET + 1),
        1000: "R" * BYTE_BUDGET,
        1001: "j_00011:lock",
        1202: "S" * (BYTE_BUDGET + 1),
    }
    rows: dict[str, dict[str, str]] = {}
    pipe = conn.client.pipeline(transaction=False)
    for i in range(1_203):
        job_id, value = f"j_{i:05d}", odd.get(i, "{}")
        if value is None or value.startswith("j_"):
            job_id = value or job_id
            rows[job_id] = {}
        else:
            error = "bytes \udcff\udcfe" if i == 7 else f"boom {i}"
            rows[job_id] = {"payload": value, "attempts": str(i % 7), "last_error": error}
            pipe.hset(P_reads + "job:" + job_id, mapping=rows[job_id] | {"state": "dead"})
        pipe.zadd(P_reads + "dead", {job_id: 1_000 + i})
    pipe.rpush(P_reads + "job:j_00010:logs", "a line")
    pipe.execute()
    return rows


def test_a_snapshot_across_batches_and_byte_budgets_equals_the_rows_in_order(harm):
    conn, srv = harm
    rows = straddling_dead(conn)
    order = list(rows)
    calls = replies(conn, "read_rows")
    plain = []
    real = conn.command
    conn.command = lambda *parts: (plain.append(parts[0]), real(*parts))[1]
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert list(frame.index) == order and frame.index.is_unique
    shown = lambda column: [None if pd.isna(v) else v for v in frame[column]]  # noqa: E731
    assert shown("payload") == [r.get("payload") for r in rows.values()]
    assert shown("last_error") == [r.get("last_error") for r in rows.values()]
    assert list(frame.attempts) == [int(r.get("attempts", 0)) for r in rows.values()]
    assert set(frame.state) == {"dead"}
    # each row answered once, at most a batch a call, about a byte budget a call; the
    # three payloads over the budget read with a plain HGET each
    assert sum(len(reply) for reply in calls) == 1_203
    assert all(len(reply) <= frames.BATCH for reply in calls)
    # a call ends before the row that would take it past the budget (its first row is
    # read as far as it fits), and the rest of its batch goes again
    assert [len(reply) for reply in calls] == [497, 3, 2, 498, 203]
    assert all(sum(len(v) for row in r for v in row if isinstance(v, str)) <= BYTE_BUDGET for r in calls)
    assert plain.count("HGET") == 3
    assert conn.client.lrange(P_reads + "job:j_00010:logs", 0, -1) == ["a line"]
    # a page across the batch edges shows the same rows
    page = frames.snapshot(conn, Q_reads, states="dead", offset=496, limit=508)
    assert list(page.index) == order[496:1004]
    assert [None if pd.isna(v) else v for v in page.payload] == shown("payload")[496:1004]


def test_a_snapshot_of_long_ids_sends_and_reads_about_a_byte_budget_of_them_a_call(harm):
    conn, srv = harm
    ids = long_dead(conn, 300, 20_000)  # 6 MB of ids: 300 of one read_rows batch would be all of it
    sent_ids: list[int] = []
    real = conn.run

    def run(script, keys, args=(), **kw):
        if script == "read_rows":
            sent_ids.append(sum(len(a) for a in args[2 + int(args[0]) :]))
        return real(script, keys, args, **kw)

    conn.run = run
    pages = zranges(conn)
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert list(frame.index) == ids
    assert list(frame.last_error) == [f"upstream timed out after {i} ms" for i in range(300)]
    assert sum(sent_ids) == 300 * 20_000 and max(sent_ids) <= BYTE_BUDGET
    # each page of members is about a byte budget of them: one that reaches it ends it
    sizes = [stop - start + 1 for _, start, stop in pages]
    assert sum(sizes) == 300 and all((n - 1) * 20_000 < BYTE_BUDGET for n in sizes), sizes


def zranges(conn, then=None) -> list[tuple]:
    """The (key, start, stop) of every page of members `conn` reads from now on (one
    `@read_members` call: `stop` the rank of the last member it answered); `then()` runs
    after the first."""
    seen: list[tuple] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name == "read_members":
            start = int(args[1])
            seen.append((keys[0] + args[0], start, start + len(reply) // 2 - 1))
            if then and len(seen) == 1:
                then()
        return reply

    conn.run = run
    return seen


def test_a_snapshot_reads_a_big_set_a_page_of_members_a_call(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(frames, "MEMBERS_A_CALL", 3)
    for i in range(8):
        dead_row(conn, f"j_{i}", score=10 + i)
    calls = zranges(conn)
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert list(frame.index) == [f"j_{i}" for i in range(8)]
    assert calls == [(P_reads + "dead", 0, 2), (P_reads + "dead", 3, 5), (P_reads + "dead", 6, 7)]
    calls.clear()
    page = frames.snapshot(conn, Q_reads, states="dead", offset=1, limit=5)
    assert list(page.index) == [f"j_{i}" for i in range(1, 6)]
    assert calls == [(P_reads + "dead", 1, 3), (P_reads + "dead", 4, 5)]


def test_a_snapshot_read_in_pages_shows_a_member_once_when_the_set_shifts(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(frames, "MEMBERS_A_CALL", 3)
    for i in range(6):
        dead_row(conn, f"j_{i}", score=10 + i)
    # a job dies ahead of the rest after the first page: the second page starts one back
    zranges(conn, then=lambda: dead_row(conn, "j_early", score=1))
    frame = frames.snapshot(conn, Q_reads, states="dead")
    assert list(frame.index) == [f"j_{i}" for i in range(6)]


def test_a_snapshot_of_large_texts_is_read_about_a_byte_budget_a_call(harm):
    conn, srv = harm
    text = "e" * 300_000
    for i in range(12):
        dead_row(conn, f"j_{i:02d}", error=text, score=i)
    calls = replies(conn, "read_rows")
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert len(frame) == 12 and set(frame["last_error"]) == {text}
    # three texts fit the budget: a call ends before the fourth, which goes again
    assert [len(reply) for reply in calls] == [3, 3, 3, 3]


# -- a member whose id names another job's :logs list ------------------------------------


def test_a_snapshot_shows_an_id_naming_another_jobs_logs_as_a_row_with_no_field(dead_with_a_logs_id):
    conn, srv, rows = dead_with_a_logs_id
    frame = bounded(lambda: frames.snapshot(conn, Q_reads, states="dead"), srv, what="snapshot")
    assert list(frame.index) == ["j_0:logs", *rows]
    assert frame.loc["j_0:logs", ["payload", "last_error"]].isna().all()
    assert conn.client.lrange(P_reads + "job:j_0:logs", 0, -1) == ["one", "two"]


# -- do no harm, the bytes of a row: a read of rows keeps its call's byte budget across the
# fields of a row and the rows of a chunk, not only field by field. A row whose fields
# would take a call past its budget ends the call before it (the caller sends it again),
# a call's first row is read as far as it fits (the rest answered by their places); work
# is observed as the bytes each script call copied, never timed

Q_row_bytes = "rowbytes"
P_row_bytes = base(Q_row_bytes)
NEAR = BYTE_BUDGET - 1  # a field one byte under the longest a read copies


def answered(reply: list) -> int:
    """The bytes of the values a `@read_rows` reply holds (a place is a number)."""
    return sum(len(v) for row in reply for v in row if isinstance(v, str))


# -- @read_rows ----------------------------------------------------------------------------


def wide_row(conn, job_id: str, n: int, extra: dict[str, str] | None = None) -> list[str]:
    """Row `job_id` of `n` fields of NEAR bytes each (f00, f01, ...), one letter a field,
    and `extra`; answers the names of the long fields."""
    names = [f"f{k:02d}" for k in range(n)]
    for k, name in enumerate(names):
        conn.client.hset(P_row_bytes + "job:" + job_id, name, chr(ord("a") + k % 26) * NEAR)
    if extra:
        conn.client.hset(P_row_bytes + "job:" + job_id, mapping=extra)
    return names


def test_rows_of_many_fields_near_the_budget_are_read_right_a_budget_a_call(harm):
    conn, srv = harm
    ids = ["w_1", "w_2", "w_3"]
    small = {"n0": "7", "n1": "", "n2": "boom"}
    for job_id in ids:
        names = wide_row(conn, job_id, 10, small | {"big": "B" * (BYTE_BUDGET + 1)})
    # long fields between short ones, one the row lacks, one over the longest read
    fields = [*names[:3], "n0", "gone", *names[3:6], "big", "n1", *names[6:], "n2"]
    calls = replies(conn, "read_rows")
    got = bounded(lambda: frames.rows(conn, Q_row_bytes, ids, fields), srv, what="frames.rows")
    assert got == [[conn.client.hget(P_row_bytes + "job:" + i, f) for f in fields] for i in ids]
    # no call copied more than its budget: the old read copied 10 fields of 1 MiB in one
    assert calls and max(answered(reply) for reply in calls) <= BYTE_BUDGET
    # each call answered one row, read as far as the budget went, the rest by their places
    assert [len(reply) for reply in calls] == [1, 1, 1]
    assert all(len(row) > len(fields) for reply in calls for row in reply)


def test_the_script_reads_its_first_row_as_far_as_it_fits_and_no_row_past_its_budget(harm):
    conn, _ = harm
    kb = 1 << 10
    conn.client.hset(P_row_bytes + "job:a", mapping={"x": "x" * (600 * kb), "y": "y" * (600 * kb), "z": "1"})
    conn.client.hset(P_row_bytes + "job:a", "w", "w" * (300 * kb))
    conn.client.hset(P_row_bytes + "job:b", mapping={"x": "b" * (200 * kb), "z": "2"})
    conn.client.hset(P_row_bytes + "job:c", mapping={"z": "3"})
    fields = ["x", "y", "z", "w"]

    def read(*ids: str) -> list:
        return conn.run("read_rows", [P_row_bytes], [len(fields), frames.FIELD_BYTES, *fields, *ids])

    # the first row: each field read while it fits what is left of the budget, in order;
    # y (600 KB after x's 600 KB) is answered by its place, 2; w (300 KB) still fits.
    # Then b's 200 KB would go past the budget: b is not answered, the call ends
    got = read("a", "b", "c")
    assert got == [["x" * (600 * kb), None, "1", "w" * (300 * kb), 2]]
    # sent again, b is the first row and c follows it
    assert read("b", "c") == [["b" * (200 * kb), None, "2", None], [None, None, "3", None]]
    # a row that would go past the budget after the first is not answered
    assert read("c", "a") == [[None, None, "3", None]]


def counting(srv, conn, call: Callable[[], None]) -> dict[str, int] | None:
    """The commands Valkey ran for `call()` (None on the fake, where it just runs)."""
    if srv is None:
        call()
        return None
    return commands_sent(conn.client, call)


def test_rows_measured_whole_are_measured_again_field_by_field_near_the_budget(harm):
    """On Valkey a row of ordinary size counts as its MEMORY USAGE figure (names and every
    value, the payload not asked too): a row whose figure is over the bytes left is
    measured field by field, so its fields asked are counted as they are and it is read
    in the same call. The fake measures every row field by field: the same replies."""
    conn, srv = harm
    ids = [f"j_{i}" for i in range(3)]
    for i in ids:
        conn.client.hset(
            P_row_bytes + "job:" + i, mapping={"payload": "p" * 600_000, "last_error": "e" * 300_000}
        )
    fields = ["group", "attempts", "last_error"]
    calls = replies(conn, "read_rows")
    box: dict[str, Any] = {}
    counted = counting(srv, conn, lambda: box.update(got=frames.rows(conn, Q_row_bytes, ids, fields)))
    got = box["got"]
    if counted is not None:
        # the first row by its figure; the next two, their figures over the bytes left
        # (300 KB and 600 KB read), each field by field
        assert counted["memory|usage"] == 3 and counted["hstrlen"] == 2 * len(fields)
        assert counted["hmget"] == 3
    assert got == [[None, None, "e" * 300_000]] * 3
    assert [len(reply) for reply in calls] == [3]


def test_an_ordinary_snapshot_reads_as_it_did(harm):
    conn, srv = harm
    pipe = conn.client.pipeline(transaction=False)
    for i in range(1_200):
        job_id = f"j_{i:05d}"
        pipe.hset(
            P_row_bytes + "job:" + job_id,
            mapping={"payload": f'{{"n": {i}}}', "attempts": "1", "last_error": f"boom {i}", "state": "dead"},
        )
        pipe.zadd(P_row_bytes + "dead", {job_id: i})
    pipe.execute()
    calls = replies(conn, "read_rows")
    box: dict[str, Any] = {}
    counted = counting(srv, conn, lambda: box.update(frame=frames.snapshot(conn, Q_row_bytes, states="dead")))
    frame = box["frame"]
    if counted is not None:
        # a row: one MEMORY USAGE, one HMGET; no field measured by itself
        assert counted["memory|usage"] == 1_200 and counted["hmget"] == 1_200
        assert "hstrlen" not in counted
    assert [len(reply) for reply in calls] == [500, 500, 200]
    assert all(len(row) == len(frames.FIELDS) for reply in calls for row in reply)
    assert list(frame.last_error) == [f"boom {i}" for i in range(1_200)]
    assert list(frame.payload) == [f'{{"n": {i}}}' for i in range(1_200)]


# -- do no harm, every field of a row (the health's sampled times: test_health.py)


class TestHarmRowFields:
    """Do no harm, every field of a row: `@read_rows` copies no field over the longest it is
    sent, whichever field another node made long (`last_error`, `progress`, `group`, a
    counter, several in one row): it answers such a field by its place, and the snapshot reads
    it as `get_job` does (`jobs.whole_field`, its length over `MAX_WHOLE_FIELD`). Under the
    harness's watchdog, the bounds made small (tests/long_fields.py). Work is observed in the
    script's replies and (on Valkey) the bytes the server wrote and the commands it ran."""

    @pytest.fixture(autouse=True)
    def _small_bounds(self, monkeypatch):
        small_bounds(monkeypatch)

    @pytest.mark.parametrize("field", ["last_error", "progress", "group"])
    def test_a_long_text_field_is_never_copied_by_the_snapshot_script(self, harm, field):
        conn, srv = harm
        near = dead(conn, **{field: "n" * BETWEEN})
        far = dead(conn, **{field: "f" * OVER})
        plain = dead(conn)
        calls = replies(conn, "read_rows")
        frame, out = written_out(
            conn,
            srv,
            lambda: bounded(lambda: frames.snapshot(conn, Q_row_fields, states="dead"), srv, what="snapshot"),
        )
        assert frame.loc[near, field] == "n" * BETWEEN  # read by itself, whole
        assert frame.loc[far, field] == decoding.not_read(OVER)
        assert frame.loc[plain, "last_error"] == "boom" and frame.loc[far, "payload"] == '{"n": 1}'
        # the script answered both long fields by their places, their bytes left on the server
        assert calls and longest_value(calls) <= FIELD
        assert [row[len(frames.FIELDS) :] for reply in calls for row in reply] == [
            [frames.FIELDS.index(field) + 1],
            [frames.FIELDS.index(field) + 1],
            [],
        ]
        if out is not None:  # Valkey wrote the field read whole, never the one over WHOLE
            assert BETWEEN < out < BETWEEN + 64_000

    def test_several_long_fields_of_one_row_are_each_answered_by_their_place(self, harm):
        conn, srv = harm
        long = {"group": "g" * BETWEEN, "attempts": "7" * BETWEEN}
        job_id = dead(conn, **long, last_error="e" * OVER, progress="p" * OVER)
        calls = replies(conn, "read_rows")
        frame, out = written_out(
            conn,
            srv,
            lambda: bounded(lambda: frames.snapshot(conn, Q_row_fields, states="dead"), srv, what="snapshot"),
        )
        row = frame.loc[job_id]
        assert row["group"] == "g" * BETWEEN
        assert row["last_error"] == decoding.not_read(OVER) and row["progress"] == decoding.not_read(OVER)
        assert row["failures"] == 1 and row["payload"] == '{"n": 1}'
        assert frame["attempts"].isna().tolist() == [True]  # a counter that is no number: <NA>
        places = [frames.FIELDS.index(f) + 1 for f in ("group", "attempts", "last_error", "progress")]
        assert [r[len(frames.FIELDS) :] for reply in calls for r in reply] == [places]
        assert longest_value(calls) <= FIELD
        if out is not None:  # the two fields within WHOLE, read by themselves; not the two over
            assert 2 * BETWEEN < out < 2 * BETWEEN + 64_000

    def test_an_ordinary_row_is_measured_whole_in_one_command_on_valkey(self, harm):
        """The cost choice: on Valkey a row of ordinary fields is measured by one MEMORY
        USAGE, not an HSTRLEN a field; a row with a long field, field by field. The fake has
        no MEMORY USAGE, nor has a user the ACL denies it: there every row is measured field by
        field, with the same frame."""
        conn, srv = harm
        ids = [dead(conn) for _ in range(20)]
        long_one = dead(conn, last_error="e" * BETWEEN)
        frame = bounded(lambda: frames.snapshot(conn, Q_row_fields, states="dead"), srv, what="snapshot")
        assert list(frame.index) == [*ids, long_one] and frame.loc[long_one, "last_error"] == "e" * BETWEEN
        if srv is None:
            return
        for executor in ("script", "function"):
            other = emq.connect(f"redis://127.0.0.1:{srv.port}/0", executor=executor)
            again = other.pipeline()  # the library loaded first, so it is not counted
            other.run("read_rows", [P_row_fields], [1, FIELD, "payload", ids[0]], pipeline=again)
            again.execute()
            counted = commands_sent(
                other.client, lambda c=other: frames.snapshot(c, Q_row_fields, states="dead")
            )
            assert counted["memory|usage"] == 21, executor
            # the long row alone, field by field: its 8 fields, then its short ones in one HMGET
            # (and `@read_job` measures the long one again before reading it by itself)
            assert counted["hstrlen"] == len(frames.FIELDS) + 1, executor
            assert counted["hmget"] == 21, executor
        # a user the ACL denies MEMORY reads the same frame, each row measured field by field
        no_memory = ["+@all", "-memory"]
        conn.client.acl_setuser("nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=no_memory)
        denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
        counted = commands_sent(conn.client, lambda: frames.snapshot(denied, Q_row_fields, states="dead"))
        assert "memory|usage" not in counted and counted["hstrlen"] == 21 * len(frames.FIELDS) + 1
        assert frames.snapshot(denied, Q_row_fields, states="dead").equals(frame)
