"""Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more,
data written by other nodes never breaks a tool, secrets stay out of the record.

Each test is named after the behaviour it holds and runs on both backends where a
server is involved (the `conn` fixture: embedded fakeredis and a real Valkey)."""

from __future__ import annotations

import pytest
from helpers import dump, notebook_html

from emq_notebook import jobs, magics
from emq_notebook.errors import UsageProblem

Q = "mailq"
K = f"emq:{{{Q}}}:"


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


# -- 6. bytes that are not UTF-8 read and show as \xNN, frames built from them included --

BAD = b"SMTP 550 \xff\xfe mailbox 9"


def with_a_foreign_error(conn) -> list[str]:
    """Ten SMTP dead letters, the last one's last_error written by another node as bytes
    that are not UTF-8."""
    ids = smtp_dead(conn)
    conn.client.execute_command("HSET", K + "job:" + ids[-1], "last_error", BAD)
    return ids


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
    assert conn.client.zcard(K + "dead") == 0


def test_a_runbook_chooses_among_undecodable_errors(conn):
    from emq_notebook import runbook, triage

    ids = with_a_foreign_error(conn)
    dead = triage.find(conn, Q, state="dead")
    assert runbook.choose(dead, None).empty
    chosen = runbook.choose(dead, "SMTP*")
    assert list(chosen.index) == ids
    assert chosen.loc["j_09", "signature"] == triage.signature(BAD.decode("utf-8", "surrogateescape"))
    # the text stays as read: written back, it is the same bytes
    assert chosen.loc["j_09", "last_error"].encode("utf-8", "surrogateescape") == BAD
    assert list(runbook.choose(dead, "SMTP <num> mailbox*").index) == ids[:-1]


def test_a_frame_with_undecodable_text_shows_escapes_in_ipython(ip, conn):
    from emq_notebook import triage

    with_a_foreign_error(conn)
    found = triage.find(conn, Q)
    for value in (found[["last_error"]], triage.errors(conn, Q)[["count"]], found["last_error"]):
        shown = ip.display_formatter.formatters["text/plain"](value)
        assert "\\xff\\xfe" in shown and "\udcff" not in shown
    html = notebook_html(ip, found)
    assert "\\xff\\xfe" in html and "\udcff" not in html


# -- 14. small edges: a failing str(), names read as options, a NUL shown ------------------


class Unshowable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Mute(Exception):
    def __str__(self) -> str:
        raise ValueError("not even a message")


class Muter:
    def __str__(self) -> str:
        raise Mute()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (Unshowable(), "{{x}}: cannot be written as text: RuntimeError: no text for you"),
        (Muter(), "{{x}}: cannot be written as text: Mute: (its message cannot be shown)"),
        ({"a": {1, 2}}, "{{x}}: not JSON: TypeError: Object of type set is not JSON serializable"),
    ],
)
def test_a_placeholder_whose_text_fails_is_one_usage_line(ip, value, said):
    from emq_notebook import grammar

    with pytest.raises(UsageProblem) as caught:
        grammar.parse("enqueue mailq {{x}}", {"x": value})
    assert str(caught.value) == said
    assert caught.value._render_traceback_() == [f"UsageProblem: {said}"]
    ip.user_ns["x"] = value
    result = ip.run_cell("%emq enqueue mailq {{x}}")
    assert isinstance(result.error_in_exec, UsageProblem)


@pytest.mark.parametrize("name", ["-h", "--yes", "--help", "-1", "-"])
def test_a_name_read_as_an_option_is_refused_by_the_gate(name):
    from emq_notebook.errors import InvalidName
    from emq_notebook.keyspace import check_name, job_key, queue_key

    for call in (lambda: check_name(name), lambda: queue_key(name, "pending"), lambda: job_key(Q, name)):
        with pytest.raises(InvalidName, match="starts with -"):
            call()
    assert check_name("a-b") == "a-b" and check_name("x-") == "x-"


