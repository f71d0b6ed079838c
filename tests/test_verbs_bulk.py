"""The filtered and controlled forms of `reprocess` and `remove` (emq_notebook/verbs/bulk.py)
through %emq, in an in-process IPython shell, on both backends: a preview, the threshold and
--yes, --limit, dry runs, a controlled retry, read-only sessions."""

import threading
from typing import Any

import pandas as pd
import pytest
from bad_rows import P, Q, kill
from helpers import dump, server_for, server_url
from mailq import K as K_fenced_round2
from mailq import smtp_dead, with_a_foreign_error
from triage_stage import Q as Q_triage_magics
from triage_stage import kill as kill_triage_magics
from triage_stage import stage

import emq_notebook as emq
from emq_notebook import admin, jobs, magics, repeat
from emq_notebook.errors import Halted, ReadOnly, UsageProblem
from emq_notebook.verbs import bulk

# -- Do no harm, the bulk verbs: every call is bounded by the work it does (members examined AND
# bytes), whatever the sets hold -- bad rows, ghosts, ids another node wrote outside the name gate,
# 8 MB payloads, a :logs list of 200,000 lines -- and a run walks each member once, so it never
# re-walks (or re-announces) what it left behind. Both backends; the calls that could hold a server run
# under the harness's watchdog (tests/harm.py). Work is observed in the replies and the events,
# never timed.


def test_a_filtered_reprocess_line_moves_at_most_the_move_budget_a_call(conn):
    """`%emq reprocess Q --error GLOB --yes` moves in calls of at most `ID_BUDGET`
    jobs (as `admin.reprocess_jobs` does), whatever the session's `budget` setting
    (1,000 by default, for drains): each id given costs the server a lookup of its own.
    `--budget` still names the calls' size."""
    from emq_notebook import cli, grammar, verbs
    from emq_notebook.defaults import ID_BUDGET

    kill(conn, [f"j_{i}" for i in range(ID_BUDGET + 100)])
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    sizes: list[int] = []
    run = conn.run

    def counted(name: str, keys: Any, args: Any = (), **kw: Any) -> Any:
        if name == "reprocess_jobs":
            sizes.append(len(args) - 2)  # its ids follow two values (`transitions.decode`)
        return run(name, keys, args, **kw)

    conn.run = counted  # type: ignore[method-assign]
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes"))
    assert sizes == [ID_BUDGET, 100]
    assert conn.client.zcard(P + "dead") == 0
    admin.drain(conn, Q)  # the moved jobs leave pending: the next ones are claimed to die
    kill(conn, [f"k_{i}" for i in range(30)])
    sizes.clear()
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes --budget 20"))
    assert sizes == [20, 10]


# -- The triage verbs through %emq, in an in-process IPython shell, on both backends: find and
# errors return frames; a filtered reprocess / remove prints its preview, acts on nothing without
# --yes above the threshold, and with --yes acts on exactly the previewed ids; the controlled retry;
# promote, repeats, run-now.
K = f"emq:{{{Q_triage_magics}}}:"


def test_a_filtered_reprocess_below_the_threshold_acts(emq_line, conn, capsys):
    stage(conn)
    words = emq_line("reprocess mailq --error 'timeout*'")
    assert words == {"j_to": "reprocessed"}
    out = capsys.readouterr().out
    assert "reprocess mailq: 1 jobs match" in out
    assert "1  timeout after <num>ms  [j_to]" in out
    assert "reprocess mailq: 1 reprocessed (the 1 previewed jobs)" in out
    words = emq_line("reprocess mailq --signature 'SMTP <num> mailbox <num> unavailable' --rate 1000/s")
    assert words == {f"j_smtp{i}": "reprocessed" for i in range(5)}
    assert list(emq_line("find mailq --signature 'TLS handshake failed after <num>s'").index) == ["j_tls"]


def test_above_the_threshold_it_previews_and_acts_on_nothing(emq_line, conn, capsys, confirm_above_3):
    stage(conn)
    before = dump(conn)
    with pytest.raises(UsageProblem, match="would reprocess 5 jobs"):
        emq_line("reprocess mailq --error 'SMTP*'")
    out = capsys.readouterr().out
    assert "reprocess mailq: 5 jobs match" in out
    assert "5  SMTP <num> mailbox <num> unavailable  [j_smtp0, j_smtp1, j_smtp2, …]" in out
    assert dump(conn) == before
    words = emq_line("reprocess mailq --error 'SMTP*' --dry-run")
    assert words == {f"j_smtp{i}": "reprocessed" for i in range(5)}
    assert "dry run, nothing written: would answer 5 reprocessed" in capsys.readouterr().out
    assert dump(conn) == before
    with pytest.raises(UsageProblem, match="would remove 5 jobs"):
        emq_line("remove mailq --error 'SMTP*'")
    assert dump(conn) == before


