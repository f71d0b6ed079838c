"""The audit trail's core (SPEC 12, `emq_notebook.audit`), on both backends: one entry
per writing call with every field, nested calls recorded once, refusals with their
reason, a cut call never `done`, nothing from a read-only session or a dry run, the
record of an obliterate outliving the queue, secrets never in `args`, the stream
bounded, and an ACL user limited to `~emq:*` writing it (real Valkey)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import helpers
import pytest
import redis

import emq_notebook as emq
from emq_notebook import admin, audit, connector, frames, jobs, scripts
from emq_notebook.errors import BadInput, NotPaused, ReadOnly, WireError, refusal_table
from emq_notebook.keyspace import audit_key

Q = "mailers"

# the writing verbs, each recorded by its declaration (`catalogue.contract`)
pause = admin.pause
obliterate = admin.obliterate
obliterate_all = admin.obliterate_all
remove_job = jobs.remove_job
remove_jobs = admin.remove_jobs
reprocess_jobs = admin.reprocess_jobs


def raw(conn: emq.Connection, q: str = Q) -> list[dict[str, str]]:
    """The stream's entries as the server holds them, oldest first."""
    return [fields for _, fields in conn.client.xrange(audit_key(q))]


def entry_ids(conn: emq.Connection, q: str = Q) -> list[str]:
    """The stream's entry ids, oldest first."""
    return [entry for entry, _ in conn.client.xrange(audit_key(q))]


def enqueue(conn: emq.Connection, n: int, q: str = Q) -> list[str]:
    return [jobs.enqueue(conn, q, "{}", id=f"j{i:04d}") for i in range(n)]


def test_an_entry_holds_who_did_what_when_from_where_and_why(conn, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "jane")
    monkeypatch.setenv("JPY_SESSION_NAME", "incidents/mailers.ipynb")
    conn.name, conn.env = "oncall", "production"
    before = conn.client.time()[0] * 1000
    with audit.surface("magic") as said, audit.because("bounce storm, INC-42"):
        pause(conn, Q)
    [entry] = raw(conn)
    assert entry == {
        "verb": "pause",
        "outcome": "done",
        "count": "0",
        "ids": json.dumps({"first": [], "digest": ""}),
        "args": "{}",
        "who": "jane",
        "acl_user": "default",
        "conn": "oncall",
        "env": "production",
        "surface": "magic",
        "notebook": "incidents/mailers.ipynb",
        "reason": "bounce storm, INC-42",
    }
    assert list(entry) == list(audit.FIELDS)
    assert said.suffix() == "" and [q for q, _ in said.entries] == [Q]
    # the one line that answers "who paused mailers, when, from which notebook, and why?"
    frame = audit.read(conn, Q)
    row = frame[frame.verb == "pause"].iloc[0]
    assert (row.who, row.notebook, row.reason) == ("jane", "incidents/mailers.ipynb", "bounce storm, INC-42")
    assert list(frame.columns)[:12] == [
        *("time", "queue", "verb", "outcome", "count", "who", "env", "conn", "surface", "reason"),
        *("args", "ids"),
    ]
    # the stream id is the server's time
    assert before <= row.time.value // 1_000_000 <= before + 60_000
    assert row.entry == said.entries[0][1]


def test_the_reason_is_the_calls_then_the_sessions_and_the_surface_python_by_default(conn):
    conn.reason = "session reason"
    pause(conn, Q)
    with audit.because("this call"):
        pause(conn, Q)
    with audit.because(None):
        pause(conn, Q)
    assert [(e["reason"], e["surface"]) for e in raw(conn)] == [
        ("session reason", "python"),
        ("this call", "python"),
        ("session reason", "python"),
    ]


def test_a_runbook_names_itself_its_parameters_and_its_surface(conn):
    try:
        audit.runbook(
            "11-runaway-producer", {"QUEUE": Q, "APPLY": True, "EMQ_PASSWORD": "pw-1", "REASON": "x"}
        )
        pause(conn, Q)
        with audit.surface("panel"):
            pause(conn, Q)
    finally:
        audit.set_default_surface("python")
        audit.set_notebook(None)
    first, second = raw(conn)
    assert first["surface"] == "runbook" and second["surface"] == "panel"
    name, params = first["notebook"].split(" ", 1)
    assert name == "11-runaway-producer.ipynb"
    assert json.loads(params) == {"APPLY": True, "EMQ_PASSWORD": "***", "QUEUE": Q, "REASON": "x"}


