"""Do no harm, one field whole: no read copies a job row's field over
`defaults.MAX_WHOLE_FIELD` (it shows as `decoding.not_read`, its length, its bytes left on
the server), nor a whole row of many fields in one call. `get_job` (and `%emq job`, the
job panel) reads a row through `@read_job`, about a byte budget a call, each field's
length before its bytes; a snapshot's payload too large for `@read_rows` is read the same
way (`jobs.whole_field`). Both backends, under the harness's watchdog (tests/harm.py);
the bound is made 2 MiB here so a field of twice it stays small. Work is observed in the
replies, the plain commands sent and (on Valkey) the bytes the server wrote, never timed."""

from __future__ import annotations

from typing import Any

import pytest
from harm import bounded, replies, sent

from emq_notebook import decoding, frames, jobs, triage
from emq_notebook.defaults import BYTE_BUDGET, MAX_PAYLOAD, MAX_WHOLE_FIELD
from emq_notebook.errors import Gone
from emq_notebook.widgets import JobPanel

Q = "whole"
P = f"emq:{{{Q}}}:"
BOUND = 2 << 20
OVER = 2 * BOUND  # a field of twice the bound: never read
BETWEEN = BOUND - 1000  # over a call's byte budget, within the bound: one plain HGET


@pytest.fixture(autouse=True)
def _small_bound(monkeypatch):
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", BOUND)


def plain(conn) -> list[tuple]:
    """Every plain command `conn` sends from now on (its parts), as it goes."""
    seen: list[tuple] = []
    real = conn.command

    def command(*parts: Any) -> Any:
        seen.append(parts)
        return real(*parts)

    conn.command = command
    return seen


def written_out(conn, srv, call) -> tuple[Any, int | None]:
    """What `call()` answers, and the bytes the server wrote to its clients meanwhile
    (Valkey's `total_net_output_bytes`; None on the embedded fake)."""
    if srv is None:
        return call(), None
    before = conn.client.info("stats")["total_net_output_bytes"]
    got = call()
    return got, conn.client.info("stats")["total_net_output_bytes"] - before


def script_bytes(reply: list) -> int:
    return sum(len(v) for v in reply if isinstance(v, str))


def test_the_bound_reads_every_payload_the_toolkit_writes():
    assert MAX_WHOLE_FIELD >= 2 * MAX_PAYLOAD and MAX_WHOLE_FIELD > BYTE_BUDGET


def test_a_field_over_the_bound_shows_its_length_and_its_bytes_never_cross_the_wire(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, '{"n": 1}')
    conn.client.hset(P + "job:" + job_id, mapping={"last_error": "e" * OVER, "progress": "p" * BETWEEN})
    calls, commands = replies(conn, "read_job"), plain(conn)
    row, out = written_out(
        conn, srv, lambda: bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    )
    assert row["last_error"] == decoding.not_read(OVER) == f"<{OVER:,} bytes: over MAX_WHOLE_FIELD, not read>"
    assert isinstance(row["last_error"], decoding.NotRead)
    assert row["progress"] == "p" * BETWEEN and row["payload"] == '{"n": 1}' and row["state"] == "pending"
    # the script answered both long fields by their lengths; one plain HGET read the one
    # within the bound, none the one over it
    assert all(script_bytes(reply) <= BYTE_BUDGET for reply in calls)
    assert [p[2] for p in commands if p[0] == "HGET"] == ["progress"]
    assert not [p for p in commands if p[0] in ("HGETALL", "HVALS")]
    if out is not None:  # Valkey wrote about the field read, not the one left
        assert BETWEEN < out < BETWEEN + 100_000
    # the dict keeps its shape: every field of the row, in the row's order
    assert list(row) == list(conn.client.hkeys(P + "job:" + job_id))


def test_a_payload_the_toolkit_wrote_reads_whole_under_the_bound(harm, monkeypatch):
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", MAX_WHOLE_FIELD)
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "x" * MAX_PAYLOAD)
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert row["payload"] == "x" * MAX_PAYLOAD


