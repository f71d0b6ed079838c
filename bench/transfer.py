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
    # ours (SLOWLOG; the server's own time) and R = X / 20
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from common import args, connect, logging_slower_than, ratio_line, server
from destroy import Pinger
from find import Q, fill_dead

from emq_notebook import transfer
from emq_notebook.keyspace import queue_key

PAGE = 1000


def rss_kb(field: str) -> int:
    """This process's `VmRSS` (now) or `VmHWM` (its peak), in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def export_in_child(port: int, path: str, out) -> None:
    """Export in a fresh process: its memory before and the peak after, and the time."""
    from common import connect as connect_to

    class Srv:
        pass

    srv = Srv()
    srv.port = port  # type: ignore[attr-defined]
    conn = connect_to(srv)
    before = rss_kb("VmRSS")
    t = time.perf_counter()
    n = transfer.export_jobs(conn, Q, path)
    out.put((int(n), time.perf_counter() - t, rss_kb("VmHWM") - before))


def export_ours(port: int, path: str) -> tuple[int, float, int]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=export_in_child, args=(port, path, out))
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
    """The longest call SLOWLOG kept since its last reset (ms), and what it was."""
    entries = client.slowlog_get(100_000)
    if not entries:
        return 0.0, ""
    worst = max(entries, key=lambda e: e["duration"])
    return worst["duration"] / 1000, " ".join(str(p) for p in worst["command"].split()[:3])[:60]


def main() -> None:
    a = args(1_000_000, __doc__, repeat=1)
    folder = Path(tempfile.mkdtemp(prefix="emq-bench-transfer-"))
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        slow = logging_slower_than(srv, 1000)
        t = time.perf_counter()
        fill_dead(conn, a.jobs)
        print(f"filled {a.jobs:,} dead jobs in {time.perf_counter() - t:.1f}s", flush=True)
        best: dict[str, float] = {}
        worst_ms, worst_what, worst_ping, grew_kb = 0.0, "", 0.0, 0
        for run in range(a.repeat):
            slow.slowlog_reset()
            with Pinger(srv.port) as pinger:
                n, took, grew = export_ours(srv.port, str(folder / "ours.jsonl"))
            assert n == a.jobs, n
            grew_kb = max(grew_kb, grew)
            worst_ping = max(worst_ping, pinger.worst)
            ms, what = longest_ms(slow)
            if ms > worst_ms:
                worst_ms, worst_what = ms, f"export: {what}"
            best["export"] = min(best.get("export", took), took)
            best["export floor"] = min(
                best.get("export floor", 1e9), export_floor(conn, str(folder / "floor.jsonl"))
            )
            # the move: ours out of Q, the floor back the other way (the same jobs)
            slow.slowlog_reset()
            target = f"{Q}.quarantine{run}"
            with Pinger(srv.port) as pinger:
                t = time.perf_counter()
                moved = transfer.move_jobs(conn, Q, target, pause=False, budget=transfer.ID_BUDGET)
                took = time.perf_counter() - t
            assert moved == a.jobs and not moved.stayed, (int(moved), moved.stayed)
            worst_ping = max(worst_ping, pinger.worst)
            ms, what = longest_ms(slow)
            if ms > worst_ms:
                worst_ms, worst_what = ms, f"move: {what}"
            best["move"] = min(best.get("move", took), took)
            best["move floor"] = min(best.get("move floor", 1e9), move_floor(conn, target, Q))
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
    print(f"worst PING during ours: {worst_ping * 1000:.1f} ms; longest call: {worst_what}")
    print(f"worst server block: {worst_ms:.1f} ms (target 20 ms): {worst_ms / 20:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
