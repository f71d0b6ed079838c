"""Connections: the embedded default, URLs, redaction, EVALSHA after SCRIPT FLUSH."""

from typing import Any

import pytest
from lost_replies import Q, active, lose_replies
from own_process import python_without_url

import emq_notebook as emq
from emq_notebook import admin, jobs, scripts
from emq_notebook.connector import redact
from emq_notebook.errors import WireError
from emq_notebook.keyspace import queue_key


def test_embedded_default_is_one_shared_server(monkeypatch: Any) -> None:
    monkeypatch.delenv("EMQ_URL", raising=False)
    a, b = emq.connect(), emq.connect()
    a.client.flushall()
    jobs.enqueue(a, "shared", "{}", id="j_x")
    assert jobs.get_job(b, "shared", "j_x")["payload"] == "{}"
    assert "fakeredis" in repr(a)


def test_emq_url_is_used_when_set(monkeypatch: Any, valkey: Any) -> None:
    monkeypatch.setenv("EMQ_URL", f"valkey://127.0.0.1:{valkey.port}/3")
    conn = emq.connect()
    assert conn.label == f"valkey://127.0.0.1:{valkey.port}/3"
    assert conn.client.ping()


@pytest.mark.parametrize(
    "url",
    [
        "redis://u:s3cr3t-pw@127.0.0.1:1/0",
        "rediss://:s3cr3t-pw@h:6380",
        "valkey://u:s3cr3t-pw@127.0.0.1:1",
        "valkeys://u:s3cr3t-pw@h",
    ],
)
def test_password_never_shown(url: Any) -> None:
    conn = emq.connect(url)
    assert "s3cr3t-pw" not in repr(conn) and "s3cr3t-pw" not in str(conn)
    assert "***" in conn.label
    if url.startswith(("redis://", "valkey://")):
        with pytest.raises(emq.WireError) as info:
            admin.pause(conn, "q")
        assert "s3cr3t-pw" not in str(info.value)


def test_unix_url_and_bad_scheme(tmp_path: Any) -> None:
    conn = emq.connect(f"unix://{tmp_path}/nope.sock")
    with pytest.raises(emq.WireError):
        admin.is_paused(conn, "q")
    with pytest.raises(emq.BadInput):
        emq.connect("http://example/")
    assert redact("redis://:pw@h:1/0") == "redis://:***@h:1/0"


def test_wrong_password_on_a_real_server_is_not_echoed(valkey: Any) -> None:
    r = emq.connect(f"redis://127.0.0.1:{valkey.port}").client
    r.config_set("requirepass", "right-pw")
    try:
        conn = emq.connect(f"redis://default:wrong-pw-xyz@127.0.0.1:{valkey.port}")
        with pytest.raises(emq.WireError) as info:
            admin.pause(conn, "q")
        assert "wrong-pw-xyz" not in str(info.value)
        # the line says what happened: the server is there, the password is not right
        assert str(info.value).startswith(
            f"authentication failed at redis://default:***@127.0.0.1:{valkey.port}"
        )
        with pytest.raises(emq.WireError, match="^authentication failed"):
            emq.connect(f"redis://127.0.0.1:{valkey.port}").command("PING")  # none given: NOAUTH
    finally:
        emq.connect(f"redis://default:right-pw@127.0.0.1:{valkey.port}").client.config_set("requirepass", "")


def test_verbs_survive_script_flush(conn: Any) -> None:
    jobs.enqueue(conn, "q", "{}", id="j_a")
    conn.client.script_flush()
    admin.pause(conn, "q")
    assert admin.is_paused(conn, "q")
    conn.client.script_flush()
    assert jobs.get_job(conn, "q", "j_a")["state"] == "pending"


def test_function_library_loads_and_upgrades(conn: Any, connect_as: Any) -> None:
    fn = connect_as("function")
    jobs.enqueue(fn, "q", "{}", id="j_a")
    version, _ = scripts.library()
    assert fn.client.fcall_ro("emq_version", 0) == version
    # an older library on the server is replaced on first use
    fn.client.function_load(
        "#!lua name=emq_notebook\nredis.register_function{function_name='emq_version',"
        " callback=function() return 'old' end, flags={'no-writes'}}",
        replace=True,
    )
    fresh = connect_as("function")
    assert (jobs.claim(fresh, "q", 1000) or ("",))[0] == "j_a"
    assert fresh.client.fcall_ro("emq_version", 0) == version


