"""The `emq` shell command: same grammar, exit 1 on a refusal, 2 on an error."""

import re
import shutil
import subprocess
import sys

import pytest

import emq_notebook as emq
from emq_notebook import admin, jobs

EMQ = (
    [
        shutil.which("emq") or "",
    ]
    if shutil.which("emq")
    else [sys.executable, "-m", "emq_notebook.cli"]
)


def run(*args, url):
    return subprocess.run([*EMQ, "--url", url, *args], capture_output=True, text=True, timeout=60)


# Each shell command is a fresh interpreter importing the package (seconds on a busy
# machine), so a test's set-up goes through the Python API (the shell's own enqueue
# and pause are tested in test_a_shell_session), and runs that do not depend on each
# other start together.
def run_together(*commands, **popen):
    """Run each argv side by side; their CompletedProcess, in order."""
    started = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        for argv in commands
    ]
    try:
        outputs = [p.communicate(timeout=60) for p in started]
        return [
            subprocess.CompletedProcess(p.args, p.returncode, *out)
            for p, out in zip(started, outputs, strict=True)
        ]
    finally:
        for p in started:
            p.kill()  # only one still running (a timeout) is signalled


@pytest.fixture
def url(valkey):
    import redis

    redis.Redis(port=valkey.port).flushall()
    return f"redis://127.0.0.1:{valkey.port}/0"


def test_a_shell_session(url):
    assert run("enqueue", "mail", '{"to": "a"}', "--id", "j_1", url=url).stdout.strip() == "j_1"
    out = run("pause", "mail", url=url)
    assert out.returncode == 0 and "paused mail" in out.stdout
    status = run("status", "mail", url=url)
    assert "pending" in status.stdout and "True" in status.stdout
    refused = run("reprocess", "mail", "j_1", url=url)
    assert refused.returncode == 1
    assert refused.stdout.strip() == "refused: reprocess mail j_1 — not_dead"
    frame = run("jobs", "mail", url=url)
    assert "j_1" in frame.stdout and '{"to": "a"}' in frame.stdout


def test_usage_and_wire_errors_exit_2(url):
    bad, gone = run_together(
        [*EMQ, "--url", url, "frobnicate", "mail"],
        [*EMQ, "--url", "redis://:pw-secret@127.0.0.1:1/0", "pause", "mail"],
    )
    assert bad.returncode == 2 and "unknown verb 'frobnicate'" in bad.stderr
    assert gone.returncode == 2 and "WireError" in gone.stderr and "pw-secret" not in gone.stderr


