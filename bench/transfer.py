"""Export and move of a big dead set (transfer.export_jobs, transfer.move_jobs), a PING
process alongside, against the floors on the same jobs: a plain pipelined HGETALL
written to the same kind of file (export), and DUMP + RESTORE of each row with its set
membership, pipelined, then DEL of the source rows (move). The export runs in a process
of its own, which reports how far its memory grew (peak RSS over its start), so the
figure is the export's alone.

The dead set: `--jobs` dead jobs (default 1,000,000) as bench/find.py fills it, 100-byte
payloads and error texts of 50 signatures.

    python bench/transfer.py [--jobs 1000000] [--repeat 1]
    # last line: worst server block: X ms (target 20 ms): R, with X the longest call of
    # ours by the server's own time on its CPU (`Measured`) and R = X / 20; the line
    # before it, the same by the wall clock (SLOWLOG, a PING process) and how long the
    # server waited off its CPU meanwhile (other work on this machine)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from common import CpuWait, args, connect, logging_slower_than, ratio_line, server, server_pid
from destroy import Pinger
from find import Q, fill_dead

from emq_notebook import transfer
from emq_notebook.keyspace import queue_key

PAGE = 1000


def on_cpu_ms(pid: int) -> float:
    """The server's main thread's time on a CPU so far (/proc/<pid>/schedstat), in ms."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


class Measured:
    """Each call of `conn` (a transition or a plain command) with the server's own time on
    its CPU meanwhile: the longest, and what it was. A wall clock (SLOWLOG, a PING) also
    counts the time the server waited for its CPU while other work on this machine ran;
    this does not. The other clients of the server (the PING process) add their own
    microseconds to whichever call they land in."""

    def __init__(self, conn, pid: int):
        self.pid, self.longest, self.what = pid, 0.0, ""
        conn.run = self._wrap(conn.run, lambda a: f"@{a[0]}")
        conn.command = self._wrap(conn.command, lambda a: str(a[0]))

    def _wrap(self, call, name):
        def measured(*a, **kw):
            before = on_cpu_ms(self.pid)
            reply = call(*a, **kw)
            took = on_cpu_ms(self.pid) - before
            if took > self.longest:
                self.longest, self.what = took, name(a)
            return reply

        return measured


def rss_kb(field: str) -> int:
    """This process's `VmRSS` (now) or `VmHWM` (its peak), in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def export_in_child(port: int, pid: int, path: str, out) -> None:
    """Export in a fresh process: its memory before and the peak after, the time, and
    its longest call by the server's own time (`Measured`)."""
    from common import connect as connect_to

    class Srv:
        pass

    srv = Srv()
    srv.port = port  # type: ignore[attr-defined]
    conn = connect_to(srv)
    measured = Measured(conn, pid)
    before = rss_kb("VmRSS")
    t = time.perf_counter()
    n = transfer.export_jobs(conn, Q, path)
    out.put((int(n), time.perf_counter() - t, rss_kb("VmHWM") - before, measured.longest, measured.what))


def export_ours(port: int, pid: int, path: str) -> tuple[int, float, int, float, str]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=export_in_child, args=(port, pid, path, out))
    child.start()
    got = out.get(timeout=3600)
    child.join()
    return got


def export_floor(conn, path: str) -> float:
    """The floor: the ids a page at a time, a pipelined HGETALL of each page, a line of
    JSON a job, no bound on what one HGETALL copies."""
    import json

    t = time.perf_counter()
    client = conn.client
    key = queue_key(Q, "dead")
    with open(path, "w") as f:
        start = 0
        while True:
            ids = client.zrange(key, start, start + PAGE - 1)
            if not ids:
                break
            pipe = client.pipeline(transaction=False)
            for i in ids:
                pipe.hgetall(queue_key(Q, "job:" + i))
            for i, row in zip(ids, pipe.execute(), strict=True):
                f.write(json.dumps({"id": i, **row}) + "\n")
            start += len(ids)
    return time.perf_counter() - t


def move_floor(conn, source: str, target: str) -> float:
    """The floor: DUMP each row, RESTORE it under the target's key with its set
    membership, DEL it here, a page of pipelined commands at a time; no journal."""
    t = time.perf_counter()
    client = conn.client
    key = queue_key(source, "dead")
    while True:
        page = client.zrange(key, 0, PAGE - 1, withscores=True)
        if not page:
            break
        pipe = client.pipeline(transaction=False)
        for i, _ in page:
            pipe.dump(queue_key(source, "job:" + i))
        dumps = pipe.execute()
        for (i, score), blob in zip(page, dumps, strict=True):
            pipe.restore(queue_key(target, "job:" + i), 0, blob, replace=True)
            pipe.zadd(queue_key(target, "dead"), {i: score})
            pipe.delete(queue_key(source, "job:" + i))
        pipe.zrem(key, *(i for i, _ in page))
        pipe.execute()
    return time.perf_counter() - t


