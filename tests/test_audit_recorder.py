"""The recorder (emq_notebook/audit/recorder.py): one path writes every entry.

The audit trail wired into every writing verb (SPEC 12), on both backends.

A table over `catalogue.writers()`: every writing domain function, run from each
surface (Python, a magic, the `emq` shell, a panel's button, a runbook), leaves
exactly one entry with the right fields. A new writing verb without a row here
fails `test_every_writing_verb_has_a_row`, and one declared without the recorder
fails `test_every_writing_function_is_recorded`.
"""

from __future__ import annotations

import inspect
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import emq_notebook as emq
from emq_notebook import (
    admin,
    audit,
    catalogue,
    cli,
    connector,
    frames,
    grammar,
    jobs,
    lanes,
    repeat,
    scripts,
    transfer,
    verbs,
)
from emq_notebook.errors import NotPaused, ReadOnly
from emq_notebook.keyspace import audit_key, base, job_key, new_batch

Q = "wire"
REASON = "INC-30 wiring"


def dead(conn: emq.Connection, *ids: str) -> None:
    for i in ids:
        jobs.enqueue(conn, Q, "{}", id=i, max_attempts=1)
        jobs.claim(conn, Q)
        jobs.fail(conn, Q, i, "boom 42")


def claimed(conn: emq.Connection, *ids: str) -> None:
    for i in ids:
        jobs.enqueue(conn, Q, "{}", id=i)
        jobs.claim(conn, Q)


def pending(conn: emq.Connection, *ids: str, **kw: Any) -> None:
    for i in ids:
        jobs.enqueue(conn, Q, "{}", id=i, **kw)


@dataclass
class Row:
    """One writing function: the state it needs, its Python call, its command line, and
    what its entry says it touched."""

    setup: Callable[[emq.Connection], None]
    python: Callable[[emq.Connection], Any]
    line: str
    count: int
    ids: list[str] = field(default_factory=list)
    # the queue underneath: recorded only when typed or clicked (not from Python)
    underneath: bool = False


def nothing(conn: emq.Connection) -> None:
    pass


# an export file of two jobs, `a` and `b`, for the import row
EXPORTED = Path(tempfile.mkdtemp(prefix="emq-wiring-")) / "two.jsonl"
EXPORTED.write_text("".join(json.dumps({"id": i, "payload": "{}"}) + "\n" for i in ("a", "b")))


def cut_move(conn: emq.Connection) -> None:
    """Two dead jobs taken into the move journal by a client that went away (its lease
    passed): what a later call finishes."""
    dead(conn, "a", "b")
    batch = new_batch()
    conn.run("move_take", [base(Q)], ["dead", batch, "gone-client", 0, f"{Q}.q", "a", "b"])


