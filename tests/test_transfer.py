"""Export, import and move (emq_notebook.transfer), on the embedded fakeredis, a real
Valkey and a local 3-primary cluster: round trips byte for byte, import's checks and
idempotence, and a move cut at every point (a client SIGKILLed after its k-th call, a
server restarted from its AOF) finished by a later call with every job in exactly one
queue, its id and fields kept."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import WITH_CLUSTER, consistency_problems, dump, keys_of, server_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_faults import restart
from test_faults import server as aof_server  # noqa: F401 (a fixture: Valkey with AOF, fsync always)
from test_readme import magic_on  # noqa: F401 (a fixture: %emq connect: `conn`)

import emq_notebook as emq
from emq_notebook import admin, audit, cli, grammar, jobs, transfer, verbs
from emq_notebook.decoding import wire
from emq_notebook.errors import BadInput, BadRecord, ReadOnly, UsageProblem
from emq_notebook.keyspace import audit_key, base, job_key, moving_key, new_batch, queue_key

SRC, DST = "mailers", "mailers.quarantine"
VICTIM = Path(__file__).resolve().parent / "transfer_victim.py"


@pytest.fixture(params=WITH_CLUSTER)
def backend(request):
    return request.param


def dead(conn, q: str, ids, error: str = "SMTP 553: bad recipient", payload: str = '{"to": "x"}') -> None:
    """Each id a dead job of `q`, failed once with `error`."""
    for i in ids:
        jobs.enqueue(conn, q, payload, id=i, max_attempts=1)
        got = jobs.claim(conn, q)
        jobs.fail(conn, q, got.id, error)


def row(conn, q: str, job_id: str) -> dict:
    """The row as the server holds it (undecodable bytes kept, as surrogates); the id as
    the server holds it too (another node's, outside the name gate)."""
    return conn.client.hgetall(wire(base(q) + "job:" + job_id))


def score(conn, q: str, state: str, job_id: str) -> float | None:
    return conn.client.zscore(queue_key(q, state), wire(job_id))


def where(conn, job_id: str, queues) -> list[str]:
    """The queues whose sets hold `job_id`."""
    states = ("pending", "schedule", "dead")
    return [q for q in queues for s in states if score(conn, q, s, job_id) is not None]


# -- export and import: round trips ------------------------------------------------------

RAW = b"\xff\xfe not utf-8 \x80"


def odd_rows(conn) -> list[str]:
    """Dead jobs whose rows hold what a round trip must keep: bytes that are not UTF-8 in
    a payload, a field name and an id (written as another node would, outside the name
    gate); a field no transition writes; a grouped job."""
    dead(conn, SRC, ["j_1", "j_2", "j_3"])
    jobs.enqueue(conn, SRC, "{}", id="j_g", group="tenant-1", max_attempts=1)
    jobs.fail(conn, SRC, emq.lanes.claim(conn, SRC).id, "lane boom")
    conn.client.hset(job_key(SRC, "j_1"), "payload", RAW)
    conn.client.hset(job_key(SRC, "j_2"), b"note \xc3\x28", b"x")
    conn.client.hset(job_key(SRC, "j_3"), "tenant", "acme")
    raw_id = b"ord-\xe9"
    conn.client.hset(base(SRC).encode() + b"job:" + raw_id, mapping={"payload": "{}", "state": "dead"})
    conn.client.zadd(queue_key(SRC, "dead"), {raw_id: 5})
    return sorted(conn.client.zrange(queue_key(SRC, "dead"), 0, -1))


@pytest.mark.parametrize("suffix", transfer.FORMATS)
def test_export_then_import_gives_every_row_back_byte_for_byte(conn, tmp_path, suffix):
    ids = odd_rows(conn)
    path = tmp_path / f"dead{suffix}"
    written = transfer.export_jobs(conn, SRC, path)
    assert written == len(ids) and written.left_count == 0 and path.exists()
    assert not Path(str(path) + ".part").exists()
    added = transfer.import_jobs(conn, "copy", path, state="dead")
    assert (added.added, added.skipped) == (len(ids), 0)
    for i in ids:
        assert row(conn, "copy", i) == row(conn, SRC, i), i
        assert score(conn, "copy", "dead", i) == score(conn, SRC, "dead", i)
    assert consistency_problems(conn, "copy") == []


def test_a_json_record_says_bytes_that_are_not_utf8_in_base64(conn, tmp_path):
    dead(conn, SRC, ["j_1"])
    conn.client.hset(job_key(SRC, "j_1"), "payload", RAW)
    path = tmp_path / "d.jsonl"
    transfer.export_jobs(conn, SRC, path)
    [record] = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["payload"] == {"base64": base64.b64encode(RAW).decode()}
    assert (record["id"], record["state"], record["last_error"]) == ("j_1", "dead", "SMTP 553: bad recipient")
    assert record["at"] == int(conn.client.zscore(queue_key(SRC, "dead"), "j_1"))
    assert set(record) >= {"attempts", "max_attempts", "created_at", "failures"}


@given(
    fields=st.dictionaries(
        st.binary(min_size=1, max_size=12).filter(lambda b: b not in (b"id", b"at", b"state", b"payload")),
        st.binary(max_size=40),
        max_size=6,
    ),
    payload=st.binary(max_size=60),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_row_round_trips_through_each_format(conn, tmp_path_factory, fields, payload):
    """Whatever bytes a row holds (names and values), export -> import gives it back."""
    conn.client.flushall()
    key = job_key(SRC, "j_1")
    conn.client.hset(key, mapping={b"payload": payload, b"state": b"dead", **fields})
    conn.client.zadd(queue_key(SRC, "dead"), {"j_1": 7})
    for suffix in transfer.FORMATS:
        path = tmp_path_factory.mktemp("rt") / f"d{suffix}"
        assert transfer.export_jobs(conn, SRC, path) == 1
        assert transfer.import_jobs(conn, f"copy{len(suffix)}", path, state="dead").added == 1
        assert row(conn, f"copy{len(suffix)}", "j_1") == row(conn, SRC, "j_1"), suffix


def test_export_filters_limits_and_reads_on_a_read_only_session(conn, backend, request, tmp_path):
    dead(conn, SRC, ["j_1", "j_2"], error="SMTP 553: bad")
    dead(conn, SRC, ["j_3"], error="timeout")
    url = server_url(backend, request.getfixturevalue(backend)) if backend != "fake" else None
    reader = emq.connect(url, read_only=True) if url else emq.connect(embedded="fake", read_only=True)
    before = dump(conn)
    assert transfer.export_jobs(reader, SRC, tmp_path / "a.jsonl", error="SMTP*") == 2
    assert transfer.export_jobs(reader, SRC, tmp_path / "b.jsonl", limit=1) == 1
    assert dump(conn) == before and not conn.client.exists(audit_key(SRC))
    ids = [json.loads(x)["id"] for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert ids == ["j_1", "j_2"]


def test_export_narrows_by_payload_and_signature_as_find_does(conn, tmp_path):
    dead(conn, SRC, ["j_1"], error="SMTP 553: bad recipient 'a'", payload='{"to": "a"}')
    dead(conn, SRC, ["j_2"], error="SMTP 553: bad recipient 'b'", payload='{"to": "b"}')
    dead(conn, SRC, ["j_3"], error="timeout after 30s", payload='{"to": "a"}')
    sig = emq.triage.signature("SMTP 553: bad recipient 'a'")
    assert transfer.export_jobs(conn, SRC, tmp_path / "s.jsonl", signature=sig) == 2
    assert transfer.export_jobs(conn, SRC, tmp_path / "p.jsonl", payload='*"a"*', signature=sig) == 1
    assert json.loads((tmp_path / "p.jsonl").read_text())["id"] == "j_1"


def test_a_row_a_record_cannot_hold_is_left_out_and_said(conn, tmp_path):
    dead(conn, SRC, ["j_1", "j_2"])
    conn.client.hset(job_key(SRC, "j_1"), "id", "mine")  # a field named as a record's key
    conn.client.zadd(queue_key(SRC, "dead"), {"ghost": 1})  # a member with no row: not a job
    written = transfer.export_jobs(conn, SRC, tmp_path / "d.jsonl.gz")
    assert written == 1 and written.left == {"j_1": "field_named_id_or_at"}
    with gzip.open(tmp_path / "d.jsonl.gz", "rt") as f:
        assert [json.loads(x)["id"] for x in f] == ["j_2"]
    assert written.lines() == ["1 jobs left out: j_1 (field_named_id_or_at)"]


def test_an_export_cut_part_way_leaves_no_file(conn, tmp_path, monkeypatch):
    dead(conn, SRC, ["j_1"])

    def broken(*a, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(transfer, "read_rows", broken)
    with pytest.raises(RuntimeError):
        transfer.export_jobs(conn, SRC, tmp_path / "d.parquet")
    assert list(tmp_path.iterdir()) == []


# -- import -----------------------------------------------------------------------------------


def lines_file(tmp_path, records, name="in.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_import_twice_adds_nothing_the_second_time(conn, tmp_path):
    dead(conn, SRC, ["j_1", "j_2"])
    path = tmp_path / "d.parquet"
    transfer.export_jobs(conn, SRC, path)
    first = transfer.import_jobs(conn, "copy", path)
    second = transfer.import_jobs(conn, "copy", path)
    assert (first.added, first.skipped, second.added, second.skipped) == (2, 0, 0, 2)
    assert sorted(conn.client.zrange(queue_key("copy", "pending"), 0, -1)) == ["j_1", "j_2"]
    assert row(conn, "copy", "j_1")["state"] == "pending"
    assert consistency_problems(conn, "copy") == []


def test_import_puts_a_grouped_job_in_its_lane_at_its_priority(conn, tmp_path):
    path = lines_file(tmp_path, [{"id": "a", "payload": "{}", "group": "g1", "priority": "3"}])
    transfer.import_jobs(conn, "copy", path)
    assert conn.client.zscore(queue_key("copy", "g:g1:pending"), "a") == 3
    assert emq.lanes.claim(conn, "copy").id == "a"


BAD = [
    ("not json", "line 2: not a JSON record"),
    ({"payload": "{}"}, "line 2: no id"),
    ({"id": "b"}, "line 2: no payload"),
    ({"id": "b", "payload": "{}", "attempts": "three"}, "line 2: attempts 'three' is not a whole number"),
    ({"id": "b", "payload": {"base64": "!!"}}, "line 2: field 'payload' is not base64"),
    ({"id": "b:logs", "payload": "{}"}, "line 2: job id 'b:logs' names another job's logs key"),
    ({"id": "b", "payload": "{}", "state": "lost"}, "line 2: state 'lost' is not one of"),
    ({"id": "b", "payload": "{}", "at": 1.5}, "line 2: at 1.5 is not a whole number of ms"),
    ({"id": "b", "payload": "x" * (5 << 20)}, "line 2: 5,242,8"),
    ([1, 2], "line 2: a record is a JSON object"),
]


@pytest.mark.parametrize(("bad", "said"), BAD, ids=[s.split(": ", 1)[1][:30] for _, s in BAD])
def test_a_bad_record_is_refused_with_its_line_and_nothing_is_written(conn, tmp_path, bad, said):
    path = lines_file(tmp_path, [{"id": "a", "payload": "{}"}, bad, {"id": "c", "payload": "{}"}])
    before = dump(conn)
    with pytest.raises(BadRecord) as refused:
        transfer.import_jobs(conn, "copy", path)
    assert refused.value.line == 2 and str(refused.value).startswith(said), str(refused.value)
    assert dump(conn) == before and not conn.client.exists(audit_key("copy"))


def test_an_import_is_audited_once_with_the_files_digest(conn, tmp_path):
    path = lines_file(tmp_path, [{"id": i, "payload": "{}"} for i in ("a", "b", "c")])
    with audit.because("INC-7 replay"):
        transfer.import_jobs(conn, "copy", path, state="dead")
    # a bulk verb: its started entry, then its closing one (SPEC 12)
    [(_, began), (_, entry)] = conn.client.xrange(audit_key("copy"))
    assert (began["verb"], began["outcome"]) == ("import", "started")
    digest = transfer.check_file(path).digest
    assert json.loads(entry["args"])["digest"] == digest and digest.startswith("sha256:")
    assert (entry["verb"], entry["outcome"], entry["count"], entry["reason"]) == (
        "import",
        "done",
        "3",
        "INC-7 replay",
    )


def test_an_import_dry_run_writes_nothing_and_a_read_only_session_may_run_it(conn, tmp_path):
    path = lines_file(tmp_path, [{"id": i, "payload": "{}"} for i in ("a", "b", "a")])
    jobs.enqueue(conn, "copy", "{}", id="b")
    before = dump(conn)
    would = transfer.import_jobs(conn, "copy", path, dry_run=True)
    assert (would.added, would.skipped, would.dry_run) == (1, 2, True)
    assert dump(conn) == before
    reader = emq.connect(embedded="fake", read_only=True) if conn.in_process else None
    if reader is not None:
        assert transfer.import_jobs(reader, "copy", path, dry_run=True).added == 1
        with pytest.raises(ReadOnly):
            transfer.import_jobs(reader, "copy", path)


# -- move ----------------------------------------------------------------------------------------


def test_a_move_carries_each_job_whole_and_creates_the_target_paused(conn):
    dead(conn, SRC, ["j_1", "j_2"], error="SMTP 553: bad")
    dead(conn, SRC, ["j_3"], error="timeout")
    jobs.add_log(conn, SRC, "j_1", "tried once")
    conn.client.hset(job_key(SRC, "j_2"), "payload", RAW)
    before = {i: row(conn, SRC, i) for i in ("j_1", "j_2")}
    scores = {i: conn.client.zscore(queue_key(SRC, "dead"), i) for i in ("j_1", "j_2")}
    moved = transfer.move_jobs(conn, SRC, DST, error="SMTP*")
    assert (moved, sorted(moved.ids), moved.stayed) == (2, ["j_1", "j_2"], {})
    for i in ("j_1", "j_2"):
        assert row(conn, DST, i) == before[i] and not conn.client.exists(job_key(SRC, i))
        assert conn.client.zscore(queue_key(DST, "dead"), i) == scores[i]
    assert conn.client.lrange(job_key(DST, "j_1") + ":logs", 0, -1) == ["tried once"]
    assert where(conn, "j_3", (SRC, DST)) == [SRC]
    assert admin.is_paused(conn, DST) and not admin.is_paused(conn, SRC)
    assert [k for k in keys_of(conn, SRC) if ":moving" in k] == []
    assert [k for k in keys_of(conn, DST) if ":arrived" in k] == []
    assert consistency_problems(conn, SRC) == consistency_problems(conn, DST) == []


def test_a_move_is_audited_in_both_queues_streams(conn):
    dead(conn, SRC, ["j_1", "j_2"])
    with audit.because("INC-9 quarantine"):
        transfer.move_jobs(conn, SRC, DST)
    [began] = [e for _, e in conn.client.xrange(audit_key(SRC)) if e["outcome"] == "started"]
    assert began["verb"] == "move"
    for q in (SRC, DST):
        [entry] = [
            e
            for _, e in conn.client.xrange(audit_key(q))
            if e["verb"] == "move" and e["outcome"] != "started"
        ]
        assert (entry["outcome"], entry["count"], entry["reason"]) == ("done", "2", "INC-9 quarantine")
        assert json.loads(entry["ids"])["first"] == ["j_1", "j_2"]
    assert json.loads(conn.client.xrange(audit_key(DST))[-1][1]["args"])["source"] == SRC


def test_a_move_that_finds_nothing_creates_no_queue(conn):
    dead(conn, SRC, ["j_1"], error="timeout")
    assert transfer.move_jobs(conn, SRC, DST, error="SMTP*") == 0
    assert keys_of(conn, DST) == []


def test_no_pause_and_an_existing_target_keep_their_gate(conn):
    dead(conn, SRC, ["j_1", "j_2"])
    transfer.move_jobs(conn, SRC, "other", ids=["j_1"], pause=False)
    assert not admin.is_paused(conn, "other")
    jobs.enqueue(conn, "running", "{}")
    transfer.move_jobs(conn, SRC, "running", ids=["j_2"])
    assert not admin.is_paused(conn, "running")


def test_pending_and_grouped_jobs_move_to_the_targets_lanes(conn):
    jobs.enqueue(conn, SRC, "{}", id="flat", priority=4)
    jobs.enqueue(conn, SRC, "{}", id="laned", group="tenant-1")
    jobs.enqueue(conn, SRC, "{}", id="later", delay_ms=3_600_000)
    moved = transfer.move_jobs(conn, SRC, DST, state="pending", pause=False)
    assert sorted(moved.ids) == ["flat", "laned"]
    assert conn.client.zscore(queue_key(DST, "pending"), "flat") == 4
    assert conn.client.zscore(queue_key(DST, "g:tenant-1:pending"), "laned") == 0
    assert emq.lanes.claim(conn, DST).id == "laned"
    assert transfer.move_jobs(conn, SRC, DST, state="schedule").ids == ["later"]
    assert consistency_problems(conn, SRC) == consistency_problems(conn, DST) == []


def test_a_target_holding_an_id_keeps_its_job_and_the_source_keeps_its_own(conn):
    dead(conn, SRC, ["same", "other", "free"])
    for i in ("same", "other"):
        conn.client.hset(job_key(DST, i), mapping=row(conn, SRC, i))
        conn.client.zadd(queue_key(DST, "dead"), {i: 1})
    conn.client.hset(job_key(DST, "other"), "payload", "another job")
    moved = transfer.move_jobs(conn, SRC, DST)
    assert sorted(moved.ids) == ["free", "same"] and moved.same == 1 and moved.stayed == {"other": "conflict"}
    assert where(conn, "same", (SRC, DST)) == [DST] and where(conn, "free", (SRC, DST)) == [DST]
    assert where(conn, "other", (SRC, DST)) == [SRC, DST]
    assert row(conn, DST, "other")["payload"] == "another job"
    assert row(conn, SRC, "other")["payload"] == '{"to": "x"}'
    assert consistency_problems(conn, SRC) == []


def test_a_move_is_refused_before_any_io(conn):
    before = dump(conn)
    for call in (
        lambda: transfer.move_jobs(conn, SRC, SRC),
        lambda: transfer.move_jobs(conn, SRC, DST, state="active"),
        lambda: transfer.move_jobs(conn, SRC, "a b"),
        lambda: transfer.move_jobs(conn, SRC, DST, ids=["a"], error="x*"),
        lambda: transfer.move_jobs(conn, SRC, DST, budget=10_000),
    ):
        with pytest.raises((BadInput, emq.InvalidName)):
            call()
    assert dump(conn) == before


def test_a_dry_run_answers_what_the_move_would_do_and_writes_nothing(conn):
    dead(conn, SRC, ["j_1", "j_2", "j_3"])
    conn.client.hset(job_key(DST, "j_2"), "payload", "another job")
    before = dump(conn)
    would = transfer.move_jobs(conn, SRC, DST, dry_run=True)
    assert (would.moved, would.stayed, would.dry_run) == (2, {"j_2": "conflict"}, True)
    assert dump(conn) == before
    moved = transfer.move_jobs(conn, SRC, DST)
    assert (moved.moved, moved.stayed) == (would.moved, would.stayed)


def test_obliterating_the_source_clears_its_journal(conn):
    dead(conn, SRC, ["j_1", "j_2"])
    conn.run("move_take", [base(SRC)], ["dead", new_batch(), "gone", 60_000, DST, "j_1"])
    assert conn.client.exists(moving_key(SRC))
    admin.pause(conn, SRC)
    admin.obliterate_all(conn, SRC)
    assert keys_of(conn, SRC) == []


# -- a move cut at every point -----------------------------------------------------------------


class Killed(BaseException):
    """What the in-process client's 'death' raises (the fake server lives in this process)."""


def cut_in_process(conn, k: int) -> emq.Connection:
    """A client of `conn`'s server whose calls stop for good once its k-th has answered."""
    victim = conn.with_executor("script")
    calls = [0]

    def counted(call):
        def run(*a, **kw):
            if calls[0] >= k:
                raise Killed
            reply = call(*a, **kw)
            calls[0] += 1
            return reply

        return run

    victim.run = counted(victim.run)
    victim.command = counted(victim.command)
    return victim


def cut_move(conn, backend, request, k: int, budget: int) -> None:
    """Move SRC's dead jobs to DST with a client killed after its k-th call: in its own
    process, SIGKILLed, on a real server; on the in-process fake, stopped dead."""
    if backend == "fake":
        try:
            transfer.move_jobs(cut_in_process(conn, k), SRC, DST, budget=budget)
        except Killed:
            pass
        return
    url = server_url(backend, request.getfixturevalue(backend))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(
        [sys.executable, str(VICTIM), url, SRC, DST, str(k), str(budget)],
        env=env,
        timeout=120,
        check=False,
        capture_output=True,
    )


def scene(conn, n: int, held: dict[str, str]) -> dict[str, dict]:
    """`n` dead jobs in SRC (one with logs, one with bytes that are not UTF-8) and the
    ids `held` ({id: "same" | "other"}) already in DST: an identical job (row and logs),
    or another job.
    Answers each job's row as it was."""
    ids = [f"j{i}" for i in range(n)]
    dead(conn, SRC, ids)
    jobs.add_log(conn, SRC, "j0", "a line")
    conn.client.hset(job_key(SRC, ids[-1]), "payload", RAW)
    rows = {i: row(conn, SRC, i) for i in ids}
    for i, kind in held.items():
        conn.client.hset(job_key(DST, i), mapping=rows[i])
        for line in conn.client.lrange(job_key(SRC, i) + ":logs", 0, -1):
            conn.client.rpush(job_key(DST, i) + ":logs", line)
        if kind == "other":
            conn.client.hset(job_key(DST, i), "payload", "another job")
        conn.client.zadd(queue_key(DST, "dead"), {i: 1})
    return rows


def check_exactly_once(conn, rows: dict[str, dict], held: dict[str, str]) -> None:
    """After the moves: each job in exactly one queue with its id and fields (a conflict
    stays in SRC, the target's own job in DST), the journal empty, both queues sound."""
    for i, fields in rows.items():
        if held.get(i) == "other":
            assert where(conn, i, (SRC, DST)) == [SRC, DST], i
            assert row(conn, SRC, i) == fields and row(conn, DST, i)["payload"] == "another job"
            continue
        assert where(conn, i, (SRC, DST)) == [DST], (i, where(conn, i, (SRC, DST)))
        assert row(conn, DST, i) == fields and not conn.client.exists(job_key(SRC, i)), i
    assert conn.client.lrange(job_key(DST, "j0") + ":logs", 0, -1) == ["a line"]
    assert [k for k in keys_of(conn, SRC) if ":moving" in k] == []
    assert consistency_problems(conn, SRC) == consistency_problems(conn, DST) == []
    for key in (k for k in keys_of(conn, DST) if ":arrived:" in k):  # a batch cut before its end
        assert conn.client.pttl(key) > 0


KILLS = dict(
    k=st.integers(1, 40),
    n=st.integers(1, 7),
    budget=st.integers(1, 4),
    held=st.dictionaries(st.sampled_from(["j0", "j1", "j3"]), st.sampled_from(["same", "other"]), max_size=2),
)


def test_a_move_killed_after_any_call_is_finished_by_the_next_one(conn, backend, request):
    """A property over where the client dies (after its k-th call), how many jobs, the
    batch size and which ids the target holds already; on a real server the client is a
    process of its own, SIGKILLed (each example starts one: fewer examples there)."""

    @given(**KILLS)
    @settings(max_examples=30 if backend == "fake" else 10, deadline=None)
    def killed(k, n, budget, held):
        conn.client.flushall()
        held = {i: kind for i, kind in held.items() if int(i[1:]) < n}
        rows = scene(conn, n, held)
        cut_move(conn, backend, request, k, budget)
        again = transfer.move_jobs(conn.with_executor("script"), SRC, DST, budget=budget, take_over=True)
        assert again.busy == []
        check_exactly_once(conn, rows, held)

    killed()


def test_a_move_killed_after_each_of_its_calls_in_turn_is_finished(conn):
    """Every point, not a sample: the same move cut after its 1st call, its 2nd, ... up to
    one past its last, each finished by a later call (the client stopped in this process)."""
    held = {"j1": "same", "j3": "other"}
    total = 0
    for k in range(1, 200):
        conn.client.flushall()
        rows = scene(conn, 6, held)
        try:
            transfer.move_jobs(cut_in_process(conn, k), SRC, DST, budget=2)
            total = total or k
        except Killed:
            pass
        transfer.move_jobs(conn.with_executor("script"), SRC, DST, budget=2, take_over=True)
        check_exactly_once(conn, rows, held)
        if total:
            break
    assert 10 < total < 200


@given(k1=st.integers(1, 30), k2=st.integers(1, 30), budget=st.integers(1, 3))
@settings(max_examples=25, deadline=None)
def test_a_move_and_the_call_finishing_it_both_killed_are_finished_by_a_third(k1, k2, budget):
    """The finishing call is cut too: a third call still leaves every job in one queue
    (in this process, on the embedded server: the data is what is checked)."""
    conn = emq.connect(embedded="fake")
    conn.client.flushall()
    held = {"j1": "other"}
    rows = scene(conn, 5, held)
    for k in (k1, k2):
        try:
            transfer.move_jobs(cut_in_process(conn, k), SRC, DST, budget=budget, take_over=True)
        except Killed:
            pass
    transfer.move_jobs(conn.with_executor("script"), SRC, DST, budget=budget, take_over=True)
    check_exactly_once(conn, rows, held)


def test_jobs_a_move_cannot_carry_whole_stay_where_they_are(conn):
    dead(conn, SRC, ["big", "ok", "typed"])
    conn.client.hset(job_key(SRC, "big"), "note", "x" * (5 << 20))  # over MAX_PAYLOAD
    foreign = ["other:logs", "y" * 70_000]  # ids no verb addresses (another node's)
    conn.client.zadd(queue_key(SRC, "dead"), {i: 1 for i in foreign})
    conn.client.delete(job_key(SRC, "typed"))
    conn.client.set(job_key(SRC, "typed"), "a string where a row should be")
    before = {i: score(conn, SRC, "dead", i) for i in ("big", "typed", *foreign)}
    moved = transfer.move_jobs(conn, SRC, DST, ids=["big", "ok", "typed", *foreign])
    assert moved.ids == ["ok"]
    # a row over the bound: too_large where the server lists it, unread where it cannot
    # measure it whole to list its extra field (read by the job's own names)
    assert moved.stayed.pop("big") in ("too_large", "unread")
    assert moved.stayed == {foreign[0]: "foreign_id", foreign[1]: "foreign_id", "typed": "bad_row"}
    assert {i: score(conn, SRC, "dead", i) for i in before} == before
    assert [k for k in keys_of(conn, SRC) if ":moving" in k] == []
    # a search finds none of the three that stayed but the big row, and moves nothing more
    assert transfer.move_jobs(conn, SRC, DST).stayed.keys() <= {"big"}


def test_a_later_call_leaves_a_live_clients_batch_to_it(conn):
    rows = scene(conn, 3, {})
    conn.run("move_take", [base(SRC)], ["dead", new_batch(), "alive", 60_000, DST, "j0", "j1"])
    later = transfer.move_jobs(conn, SRC, DST)
    assert later.ids == ["j2"] and [b[2] for b in later.busy] == [DST]
    assert "another client's until" in later.lines()[-1]
    assert transfer.finish_moves(conn, SRC, take_over=True).finished == 2
    check_exactly_once(conn, rows, {})


def test_two_operators_moving_the_same_signature_at_once_move_each_job_once(conn, connect_as):
    ids = [f"j{i}" for i in range(60)]
    dead(conn, SRC, ids)
    rows = {i: row(conn, SRC, i) for i in ids}
    results = {}

    def operator(name: str, target: str) -> None:
        results[name] = transfer.move_jobs(connect_as(), SRC, target, error="SMTP*", budget=3)

    threads = [threading.Thread(target=operator, args=(n, t)) for n, t in (("ana", DST), ("bo", "other.q"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["ana"].moved + results["bo"].moved == len(ids)
    assert set(results["ana"].ids).isdisjoint(results["bo"].ids)
    for i in ids:
        [q] = where(conn, i, (SRC, DST, "other.q"))
        assert row(conn, q, i) == rows[i]
    for q in (SRC, DST, "other.q"):
        assert consistency_problems(conn, q) == []


def test_two_operators_moving_into_the_same_target_at_once_move_each_job_once(conn, connect_as):
    ids = [f"j{i}" for i in range(40)]
    dead(conn, SRC, ids)
    rows = {i: row(conn, SRC, i) for i in ids}
    moved: list[int] = []
    threads = [
        threading.Thread(target=lambda: moved.append(transfer.move_jobs(connect_as(), SRC, DST, budget=2)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(moved) == len(ids)
    for i in ids:
        assert where(conn, i, (SRC, DST)) == [DST] and row(conn, DST, i) == rows[i]
    assert consistency_problems(conn, SRC) == consistency_problems(conn, DST) == []


def test_a_batch_taken_over_from_a_client_still_alive_is_moved_once(conn):
    """An operator takes over (`take_over`) a batch whose client is stalled, not dead,
    between its step 2 and 3: the stalled client's step 3 finds the batch another's and
    writes nothing; every job ends in the target once."""
    rows = scene(conn, 4, {})
    stalled, resume = threading.Event(), threading.Event()
    slow = conn.with_executor("script")
    run = slow.run

    def stalling(name, *a, **kw):
        reply = run(name, *a, **kw)
        if name == "move_put" and not stalled.is_set():
            stalled.set()
            resume.wait(30)
        return reply

    slow.run = stalling
    result: list[transfer.MoveResult] = []
    first = threading.Thread(target=lambda: result.append(transfer.move_jobs(slow, SRC, DST, budget=2)))
    first.start()
    assert stalled.wait(30)
    taken = transfer.finish_moves(conn.with_executor("script"), SRC, take_over=True)
    resume.set()
    first.join()
    assert taken.finished == 2 and result[0].moved == 2
    check_exactly_once(conn, rows, {})


def test_a_journal_entry_whose_jobs_are_gone_is_cleared(conn):
    dead(conn, SRC, ["j_1"])
    batch = new_batch()
    conn.run("move_take", [base(SRC)], ["dead", batch, "gone", 0, DST, "j_1"])
    conn.client.delete(queue_key(SRC, "moving:" + batch), job_key(SRC, "j_1"))  # another client's hand
    assert transfer.finish_moves(conn, SRC).moved == 0
    assert not conn.client.exists(moving_key(SRC))


def test_a_limit_counts_this_calls_jobs_not_those_it_finished(conn):
    dead(conn, SRC, [f"j{i}" for i in range(5)])
    conn.run("move_take", [base(SRC)], ["dead", new_batch(), "gone", 0, DST, "j0", "j1"])
    moved = transfer.move_jobs(conn, SRC, DST, limit=2)
    assert (moved.moved, moved.finished) == (4, 2)
    assert conn.client.zcard(queue_key(SRC, "dead")) == 1


def test_each_executor_moves_and_reads_the_same(ex, tmp_path):
    dead(ex, SRC, ["j_1", "j_2"])
    assert transfer.export_jobs(ex, SRC, tmp_path / "d.jsonl") == 2
    assert transfer.move_jobs(ex, SRC, DST).ids == ["j_1", "j_2"]
    assert transfer.import_jobs(ex, SRC, tmp_path / "d.jsonl", state="dead").skipped == 0
    assert consistency_problems(ex, SRC) == consistency_problems(ex, DST) == []


# -- a server restarted from its AOF in the middle of a move -----------------------------------


@pytest.mark.fault
@pytest.mark.parametrize("k", [3, 5, 6, 7, 9, 12])
def test_a_move_cut_by_a_server_restart_is_finished_by_the_next_call(request, k):
    """A Valkey keeping every write it acknowledged (AOF, fsync always; test_faults'
    `server`) SIGKILLed after the move's k-th call, and started again on its data."""
    import signal

    srv = request.getfixturevalue("aof_server")

    conn = emq.connect(f"redis://127.0.0.1:{srv.port}/0")
    rows = scene(conn, 7, {"j1": "same", "j3": "other"})
    calls = [0]
    run = conn.run

    def counted(*a, **kw):
        reply = run(*a, **kw)
        calls[0] += 1
        if calls[0] == k:
            os.kill(srv._process.pid, signal.SIGKILL)
        return reply

    conn.run = counted
    with pytest.raises(emq.WireError):
        transfer.move_jobs(conn, SRC, DST, budget=2)
    conn.run = run
    restart(srv)
    transfer.move_jobs(conn, SRC, DST, budget=2)  # the same client: its batch at once
    check_exactly_once(conn, rows, {"j1": "same", "j3": "other"})


# -- the verbs -----------------------------------------------------------------------------------


def shell(conn, line: str, said: list[str] | None = None):
    session = cli.ShellSession(say=(said.append if said is not None else lambda *_: None))
    session.conn = conn
    session.settings.confirm_above = 2
    return verbs.execute(session, grammar.parse(line))


def test_the_verbs_export_import_and_move(conn, tmp_path):
    dead(conn, SRC, ["j_1", "j_2", "j_3"])
    said: list[str] = []
    path = tmp_path / "dead.jsonl.gz"
    shell(conn, f"export {SRC} --to {path}", said)
    assert said[-1] == f"exported 3 dead jobs of {SRC} to {path}"
    assert shell(conn, f"import copy --from {path} --dry-run", said).added == 3
    assert said[-1] == "dry run, nothing written: would add 3, skip 0 (ids held)"
    with pytest.raises(UsageProblem, match="would import 3 jobs .* add --yes"):
        shell(conn, f"import copy --from {path}")
    assert shell(conn, f"import copy --from {path} --yes --state dead").added == 3
    with pytest.raises(UsageProblem, match="would move 3 jobs"):
        shell(conn, f"move {SRC} --to {DST}")
    assert not conn.client.exists(queue_key(DST, "meta"))
    shell(conn, f"move {SRC} --to {DST} --error 'SMTP*' --limit 2", said)
    assert said[-1] == f"moved 2 jobs of {SRC} to {DST} (paused)"
    assert shell(conn, f"move {SRC} --to {DST} --ids j_3 --dry-run").moved == 1
    assert shell(conn, f"move {SRC} --finish").moved == 0


def test_move_completes_queue_names_and_export_paths(conn, tmp_path):
    from emq_notebook.completion import Completer

    session = verbs.Session()
    session.conn = conn
    jobs.enqueue(conn, "mailers", "{}")
    (tmp_path / "dead.jsonl").write_text("")
    words = Completer(session).words
    assert "mailers" in words("move mailers --to ")
    assert words(f"export mailers --to {tmp_path}/de") == [f"{tmp_path}/dead.jsonl"]
    assert "pending" in words("move mailers --state ")


# -- docs/transfer.md, as written --------------------------------------------------------------


def test_the_docs_section_runs_as_written(ip, backend, request, capfd, monkeypatch, tmp_path):
    from as_written import typed
    from documentation import block

    conn = request.getfixturevalue("magic_on")
    monkeypatch.chdir(tmp_path)  # the file it exports

    lines = [ln for ln in block("Export, import and move").strip().splitlines() if ln.strip()]
    checked = 0
    for line in lines:
        result, out, comment = typed(ip, capfd, line)
        assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
        if comment.startswith(("exported", "dry run", "moved", "imported", "move mailers")):
            assert comment in out, (line, out)
            checked += 1
        elif comment:
            assert repr(result.result) == comment, (line, result.result)
            checked += 1
    assert checked == 9
    assert where(conn, "j_2", (SRC, DST)) == [SRC] and where(conn, "j_3", (SRC, DST)) == [DST]
    assert admin.is_paused(conn, DST)
    assert sorted(conn.client.zrange(queue_key("mailers.replay", "dead"), 0, -1)) == ["j_2", "j_3"]