def test_a_per_job_verb_records_its_job_and_a_bulk_verb_one_entry_with_the_first_ids_and_a_digest(conn):
    ids = enqueue(conn, 150)
    remove_job(conn, Q, ids[0])
    words = remove_jobs(conn, Q, ids[1:] + ["ghost"], budget=40)  # four calls of the script
    assert sum(w == "removed" for w in words.values()) == 149
    single, began, bulk = raw(conn)
    assert (single["verb"], single["count"], json.loads(single["ids"])["first"]) == ("remove", "1", [ids[0]])
    assert (began["verb"], began["outcome"], began["count"]) == ("remove", "started", "")
    assert (bulk["verb"], bulk["outcome"], bulk["count"]) == ("remove", "done", "149")
    assert bulk["started"] == entry_ids(conn)[1]  # the entry it closes
    said = json.loads(bulk["ids"])
    assert said == {"first": ids[1:101], "digest": audit.digest(ids[1:])}
    assert json.loads(bulk["args"]) == {"budget": 40, "ids": "<150 items>"}
    row = audit.read(conn, Q).iloc[0]
    assert (row["count"], row.ids, row.ids_digest) == (149, ids[1:101], audit.digest(ids[1:]))


def _calls(conn: emq.Connection, monkeypatch) -> list[str]:
    """The commands `conn` sends from now on, by name."""
    sent: list[str] = []
    send = conn.client.execute_command

    def counted(*parts: Any, **kw: Any) -> Any:
        sent.append(str(parts[0]).upper())
        return send(*parts, **kw)

    monkeypatch.setattr(conn.client, "execute_command", counted)
    return sent


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_single_verb_sends_one_call_that_writes_its_transition_and_its_entry(
    connect_as, monkeypatch, executor
):
    """A one-transition verb (`single`) runs its transition's audited twin: one call,
    its entry written beside it with the outcome its reply says, done or refused."""
    conn = connect_as(executor)
    enqueue(conn, 2)
    jobs.add_log(conn, Q, "j0001", "warm")  # the library (function executor) loaded first
    twins = ("pause", "resume", "add_log", "remove_job2", "reprocess2")
    conn.load_scripts(conn.script(scripts.AUDITED + name) for name in twins)  # no NOSCRIPT round
    sent = _calls(conn, monkeypatch)
    pause(conn, Q)
    admin.resume(conn, Q)
    assert jobs.add_log(conn, Q, "j0001", "line") == 2
    remove_job(conn, Q, "j0000")
    with pytest.raises(emq.Gone):
        remove_job(conn, Q, "j0000")
    with pytest.raises(emq.Refused, match="not_dead"):
        jobs.reprocess_job(conn, Q, "j0001")
    assert sent == ["EVALSHA" if executor == "script" else "FCALL"] * 6
    entries = [(e["verb"], e["outcome"], e["count"], json.loads(e["ids"])["first"]) for e in raw(conn)][1:]
    assert entries == [
        ("pause", "done", "0", []),
        ("resume", "done", "0", []),
        ("log", "done", "1", ["j0001"]),
        ("remove", "done", "1", ["j0000"]),
        ("remove", "refused:gone", "0", ["j0000"]),
        ("reprocess", "refused:not_dead", "0", ["j0001"]),
    ]
    assert {e["who"] for e in raw(conn)} == {audit.who()}


@pytest.mark.parametrize(
    "text",
    [f"EMQSTATE {prefix} and more" for prefix, _ in refusal_table()]
    + ["EMQSTATE", "EMQSTATE something new", "EMQSTATEMENT", "ERR unknown", "WRONGTYPE Operation", ""],
)
def test_the_twin_names_an_outcome_as_the_client_does(conn, text):
    """`audit_outcome` (Lua, in the twin) reads an error reply as `outcome_of` reads the
    typed error the client makes of it (`transitions.error`): the same refusal table."""
    from emq_notebook import transitions

    lua = scripts._audit_tables() + (scripts.lua_dir() / "includes" / "audited.lua").read_text()
    lua += "\nlocal outcome = audit_outcome(true, {err = ARGV[1]}, false)\nreturn outcome\n"
    typed = transitions.error(text, transitions.Call("remove", verb="remove", queue=Q))
    assert conn.client.eval(lua, 0, text) == audit.outcome_of(typed)


def test_a_call_the_verb_cannot_take_raises_its_own_type_error_and_records_nothing(conn):
    enqueue(conn, 1)
    for call in (
        lambda: remove_job(conn, Q),  # its job id missing
        lambda: remove_job(conn, Q, "j0000", "dedup", "one too many"),
        lambda: remove_job(conn, Q, "j0000", job_id="j0000"),  # given twice
        lambda: remove_job(conn, Q, "j0000", nonsense=1),
    ):
        with pytest.raises(TypeError):
            call()
    assert raw(conn) == []
    remove_job(conn, Q, job_id="j0000")  # by name: the same entry
    [entry] = raw(conn)
    assert (entry["verb"], entry["outcome"], json.loads(entry["ids"])["first"]) == (
        "remove",
        "done",
        ["j0000"],
    )


def test_nested_recorded_calls_record_once(conn):
    enqueue(conn, 30)
    pause(conn, Q)
    obliterate_all(conn, Q, budget=5)  # many calls of the recorded obliterate inside
    assert [(e["verb"], e["outcome"], e["count"]) for e in raw(conn)] == [
        ("pause", "done", "0"),
        ("obliterate", "started", ""),
        ("obliterate", "done", "30"),
    ]


