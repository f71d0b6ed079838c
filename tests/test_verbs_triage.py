"""The triage verbs (emq_notebook/verbs/triage.py) through %emq, on both backends: `find` and
`errors` return frames."""

import pandas as pd
from triage_stage import stage

# -- The triage verbs through %emq, in an in-process IPython shell, on both backends: find and
# errors return frames; a filtered reprocess / remove prints its preview, acts on nothing without
# --yes above the threshold, and with --yes acts on exactly the previewed ids; the controlled retry;
# promote, repeats, run-now.


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
