"""%emq in an in-process IPython shell, on both backends."""

import re

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
    jid = emq('enqueue mail \'{"to": "a"}\' --id j_1')
    assert jid == "j_1"
    assert emq("pause mail") is None
    assert capsys.readouterr().out.strip() == "paused mail: claims answer empty; the backlog is untouched"
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


def test_big_obliterate_asks_for_yes(emq, conn, confirm_above_3):
    for _ in range(5):
        jobs.enqueue(conn, "mail", "{}")
    emq("pause mail")
    with pytest.raises(
        UsageProblem,
        match="obliterate mail would destroy 5 jobs on default "
        r"\(.*, env not set\): add --yes",
    ):
        emq("obliterate mail")
    assert conn.client.zcard("emq:{mail}:pending") == 5
    emq("obliterate mail --yes")
    assert conn.client.zcard("emq:{mail}:pending") == 0


def test_big_drain_asks_for_yes_stating_the_count(emq, conn, confirm_above_3):
    from helpers import dump

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


@pytest.mark.parametrize(
    "line,error",
    [
        ("frobnicate mail", UsageProblem),
        ("drain", UsageProblem),
        ("drain mail --budget 0", UsageProblem),
        ("drain mail --bogus", UsageProblem),
        ("jobs mail --state zombie", UsageProblem),
        ("enqueue mail '{}' --delay 5 parsecs", UsageProblem),
        ("enqueue mail '{}' --delay fortnight", UsageProblem),
        ("data mail j_1 '{not json'", BadInput),
        ("pause bad:name", InvalidName),
        ("reprocess mail", UsageProblem),
        ("enqueue mail '{' ", BadInput),
        ("pause 'unclosed", UsageProblem),
    ],
)
def test_errors_are_emq_errors_with_one_line(emq, conn, line, error):
    from helpers import dump

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
    result = ip.run_cell_magic(
        "emq", "", "enqueue mail '{}' --id j_c\n# a comment\nreprocess mail j_c\npause mail\n"
    )
    out = capsys.readouterr().out
    assert result[0] == "j_c" and result[-1].reason == "not_dead" and len(result) == 2
    assert "stopped at step 2 of 3: reprocess mail j_c" in out
    assert not conn.client.hexists("emq:{mail}:meta", "paused")  # step 3 never ran


def test_cell_magic_error_names_the_step(ip, conn):
    magics.SESSION.conn = conn
    with pytest.raises(UsageProblem, match=r"step 2 \(drain\)"):
        ip.run_cell_magic("emq", "", "pause mail\ndrain mail --budget -1\n")


# -- literal lines and {{name}} (#15.1) ----------------------------------------------


def test_a_line_is_taken_literally(ip, emq, conn):
    ip.user_ns.update(price=5, y="EXPANDED", x="NO")
    ip.run_cell('%emq enqueue mail \'{"cost": "$price", "a": {"b": "{y}"}}\' --id j_1')
    assert conn.client.hget("emq:{mail}:job:j_1", "payload") == '{"cost": "$price", "a": {"b": "{y}"}}'
    ip.run_cell("%emq log mail j_1 cost $price {x} $$ {{")
    assert jobs.get_job_logs(conn, "mail", "j_1") == ["cost $price {x} $$ {{"]
    ip.run_cell("%%emq\nlog mail j_1 in a cell: $price {y}\n")
    assert jobs.get_job_logs(conn, "mail", "j_1")[-1] == "in a cell: $price {y}"


def test_a_name_in_double_braces_is_the_variable(ip, emq, conn):
    ip.user_ns.update(payload={"to": "ana@example.org", "n": [1, 2]}, jid="j_sub", note="a $b {c}", n=7)
    ip.run_cell("%emq enqueue mail {{payload}} --id {{jid}}")
    assert conn.client.hget("emq:{mail}:job:j_sub", "payload") == '{"to": "ana@example.org", "n": [1, 2]}'
    ip.run_cell("%emq log mail j_sub {{note}} and {{n}}")
    assert jobs.get_job_logs(conn, "mail", "j_sub") == ["a $b {c} and 7"]
    from helpers import dump

    before = dump(conn)
    with pytest.raises(UsageProblem, match="no variable 'nope'") as info:
        emq("data mail j_sub {{nope}}")
    assert len(info.value._render_traceback_()) == 1 and dump(conn) == before


# -- help (#15.2) and free text (#22.10) ----------------------------------------------


@pytest.mark.parametrize("line", ["", "-h", "--help", "help", "   # only a comment"])
def test_every_way_to_ask_shows_the_grammar(ip, capsys, line):
    assert ip.run_line_magic("emq", line) is None
    out = capsys.readouterr().out
    assert out.startswith("%emq VERB QUEUE") and "obliterate QUEUE" in out and "connections" in out


