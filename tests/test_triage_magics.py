"""The triage verbs through %emq, in an in-process IPython shell, on both backends:
find and errors return frames; a filtered reprocess / remove prints its preview, acts
on nothing without --yes above the threshold, and with --yes acts on exactly the
previewed ids; the controlled retry; promote, repeats, run-now."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
from dead_letters import dead_letter
from helpers import dump, server_for, server_url

import emq_notebook as emq
from emq_notebook import jobs, magics, repeat
from emq_notebook.errors import Halted, ReadOnly, UsageProblem
from emq_notebook.verbs import bulk

Q = "mailq"
K = f"emq:{{{Q}}}:"


@pytest.fixture
def confirm_above_3(ip):
    ip.run_line_magic("config", "EMQMagics.confirm_above = 3")
    yield
    ip.run_line_magic("config", "EMQMagics.confirm_above = 1000")


def kill(conn, job_id: str, error: str) -> str:
    return dead_letter(conn, Q, job_id, error, payload=f'{{"id": "{job_id}"}}')


def stage(conn) -> None:
    for i in range(5):
        kill(conn, f"j_smtp{i}", f"SMTP 550 mailbox {i} unavailable")
    kill(conn, "j_tls", "TLS handshake failed after 30s")
    kill(conn, "j_to", "timeout after 1200ms")


def test_find_and_errors_return_frames(emq_line, conn, ip, capsys):
    stage(conn)
    found = emq_line("find mailq --error 'SMTP 5*'")
    assert isinstance(found, pd.DataFrame) and list(found.index) == [f"j_smtp{i}" for i in range(5)]
    ip.run_cell("df = %emq find mailq --error '*after*' --state dead --state schedule")
    assert list(ip.user_ns["df"].index) == ["j_tls", "j_to"]
    assert list(emq_line("find mailq --payload '*smtp[13]*'").index) == ["j_smtp1", "j_smtp3"]
    assert len(emq_line("find mailq --since 1h")) == 7
    assert emq_line("find mailq --min-attempts 2").empty
    capsys.readouterr()
    assert list(emq_line("find mailq --limit 2").index) == ["j_smtp0", "j_smtp1"]
    assert "showing the first 2 matches; --limit 0 for all" in capsys.readouterr().out
    errors = emq_line("errors mailq")
    assert errors.loc["SMTP <num> mailbox <num> unavailable", "count"] == 5
    assert list(errors["count"]) == [5, 1, 1]


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
        kill(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # after the preview
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
    worker = emq.Worker(connect_as(), Q, lambda *job: (_ for _ in ()).throw(RuntimeError("still down")))
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
    jobs.enqueue(conn, Q, "{}", id="j_later", delay_ms=3_600_000)
    emq_line("promote mailq j_later")
    assert "promoted mailq j_later: schedule -> pending" in capsys.readouterr().out
    assert conn.client.zscore(K + "pending", "j_later") == 0
    refusal = emq_line("promote mailq j_later")
    assert refusal.reason == "not_scheduled"
    assert "refused: promote mailq j_later — not_scheduled" in capsys.readouterr().out
    due = repeat.register(conn, Q, "nightly", 86_400_000, '{"report": 1}')
    table = emq_line("repeats mailq")
    assert list(table.columns[:3]) == ["every", "next_due", "payload"]
    assert table.loc["nightly", "every"] == pd.Timedelta(days=1)
    assert table.loc["nightly", "next_due"] == pd.to_datetime(due, unit="ms", utc=True)
    assert table.loc["nightly", "payload"] == '{"report": 1}'
    job_id = emq_line("run-now mailq nightly")
    assert jobs.get_job(conn, Q, job_id)["payload"] == '{"report": 1}'
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
