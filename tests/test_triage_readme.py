"""The README's "Triage" section, executed as written, statement by statement in IPython,
on both backends: a comment after a statement is its answer (a printed line, or the repr
of the value the statement returns), and is checked; no statement fails ("Run all" goes
to the end)."""

from __future__ import annotations

import pytest
from as_written import default_server, statements, typed
from documentation import block

import emq_notebook
from emq_notebook import demo, magics

BLOCK = block("Triage")
# a comment starting like one of these is a printed line; one starting like a repr is a value
PRINTED = ("dry run", "remove outbox:", "reprocess outbox halted")
VALUES = ("{", "'", "3", "2")


@pytest.fixture
def session_on(conn, monkeypatch, ip):
    default_server(conn, monkeypatch)
    magics.SESSION.connections.clear()
    magics.SESSION.current = None
    yield conn
    magics.SESSION.connections.clear()
    magics.SESSION.current = None


def test_the_triage_section_runs_as_written(ip, session_on, capfd):
    demo.fresh(session_on, "outbox")
    lines = statements(BLOCK)
    assert len(lines) >= 15
    checked = 0
    for line in lines:
        result, out, comment = typed(ip, capfd, line)
        # the halted retry too: caught and printed, as an operator shows it (#41.5)
        assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
        if comment.startswith(PRINTED):
            assert comment in out, (line, out)
            checked += 1
        elif comment.startswith(VALUES):
            assert repr(result.result) == comment, (line, result.result)
            checked += 1
    assert checked >= 7
    conn = emq_notebook.current()
    assert session_on.label == conn.label
    dead = ip.user_ns["dead"]
    assert list(dead.index) == ["j_2", "j_3"] and set(dead["state"]) == {"dead"}
    assert emq_notebook.frames.counts(conn, ["outbox"]).loc["outbox", "dead"] == 0
    assert not conn.client.exists("emq:{outbox}:job:j_2")


def test_the_errors_line_answers_what_its_comment_says(ip, session_on):
    demo.fresh(session_on, "outbox")
    for line in BLOCK.strip().splitlines():
        if line.startswith("%emq errors"):
            break
        ip.run_cell(line)
    frame = ip.run_cell(line).result
    assert list(frame.index) == ["ValueError: SMTP <num>: bad recipient <str>"]
    assert frame["count"].tolist() == [2]
    assert "one signature: ValueError: SMTP <num>: bad recipient <str>, count 2" in line