def test_a_refusal_is_recorded_with_its_reason_and_nothing_touched(conn):
    enqueue(conn, 1)
    with pytest.raises(NotPaused):
        obliterate(conn, Q)
    with pytest.raises(emq.Refused):
        remove_job(conn, Q, "nobody")
    began, refused, gone = raw(conn)
    assert (began["verb"], began["outcome"]) == ("obliterate", "started")
    assert (refused["verb"], refused["outcome"], refused["count"]) == (
        "obliterate",
        "refused:not_paused",
        "0",
    )
    assert (gone["outcome"], gone["count"], json.loads(gone["ids"])["first"]) == (
        "refused:gone",
        "0",
        ["nobody"],
    )
    assert conn.client.exists("emq:{mailers}:job:j0000") == 1


def test_an_error_is_recorded_as_error_with_its_count_unknown(conn):
    conn.client.set("emq:{mailers}:meta", "not a hash")  # the transition's HSET fails
    with pytest.raises(emq.EMQError, match="server error in pause"):
        pause(conn, Q)  # its twin's pcall catches the HSET's error and records it
    [entry] = raw(conn)
    assert (entry["verb"], entry["outcome"], entry["count"]) == ("pause", "error", "")
    assert audit.read(conn, Q)["count"].isna().all()


def test_a_malformed_request_is_refused_before_any_io_and_not_recorded(conn):
    with pytest.raises(BadInput):
        remove_jobs(conn, Q, ["a"], budget=0)
    with pytest.raises(BadInput):
        admin.drain(conn, Q, budget=10**9)
    assert conn.client.exists(audit_key(Q)) == 0


def _cut(conn: emq.Connection, monkeypatch, *, ran: bool) -> None:
    """The wire fails on the next script call: after the server ran it (`ran`: its
    reply is lost) or before it was sent. Later commands go through."""
    send = conn.client.execute_command

    def cut(*parts: Any, **kw: Any) -> Any:
        if str(parts[0]).upper() in ("EVALSHA", "EVAL", "FCALL"):
            monkeypatch.setattr(conn.client, "execute_command", send)
            if ran:
                send(*parts, **kw)
            raise redis.ConnectionError("Connection closed by server.")
        return send(*parts, **kw)

    monkeypatch.setattr(conn.client, "execute_command", cut)


@pytest.mark.parametrize("ran", [True, False], ids=["reply-lost", "never-sent"])
def test_a_cut_call_recorded_after_its_reply_is_unknown_never_done(conn, monkeypatch, ran):
    """A bulk verb's entry is written after its reply: a cut call's outcome is unknown,
    its count the jobs the replies before said (none here)."""
    enqueue(conn, 1)
    _cut(conn, monkeypatch, ran=ran)
    with audit.surface("shell") as said, pytest.raises(WireError) as caught:
        remove_jobs(conn, Q, ["j0000"])
    assert conn.client.exists("emq:{mailers}:job:j0000") == (not ran)
    began, entry = raw(conn)
    assert began["outcome"] == "started"
    assert (entry["verb"], entry["outcome"], entry["count"]) == ("remove", "unknown", "0")
    assert said.failed == [] and caught.value.done == 0


@pytest.mark.parametrize("ran", [True, False], ids=["reply-lost", "never-sent"])
@pytest.mark.parametrize("verb", ["pause", "remove"])
def test_a_cut_single_verb_records_done_with_its_transition_or_nothing(conn, monkeypatch, ran, verb):
    """A one-transition verb's entry is written by the transition's own call (its
    audited twin): both happen or neither, whatever becomes of the reply."""
    enqueue(conn, 1)
    _cut(conn, monkeypatch, ran=ran)
    with audit.surface("shell") as said, pytest.raises(WireError):
        pause(conn, Q) if verb == "pause" else remove_job(conn, Q, "j0000")
    if verb == "pause":
        assert admin.is_paused(conn, Q) == ran
    else:
        assert conn.client.exists("emq:{mailers}:job:j0000") == (not ran)
    assert [(e["verb"], e["outcome"]) for e in raw(conn)] == ([(verb, "done")] if ran else [])
    assert said.failed == []


def test_a_real_cut_on_a_valkey_records_unknown_or_nothing(private_valkey):
    """A server that dies under the call: the verb raises `WireError` with the audit's
    note; nothing says `done`."""
    srv = private_valkey
    conn = emq.connect(f"redis://127.0.0.1:{srv.port}/0", socket_timeout=2, socket_connect_timeout=2)
    enqueue(conn, 1)
    srv.stop()
    with audit.surface("magic") as said, pytest.raises(WireError) as caught:
        remove_jobs(conn, Q, ["j0000"])
    assert said.entries == [] and said.failed[0].startswith("audit_failed: remove mailers not recorded")
    assert audit.failure_line(caught.value).endswith(said.suffix())


