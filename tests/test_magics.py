"""%emq in an in-process IPython shell, on both backends."""

import pandas as pd
import pytest

from emq_notebook import jobs, magics
from emq_notebook.errors import BadInput, EMQError, InvalidName, NotDead, UsageProblem


@pytest.fixture
def emq(ip, conn):
    magics.SESSION.conn = conn
    return lambda line: ip.run_line_magic("emq", line)


def test_connect_never_echoes_the_password(ip, capsys, valkey):
    r = ip.run_line_magic
    r("emq", f"connect redis://default:hunter2-pw@127.0.0.1:{valkey.port}/0")
    out = capsys.readouterr().out
    assert "hunter2-pw" not in out and "***" in out
    assert "hunter2-pw" not in repr(magics.SESSION.conn)


def test_actions_print_one_line_and_queries_return_values(emq, conn, capsys):
    jid = emq("enqueue mail '{\"to\": \"a\"}' --id j_1")
    assert jid == "j_1"
    assert emq("pause mail") is None
    assert capsys.readouterr().out.strip() == \
        "paused mail: claims answer empty; the backlog is untouched"
    status = emq("status mail")
    assert isinstance(status, pd.DataFrame) and bool(status.loc["mail", "paused"])
    assert emq("claim mail") is None
    assert "no job claimed from mail: paused" in capsys.readouterr().out
    emq("resume mail")
    assert emq("claim mail --lease 30s")[0] == "j_1"
    frame = emq("jobs mail --state active")
    assert list(frame.index) == ["j_1"] and frame.loc["j_1", "attempts"] == 1
    emq("fail mail j_1 out of stamps")
    assert emq("job mail j_1")["last_error"] == "out of stamps"


def test_every_job_verb(emq, conn, capsys):
    emq("enqueue mail '{}' --id j_a --attempts 1")
    emq("data mail j_a '{\"fixed\": true}'")
    emq("progress mail j_a 50")
    emq("log mail j_a first line")
    emq("log mail j_a second --keep 1")
    assert emq("logs mail j_a") == ["second"]
    row = emq("job mail j_a")
    assert row["payload"] == '{"fixed": true}' and row["progress"] == "50"
    emq("claim mail")
    emq("fail mail j_a boom")
    emq("reprocess mail j_a")
    assert emq("job mail j_a")["state"] == "pending"
    emq("remove mail j_a")
    assert "removed mail j_a" in capsys.readouterr().out


def test_a_refusal_is_one_line_and_returned(emq, conn, capsys):
    emq("enqueue mail '{}' --id j_live")
    result = emq("reprocess mail j_live")
    assert isinstance(result, NotDead) and result.reason == "not_dead"
    assert capsys.readouterr().out == "refused: reprocess mail j_live — not_dead\n"
    gone = emq("remove mail j_nope")
    assert gone.reason == "gone"
    emq("pause mail") if False else None
    result = emq("obliterate mail")
    assert result.reason == "not_paused"


def test_queue_verbs(emq, conn, capsys):
    for i in range(5):
        emq(f"enqueue mail '{{\"n\": {i}}}'")
    emq("enqueue mail '{}' --delay 1h")
    emq("drain mail --budget 2")
    assert "drained 5 jobs from mail" in capsys.readouterr().out
    emq("pause mail")
    assert emq("obliterate mail --step --budget 1") is None
    assert "obliterate mail: " in capsys.readouterr().out
    emq("obliterate mail")
    out = capsys.readouterr().out
    assert "obliterated mail" in out and "nothing left under emq:{mail}:" in out
    assert conn.client.keys("emq:{mail}:*") == []


def test_reprocess_all_dead_and_metrics(emq, conn, capsys):
    for _ in range(3):
        jobs.enqueue(conn, "mail", "{}", max_attempts=1)
        got = jobs.claim(conn, "mail", 1000)
        jobs.fail(conn, "mail", got[0], "e")
    emq("reprocess mail --all-dead --budget 2")
    assert "reprocessed 3 dead jobs of mail" in capsys.readouterr().out
    m = emq("metrics mail --since 1h")
    assert int(m["failed"].sum()) == 3


