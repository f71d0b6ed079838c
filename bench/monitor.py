"""What a scrape of the exporter costs: `--queues` queues (default 1,000) on one private
Valkey and on the local 3-primary Valkey Cluster (tests/cluster.py), side by side; then
the exporter's own memory over `--scrapes` scrapes (default 1,000).

Each queue holds a little of everything a scrape reads: 5 jobs enqueued, 2 completed,
1 failed into dead, 1 in flight, 1 pending (so its counters, both latency histograms
and the oldest dead age have something to read). Each side has an exporter of its own
in this process (`monitor.serve` on 127.0.0.1, a read-only connection); a scrape is an
HTTP GET of /metrics asking what Prometheus asks (OpenMetrics, gzip: the exporter answers
uncompressed), timed whole; a job goes through every queue after the first scrape, so each shows both its
latency histograms. The sides
alternate, `--repeat` times; each side's best counts. Its split is printed too: the read
of the server (`emq_scrape_duration_seconds`: health with the scrape's minutes, one
`@read_watch` call a queue; `frames.health` alone is timed beside it) and the rest (the exposition by
prometheus_client and HTTP); and a scrape's three parts timed apart on a collector of
their own, each the best of `--repeat`, by the clock and by this process's CPU time:
the read (`monitor.read`), the build of the metric families, and their writing in the
text format (`generate_latest`). The commands of a scrape are counted by the servers (`INFO
commandstats`; no SCAN in a scrape).

The memory run: `emq exporter` in a process of its own on another private Valkey with
`--memory-queues` queues (default 100), scraped `--scrapes` times while jobs come and go
(a claim and a complete on one queue each scrape, a queue obliterated and another made
every 50): its resident memory as its own `process_resident_memory_bytes` says it.

The last line: `worst scrape of 1,000 queues: X ms (target 300 ms): R`, X the slower
side's best, R = X / 300.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis
from common import commandstats as commands
from common import server, shared_cpu_flag
from prometheus_client import CollectorRegistry, generate_latest

import emq_notebook as emq
from emq_notebook import admin, frames, jobs, monitor
from emq_notebook.keyspace import base, job_key, queue_key

TESTS = Path(__file__).resolve().parent.parent / "tests"
TARGET_MS = 300.0
# what Prometheus 2.42 (Debian's) asks a target for: OpenMetrics first
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=1000, help="queues on each side (default 1,000)")
    p.add_argument("--repeat", type=int, default=5, help="scrapes of each side; the best counts (default 5)")
    p.add_argument("--scrapes", type=int, default=1000, help="scrapes of the memory run (default 1,000)")
    p.add_argument("--memory-queues", type=int, default=100, help="queues of the memory run (default 100)")
    shared_cpu_flag(p)
    return p.parse_args()


def stage(conn: emq.Connection, n: int, prefix: str = "m") -> list[str]:
    """`n` queues of 5 jobs: 2 completed, 1 failed into dead, 1 in flight, 1 pending."""
    names = [f"{prefix}{i:05d}" for i in range(n)]
    for start in range(0, n, 200):
        chunk = names[start : start + 200]
        pipe = conn.pipeline()
        for q in chunk:
            for j in range(5):
                jobs.enqueue(conn, q, "{}", id=f"j{j}", max_attempts=1, pipeline=pipe)
        pipe.execute()
        pipe = conn.pipeline()
        for q in chunk:
            for _ in range(4):
                keys = [queue_key(q, "pending"), queue_key(q, "active"), base(q)]
                conn.run("claim2", keys, [60_000, conn.token], verb="claim", queue=q, pipeline=pipe)
        pipe.execute()
        pipe = conn.pipeline()
        for q in chunk:
            for j in range(2):
                keys = [job_key(q, f"j{j}"), queue_key(q, "active"), base(q)]
                conn.run("complete", keys, [f"j{j}", conn.token], verb="complete", queue=q, pipeline=pipe)
            jobs.fail(conn, q, "j2", "SMTP 550", pipeline=pipe)
        pipe.execute()
    return names


def traffic(conn: emq.Connection, names: list[str]) -> None:
    """One job enqueued, claimed and completed on each queue, pipelined."""
    for start in range(0, len(names), 200):
        chunk = names[start : start + 200]
        pipe = conn.pipeline()
        for q in chunk:
            jobs.enqueue(conn, q, "{}", id="t", pipeline=pipe)
        pipe.execute()
        pipe = conn.pipeline()
        for q in chunk:
            keys = [queue_key(q, "pending"), queue_key(q, "active"), base(q)]
            conn.run("claim2", keys, [60_000, conn.token], verb="claim", queue=q, pipeline=pipe)
        claimed = pipe.execute()
        pipe = conn.pipeline()
        for q, got in zip(chunk, claimed, strict=True):
            keys = [job_key(q, got.id), queue_key(q, "active"), base(q)]
            conn.run("complete", keys, [got.id, conn.token], verb="complete", queue=q, pipeline=pipe)
        pipe.execute()


def get(url: str) -> tuple[float, float, int]:
    """(seconds, the read's seconds as the scrape says it, bytes of text) of one scrape."""
    request = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    t = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as reply:
        body = reply.read()
        zipped = reply.headers.get("Content-Encoding") == "gzip"
    took = time.perf_counter() - t
    text = (gzip.decompress(body) if zipped else body).decode()
    read = re.search(r"^emq_scrape_duration_seconds (\S+)$", text, re.M)
    up = re.search(r"^emq_up (\S+)$", text, re.M)
    if read is None or up is None or float(up.group(1)) != 1:
        raise SystemExit(f"the scrape of {url} did not read its server: {text[-500:]}")
    return took, float(read.group(1)), len(text)


class Side:
    def __init__(self, name: str, url: str, clients: list[redis.Redis]):
        self.name, self.clients = name, clients
        conn = emq.connect(url, read_only=True, socket_timeout=monitor.TIMEOUT_S)
        self.exporter = monitor.serve(conn, "127.0.0.1", 0)
        # health alone, on a connection of its own: the share of the read that is health's
        self.watcher = emq.connect(url, read_only=True)
        self.health: list[float] = []
        self.times: list[float] = []
        # this process's CPU time a scrape (the exporter's threads, and the GET's own):
        # what a scrape costs when nothing else wants the CPUs
        self.cpu: list[float] = []
        self.reads: list[float] = []
        self.size = 0
        self.sent: dict[str, int] = {}
        # a scrape's parts timed apart: (read, build, write), by the clock and CPU
        self.parted = monitor.collector(self.watcher)
        self.parts: list[tuple[float, ...]] = []

    def scrape(self, count: bool = False) -> None:
        before = commands(self.clients) if count else {}
        cpu = time.process_time()
        took, read, self.size = get(self.exporter.url)
        self.cpu.append(time.process_time() - cpu)
        if count:
            after = commands(self.clients)
            self.sent = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
            self.sent["info"] = self.sent.get("info", 0) - len(self.clients)
        self.times.append(took)
        self.reads.append(read)

    def split(self) -> None:
        """A scrape's read, build and write timed apart, by the clock and by CPU time."""
        c = self.parted
        marks = [(time.perf_counter(), time.process_time())]
        look = monitor.read(c.conn, {q: s.last - 2 for q, s in c._queues.items() if s.last is not None})
        marks.append((time.perf_counter(), time.process_time()))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Written(c._families(look)))
        marks.append((time.perf_counter(), time.process_time()))
        generate_latest(registry)
        marks.append((time.perf_counter(), time.process_time()))
        steps = list(zip(marks, marks[1:], strict=False))
        self.parts.append((*(b[0] - a[0] for a, b in steps), *(b[1] - a[1] for a, b in steps)))

    def look(self) -> None:
        t = time.perf_counter()
        frames.health(self.watcher)
        self.health.append(time.perf_counter() - t)

    def line(self, queues: int) -> str:
        best = min(self.times)
        read = self.reads[self.times.index(best)]
        sent = {k: n for k, n in self.sent.items() if n > 0}
        total = sum(sent.values())
        top = ", ".join(f"{k} {n:,}" for k, n in sorted(sent.items(), key=lambda kv: -kv[1])[:6])
        median = statistics.median(self.times) * 1000
        rest = (best - read) * 1000
        parts = [min(p[i] for p in self.parts) * 1000 for i in range(6)]
        return (
            f"{self.name}: scrape of {queues:,} queues {best * 1000:.0f} ms (best of {len(self.times)}, "
            f"median {median:.0f}; CPU {min(self.cpu) * 1000:.0f} ms): read {read * 1000:.0f} ms "
            "(frames.health alone, best: "
            f"{min(self.health) * 1000:.0f} ms), exposition and HTTP {rest:.0f} ms; "
            f"{self.size / 1e6:.1f} MB of text; {total:,} commands ({total / queues:.1f} a queue), "
            f"SCAN {sent.get('scan', 0)}: {top}; apart (best, CPU): read {parts[0]:.0f} ({parts[3]:.0f}), "
            f"build {parts[1]:.0f} ({parts[4]:.0f}), write {parts[2]:.0f} ({parts[5]:.0f}) ms"
        )