def test_a_record_that_cannot_be_written_never_hides_the_result(conn, monkeypatch):
    command = conn.command

    def no_xadd(*parts: Any) -> Any:
        if parts[0] == "XADD":
            raise WireError("lost the server at test: XADD cut")
        return command(*parts)

    monkeypatch.setattr(conn, "command", no_xadd)
    ids = enqueue(conn, 3)
    with audit.surface("magic") as said:
        assert remove_jobs(conn, Q, ids) == dict.fromkeys(ids, "removed")
    assert said.suffix() == " · audit_failed: remove mailers not recorded (lost the server at test: XADD cut)"
    with pytest.warns(audit.AuditNotWritten, match="audit_failed: drain mailers not recorded"):
        assert admin.drain(conn, Q) == 0
    with pytest.raises(NotPaused) as caught:
        monkeypatch.setattr(conn, "command", command)
        admin.resume(conn, Q)
        monkeypatch.setattr(conn, "command", no_xadd)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed verb carries the note: no warning
            obliterate(conn, Q)
    assert caught.value.__notes__ == [
        "audit_failed: obliterate mailers not recorded (lost the server at test: XADD cut)"
    ]
    # resume's entry went with its transition (its twin, not the patched command)
    assert [e["verb"] for e in raw(conn)] == ["resume"]


def test_nothing_is_recorded_by_a_read_only_session_or_a_dry_run(conn):
    ids = enqueue(conn, 2)
    watching = emq.Connection(conn.client, conn.label, read_only=True)
    with pytest.raises(ReadOnly):
        pause(watching, Q)
    with audit.recorded(watching, "pause", Q) as rec:
        assert not rec.active
    assert remove_jobs(conn, Q, ids, dry_run=True) == dict.fromkeys(ids, "removed")
    assert reprocess_jobs(conn, Q, ids, dry_run=True) == dict.fromkeys(ids, "not_dead")
    assert conn.client.exists(audit_key(Q)) == 0
    assert audit.read(watching, Q).empty  # reading it works on a read-only session


def test_the_record_of_an_obliterate_survives_it(conn):
    enqueue(conn, 25)
    jobs.add_log(conn, Q, "j0001", "a line")
    pause(conn, Q)
    obliterate_all(conn, Q, budget=10)
    cursor, keys = conn.client.scan(0, match="emq:{mailers}:*", count=100_000)
    assert (cursor, keys) == (0, [])
    assert [k for k in conn.scan("emq:{mailers}:*")] == []
    assert list(audit.read(conn, Q).verb) == ["obliterate", "pause", "log"]
    # every queue's record, found without the queue directory (the queue has no meta left)
    assert Q in audit.streams(conn)
    assert list(audit.read(conn).verb) == ["obliterate", "pause", "log"]
    assert Q not in conn.directory.rescan()


def test_secrets_are_never_in_args(conn):
    secret = "pw-9Zq-never-recorded"
    session = emq.Connection(conn.client, conn.label, secret=secret)
    with audit.because(f"rotated {secret}"):
        with audit.recorded(
            session,
            "data",
            Q,
            args={
                "url": f"redis://ops:{secret}@db:6379/0?token=abc",
                "note": f"the password is {secret}",
                "token": "claim-token-1",
                "password": "x",
                "payload": '{"card": "4111 1111 1111 1111"}',
                "budget": 10,
            },
        ):
            pass
    [entry] = raw(conn)
    text = json.dumps(entry)
    for leak in (secret, "abc", "claim-token-1", "4111"):
        assert leak not in text
    assert json.loads(entry["args"]) == {
        "budget": 10,
        "note": "the password is ***",
        "password": "***",
        "payload": "<31 chars>",
        "token": "***",
        "url": "redis://ops:***@db:6379/0?token=***",
    }
    assert entry["reason"] == "rotated ***"


def test_the_stream_is_bounded_by_keep(conn):
    for _ in range(300):
        with audit.recorded(conn, "pause", Q, keep=10):
            pass
    # MAXLEN ~ trims whole stream nodes (100 entries each on Valkey): never far above keep
    assert 10 <= conn.client.xlen(audit_key(Q)) <= 110
    conn.audit_keep = 5  # the setting's place on the connection
    for _ in range(300):
        with audit.recorded(conn, "pause", Q):
            pass
    assert conn.client.xlen(audit_key(Q)) <= 105


def test_a_non_utf8_byte_reads_as_xnn(conn):
    with audit.because("bytes \udcff\udcfe"):
        pause(conn, Q)
    assert audit.read(conn, Q).reason[0] == "bytes \\xff\\xfe"
    # the values sent to the twin hold colons, digits and raw bytes whole
    enqueue(conn, 1)
    conn.name = "on:12:call"
    with audit.because("\udcff 3:abc"):
        remove_job(conn, Q, "j0000")
    entry = raw(conn)[-1]  # read back under surrogateescape: the byte 0xff is \udcff
    assert (entry["reason"], entry["conn"]) == ("\udcff 3:abc", "on:12:call")


def test_a_value_longer_than_two_length_bytes_reaches_the_entry_whole(conn, monkeypatch):
    # each value goes to the twin after its length in 4 bytes: one of 70,000 bytes uses
    # three of them (the identity's own values are clipped far below: the wire is tested here)
    path = "runbooks/" + "n" * 70_000 + ".ipynb"
    enqueue(conn, 1)
    helpers.say_identity(monkeypatch, lambda c: ("w", "", "c", "", "python", path, ""))
    remove_job(conn, Q, "j0000")
    entry = raw(conn)[-1]
    assert (entry["verb"], entry["outcome"], entry["notebook"]) == ("remove", "done", path)


