"""Do no harm (issue 27): an adversarial corpus run through every verb that
reads or writes, on a private Valkey, with a PING process alongside; after each verb
SLOWLOG (every command logged: `slowlog-log-slower-than 0`, RESET before the verb)
says the longest single command the server ran for it, which is the longest any other
client of that server waited on us.

The corpus, in one queue (`harm`) beside `--queues` other queues and `--foreign` keys of
another application: `--jobs` jobs (40% pending, 20% scheduled, 30% dead, 10% in 100
lanes and in one lane whose name is outside the name gate); the dead hold log-style
texts (timestamps, IPv4 and IPv6 addresses with ports, numbers as 1,234.50, -0x1F,
1e-9, UUIDs), 100 KB tracebacks with non-ASCII characters, texts of bytes that are not
UTF-8, and at their head `--bad-rows` rows no transition can read and as many members
with no row; members whose ids another node wrote (`ord:17`, `a b`, `x:logs`, whose
row key is job x's logs list, and 200 ids of 20 KB); jobs with a `--log-lines`-line
`:logs` list and a 20 MB payload; a repeat registry of `--jobs`/10 repeatables and four
names another node wrote (a 20 MB definition, one not JSON, a JSON list, a name with no
definition). The verbs: every read (counts, health, status, queues, completion, the
dashboard's refresh with the queue open, its Repeatables tab, the repeat listing,
snapshot, find with globs of many stars and classes, errors, get_job, get_job_logs),
every per-job verb, the dry runs, the filtered `%emq reprocess/remove --error` paths,
reprocess_dead plain, paced and trial, reprocess_jobs, remove_jobs, a Worker's promote,
expire and claim, enqueue_many, drain and obliterate. A 100,000-character glob is
refused before any I/O (0 commands sent).

    python bench/harm.py [--jobs 1000000] [--foreign 2000000] [--queues 1000] [--small]
                         [--allocator jemalloc|libc] [--wide]
    # per verb: its longest server call (the command), the worst PING meanwhile, the
    # commands it sent; the dashboard's commands per refresh; the last line:
    # worst server block: X ms (target 20 ms): R      (R = X / 20)

Sizes not given follow `--jobs` (the full corpus at 1,000,000); `--small` is
`--jobs 20000`, a run of a minute. Every run ends with rows another node made wide
(fields of 1 MiB-1, each under the longest a read copies; `wide`): read by
`frames.rows` (64 such fields), a snapshot (8), find and errors; `--wide` runs those
alone, a run of seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from common import CpuWait, Pinger, connect, payload, server, server_pid, shared_cpu_flag

from emq_notebook import admin, frames, jobs, repeat, scripts, triage
from emq_notebook.completion import Completer
from emq_notebook.defaults import MAX_PAYLOAD
from emq_notebook.errors import BadInput, EMQError
from emq_notebook.grammar import parse
from emq_notebook.keyspace import base
from emq_notebook.verbs import Session, execute
from emq_notebook.widgets import Dashboard
from emq_notebook.worker import Worker

Q = "harm"
P = base(Q)
FULL = 1_000_000
TARGET_MS = 20.0
SLOWLOG_LEN = 1_000_000
LANES = 100
ODD_LANE = "tenant 42"  # a lane name another node wrote, outside the name gate
HOUR = 3_600_000
PIPE = 5_000
BIG_PAYLOAD = 20 * 2**20
TRACEBACKS, TRACEBACK_BYTES = 100, 100_000
NOT_UTF8 = 1_000
# ids another node wrote: addressed as they are, except `x:logs` (job x's logs list)
FOREIGN_IDS = ("ord:17", "a b", "huge:logs")
# a repeatable's definition as @repeat_add writes it
REPEAT_DEF = '{"every":60000,"payload":"{\\"report\\":1}","group":"","max_attempts":"3"}'
# ids another node made long: a move hashes and copies an id at each key it names
LONG_IDS, LONG_ID = 200, 20_000

GLOBS = {
    "classes": "*[Tt]imeout*[Rr]etry*",
    "many stars": "*" + "*".join("abcdefghijklmnopqrstuvwxyz" * 4) + "*",
    "digit classes": "*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*[0-9]*x",
    "999 ?": "?" * 999,
    "a log line": "2024-05-01T12:3?:*Z upstream 10.*.*.*:6379 *",
    "negated classes": "*[!a-z]" * 124 + "*",
}


def options() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=FULL, help="jobs in the harm queue (default 1,000,000)")
    p.add_argument("--foreign", type=int, help="keys of another application (default 2 x jobs)")
    p.add_argument("--queues", type=int, help="other queues, one job each (default 1,000 at full size)")
    p.add_argument("--bad-rows", type=int, help="bad rows, and as many ghosts, at the head of dead")
    p.add_argument("--log-lines", type=int, help="lines of each huge job's :logs list")
    p.add_argument("--small", action="store_true", help="a quick run: --jobs 20000, the rest following")
    p.add_argument(
        "--wide",
        action="store_true",
        help="only the rows of many long fields (`wide`): no corpus, a run of seconds",
    )
    p.add_argument(
        "--allocator",
        choices=("jemalloc", "libc"),
        default="jemalloc",
        help="the server's allocator: jemalloc (production's, installed when absent; default) or libc malloc",
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="accepted as every bench takes it; each verb runs once"
    )
    shared_cpu_flag(p)
    a = p.parse_args()
    if a.small:
        a.jobs = 20_000
    scale = a.jobs / FULL
    a.foreign = 2 * a.jobs if a.foreign is None else a.foreign
    a.queues = max(10, round(1000 * scale)) if a.queues is None else a.queues
    a.bad_rows = max(100, round(50_000 * scale)) if a.bad_rows is None else a.bad_rows
    a.log_lines = max(10_000, round(FULL * scale)) if a.log_lines is None else a.log_lines
    return a


# -- the corpus ----------------------------------------------------------------------


def log_text(i: int) -> str:
    """A log-style error text: timestamps, addresses and numbers in several formats."""
    k = i % 8
    if k == 0:
        address = f"10.20.{i % 256}.{i % 7}:6379"
        return f"2024-05-01T12:34:56.789Z upstream {address} timed out after {1500 + i % 500} ms"
    if k == 1:
        return "2024-05-01T12:35:07.123Z upstream 10.20.30.41:6379 refused connection"
    if k == 2:
        return (
            f"May  1 12:34:{i % 60:02d} host{i % 50} sshd[{i}]: Failed password for root from "
            f"192.168.{i % 256}.{i % 100} port {1024 + i % 60000} ssh2"
        )
    if k == 3:
        return (
            f"[{1714566896 + i}.{i % 1_000_000:06d}] worker-{i % 16} GET /api/v1/orders/{i} 504 {i % 3000}ms"
        )
    if k == 4:
        return (
            f"{i * 13 % 100000}/{i % 7 - 3:+d} -0x{i:08X} 1e-{i % 9} 3.14159 v{i % 5}.{i % 10}.{i % 100} "
            f"fe80::{i % 65536:x}:1%eth0 [2001:db8::{i % 65536:x}]:443"
        )
    if k == 5:
        return (
            f'payment "{uuid.UUID(int=i * 7919)}" declined: code={-(i % 100)} amount=1,234.{i % 100:02d} '
            f"EUR; retry-after: {i % 60}s"
        )
    if k == 6:
        return f"{i}{i}{i}{i}-{i}.{i}.{i}-1-1-1-1 {'9' * (i % 40)}-1.1"
    return f"ERROR 2024/05/01 12:34:56.{i % 1000:03d}123 pid={i} tid=0x{i * 977:x} errno=-{i % 130} (EAGAIN)"


def traceback(i: int) -> str:
    """A 100 KB Python traceback with non-ASCII characters in its frames."""
    lines = ["Traceback (most recent call last):"]
    frame = 0
    while sum(len(x) + 1 for x in lines) < TRACEBACK_BYTES - 200:
        lines.append(
            f'  File "/srv/app/módulo_{frame % 97}.py", line {frame * 7 + i}, in función_{frame % 13}'
        )
        lines.append(f"    resultado = llamar(upstream='10.0.{frame % 256}.{i % 256}', intento={frame})")
        frame += 1
    lines.append(f"TimeoutError: upstream ñ timed out after {i} ms; Retry later")
    return "\n".join(lines)


def not_utf8(i: int) -> bytes:
    return (
        b"\xff\xfe error \xc3\x28 at 0x" + str(i).encode() + b" \x80\x81\xed\xa0\x80 " + bytes([i % 256]) * 20
    )


def row(state: str, error: Any = None, group: str | None = None, body: str | bytes | None = None) -> dict:
    r: dict[str, Any] = {
        "payload": body if body is not None else '{"to": "user@example.com"}',
        "attempts": "1",
        "failures": "1" if state == "dead" else "0",
        "stalled": "0",
        "max_attempts": "1",
        "priority": "0",
        "backoff": "1000",
        "created_at": "1714566896000",
        "state": state,
    }
    if error is not None:
        r["last_error"] = error
    if group is not None:
        r["group"] = group
    return r


@dataclass
class Corpus:
    dead: int
    huge: str = "huge"  # in dead: a 20 MB payload and the long :logs list
    huge_pending: str = "huge_p"  # in pending (a drain meets it)
    huge_scheduled: str = "huge_s"  # scheduled (an obliterate meets it)


def build(conn, raw: redis.Redis, a: argparse.Namespace) -> Corpus:
    """The harm queue, the other queues and the foreign keys (see the module's doc)."""
    n = a.jobs
    dead, schedule, grouped = n * 3 // 10, n * 2 // 10, n // 10
    pending = n - dead - schedule - grouped
    t = time.perf_counter()
    body = [payload(i) for i in range(pending + schedule + grouped)]
    jobs.enqueue_many(conn, Q, body[:pending])
    jobs.enqueue_many(conn, Q, body[pending : pending + schedule], delay=HOUR)
    lanes = [f"lane{k:03d}" for k in range(LANES)]
    share = grouped // (LANES + 1)
    for k, g in enumerate(lanes):
        jobs.enqueue_many(
            conn, Q, body[pending + schedule + k * share : pending + schedule + (k + 1) * share], group=g
        )
    # a lane another node named outside the gate: written as that node would
    pipe = raw.pipeline(transaction=False)
    pipe.sadd(P + "groups", ODD_LANE)
    for i in range(share):
        job_id = f"t_{i:07d}"
        pipe.hset(P + "job:" + job_id, mapping=row("pending", group=ODD_LANE))
        pipe.zadd(f"{P}g:{ODD_LANE}:pending", {job_id: 0})
        if i % PIPE == PIPE - 1:
            pipe.execute()
    pipe.execute()
    print(f"  pending, schedule, lanes: {time.perf_counter() - t:.1f} s", flush=True)

    # dead: bad rows and ghosts at the head, then the corpus, written as @fail leaves rows
    t = time.perf_counter()
    score = 1
    pipe = raw.pipeline(transaction=False)

    def dead_row(job_id: str, fields: dict | None) -> None:
        nonlocal score
        if fields is not None:
            pipe.hset(P + "job:" + job_id, mapping=fields)
        pipe.zadd(P + "dead", {job_id: score})
        score += 1
        if score % PIPE == 0:
            pipe.execute()

    for i in range(a.bad_rows):
        dead_row(f"b_{i:07d}", {"payload": "{}", "attempts": "three", "state": "dead"})
        dead_row(f"g_{i:07d}", None)
    for i in range(TRACEBACKS):
        dead_row(f"tb_{i:04d}", row("dead", traceback(i)))
    for i in range(NOT_UTF8):
        dead_row(f"nu_{i:05d}", row("dead", not_utf8(i)))
    for job_id in FOREIGN_IDS:
        # `huge:logs` has no row of its own: its row key is job huge's logs list
        own = None if job_id.endswith(":logs") else row("dead", f"written by another node as {job_id}")
        dead_row(job_id, own)
    for i in range(LONG_IDS):
        dead_row(f"long{i:04d}" + "x" * (LONG_ID - 8), row("dead", log_text(i)))
    dead_row("huge", row("dead", log_text(0), body='{"blob": "' + "x" * BIG_PAYLOAD + '"}'))
    for i in range(dead - TRACEBACKS - NOT_UTF8 - len(FOREIGN_IDS) - LONG_IDS - 1):
        dead_row(f"d_{i:07d}", row("dead", log_text(i), group=lanes[i % LANES] if i % 10 == 0 else None))
    pipe.execute()
    # the huge jobs: 20 MB payloads and long :logs lists (huge, in dead, is above)
    pipe.hset(P + "job:huge_p", mapping=row("pending", body="y" * BIG_PAYLOAD))
    pipe.zadd(P + "pending", {"huge_p": 0})
    pipe.hset(P + "job:huge_s", mapping=row("schedule", body="z" * BIG_PAYLOAD))
    pipe.zadd(P + "schedule", {"huge_s": time.time() * 1000 + HOUR})
    pipe.execute()
    for job_id in ("huge", "huge_p", "huge_s"):
        logs = f"{P}job:{job_id}:logs"
        for start in range(0, a.log_lines, 10_000):
            raw.rpush(
                logs,
                *(
                    f"2024-05-01T12:34:56.{k % 1000:03d}Z step {k} of {a.log_lines}: ok"
                    for k in range(start, min(a.log_lines, start + 10_000))
                ),
            )
    print(
        f"  dead {dead:,} (+ {2 * a.bad_rows:,} bad rows and ghosts), huge jobs: "
        f"{time.perf_counter() - t:.1f} s",
        flush=True,
    )

    t = time.perf_counter()
    pipe = conn.pipeline()
    for i in range(a.queues):
        jobs.enqueue(conn, f"q{i:04d}", "{}", pipeline=pipe)
        if i % 1000 == 999:
            pipe.execute()
            pipe = conn.pipeline()
    pipe.execute()
    for start in range(0, a.foreign, 10_000):
        raw.mset({f"other:app:{i}": "v" for i in range(start, min(a.foreign, start + 10_000))})
    print(f"  {a.queues:,} queues, {a.foreign:,} foreign keys: {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    repeats(raw, a.jobs // 10)
    print(f"  {a.jobs // 10:,} repeatables (and 4 odd): {time.perf_counter() - t:.1f} s", flush=True)
    return Corpus(dead=dead)


def repeats(raw: redis.Redis, n: int) -> None:
    """The repeat registry: `n` repeatables, then what another node wrote there: a 20 MB
    definition, one not JSON, a JSON list, a due name with no definition. All due in a
    day, so a Worker's tick leaves them be."""
    due = time.time() * 1000 + 24 * HOUR
    pipe = raw.pipeline(transaction=False)
    for start in range(0, n, PIPE):
        names = [f"every_{i:07d}" for i in range(start, min(n, start + PIPE))]
        pipe.zadd(P + "repeat", {name: due + k for k, name in enumerate(names)})
        pipe.hset(P + "repeat:defs", mapping={name: REPEAT_DEF for name in names})
        pipe.execute()
    odd = {"huge_def": "x" * BIG_PAYLOAD, "not_json": "{every: 1", "a_list": "[1, 2]"}
    pipe.hset(P + "repeat:defs", mapping=odd)
    pipe.zadd(P + "repeat", {name: due for name in [*odd, "no_def"]})
    pipe.execute()


# -- measuring -----------------------------------------------------------------------

_SHAS = {hashlib.sha1(scripts.source(n).encode()).hexdigest(): n for n in scripts.names()}


def command_name(args: list[bytes]) -> str:
    """A logged command as a person reads it: `EVALSHA @find`, `HGETALL`, ..."""
    words = [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in args]
    if not words:
        return "?"
    head = words[0].upper()
    if head == "EVALSHA" and len(words) > 1:
        return f"@{_SHAS.get(words[1], words[1][:8])}"
    if head == "FCALL" and len(words) > 1:
        return f"@{words[1].removeprefix('emq_')}"
    return head


@dataclass
class Measured:
    verb: str
    seconds: float
    longest_ms: float
    command: str
    ping_ms: float
    calls: int
    note: str = ""
    median_ms: float = 0.0
    p99_ms: float = 0.0
    off_cpu: str = ""


# the commands the bench and its PING process send: never a verb's
OURS = ("PING", "SLOWLOG", "INFO", "CONFIG", "LATENCY")


def slowlog(raw: redis.Redis) -> tuple[float, str, list[float]]:
    """The longest command logged since the last reset (ms, which), less our own reads,
    and the durations (ms) of the script calls among them. Every command is logged,
    those a script runs too (each before its script's own entry, never longer): should
    the log overflow, the latency monitor's worst (every command of 1 ms or more, to the
    ms) stands in for the entries lost."""
    # the latency monitor first: the SLOWLOG GET of a full log is itself a long command
    latest = raw.execute_command("LATENCY", "LATEST")
    worst = max((int(ev[3]) for ev in latest if ev[0] == b"command"), default=0)
    entries = raw.execute_command("SLOWLOG", "GET", SLOWLOG_LEN)
    longest, which, calls, at = 0.0, "none", [], -1
    for k, e in enumerate(entries):
        name = command_name(e[3])
        if name in OURS:
            continue
        if name.startswith("@"):
            calls.append(e[2] / 1000)
        if e[2] / 1000 > longest:
            longest, which, at = e[2] / 1000, name, k
    if which.startswith("@"):
        which += inside(entries, at)
    if len(entries) >= SLOWLOG_LEN:
        if worst > longest:
            longest, which = float(worst), "(a call the full SLOWLOG dropped; the latency monitor's worst)"
    return longest, which, calls


def inside(entries: list, at: int) -> str:
    """What the script call logged at `at` ran, from the log (newest first, so its own
    commands follow its entry, down to the script call before it): those of 1 ms or
    more, and all of them counted and summed. Says where a long call's time went (for a
    verb's first call, a command the verb sent before it counts here too)."""
    own = []
    for e in entries[at + 1 :]:
        name = command_name(e[3])
        if name.startswith("@"):
            break
        if name not in OURS:  # the bench's own reads and resets (a RESET is logged too)
            own.append((e[2] / 1000, name))
    if not own:
        return ""
    long = ", ".join(f"{name} {ms:.1f} ms" for ms, name in sorted(own, reverse=True) if ms >= 1)
    return f"; inside: {long or 'nothing of 1 ms'} ({len(own):,} commands, {sum(ms for ms, _ in own):.1f} ms)"


def quantile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (0 for none): on a shared machine the longest call
    can be one the kernel paused; the median and p99 of a verb's script calls say
    whether its calls are long or one was held up."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Bench:
    def __init__(self, srv, raw: redis.Redis):
        self.srv, self.raw = srv, raw
        self.pid = server_pid(srv)
        self.results: list[Measured] = []

    def measure(self, verb: str, call: Callable[[], Any], note: Callable[[Any], str] | None = None) -> Any:
        self.raw.execute_command("SLOWLOG", "RESET")
        self.raw.execute_command("LATENCY", "RESET")
        with Pinger(self.srv.port) as pinger, CpuWait(self.pid) as off:
            t = time.perf_counter()
            try:
                result = call()
            except EMQError as exc:
                result = exc
            took = time.perf_counter() - t
        longest, which, durations = slowlog(self.raw)
        if isinstance(result, Exception):
            said = f"refused: {type(result).__name__}: {str(result)[:100]}"
        else:
            said = note(result) if note else ""
        m = Measured(
            verb,
            took,
            longest,
            which,
            pinger.worst * 1000,
            len(durations),
            said,
            quantile(durations, 0.5),
            quantile(durations, 0.99),
            str(off),
        )
        self.results.append(m)
        print(
            f"{verb:<48} longest call {m.longest_ms:7.2f} ms ({m.command}), worst PING {m.ping_ms:6.1f} ms, "
            f"{m.calls:,} script calls (median {m.median_ms:.2f}, p99 {m.p99_ms:.2f} ms), {m.seconds:.2f} s"
            + (f"; {m.note}" if m.note else "")
            + f"; {m.off_cpu}",
            flush=True,
        )
        return result


def sent_by(raw: redis.Redis, call: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """(what call() answered or raised, the commands the server ran meanwhile)."""

    def stats() -> dict[str, int]:
        return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in raw.info("commandstats").items()}

    before = stats()
    try:
        result = call()
    except (EMQError, BadInput) as exc:
        result = exc
    after = stats()
    sent = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    sent["info"] = sent.get("info", 0) - 1
    return result, {k: n for k, n in sent.items() if n}


# -- the run -------------------------------------------------------------------------


def main() -> None:
    a = options()
    if a.wide:
        with server(a.allocator, a.shared_cpu) as srv:
            conn = connect(srv)
            raw = redis.Redis(port=srv.port, socket_timeout=None)
            watch(raw)
            b = Bench(srv, raw)
            wide(b, conn, raw)
        return worst_line(b)
    print(
        f"corpus: {a.jobs:,} jobs in {Q!r} ({a.bad_rows:,} bad rows and {a.bad_rows:,} ghosts at the head "
        f"of dead, {TRACEBACKS} tracebacks of 100 KB, {NOT_UTF8:,} texts not UTF-8, "
        f"{LONG_IDS} ids of {LONG_ID // 1000} KB, "
        f"ids {', '.join(FOREIGN_IDS)}, "
        f"a lane {ODD_LANE!r}, 3 jobs of 20 MB with {a.log_lines:,} log lines each), {a.queues:,} other "
        f"queues, {a.foreign:,} foreign keys",
        flush=True,
    )
    with server(a.allocator, a.shared_cpu) as srv:
        conn = connect(srv)
        raw = redis.Redis(port=srv.port, socket_timeout=None)
        t = time.perf_counter()
        corpus = build(conn, raw, a)
        print(f"built in {time.perf_counter() - t:.1f} s; {raw.dbsize():,} keys", flush=True)
        watch(raw)
        b = Bench(srv, raw)
        run(b, conn, raw, corpus)
        wide(b, conn, raw)
        board_line = dashboard_commands(conn, raw)
    print(board_line)
    worst = max(b.results, key=lambda m: m.longest_ms)
    print(f"the worst: {worst.verb}, {worst.command}")
    typical = max(b.results, key=lambda m: m.p99_ms)
    print(f"the worst p99 of a verb's script calls: {typical.p99_ms:.1f} ms ({typical.verb})")
    worst_line(b)


def worst_line(b: Bench) -> None:
    worst = max(b.results, key=lambda m: m.longest_ms)
    print(f"worst server block: {worst.longest_ms:.1f} ms (target 20 ms): {worst.longest_ms / TARGET_MS:.2f}")


def watch(raw: redis.Redis) -> None:
    """Every command logged (SLOWLOG), and the latency monitor on from 1 ms."""
    raw.config_set("slowlog-max-len", SLOWLOG_LEN)
    raw.config_set("slowlog-log-slower-than", 0)
    raw.config_set("latency-monitor-threshold", 1)


# rows another node made wide: fields of one byte under a call's byte budget each
WIDE_FIELD = 2**20 - 1
WIDE_NAMES = [f"f{k:02d}" for k in range(64)]


def wide(b: Bench, conn, raw: redis.Redis) -> None:
    """Rows of many fields each of `WIDE_FIELD` bytes (each under the longest a read
    copies, so none is left out as over it), in queues of their own: 2 rows of 64 such
    fields asked in one `frames.rows` call; 10 dead rows whose 8 shown fields are each
    that long, in a snapshot; 60 ordinary dead rows, then 10 whose `group`, `attempts`,
    `created_at` and `last_error` are (matching no filter), then 10 whose six other shown
    fields are (matching), searched with a filter on each and grouped by `errors`. A read
    that copies (fields asked) x (longest field) in one call holds the server about
    1.5 ms a MiB."""
    m = b.measure
    long = "w" * WIDE_FIELD
    rows_q, snap_q, scan_q = "wide_rows", "wide_snapshot", "wide_scan"
    t = time.perf_counter()
    for i in range(2):
        for k in range(0, 64, 8):
            raw.hset(f"{base(rows_q)}job:r{i}", mapping=dict.fromkeys(WIDE_NAMES[k : k + 8], long))
    for i in range(10):
        raw.hset(
            f"{base(snap_q)}job:s{i:02d}", mapping=dict.fromkeys(frames.FIELDS, long) | {"state": "dead"}
        )
        raw.zadd(base(snap_q) + "dead", {f"s{i:02d}": i})
    for i in range(80):
        fields = row("dead", log_text(i), group="g")
        if 60 <= i < 70:  # each field a filter reads: no filter passes
            fields |= dict.fromkeys(("group", "attempts", "created_at", "last_error"), long)
        elif i >= 70:  # each shown field but two a filter reads: every filter passes
            fields |= dict.fromkeys(
                ("priority", "failures", "stalled", "last_error", "progress", "payload"), long
            )
        raw.hset(f"{base(scan_q)}job:d{i:02d}", mapping=fields)
        raw.zadd(base(scan_q) + "dead", {f"d{i:02d}": i})
    print(f"  wide rows: {time.perf_counter() - t:.1f} s", flush=True)
    rows = lambda f: f"{len(f):,} rows"  # noqa: E731
    m(
        "frames.rows(2 rows x 64 fields of 1 MiB-1)",
        lambda: frames.rows(conn, rows_q, ["r0", "r1"], fields=WIDE_NAMES),
        rows,
    )
    m("frames.snapshot(10 rows x 8 fields of 1 MiB-1)", lambda: frames.snapshot(conn, snap_q), rows)
    m(
        "find(4 filters; 20 rows of 4 or 6 fields of 1 MiB-1)",
        lambda: triage.find(conn, scan_q, group="g", min_attempts=1, created_after=0, error="*", limit=None),
        rows,
    )
    m("errors(20 last_errors of 1 MiB-1 after 60)", lambda: triage.errors(conn, scan_q), rows)
    raw.delete(
        *(f"{base(rows_q)}job:r{i}" for i in range(2)),
        *(f"{base(snap_q)}job:s{i:02d}" for i in range(10)),
        *(f"{base(scan_q)}job:d{i:02d}" for i in range(80)),
        base(snap_q) + "dead",
        base(scan_q) + "dead",
    )


def quiet() -> Session:
    return Session(say=lambda _: None)


def magic(session: Session, line: str) -> Callable[[], Any]:
    return lambda: execute(session, parse(line))


def run(b: Bench, conn, raw: redis.Redis, corpus: Corpus) -> None:
    m = b.measure
    session = quiet()
    session.conn = conn
    rows = lambda f: f"{len(f):,} rows"  # noqa: E731

    # watching
    m("frames.counts (all queues)", lambda: frames.counts(conn), rows)
    m("frames.health (all queues)", lambda: frames.health(conn), rows)
    m("%emq queues", magic(session, "queues"))
    m("%emq health", magic(session, "health"))
    m(f"%emq status {Q}", magic(session, f"status {Q}"))
    m("completion of a queue", lambda: Completer(session).words("status "), lambda w: f"{len(w):,} words")
    board = m("Dashboard open on the queue", lambda: Dashboard(conn, auto=False, queue=Q))
    m("Dashboard refresh", board.refresh)
    m("Dashboard Dead letters tab", lambda: board.tab("Dead letters"))
    m("Dashboard Jobs tab", lambda: board.tab("Jobs"))
    m("Dashboard Repeatables tab", lambda: board.tab("Repeatables"))
    board.close()

    # reading rows
    m("frames.snapshot(limit=1000)", lambda: frames.snapshot(conn, Q, limit=1000), rows)
    m("frames.snapshot(state=dead)", lambda: frames.snapshot(conn, Q, states="dead"), rows)
    for what, glob in GLOBS.items():
        m(f"find(error=<{what}>)", lambda g=glob: triage.find(conn, Q, error=g, limit=None), rows)
    m(
        "find(payload=*blob*) over all states",
        lambda: triage.find(conn, Q, state="all", payload="*blob*", limit=None),
        rows,
    )
    m(
        "find(state=all, min_attempts=1)",
        lambda: triage.find(conn, Q, state="all", min_attempts=1, limit=1000),
        rows,
    )
    long_glob = "*a" * 50_000
    refused, sent = sent_by(raw, lambda: triage.find(conn, Q, error=long_glob))
    print(
        f"{'find(error=<100,000-character glob>)':<48} {type(refused).__name__}, before any I/O: "
        f"{sum(sent.values())} commands sent",
        flush=True,
    )
    b.results.append(Measured("find(error=<100,000 characters>)", 0, 0, "none", 0, sum(sent.values())))
    m("errors(dead)", lambda: triage.errors(conn, Q), lambda f: f"{len(f):,} signatures")
    m("errors(state=all)", lambda: triage.errors(conn, Q, state="all"), lambda f: f"{len(f):,} signatures")
    m("%emq errors", magic(session, f"errors {Q}"))
    m("repeat.registered", lambda: repeat.registered(conn, Q), rows)
    m("%emq repeats", magic(session, f"repeats {Q}"))
    m(f"%emq find --error '{GLOBS['classes']}'", magic(session, f"find {Q} --error '{GLOBS['classes']}'"))

    # one job: the 20 MB row with the long :logs list, and ordinary ones
    m("get_job(20 MB row)", lambda: jobs.get_job(conn, Q, corpus.huge), lambda r: f"{len(r)} fields")
    m(
        "get_job_logs(long list)",
        lambda: jobs.get_job_logs(conn, Q, corpus.huge),
        lambda r: f"{len(r):,} lines",
    )
    m("%emq logs (long list)", magic(session, f"logs {Q} {corpus.huge}"))
    m("%emq job (20 MB row)", magic(session, f"job {Q} {corpus.huge}"))
    m("update_progress", lambda: jobs.update_progress(conn, Q, corpus.huge, 50))
    m("add_log", lambda: jobs.add_log(conn, Q, corpus.huge, "one more line"))
    m("add_log(keep=1000) of the long list", lambda: jobs.add_log(conn, Q, corpus.huge, "trim", keep=1000))
    m("update_data (replacing 20 MB)", lambda: jobs.update_data(conn, Q, corpus.huge, "{}"))
    m(
        "update_data (writing MAX_PAYLOAD, 4 MiB)",
        lambda: jobs.update_data(conn, Q, "d_0000001", '"' + "w" * (MAX_PAYLOAD - 2) + '"'),
    )
    refused, sent = sent_by(raw, lambda: jobs.update_data(conn, Q, "d_0000001", "w" * BIG_PAYLOAD))
    print(
        f"{'update_data (writing 20 MB)':<48} {type(refused).__name__}, before any I/O: "
        f"{sum(sent.values())} commands sent",
        flush=True,
    )
    m("promote_job", lambda: jobs.promote_job(conn, Q, raw.zrange(P + "schedule", 0, 0)[0].decode()))
    m("reprocess_job", lambda: jobs.reprocess_job(conn, Q, "d_0000002"))
    m("remove_job (20 MB row, long list)", lambda: jobs.remove_job(conn, Q, "huge_p"))
    raw.hset(P + "job:huge_p", mapping=row("pending", body="y" * BIG_PAYLOAD))
    raw.zadd(P + "pending", {"huge_p": 0})
    raw.rpush(P + "job:huge_p:logs", *(f"line {k}" for k in range(200_000)))

    # dry runs, then the writes they preview
    reprocess_glob = "*refused connection*"
    remove_glob = "*sshd*Failed password*"
    m(
        "reprocess_dead dry run",
        lambda: admin.reprocess_dead(conn, Q, dry_run=True),
        lambda r: f"{int(r):,} would move",
    )
    m(
        f"%emq reprocess --error {reprocess_glob} --dry-run",
        magic(session, f"reprocess {Q} --error '{reprocess_glob}' --dry-run"),
    )
    m(
        f"%emq remove --error {remove_glob} --dry-run",
        magic(session, f"remove {Q} --error '{remove_glob}' --dry-run"),
    )
    some = (
        [f"d_{i:07d}" for i in range(0, 40_000, 8)] + list(FOREIGN_IDS) + [f"b_{i:07d}" for i in range(100)]
    )
    m("reprocess_jobs dry run (5,000 ids)", lambda: admin.reprocess_jobs(conn, Q, some, dry_run=True))
    m("remove_jobs dry run (5,000 ids)", lambda: admin.remove_jobs(conn, Q, some, dry_run=True))
    m(
        f"%emq reprocess --error {reprocess_glob} --yes",
        magic(session, f"reprocess {Q} --error '{reprocess_glob}' --yes"),
    )
    m(f"%emq remove --error {remove_glob} --yes", magic(session, f"remove {Q} --error '{remove_glob}' --yes"))
    m("reprocess_jobs (5,000 ids)", lambda: admin.reprocess_jobs(conn, Q, some))
    others = [f"d_{i:07d}" for i in range(3, 40_000, 8)] + list(FOREIGN_IDS)
    m("remove_jobs (5,000 ids)", lambda: admin.remove_jobs(conn, Q, others))
    m(
        "reprocess_dead trial (100, watched 1 s)",
        lambda: admin.reprocess_dead(conn, Q, trial=100, watch_s=1, limit=100),
    )
    m(
        "reprocess_dead paced (20,000 at 50,000/s)",
        lambda: admin.reprocess_dead(conn, Q, rate=50_000, limit=20_000),
    )
    m(
        "reprocess_dead (the rest)",
        lambda: admin.reprocess_dead(conn, Q),
        lambda r: f"{int(r):,} moved, {r.bad_rows:,} bad, {r.ghosts:,} ghosts",
    )

    # a worker: due schedule promoted, expired leases put back, claims
    due = raw.zrange(P + "schedule", 0, 19_999)
    raw.zadd(P + "schedule", dict.fromkeys(due, 0))
    pipe = raw.pipeline(transaction=False)
    for i in range(2_000):
        pipe.zadd(P + "schedule", {f"sb_{i:05d}": 0})
        pipe.hset(P + f"job:sb_{i:05d}", mapping={"payload": "{}", "priority": "high"})
    pipe.execute()
    lapsed = Worker(conn, Q, lambda *_: None, lease_ms=1)
    for _ in range(5_000):
        lapsed.claim()
    time.sleep(0.01)
    worker = Worker(conn, Q, every_other_fails)
    m(
        "Worker: 200 x (promote, expire, claim, finish)",
        lambda: worker.run(max_jobs=200),
        lambda n: f"{n} jobs",
    )

    def enqueue_big() -> list[str]:
        small = [payload(i) for i in range(5_000)]
        big = ["b" * MAX_PAYLOAD] * 4
        return jobs.enqueue_many(conn, Q, small + big + small)

    m("enqueue_many (10,000 + 4 of 4 MiB)", enqueue_big, lambda ids: f"{len(ids):,} ids")
    m("drain (with the 20 MB row and its list)", lambda: admin.drain(conn, Q), lambda n: f"{n:,} drained")

    def obliterate() -> int:
        admin.pause(conn, Q)
        return admin.obliterate_all(conn, Q, force=True)

    m("obliterate_all (force)", obliterate, lambda n: f"{n:,} calls")


def every_other_fails(job_id: str, body: str, attempts: int) -> None:
    if hash(job_id) % 2:
        raise RuntimeError(f"upstream 10.0.0.{attempts}:6379 timed out")


def dashboard_commands(conn, raw: redis.Redis) -> str:
    """The commands one dashboard refresh sends, after the open that found the queues."""
    board = Dashboard(conn, auto=False)
    board.refresh()
    # a background sweep (due once a minute on a long run) would count its SCANs here
    conn.directory.wait()
    t = time.perf_counter()
    _, sent = sent_by(raw, board.refresh)
    took = time.perf_counter() - t
    board.close()
    known = len(frames.queues(conn))
    top = ", ".join(f"{k} {n:,}" for k, n in sorted(sent.items(), key=lambda kv: -kv[1])[:6])
    return (
        f"dashboard refresh: {sum(sent.values()):,} commands for {known:,} queues "
        f"({sum(sent.values()) / max(known, 1):.1f} a queue), SCAN {sent.get('scan', 0)}, "
        f"{took * 1000:.0f} ms: {top}"
    )


if __name__ == "__main__":
    sys.exit(main())