ROWS: dict[str, Row] = {
    "admin.pause": Row(nothing, lambda c: admin.pause(c, Q), f"pause {Q}", 0),
    "admin.resume": Row(lambda c: admin.pause(c, Q), lambda c: admin.resume(c, Q), f"resume {Q}", 0),
    "admin.drain": Row(lambda c: pending(c, "a", "b"), lambda c: admin.drain(c, Q), f"drain {Q}", 2),
    "admin.obliterate": Row(
        lambda c: admin.pause(c, Q), lambda c: admin.obliterate(c, Q), f"obliterate {Q} --step", 0
    ),
    "admin.obliterate_all": Row(
        lambda c: (pending(c, "a", "b", "c"), admin.pause(c, Q)),
        lambda c: admin.obliterate_all(c, Q, budget=1),
        f"obliterate {Q} --budget 1",
        3,
    ),
    "moves.reprocess_dead": Row(
        lambda c: dead(c, "a", "b"), lambda c: admin.reprocess_dead(c, Q), f"reprocess {Q} --all", 2
    ),
    "moves.reprocess_jobs": Row(
        lambda c: dead(c, "a", "b"),
        lambda c: admin.reprocess_jobs(c, Q, ["a", "b"]),
        f"reprocess {Q} --error boom*",
        2,
        ["a", "b"],
    ),
    "moves.remove_jobs": Row(
        lambda c: dead(c, "a", "b"),
        lambda c: admin.remove_jobs(c, Q, ["a", "b"]),
        f"remove {Q} --error boom*",
        2,
        ["a", "b"],
    ),
    "jobs.enqueue": Row(
        nothing, lambda c: jobs.enqueue(c, Q, "{}", id="a"), f"enqueue {Q} {{}} --id a", 1, ["a"], True
    ),
    "jobs.claim": Row(lambda c: pending(c, "a"), lambda c: jobs.claim(c, Q), f"claim {Q}", 1, ["a"], True),
    "lanes.claim": Row(
        lambda c: pending(c, "a", group="g"),
        lambda c: lanes.claim(c, Q),
        f"claim {Q} --grouped",
        1,
        ["a"],
        True,
    ),
    "jobs.complete": Row(
        lambda c: claimed(c, "a"), lambda c: jobs.complete(c, Q, "a"), f"complete {Q} a", 1, ["a"], True
    ),
    "jobs.fail": Row(
        lambda c: claimed(c, "a"), lambda c: jobs.fail(c, Q, "a", "boom"), f"fail {Q} a boom", 1, ["a"], True
    ),
    "jobs.promote_job": Row(
        lambda c: pending(c, "a", delay_ms=3_600_000),
        lambda c: jobs.promote_job(c, Q, "a"),
        f"promote {Q} a",
        1,
        ["a"],
    ),
    "jobs.update_data": Row(
        lambda c: pending(c, "a"),
        lambda c: jobs.update_data(c, Q, "a", '{"b":1}'),
        f"data {Q} a '{{\"b\":1}}'",
        1,
        ["a"],
    ),
    "jobs.update_progress": Row(
        lambda c: pending(c, "a"),
        lambda c: jobs.update_progress(c, Q, "a", "50"),
        f"progress {Q} a 50",
        1,
        ["a"],
    ),
    "jobs.add_log": Row(
        lambda c: pending(c, "a"), lambda c: jobs.add_log(c, Q, "a", "a line"), f"log {Q} a a line", 1, ["a"]
    ),
    "jobs.remove_job": Row(
        lambda c: pending(c, "a"), lambda c: jobs.remove_job(c, Q, "a"), f"remove {Q} a", 1, ["a"]
    ),
    "jobs.reprocess_job": Row(
        lambda c: dead(c, "a"), lambda c: jobs.reprocess_job(c, Q, "a"), f"reprocess {Q} a", 1, ["a"]
    ),
    "lanes.set_limit": Row(nothing, lambda c: lanes.set_limit(c, Q, "g", 2), f"lane-set {Q} g --limit 2", 0),
    "lanes.pause_lane": Row(nothing, lambda c: lanes.pause_lane(c, Q, "g"), f"lane-set {Q} g --pause", 0),
    "lanes.resume_lane": Row(
        lambda c: lanes.pause_lane(c, Q, "g"),
        lambda c: lanes.resume_lane(c, Q, "g"),
        f"lane-set {Q} g --resume",
        0,
    ),
    "transfer.import_file": Row(
        nothing,
        lambda c: transfer.import_jobs(c, Q, EXPORTED),
        f"import {Q} --from {EXPORTED}",
        2,
        ["a", "b"],
    ),
    "transfer.move_jobs": Row(
        lambda c: dead(c, "a", "b"),
        lambda c: transfer.move_jobs(c, Q, f"{Q}.q"),
        f"move {Q} --to {Q}.q",
        2,
        ["a", "b"],
    ),
    "transfer.finish_moves": Row(
        cut_move, lambda c: transfer.finish_moves(c, Q), f"move {Q} --finish", 2, ["a", "b"]
    ),
    "repeat.run_now": Row(
        lambda c: repeat.register(c, Q, "nightly", 86_400_000, "{}"),
        lambda c: repeat.run_now(c, Q, "nightly"),
        f"run-now {Q} nightly",
        1,
    ),
}