def test_native_executor_says_when_the_module_is_missing(conn: Any, connect_as: Any) -> None:
    native = connect_as("native")
    jobs.enqueue(native, "q", "{}", id="j_a")
    with pytest.raises(emq.NativeUnavailable, match="EMQ.CLAIM"):
        jobs.claim(native, "q", 1000)


def test_embedded_valkey_is_a_real_server() -> None:
    code = (
        "import emq_notebook as e; c = e.connect(embedded='valkey'); "
        "print(c.client.info('server')['valkey_version'] if 'valkey_version' in "
        "c.client.info('server') else c.client.info('server')['redis_version']); "
        "e.jobs.enqueue(c, 'q', '{}', id='j_1'); print(e.jobs.claim(c, 'q', 1000)[0])"
    )
    out = python_without_url(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "j_1"


def test_scripts_ship_one_per_transition() -> None:
    names = scripts.names()
    for n in (
        "pause",
        "resume",
        "drain",
        "obliterate",
        "claim2",
        "gclaim2",
        "reprocess2",
        "remove_job2",
        "update_progress",
        "update_data",
        "add_log",
    ):
        assert n in names
    for n in names:
        src = scripts.source(n)
        assert "--@include" not in src
        header = []
        for line in src.splitlines():
            if not line.startswith("--"):
                break
            header.append(line)
        # each file opens with its KEYS / ARGV / returns block
        assert "KEYS[1]" in "\n".join(header) and "returns" in "\n".join(header), n


def test_a_read_only_pipeline_refuses_a_write_as_it_is_queued_and_patches_nothing(conn: Any) -> None:
    """Our Pipeline checks each command's name against the reading commands: a write asked
    by its method, by `execute_command` or at the end of a chain of reads is `ReadOnly`
    before anything is sent, and redis-py's own pipeline is left as redis-py made it."""
    jobs.enqueue(conn, "q", "{}", id="j_a")
    pending = "emq:{q}:pending"
    ro = emq.Connection(conn.client, conn.label, read_only=True)
    pipe = ro.pipeline()
    for write in (
        lambda: pipe.delete(pending),
        lambda: pipe.execute_command("HSET", "emq:{q}:meta", "paused", "1"),
        lambda: pipe.zcard(pending).zrem(pending, "j_a"),
    ):
        with pytest.raises(emq.ReadOnly):
            write()
    assert "execute_command" not in vars(pipe._pipe)  # nothing of redis-py's rebound
    assert pipe.execute() == [1]  # the chain's read went, nothing else
    assert conn.client.zcard(pending) == 1 and conn.client.hget("emq:{q}:meta", "paused") is None


# -- Regression tests for what the soak (tests/soak/) found, one per bug, on both backends. Each
# fault is injected at the client (a reply read that fails after the server ran the command, or a
# failed pause read), so the fake runs it too.

# Bug 1: redis-py re-sends a command whose connection failed, after the server
# ran it. `redis.Redis(host=, port=)` retries by default (`from_url` does not), and
# `connect(embedded="valkey")` built its client that way: a claim re-sent after its
# reply was lost took a second job, a complete re-sent answered `Gone`, a drain's
# count was lost. Every client `connect` builds now sends a transition once; the
# tests on `conn` hold it for the URL and the fake.


@pytest.mark.parametrize("kind", ["embedded valkey", "url", "embedded fake"])
def test_every_client_connect_builds_sends_a_transition_once(kind, valkey, monkeypatch):
    import emq_notebook as emq

    conn = (
        emq.connect(embedded="valkey")
        if kind == "embedded valkey"
        else emq.connect(f"redis://127.0.0.1:{valkey.port}/0")
        if kind == "url"
        else emq.connect(embedded="fake")
    )
    conn.client.delete(*[queue_key(Q, s) for s in ("pending", "active", "meta")])
    for i in range(2):
        conn.client.delete(queue_key(Q, f"job:j_{i}"))
        jobs.enqueue(conn, Q, str(i), id=f"j_{i}")
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        jobs.claim(conn, Q, 60_000)
    assert active(conn) == ["j_0"]
