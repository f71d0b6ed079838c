"""The `emq` shell command: same grammar, exit 1 on a refusal, 2 on an error."""

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
