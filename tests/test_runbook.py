"""emq_notebook.runbook, the mechanics every runbook shares, on both backends:
the connect cell, previewed steps with re-checked preconditions, the closing check,
and the readers and the paced reprocess the runbooks use."""

from __future__ import annotations

import threading

import pytest
from dead_rows import Q
from harm import sent
from keydump import changed, dump
from mailq import BAD, with_a_foreign_error
from mailq import Q as Q_fenced_round2

import emq_notebook as emq
from emq_notebook import admin, jobs, lanes, runbook
from emq_notebook.runbook import Preview, need


@pytest.fixture
def url_of(conn, monkeypatch):
    """The URL `start` is given for the backend (None, with no EMQ_URL: the embedded default)."""
    monkeypatch.delenv("EMQ_URL", raising=False)
    return None if conn.label == "embedded fakeredis" else conn.label


def test_start_connects_read_only_unless_apply_and_prints_the_record_head(conn, url_of, capsys):
    jobs.enqueue(conn, "mail", "{}")
    rb = runbook.start("11-x", url_of, "mail", False, env="production", BUDGET=5)
    out = capsys.readouterr().out
    assert rb.conn.read_only and rb.conn.env == "production"
    assert f"server: {conn.label} · env production · executor script · APPLY = False" in out
    assert "queue: mail · parameters: BUDGET=5" in out and out.startswith("runbook 11-x · started ")
    with pytest.raises(emq.ReadOnly):
        admin.pause(rb.conn, "mail")
    assert not runbook.start("11-x", url_of, "mail", True).conn.read_only
    assert emq.current().name == "runbook"  # `%emq` in the runbook uses it


def test_start_refuses_a_bad_apply_and_an_absent_queue(conn, url_of):
    with pytest.raises(emq.BadInput, match="APPLY is True or False"):
        runbook.start("x", url_of, "mail", "yes")
    jobs.enqueue(conn, "mailers", "{}")
    with pytest.raises(emq.BadInput, match=r"no queue 'mailer' on .* \(queues there: mailers\)"):
        runbook.start("x", url_of, "mailer", False)
    assert runbook.start("x", url_of, "mailer", False, absent_ok=True).queue == "mailer"


def test_the_password_stays_out_of_the_record(valkey, capsys, monkeypatch):
    monkeypatch.setenv("EMQ_PASSWORD", "s3cret-pw")  # a wrong one: the server refuses it
    with pytest.raises(emq.WireError) as caught:
        runbook.start("x", f"redis://ops@127.0.0.1:{valkey.port}/0", "mail", False)
    out = capsys.readouterr().out
    assert "redis://ops@127.0.0.1" in out and "s3cret-pw" not in out + str(caught.value)
    assert "authentication failed" in str(caught.value)


def book(conn, apply):
    return runbook.Runbook(
        "t",
        conn.with_executor("script") if apply else emq.Connection(conn.client, conn.label, read_only=True),
        "q",
        apply,
        {},
    )


def test_a_step_not_needed_or_previewed_never_calls_apply(conn, capsys):
    calls = []
    for apply, preview in ((True, Preview("nothing", count=0)), (False, Preview("drain 3", count=3))):
        rb = book(conn, apply)
        assert rb.step("s", preview, lambda: calls.append(1), precheck=lambda: calls.append(2)) is None
    assert calls == []
    out = capsys.readouterr().out
    assert "step s: not needed — nothing" in out and "APPLY = False: previewed only, nothing written" in out


def test_a_step_rechecks_its_precondition_before_it_writes(conn):
    rb = book(conn, True)
    jobs.enqueue(conn, "q", "{}", id="j_1")
    before = dump(conn.client)
    with pytest.raises(emq.PreconditionFailed, match="step drain stopped before writing anything: q is runn"):
        rb.step(
            "drain",
            Preview("drain 1", count=1),
            lambda: admin.drain(conn, "q"),
            precheck=lambda: need(admin.is_paused(conn, "q"), "q is running"),
        )
    assert changed(before, dump(conn.client)) == []
    admin.pause(conn, "q")
    got = rb.step(
        "drain",
        Preview("drain 1", count=1),
        lambda: f"drained {admin.drain(conn, 'q')}",
        precheck=lambda: need(admin.is_paused(conn, "q"), "q is running"),
    )
    assert got == "drained 1" and admin.backlog(conn, "q") == 0
    assert list(rb.record()["outcome"]) == ["stopped", "done"]