def test_each_connection_names_itself_to_the_server(conn, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "Jane Doe")
    conn.name = "on call"
    assert connector.name_client(conn) == "emq_notebook:Jane_Doe:on_call"
    assert conn.client.execute_command("CLIENT", "GETNAME") == "emq_notebook:Jane_Doe:on_call"
    watching = emq.Connection(conn.client, conn.label, read_only=True, name="ro")
    assert connector.name_client(watching) == "emq_notebook:Jane_Doe:ro"  # not a keyspace write


def test_a_connection_named_before_it_reconnects_keeps_its_name(valkey):
    conn = emq.connect(f"redis://127.0.0.1:{valkey.port}/0", name="desk")
    name = connector.name_client(conn)
    conn.client.connection_pool.disconnect()
    pause(conn, "named")
    listed = conn.client.execute_command("CLIENT", "LIST")
    assert name in str(listed)
    conn.client.delete(audit_key("named"), "emq:{named}:meta")


def test_an_acl_user_limited_to_emq_keys_writes_and_names_it(valkey):
    secret = "pw-audit-3Kx"
    root = redis.Redis(port=valkey.port, decode_responses=True)
    root.flushall()
    root.execute_command(
        *("ACL", "SETUSER", "auditor", "on", f">{secret}", "resetkeys", "~emq:*"),
        *("resetchannels", "&emq:*", "+@all", "-@dangerous"),
    )
    try:
        conn = emq.connect(f"redis://auditor:{secret}@127.0.0.1:{valkey.port}/0", name="acl")
        assert connector.name_client(conn).endswith(":acl")
        pause(conn, Q)
        [entry] = [fields for _, fields in root.xrange(audit_key(Q))]
        assert (entry["outcome"], entry["acl_user"]) == ("done", "auditor")
        assert list(audit.read(conn).verb) == ["pause"]
        with pytest.raises(redis.exceptions.NoPermissionError):
            conn.client.set("not-ours", "1")  # the limit is real
        assert secret not in json.dumps(entry)
    finally:
        root.execute_command("ACL", "DELUSER", "auditor")
        root.flushall()


def test_an_acl_user_limited_to_the_queues_own_keys_still_runs_its_verbs_with_a_note(valkey):
    """The twin names emq:audit:{q}; a user whose ACL stops at emq:{q}:* is refused it
    before anything runs: the transition then goes bare, and its line says the entry
    could not be written (SPEC 12: reported beside the result, never silently)."""
    secret = "pw-queue-7Qz"
    root = redis.Redis(port=valkey.port, decode_responses=True)
    root.flushall()
    root.execute_command(
        *("ACL", "SETUSER", "narrow", "on", f">{secret}", "resetkeys", f"~emq:{{{Q}}}:*"),
        *("resetchannels", "&*", "+@all", "-@dangerous"),
    )
    try:
        conn = emq.connect(f"redis://narrow:{secret}@127.0.0.1:{valkey.port}/0")
        enqueue(conn, 1)
        with audit.surface("magic") as said:
            pause(conn, Q)
            remove_job(conn, Q, "j0000")
        assert root.hget(f"emq:{{{Q}}}:meta", "paused") == "1"
        assert root.exists(f"emq:{{{Q}}}:job:j0000") == 0
        assert len(said.failed) == 2 and all("not recorded" in f for f in said.failed), said.failed
        assert root.exists(audit_key(Q)) == 0
    finally:
        root.execute_command("ACL", "DELUSER", "narrow")
        root.flushall()


def test_a_progress_value_is_in_the_entrys_args(conn):
    enqueue(conn, 1)
    jobs.update_progress(conn, Q, "j0000", 42)
    [entry] = raw(conn)
    assert (entry["verb"], json.loads(entry["args"])) == ("progress", {"progress": 42})


def test_a_reason_no_server_can_hold_never_stops_the_verb(conn):
    """A lone surrogate (half an emoji pasted into a reason) is not UTF-8 nor an escaped
    byte: the entry says it as U+FFFD, and the verb runs and answers all the same."""
    conn.reason = "bounce \ud83d storm"
    with warnings.catch_warnings():
        warnings.simplefilter("error", audit.AuditNotWritten)
        pause(conn, Q)
    assert conn.client.hget(f"emq:{{{Q}}}:meta", "paused") == "1"
    [entry] = raw(conn)
    assert (entry["outcome"], entry["reason"]) == ("done", "bounce \ufffd storm")


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_server_error_reads_the_same_with_its_entry_beside_it(conn, executor):
    """An error reply of the transition reaches the caller as it does without the
    twin: the same class, the same text (redis-py's reading of an `ERR ...` reply)."""
    from emq_notebook.keyspace import base, lane_meta_key

    conn = conn.with_executor(executor)
    call = lambda: conn.run(  # noqa: E731
        "lane_set", [lane_meta_key(Q, "g"), base(Q)], ["g", "limit", "0"], verb="lane limit", queue=Q
    )
    with pytest.raises(emq.EMQError) as bare:
        call()
    with pytest.raises(emq.EMQError) as twin, audit.recorded(conn, "lane limit", Q) as rec:
        rec.within(call)
    assert (type(twin.value), str(twin.value)) == (type(bare.value), str(bare.value))
    assert str(twin.value) == "server error in lane limit: a lane limit must be a whole number >= 1"
    assert [e["outcome"] for e in raw(conn)] == ["error"]


