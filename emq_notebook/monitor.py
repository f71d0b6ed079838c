"""The monitor: what the dashboard shows a person, handed to the systems that page
people -- a Prometheus exporter (`collector`, `serve`, `emq exporter`) and a
Nagios-style check (`check`, `emq check`). Reads only.

A scrape is one `read` of the server: health of every queue the connection's directory
knows (found at most once a minute, never by a SCAN per scrape) with the minutes of
throughput and latency since the last scrape and when the oldest dead job died, in the
one `@read_watch` call a queue a watching look makes (the dashboard's and health's
read). Every call is bounded (SPEC 11); a stalled server costs a scrape the
connection's socket timeout and answers `emq_up 0`.

The metrics (SPEC 13), label `queue` on every one but `emq_up` and
`emq_scrape_duration_seconds`:

- `emq_jobs{state}` the four sets' sizes (pending includes the lanes' backlogs);
  `emq_queue_paused`; `emq_oldest_job_age_seconds{state}` for `pending` (how long
  the longest-waiting job has waited, health's `oldest_pending_s`: a lower bound read
  from a sample, NaN when no sampled row holds a time) and `dead` (since the oldest
  dead job died); 0 for an empty set;
- `emq_queue_verdict{verdict}`: 1 for health's verdict, 0 for the six others;
- `emq_jobs_completed_total`, `emq_jobs_failed_total`: counters fed by the per-minute
  metrics hashes, which no removal of jobs touches. A hash holds a day of minutes and
  drops the oldest as each new one comes, so its sum is no counter: the collector adds
  what each minute gained since it last read it, from 0 when it first saw the queue
  (an exporter's restart is a counter reset, which `rate()` reads as one). A minute
  is read again until it is over, back to the minute before the last read, at most
  `CATCH_UP_MINUTES` back: what a longer pause between scrapes let by is not counted;
- `emq_job_wait_seconds`, `emq_job_run_seconds`: histograms fed the same way by the
  per-minute latency histograms. Their bounds (`BOUNDS_MS`, each an upper end of the
  histograms' own buckets, so each cumulative count is exact) are seven of the
  histograms' 200 (one a 10% step), 10 ms to an hour, a Prometheus series each; `_sum`
  is within 5% (each sample read as its bucket's middle). A queue's histograms appear at its first
  wait or run counted since the collector began;
- `emq_up` (1 when the server answered the whole read) and
  `emq_scrape_duration_seconds` (that read).
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import math
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pandas as pd
from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer

from . import counts as counting
from . import defaults, frames, health, histogram, watching
from .connector import Connection
from .errors import BadInput
from .keyspace import STATES

log = logging.getLogger(__name__)

HOST, PORT = defaults.EXPORTER_HOST, defaults.EXPORTER_PORT
TIMEOUT_S = defaults.MONITOR_TIMEOUT_S
# the most minutes back a scrape reads again (a pause between scrapes longer than this
# loses the counts between; lua/read_monitor.lua takes at most 64)
CATCH_UP_MINUTES = 15
# a latency hash read at most so many fields and bytes (the scripts write one field a
# 10% step of ms: about 200 for a day); a larger one is another node's, left unread
HASH_FIELDS = 512
HASH_BYTES = 65_536
# the histograms' exposed bounds (ms), a decade apart to 10 s, then a minute, ten minutes
# and an hour: each is a series a queue, and a scrape's cost is its samples. Each becomes
# the upper end of the histograms' own bucket at or below it (`_bound`), so its
# cumulative count is exact
BOUNDS_MS = (10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000)
CHECK_VERDICTS, CRITICAL_VERDICTS = defaults.CHECK_VERDICTS, defaults.CHECK_CRITICAL_VERDICTS
# Nagios plugin exit codes, by status
STATUSES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")


def _bound(ms: int) -> tuple[int, int]:
    """(the largest whole ms at or below `ms` that ends a bucket, that bucket): every
    sample of a bucket up to it is at or below it, every later one above."""
    top = ms
    while histogram.bucket(top + 1) == histogram.bucket(top):
        # the first whole ms of `top`'s bucket, less one, ends the bucket before
        lo, hi = 0, top
        while lo < hi:
            mid = (lo + hi) // 2
            if histogram.bucket(mid) < histogram.bucket(top):
                lo = mid + 1
            else:
                hi = mid
        top = lo - 1
    return top, histogram.bucket(top)


# (le in seconds, the last bucket counted at or below it), lowest first
BOUNDS = [(top / 1000, b) for top, b in dict.fromkeys(_bound(ms) for ms in BOUNDS_MS)]
_LAST = [b for _, b in BOUNDS]
# the histograms' `le` labels: each bound, then +Inf for the slot above them all
_LE = [*(repr(le) for le, _ in BOUNDS), "+Inf"]


# -- the read ------------------------------------------------------------------------


@dataclass
class Look:
    """What one read of the server answered: the time (server ms), `health` (the
    `frames.health` frame), and for each queue the minutes `@read_monitor` read
    (`first`) and its reply."""

    now_ms: int
    health: pd.DataFrame
    first: dict[str, int]
    replies: dict[str, Any]


def read(conn: Connection, since: dict[str, int] | None = None, queues: list[str] | None = None) -> Look:
    """The monitor's one read of the server: the server's time, then health of `queues`
    (None: every queue the directory knows) with the minutes of throughput and latency
    from `since[queue]` (default: the minute before this one; at most `CATCH_UP_MINUTES`
    back) to the one after this (another node's clock may run ahead) and the oldest dead
    job's death, all in the one `@read_watch` call a queue health's look makes
    (`watching.read`: one pipeline, a round trip to each primary at once). A queue whose
    minutes could not be read has no reply. Reads only."""
    now = conn.server_ms()
    minute = now // 60_000
    names, stamp = counting.named(conn, queues)
    first = {q: min(minute, max(minute - CATCH_UP_MINUTES, (since or {}).get(q, minute - 1))) for q in names}
    also = {q: [first[q], minute + 1, HASH_FIELDS, HASH_BYTES] for q in names}
    readings = watching.read(conn, names, lanes=True, now_ms=now, asked=health.asked(conn), also=also)
    look = health.of(readings, counting.of(conn, readings, listed=queues is None, stamp=stamp))
    got = {r.queue: r.scraped for r in readings if isinstance(r.scraped, list)}
    return Look(now, look.frame, {q: first[q] for q in map(str, look.frame.index)}, got)


# -- the counters, from the per-minute buckets -----------------------------------------

# a latency histogram folded into the exposed bounds: counts by bound (the last slot:
# above every bound) and the sum of its samples in ms
_Hist = tuple[tuple[int, ...], float]
_EMPTY: _Hist = ((0,) * (len(_LAST) + 1), 0.0)


def _folded(flat: Any) -> _Hist | None:
    """A latency hash as `@read_monitor` answers it (bucket, count, ...) folded into the
    exposed bounds; None for one it did not read (-1)."""
    if not isinstance(flat, list):
        return None
    if not flat:
        return _EMPTY
    slots = [0] * (len(_LAST) + 1)
    total = 0.0
    for b, n in histogram.parse(dict(zip(flat[0::2], flat[1::2], strict=False))).items():
        slots[bisect.bisect_left(_LAST, b)] += n
        total += n * histogram.value(b)
    return tuple(slots), total


def _gain(now: int, before: int) -> int:
    """What a count gained since it read `before`; a count lower now was started again
    (its hash deleted and written anew): all of it is new."""
    return now - before if now >= before else now


@dataclass
class _Queue:
    """What the collector has counted of one queue since it first saw it: the two
    counters, the two histograms (counts by exposed bound and their sum in ms), and the
    minutes read last (minute -> [completed, failed, wait, run] as read, None for one
    not known) up to `last`."""

    completed: int = 0
    failed: int = 0
    wait: list[int] = field(default_factory=lambda: [0] * (len(_LAST) + 1))
    run: list[int] = field(default_factory=lambda: [0] * (len(_LAST) + 1))
    wait_ms: float = 0.0
    run_ms: float = 0.0
    measured: bool = False  # a wait or run counted: its histograms are shown
    minutes: dict[int, list[Any]] = field(default_factory=dict)
    last: int | None = None

    def add(self, first: int, reply: list) -> None:
        """Count what each minute from `first` gained since it was last read
        (`@read_monitor`'s reply). A minute after the last one read is new (all of it
        counts); one at or before it not read then, or a first read, is where counting
        starts (nothing counts); a count or hash not read (-1) keeps what was read before."""
        _, completed, failed, waits, runs = reply
        wait = dict(zip(waits[0::2], waits[1::2], strict=True))
        run = dict(zip(runs[0::2], runs[1::2], strict=True))
        kept: dict[int, list[Any]] = {}
        for i, m in enumerate(range(first, first + len(completed))):
            read = [
                None if completed[i] == -1 else completed[i],
                None if failed[i] == -1 else failed[i],
                _folded(wait.get(m, [])),
                _folded(run.get(m, [])),
            ]
            before = self.minutes.get(m)
            if before is None:
                fresh = self.last is not None and m > self.last
                before = [0, 0, _EMPTY, _EMPTY] if fresh else [None] * 4
            if read == before:  # the usual minute: nothing new since the last read
                kept[m] = before
                continue
            kept[m] = [self._count(k, now, was) for k, now, was in zip(_KINDS, read, before, strict=True)]
        self.minutes, self.last = kept, first + len(completed) - 1

    def _count(self, kind: str, now: Any, was: Any) -> Any:
        """Add what `kind` gained from `was` to `now`; answers what to keep of it."""
        if now is None:
            return was
        if was is None or now == was:
            return now
        if kind in ("completed", "failed"):
            setattr(self, kind, getattr(self, kind) + _gain(now, was))
            return now
        (slots, total), (before, before_total) = now, was
        gains = [_gain(n, b) for n, b in zip(slots, before, strict=True)]
        if any(gains):
            counts = getattr(self, kind)
            for i, g in enumerate(gains):
                counts[i] += g
            # a hash started again counts its whole sum
            restarted = any(n < b for n, b in zip(slots, before, strict=True))
            gained_ms = total if restarted else total - before_total
            setattr(self, f"{kind}_ms", getattr(self, f"{kind}_ms") + gained_ms)
            self.measured = True
        return now


_KINDS = ("completed", "failed", "wait", "run")


# -- the collector ----------------------------------------------------------------------

_DOC = {
    "jobs": "Jobs in each of the queue's sets (pending includes the lanes' backlogs).",
    "paused": "1 when the queue is paused (its claim gate closed by an operator), else 0.",
    "oldest": "How long the oldest job of the set has been there: pending, the longest "
    "wait (a lower bound, from a sample); dead, since the oldest dead job died; 0 when empty.",
    "verdict": "1 for the queue's health verdict (failing, stuck, growing, dead_letters, "
    "paused, ok, idle), 0 for the others.",
    "completed": "Jobs completed since the exporter began watching the queue (from the "
    "per-minute metrics; never lowered by a job's removal).",
    "failed": "Job attempts failed since the exporter began watching the queue (each "
    "failure, a retried one too; from the per-minute metrics).",
    "wait": "How long jobs waited before a worker claimed them (from the per-minute "
    "latency histograms; sum within 5%).",
    "run": "How long jobs ran, claim to complete or fail (from the per-minute latency "
    "histograms; sum within 5%).",
    "up": "1 when the server answered the last scrape's read, else 0.",
    "duration": "How long the last scrape's read of the server took.",
}


class Collector:
    """A `prometheus_client` collector of every queue one connection's server holds:
    each `collect()` reads the server once (`read`) and yields the metrics of SPEC 13.
    Scrapes run one at a time (a second waits for the first). A read that fails (a lost
    or stalled server: the connection's socket timeout) yields `emq_up 0` and the
    scrape's duration only, and keeps the counters for when the server is back."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._queues: dict[str, _Queue] = {}
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        # nothing up front: registering the collector reads nothing
        return []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            started = time.perf_counter()
            try:
                look = read(self.conn, {q: s.last - 2 for q, s in self._queues.items() if s.last is not None})
            except Exception as exc:  # any failure of the read: the scrape still answers
                log.warning("emq exporter: the read of %s failed: %s", self.conn.label, _line(exc))
                look = None
            took = time.perf_counter() - started
            families = [] if look is None else self._families(look)
        yield from families
        yield GaugeMetricFamily("emq_up", _DOC["up"], value=0.0 if look is None else 1.0)
        yield GaugeMetricFamily("emq_scrape_duration_seconds", _DOC["duration"], value=took)

    def _families(self, look: Look) -> list[Metric]:
        """The metrics of `look`: each family made once, then one pass over the queues
        adding each queue's samples to them."""
        h = look.health
        names = [str(q) for q in h.index]
        # a queue gone from the server is gone from the counters (memory stays flat)
        self._queues = {q: self._queues.get(q) or _Queue() for q in names}
        for q in names:
            if q in look.replies:
                self._queues[q].add(look.first[q], look.replies[q])
        # the frame's columns as plain lists (a row at a time through pandas is slow)
        col = {c: h[c].tolist() for c in (*STATES, "paused", "oldest_pending_s", "verdict")}
        jobs = GaugeMetricFamily("emq_jobs", _DOC["jobs"], labels=["queue", "state"])
        paused = GaugeMetricFamily("emq_queue_paused", _DOC["paused"], labels=["queue"])
        oldest = GaugeMetricFamily("emq_oldest_job_age_seconds", _DOC["oldest"], labels=["queue", "state"])
        verdict = GaugeMetricFamily("emq_queue_verdict", _DOC["verdict"], labels=["queue", "verdict"])
        completed = CounterMetricFamily("emq_jobs_completed", _DOC["completed"], labels=["queue"])
        failed = CounterMetricFamily("emq_jobs_failed", _DOC["failed"], labels=["queue"])
        wait = HistogramMetricFamily("emq_job_wait_seconds", _DOC["wait"], labels=["queue"])
        run = HistogramMetricFamily("emq_job_run_seconds", _DOC["run"], labels=["queue"])
        for i, q in enumerate(names):
            one = [q]
            for s in STATES:
                jobs.add_metric([q, s], float(col[s][i]))
            paused.add_metric(one, float(col["paused"][i]))
            oldest.add_metric([q, "pending"], _pending_age(col["oldest_pending_s"][i], col["pending"][i]))
            oldest.add_metric([q, "dead"], _dead_age(col["dead"][i], look.replies.get(q), look.now_ms))
            for v in health.SEVERITY:
                verdict.add_metric([q, v], float(col["verdict"][i] == v))
            counted = self._queues[q]
            completed.add_metric(one, counted.completed)
            failed.add_metric(one, counted.failed)
            if counted.measured:
                wait.add_metric(one, _cumulative(counted.wait), counted.wait_ms / 1000)
                run.add_metric(one, _cumulative(counted.run), counted.run_ms / 1000)
        return [jobs, paused, oldest, verdict, completed, failed, wait, run]


def _cumulative(counts: list[int]) -> list[tuple[str, float]]:
    """A histogram's counts by exposed bound as `HistogramMetricFamily.add_metric`
    takes them: (le, the count at or below it), +Inf last."""
    return list(zip(_LE, itertools.accumulate(counts), strict=True))


def _pending_age(oldest_s: float, pending: int) -> float:
    """Health's `oldest_pending_s`; 0 when there is no backlog to measure."""
    age = float(oldest_s)
    return 0.0 if math.isnan(age) and not pending else age


def _dead_age(dead: int, reply: Any, now_ms: int) -> float:
    """Seconds since the oldest dead job died (`@read_monitor`'s first answer); 0 when
    none is dead, NaN when its score could not be read."""
    if not dead:
        return 0.0
    oldest = reply[0] if reply else None
    return math.nan if oldest is None else max(0.0, (now_ms - int(oldest)) / 1000)


def _line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]


def samples(c: Collector) -> pd.DataFrame:
    """One scrape of `c` as a frame, a row a sample, as Prometheus would store it:
    `metric` (the sample's name: `emq_jobs`, `emq_job_wait_seconds_bucket`), `queue`,
    `label` (its other labels as `name=value`: `state=dead`, `le=0.49`; "" for none) and
    `value`. For a notebook; it reads the server as a scrape does."""
    rows = []
    for family in c.collect():
        for s in family.samples:
            labels = dict(s.labels)
            q = labels.pop("queue", "")
            rows.append((s.name, q, ",".join(f"{k}={v}" for k, v in labels.items()), s.value))
    return pd.DataFrame(rows, columns=["metric", "queue", "label", "value"])


def collector(conn: Connection) -> Collector:
    """A `prometheus_client` collector of `conn`'s server (`Collector`): register it
    with a `CollectorRegistry` (`serve` does), or call `collect()`."""
    return Collector(conn)


# -- the exporter's HTTP server ----------------------------------------------------------


def _text_format(app: Any) -> Any:
    """`app` asked for Prometheus' text format (0.0.4) whatever the scraper prefers:
    Prometheus parses it as well as OpenMetrics, which prometheus_client writes in 1.7
    times the time for the same samples (bench/README.md). (Uncompressed too: its gzip at
    level 9 cost a scrape of 1,000 queues more than its read of the four sets.)"""

    def answer(environ: dict, start_response: Any) -> Any:
        return app({**environ, "HTTP_ACCEPT": "text/plain; version=0.0.4"}, start_response)

    return answer


class _Quiet(WSGIRequestHandler):
    """A request handler that logs no line a request (a scrape every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Exporter:
    """A running exporter: `url` (its /metrics), `collector`, `stop()`. A context
    manager (stops at the end)."""

    def __init__(self, httpd: Any, thread: threading.Thread, collector: Collector):
        self._httpd, self._thread, self.collector = httpd, thread, collector
        host, port = httpd.server_address[:2]
        self.host, self.port = host, port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/metrics"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<emq Exporter {self.url} of {self.collector.conn.label}>"


def listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:9808` for IPv6; port 0: any free port) -> (host, port);
    anything else is `BadInput`."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65_535:
        raise BadInput(f"listen address {text!r} is not HOST:PORT (e.g. 127.0.0.1:9808)")
    return host, int(port)


def serve(conn: Connection, host: str = HOST, port: int = PORT) -> Exporter:
    """Serve the metrics of `conn`'s server at http://HOST:PORT/metrics from a thread of
    this process, with the exporter process's own (`process_*`); answers the running
    `Exporter` (port 0: a free port, `Exporter.port` says which). A listening address
    that cannot be bound raises `BadInput`. It answers Prometheus' text format (0.0.4),
    uncompressed, whatever the scraper prefers (`_text_format`)."""
    registry = CollectorRegistry(auto_describe=False)
    made = collector(conn)
    registry.register(made)
    ProcessCollector(registry=registry)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(ThreadingWSGIServer):
        address_family = family

    try:
        app = _text_format(make_wsgi_app(registry, disable_compression=True))
        httpd = make_server(host, port, app, Server, handler_class=_Quiet)
    except OSError as exc:
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    thread = threading.Thread(target=httpd.serve_forever, name="emq-exporter", daemon=True)
    thread.start()
    return Exporter(httpd, thread, made)


def run(conn: Connection, host: str = HOST, port: int = PORT, say: Callable[[str], None] = print) -> None:
    """`emq exporter`: serve until SIGTERM or SIGINT, then stop and return (the main
    thread only: it installs the two signal handlers, and puts the old ones back)."""
    stopping = threading.Event()
    handlers = {s: signal.signal(s, lambda *_: stopping.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with serve(conn, host, port) as exporter:
            say(f"emq exporter: serving {exporter.url} for {conn.describe()}; SIGTERM or Ctrl-C stops it")
            while not stopping.wait(1.0):
                pass
        say("emq exporter: stopped")
    finally:
        for s, old in handlers.items():
            signal.signal(s, old)


# -- the check -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing `check` found: the queue, its status (WARNING or CRITICAL), what was
    checked (`verdict`, `dead`, `age`) and why, one sentence."""

    queue: str
    status: str
    check: str
    why: str

    def line(self) -> str:
        return f"{self.status} {self.queue}: {self.why}"


@dataclass(frozen=True)
class Check:
    """What `check` answers: `status` (OK, WARNING, CRITICAL, UNKNOWN), `code` (the
    Nagios exit code: 0, 1, 2, 3), `summary`, the `problems` (most urgent first) and
    the number of `queues` checked. `text()` is what a Nagios-compatible monitor reads
    (`EMQ <STATUS> - <summary>`, then a line a problem); `json()` the same as one line
    of JSON."""

    status: str
    summary: str
    problems: tuple[Problem, ...] = ()
    queues: int = 0

    @property
    def code(self) -> int:
        return STATUSES.index(self.status)

    def lines(self) -> list[str]:
        return [f"EMQ {self.status} - {self.summary}", *(p.line() for p in self.problems)]

    def text(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "code": self.code,
            "summary": self.summary,
            "queues": self.queues,
            "problems": [p.__dict__ for p in self.problems],
        }

    def json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=True)

    def __repr__(self) -> str:
        return f"<emq Check {self.status}: {len(self.problems)} problems in {self.queues} queues>"


