"""Regression tests for what the soak (tests/soak/) found, one per bug, on both
backends. Each fault is injected at the client (a reply read that fails after the
server ran the command, or a failed pause read), so the fake runs it too.
"""

from __future__ import annotations

import pytest
import redis as redis_py

from emq_notebook import admin, jobs, lanes
from emq_notebook.errors import WireError
from emq_notebook.keyspace import queue_key

Q = "soaked"


def lose_replies(conn, monkeypatch, command: str = "EVALSHA", times: int = 1) -> list:
    """The next `times` replies to `command` are lost: the server ran it, then the
    connection dropped before the answer was read (what the soak's proxy does)."""
    real = conn.client.parse_response
    lost: list = []

    def parse(connection, command_name, **options):
        reply = real(connection, command_name, **options)
        if command_name == command and len(lost) < times:
            lost.append(reply)
            connection.disconnect()
            raise redis_py.ConnectionError("injected: the connection dropped before the reply")
        return reply

    monkeypatch.setattr(conn.client, "parse_response", parse)
    return lost


def fail_pause_reads(conn, monkeypatch) -> list:
    """Every HGET of the paused field meets a wire fault; other commands go through."""
    real = conn.client.execute_command
    seen: list = []

    def flaky(*args, **kwargs):
        if args[:1] == ("HGET",) and args[-1] == "paused":
            seen.append(args)
            raise redis_py.ConnectionError("injected: connection reset during the pause read")
        return real(*args, **kwargs)

    monkeypatch.setattr(conn.client, "execute_command", flaky)
    return seen


def active(conn) -> list[str]:
    return conn.client.zrange(queue_key(Q, "active"), 0, -1)


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


def test_a_claim_whose_reply_is_lost_is_not_sent_again(conn, monkeypatch):
    for i in range(3):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i}")
    lost = lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        jobs.claim(conn, Q, 60_000)
    # the one claim that ran took the head; no second job was taken behind the caller's back
    assert [r[0] for r in lost] == ["j_0"]
    assert active(conn) == ["j_0"]
    assert conn.client.zrange(queue_key(Q, "pending"), 0, -1) == ["j_1", "j_2"]


def test_a_complete_whose_reply_is_lost_raises_rather_than_answering_gone(conn, monkeypatch):
    jobs.enqueue(conn, Q, "x", id="j_1")
    jobs.claim(conn, Q, 60_000)
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):  # unknown outcome, not a false `Gone`
        jobs.complete(conn, Q, "j_1")
    assert not conn.client.exists(queue_key(Q, "job:j_1"))  # it did complete, once


def test_a_removal_whose_reply_is_lost_is_never_reported_gone(conn, monkeypatch):
    jobs.enqueue(conn, Q, "x", id="j_1")
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        admin.remove_jobs(conn, Q, ["j_1"])
    assert admin.remove_jobs(conn, Q, ["j_1"]) == {"j_1": "gone"}  # asked again, knowingly


def test_a_drain_whose_reply_is_lost_does_not_lose_its_count_silently(conn, monkeypatch):
    for i in range(30):
        jobs.enqueue(conn, Q, str(i), id=f"j_{i:02d}")
    steps: list = []
    lose_replies(conn, monkeypatch)
    with pytest.raises(WireError):
        admin.drain(conn, Q, budget=10, progress=lambda calls, total: steps.append(total))
    # the first call drained 10 and its answer was lost: the drain stops there, it does not
    # go on answering a total that leaves those 10 out
    assert steps == []
    assert conn.client.zcard(queue_key(Q, "pending")) == 20


# Bug 2: a wire fault on the claim's pause read reads as "not paused" (EchoMQ's own
# paused?/2), and the gate-less @claim2 then served a PAUSED queue once the fault
# had passed. The claim that goes on now reads the paused field itself.


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "grouped"])
def test_a_faulted_pause_read_never_serves_a_paused_queue(conn, monkeypatch, grouped):
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme" if grouped else None)
    admin.pause(conn, Q)
    seen = fail_pause_reads(conn, monkeypatch)
    claim = lanes.claim if grouped else jobs.claim
    assert claim(conn, Q, 60_000) is None
    assert seen and active(conn) == []
    monkeypatch.undo()
    admin.resume(conn, Q)
    assert claim(conn, Q, 60_000)[0] == "j_1"


@pytest.mark.parametrize("grouped", [False, True], ids=["flat", "grouped"])
def test_a_faulted_pause_read_on_a_running_queue_still_claims(conn, monkeypatch, grouped):
    # EchoMQ's own rule stands: the fault reads as not paused and the claim goes on
    jobs.enqueue(conn, Q, "x", id="j_1", group="acme" if grouped else None)
    fail_pause_reads(conn, monkeypatch)
    assert jobs.paused_for_claim(conn, Q) is None  # faulted: falsy, "not paused"
    claim = lanes.claim if grouped else jobs.claim
    assert claim(conn, Q, 60_000)[0] == "j_1"