def test_an_entry_the_twin_cannot_carry_is_written_after_the_bare_transition(conn, monkeypatch):
    def broken(self: audit.Record, gone: bool) -> list[str]:
        raise ValueError("cannot say")

    monkeypatch.setattr(audit.Record, "values", broken)
    pause(conn, Q)
    assert conn.client.hget(f"emq:{{{Q}}}:meta", "paused") == "1"
    assert [(e["verb"], e["outcome"]) for e in raw(conn)] == [("pause", "done")]


@pytest.mark.parametrize("older", ["emq_audited_pause", "emq_audited2_pause", "emq_audited3_pause"])
def test_a_client_of_an_older_twin_shape_finds_no_function_to_misread(conn, older):
    """The twin's shape is in its function's name (`scripts.AUDITED`): a client of an
    older shape (a four-value answer; the entry's values after 3-byte lengths; packed as
    one MessagePack argument) sharing
    the server calls its own name and is told the function is not there (it loads its
    own library and retries), instead of misreading this library's answer or sending it
    values it would misread, after the pause ran."""
    conn = conn.with_executor("function")
    pause(conn, Q)  # loads this library
    assert f"emq_{scripts.AUDITED}pause" != older
    with pytest.raises(redis.ResponseError, match="(?i)function not found"):
        conn.client.fcall(older, 2, f"emq:{{{Q}}}:meta", audit_key(Q), f"emq:{{{Q}}}:", b"")


def test_the_twin_takes_as_many_plain_values_as_a_record_says(conn):
    """The Lua side's AUDIT_VALUES is generated from the count the recorder sends."""
    said = audit.Record(conn, "data", Q, args={"payload": "{}"}, job="j1").values(True)
    assert len(said) == scripts.audit_values() and all(isinstance(v, str) for v in said)
    assert f"local AUDIT_VALUES = {len(said)}\n" in scripts.audited("pause")


def test_ids_given_as_a_generator_are_recorded_by_their_kind_not_their_address(conn):
    enqueue(conn, 3)
    words = admin.remove_jobs(conn, Q, (f"j000{i}" for i in range(2)))
    assert words == {"j0000": "removed", "j0001": "removed"}
    _, entry = raw(conn)
    assert json.loads(entry["args"]) == {"ids": "<generator>"}
    assert (entry["count"], json.loads(entry["ids"])["first"]) == ("2", ["j0000", "j0001"])


# -- what an entry says is true: a bulk verb's count, whatever ends it ----------------------


def test_an_obliterate_refused_part_way_records_and_tells_the_jobs_it_deleted(conn, connect_as):
    """Another operator resumes the queue between two calls of `obliterate_all`: the
    refusal carries the jobs deleted before it (`.done`, its line), and so does the
    closing entry, never a bare refused with count 0."""
    enqueue(conn, 25)
    pause(conn, Q)
    other = connect_as()

    def resumed_by_another_client(calls: int, _left: int) -> None:
        if calls == 2:
            admin.resume(other, Q)

    with pytest.raises(NotPaused) as caught:
        obliterate_all(conn, Q, budget=10, progress=resumed_by_another_client)
    assert caught.value.done == 20
    line = "refused: obliterate mailers — not_paused, after deleting 20 jobs"
    assert str(caught.value) == caught.value.line() == line
    closing = raw(conn)[-1]
    said = (closing["verb"], closing["outcome"], closing["count"])
    assert said == ("obliterate", "refused:not_paused", "20")
    assert conn.client.zcard("emq:{mailers}:pending") == 5
    row = audit.read(conn, Q).iloc[0]
    assert (row.outcome, row["count"]) == ("refused:not_paused", 20)


def test_one_obliterate_step_records_the_jobs_it_deleted(conn):
    enqueue(conn, 25)
    pause(conn, Q)
    assert obliterate(conn, Q, budget=10) == "more"
    assert [(e["outcome"], e["count"]) for e in raw(conn)][1:] == [("started", ""), ("done", "10")]
    assert conn.client.zcard("emq:{mailers}:pending") == 15


def test_the_seeds_obliterate_call_is_answered_as_ever(conn):
    """EchoMQ's own handle sends two arguments and reads 1 or 0 (the toolkit's fourth
    asks for the count too)."""
    enqueue(conn, 3)
    conn.client.hset("emq:{mailers}:meta", "paused", "1")
    script = scripts.source("obliterate")
    keys = ["emq:{mailers}:meta", "emq:{mailers}:"]
    assert conn.client.eval(script, 2, *keys, "", "2") == 1
    assert conn.client.eval(script, 2, *keys, "", "2", "1000000", "1") == [0, 1]