def how(op: catalogue.Operation) -> audit.Recording:
    said = audit.recording(op.function)
    assert said is not None, f"{op.name} is declared writes=True but not @audit.audited"
    return said


def test_every_writing_verb_has_a_row():
    assert set(ROWS) == {op.name for op in catalogue.writers()}


@pytest.mark.parametrize("name", [op.name for op in catalogue.writers() if how(op).single])
def test_a_single_verb_runs_one_transition(conn, name, monkeypatch):
    """`single` says a verb runs exactly one transition: its audited twin writes the
    entry, so a second transition's outcome would go unrecorded."""
    row = ROWS[name]
    row.setup(conn)
    runs = []
    run = conn.run
    monkeypatch.setattr(conn, "run", lambda *a, **kw: runs.append(a[0]) or run(*a, **kw))
    row.python(conn)
    assert len(runs) == 1, runs
    verb = catalogue.OPERATIONS[name].verb
    [entry] = [e for _, e in conn.client.xrange(audit_key(Q)) if e["verb"] == verb][-1:]
    assert entry["outcome"] == "done"


@pytest.mark.parametrize("name", [op.name for op in catalogue.writers() if how(op).bulk])
def test_a_bulk_verb_writes_its_started_entry_before_its_first_writing_call(conn, name, monkeypatch):
    """A client killed in the middle of a bulk verb (kernel restart, OOM) leaves its
    `started` entry: it is on the server before the first writing call goes."""
    row = ROWS[name]
    row.setup(conn)
    conn.client.delete(audit_key(Q))
    seen: list[list[str]] = []
    run = conn.run

    def spied(name: str, *a: Any, **kw: Any) -> Any:
        if not scripts.read_only(name):
            seen.append([e["outcome"] for e in entries(conn)])
        return run(name, *a, **kw)

    monkeypatch.setattr(conn, "run", spied)
    row.python(conn)
    assert seen and seen[0] == ["started"], seen
    assert [e["outcome"] for e in entries(conn)] == ["started", "done"]


def test_every_contract_that_writes_is_audited_as_its_verb():
    """`@contract(..., writes=True)` declares; `@audit.audited` under it records: each
    writer has both, its entry's verb the contract's, and its module holds the recorded
    function (the contract's answer)."""
    assert catalogue.writers()
    for op in catalogue.writers():
        assert how(op).verb == op.verb, op.name
        module, _, function = op.name.partition(".")
        assert getattr(getattr(emq, module), function) is op.function, op.name


def test_no_reading_contract_is_audited():
    readers = [op for op in catalogue.OPERATIONS.values() if not op.writes]
    assert readers and not [op.name for op in readers if audit.recording(op.function)]


def entries(conn: emq.Connection) -> list[dict[str, str]]:
    return [fields for _, fields in conn.client.xrange(audit_key(Q))]


def typed(session: verbs.Session, conn: emq.Connection, line: str) -> Any:
    session.conn = conn
    return verbs.execute(session, grammar.parse(f"{line} --reason '{REASON}' --yes"))


def run_on(surface: str, conn: emq.Connection, row: Row) -> None:
    if surface == "python":
        with audit.because(REASON):
            row.python(conn)
    elif surface == "magic":
        from emq_notebook.magics import NotebookSession

        typed(NotebookSession(), conn, row.line)
    elif surface == "shell":
        typed(cli.ShellSession(say=lambda *_: None), conn, row.line)
    elif surface == "runbook":
        from emq_notebook.magics import NotebookSession

        audit.runbook("99-wiring", {"QUEUE": Q, "APPLY": True, "REASON": REASON})
        typed(NotebookSession(), conn, row.line)
    else:
        from emq_notebook.widgets.base import Panel

        panel = Panel()
        panel.conn = conn
        with audit.because(REASON):
            panel.attempt(row.python, conn)
        assert not isinstance(panel.last, Exception), panel.status_text


def typed_only(line: str) -> bool:
    """`--yes` is an option of the verbs that ask for it; the others refuse it."""
    return "--yes" in grammar.verb_help(line.split()[0])


