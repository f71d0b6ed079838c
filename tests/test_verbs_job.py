"""The job verbs (emq_notebook/verbs/job.py) through %emq, on both backends."""

from mailq import Q

from emq_notebook import jobs

# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_one_log_line_is_said_in_the_singular(emq_line, conn, capsys):
    jobs.enqueue(conn, Q, "{}", id="j_1")
    emq_line("log mailq j_1 first")
    assert "logged: mailq j_1 has 1 log line\n" in capsys.readouterr().out
    emq_line("log mailq j_1 second")
    assert "logged: mailq j_1 has 2 log lines\n" in capsys.readouterr().out
