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
from harm import bounded, replies, sent, written_out

import emq_notebook as emq
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
    # the dict keeps every field of the row (a row of 6 MB is read by the job's own names)
    assert set(row) == set(conn.client.hkeys(P + "job:" + job_id))


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


def test_a_row_of_up_to_row_fields_within_a_byte_budget_is_listed_in_one_call(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    key = P + "job:" + job_id
    conn.client.hset(key, mapping={f"f{i:04d}": f"{i:04d}" * 100 for i in range(jobs.ROW_FIELDS - 20)})
    calls, commands = replies(conn, "read_job"), plain(conn)
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert not commands
    if srv is None:  # no MEMORY USAGE: the job's own fields, the rest counted
        assert row[jobs.OTHER_FIELDS] == (
            f"<{conn.client.hlen(key):,} fields: not measured within BYTE_BUDGET "
            f"({BYTE_BUDGET:,} bytes), only the job's own read>"
        )
        assert row["payload"] == "{}" and "f0001" not in row and len(calls) == 2
        return
    # 390 KB of fields: one call lists and reads them all
    assert row == conn.client.hgetall(key) and jobs.OTHER_FIELDS not in row
    assert len(calls) == 1 and len(calls[0]) == 1 + 2 * len(row)


def names_sent(calls: list) -> int:
    """The longest text a `@read_job` reply held (a name or a value)."""
    return max((len(v) for reply in calls for v in reply if isinstance(v, str)), default=0)


@pytest.mark.parametrize(
    "names",
    [
        pytest.param({b"N" * (4 * BYTE_BUDGET): "v"}, id="one-name-of-4-budgets"),
        pytest.param({(b"%04d" % i) + b"n" * 4096: "v" for i in range(600)}, id="600-names-of-4KB"),
    ],
)
def test_a_row_of_long_field_names_is_read_by_its_job_fields_never_listed(harm, names):
    """No command gives a name's length: a row whose names and values measure over a byte
    budget (one MEMORY USAGE) is read by the job's own names, its names never copied nor
    sent back; the same on the fake and for a user the ACL denies MEMORY."""
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, '{"n": 3}')
    key = P + "job:" + job_id
    conn.client.hset(key, mapping=names)
    fields = conn.client.hlen(key)
    calls, commands = replies(conn, "read_job"), plain(conn)
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert row["payload"] == '{"n": 3}' and row["state"] == "pending"
    assert row[jobs.OTHER_FIELDS] == (
        f"<{fields:,} fields: not measured within BYTE_BUDGET ({BYTE_BUDGET:,} bytes), "
        "only the job's own read>"
    )
    assert max(map(len, row)) < 100 and names_sent(calls) < 100 and not commands
    assert [len(reply) for reply in calls] == [1, 1 + 2 * len(jobs.JOB_FIELDS)]
    if srv is None:
        return
    counted = sent(conn, srv, lambda: jobs.get_job(conn, Q, job_id))
    assert counted["memory|usage"] == 1 and not {"hgetall", "hkeys", "hvals", "hscan"} & set(counted)
    conn.client.acl_setuser(
        "nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-memory"]
    )
    denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
    assert bounded(lambda: jobs.get_job(denied, Q, job_id), srv, what="get_job") == row


def test_an_ordinary_row_of_other_fields_is_listed_on_valkey_and_counted_without_memory(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    key = P + "job:" + job_id
    conn.client.hset(key, mapping={"tenant": "acme", "trace": "t-1"})
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    if srv is None:
        assert "tenant" not in row and row[jobs.OTHER_FIELDS].startswith(f"<{conn.client.hlen(key)} fields")
        return
    assert row == conn.client.hgetall(key) and list(row) == list(conn.client.hkeys(key))
    conn.client.acl_setuser(
        "nomem", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-memory"]
    )
    denied = emq.connect(f"redis://nomem:pw@127.0.0.1:{srv.port}/0")
    assert "tenant" not in jobs.get_job(denied, Q, job_id)


def test_a_long_name_is_never_sent_back_to_the_server(harm, monkeypatch):
    """A field named over SHORT_NAME whose value a call left unread (a row measured
    within the budget: only where the budget is spent on the job's own fields first) is
    shown by its length, not asked again by its name."""
    monkeypatch.setattr(jobs, "SHORT_NAME", 8)
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    row = {"payload": "{}", "a_long_name": 70, "state": 7}
    monkeypatch.setattr(
        jobs,
        "_read_job",
        lambda *a: (
            pytest.fail(f"a read by name: {a[3]}") if "a_long_name" in a[3] else (3, {"state": "pending"})
        ),
    )
    got = jobs._whole_fields(conn, Q, job_id, P + "job:" + job_id, row)
    assert got == {"payload": "{}", "a_long_name": decoding.not_read(70, "SHORT_NAME"), "state": "pending"}


def test_fields_and_names_that_are_not_utf8_read_back_byte_for_byte(harm):
    conn, srv = harm
    job_id = jobs.enqueue(conn, Q, "{}")
    key = P + "job:" + job_id
    conn.client.hset(key, mapping={b"\xff\xfename": b"\xfe\xffvalue"})
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    if srv is not None:  # listed (no MEMORY USAGE on the fake: the job's own fields)
        assert row["\udcff\udcfename"] == "\udcfe\udcffvalue"
    conn.client.hset(key, mapping={"progress": b"\xfe" * BETWEEN, "last_error": b"\xff" * OVER})
    row = bounded(lambda: jobs.get_job(conn, Q, job_id), srv, what="get_job")
    assert decoding.wire(row["progress"]) == b"\xfe" * BETWEEN
    assert row["last_error"] == decoding.not_read(OVER)


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
