"""Sessions (read-only, env, name): a read-only connection refuses every writing
verb with `ReadOnly` before any I/O and leaves the keyspace byte-identical, while
reads, frames and job reads work; the refusal is declared per Lua script
(`--@readonly`) and per plain command (`READING_COMMANDS`)."""

from __future__ import annotations

import inspect
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import dump, server_for, server_url

import emq_notebook as emq
from emq_notebook import (
    admin,
    counts,
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
from emq_notebook.connector import READING_COMMANDS
from emq_notebook.errors import ReadOnly
from emq_notebook.keyspace import job_key

Q = "mail"
# an export file of one job, for the import verbs
EXPORT = Path(tempfile.mkdtemp(prefix="emq-sessions-")) / "one.jsonl"
EXPORT.write_text('{"id": "j_imported", "payload": "{}"}\n')
NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1

# Every writing verb of the operator plane, called as an operator would call it.
WRITING = {
    "admin.pause": lambda c: admin.pause(c, Q),
    "admin.resume": lambda c: admin.resume(c, Q),
    "admin.drain": lambda c: admin.drain(c, Q, include_schedule=True),
    "admin.obliterate": lambda c: admin.obliterate(c, Q, force=True),
    "admin.obliterate_all": lambda c: admin.obliterate_all(c, Q, force=True),
    "moves.reprocess_dead": lambda c: admin.reprocess_dead(c, Q),
    "moves.remove_jobs": lambda c: admin.remove_jobs(c, Q, ["j_pending", "j_dead"]),
    "moves.reprocess_jobs": lambda c: admin.reprocess_jobs(c, Q, ["j_dead"]),
    "jobs.enqueue": lambda c: jobs.enqueue(c, Q, "{}", id="j_new"),
    "jobs.enqueue_many": lambda c: jobs.enqueue_many(c, Q, ["{}", "{}"]),
    "jobs.claim": lambda c: jobs.claim(c, Q, 60_000),
    "jobs.complete": lambda c: jobs.complete(c, Q, "j_active"),
    "jobs.fail": lambda c: jobs.fail(c, Q, "j_active", "boom"),
    "jobs.expire_leases": lambda c: jobs.expire_leases(c, Q),
    "jobs.promote": lambda c: jobs.promote(c, Q),
    "jobs.update_data": lambda c: jobs.update_data(c, Q, "j_pending", '{"new": 1}'),
    "jobs.update_progress": lambda c: jobs.update_progress(c, Q, "j_pending", 50),
    "jobs.add_log": lambda c: jobs.add_log(c, Q, "j_pending", "a line"),
    "jobs.remove_job": lambda c: jobs.remove_job(c, Q, "j_pending"),
    "jobs.reprocess_job": lambda c: jobs.reprocess_job(c, Q, "j_dead"),
    "jobs.promote_job": lambda c: jobs.promote_job(c, Q, "j_later"),
    "lanes.claim": lambda c: lanes.claim(c, Q, 60_000),
    "lanes.set_limit": lambda c: lanes.set_limit(c, Q, "acme", 5),
    "lanes.pause_lane": lambda c: lanes.pause_lane(c, Q, "acme"),
    "lanes.resume_lane": lambda c: lanes.resume_lane(c, Q, "acme"),
    "repeat.register": lambda c: repeat.register(c, Q, "hourly", 3_600_000, "{}"),
    "repeat.unregister": lambda c: repeat.unregister(c, Q, "nightly"),
    "repeat.tick": lambda c: repeat.tick(c, Q),
    "repeat.run_now": lambda c: repeat.run_now(c, Q, "nightly"),
    "transfer.move_jobs": lambda c: transfer.move_jobs(c, Q, f"{Q}.quarantine"),
    "transfer.finish_moves": lambda c: transfer.finish_moves(c, Q),
    "transfer.import_jobs": lambda c: transfer.import_jobs(c, Q, EXPORT),
    "transfer.import_file": lambda c: transfer.import_file(c, Q, str(EXPORT), state="dead", digest=""),
}
# Every reading verb, with what it must see of the staged queue.
READING = {
    "jobs.is_paused": (lambda c: jobs.is_paused(c, Q), False),
    "jobs.paused_for_claim": (lambda c: jobs.paused_for_claim(c, Q), False),
    "admin.job_count": (lambda c: admin.job_count(c, Q), 5),
    "admin.backlog": (lambda c: admin.backlog(c, Q, include_schedule=True), 3),
    "jobs.get_job": (lambda c: jobs.get_job(c, Q, "j_pending")["payload"], '{"p": 1}'),
    "jobs.get_job_logs": (lambda c: jobs.get_job_logs(c, Q, "j_pending"), ["first"]),
    "jobs.whole_field": (lambda c: jobs.whole_field(c, Q, "j_pending", "payload"), '{"p": 1}'),
    "lanes.lanes": (lambda c: sorted(lanes.lanes(c, Q)), ["acme"]),
    "lanes.lane": (lambda c: lanes.lane(c, Q, "acme")["pending"], 1),
    "lanes.names": (lambda c: lanes.names(c, Q), ["acme"]),
    "lanes.page": (lambda c: list(lanes.page(c, Q).lanes), ["acme"]),
    "watching.backlog": (lambda c: watching.backlog(c, Q), 1),
    "watching.backlogs": (lambda c: watching.backlogs(c, [Q])[Q].jobs, 1),
    "watching.watched": (lambda c: watching.watched(c, {Q: 1})[Q].jobs, 1),
    "lanes.with_backlog": (lambda c: [g for g, _, _ in lanes.with_backlog(c, Q)], ["acme"]),
    "repeat.registered": (lambda c: [r["name"] for r in repeat.registered(c, Q)], ["nightly"]),
    "repeat.next_due": (lambda c: repeat.next_due(c, Q, "nightly") > 0, True),
    "frames.snapshot": (lambda c: sorted(frames.snapshot(c, Q).index), None),
    "frames.rows": (lambda c: frames.rows(c, Q, ["j_pending"], ("payload",)), [['{"p": 1}']]),
    "frames.queues": (lambda c: frames.queues(c), [Q]),
    "frames.counts": (lambda c: frames.counts(c, [Q]).loc[Q, "dead"], 1),
    "frames.members_page": (lambda c: frames.members_page(c, f"emq:{{{Q}}}:dead", 0, 10)[0], ["j_dead"]),
    "frames.dead_page": (lambda c: list(frames.dead_page(c, Q).index), ["j_dead"]),
    "frames.metrics": (lambda c: len(frames.metrics(c, Q)) >= 0, True),
    "triage.find": (lambda c: list(triage.find(c, Q, state="all", error="b*").index), ["j_dead"]),
    "triage.errors": (lambda c: triage.errors(c, Q)["count"].to_dict(), {"boom": 1}),
    "frames.latency": (lambda c: int(frames.latency(c, Q)["n"].sum()), 2),
    "frames.health": (lambda c: frames.health(c, [Q]).loc[Q, "claimed_5m"], 2),
    "counts.look": (lambda c: counts.look(c, [Q]).frame.loc[Q, "dead"], 1),
    "health.look": (lambda c: health.look(c, [Q]).frame.loc[Q, "claimed_5m"], 2),
    # the stage's add_log and repeat.register are an operator's: their entries, newest
    # first (the enqueues and claims are a worker's)
    "frames.audit": (lambda c: list(frames.audit(c, Q).verb), ["repeat", "log"]),
    "jobs.read_logs": (lambda c: jobs.read_logs(c, Q, "j_pending", job_key(Q, "j_pending")), ["first"]),
    "transfer.export_jobs": (lambda c: int(transfer.export_jobs(c, Q, EXPORT.with_name("ro.jsonl"))), 1),
    "transfer.read_rows": (
        lambda c: transfer.read_rows(c, Q, ["j_pending"], 99)["j_pending"].fields["payload"],
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
    jobs.enqueue(conn, Q, '{"d": 1}', id="j_dead", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_dead", "boom")
    jobs.enqueue(conn, Q, '{"a": 1}', id="j_active")
    jobs.claim(conn, Q, 60_000)
    jobs.enqueue(conn, Q, '{"p": 1}', id="j_pending")
    jobs.add_log(conn, Q, "j_pending", "first")
    jobs.enqueue(conn, Q, '{"s": 1}', id="j_later", delay_ms=3_600_000)
    jobs.enqueue(conn, Q, '{"g": 1}', id="j_lane", group="acme")
    repeat.register(conn, Q, "nightly", 86_400_000, "{}")


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
    assert sorted(frames.snapshot(ro, Q).index) == sorted(frames.snapshot(conn, Q).index)
    assert footprint.footprint(ro, Q) == footprint.footprint(conn, Q)
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
    assert jobs.get_job_logs(fn, Q, "j_pending") == ["first"]
    assert sent[-1] == "FCALL_RO"
    at = len(sent)
    jobs.add_log(fn, Q, "j_pending", "second")
    # the transition's audited twin writes its entry (ACL WHOAMI asked once per connection)
    assert [c for c in sent[at:] if c != "ACL"] == ["FCALL"]


def test_plain_commands_on_a_read_only_connection(conn: emq.Connection, backend: str, request: Any) -> None:
    stage(conn)
    before = dump(conn)
    ro = read_only_twin(backend, request)
    assert ro.command("HGET", f"emq:{{{Q}}}:job:j_pending", "payload") == '{"p": 1}'
    assert ro.command("ping") is True
    for parts in (
        ("HSET", f"emq:{{{Q}}}:meta", "paused", "1"),
        ("DEL", f"emq:{{{Q}}}:pending"),
        ("FLUSHALL",),
        ("EVAL", "return 1", 0),
        ("FCALL", "emq_pause", 0),
    ):
        with pytest.raises(ReadOnly):
            ro.command(*parts)
    pipe = ro.pipeline()
    pipe.zcard(f"emq:{{{Q}}}:pending")
    with pytest.raises(ReadOnly):
        pipe.delete(f"emq:{{{Q}}}:pending")
    assert ro.pipeline().zcard(f"emq:{{{Q}}}:pending").execute() == [1]
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
    assert jobs.get_job(ro, Q, "j_pending")["payload"] == '{"p": 1}'
    assert jobs.get_job_logs(ro, Q, "j_pending") == ["first"]
    assert frames.counts(ro, [Q]).loc[Q, "dead"] == 1
    assert sorted(frames.snapshot(ro, Q).index) == sorted(frames.snapshot(conn, Q).index)
    assert len(frames.snapshot(ro, Q)) == 5
    assert dump(conn) == before


# -- a failed connect: no server guessed in place of the one asked for (#41.2) ------------

FAILED_CONNECTS = [
    "connect redis://127.0.0.1:1/0 --env production",  # a typo'd port: nothing listens
    "connect redis://u:pw-Kq7@127.0.0.1:1/0 --embedded fake",  # a URL and --embedded
    "connect nowhere:6379 --env production",  # not a URL
    "connect redis://u:pw-Kq7@127.0.0.1:1/0 --env",  # a line that does not parse
    "connect redis://127.0.0.1:1/0 redis://u:pw-Kq7@127.0.0.1:2/0",  # nor this one, naming a password
]


@pytest.fixture
def unconnected(ip: Any, conn: emq.Connection, monkeypatch: Any) -> Any:
    """The notebook's session with no connection yet, its default (`%emq connect` with
    no URL: EMQ_URL, else the embedded fakeredis) on `conn`'s server; put back after."""
    from as_written import default_server

    from emq_notebook import magics

    default_server(conn, monkeypatch)
    session = magics.SESSION
    kept = dict(session.connections), session.current
    session.connections.clear()
    session.current = session.failed = None
    yield session
    session.connections.clear()
    session.connections.update(kept[0])
    session.current, session.failed = kept[1], None


def typed_in(ip: Any, line: str) -> tuple[Any, list[str]]:
    """(the ExecutionResult, the lines it printed) of a cell holding `line`."""
    from IPython.utils.capture import capture_output

    with capture_output() as out:
        result = ip.run_cell(line)
    return result, (out.stdout + out.stderr).strip().splitlines()


@pytest.mark.parametrize("line", FAILED_CONNECTS)
def test_after_a_failed_connect_every_verb_refuses_until_one_succeeds(
    ip: Any, unconnected: Any, conn: emq.Connection, line: str
) -> None:
    """With no connection current, a connect that fails (a typo'd port, a bad URL, a
    line that does not parse) leaves none: the next write and read refuse in one line
    that fails the cell, and nothing is written to the default server, where the
    write used to land. Fails before: `pause mailers` printed "paused mailers"."""
    result, said = typed_in(ip, f"%emq {line}")
    assert isinstance(result.error_in_exec, emq.EMQError), said
    assert len(said) == 1 and said[0].split(": ", 1)[1].startswith("connect failed: "), said
    assert "no connection is current" in said[0] and "pw-Kq7" not in said[0]
    for attempt, what in (("pause mailers", "pause mailers"), ("queues", "queues")):
        result, said = typed_in(ip, f"%emq {attempt}")
        assert isinstance(result.error_in_exec, emq.UsageProblem), said
        assert len(said) == 1 and said[0].startswith(f"UsageProblem: {what}: no connection is current: ")
        assert "pw-Kq7" not in said[0]
        assert "the last connect failed (" in said[0] and "%emq connect URL, or %emq use NAME" in said[0]
    with pytest.raises(emq.UsageProblem, match="no connection is current"):
        emq.current()
    assert dump(conn) == {} and unconnected.current is None
    # a connect that succeeds ends it: the write goes where the operator asked
    assert typed_in(ip, "%emq connect")[0].success
    assert typed_in(ip, "%emq pause mailers")[0].success
    assert admin.is_paused(conn, "mailers")


def test_use_after_a_failed_connect_makes_a_kept_connection_current(
    ip: Any, unconnected: Any, conn: emq.Connection
) -> None:
    """`%emq use NAME` ends the refusals as a successful connect does."""
    unconnected.connections["kept"] = conn
    assert not typed_in(ip, f"%emq {FAILED_CONNECTS[0]}")[0].success
    assert not typed_in(ip, "%emq pause mailers")[0].success
    assert typed_in(ip, "%emq use kept")[0].success
    assert typed_in(ip, "%emq pause mailers")[0].success and admin.is_paused(conn, "mailers")


@pytest.mark.parametrize("line", FAILED_CONNECTS)
def test_a_failed_connect_says_which_connection_is_still_current(
    ip: Any, unconnected: Any, conn: emq.Connection, line: str
) -> None:
    """Another connection current: the failure line names it (name, label, env), and a
    verb after it runs there, as told. Fails before: the line said nothing of it."""
    target = "--embedded fake" if conn.label == "embedded fakeredis" else conn.label
    assert typed_in(ip, f"%emq connect {target} --name staging --env staging")[0].success
    result, said = typed_in(ip, f"%emq {line}")
    assert isinstance(result.error_in_exec, emq.EMQError), said
    assert len(said) == 1 and "pw-Kq7" not in said[0], said
    assert said[0].endswith(f"; still using staging ({conn.label}, env staging)"), said
    assert unconnected.current == "staging"
    result, said = typed_in(ip, "%emq pause mailers")
    assert result.success and said == ["paused mailers: claims answer empty; the backlog is untouched"]
    assert admin.is_paused(conn, "mailers")


def test_an_env_or_a_reason_holding_a_urls_password_is_shown_without_it(
    ip: Any, unconnected: Any, conn: emq.Connection
) -> None:
    """An env label and the session's reason are free text an operator types; a URL's
    password in them is shown nowhere: not in the connect line, the confirmations
    (`where`), `%emq connections`, the reason's echo, nor the audit entry. (The
    hostile pass of #41: the connect line showed `env=failing over to
    redis://admin:pw-E1@…` and `%emq reason` echoed its password while the entry held
    it scrubbed.)"""
    target = "--embedded fake" if conn.label == "embedded fakeredis" else conn.label
    ip.user_ns["label"] = "prod via redis://admin:pw-E1@replica/0"
    result, said = typed_in(ip, f"%emq connect {target} --name p --env {{{{label}}}}")
    assert result.success and said == [
        f"connected: {conn.label} (env=prod via redis://admin:***@replica/0, executor=script) as p"
    ]
    result, said = typed_in(ip, "%emq reason failing over to rediss://u:pw-E2@replica:6380/0")
    assert result.success and said == [
        "reason: failing over to rediss://u:***@replica:6380/0 (each audit entry of this session says it)"
    ]
    assert typed_in(ip, "%emq reason")[1] == ["reason: failing over to rediss://u:***@replica:6380/0"]
    assert "pw-E1" not in unconnected.where()
    assert typed_in(ip, "%emq pause mailers")[0].success
    entry = frames.audit(conn, "mailers").iloc[0]
    assert entry["env"] == "prod via redis://admin:***@replica/0", entry
    assert "pw-E2" not in entry["reason"] and "***" in entry["reason"]
    typed_in(ip, "%emq reason --clear")