def test_the_question_mark_shows_the_grammar(ip):
    assert "obliterate QUEUE" in ip.find_line_magic("emq").__doc__


@pytest.mark.parametrize("line", ["drain -h", "drain mail --help", "help drain", "drain mail --budget 5 -h"])
def test_one_verbs_help(ip, capsys, line):
    ip.run_line_magic("emq", line)
    out = capsys.readouterr().out
    assert out.startswith("usage: %emq drain QUEUE") and "--include-schedule" in out


def test_help_words_in_free_text_and_payloads_are_data(emq, conn, capsys):
    from helpers import dump

    emq("enqueue mail '{}' --id j_1")
    emq("log mail j_1 the flag is --help and -h")
    emq("log mail j_1 trimmed --keep 1")
    assert emq("logs mail j_1") == ["trimmed"]
    emq("log mail j_1 '--keep' is a word here")
    assert emq("logs mail j_1")[-1] == "--keep is a word here"
    capsys.readouterr()
    before = dump(conn)
    for payload in ("-h", "'-h'", "--help", '"--help"'):
        with pytest.raises(BadInput, match="malformed JSON"):
            emq(f"data mail j_1 {payload}")
    assert dump(conn) == before and "usage:" not in capsys.readouterr().out
    emq("claim mail")
    emq("fail mail j_1 exit --help")
    assert emq("job mail j_1")["last_error"] == "exit --help"


def test_a_cell_stops_at_a_line_that_did_not_run(ip, conn, capsys):
    magics.SESSION.conn = conn
    result = ip.run_cell_magic("emq", "", "pause mail\ndrain mail -h\nresume mail\n")
    out = capsys.readouterr().out
    assert "usage: %emq drain" in out and "stopped at step 2 of 3: drain mail -h" in out
    assert result == [None, None]
    assert conn.client.hexists("emq:{mail}:meta", "paused")  # step 3 never ran


def test_a_cell_returns_its_lines_results(ip, conn):
    magics.SESSION.conn = conn
    result = ip.run_cell_magic(
        "emq", "", "enqueue mail '{}' --id j_1\n\n# why\nstatus mail\nlogs mail j_1  # none yet\n"
    )
    assert isinstance(result, magics.Steps) and result[0] == "j_1" and result[2] == []
    assert isinstance(result[1], pd.DataFrame) and result[1].loc["mail", "pending"] == 1


# -- %config and limits (#15.3) -------------------------------------------------------


@pytest.fixture
def limit_5(ip):
    ip.run_line_magic("config", "EMQMagics.default_limit = 5")
    yield
    ip.run_line_magic("config", "EMQMagics.default_limit = 1000")


def test_config_default_limit_caps_a_listing_and_says_so(emq, conn, capsys, limit_5):
    assert magics.SESSION.settings.default_limit == 5
    for i in range(12):
        jobs.enqueue(conn, "mail", "{}", id=f"j_{i:02}", group="acme" if i % 3 == 0 else None)
    capsys.readouterr()
    frame = emq("jobs mail")
    assert len(frame) == 5 and capsys.readouterr().out == "showing 5 of 12; --limit 0 for all\n"
    assert len(emq("jobs mail --limit 0")) == 12 and capsys.readouterr().out == ""
    assert len(emq("jobs mail --limit 3")) == 3
    assert "showing 3 of 12" in capsys.readouterr().out
    assert len(emq("jobs mail --limit 20")) == 12 and capsys.readouterr().out == ""
    assert len(emq("jobs mail --state dead")) == 0


def test_config_values_are_checked(ip):
    from traitlets import TraitError

    from emq_notebook.magics import EMQMagics

    magics_ = next(c for c in ip.configurables if isinstance(c, EMQMagics))
    for name, bad in (("budget", 0), ("confirm_above", -1), ("refresh_s", 0.0), ("executor", "lua")):
        with pytest.raises((TraitError, EMQError)):
            setattr(magics_, name, bad)
    assert magics.SESSION.settings.budget == 1000 and magics.SESSION.settings.executor == "script"


def test_config_budget_and_executor_are_the_defaults(ip, emq, conn, capsys):
    from emq_notebook import admin

    calls = []
    real = admin.drain
    ip.run_line_magic("config", "EMQMagics.budget = 2")
    ip.run_line_magic("config", "EMQMagics.executor = 'function'")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(admin, "drain", lambda c, q, **kw: calls.append(kw["budget"]) or real(c, q, **kw))
            emq("drain mail")
        assert calls == [2]
        emq("connect --embedded fake --name fn")
        assert magics.SESSION.conn.executor == "function"
    finally:
        ip.run_line_magic("config", "EMQMagics.budget = 1000")
        ip.run_line_magic("config", "EMQMagics.executor = 'script'")


