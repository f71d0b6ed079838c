"""The worker loop (emq_notebook/worker.py).

The Worker's log of a claim refused at every poll (a bad row at the queue's head,
another node's): logged when it starts, at most once a minute while the same refusal
(its field and id) goes on, once when it clears; the Worker polls on as before. It logged
every poll before: about 20 warnings a second. No timing: the clock is the test's.

On both backends and both executors (`script` and `function`)."""

from __future__ import annotations

import logging

import pytest
from helpers import kept_conn

from emq_notebook import Worker, jobs, worker
from emq_notebook.keyspace import queue_key

Q = "mail"
P = f"emq:{{{Q}}}:"


@pytest.fixture
def conn(backend, request, kept_clients):
    return kept_conn(kept_clients, backend, request)


@pytest.fixture
def clock(monkeypatch):
    """The Worker's clock, set by the test: `clock.now = 61.0`."""

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    c = Clock()
    monkeypatch.setattr(worker, "clock", c, raising=False)
    return c


def bad_head(conn, jid: str, field: str = "attempts") -> None:
    """A row another node wrote at pending's head, its `field` no whole number."""
    conn.client.hset(P + "job:" + jid, mapping={"payload": "{}", field: "three"})
    conn.client.zadd(queue_key(Q, "pending"), {jid: -1})


def said(caplog) -> list[str]:
    out = [r.getMessage() for r in caplog.records if r.name == worker.__name__]
    caplog.clear()
    return out


def test_a_claim_refused_at_every_poll_is_logged_once_a_minute(conn, ex, clock, caplog):
    caplog.set_level(logging.INFO, logger=worker.__name__)
    bad_head(conn, "wide")
    w = Worker(ex, Q, lambda *a: None, idle_sleep=0)

    for _ in range(20):  # a second of polls
        assert w.run_one() is False
    first = said(caplog)
    assert len(first) == 1 and "refused a bad row" in first[0] and "attempts in wide" in first[0]
    assert w.bad_rows == 20

    clock.now += 59.0
    assert w.run_one() is False
    assert said(caplog) == []
    clock.now += 1.0
    assert w.run_one() is False
    again = said(caplog)
    assert len(again) == 1 and "still refused" in again[0] and "22 claims" in again[0]
    for _ in range(5):
        assert w.run_one() is False
    assert said(caplog) == []

    # the row mended: the claim serves it, the refusal said over once
    conn.client.hset(P + "job:wide", "attempts", "0")
    assert w.run_one() is True
    over = said(caplog)
    assert len(over) == 1 and "no longer refused" in over[0] and "attempts in wide" in over[0]
    assert w.completed == 1
    assert w.run_one() is False
    assert said(caplog) == []


def test_another_refusal_is_logged_when_it_starts(conn, ex, clock, caplog):
    """Another field or another row at the head is another refusal: the first said over,
    the new one said at once, whatever the minute."""
    caplog.set_level(logging.INFO, logger=worker.__name__)
    bad_head(conn, "wide")
    w = Worker(ex, Q, lambda *a: None, idle_sleep=0)
    assert w.run_one() is False
    assert len(said(caplog)) == 1
    conn.client.hset(P + "job:wide", mapping={"attempts": "0", "failures": "many"})
    assert w.run_one() is False
    assert w.run_one() is False
    changed = said(caplog)
    assert len(changed) == 2
    assert "no longer refused" in changed[0] and "attempts in wide" in changed[0]
    assert "refused a bad row" in changed[1] and "failures in wide" in changed[1]


def test_the_worker_polls_on_through_the_refusal(conn, ex, clock, caplog):
    """`run` keeps claiming as it did (its own housekeeping, then a claim, each poll): a job
    behind a refused head is not served, the head is left in place, `bad_rows` counts
    every poll, and the log says it once."""
    caplog.set_level(logging.INFO, logger=worker.__name__)
    bad_head(conn, "wide")
    jobs.enqueue(conn, Q, "{}")
    w = Worker(ex, Q, lambda *a: None, idle_sleep=0)
    polls = []

    class Enough(Exception):
        pass

    def housekeeping():
        polls.append(1)
        if len(polls) > 30:
            raise Enough

    w.housekeeping = housekeeping
    with pytest.raises(Enough):
        w.run()
    assert (w.bad_rows, w.completed) == (30, 0)
    assert conn.client.zscore(queue_key(Q, "pending"), "wide") == -1
    assert len(said(caplog)) == 1
