"""The queues of one server as this process knows them (emq_notebook/directory.py).

Do no harm while watching (SPEC 11, issue 27 item 4): a dashboard refresh, a
HealthView tick, `frames.health()`, `%emq queues` and completion send a number of
commands that depends on the queues shown, never on the keys in the database.

On the embedded fakeredis and on a PRIVATE real Valkey (`harm`): after a first look
has found the queues, a look sends no SCAN and the same commands with 200,000
foreign keys beside the queues as with none. Counted (`INFO commandstats` on
Valkey, a spy on the client on the fake), never timed. The directory's clock is
the test's, so a background sweep runs only when the test moves it on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harm import bounded, sent

import emq_notebook as emq
from emq_notebook import admin, directory, frames, jobs, lanes
from emq_notebook.completion import Completer
from emq_notebook.grammar import parse
from emq_notebook.verbs import Session, execute
from emq_notebook.widgets import Dashboard, HealthView

FOREIGN = 200_000
# on the embedded fake the count is the same at any size: fewer keys keep the suite fast
FOREIGN_ON_FAKE = 20_000


class Clock:
    """The directory's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def watched(harm) -> Iterator[tuple[emq.Connection, Any, Clock]]:
    """(a flushed connection whose directory runs on a test clock, its private server
    or None, the clock)."""
    conn, srv = harm
    clock = Clock()
    conn.directory.clock = clock
    yield conn, srv, clock
    conn.directory.wait(30)


def stage(conn: emq.Connection) -> None:
    """Queues with something of everything: a backlog, dead jobs, a lane, a pause."""
    for i in range(3):
        jobs.enqueue(conn, "mail", f'{{"n": {i}}}', max_attempts=1)
    got = jobs.claim(conn, "mail", 60_000)
    jobs.fail(conn, "mail", got.id, "SMTP 550")
    jobs.enqueue(conn, "reports", "{}", group="acme")
    lanes.set_limit(conn, "reports", "acme", 2)
    jobs.enqueue(conn, "held", "{}")
    admin.pause(conn, "held")


def foreign_keys(conn: emq.Connection, srv: Any, n: int = FOREIGN) -> None:
    """`n` keys of another application (fewer on the fake), none of them a queue's."""
    n = n if srv is not None else min(n, FOREIGN_ON_FAKE)
    for start in range(0, n, 10_000):
        conn.client.mset({f"other:app:{i}": "v" for i in range(start, min(n, start + 10_000))})


def completion_of_a_queue_slot(conn: emq.Connection) -> Callable[[], list[str]]:
    session = Session(say=lambda _: None)
    session.conn = conn

    def complete() -> list[str]:
        return Completer(session).words("status ")  # a fresh completer: no cache of its own

    return complete


@pytest.fixture
def views() -> Iterator[list]:
    """The panels a test opens, closed after it (no live panel outlives its test)."""
    opened: list = []
    yield opened
    for view in opened:
        view.close()


def looks(conn: emq.Connection, views: list) -> dict[str, Callable[[], Any]]:
    """Every way of watching, each to be called again and again."""
    d = Dashboard(conn, auto=False)
    view = HealthView(conn)
    views += [d, view]
    session = Session(say=lambda _: None)
    session.conn = conn
    return {
        "dashboard refresh": d.refresh,
        "HealthView refresh": view.refresh,
        "frames.health": lambda: frames.health(conn),
        "%emq queues": lambda: execute(session, parse("queues")),
        "%emq health": lambda: execute(session, parse("health")),
        "completion": completion_of_a_queue_slot(conn),
    }


def test_watching_costs_the_same_commands_and_no_scan_beside_foreign_keys(watched, views):
    conn, srv, _ = watched
    stage(conn)
    watching = bounded(lambda: looks(conn, views), srv, what="opening the views")
    alone = {name: sent(conn, srv, look) for name, look in watching.items()}
    bounded(lambda: foreign_keys(conn, srv), srv, what="storing the foreign keys")
    beside = {name: sent(conn, srv, look) for name, look in watching.items()}
    for name in watching:
        assert "scan" not in beside[name], name
        assert beside[name] == alone[name], name
    assert alone["dashboard refresh"]["evalsha"] >= 3  # it did read the queues: a call each
    assert list(frames.counts(conn).index) == ["held", "mail", "reports"]