def test_verify_fails_the_notebook_only_when_applied(conn, capsys):
    with pytest.raises(emq.OutcomeNotReached, match="not reached: the backlog is gone"):
        book(conn, True).verify({"the backlog is gone": lambda: False, "fine": lambda: True})
    book(conn, False).verify({"the backlog is gone": lambda: False})
    assert "0 of 1 outcomes hold now" in capsys.readouterr().out
    with pytest.raises(AssertionError):  # a preview run must have been read-only
        runbook.Runbook("t", conn, "q", False, {}).verify({})


def test_glance_prints_the_verdict_and_writes_nothing(conn, capsys):
    for i in range(4):
        jobs.enqueue(conn, "q", "{}", id=f"j_{i}", max_attempts=1)
        jobs.fail(conn, "q", jobs.claim(conn, "q", 60_000).id, "boom")
    rb = book(conn, False)
    before = dump(conn.client)
    assert rb.glance("latency").loc["q", "verdict"] == "failing"
    assert rb.glance().loc["q", "verdict"] == "failing"
    assert changed(before, dump(conn.client)) == []
    out = capsys.readouterr().out
    assert out.count("health: q: failing — 4 of 4 jobs finished in the last 5 min failed (100%)") == 2
    with pytest.raises(emq.BadInput, match="plot is 'throughput' or 'latency'"):
        rb.glance("speed")


def test_the_readers(conn):
    now = conn.server_ms()
    for i in range(3):
        jobs.enqueue(conn, "q", "{}", id=f"j_{i}")
    jobs.claim(conn, "q", 1)  # a lease of 1 ms: expired at once
    jobs.claim(conn, "q", 600_000)
    jobs.enqueue(conn, "q", "{}", id="j_due", delay_ms=1)
    jobs.enqueue(conn, "q", "{}", id="j_later", delay_ms=3_600_000)
    jobs.enqueue(conn, "q", "{}", id="j_lane", group="acme")
    lanes.set_limit(conn, "q", "acme", 2)
    import time

    time.sleep(0.01)
    assert runbook.expired_leases(conn, "q") == (1, ["j_0"])
    assert runbook.overdue(conn, "q") == (1, ["j_due"])
    assert runbook.overdue(conn, "q", now - 60_000) == (0, [])
    frame = runbook.lane_frame(conn, "q")
    assert frame.loc["acme"].to_dict() == {
        "pending": 1,
        "active": 0,
        "limit": 2,
        "paused": False,
        "active_share": 0.0,
    }
    assert runbook.lane_frame(conn, "empty").empty
    assert runbook.gone(conn, "q", ["j_0", "j_x"]) == ["j_x"]


def fail_all(conn, q="mail", n=6):
    for i in range(n):
        jobs.enqueue(conn, q, f'{{"n": {i}}}', id=f"j_{i}", max_attempts=1)
        jobs.fail(conn, q, jobs.claim(conn, q, 60_000).id, f"SMTP 55{i % 2}: mailbox 'u{i}' unavailable")
    return [f"j_{i}" for i in range(n)]


def test_choose_matches_the_signature_glob(conn):
    fail_all(conn)
    jobs.enqueue(conn, "mail", "{}", id="j_other", max_attempts=1)
    jobs.fail(conn, "mail", jobs.claim(conn, "mail", 60_000).id, "KeyError: 'template'")
    dead = emq.triage.find(conn, "mail", state="dead")
    chosen = runbook.choose(dead, "*mailbox <str> unavailable")
    assert list(chosen.index) == [f"j_{i}" for i in range(6)]
    assert set(chosen["signature"]) == {"SMTP <num>: mailbox <str> unavailable"}
    assert runbook.choose(dead, None).empty and runbook.choose(dead.iloc[0:0], "*").empty


def test_reprocess_words_dry_run_writes_nothing_and_says_what_the_call_does(conn):
    ids = fail_all(conn)
    jobs.reprocess_job(conn, "mail", ids[0])
    asked = [*ids, "j_none"]
    before = dump(conn.client)
    ro = emq.Connection(conn.client, conn.label, read_only=True)
    preview = runbook.reprocess_words(ro, "mail", asked, dry_run=True)
    assert changed(before, dump(conn.client)) == []
    assert runbook.reprocess_words(conn, "mail", asked) == preview
    assert preview == {**{i: "reprocessed" for i in ids[1:]}, ids[0]: "not_dead", "j_none": "gone"}


def run_worker(conn, handler, jobs_to_do):
    """A real worker in a thread: it stops after `jobs_to_do` jobs (or 10 s)."""
    worker = emq.Worker(conn, "mail", handler, idle_sleep=0.01)
    t = threading.Thread(target=worker.run, kwargs={"max_jobs": jobs_to_do, "timeout": 10}, daemon=True)
    t.start()
    return t