def test_a_queue_named_like_an_option_is_neither_listed_nor_completed(ip, conn):
    from IPython.core.completer import provisionalcompleter

    from emq_notebook import frames

    jobs.enqueue(conn, "mailers", "{}")
    for name in ("-h", "--yes"):
        conn.client.hset(f"emq:{{{name}}}:meta", "created_by", "another node")
        conn.client.zadd(f"emq:{{{name}}}:pending", {"j_1": 0})
        conn.client.hset(f"emq:{{{name}}}:job:j_1", "payload", "{}")
    assert frames.queues(conn) == ["mailers"]
    magics.SESSION.conn = conn
    matcher = next(m for m in ip.Completer.custom_matchers if m.matcher_identifier == "emq_notebook")
    matcher.completer._cache.clear()
    line = "%emq pause "
    with provisionalcompleter():
        offered = [c.text for c in ip.Completer.completions(line, len(line))]
    assert offered == ["mailers"]


def test_a_nul_in_an_error_shows_escaped_in_the_dead_letter_panel(conn):
    from emq_notebook.widgets import DeadLetterPanel

    smtp_dead(conn, 2)
    conn.client.hset(K + "job:j_01", "last_error", "SMTP\x00 boom\x1b[2J")
    panel = DeadLetterPanel(conn, Q)
    try:
        shown = [*panel.signature.options, *(label for label, _ in panel.select.options)]
        shown += [panel.errors_view.value, panel.summary.value]
        assert not any("\x00" in s or "\x1b" in s for s in shown)
        assert "SMTP\\x00 boom\\x1b[<num>J" in panel.signature.options
        panel.signature.value = "SMTP\\x00 boom\\x1b[<num>J"
        panel.preview_button.click()
        assert panel.previewed == ["j_01"]
    finally:
        panel.close()


# -- 5. the shell writes only to a server it was told of ---------------------------------


def shell(capsys, *argv: str) -> tuple[int, str, str]:
    from emq_notebook import cli

    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


WRITING_LINES = [
    ["pause", "mailers"],
    ["enqueue", "mailers", "{}"],
    ["lane-set", "mailers", "acme", "--pause"],
    ["reprocess", "mailers", "--error", "*SMTP*", "--dry-run"],
    ["--executor", "function", "drain", "mailers", "--yes"],
]


