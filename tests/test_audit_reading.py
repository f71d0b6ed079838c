"""Reading the audit trail is bounded by the bytes each call copies (`audit.read`,
`audit.reading._pages`), on both backends: a stream is read a page at a time, newest first, so
no XREVRANGE copies much over `defaults.BYTE_BUDGET` whatever the entries hold, and
the entries answered are exactly the newest `limit` of every stream read whole."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import emq_notebook as emq
from emq_notebook import audit
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.keyspace import audit_key

QUEUES = ("alpha", "beta")


def page_bytes(page: Any) -> int:
    """What one page read took: each entry's id, names and values."""
    return sum(audit.reading._entry_size(entry, fields) for entry, fields in page)


def spy(conn: emq.Connection, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of every page (`@read_audit` reply) read from now on, alone or in a pipeline."""
    sizes: list[int] = []
    page_of = audit.reading._page_of

    def measured(q: str, reply: Any) -> list:
        page = page_of(q, reply)
        sizes.append(page_bytes(page))
        return page

    monkeypatch.setattr(audit.reading, "_page_of", measured)
    return sizes


def whole(conn: emq.Connection, queues: tuple[str, ...], low: str = "-") -> list[tuple[str, str]]:
    """(queue, entry id) of every entry of `queues`, newest first, each stream read whole."""
    got = [(q, entry) for q in queues for entry, _ in conn.client.xrevrange(audit_key(q), "+", low)]
    return sorted(got, key=lambda pair: audit.entry_order(pair[1]), reverse=True)


def test_no_call_copies_much_over_the_byte_budget_whatever_the_entries_hold(conn, monkeypatch):
    # entries another node wrote, 20 KB each: 3 MB in all, which one XREVRANGE copied at once
    big = "x" * 20_000
    for i in range(150):
        conn.client.xadd(audit_key("alpha"), {"verb": "pause", "outcome": "done", "reason": f"{i} {big}"})
    everything = whole(conn, ("alpha",))
    sizes = spy(conn, monkeypatch)
    frame = audit.read(conn, "alpha", limit=150)
    monkeypatch.undo()
    assert list(zip(frame.queue, frame.entry, strict=True)) == everything
    assert [r.split(" ")[0] for r in frame.reason] == [str(i) for i in range(149, -1, -1)]
    one = max(page_bytes([e]) for e in conn.client.xrange(audit_key("alpha"), count=1))
    assert len(sizes) > 2
    assert max(sizes) <= BYTE_BUDGET + one, sizes


def test_the_newest_entries_of_every_stream_in_order_whatever_the_pages(conn, monkeypatch):
    monkeypatch.setattr(audit.reading, "FIRST_PAGE", 3)
    now = int(conn.client.time()[0]) * 1000
    # ids a second apart, the two streams interleaved unevenly: every 3rd entry is beta's
    for i in range(60):
        q = "beta" if i % 3 == 0 else "alpha"
        conn.client.xadd(audit_key(q), {"verb": "pause", "n": str(i)}, id=f"{now - 200_000 + i * 1000}-0")
    everything = whole(conn, QUEUES)
    for limit in (1, 2, 3, 4, 7, 25, 59, 60, 1000):
        frame = audit.read(conn, limit=limit)
        assert list(zip(frame.queue, frame.entry, strict=True)) == everything[:limit], limit
        assert list(zip(frame.queue, frame.entry, strict=True))[:3] == everything[: min(3, limit)]
    # since: halfway between two entries' times, so the read's own clock reading (a few
    # ms later than this one) keeps the same entries
    seconds, micros = conn.client.time()
    low = now - 200_000 + 40 * 1000 - 500
    since = audit.read(conn, since_ms=seconds * 1000 + micros // 1000 - low, limit=1000)
    assert list(zip(since.queue, since.entry, strict=True)) == everything[:20]
    assert since.entry.iloc[-1] == f"{now - 200_000 + 40 * 1000}-0"


def test_a_stream_is_read_no_further_than_the_limit_needs(conn, monkeypatch):
    monkeypatch.setattr(audit.reading, "FIRST_PAGE", 4)
    for i in range(40):
        conn.client.xadd(audit_key("alpha"), {"verb": "pause", "n": str(i)})
    calls: list[int] = []
    alone = audit.reading._page

    def counted(conn: emq.Connection, q: str, high: str, low: str, most: int, pipe: Any = None) -> Any:
        if pipe is None:
            calls.append(most)
        return alone(conn, q, high, low, most, pipe)

    monkeypatch.setattr(audit.reading, "_page", counted)
    assert list(audit.read(conn, "alpha", limit=4).entry) == [
        e for e, _ in conn.client.xrevrange(audit_key("alpha"), count=4)
    ]
    assert calls == []  # the first page, in the pipeline, held them all
    assert len(audit.read(conn, "alpha", limit=10)) == 10
    assert len(calls) == 1 and calls[0] <= 6  # one more page, of the 6 entries still wanted


def test_an_audit_key_of_another_type_is_a_one_line_error_naming_it(conn):
    conn.client.set(audit_key("alpha"), "written by hand")
    with pytest.raises(emq.EMQError, match=r"emq:audit:\{alpha\} is not read: WRONGTYPE"):
        audit.read(conn, "alpha")
    # a look at every queue finds streams only: the others are read
    conn.client.xadd(audit_key("beta"), {"verb": "pause"})
    assert list(audit.read(conn).queue) == ["beta"]


def test_entries_that_grow_from_page_to_page_are_read_within_the_budget_all_the_same(conn, monkeypatch):
    # another node's entries: 20 of 300 KB, then 40 small ones (the newest). A page sized
    # on the page before (2,000 entries of the small ones' size fit the budget) copied
    # the 20 large ones, 6 MB, in one XREVRANGE (30 of 2 MB held Valkey 40.6 ms)
    big = "\udcff" * 300_000
    for i in range(20):
        conn.client.xadd(audit_key("alpha"), {"verb": "pause", "reason": f"{i} {big}"})
    for i in range(20, 60):
        conn.client.xadd(audit_key("alpha"), {"verb": "pause", "reason": f"{i}"})
    everything = whole(conn, ("alpha",))
    sizes = spy(conn, monkeypatch)
    direct = conn.client.xrevrange  # a page read by the client itself, measured alike

    def xrevrange(*a: Any, **k: Any) -> Any:
        got = direct(*a, **k)
        sizes.append(page_bytes(got))
        return got

    monkeypatch.setattr(conn.client, "xrevrange", xrevrange)
    frame = audit.read(conn, "alpha", limit=1000)
    monkeypatch.undo()
    assert list(zip(frame.queue, frame.entry, strict=True)) == everything
    assert [r.split(" ")[0] for r in frame.reason] == [str(i) for i in range(59, -1, -1)]
    one = max(page_bytes([e]) for e in conn.client.xrange(audit_key("alpha")))
    assert max(sizes) <= BYTE_BUDGET + one, sizes


def test_a_stream_another_node_named_outside_the_queue_names_is_passed_over(conn):
    # `emq:audit:{a b}`, a name of bytes not UTF-8, one 100 KB long: a read of every
    # queue raised InvalidName at the first of them, so no queue's trail could be read
    for name in (b"a b", b"\xff\xfe", b"q" * 100_000, b"*[{"):
        conn.client.xadd(b"emq:audit:{" + name + b"}", {"verb": "pause"})
    conn.client.xadd(audit_key("beta"), {"verb": "pause"})
    # (the queues this process wrote to on this server are listed too: other tests')
    found = audit.streams(conn)
    assert "beta" in found and not {"a b", "*[{", "\udcff\udcfe"} & set(found)
    assert all(len(q) < 1000 for q in found)
    assert "beta" in set(audit.read(conn).queue)


# -- what a reader shows -------------------------------------------------------------------


def test_every_queues_read_sees_a_stream_another_client_made_a_moment_ago(conn, connect_as):
    """`frames.audit(conn)` with no queue finds the streams when asked (a SCAN then),
    never a list kept from an earlier read: another client's new queue is there at once."""
    from emq_notebook import admin, frames

    admin.pause(conn, "alpha")
    assert set(frames.audit(conn).queue) == {"alpha"}  # a first read of every queue
    other = connect_as()
    admin.pause(other, "fresh")
    # the queues this process wrote to are not what finds it: another process's are not here
    with audit.reading._written_lock:
        audit.reading._written.get(other.label, set()).discard("fresh")
    assert set(frames.audit(conn).queue) == {"alpha", "fresh"}
    assert "fresh" in audit.streams(conn)


def test_a_runs_started_entry_shows_only_while_no_closing_entry_names_it(conn):
    """A bulk run writes `started`, then its closing entry naming it: a reader shows the
    run once (the closing row), and a start with no closing entry (the run goes on, or
    its client was killed) as its own row, outcome `started`."""
    begun = audit.append(conn, "alpha", {"verb": "drain", "outcome": "started", "count": ""})
    audit.append(conn, "alpha", {"verb": "drain", "outcome": "done", "count": "7", "started": begun})
    audit.append(conn, "alpha", {"verb": "obliterate", "outcome": "started", "count": ""})
    frame = audit.read(conn, "alpha")
    assert list(zip(frame.verb, frame.outcome, frame["count"].astype(object), strict=True)) == [
        ("obliterate", "started", pd.NA),
        ("drain", "done", 7),
    ]
    assert list(audit.read(conn, "alpha", limit=2).verb) == ["obliterate", "drain"]


def test_a_value_holding_a_newline_never_forges_a_row(conn, capsys):
    """Every value is one line wherever a table or a listing shows it: a `fail` typed at
    the shell with an error text holding a newline and what reads as another entry, a
    reason holding a newline, an escape and a line separator: `emq audit`'s text and
    the frame's text/plain hold one line a row."""
    from emq_notebook import cli, frames, grammar, jobs, verbs

    jobs.enqueue(conn, "alpha", "{}", id="a", max_attempts=1)
    forged = "x\n1700000000 alpha pause done"
    with audit.surface("shell"), audit.because("r1\nr2\x1b[2J\u2028r3\r"):
        jobs.claim(conn, "alpha")
        jobs.fail(conn, "alpha", "a", forged)
    frame = frames.audit(conn, "alpha")
    assert frame.args[0] == {"error": "x\\n1700000000 alpha pause done"}
    assert frame.reason[0] == "r1\\nr2\\x1b[2J\\u2028r3\\r"
    with pd.option_context("display.width", 100_000, "display.max_columns", None):
        assert len(repr(frame).splitlines()) == 1 + len(frame) == 3
    session = cli.ShellSession()
    session.conn = conn
    cli.show(verbs.execute(session, grammar.parse("audit alpha")))
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 3 and not any(line.startswith("1700000000") for line in shown), shown
