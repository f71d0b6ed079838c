"""Frames checked against the keyspace, on both backends."""

import time

import pandas as pd
import pytest

from emq_notebook import admin, frames, jobs, repeat
from emq_notebook.errors import BadInput

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
    from dead_letters import written_rows

    q, n = "deadpage", 100_000
    ids = [f"d{i:06d}" for i in range(n)]
    for at in range(0, n, 10_000):  # died in id order, one ms apart; attempts 1 to 7
        written_rows(
            conn,
            q,
            "dead",
            ids[at : at + 10_000],
            first=1_700_000_000_000 + at,
            attempts=lambda i, at=at: str(1 + (at + i) % 7),
        )
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