# each bulk verb: its call, its script, and the set whose size says the jobs it changed
BULK = {
    "drain": (lambda c, ids: admin.drain(c, Q, budget=5), "drain", "pending"),
    "obliterate_all": (lambda c, ids: obliterate_all(c, Q, budget=5), "obliterate", "pending"),
    "remove_jobs": (lambda c, ids: remove_jobs(c, Q, ids, budget=10), "remove_jobs", "pending"),
    "reprocess_dead": (lambda c, ids: admin.reprocess_dead(c, Q, budget=5), "reprocess_dead", "dead"),
}


@pytest.mark.parametrize("verb", sorted(BULK))
def test_a_bulk_verb_cut_on_the_wire_records_and_tells_the_jobs_it_had_changed(conn, monkeypatch, verb):
    """The wire fails at a bulk verb's third call, its reply lost: the closing entry is
    `unknown` with the jobs the two replies before said, and the `WireError` says them."""
    call, script, held = BULK[verb]
    ids = [jobs.enqueue(conn, Q, "{}", id=f"j{i:04d}", max_attempts=1) for i in range(30)]
    if held == "dead":
        for i in ids:
            jobs.claim(conn, Q)
            jobs.fail(conn, Q, i, "boom")
    pause(conn, Q)
    conn.load_scripts([conn.script(script)])  # no NOSCRIPT round among the calls counted
    key = f"emq:{{{Q}}}:{held}"
    send = conn.client.execute_command
    sent, before_third = [0], [0]

    def cut(*parts: Any, **kw: Any) -> Any:
        if str(parts[0]).upper() == "EVALSHA":
            sent[0] += 1
            if sent[0] == 3:
                before_third[0] = 30 - send("ZCARD", key)
                send(*parts, **kw)
                raise redis.ConnectionError("Connection closed by server.")
        return send(*parts, **kw)

    monkeypatch.setattr(conn.client, "execute_command", cut)
    with pytest.raises(WireError) as caught:
        call(conn, ids)
    monkeypatch.undo()
    done = before_third[0]
    assert done > 0 and caught.value.done == done
    assert str(caught.value).endswith(f", after {audit.entry._doing(_verb(verb))} {done} jobs")
    began, closing = raw(conn)[-2:]
    assert began["outcome"] == "started"
    assert (closing["outcome"], closing["count"]) == ("unknown", str(done))


def _verb(name: str) -> str:
    return {"drain": "drain", "remove_jobs": "remove", "reprocess_dead": "reprocess"}.get(name, "obliterate")


# a client that drains a queue in calls of 50 and stops for good after its second call
# (the test kills it there; left alone it ends by itself after 30 s)
_DRAINER = """
import sys, time
import emq_notebook as emq
from emq_notebook import admin

conn = emq.connect(sys.argv[1], name="doomed")

def progress(calls, drained):
    if calls == 2:
        print("drained", drained, flush=True)
        time.sleep(30)

admin.drain(conn, sys.argv[2], budget=50, progress=progress)
"""


def killed_after_its_first_line(*argv: str) -> list[str]:
    """Run `python -c *argv` as a client of its own and SIGKILL it once it prints its
    first line (after its second call, before its third); that line's words."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "EMQ_URL": ""}
    proc = subprocess.Popen([sys.executable, "-c", *argv], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().split()  # empty: it ended without printing
        if said:
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return said


def test_a_client_killed_in_the_middle_of_a_drain_leaves_its_started_entry(valkey):
    """A kernel SIGKILLed mid-drain (restart, OOM) writes no closing entry: its `started`
    entry is on the server, and every reader shows it (a queue new to this process)."""
    url, q = f"redis://127.0.0.1:{valkey.port}/0", "killed_mid_drain"
    conn = emq.connect(url)
    conn.client.delete(audit_key(q), *conn.scan(f"emq:{{{q}}}:*"))
    for i in range(200):
        jobs.enqueue(conn, q, "{}", id=f"j{i:04d}")
    said = killed_after_its_first_line(_DRAINER, url, q)
    assert said == ["drained", "100"], said
    [entry] = raw(conn, q)
    assert (entry["verb"], entry["outcome"], entry["conn"]) == ("drain", "started", "doomed")
    assert conn.client.zcard(f"emq:{{{q}}}:pending") == 100
    shown = frames.audit(conn)
    row = shown[shown.queue == q].iloc[0]
    assert (row.verb, row.outcome, row.conn) == ("drain", "started", "doomed")
    conn.client.delete(audit_key(q), *conn.scan(f"emq:{{{q}}}:*"))


_MOVER = """
import sys, time
import emq_notebook as emq
from emq_notebook import transfer

url, verb, src, dst, path = sys.argv[1:]
conn = emq.connect(url, name="doomed")

def progress(calls, done):
    if calls == 2:
        print(verb, done, flush=True)
        time.sleep(30)