def test_a_row_of_many_fields_is_read_by_its_job_fields_not_whole(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, '{"n": 2}')
    key = P + "job:" + job_id
    pipe = conn.client.pipeline(transaction=False)
    for start in range(0, 50_000, 5_000):
        pipe.hset(key, mapping={f"f{i:05d}": "v" for i in range(start, start + 5_000)})
    pipe.execute()
    calls = replies(conn, "read_job")
    counted = sent(conn, srv, lambda: bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job"))
    row = jobs.get_job(conn, Q, job_id)
    fields = conn.client.hlen(key)
    assert row[jobs.OTHER_FIELDS] == (
        f"<{fields:,} fields: over ROW_FIELDS ({jobs.ROW_FIELDS:,}), only the job's own read>"
    )
    assert row["payload"] == '{"n": 2}' and row["state"] == "pending" and "f00001" not in row
    # no call listed the row: its count alone, then the job's own fields by name
    assert [len(reply) for reply in calls[:2]] == [1, 1 + 2 * len(jobs.JOB_FIELDS)]
    assert not {"hgetall", "hkeys", "hvals", "hscan"} & set(counted)


def test_a_row_of_up_to_row_fields_is_read_whole_about_a_byte_budget_a_call(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    key = P + "job:" + job_id
    long = {f"f{i:04d}": f"{i:04d}" * 1250 for i in range(jobs.ROW_FIELDS - 20)}  # 5,000 bytes each
    conn.client.hset(key, mapping=long)
    calls, commands = replies(conn, "read_job"), plain(conn)
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert row == conn.client.hgetall(key) and jobs.OTHER_FIELDS not in row
    # 4.9 MB of fields: five calls or so, none over a byte budget and one field
    assert 5 <= len(calls) <= 7
    assert all(script_bytes(reply) <= BYTE_BUDGET + 5_000 + 20 * len(long) for reply in calls)
    assert not commands


def test_fields_and_names_that_are_not_utf8_read_back_byte_for_byte(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    key = P + "job:" + job_id
    conn.client.hset(
        key,
        mapping={
            b"\xff\xfename": b"\xfe\xffvalue",
            b"big\xff": b"\xfe" * BETWEEN,
            b"huge\xfe": b"\xff" * OVER,
        },
    )
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert row["\udcff\udcfename"] == "\udcfe\udcffvalue"
    assert decoding.wire(row["big\udcff"]) == b"\xfe" * BETWEEN
    assert row["huge\udcfe"] == decoding.not_read(OVER)


def test_a_missing_row_is_gone_and_a_field_gone_meanwhile_is_left_out(harm):
    conn, srv = harm
    with pytest.raises(Gone):
        jobs.get_job(conn, Q, "j_none")
    assert jobs.whole_field(conn, Q, "j_none", "payload") is None
    job_id = jobs.enqueue(conn, Q, "{}")
    conn.client.hset(P + "job:" + job_id, "progress", "p" * BETWEEN)
    real = conn.command

    def command(*parts: Any) -> Any:
        conn.client.hdel(P + "job:" + job_id, "progress")  # another node, between the two reads
        return real(*parts)

    conn.command = command
    assert "progress" not in jobs.get_job(conn, Q, job_id)


# -- the snapshot, find, %emq job, the job panel -----------------------------------------


def dead_with_payload(conn, body: str) -> str:
    job_id = jobs.enqueue(conn, Q, "{}", max_attempts=1)
    jobs.claim(conn, Q)
    jobs.fail(conn, Q, job_id, "boom")
    conn.client.hset(P + "job:" + job_id, "payload", body)
    return job_id


def test_the_snapshot_shows_a_payload_over_the_bound_as_its_length(harm):
    conn, srv = harm
    big = dead_with_payload(conn, "needle" + "y" * OVER)
    near = dead_with_payload(conn, "z" * BETWEEN)
    commands = plain(conn)
    frame, out = written_out(
        conn, srv, lambda: bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    )
    assert frame.loc[big, "payload"] == decoding.not_read(OVER + 6)
    assert frame.loc[near, "payload"] == "z" * BETWEEN
    assert [p[2] for p in commands if p[0] == "HGET"] == ["payload"]
    if out is not None:
        assert out < BETWEEN + 100_000
    # a payload that was not read matches no payload glob
    found = bounded(lambda: triage.find(conn, Q, payload="*needle*"), srv, what="find")
    assert list(found.index) == []
    assert list(triage.find(conn, Q, payload="z*").index) == [near]


def test_emq_job_and_the_job_panel_show_a_field_over_the_bound_as_its_length(conn, emq_line, ip):
    conn.client.flushall()
    job_id = dead_with_payload(conn, "q" * OVER)
    marker = decoding.not_read(OVER)
    assert emq_line(f"job {Q} {job_id}")["payload"] == marker
    panel = JobPanel(conn, Q, job_id)
    assert panel.payload.value == marker
    text = ip.display_formatter.format(panel)[0]["text/plain"]
    assert marker in text and "q" * 1000 not in text