def unknown(why: str) -> Check:
    """The check's answer when it could not look: unreachable server, bad arguments."""
    return Check("UNKNOWN", " ".join(why.split()))


def check(
    conn: Connection,
    queues: list[str] | None = None,
    *,
    dead_above: int | None = None,
    age_above_s: float | None = None,
    verdicts: Iterable[str] = CHECK_VERDICTS,
    critical_verdicts: Iterable[str] = CRITICAL_VERDICTS,
    critical_dead_above: int | None = None,
    critical_age_above_s: float | None = None,
) -> Check:
    """Check `queues` (None: every queue the server holds) as a Nagios plugin does.

    A problem is a queue whose health verdict is one of `critical_verdicts` (CRITICAL)
    or of `verdicts` (WARNING), that holds more than `critical_dead_above` dead jobs
    (CRITICAL) or `dead_above` (WARNING), or whose oldest pending job has waited more
    than `critical_age_above_s` seconds (CRITICAL) or `age_above_s` (WARNING). The
    status is the worst problem's, OK when none. A verdict that is not one of health's
    is refused (`BadInput`), as is a negative threshold; a named queue with no key
    raises `UnknownQueue`. Reads only (`frames.health`)."""
    verdicts, critical_verdicts = tuple(verdicts), tuple(critical_verdicts)
    for v in (*verdicts, *critical_verdicts):
        if v not in health.SEVERITY:
            raise BadInput(f"verdict {v!r} is one of {', '.join(health.SEVERITY)}")
    for name, value in (
        ("dead_above", dead_above),
        ("age_above_s", age_above_s),
        ("critical_dead_above", critical_dead_above),
        ("critical_age_above_s", critical_age_above_s),
    ):
        if value is not None and not (isinstance(value, (int, float)) and value >= 0):
            raise BadInput(f"{name} is a number >= 0, not {value!r}")
    h = frames.health(conn, queues)
    problems: list[Problem] = []
    for q, row in h.to_dict("index").items():
        verdict = row["verdict"]
        if verdict in verdicts or verdict in critical_verdicts:
            status = "CRITICAL" if verdict in critical_verdicts else "WARNING"
            problems.append(Problem(str(q), status, "verdict", f"{verdict} — {row['why']}"))
        dead = int(row["dead"])
        limit = _crossed(dead, critical_dead_above, dead_above)
        if limit:
            status, above = limit
            problems.append(Problem(str(q), status, "dead", f"{dead:,} dead, more than {above:,}"))
        age = float(row["oldest_pending_s"])
        limit = _crossed(age, critical_age_above_s, age_above_s)
        if limit:
            status, above = limit
            problems.append(
                Problem(
                    str(q),
                    status,
                    "age",
                    f"the oldest pending job has waited {health.ago(age)}, more than {_threshold(above)}",
                )
            )
    problems.sort(key=lambda p: -STATUSES.index(p.status))
    return Check(_worst(problems), _summary(h, problems, conn), tuple(problems), len(h))