SURFACES = ("python", "magic", "shell", "panel", "runbook")


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_writing_verb_from_each_surface_leaves_one_entry(conn, name, surface, monkeypatch, capsys):
    row = ROWS[name]
    if not typed_only(row.line):
        monkeypatch.setattr(grammar, "parse", lambda text, ns=None: _parse(text.replace(" --yes", "")))
    conn.name, conn.env = "desk", "staging"
    row.setup(conn)
    conn.client.delete(audit_key(Q))  # the setup's own entries
    run_on(surface, conn, ROWS[name])
    op = catalogue.OPERATIONS[name]
    if row.underneath and surface == "python":
        assert entries(conn) == []  # a worker's call: not an operator's
        return
    *began, entry = entries(conn)
    if how(op).bulk:  # its `started` entry first, which the closing one names
        [(began_id, _)] = conn.client.xrange(audit_key(Q), count=1)
        assert [(e["verb"], e["outcome"], e["surface"]) for e in began] == [(op.verb, "started", surface)]
        assert entry["started"] == began_id
    else:
        assert began == [] and "started" not in entry
    assert (entry["verb"], entry["outcome"]) == (op.verb, "done"), entry
    assert entry["surface"] == surface
    assert (entry["reason"], entry["who"], entry["conn"], entry["env"]) == (
        REASON,
        audit.who(),
        "desk",
        "staging",
    )
    assert entry["count"] == str(row.count)
    if row.ids:
        assert json.loads(entry["ids"])["first"] == row.ids
    if surface == "runbook":
        assert entry["notebook"].startswith("99-wiring.ipynb ")


_parse = grammar.parse


@pytest.mark.parametrize("surface", ("magic", "shell"))
def test_a_refusal_is_recorded_with_its_reason_and_printed_once(conn, surface):
    said: list[str] = []
    session = cli.ShellSession(say=said.append)
    if surface == "magic":
        from emq_notebook.magics import NotebookSession

        session = NotebookSession()
        session.out = said.append
    session.conn = conn
    refusal = verbs.execute(session, grammar.parse(f"obliterate {Q} --step --reason 'not yet'"))
    assert isinstance(refusal, NotPaused) and said == [refusal.line()]
    [entry] = entries(conn)
    assert (entry["verb"], entry["outcome"], entry["reason"], entry["surface"]) == (
        "obliterate",
        "refused:not_paused",
        "not yet",
        surface,
    )


def test_an_unwritten_entry_ends_the_commands_line(conn, monkeypatch):
    said: list[str] = []
    session = cli.ShellSession(say=said.append)
    session.conn = conn
    pending(conn, "a", "b")
    conn.client.set(audit_key(Q), "not a stream")  # XADD refuses: WRONGTYPE
    verbs.execute(session, grammar.parse(f"remove {Q} a"))  # written by the transition's call
    verbs.execute(session, grammar.parse(f"drain {Q} --yes"))  # written after the reply
    first = f"removed {Q} a · audit_failed: remove {Q} not recorded ("
    assert said[0].startswith(first) and "WRONGTYPE" in said[0], said
    assert f" · audit_failed: drain {Q} not recorded (" in said[1] and "WRONGTYPE" in said[1], said
    assert conn.client.exists(job_key(Q, "a"), job_key(Q, "b")) == 0


def test_reads_dry_runs_and_read_only_sessions_write_nothing(conn, backend, request):
    from tests.helpers import server_for, server_url

    dead(conn, "a", "b")
    conn.client.delete(audit_key(Q))
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    for line in (
        f"reprocess {Q} --error boom* --dry-run",
        f"remove {Q} --error boom* --dry-run",
        f"reprocess {Q} --all --dry-run",
        f"find {Q}",
        f"errors {Q}",
        f"status {Q}",
        f"jobs {Q}",
        f"audit {Q}",
        "queues",
    ):
        verbs.execute(session, grammar.parse(line))
    assert conn.client.exists(audit_key(Q)) == 0
    url = server_url(backend, server_for(backend, request))
    watching = emq.connect(url, embedded=None if url else "fake", read_only=True)
    session.conn = watching
    with pytest.raises(ReadOnly):
        verbs.execute(session, grammar.parse(f"pause {Q}"))
    with pytest.raises(ReadOnly):
        admin.pause(watching, Q)
    assert conn.client.exists(audit_key(Q)) == 0