def test_help_needs_no_server():
    out = subprocess.run([*EMQ, "help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "obliterate QUEUE" in out.stdout


def test_the_shell_reads_pyproject_and_gates_every_destructive_call(url, tmp_path):
    import redis

    (tmp_path / "pyproject.toml").write_text("[tool.emq_notebook]\nconfirm_above = 3\n")
    r = redis.Redis.from_url(url, decode_responses=True)
    conn = emq.connect(url)
    for i in range(5):
        jobs.enqueue(conn, "mail", "{}", id=f"j_{i}")
    admin.pause(conn, "mail")

    def here(*args):
        return subprocess.run(
            [*EMQ, "--url", url, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )

    # three refusals side by side: any that went ahead would empty the queue under the others
    refused = run_together(
        *(
            [*EMQ, "--url", url, *args]
            for args in (
                ["obliterate", "mail", "--step", "--budget", "1000"],
                ["obliterate", "mail"],
                ["drain", "mail"],
            )
        ),
        cwd=tmp_path,
    )
    for out in refused:
        assert out.returncode == 2 and "would destroy 5 jobs on default" in out.stderr, out
    assert r.zcard("emq:{mail}:pending") == 5
    out = here("obliterate", "mail", "--step", "--budget", "1000", "--yes")
    assert out.returncode == 0 and r.keys("emq:{mail}:*") == []


def test_free_text_help_words_are_data_in_the_shell(url):
    jobs.enqueue(emq.connect(url), "mail", "{}", id="j_1")
    out = run("log", "mail", "j_1", "the", "flag", "is", "--help", url=url)
    assert out.returncode == 0 and "has 1 log line\n" in out.stdout
    assert run("logs", "mail", "j_1", url=url).stdout.strip() == "the flag is --help"
    bad = run("watch", "mail", "--seconds", "-1", url=url)
    assert bad.returncode == 2 and "--seconds" in bad.stderr


def test_foreign_bytes_print_as_escapes_on_a_strict_terminal(url):
    """A row another node wrote with bytes that are not UTF-8: `emq job`, `jobs`, `logs`
    print them as \\xNN (exit 0) even where stdout encodes UTF-8 strictly."""
    import os

    import redis

    r = redis.Redis.from_url(url)
    jobs.enqueue(emq.connect(url), "mail", "{}", id="j_1")
    r.hset("emq:{mail}:job:j_1", mapping={"payload": b'{"x": "\xff"}', "last_error": b"bad \xfe"})
    r.rpush("emq:{mail}:job:j_1:logs", b"line \xfd")
    strict = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    cases = (
        ("job", ['payload: {"x": "\\xff"}', "last_error: bad \\xfe"]),
        ("jobs", ['{"x": "\\xff"}', "bad \\xfe"]),
        ("logs", ["line \\xfd"]),
    )
    # three reads of a keyspace nothing changes meanwhile: run side by side
    outs = run_together(
        *([*EMQ, "--url", url, verb, "mail", *(["j_1"] if verb != "jobs" else [])] for verb, _ in cases),
        env=strict,
    )
    for (verb, shown), out in zip(cases, outs, strict=True):
        assert (out.returncode, out.stderr) == (0, ""), out
        for text in shown:
            assert text in out.stdout, (verb, out.stdout)


def test_a_url_and_embedded_together_are_a_usage_error(url):
    import redis

    out = subprocess.run(
        [*EMQ, "--url", url.replace("redis://", "redis://u:pw-Kq7@"), "--embedded", "fake", "pause", "mail"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "not both" in out.stderr and "pw-Kq7" not in out.stderr
    assert out.stdout == "" and redis.Redis.from_url(url).hget("emq:{mail}:meta", "paused") is None


# -- every error one line, exit 2; no throwaway server unless asked; shell syntax (#41.3) --


def one_line_error(out, *said):
    """`out` failed as an error: exit 2, nothing on stdout, one line on stderr saying each of `said`."""
    assert (out.returncode, out.stdout) == (2, ""), out
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("emq: "), out.stderr
    for text in said:
        assert text in out.stderr, out.stderr
    assert "%emq" not in out.stderr, out.stderr


def test_every_error_is_one_line_and_exit_2(url, tmp_path):
    """A plot saved where it cannot be, a bad choice of the shell's own option, a shell
    option after the verb, a verb's usage error and an unknown verb: each exits 2 with
    one line in the shell's words. Fails before: the plot ended in a traceback with exit
    1, the bad --embedded printed argparse's usage too, the hints said `%emq`."""
    jobs.enqueue(emq.connect(url), "mail", "{}", id="j_1")
    missing = tmp_path / "no-such-dir" / "t.png"
    plot, embedded, after, usage, unknown = run_together(
        [*EMQ, "--url", url, "plot", "mail", "throughput", "--save", str(missing)],
        [*EMQ, "--embedded", "nope", "pause", "mail"],
        [*EMQ, "pause", "mail", "--url", url],
        [*EMQ, "--url", url, "reprocess", "mail"],
        [*EMQ, "frobnicate", "mail"],
    )
    one_line_error(plot, f"BadInput: cannot save the throughput of mail to {missing}: ", "No such file")
    one_line_error(embedded, "invalid choice: 'nope'", "— see emq help")
    one_line_error(after, "unrecognized arguments: --url", "(--url goes before the verb)")
    one_line_error(usage, "reprocess takes a job id or --all-dead", "— see emq reprocess --help")
    one_line_error(unknown, "unknown verb 'frobnicate' — see emq help")
    assert admin.is_paused(emq.connect(url), "mail") is False


def test_an_error_nobody_named_is_one_line_too(monkeypatch, capsys):
    """An exception the toolkit does not raise on purpose (a bug, the system) is one
    line, its first, exit 2, with no password of the command's words in it. Fails
    before: it propagated (a traceback, exit 1)."""
    from emq_notebook import cli

    def broken(session, ns):
        raise RuntimeError("cannot talk to redis://u:pw-Kq7@db:6379/0\n  a second line")

    monkeypatch.setattr(cli.verbs, "execute", broken)
    monkeypatch.setattr(cli, "connect", lambda *a, **kw: emq.connect(embedded="fake"))
    assert cli.main(["--url", "redis://u:pw-Kq7@db:6379/0", "queues"]) == 2
    assert capsys.readouterr() == ("", "emq: RuntimeError: cannot talk to redis://u:***@db:6379/0\n")


def test_a_read_with_no_server_named_is_refused(url):
    """`emq queues`, `emq health` and `emq jobs Q` with neither --url nor EMQ_URL are
    refused as a write is (exit 2, one line); `--embedded fake` asks for the throwaway
    server by name. Fails before: each read an empty server made for it and said
    "(no rows)", exit 0."""
    import os

    bare = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    queues, health, listing, asked = run_together(
        [*EMQ, "queues"],
        [*EMQ, "health"],
        [*EMQ, "jobs", "mail"],
        [*EMQ, "--embedded", "fake", "queues"],
        env=bare,
    )
    for verb, out in (("queues", queues), ("health", health), ("jobs", listing)):
        one_line_error(out, f"{verb} reads, and no server is named: set EMQ_URL or pass --url")
    assert (asked.returncode, asked.stderr) == (0, ""), asked


def test_free_text_after_the_verb_is_the_commands_whatever_it_reads(url):
    """The shell's options come before the verb: `--env production` in a log line is the
    line's. Fails before: the shell took it as its own --env and logged "moved"."""
    jobs.enqueue(emq.connect(url), "mail", "{}", id="j_1")
    out = run("log", "mail", "j_1", "moved", "--env", "production", url=url)
    assert out.returncode == 0, out
    assert jobs.get_job_logs(emq.connect(url), "mail", "j_1") == ["moved --env production"]


def test_help_is_in_shell_syntax():
    """`emq help pause` and `emq pause -h` show the shell's usage line (the server option
    before the verb), with no `%emq` in them. Fails before: `usage: %emq pause QUEUE`."""
    asked, dashed, drain = run_together(
        [*EMQ, "help", "pause"], [*EMQ, "pause", "-h"], [*EMQ, "drain", "--help"]
    )
    for out in (asked, dashed):
        assert (out.returncode, out.stderr) == (0, ""), out
        assert out.stdout.startswith("usage: emq [--url URL] pause QUEUE [--reason TEXT]\n"), out.stdout
        assert "%emq" not in out.stdout and "the server is --url, else EMQ_URL" in out.stdout
    assert asked.stdout == dashed.stdout
    assert "(default: [tool.emq_notebook] budget)" in " ".join(drain.stdout.split())
    assert "%" not in drain.stdout


# -- the hostile pass of #41: typed newlines, line separators and URLs in free text ------------


def shell_on(conn, monkeypatch, capsys):
    """`emq WORDS` in this process, on `conn` (either backend): (exit, stdout, stderr)."""
    from emq_notebook import cli

    monkeypatch.setattr(cli, "connect", lambda *a, **kw: conn)

    def emq_(*words):
        code = cli.main(["--url", "redis://u:pw-Kq7@db:6379/0", *words])
        return (code, *capsys.readouterr())

    return emq_


def test_a_value_holding_a_newline_forges_no_line_of_a_listing(conn, monkeypatch, capsys):
    """`emq logs` prints each log line on its one line and `emq job` each field on its
    one line, whatever a worker wrote in them (a newline, a line separator). Fails
    before: a log line `a\\nforged` printed as two log lines, a last_error
    `boom\\nstate: completed` as a second field."""
    emq_ = shell_on(conn, monkeypatch, capsys)
    jobs.enqueue(conn, "mail", "{}", id="j_1", max_attempts=1)
    jobs.add_log(conn, "mail", "j_1", "a\nforged log line")
    jobs.add_log(conn, "mail", "j_1", "b\u2028c")
    jobs.claim(conn, "mail")
    jobs.fail(conn, "mail", "j_1", "boom\nstate: completed")
    code, out, err = emq_("logs", "mail", "j_1")
    assert (code, out, err) == (0, "a\\nforged log line\nb\\u2028c\n", "")
    code, out, err = emq_("job", "mail", "j_1")
    shown = out.splitlines()
    assert code == 0 and "last_error: boom\\nstate: completed" in shown
    assert [line for line in shown if line.startswith("state:")] == ["state: dead"]


def test_an_error_line_is_one_line_whatever_its_text_holds(conn, monkeypatch, capsys, tmp_path):
    """A line separator (U+2028), a carriage return or an escape in a path an error names
    is escaped, and no password of a word holding several URLs is in it. Fails before:
    U+2028 went out raw (a line break to a terminal), and `emq import --from` with a
    second URL in the word printed its password (the path shows `//` as `/`)."""
    emq_ = shell_on(conn, monkeypatch, capsys)
    jobs.enqueue(conn, "mail", "{}")
    path = f"{tmp_path}/no-dir/to redis://a:pw-A1@h/0 and rediss://b:pw-B2@h/1\u2028\r\x1b[2J"
    for words in (("import", "mail", "--from", f"{path}.jsonl"), ("plot", "mail", "--save", f"{path}.png")):
        code, out, err = emq_(*words)
        assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("emq: "), err
        assert "pw-A1" not in err and "pw-B2" not in err and "\u2028" not in err and "\r" not in err, err


def test_the_exporter_and_move_say_their_usage_in_shell_syntax(conn, monkeypatch, capsys):
    """`emq exporter --listen nonsense` and `emq move Q` with no target point at `emq …
    --help`. (The hostile pass of #41: both said `see %emq … --help`.)"""
    emq_ = shell_on(conn, monkeypatch, capsys)
    for words, said in (
        (("exporter", "--listen", "nonsense"), "— see emq exporter --help"),
        (("move", "mail"), "move takes --to QUEUE (or --finish) — see emq move --help"),
        (("move", "mail", "--finish", "--to", "b"), "— see emq move --help"),
    ):
        code, out, err = emq_(*words)
        assert (code, out) == (2, "") and err.count("\n") == 1 and said in err and "%emq" not in err, err


def test_a_file_that_cannot_be_opened_is_one_line_naming_it(conn, monkeypatch, capsys, tmp_path):
    """`emq import --from` a missing file and `emq export --to` a missing directory: a
    BadInput line naming the path (the magic shows the same line, not a traceback)."""
    emq_ = shell_on(conn, monkeypatch, capsys)
    jobs.enqueue(conn, "mail", "{}")
    missing = tmp_path / "no-dir" / "x.jsonl"
    for words, said in (
        (("import", "mail", "--from", str(missing)), f"BadInput: cannot read {missing}: No such file"),
        (("export", "mail", "--state", "pending", "--to", str(missing)), "BadInput: cannot write"),
    ):
        code, out, err = emq_(*words)
        assert (code, out) == (2, "") and err.count("\n") == 1 and said in err, err


def test_ids_another_node_wrote_forge_no_line_of_a_preview_or_a_frame(conn, monkeypatch, capsys):
    """Dead jobs whose ids hold a newline, a C1 control and a line separator (written
    by another node, outside the name gate): the bulk preview, the per-id words and the
    jobs frame show each id on its own line, escaped. (The hostile pass of #41: the
    per-id words printed `a` and `FORGED: reprocessed` as two lines, and U+2028 and
    0x9b went out raw.)"""
    from dead_letters import written_rows

    emq_ = shell_on(conn, monkeypatch, capsys)
    written_rows(conn, "mail", "dead", ["a\nFORGED", "b\u2028c", "d\x9b2J"], last_error="boom\nsecond")
    for words in (
        ("reprocess", "mail", "--error", "boom*", "--dry-run"),
        ("jobs", "mail", "--state", "dead"),
        ("remove", "mail", "--error", "boom*", "--yes"),
    ):
        code, out, err = emq_(*words)
        assert (code, err) == (0, ""), err
        assert not re.search("[\u2028\x9b\r]", out) and not re.search("^FORGED", out, re.M), out
    assert conn.command("ZCARD", "emq:{mail}:dead") == 0


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.

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
