"""Do no harm, every field of a row: `@read_rows` (a snapshot's rows, the health's sampled
times) copies no field over the longest it is sent, whichever field another node made
long (`last_error`, `progress`, `group`, a counter, several in one row): it answers such
a field by its place, and the snapshot reads it as `get_job` does (`jobs.whole_field`,
its length over `MAX_WHOLE_FIELD`). Both backends, under the harness's watchdog
(tests/harm.py); the bounds are made small here (64 KB a `@read_rows` field, a byte
budget and 64 KB whole) so a field over them stays small. Work is observed in the
script's replies and (on Valkey) the bytes the server wrote and the commands it ran,
never timed."""

from __future__ import annotations

import pytest
from harm import bounded, commands_sent, replies, written_out

import emq_notebook as emq
from emq_notebook import decoding, frames, health, jobs, watching
from emq_notebook.defaults import BYTE_BUDGET

Q = "rowfields"
P = f"emq:{{{Q}}}:"
FIELD = 64 << 10  # the longest field `@read_rows` copies, here
WHOLE = BYTE_BUDGET + FIELD  # the longest field read whole (MAX_WHOLE_FIELD), here
BETWEEN = 2 * FIELD  # over the snapshot script's bound: read by itself (`@read_job`)
OVER = 2 * BYTE_BUDGET  # over WHOLE: never read


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch):
    # raising=False: the same test runs (and fails) where frames has no such bound
    monkeypatch.setattr(frames, "FIELD_BYTES", FIELD, raising=False)
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", WHOLE)


def longest_value(calls: list) -> int:
    """The longest value any of these `@read_rows` replies holds (a place is a number)."""
    return max((len(v) for reply in calls for row in reply for v in row if isinstance(v, str)), default=0)


def dead(conn, **fields: str) -> str:
    """A dead job whose row another node gave `fields`."""
    job_id = jobs.enqueue(conn, Q, '{"n": 1}', max_attempts=1)
    jobs.claim(conn, Q)
    jobs.fail(conn, Q, job_id, "boom")
    if fields:
        conn.client.hset(P + "job:" + job_id, mapping=fields)
    return job_id


@pytest.mark.parametrize("field", ["last_error", "progress", "group"])
def test_a_long_text_field_is_never_copied_by_the_snapshot_script(harm, field):
    conn, srv = harm
    near = dead(conn, **{field: "n" * BETWEEN})
    far = dead(conn, **{field: "f" * OVER})
    plain = dead(conn)
    calls = replies(conn, "read_rows")
    frame, out = written_out(
        conn, srv, lambda: bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
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


def test_several_long_fields_of_one_row_are_each_answered_by_their_place(harm):
    conn, srv = harm
    long = {"group": "g" * BETWEEN, "attempts": "7" * BETWEEN}
    job_id = dead(conn, **long, last_error="e" * OVER, progress="p" * OVER)
    calls = replies(conn, "read_rows")
    frame, out = written_out(
        conn, srv, lambda: bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
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


def test_an_ordinary_row_is_measured_whole_in_one_command_on_valkey(harm):
    """The cost choice: on Valkey a row of ordinary fields is measured by one MEMORY
    USAGE, not an HSTRLEN a field; a row with a long field, field by field. The fake has
    no MEMORY USAGE, nor has a user the ACL denies it: there every row is measured field by
    field, with the same frame."""
    conn, srv = harm
    ids = [dead(conn) for _ in range(20)]
    long_one = dead(conn, last_error="e" * BETWEEN)
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert list(frame.index) == [*ids, long_one] and frame.loc[long_one, "last_error"] == "e" * BETWEEN
    if srv is None:
        return
    for executor in ("script", "function"):
        other = emq.connect(f"redis://127.0.0.1:{srv.port}/0", executor=executor)
        again = other.pipeline()  # the library loaded first, so it is not counted
        other.run("read_rows", [P], [1, FIELD, "payload", ids[0]], pipeline=again)
        again.execute()
        counted = commands_sent(other.client, lambda c=other: frames.snapshot(c, Q, states="dead"))
        assert counted["memory|usage"] == 21, executor
        # the long row alone, field by field: its 8 fields, then its short ones in one HMGET
        # (and `@read_job` measures the long one again before reading it by itself)
        assert counted["hstrlen"] == len(frames.FIELDS) + 1, executor
        assert counted["hmget"] == 21, executor
    # a user the ACL denies MEMORY reads the same frame, each row measured field by field
    no_memory = ["+@all", "-memory"]
    conn.client.acl_setuser("nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=no_memory)
    denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
    counted = commands_sent(conn.client, lambda: frames.snapshot(denied, Q, states="dead"))
    assert "memory|usage" not in counted and counted["hstrlen"] == 21 * len(frames.FIELDS) + 1
    assert frames.snapshot(denied, Q, states="dead").equals(frame)


def times_read(monkeypatch) -> list:
    """The sampled rows' times each health read answers from now on, as they come."""
    seen: list = []
    real = watching.read

    def read(*args, **kw):
        got = real(*args, **kw)
        seen.extend(r.health[7] for r in got if r.health)
        return got

    monkeypatch.setattr(watching, "read", read)
    return seen


def test_health_reads_no_long_time_of_a_sampled_row(harm, monkeypatch):
    conn, srv = harm
    head = jobs.enqueue(conn, Q, "{}")
    created = int(conn.client.hget(P + "job:" + head, "created_at"))
    conn.client.hset(P + "job:" + head, "created_at", "1" * OVER)
    calls = times_read(monkeypatch)
    got, out = written_out(conn, srv, lambda: bounded(lambda: health.health(conn, [Q]), srv, what="health"))
    # the long created_at is no time: the row is skipped, its bytes left on the server
    assert got.loc[Q, "pending"] == 1 and got["oldest_pending_s"].isna().all()
    assert calls and longest_value(calls) <= health.TIME_BYTES
    if out is not None:
        assert out < 64_000
    # a time of its 13 digits is read
    conn.client.hset(P + "job:" + head, "created_at", created)
    age = health.health(conn, [Q], now_ms=created + 5_000).loc[Q, "oldest_pending_s"]
    assert age == 5.0