# -- named connections (#15.5) ----------------------------------------------------------


def test_named_connections(ip, valkey, capsys):
    import emq_notebook
    from emq_notebook.errors import ReadOnly

    r = ip.run_line_magic
    url = f"redis://default:pw-hidden@127.0.0.1:{valkey.port}/0"
    r("emq", "connect --embedded fake --name staging --env staging")
    r("emq", f"connect {url} --name prod --env production --read-only")
    out = capsys.readouterr().out
    assert "as staging" in out and "env=production" in out and "read-only" in out and "pw-hidden" not in out
    table = r("emq", "connections")
    assert {"staging", "prod"} <= set(table.index)
    assert table.loc["prod", "current"] and not table.loc["staging", "current"]
    assert table.loc["prod", "env"] == "production" and table.loc["prod", "read_only"]
    assert "pw-hidden" not in table.to_string() and "***" in table.loc["prod", "label"]
    assert emq_notebook.current() is emq_notebook.current("prod") is magics.SESSION.conn
    with pytest.raises(ReadOnly):
        r("emq", "pause mail")
    r("emq", "use staging")
    assert "using staging" in capsys.readouterr().out
    assert emq_notebook.current().env == "staging" and emq_notebook.current("prod").read_only
    with pytest.raises(UsageProblem, match="no connection named 'qa'"):
        r("emq", "use qa")
    with pytest.raises(UsageProblem, match="no connection named 'qa'"):
        emq_notebook.current("qa")


def test_a_confirmation_names_the_connection_and_its_env(ip, conn, confirm_above_3):
    target = "--embedded fake" if conn.label == "embedded fakeredis" else conn.label
    ip.run_line_magic("emq", f"connect {target} --name ops --env production")
    for _ in range(5):
        jobs.enqueue(magics.SESSION.conn, "mail", "{}")
    label = re.escape(conn.label)
    with pytest.raises(
        UsageProblem,
        match=rf"drain mail would destroy 5 jobs on ops \({label}, "
        r"env production\): add --yes",
    ):
        ip.run_line_magic("emq", "drain mail")


# -- one confirmation gate (#22.8) and small defects (#22.17) --------------------------


def test_every_destructive_path_is_gated(emq, conn, confirm_above_3):
    from helpers import dump

    for _ in range(5):
        jobs.enqueue(conn, "mail", "{}", max_attempts=1)
    emq("pause mail")
    before = dump(conn)
    for line in (
        "obliterate mail --step --budget 1000",
        "obliterate mail --force --step",
        "obliterate mail",
        "drain mail",
        "drain mail --include-schedule --budget 1",
    ):
        with pytest.raises(UsageProblem, match="would destroy 5 jobs on default .*: add --yes"):
            emq(line)
    assert dump(conn) == before
    emq("resume mail")
    for _ in range(5):
        got = jobs.claim(conn, "mail", 1000)
        jobs.fail(conn, "mail", got[0], "boom")
    before = dump(conn)
    with pytest.raises(UsageProblem, match="would reprocess 5 jobs"):
        emq("reprocess mail --all-dead")
    assert emq("reprocess mail --all-dead --limit 3") is None  # 3 is not above the threshold
    assert conn.client.zcard("emq:{mail}:dead") == 2
    emq("pause mail")
    assert emq("obliterate mail --step --budget 1000 --yes") is None
    assert conn.client.keys("emq:{mail}:*") == []


def test_obliterate_on_a_running_queue_draws_no_progress_bar(emq, conn, monkeypatch, capsys):
    drawn = []
    monkeypatch.setattr(
        magics.SESSION, "progress", lambda label, total: drawn.append(label) or (lambda done: None)
    )
    jobs.enqueue(conn, "mail", "{}")
    result = emq("obliterate mail")
    assert result.reason == "not_paused" and drawn == []
    assert capsys.readouterr().out == "refused: obliterate mail — not_paused\n"
    jobs.claim(conn, "mail", 60_000)
    emq("pause mail")
    assert emq("obliterate mail").reason == "active" and drawn == []
    emq("obliterate mail --force")
    assert drawn == ["obliterate mail"]