def test_with_yes_it_acts_on_exactly_the_previewed_ids(emq_line, conn, monkeypatch, confirm_above_3):
    stage(conn)
    shown = bulk.preview

    def preview_then_one_more_dies(s, doing, q, found, limit=None):
        ids = shown(s, doing, q, found, limit)
        kill_triage_magics(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # after the preview
        return ids

    monkeypatch.setattr(bulk, "preview", preview_then_one_more_dies)
    words = emq_line("reprocess mailq --error 'SMTP*' --yes")
    assert words == {f"j_smtp{i}": "reprocessed" for i in range(5)}
    assert conn.client.zscore(K + "dead", "j_late") is not None  # not touched
    monkeypatch.undo()
    # reprocessed jobs have no last_error any more: found by payload, in pending
    words = emq_line("remove mailq --payload '*smtp*' --state pending --state dead --yes")
    assert words == {f"j_smtp{i}": "removed" for i in range(5)}
    assert conn.client.zscore(K + "dead", "j_late") is not None


def test_the_single_id_forms_still_work(emq_line, conn, capsys):
    stage(conn)
    emq_line("reprocess mailq j_tls")
    assert "reprocessed mailq j_tls: dead -> pending" in capsys.readouterr().out
    emq_line("remove mailq j_to")
    assert "removed mailq j_to" in capsys.readouterr().out
    assert emq_line("reprocess mailq --all-dead --limit 2") is None
    assert "reprocessed 2 dead jobs of mailq" in capsys.readouterr().out


@pytest.mark.parametrize(
    "line",
    [
        "reprocess mailq --rate 50/s",
        "reprocess mailq --trial 3",
        "reprocess mailq --error x --trial 2",
        "reprocess mailq j_1 --error x",
        "reprocess mailq --all --error x",
        "reprocess mailq --dry-run",
        "remove mailq",
        "remove mailq j_1 --error x",
        "reprocess mailq --all --rate fast",
        "reprocess mailq --all --trial 2 --stop-if-failing 2",
    ],
)
def test_usage_problems(emq_line, conn, line):
    stage(conn)
    before = dump(conn)
    with pytest.raises(UsageProblem):
        emq_line(line)
    assert dump(conn) == before


def test_a_controlled_retry_with_a_progress_bar(emq_line, conn, connect_as, capsys):
    stage(conn)
    assert emq_line("reprocess mailq --all --rate 1000/s --trial 2 --watch 200ms --budget 2") is None
    assert "reprocessed 7 dead jobs of mailq" in capsys.readouterr().out
    assert conn.client.zcard(K + "dead") == 0


def test_a_controlled_retry_halts_when_the_trial_fails_again(emq_line, conn, connect_as):
    stage(conn)
    worker = emq.Worker(
        connect_as(), Q_triage_magics, lambda *job: (_ for _ in ()).throw(RuntimeError("still down"))
    )
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            if not worker.run_one():
                stop.wait(0.01)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        with pytest.raises(Halted) as caught:
            emq_line("reprocess mailq --all --trial 2 --stop-if-failing 50% --watch 20s")
    finally:
        stop.set()
        t.join(10)
    assert caught.value.moved == 2 and caught.value.failed_again >= 1
    assert caught.value._render_traceback_()[0].startswith("Halted: reprocess mailq halted after its trial")


def test_promote_repeats_and_run_now(emq_line, conn, capsys):
    jobs.enqueue(conn, Q_triage_magics, "{}", id="j_later", delay_ms=3_600_000)
    emq_line("promote mailq j_later")
    assert "promoted mailq j_later: schedule -> pending" in capsys.readouterr().out
    assert conn.client.zscore(K + "pending", "j_later") == 0
    refusal = emq_line("promote mailq j_later")
    assert refusal.reason == "not_scheduled"
    assert "refused: promote mailq j_later — not_scheduled" in capsys.readouterr().out
    due = repeat.register(conn, Q_triage_magics, "nightly", 86_400_000, '{"report": 1}')
    table = emq_line("repeats mailq")
    assert list(table.columns[:3]) == ["every", "next_due", "payload"]
    assert table.loc["nightly", "every"] == pd.Timedelta(days=1)
    assert table.loc["nightly", "next_due"] == pd.to_datetime(due, unit="ms", utc=True)
    assert table.loc["nightly", "payload"] == '{"report": 1}'
    job_id = emq_line("run-now mailq nightly")
    assert jobs.get_job(conn, Q_triage_magics, job_id)["payload"] == '{"report": 1}'
    assert f"run-now mailq nightly: {job_id} is pending" in capsys.readouterr().out
    assert conn.client.zscore(K + "repeat", "nightly") == due
    assert emq_line("run-now mailq weekly").reason == "gone"


def test_a_read_only_session_finds_and_dry_runs_but_acts_on_nothing(ip, conn, backend, request, capsys):
    stage(conn)
    before = dump(conn)
    url = None if backend == "fake" else server_url(backend, server_for(backend, request))
    magics.SESSION.conn = emq.connect(url, embedded="fake" if url is None else None, read_only=True)
    line = lambda text: ip.run_line_magic("emq", text)  # noqa: E731
    assert len(line("find mailq --error 'SMTP*'")) == 5
    assert line("errors mailq")["count"].sum() == 7
    words = line("reprocess mailq --error 'SMTP*' --dry-run")
    assert words == {f"j_smtp{i}": "reprocessed" for i in range(5)}
    assert set(line("remove mailq --error '*' --dry-run").values()) == {"removed"}
    assert isinstance(line("reprocess mailq --all --dry-run"), pd.DataFrame)
    for text in (
        "reprocess mailq --error 'SMTP*' --yes",
        "remove mailq --error '*'",
        "promote mailq j_tls",
        "run-now mailq nightly",
        "reprocess mailq --all --rate 5/s",
    ):
        with pytest.raises(ReadOnly):
            line(text)
    assert dump(conn) == before


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record. Each test is named after the
# behaviour it holds and runs on both backends where a server is involved (the `conn` fixture:
# embedded fakeredis and a real Valkey).

# -- 1. every filtered verb honours --limit ---------------------------------------------


def test_a_filtered_reprocess_moves_only_the_first_limit_matches(emq_line, conn, capsys):
    ids = smtp_dead(conn)
    words = emq_line("reprocess mailq --error '*SMTP*' --limit 2")
    assert words == {ids[0]: "reprocessed", ids[1]: "reprocessed"}
    assert "reprocess mailq: the first 2 of 10 matches (--limit 2)" in capsys.readouterr().out
    assert conn.client.zcard(K_fenced_round2 + "dead") == 8
    assert sorted(conn.client.zrange(K_fenced_round2 + "pending", 0, -1)) == ids[:2]


def test_a_filtered_remove_removes_only_the_first_limit_matches(emq_line, conn, capsys):
    ids = smtp_dead(conn)
    assert emq_line("remove mailq --error '*SMTP*' --limit 3") == {i: "removed" for i in ids[:3]}
    assert "remove mailq: the first 3 of 10 matches (--limit 3)" in capsys.readouterr().out
    assert conn.client.zrange(K_fenced_round2 + "dead", 0, -1) == ids[3:]


def test_a_limited_dry_run_answers_for_the_first_limit_matches_only(emq_line, conn, capsys):
    ids = smtp_dead(conn)
    before = dump(conn)
    assert emq_line("reprocess mailq --error '*SMTP*' --limit 4 --dry-run") == {
        i: "reprocessed" for i in ids[:4]
    }
    sig = "'SMTP <num> mailbox <num> unavailable'"
    assert emq_line(f"remove mailq --signature {sig} --limit 1 --dry-run") == {ids[0]: "removed"}
    out = capsys.readouterr().out
    assert "the first 4 of 10 matches" in out and "the first 1 of 10 matches" in out
    assert dump(conn) == before


def test_the_confirmation_counts_the_limited_matches(ip, emq_line, conn):
    smtp_dead(conn)
    ip.run_line_magic("config", "EMQMagics.confirm_above = 3")
    try:
        before = dump(conn)
        with pytest.raises(UsageProblem, match="would reprocess 5 jobs"):
            emq_line("reprocess mailq --error '*SMTP*' --limit 5")
        assert dump(conn) == before
        assert len(emq_line("reprocess mailq --error '*SMTP*' --limit 3")) == 3
    finally:
        ip.run_line_magic("config", "EMQMagics.confirm_above = 1000")


def test_a_limit_above_the_matches_acts_on_every_match(emq_line, conn, capsys):
    ids = smtp_dead(conn, 3)
    assert emq_line("remove mailq --error '*SMTP*' --limit 50") == {i: "removed" for i in ids}
    assert "remove mailq: 3 jobs match" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["reprocess", "remove"])
def test_a_filtered_verb_reads_an_undecodable_error_and_shows_it_escaped(emq_line, conn, capsys, verb):
    ids = with_a_foreign_error(conn)
    before = dump(conn)
    word = {"reprocess": "reprocessed", "remove": "removed"}[verb]
    assert emq_line(f"{verb} mailq --error '*SMTP*' --dry-run") == {i: word for i in ids}
    out = capsys.readouterr().out
    assert "SMTP <num> \\xff\\xfe mailbox <num>  [j_09]" in out
    assert dump(conn) == before
    assert emq_line(f"{verb} mailq --error '*SMTP*' --yes") == {i: word for i in ids}
    assert conn.client.zcard(K_fenced_round2 + "dead") == 0