if verb == "import":
    transfer.import_jobs(conn, dst, path, budget=50, progress=progress)
else:
    transfer.move_jobs(conn, src, dst, budget=50, progress=progress)
"""


@pytest.mark.parametrize("verb", ["import", "move"])
def test_a_client_killed_in_the_middle_of_an_import_or_a_move_leaves_its_started_entry(
    valkey, tmp_path, verb
):
    """The hostile pass of #41, as for drain: a client SIGKILLed after two calls of an
    import (into `dst`) or a move (`src` to `dst`) leaves its `started` entry on the
    stream that records it, and no entry claims a job it did not change (a move's new
    target records only its pause). A real server only: the fake lives in one process."""
    from dead_letters import written_rows

    from emq_notebook import transfer

    url, src, dst = f"redis://127.0.0.1:{valkey.port}/0", "killed_src", "killed_dst"
    conn = emq.connect(url)
    for q in (src, dst):
        conn.client.delete(audit_key(q), *conn.scan(f"emq:{{{q}}}:*"))
    written_rows(conn, src, "dead", [f"j{i:04d}" for i in range(300)])
    path = tmp_path / "dead.jsonl"
    transfer.export_jobs(conn, src, path)
    said = killed_after_its_first_line(_MOVER, url, verb, src, dst, str(path))
    assert said[:1] == [verb] and int(said[1]) > 0, said
    recorded_on = dst if verb == "import" else src
    [entry] = [e for e in raw(conn, recorded_on) if e["verb"] == verb]
    assert (entry["outcome"], entry["count"], entry["conn"]) == ("started", "", "doomed")
    assert all(e["verb"] in (verb, "pause") for q in (src, dst) for e in raw(conn, q))
    assert all(e["count"] in ("", "0") for q in (src, dst) for e in raw(conn, q))
    assert conn.client.zcard(f"emq:{{{dst}}}:{'pending' if verb == 'import' else 'dead'}") > 0
    shown = frames.audit(conn)
    row = shown[(shown.queue == recorded_on) & (shown.verb == verb)].iloc[0]
    assert (row.outcome, row.conn) == ("started", "doomed")
    for q in (src, dst):
        conn.client.delete(audit_key(q), *conn.scan(f"emq:{{{q}}}:*"))


def test_a_url_password_in_any_text_is_never_recorded(conn):
    """Every field goes through the one redaction of all output (`redaction.scrub`): a
    URL's password typed in a reason, an option, the connection's name or env, or the
    notebook's name is `***`, wherever in the text it stands, however many there are."""
    from emq_notebook import cli, grammar, verbs

    jobs.enqueue(conn, Q, "{}", id="a", max_attempts=1)
    conn.name, conn.env = "desk redis://n:pw-name-4Ty@x/0", "prod (rediss://e:pw-env-8Qa@y)"
    audit.set_notebook("failover.ipynb from redis://nb:pw-nb-2Lk@h/0")
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    verbs.execute(
        session, grammar.parse(f"pause {Q} --reason 'failing over to redis://admin:pw-r1Zq@replica/0'")
    )
    verbs.execute(session, grammar.parse(f"claim {Q}"))
    error = "lost redis://u:pw-a2Xw@h:6379/0 then valkey://v:pw-a3Yv@g/1?password=pw-a4Qq,"
    verbs.execute(session, grammar.parse(f"fail {Q} a '{error}'"))
    entries = raw(conn)
    text = json.dumps(entries)
    for secret in ("pw-r1Zq", "pw-a2Xw", "pw-a3Yv", "pw-a4Qq", "pw-name-4Ty", "pw-env-8Qa", "pw-nb-2Lk"):
        assert secret not in text, secret
    pause_entry, _, fail_entry = entries
    assert pause_entry["reason"] == "failing over to redis://admin:***@replica/0"
    assert json.loads(fail_entry["args"])["error"] == (
        "lost redis://u:***@h:6379/0 then valkey://v:***@g/1?password=***"
    )
    assert (pause_entry["conn"], pause_entry["env"]) == ("desk redis://n:***@x/0", "prod (rediss://e:***@y)")
    assert pause_entry["notebook"] == "failover.ipynb from redis://nb:***@h/0"


def test_a_bulk_run_refused_as_malformed_after_its_start_still_closes_it(conn, monkeypatch):
    """A `started` entry is always closed while its client lives: a run whose first call
    is refused before it goes (a BadInput raised under it) closes as `error`, count 0,
    rather than leave a start that reads as a run cut."""
    enqueue(conn, 3)
    run = conn.run

    def refused(*a: Any, **kw: Any) -> Any:
        raise emq.BadInput("refused before it went")

    monkeypatch.setattr(conn, "run", refused)
    with pytest.raises(BadInput):
        admin.drain(conn, Q)
    monkeypatch.setattr(conn, "run", run)
    assert [(e["verb"], e["outcome"], e["count"]) for e in raw(conn)] == [
        ("drain", "started", ""),
        ("drain", "error", "0"),
    ]