def test_an_unknown_lane_says_so(emq, conn, capsys):
    assert emq("lane mail unknown") is None
    assert capsys.readouterr().out == "no lane unknown in mail\n"
    jobs.enqueue(conn, "mail", "{}", group="acme")
    assert emq("lane mail acme")["pending"] == 1
    assert emq("lane mail other") is None
    assert capsys.readouterr().out == "no lane other in mail (lanes: acme)\n"


# -- the live views' verbs (verbs/panels.py): `watch --seconds` is checked before a view is built


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "-inf", "1e9", "soon"])
def test_watch_seconds_must_be_positive(emq, value):
    with pytest.raises(UsageProblem, match="argument --seconds"):
        emq(f"watch mail --seconds {value}")


# -- display of a refusal (#15.6) -------------------------------------------------------


def test_a_refusal_shows_once_in_its_cell_and_again_later(ip, conn, capfd):
    magics.SESSION.conn = conn
    line = "refused: reprocess mail j_live — not_dead"
    jobs.enqueue(conn, "mail", "{}", id="j_live")
    capfd.readouterr()
    ip.run_cell("%emq reprocess mail j_live", store_history=True)
    assert capfd.readouterr().out.count(line) == 1
    ip.run_cell("r = %emq reprocess mail j_live", store_history=True)
    assert capfd.readouterr().out.count(line) == 1
    ip.run_cell("r", store_history=True)  # a later cell: shown again
    assert capfd.readouterr().out.count(line) == 1
    ip.run_cell("display(r)", store_history=True)
    assert capfd.readouterr().out.count(line) == 1
    refusal = ip.user_ns["r"]
    data, _ = refusal._repr_mimebundle_()
    assert data == {"text/plain": line, "text/html": f"<pre>{line}</pre>"}
    shown, _ = ip.display_formatter.format(NotDead("reprocess", "mail", "j_<x>"))
    assert shown == {}  # published by the extension, not a bare repr


def test_a_url_and_embedded_together_are_refused_by_the_magic(emq, conn, valkey):
    """`%emq connect URL --embedded fake` is one usage line; the current session and
    the server named by the URL are untouched."""
    before = magics.SESSION.conn
    with pytest.raises(UsageProblem, match="not both"):
        emq(f"connect redis://u:pw-Kq7@127.0.0.1:{valkey.port}/0 --embedded fake")
    assert magics.SESSION.conn is before


def test_a_four_megabyte_payload_goes_through_the_magic(emq, conn):
    """The splitter is one regex scan: a quoted payload is one run whatever its size,
    so 4 MB of JSON (about defaults.MAX_PAYLOAD) reaches the row whole (the old
    splitter took 17 s for 1 MB)."""
    from emq_notebook import grammar

    big = '{"k": "' + "x" * 4_000_000 + '"}'
    assert len(grammar.tokens(f"'{big}'")) == 1
    emq("enqueue mail '{}' --id j_1")
    emq(f"data mail j_1 '{big}'")
    assert conn.client.hstrlen("emq:{mail}:job:j_1", "payload") == len(big)
    words = " ".join(f'w{i} "q {i}"' for i in range(100_000))
    emq(f"log mail j_1 {words}")
    assert jobs.get_job_logs(conn, "mail", "j_1") == [" ".join(f"w{i} q {i}" for i in range(100_000))]


def test_an_error_line_holds_no_password_and_no_line_break_of_a_value_given(ip, emq, conn):
    """A value the magic's error quotes (an env, a reason, a path) given by a notebook
    variable holding newlines and URLs with passwords: the line, as IPython shows it,
    is one line with no password, as the shell's. (The hostile pass of #41: the
    magic's errors were never scrubbed: `env is a short printable word, not
    'prod\\nredis://admin:pw-1@h/0'` showed the password; a path shows its `//` as
    `/`, where only the secrets of what was typed can take it out.)"""
    hostile = "prod\nredis://admin:pw-M1@h/0 and rediss://u:pw-M2@h:6380/1\u2028\r"
    ip.user_ns["hostile"] = hostile
    ip.user_ns["path"] = f"/no-dir/{hostile}.jsonl"
    lines = [
        "reason {{hostile}}",
        f"connect {conn.label} --env {{{{hostile}}}} --name other",
        "import mail --from {{path}}",
        "pause mail --reason 'to redis://admin:pw-M3@h/0' --budget {{hostile}}",
    ]
    for line in lines:
        with pytest.raises(EMQError) as info:
            emq(line)
        shown = "\n".join(info.value._render_traceback_())
        assert "\n" not in shown and "\u2028" not in shown and "\r" not in shown, (line, shown)
        assert [s for s in ("pw-M1", "pw-M2", "pw-M3") if s in shown] == [], (line, shown)
    assert magics.SESSION.conn is conn