def _crossed(value: float, critical: float | None, warning: float | None) -> tuple[str, float] | None:
    """(status, the threshold) a value is above, CRITICAL first; None when neither (or NaN)."""
    if critical is not None and value > critical:
        return "CRITICAL", critical
    if warning is not None and value > warning:
        return "WARNING", warning
    return None


def _threshold(seconds: float) -> str:
    """A threshold as it was given: 1 h, 30 min, 45 s."""
    for size, unit in ((3600, "h"), (60, "min")):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def _worst(problems: list[Problem]) -> str:
    return max((p.status for p in problems), key=STATUSES.index, default="OK")


# the queues a summary names at most
NAMED = 5


def _summary(h: pd.DataFrame, problems: list[Problem], conn: Connection) -> str:
    if h.empty:
        return f"no queue on {conn.label}"
    if not problems:
        return f"{_many(len(h), 'queue')}, no problem: {health.summary(h)}"
    bad = list(dict.fromkeys(p.queue for p in problems))
    named = ", ".join(bad[:NAMED]) + (f" and {len(bad) - NAMED:,} more" if len(bad) > NAMED else "")
    counted = [(sum(p.status == s for p in problems), s.lower()) for s in ("CRITICAL", "WARNING")]
    said = ", ".join(f"{n:,} {s}" for n, s in counted if n)
    return f"{_many(len(problems), 'problem')} in {len(bad):,} of {_many(len(h), 'queue')} ({said}): {named}"


def _many(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"
