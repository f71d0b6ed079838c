"""Do no harm, the bytes of a row: a read of rows keeps its call's byte budget across the
fields of a row and the rows of a chunk, not only field by field. Every field under the
longest a read copies (1 MiB-1, say) still made one `@read_rows` call of 64 such fields
copy 64 MiB (Valkey held 107 to 121 ms, bench/harm.py --wide), one `@find` step read a
chunk of 8 rows of 4 such fields. Now a row whose fields would take a call past its
budget ends the call before it (the caller sends it again), a call's first row is read
as far as it fits (the rest answered by their places, for `jobs.whole_field`), and a
scan step (`@find`, `@errors`) measures a chunk's rows before reading any. Both
backends; work is observed as the bytes each script call copied (the reading commands
it ran, counted against the rows they read), never timed.

Here: the snapshot's cases (frames.py), to fold into test_frames.py after #43; the find
and errors cases are in test_triage.py."""

from collections.abc import Callable
from typing import Any

from harm import bounded, commands_sent, replies

from emq_notebook import frames
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.keyspace import base

Q = "rowbytes"
P = base(Q)
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
        conn.client.hset(P + "job:" + job_id, name, chr(ord("a") + k % 26) * NEAR)
    if extra:
        conn.client.hset(P + "job:" + job_id, mapping=extra)
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
    got = bounded(lambda: frames.rows(conn, Q, ids, fields), srv, what="frames.rows")
    assert got == [[conn.client.hget(P + "job:" + i, f) for f in fields] for i in ids]
    # no call copied more than its budget: the old read copied 10 fields of 1 MiB in one
    assert calls and max(answered(reply) for reply in calls) <= BYTE_BUDGET
    # each call answered one row, read as far as the budget went, the rest by their places
    assert [len(reply) for reply in calls] == [1, 1, 1]
    assert all(len(row) > len(fields) for reply in calls for row in reply)


def test_the_script_reads_its_first_row_as_far_as_it_fits_and_no_row_past_its_budget(harm):
    conn, _ = harm
    kb = 1 << 10
    conn.client.hset(P + "job:a", mapping={"x": "x" * (600 * kb), "y": "y" * (600 * kb), "z": "1"})
    conn.client.hset(P + "job:a", "w", "w" * (300 * kb))
    conn.client.hset(P + "job:b", mapping={"x": "b" * (200 * kb), "z": "2"})
    conn.client.hset(P + "job:c", mapping={"z": "3"})
    fields = ["x", "y", "z", "w"]

    def read(*ids: str) -> list:
        return conn.run("read_rows", [P], [len(fields), frames.FIELD_BYTES, *fields, *ids])

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
        conn.client.hset(P + "job:" + i, mapping={"payload": "p" * 600_000, "last_error": "e" * 300_000})
    fields = ["group", "attempts", "last_error"]
    calls = replies(conn, "read_rows")
    box: dict[str, Any] = {}
    counted = counting(srv, conn, lambda: box.update(got=frames.rows(conn, Q, ids, fields)))
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
            P + "job:" + job_id,
            mapping={"payload": f'{{"n": {i}}}', "attempts": "1", "last_error": f"boom {i}", "state": "dead"},
        )
        pipe.zadd(P + "dead", {job_id: i})
    pipe.execute()
    calls = replies(conn, "read_rows")
    box: dict[str, Any] = {}
    counted = counting(srv, conn, lambda: box.update(frame=frames.snapshot(conn, Q, states="dead")))
    frame = box["frame"]
    if counted is not None:
        # a row: one MEMORY USAGE, one HMGET; no field measured by itself
        assert counted["memory|usage"] == 1_200 and counted["hmget"] == 1_200
        assert "hstrlen" not in counted
    assert [len(reply) for reply in calls] == [500, 500, 200]
    assert all(len(row) == len(frames.FIELDS) for reply in calls for row in reply)
    assert list(frame.last_error) == [f"boom {i}" for i in range(1_200)]
    assert list(frame.payload) == [f'{{"n": {i}}}' for i in range(1_200)]