@pytest.fixture
def confirm_above_3(ip):
    ip.run_line_magic("config", "EMQMagics.confirm_above = 3")
    yield
    ip.run_line_magic("config", "EMQMagics.confirm_above = 1000")


def test_big_obliterate_asks_for_yes(emq, conn, confirm_above_3):
    for _ in range(5):
        jobs.enqueue(conn, "mail", "{}")
    emq("pause mail")
    with pytest.raises(UsageProblem, match="obliterate mail would destroy 5 jobs on default "
                                           r"\(.*, env not set\): add --yes"):
        emq("obliterate mail")
    assert conn.client.zcard("emq:{mail}:pending") == 5
    emq("obliterate mail --yes")
    assert conn.client.zcard("emq:{mail}:pending") == 0


def test_big_drain_asks_for_yes_stating_the_count(emq, conn, confirm_above_3):
    from conftest import dump
    for _ in range(3):
        jobs.enqueue(conn, "mail", "{}")
    jobs.enqueue(conn, "mail", "{}", group="acme")
    jobs.enqueue(conn, "mail", "{}", delay_ms=60_000)
    before = dump(conn)
    with pytest.raises(UsageProblem, match="drain mail would destroy 4 jobs on default .*: add --yes"):
        emq("drain mail")
    with pytest.raises(UsageProblem, match="would destroy 5 jobs"):
        emq("drain mail --include-schedule")
    assert dump(conn) == before
    emq("drain mail --yes")
    assert conn.client.zcard("emq:{mail}:pending") == 0 and conn.client.zcard("emq:{mail}:schedule") == 1


@pytest.mark.parametrize("line,error", [
    ("frobnicate mail", UsageProblem), ("drain", UsageProblem),
    ("drain mail --budget 0", UsageProblem), ("drain mail --bogus", UsageProblem),
    ("jobs mail --state zombie", UsageProblem), ("enqueue mail '{}' --delay 5 parsecs", UsageProblem),
    ("enqueue mail '{}' --delay fortnight", UsageProblem), ("data mail j_1 '{not json'", BadInput),
    ("pause bad:name", InvalidName), ("reprocess mail", UsageProblem),
    ("enqueue mail '{' ", BadInput), ("pause 'unclosed", UsageProblem),
])
def test_errors_are_emq_errors_with_one_line(emq, conn, line, error):
    from conftest import dump
    before = dump(conn)
    with pytest.raises(error) as info:
        emq(line)
    assert isinstance(info.value, EMQError)
    rendered = info.value._render_traceback_()
    assert len(rendered) == 1 and "\n" not in rendered[0]
    assert dump(conn) == before


def test_help_and_the_docstring(ip, capsys):
    doc = magics.EMQMagics.emq.__doc__
    assert "obliterate QUEUE" in doc and "reprocess QUEUE" in doc
    ip.run_line_magic("emq", "help")
    assert "drain QUEUE" in capsys.readouterr().out
    ip.run_line_magic("emq", "drain --help")
    out = capsys.readouterr().out
    assert "--include-schedule" in out and "--budget" in out
    ip.run_line_magic("emq", "help obliterate")
    assert "--force" in capsys.readouterr().out


def test_cell_magic_stops_at_the_first_refusal(ip, conn, capsys):
    magics.SESSION.conn = conn
    result = ip.run_cell_magic("emq", "", "enqueue mail '{}' --id j_c\n# a comment\n"
                                          "reprocess mail j_c\npause mail\n")
    out = capsys.readouterr().out
    assert result[0] == "j_c" and result[-1].reason == "not_dead" and len(result) == 2
    assert "stopped at step 2 of 3: reprocess mail j_c" in out
    assert not conn.client.hexists("emq:{mail}:meta", "paused")   # step 3 never ran


def test_cell_magic_error_names_the_step(ip, conn):
    magics.SESSION.conn = conn
    with pytest.raises(UsageProblem, match=r"step 2 \(drain\)"):
        ip.run_cell_magic("emq", "", "pause mail\ndrain mail --budget -1\n")
