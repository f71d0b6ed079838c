"""Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more,
data written by other nodes never breaks a tool, secrets stay out of the record.

Each test is named after the behaviour it holds and runs on both backends where a
server is involved (the `conn` fixture: embedded fakeredis and a real Valkey)."""

from __future__ import annotations

import pytest
from helpers import dump

from emq_notebook import jobs, magics
from emq_notebook.errors import UsageProblem

Q = "mailq"
K = f"emq:{{{Q}}}:"


@pytest.fixture
def emq_line(ip, conn):
    magics.SESSION.conn = conn
    return lambda line: ip.run_line_magic("emq", line)


def kill(conn, job_id: str, error: str) -> str:
    jobs.enqueue(conn, Q, f'{{"id": "{job_id}"}}', id=job_id, max_attempts=1)
    assert jobs.claim(conn, Q, 60_000).id == job_id
    jobs.fail(conn, Q, job_id, error)
    return job_id


def smtp_dead(conn, n: int = 10) -> list[str]:
    return [kill(conn, f"j_{i:02}", f"SMTP 550 mailbox {i} unavailable") for i in range(n)]


# -- 1. every filtered verb honours --limit ---------------------------------------------


def test_a_filtered_reprocess_moves_only_the_first_limit_matches(emq_line, conn, capsys):
    ids = smtp_dead(conn)
    words = emq_line("reprocess mailq --error '*SMTP*' --limit 2")
    assert words == {ids[0]: "reprocessed", ids[1]: "reprocessed"}
    assert "reprocess mailq: the first 2 of 10 matches (--limit 2)" in capsys.readouterr().out
    assert conn.client.zcard(K + "dead") == 8
    assert sorted(conn.client.zrange(K + "pending", 0, -1)) == ids[:2]


def test_a_filtered_remove_removes_only_the_first_limit_matches(emq_line, conn, capsys):
    ids = smtp_dead(conn)
    assert emq_line("remove mailq --error '*SMTP*' --limit 3") == {i: "removed" for i in ids[:3]}
    assert "remove mailq: the first 3 of 10 matches (--limit 3)" in capsys.readouterr().out
    assert conn.client.zrange(K + "dead", 0, -1) == ids[3:]


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