def test_a_failing_trial_halts_and_moves_no_more(conn):
    ids = fail_all(conn)
    t = run_worker(conn, lambda *a: (_ for _ in ()).throw(RuntimeError("still down")), 2)
    with pytest.raises(emq.Halted) as caught:
        runbook.reprocess_chosen(conn, "mail", ids, trial=2, stop_if_failing=0.5, watch_s=10)
    t.join()
    assert (caught.value.moved, caught.value.failed_again) == (2, 2)
    assert sorted(conn.client.zrange("emq:{mail}:dead", 0, -1)) == ids  # the rest never moved


def test_a_good_trial_then_the_rest_at_a_rate(conn, capsys):
    ids = fail_all(conn)
    t = run_worker(conn, lambda *a: None, 6)
    words = runbook.reprocess_chosen(conn, "mail", ids, rate=20, trial=2, stop_if_failing=0.5, watch_s=10)
    t.join()
    assert words == {i: "reprocessed" for i in ids}
    assert "trial: 2 moved, 0 dead again after watching" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad", [dict(rate=0), dict(rate=-1), dict(stop_if_failing=0), dict(stop_if_failing=2)]
)
def test_reprocess_chosen_checks_its_knobs_before_any_write(conn, bad):
    ids = fail_all(conn, n=2)
    before = dump(conn.client)
    with pytest.raises(emq.BadInput):
        runbook.reprocess_chosen(conn, "mail", ids, **bad)
    assert changed(before, dump(conn.client)) == []


# -- the shipped runbooks, as files ------------------------------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "notebooks" / "runbooks").glob("*.ipynb"))