@pytest.mark.parametrize("argv", WRITING_LINES, ids=lambda a: " ".join(a))
def test_a_shell_write_with_no_server_named_is_refused(monkeypatch, capsys, argv):
    import emq_notebook as emq

    monkeypatch.delenv("EMQ_URL", raising=False)
    fake = emq.connect(embedded="fake")
    fake.client.flushall()
    code, out, err = shell(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "no server is named: set EMQ_URL or pass --url" in err
    assert fake.client.keys("*") == []


def test_a_shell_write_on_an_explicit_embedded_server_goes_ahead(monkeypatch, capsys):
    monkeypatch.delenv("EMQ_URL", raising=False)
    code, out, _ = shell(capsys, "--embedded", "fake", "pause", "mailers")
    assert code == 0 and "paused mailers" in out


def test_a_shell_write_goes_to_the_server_emq_url_names(monkeypatch, capsys, valkey):
    import redis

    url = f"redis://127.0.0.1:{valkey.port}/0"
    real = redis.Redis.from_url(url, decode_responses=True)
    real.flushall()
    monkeypatch.setenv("EMQ_URL", url)
    assert shell(capsys, "pause", "mailers")[0] == 0
    assert real.hget("emq:{mailers}:meta", "paused") is not None
    monkeypatch.delenv("EMQ_URL")
    assert shell(capsys, "--url", url, "resume", "mailers")[0] == 0
    assert real.hget("emq:{mailers}:meta", "paused") is None


def test_a_shell_read_with_no_server_named_reads_only_a_server_asked_for(monkeypatch, capsys):
    """(#41.3: a read of a throwaway server said "(no rows)" as if it were the one meant.)"""
    monkeypatch.delenv("EMQ_URL", raising=False)
    code, out, err = shell(capsys, "queues")
    assert (code, out) == (2, "") and "queues reads, and no server is named" in err
    assert shell(capsys, "--embedded", "fake", "queues")[0] == 0


@pytest.mark.parametrize("argv", [[], ["-h"], ["--help"], ["help"]], ids=repr)
def test_the_shell_help_describes_the_shell(capsys, argv):
    code, out, err = shell(capsys, *argv)
    assert (code, err) == (0, "")
    for option in ("--url URL", "--embedded", "--executor", "--read-only", "--env ENV", "EMQ_URL"):
        assert option in out, option
    assert "exit status: 0 done, 1 refused" in out and "2 any error (one line on stderr)" in out
    assert "obliterate QUEUE" in out
    assert "{{name}}" not in out and "%emq" not in out


def test_one_log_line_is_said_in_the_singular(emq_line, conn, capsys):
    jobs.enqueue(conn, Q, "{}", id="j_1")
    emq_line("log mailq j_1 first")
    assert "logged: mailq j_1 has 1 log line\n" in capsys.readouterr().out
    emq_line("log mailq j_1 second")
    assert "logged: mailq j_1 has 2 log lines\n" in capsys.readouterr().out


# -- 4. a read-only session never loads or replaces the function library -----------------


def read_only_function(conn):
    import emq_notebook as emq

    url = None if conn.label == "embedded fakeredis" else conn.label
    if url is None:
        return emq.connect(embedded="fake", read_only=True, executor="function")
    return emq.connect(url, read_only=True, executor="function")


def libraries(conn) -> list:
    return conn.client.function_list(withcode=True)


def every_read(ro) -> None:
    """What a read-only session does with the queue: find, errors, a snapshot, counts, health."""
    from emq_notebook import frames, triage

    assert list(triage.find(ro, Q).index) == ["j_00", "j_01"]
    assert triage.errors(ro, Q)["count"].sum() == 2
    assert len(frames.snapshot(ro, Q)) == 2
    assert frames.counts(ro, [Q]).loc[Q, "dead"] == 2
    assert len(frames.health(ro, [Q])) == 1


def test_a_read_only_session_reads_beside_another_library_version_and_keeps_it(conn):
    from emq_notebook import scripts

    smtp_dead(conn, 2)
    version, body = scripts.library()
    conn.client.function_load(body.replace(version, "0ld0ld0ld0ld"), replace=True)
    before = libraries(conn)
    every_read(read_only_function(conn))
    assert libraries(conn) == before
    assert conn.client.fcall_ro("emq_version", 0) == "0ld0ld0ld0ld"


def test_a_read_only_session_reads_where_no_library_is_loaded_and_loads_none(conn):
    smtp_dead(conn, 2)
    conn.client.function_flush()
    every_read(read_only_function(conn))
    assert libraries(conn) == []


def test_a_read_only_session_reads_on_after_the_library_is_flushed_and_loads_none(conn):
    smtp_dead(conn, 2)
    from emq_notebook import triage

    ro = read_only_function(conn)
    triage.find(conn.with_executor("function"), Q)  # a writing session loads the library
    assert len(triage.find(ro, Q)) == 2  # through FCALL_RO
    conn.client.function_flush()
    every_read(ro)
    assert libraries(conn) == []


def test_a_read_only_session_refuses_to_load_the_library_in_one_line(conn):
    from emq_notebook.errors import ReadOnly

    conn.client.function_flush()
    ro = read_only_function(conn)
    with pytest.raises(ReadOnly, match="FUNCTION LOAD of the emq_notebook library") as caught:
        ro._ensure_library()
    assert len(caught.value._render_traceback_()) == 1
    assert libraries(conn) == []


# -- 3. the DeadLetterPanel asks before a bulk write, and honours the rate ------------------


@pytest.fixture
def panel_on(conn):
    """A DeadLetterPanel on the same server, its connection labelled env production,
    asking above 2 jobs (`confirm_above`, as `%emq reprocess --all-dead` asks for --yes)."""
    import emq_notebook as emq
    from emq_notebook.widgets import DeadLetterPanel

    if conn.label == "embedded fakeredis":
        labelled = emq.connect(embedded="fake", env="production")
    else:
        labelled = emq.connect(conn.label, env="production")
    made = []

    def make():
        made.append(DeadLetterPanel(labelled, Q, confirm_above=2))
        return made[-1]

    yield make
    for panel in made:
        panel.close()


def test_reprocess_all_asks_the_count_and_the_connection_and_moves_nothing_before_confirm(conn, panel_on):
    smtp_dead(conn, 6)
    panel = panel_on()
    before = dump(conn)
    panel.reprocess_all_button.click()
    assert dump(conn) == before
    asked = panel.confirmation.text.value
    assert "Reprocess <b>6</b> dead jobs of mailq?" in asked
    assert "env production · connected: " in asked and conn.label.split("/")[0] in asked
    assert "As fast as it goes" in asked
    panel.confirmation.cancel_button.click()
    assert dump(conn) == before and panel.confirmation.text.value == ""
    assert panel.status_text == "cancelled; nothing done"
    panel.reprocess_all_button.click()
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "reprocessed 6 dead jobs"
    assert conn.client.zcard(K + "dead") == 0 and conn.client.zcard(K + "pending") == 6


def test_reprocess_all_moves_at_the_rate_it_stated(conn, panel_on, monkeypatch):
    from emq_notebook import admin

    calls = []
    real = admin.reprocess_dead

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(admin, "reprocess_dead", spy)
    smtp_dead(conn, 4)
    panel = panel_on()
    panel.rate.value = 400
    panel.reprocess_all_button.click()
    assert "At most 400 a second." in panel.confirmation.text.value
    panel.rate.value = 0  # changed after the question: the question's rate holds
    panel.confirmation.confirm_button.click()
    assert [(c["rate"], c["limit"]) for c in calls] == [(400, 4)]
    assert panel.status_text == "reprocessed 4 dead jobs" and conn.client.zcard(K + "dead") == 0


def test_reprocess_all_asks_again_when_more_died_after_the_question(conn, panel_on):
    smtp_dead(conn, 3)
    panel = panel_on()
    panel.reprocess_all_button.click()
    kill(conn, "j_late", "SMTP 550 mailbox 9 unavailable")
    before = dump(conn)
    panel.confirmation.confirm_button.click()
    assert dump(conn) == before
    assert panel.status_text == "not done: 4 jobs now; confirm again"
    assert "The count changed (the question said 3). Reprocess <b>4</b>" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert conn.client.zcard(K + "dead") == 0


def test_reprocess_all_moves_what_is_left_when_fewer_remain_than_it_stated(conn, panel_on):
    ids = smtp_dead(conn, 3)
    panel = panel_on()
    panel.reprocess_all_button.click()
    jobs.reprocess_job(conn, Q, ids[0])  # another operator, meanwhile
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "reprocessed 2 dead jobs"
    assert conn.client.zcard(K + "dead") == 0


def test_remove_previewed_asks_the_count_and_removes_nothing_before_confirm(conn, panel_on):
    ids = smtp_dead(conn, 4)
    panel = panel_on()
    panel.error_glob.value = "SMTP 550 mailbox [12] *"
    panel.preview_button.click()
    assert panel.previewed == ids[1:3]
    before = dump(conn)
    panel.remove_preview_button.click()
    assert dump(conn) == before
    assert "Remove <b>2</b> previewed dead jobs of mailq?" in panel.confirmation.text.value
    assert "env production" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove previewed: 2 removed"
    assert conn.client.zrange(K + "dead", 0, -1) == [ids[0], ids[3]]
    assert panel.previewed == [] and panel.remove_preview_button.disabled


def test_a_new_preview_closes_the_open_question(conn, panel_on):
    smtp_dead(conn, 2)
    panel = panel_on()
    panel.preview_button.click()
    panel.remove_preview_button.click()
    panel.preview_button.click()
    assert panel.confirmation.asked is None
    before = dump(conn)
    panel.confirmation.confirm_button.click()
    assert dump(conn) == before


def test_a_read_only_panel_greys_the_confirm_button_out(conn):
    import emq_notebook as emq
    from emq_notebook.widgets import DeadLetterPanel

    smtp_dead(conn, 2)
    url = None if conn.label == "embedded fakeredis" else conn.label
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True)
    panel = DeadLetterPanel(ro, Q)
    try:
        assert panel.confirmation.confirm_button.disabled
    finally:
        panel.close()


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
        runbook.start("10-triage-dead-letters", url, Q, False)
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

    jobs.enqueue(emq.connect(f"redis://127.0.0.1:{valkey.port}/0"), Q, "{}")
    monkeypatch.delenv("EMQ_PASSWORD", raising=False)
    with pytest.raises(WireError, match="authentication failed|NOAUTH|WRONGPASS|NOPERM"):
        runbook.start("11-runaway-producer", oncall, Q, False)
    monkeypatch.setenv("EMQ_PASSWORD", SECRET)
    rb = runbook.start("11-runaway-producer", oncall, Q, False)
    assert rb.conn.client.acl_whoami() == "oncall"
    # EMQ_URL from the environment is no parameter: it is not written in any record
    monkeypatch.setenv("EMQ_URL", oncall)
    assert runbook.start("11-runaway-producer", None, Q, False).conn.client.acl_whoami() == "oncall"
    assert SECRET not in capsys.readouterr().out