def test_the_session_reason_and_audit_keep_come_from_the_settings(conn):
    said: list[str] = []
    session = cli.ShellSession(say=said.append)
    session.conn = conn
    verbs.execute(session, grammar.parse("reason bounce storm INC-7"))
    assert session.settings.reason == "bounce storm INC-7"
    session.settings.audit_keep = 5
    verbs.execute(session, grammar.parse(f"pause {Q}"))
    verbs.execute(session, grammar.parse(f"resume {Q} --reason 'this one'"))
    verbs.execute(session, grammar.parse("reason"))
    verbs.execute(session, grammar.parse("reason --clear"))
    verbs.execute(session, grammar.parse(f"pause {Q}"))
    assert [e["reason"] for e in entries(conn)] == ["bounce storm INC-7", "this one", ""]
    assert conn.audit_keep == 5
    assert said[-3:] == [
        "reason: bounce storm INC-7",
        "reason cleared",
        f"paused {Q}: claims answer empty; the backlog is untouched",
    ]


def test_a_python_session_reason_is_conn_reason(conn):
    conn.reason = "from python"
    admin.pause(conn, Q)
    assert entries(conn)[0]["reason"] == "from python"


def test_the_audit_verb_and_frames_audit_read_newest_first(conn):
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    for line in (f"pause {Q}", f"resume {Q}", "pause other"):
        verbs.execute(session, grammar.parse(line))
        time.sleep(0.002)  # entries of two streams in one millisecond have no order between them
    frame = verbs.execute(session, grammar.parse(f"audit {Q} --since 1h"))
    assert list(frame.verb) == ["resume", "pause"]
    assert list(frames.audit(conn).verb) == ["pause", "resume", "pause"]
    assert list(frames.audit(conn, limit=1).queue) == ["other"]


def test_queues_never_lists_a_queue_with_only_an_audit_stream(conn):
    admin.pause(conn, Q)
    admin.obliterate_all(conn, Q)
    assert conn.client.exists(audit_key(Q)) == 1
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    assert Q not in verbs.execute(session, grammar.parse("queues --rescan")).index
    assert Q not in frames.queues(conn, rescan=True)


def test_a_new_connection_names_itself_to_the_server(conn, backend, request):
    from tests.helpers import server_for, server_url

    url = server_url(backend, server_for(backend, request))
    fresh = emq.connect(url, embedded=None if url else "fake", name="desk")
    assert fresh.client.execute_command("CLIENT", "GETNAME") == connector.client_name(fresh)
    assert connector.client_name(fresh).endswith(":desk")


CALLS = [
    ((Q, "j1"), {}),
    ((Q, "j1", 7), {}),
    ((Q, "j1", 7, "n"), {}),
    ((Q,), {"job_id": "j1"}),
    ((Q, "j1"), {"hint": "y"}),
    ((Q, "j1", 7), {"note": "n", "hint": "y"}),
    ((), {"q": Q, "job_id": "j1", "limit": 9}),
]


@pytest.mark.parametrize(("a", "kw"), CALLS)
def test_a_records_args_are_the_options_given_however_the_call_gives_them(conn, a, kw):
    """The recorder's one-step binding of a plain call answers what `inspect.signature(fn)
    .bind` does: the options given, by position or by name, and not the defaults."""

    def verb(
        conn: emq.Connection, q: str, job_id: str, limit: int = 5, note: str | None = None, *, hint: str = "x"
    ):
        return None

    recorded = audit.audited("probe", job="job_id")(verb)
    conn.client.delete(audit_key(Q))
    recorded(conn, *a, **kw)
    bound = inspect.signature(verb).bind(conn, *a, **kw).arguments
    meant = {k: v for k, v in bound.items() if k not in ("conn", "q", "job_id")}
    [(_, fields)] = conn.client.xrange(audit_key(Q))
    assert json.loads(fields["args"]) == meant
    assert json.loads(fields["ids"])["first"] == ["j1"]