def test_opening_finds_the_queues_once_in_a_few_large_scan_steps(watched):
    conn, srv, _ = watched
    stage(conn)
    foreign_keys(conn, srv)
    fresh = emq.connect(f"redis://127.0.0.1:{srv.port}/0") if srv else emq.connect(embedded="fake")
    fresh.directory.clock = Clock()
    first = sent(fresh, srv, lambda: Dashboard(fresh, auto=False).close())
    # COUNT 10,000 a call: about one call per 10,000 keys, not one per 1,000
    assert 1 <= first["scan"] <= conn.client.dbsize() // directory.SCAN_COUNT + 2
    assert sent(fresh, srv, lambda: frames.health(fresh))["scan"] == 0


def test_a_queue_enqueued_here_is_listed_without_a_rescan(watched):
    conn, srv, _ = watched
    stage(conn)
    assert frames.queues(conn) == ["held", "mail", "reports"]
    said = sent(conn, srv, lambda: jobs.enqueue(conn, "fresh", "{}"))
    assert "scan" not in said
    listed = sent(conn, srv, lambda: frames.counts(conn))
    assert "scan" not in listed and "fresh" in frames.queues(conn)
    # a queue another process made is found by a rescan (or the next background sweep)
    conn.client.hset("emq:{elsewhere}:meta", "created_at", "1")
    assert "elsewhere" not in frames.queues(conn)
    session = Session(say=lambda _: None)
    session.conn = conn
    assert "elsewhere" in execute(session, parse("queues --rescan")).index


def test_a_queue_found_with_no_key_left_leaves_the_list(watched):
    conn, srv, _ = watched
    stage(conn)
    assert "held" in frames.queues(conn)
    for key in conn.client.scan_iter(match="emq:{held}:*"):
        conn.client.delete(key)  # another process obliterated it
    assert list(frames.counts(conn).index) == ["mail", "reports"]
    assert frames.queues(conn) == ["mail", "reports"]


def test_a_background_sweep_runs_at_most_once_a_minute(watched):
    conn, srv, clock = watched
    stage(conn)
    assert sent(conn, srv, lambda: frames.queues(conn))["scan"] >= 1  # the first look
    conn.client.hset("emq:{elsewhere}:meta", "created_at", "1")

    def look() -> list[str]:
        found = frames.queues(conn)
        conn.directory.wait(30)
        return found

    clock.now += 30
    assert sent(conn, srv, look)["scan"] == 0 and "elsewhere" not in frames.queues(conn)
    clock.now += 31  # a minute since the first sweep ended: one is due
    said = sent(conn, srv, look)
    assert said["scan"] >= 1 and conn.directory.sweeps == 2
    assert "elsewhere" in frames.queues(conn)  # found by the sweep in the background
    clock.now += 59  # within the minute after that sweep ended: none
    assert sent(conn, srv, look)["scan"] == 0 and conn.directory.sweeps == 2
    clock.now += 2
    assert sent(conn, srv, look)["scan"] >= 1 and conn.directory.sweeps == 3


def test_a_background_sweep_never_makes_a_look_wait_or_scan(watched):
    """With a sweep due, the look that starts it answers what is known at once; the
    SCAN calls are the sweep's thread's, one a step."""
    conn, srv, clock = watched
    stage(conn)
    foreign_keys(conn, srv, 50_000)
    frames.queues(conn)
    clock.now += directory.RESCAN_EVERY_S
    steps: list[str] = []
    real = directory.Directory._scan_once

    def counted(self: Any, sweep: Any) -> None:
        import threading

        steps.append(threading.current_thread().name)
        real(self, sweep)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(directory.Directory, "_scan_once", counted)
        assert frames.queues(conn) == ["held", "mail", "reports"]
        conn.directory.wait(30)
    assert len(steps) >= 2 and set(steps) == {"emq-directory"}


def test_a_queue_named_through_one_connection_is_known_to_the_others_of_the_process(watched):
    conn, srv, _ = watched
    other = emq.connect(f"redis://127.0.0.1:{srv.port}/0") if srv else emq.connect(embedded="fake")
    assert frames.queues(other) == []  # its first look
    jobs.enqueue(conn, "made-here", "{}")
    said = sent(other, srv, lambda: frames.queues(other))
    assert "scan" not in said and frames.queues(other) == ["made-here"]
    # a twin with another executor shares its connection's directory
    assert conn.with_executor("function").directory is conn.directory