def test_five_runbooks_are_shipped_and_match_their_script():
    import subprocess
    import sys

    assert [p.stem for p in SHIPPED] == [
        "10-triage-dead-letters",
        "11-runaway-producer",
        "12-stuck-queue",
        "13-retire-a-queue",
        "14-lane-hotspot",
    ]
    check = subprocess.run(
        [sys.executable, str(ROOT / "notebooks" / "make_runbooks.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_runbook_opens_with_its_parameters_and_stores_no_outputs(path):
    import ast

    import nbformat

    nb = nbformat.read(path, 4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].metadata.get("tags") == ["parameters"]
    first = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(code[0].source).body}
    assert first["EMQ_URL"] is None and first["APPLY"] is False and isinstance(first["QUEUE"], str)
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert "emq.runbook.start(" in code[1].source and "rb.verify(" in code[-1].source
    for c in code:  # it never enqueues or seeds
        for word in ("enqueue(", "repeat.register(", "run_now(", "demo.fresh(", "Worker(", "flush"):
            assert word not in c.source, (word, c.source)


def test_a_runbook_run_records_its_reason_and_ends_with_the_entries_it_wrote(conn, url_of, capsys):
    """REASON shows on the record's first line, every write of the run carries it with
    surface `runbook` and the runbook's name, and verify ends with those entries."""
    jobs.enqueue(conn, "mail", "{}")
    rb = runbook.start("11-x", url_of, "mail", True, reason="INC-4711 bounce storm")
    assert "reason: INC-4711 bounce storm" in capsys.readouterr().out.splitlines()[0]
    rb.step("pause", Preview("pause mail", count=1), lambda: admin.pause(rb.conn, "mail"))
    rb.step("drain", Preview("drain 1", count=1), lambda: admin.drain(rb.conn, "mail"))
    rb.verify({"the backlog is gone": lambda: admin.backlog(conn, "mail") == 0})
    out = capsys.readouterr().out
    assert "audit: the 2 entries this run wrote" in out
    entries = rb.audit()
    assert list(entries.verb) == ["drain", "pause"]  # newest first
    assert set(entries.reason) == {"INC-4711 bounce storm"} and set(entries.surface) == {"runbook"}
    assert all(n.startswith("11-x.ipynb") for n in entries.notebook)
    assert list(entries["count"])[0] == 1


def test_a_read_only_run_writes_no_entry(conn, url_of, capsys):
    jobs.enqueue(conn, "mail", "{}")
    rb = runbook.start("11-x", url_of, "mail", False, reason="look only")
    rb.step("drain", Preview("drain 1", count=1), lambda: admin.drain(rb.conn, "mail"))
    rb.verify({"the backlog is gone": lambda: admin.backlog(conn, "mail") == 0})
    assert "audit: this run wrote no entry (APPLY = False: nothing written)" in capsys.readouterr().out
    assert conn.client.exists("emq:audit:{mail}") == 0


# -- Do no harm, the reads (bench/harm.py found each): a job's long `:logs` list is read in pages
# bounded by lines and bytes; a payload too large for a script is read with a plain HGET, never
# inside one; a snapshot's call stops at about a byte budget; find, errors and the snapshot pass
# over a member whose id names another job's `:logs` list (its "row" key is a list); a runbook finds
# its queue without a SCAN. Both backends, every call that could hold a server under the harness's
# watchdog (tests/harm.py). Work is observed in the replies, never timed.

# -- the runbook's connect cell ------------------------------------------------------------


def test_a_runbook_finds_its_queue_without_scanning_the_keyspace(harm, monkeypatch, capsys):
    conn, srv = harm
    monkeypatch.delenv("EMQ_URL", raising=False)
    url = None if srv is None else f"redis://127.0.0.1:{srv.port}/0"
    conn.client.mset({f"other:app:{i}": "v" for i in range(5_000)})
    jobs.enqueue(conn, Q, "{}")
    opened = sent(conn, srv, lambda: runbook.start("x", url, Q, False))
    assert opened["scan"] == 0 and opened["exists"] == 1, opened
    with pytest.raises(Exception, match=f"no queue '{Q}x'"):
        runbook.start("x", url, Q + "x", False)


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_a_runbook_chooses_among_undecodable_errors(conn):
    from emq_notebook import runbook, triage

    ids = with_a_foreign_error(conn)
    dead = triage.find(conn, Q_fenced_round2, state="dead")
    assert runbook.choose(dead, None).empty
    chosen = runbook.choose(dead, "SMTP*")
    assert list(chosen.index) == ids
    assert chosen.loc["j_09", "signature"] == triage.signature(BAD.decode("utf-8", "surrogateescape"))
    # the text stays as read: written back, it is the same bytes
    assert chosen.loc["j_09", "last_error"].encode("utf-8", "surrogateescape") == BAD
    assert list(runbook.choose(dead, "SMTP <num> mailbox*").index) == ids[:-1]


# -- 13. a runbook's password comes from EMQ_PASSWORD, never from a parameter ------------

SECRET = "pw-Xy9-record"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://oncall:{SECRET}@127.0.0.1:1/0",
        f"redis://:{SECRET}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={SECRET}",
        f"unix:///tmp/none.sock?password={SECRET}",
    ],
)
def test_a_runbook_url_parameter_holding_a_password_stops_before_any_io(url, monkeypatch):
    from emq_notebook import runbook
    from emq_notebook.errors import BadInput

    monkeypatch.setenv("EMQ_PASSWORD", "another")
    with pytest.raises(BadInput, match="EMQ_PASSWORD environment variable") as caught:
        runbook.start("10-triage-dead-letters", url, Q_fenced_round2, False)
    line = caught.value._render_traceback_()
    assert len(line) == 1 and SECRET not in line[0] and "***" in line[0]


@pytest.fixture
def oncall(valkey):
    """An ACL user with a password on the session's Valkey; its URL names the user only."""
    import redis

    admin_client = redis.Redis(port=valkey.port)
    admin_client.flushall()
    admin_client.execute_command("ACL", "SETUSER", "oncall", "on", f">{SECRET}", "~*", "&*", "+@all")
    yield f"redis://oncall@127.0.0.1:{valkey.port}/0"
    admin_client.execute_command("ACL", "DELUSER", "oncall")


def test_a_runbook_takes_the_password_from_emq_password(oncall, valkey, monkeypatch, capsys):
    import emq_notebook as emq
    from emq_notebook import runbook
    from emq_notebook.errors import WireError

    jobs.enqueue(emq.connect(f"redis://127.0.0.1:{valkey.port}/0"), Q_fenced_round2, "{}")
    monkeypatch.delenv("EMQ_PASSWORD", raising=False)
    with pytest.raises(WireError, match="authentication failed|NOAUTH|WRONGPASS|NOPERM"):
        runbook.start("11-runaway-producer", oncall, Q_fenced_round2, False)
    monkeypatch.setenv("EMQ_PASSWORD", SECRET)
    rb = runbook.start("11-runaway-producer", oncall, Q_fenced_round2, False)
    assert rb.conn.client.acl_whoami() == "oncall"
    # EMQ_URL from the environment is no parameter: it is not written in any record
    monkeypatch.setenv("EMQ_URL", oncall)
    assert (
        runbook.start("11-runaway-producer", None, Q_fenced_round2, False).conn.client.acl_whoami()
        == "oncall"
    )
    assert SECRET not in capsys.readouterr().out