# -- 15. the suite's own warnings show: only known third-party ones are filtered -------------


def test_the_warning_filters_hide_third_party_modules_only():
    import tomllib
    import warnings
    from pathlib import Path

    from _pytest.config import parse_warning_filter

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    filters = tomllib.loads(pyproject.read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    parsed = [parse_warning_filter(f, escape=False) for f in filters]
    assert parsed and all(action == "ignore" and module for action, _, _, module, _ in parsed)

    def shown(category: type[Warning], module: str) -> bool:
        with warnings.catch_warnings(record=True) as seen:
            warnings.resetwarnings()
            warnings.simplefilter("always")
            for action, message, cat, mod, lineno in reversed(parsed):
                warnings.filterwarnings(action, message, cat, mod, lineno)
            warnings.warn_explicit("a warning", category, "x.py", 1, module=module)
        return bool(seen)

    for category in (DeprecationWarning, PendingDeprecationWarning, UserWarning):
        for ours in ("emq_notebook.frames", "emq_notebook.widgets.base", "test_fenced_round2"):
            assert shown(category, ours), (category, ours)
    assert not shown(DeprecationWarning, "bqscales.traits")
    assert not shown(DeprecationWarning, "ipydatagrid.datagrid")
    assert not shown(PendingDeprecationWarning, "IPython.core.completer")
    assert shown(UserWarning, "ipydatagrid.datagrid")  # by category too: a new kind still shows


def test_the_demo_tells_its_story_to_a_newcomer(conn, monkeypatch):
    from emq_notebook import demo

    if conn.label == "embedded fakeredis":
        monkeypatch.delenv("EMQ_URL", raising=False)
    else:
        monkeypatch.setenv("EMQ_URL", conn.label)
    lines: list[str] = []
    assert demo.main(lines.append) == 0
    story = "\n".join(lines)
    for said in (
        "queued 4 mails on mailers, one attempt each",
        "the mailer has a bug: it cannot send to an address without an @",
        "the worker took 4 jobs: 2 delivered, 2 failed and are dead",
        "mended the payload of j_mail1: bo.example.com -> bo@example.com",
        "mended the payload of j_mail3: di.example.com -> di@example.com",
        "reprocessed 2 dead jobs",
        "j_mail0 was delivered: a completed job leaves no row",
        "refused: reprocess mailers j_mail0 — gone",
        "resumed mailers: the worker took 2 jobs, 2 delivered, 0 dead",
        "footprint now 0 keys",
    ):
        assert said in story, said
    order = ["2 failed", "mended", "reprocessed", "j_mail0 — gone", "footprint"]
    assert [story.index(s) for s in order] == sorted(story.index(s) for s in order)
    assert ("gone when it exits" in lines[0]) == (conn.label == "embedded fakeredis")