def longest_ms(client) -> tuple[float, str]:
    """The longest call SLOWLOG kept since its last reset (ms, by the wall clock), and
    what it was."""
    entries = client.slowlog_get(100_000)
    if not entries:
        return 0.0, ""
    worst = max(entries, key=lambda e: e["duration"])
    return worst["duration"] / 1000, " ".join(str(p) for p in worst["command"].split()[:3])[:60]


def main() -> None:
    a = args(1_000_000, __doc__, repeat=1)
    folder = Path(tempfile.mkdtemp(prefix="emq-bench-transfer-"))
    with server(shared_cpu=a.shared_cpu) as srv:
        conn, pid = connect(srv), server_pid(srv)
        slow = logging_slower_than(srv, 1000)
        t = time.perf_counter()
        fill_dead(conn, a.jobs)
        print(f"filled {a.jobs:,} dead jobs in {time.perf_counter() - t:.1f}s", flush=True)
        best: dict[str, float] = {}
        worst = {"cpu": (0.0, ""), "slowlog": (0.0, "")}
        worst_ping, grew_kb, waited = 0.0, 0, 0.0

        def note(kind: str, ms: float, what: str) -> None:
            if ms > worst[kind][0]:
                worst[kind] = (ms, what)

        for run in range(a.repeat):
            slow.slowlog_reset()
            with Pinger(srv.port) as pinger, CpuWait(pid) as off:
                n, took, grew, cpu, what = export_ours(srv.port, pid, str(folder / "ours.jsonl"))
            assert n == a.jobs, n
            grew_kb, worst_ping, waited = (
                max(grew_kb, grew),
                max(worst_ping, pinger.worst),
                waited + off.waited_ms,
            )
            note("cpu", cpu, f"export: {what}")
            note("slowlog", *longest_ms(slow))
            best["export"] = min(best.get("export", took), took)
            floor = export_floor(conn, str(folder / "floor.jsonl"))
            best["export floor"] = min(best.get("export floor", floor), floor)
            # the move: ours out of Q, the floor back the other way (the same jobs)
            slow.slowlog_reset()
            target = f"{Q}.quarantine{run}"
            mover = connect(srv)
            measured = Measured(mover, pid)
            with Pinger(srv.port) as pinger, CpuWait(pid) as off:
                t = time.perf_counter()
                moved = transfer.move_jobs(mover, Q, target, pause=False)
                took = time.perf_counter() - t
            assert moved == a.jobs and not moved.stayed, (int(moved), moved.stayed)
            worst_ping, waited = max(worst_ping, pinger.worst), waited + off.waited_ms
            note("cpu", measured.longest, f"move: {measured.what}")
            note("slowlog", *longest_ms(slow))
            best["move"] = min(best.get("move", took), took)
            floor = move_floor(conn, target, Q)
            best["move floor"] = min(best.get("move floor", floor), floor)
            assert conn.client.zcard(queue_key(Q, "dead")) == a.jobs
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()
    print(f"jobs: {a.jobs:,} dead, 100-byte payloads, 50 error signatures")
    for k in ("export", "export floor", "move", "move floor"):
        print(f"{k:>13}: {best[k]:.2f}s, {a.jobs / best[k]:,.0f} jobs/s")
    print(
        f"{ratio_line('export/floor', best['export'] / best['export floor'], 'none; said')}, "
        f"{ratio_line('move/floor', best['move'] / best['move floor'], 'none; said')}"
    )
    print(f"export peak RSS growth: {grew_kb / 1024:.0f} MB (target < 200 MB)")
    print(
        f"by the wall clock: longest call {worst['slowlog'][0]:.1f} ms (SLOWLOG: {worst['slowlog'][1]}), "
        f"worst PING {worst_ping * 1000:.1f} ms; the server waited {waited:.0f} ms off its CPU meanwhile"
    )
    ms, what = worst["cpu"]
    print(f"longest call by the server's own time on its CPU: {what}")
    print(f"worst server block: {ms:.1f} ms (target 20 ms): {ms / 20:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