class Written:
    """A collector of families already built (what `generate_latest` writes)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def describe(self) -> list:
        return []

    def collect(self) -> list:
        return self.families


def side_by_side(opts: argparse.Namespace) -> float:
    sys.path.insert(0, str(TESTS))
    from cluster import LocalCluster

    with server(shared_cpu=opts.shared_cpu) as srv:
        cluster = LocalCluster().start()
        try:
            single_url = f"redis://127.0.0.1:{srv.port}/0"
            t = time.perf_counter()
            stage(emq.connect(single_url), opts.queues)
            stage(emq.connect(cluster.url), opts.queues)
            print(
                f"{opts.queues:,} queues staged on each side in {time.perf_counter() - t:.0f} s", flush=True
            )
            sides = [
                Side("one server", single_url, [redis.Redis(port=srv.port)]),
                Side("3-primary cluster", cluster.url, [redis.Redis(port=n.port) for n in cluster.nodes]),
            ]
            for side in sides:
                side.scrape()  # the first look finds the queues (one sweep); not counted
                side.split()
                side.parts.clear()
                side.cpu.clear()
                frames.health(side.watcher)
                side.times.clear()
                side.reads.clear()
            # a job through every queue since: each scrape now shows both histograms of each
            for url in (single_url, cluster.url):
                traffic(emq.connect(url), [f"m{i:05d}" for i in range(opts.queues)])
            for r in range(opts.repeat):
                for side in sides:
                    side.scrape(count=r == 0)
                    side.look()
                    side.split()
            for side in sides:
                print(side.line(opts.queues), flush=True)
                side.exporter.stop()
            return max(min(side.times) for side in sides) * 1000
        finally:
            cluster.stop()


def rss_mb(text: str) -> float:
    found = re.search(r"^process_resident_memory_bytes (\S+)$", text, re.M)
    if found is None:
        raise SystemExit("the exporter says no process_resident_memory_bytes")
    return float(found.group(1)) / 1e6


def memory(opts: argparse.Namespace) -> None:
    with server(shared_cpu=opts.shared_cpu) as srv:
        url = f"redis://127.0.0.1:{srv.port}/0"
        conn = emq.connect(url)
        names = stage(conn, opts.memory_queues, prefix="r")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH")) if p),
        }
        child = subprocess.Popen(
            [sys.executable, "-m", "emq_notebook.cli", "--url", url, "exporter", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            first = child.stderr.readline() if child.stderr else ""
            where = first.split("serving ", 1)[1].split(" ", 1)[0]
            marks = sorted(
                {m for m in (10, 100, opts.scrapes // 4, opts.scrapes // 2, opts.scrapes) if m >= 1}
            )
            seen: dict[int, float] = {}
            made = 0
            t = time.perf_counter()
            for i in range(1, opts.scrapes + 1):
                q = names[i % len(names)]
                jobs.enqueue(conn, q, "{}")
                got = jobs.claim(conn, q, 60_000)
                if got is not None:
                    jobs.complete(conn, q, got.id)
                if i % 50 == 0:
                    gone = names.pop(0)
                    admin.pause(conn, gone)
                    admin.obliterate_all(conn, gone, force=True)
                    made += 1
                    names += stage(conn, 1, prefix=f"n{made:04d}_")
                with urllib.request.urlopen(where, timeout=120) as reply:
                    text = reply.read().decode()
                if i in marks:
                    seen[i] = rss_mb(text)
            took = time.perf_counter() - t
        finally:
            child.terminate()
            child.wait(timeout=60)
        said = ", ".join(f"{mb:.1f} MB after {n:,}" for n, mb in seen.items())
        base_mark = 100 if 100 in seen else min(seen)
        print(
            f"exporter memory over {opts.scrapes:,} scrapes of {opts.memory_queues:,} queues "
            f"({took:.0f} s, {made} queues replaced): {said} "
            f"(last/{base_mark:,}: {seen[opts.scrapes] / seen[base_mark]:.2f})",
            flush=True,
        )


def main() -> None:
    opts = args()
    worst = side_by_side(opts)
    memory(opts)
    print(
        f"worst scrape of {opts.queues:,} queues: {worst:.0f} ms (target {TARGET_MS:.0f} ms): "
        f"{worst / TARGET_MS:.2f}"
    )


if __name__ == "__main__":
    main()