# -- writes made outside the %emq verbs: each recorded too (SPEC 12) ---------------------------


def test_the_repeat_registry_is_recorded_in_its_scripts_own_call(conn, monkeypatch):
    """`repeat.register` and `repeat.unregister` change what a queue will run: recorded
    from every surface, each in its transition's own call (one round trip)."""
    conn.client.delete(audit_key(Q))
    runs: list[str] = []
    run = conn.run
    monkeypatch.setattr(conn, "run", lambda *a, **kw: runs.append(a[0]) or run(*a, **kw))
    with audit.because("nightly digest"):
        repeat.register(conn, Q, "nightly", 86_400_000, "{}")
    assert repeat.unregister(conn, Q, "nightly") is True
    assert repeat.unregister(conn, Q, "nightly") is False
    assert runs == ["repeat_add", "repeat_remove", "repeat_remove"]
    said = [(e["verb"], e["outcome"], e["count"], json.loads(e["args"])) for e in entries(conn)]
    assert said == [
        ("repeat", "done", "0", {"every_ms": 86_400_000, "name": "nightly", "payload": "<2 chars>"}),
        ("unrepeat", "done", "0", {"name": "nightly"}),
        ("unrepeat", "done", "0", {"name": "nightly"}),
    ]
    assert entries(conn)[0]["reason"] == "nightly digest"


def test_lease_expiry_and_the_due_promotion_are_recorded_when_an_operator_types_them(conn):
    """A worker's housekeeping (`jobs.expire_leases`, `jobs.promote`) from Python is not
    recorded; typed by an operator (a surface: a runbook's step) it is, with its count."""
    from emq_notebook.runbook import Preview, Runbook

    for i in ("a", "b"):
        jobs.enqueue(conn, Q, "{}", id=i)
        jobs.claim(conn, Q, 1)  # a lease of 1 ms
    jobs.enqueue(conn, Q, "{}", id="c", delay_ms=1)
    time.sleep(0.01)
    conn.client.delete(audit_key(Q))
    assert jobs.expire_leases(conn, Q, budget=1) == 1  # a worker's pass
    assert entries(conn) == []
    book = Runbook("12-stuck-queue", conn, Q, True, {})
    book.step("expire leases", Preview("put 1 job back", count=1), lambda: jobs.expire_leases(conn, Q))
    book.step("promote overdue", Preview("make 1 job ready", count=1), lambda: jobs.promote(conn, Q))
    said = [(e["verb"], e["outcome"], e["count"], e["surface"]) for e in entries(conn)]
    assert said == [("expire", "done", "1", "runbook"), ("promote-due", "done", "1", "runbook")]


def test_a_write_on_another_queue_inside_a_recorded_call_gets_its_own_entry(conn):
    """The nesting rule merges only a call of the same verb on the same queue (an
    obliterate_all's calls of obliterate): a progress callback that pauses another
    queue, or resumes this one, is recorded by itself."""
    pending(conn, "a", "b", "c")
    other = "wire_other"
    conn.client.delete(audit_key(Q), audit_key(other))

    def progress(calls: int, drained: int) -> None:
        admin.pause(conn, other)
        admin.pause(conn, Q)

    admin.drain(conn, Q, budget=2, progress=progress)
    assert [(e["verb"], e["outcome"]) for e in entries(conn)] == [
        ("drain", "started"),
        ("pause", "done"),
        ("pause", "done"),
        ("drain", "done"),
    ]
    assert [e["verb"] for _, e in conn.client.xrange(audit_key(other))] == ["pause", "pause"]
    conn.client.delete(audit_key(other), f"emq:{{{other}}}:meta")
