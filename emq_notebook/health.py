"""Health and latency at a glance: the wait and run percentiles by minute, and one
verdict per queue with the sentence that explains it.

Reads only, and never a job's row: the counts are the sets' sizes, the oldest
pending age comes from the head's branded id (it carries its enqueue time),
expired leases from the active set's scores (lease deadlines), throughput from
the per-minute metrics hashes and the wait from the per-minute histograms the
claim scripts keep. So a health check costs the same at 100 jobs and at a
million. `frames.latency` and `frames.health` are these functions.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from ulid import ULID

from . import frames, histogram
from .connector import Connection
from .keyspace import check_name, latency_index_key, latency_key, metrics_key, queue_key

LATENCY_COLUMNS = ["wait_p50", "wait_p95", "wait_p99", "run_p50", "run_p95", "run_p99", "n"]
HEALTH_COLUMNS = [
    "pending",
    "active",
    "schedule",
    "dead",
    "paused",
    "oldest_pending_s",
    "claimed_5m",
    "completed_5m",
    "failed_5m",
    "failure_rate_5m",
    "expired_leases",
    "wait_p95_5m",
    "verdict",
    "why",
]
VERDICTS = ("ok", "idle", "paused", "stuck", "failing", "growing")
WINDOW_MS = 5 * 60_000  # "the last 5 minutes": every minute bucket that overlaps it
STUCK_S = 300  # a backlog with no claim for this long is stuck
FAILING = 0.5  # a failure rate at or above this is failing
_QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


def server_ms(conn: Connection) -> int:
    """The server's clock in ms: the clock the scripts stamp every time with."""
    secs, micros = conn.command("TIME")
    return int(secs) * 1000 + int(micros) // 1000


def _minute_index(minutes: list[int]) -> pd.DatetimeIndex:
    index = pd.to_datetime([m * 60 for m in minutes], unit="s", utc=True)
    index.name = "minute"
    return index


def latency(conn: Connection, q: str, since_ms: int | None = None) -> pd.DataFrame:
    """Wait and run percentiles by minute (UTC), in ms: `wait_p50`, `wait_p95`,
    `wait_p99`, `run_p50`, `run_p95`, `run_p99`, and `n`, the claims whose wait was
    measured that minute. Within 10% of the exact percentile (nearest rank); NaN
    for a minute with no sample of that kind. `since_ms` keeps the last so many ms
    (by the server's clock)."""
    check_name(q)
    minutes = sorted(int(float(m)) for m in conn.command("ZRANGE", latency_index_key(q), 0, -1))
    if since_ms is not None:
        floor = (server_ms(conn) - since_ms) // 60_000
        minutes = [m for m in minutes if m >= floor]
    pipe = conn.pipeline()
    for m in minutes:
        pipe.hgetall(latency_key(q, "wait", m))
        pipe.hgetall(latency_key(q, "run", m))
    replies = pipe.execute() if minutes else []
    records = []
    for i in range(len(minutes)):
        wait, run = histogram.parse(replies[2 * i]), histogram.parse(replies[2 * i + 1])
        row: dict[str, float] = {}
        for kind, h in (("wait", wait), ("run", run)):
            for name, p in _QUANTILES:
                row[f"{kind}_{name}"] = histogram.percentile(h, p)
        row["n"] = histogram.count(wait)
        records.append(row)
    columns = {c: pd.Series([r[c] for r in records], dtype="float64") for c in LATENCY_COLUMNS[:-1]}
    columns["n"] = pd.Series([r["n"] for r in records], dtype="int64")
    return pd.DataFrame({c: v.to_numpy() for c, v in columns.items()}, index=_minute_index(minutes))


def enqueued_ms(job_id: str) -> int | None:
    """When a branded id (`j_` + a ULID) was made, in ms; None for any other id."""
    if not job_id.startswith("j_"):
        return None
    try:
        return ULID.from_str(job_id[2:]).milliseconds
    except ValueError:
        return None


def _window(now: int) -> list[int]:
    """The minute buckets overlapping the last 5 minutes, the current one included."""
    return list(range((now - WINDOW_MS) // 60_000, now // 60_000 + 1))


def _sum(values: list[Any]) -> int:
    return sum(int(v) for v in values if v is not None and str(v).isdigit())


def health(conn: Connection, queues: list[str] | None = None, *, now_ms: int | None = None) -> pd.DataFrame:
    """One row per queue: the counts, `paused`, `oldest_pending_s`, `claimed_5m`,
    `completed_5m`, `failed_5m`, `failure_rate_5m`, `expired_leases`, `wait_p95_5m`
    (ms), `verdict` and `why`, one sentence naming the cause.

    The verdicts, first match wins: `paused` (the operator closed the claim gate);
    `stuck` (a backlog, or expired leases, and no claim for 5 minutes while the
    backlog is at least that old); `failing` (at least half of the jobs finished in
    the last 5 minutes failed); `growing` (more pending than the last 5 minutes
    claimed: the workers are not keeping up); `idle` (nothing pending or in flight
    and no work for 5 minutes); else `ok`. `now_ms` judges at another time than the
    server's clock (a replay, a test).
    """
    names = frames.queues(conn) if queues is None else [check_name(q) for q in queues]
    now = server_ms(conn) if now_ms is None else int(now_ms)
    window = _window(now)
    c = frames.counts(conn, names)
    pipe = conn.pipeline()
    for q in names:
        for kind in ("claimed", "completed", "failed"):
            pipe.hmget(metrics_key(q, kind), [str(m) for m in window])
        # the minutes of the window that have histograms (an idle queue has none)
        pipe.zrangebyscore(latency_index_key(q), window[0], window[-1])
        pipe.zcount(queue_key(q, "active"), "-inf", now)
        pipe.zrange(queue_key(q, "pending"), 0, 0)
        pipe.smembers(queue_key(q, "groups"))
        pipe.hget(queue_key(q, "meta"), "created_at")
    width = 8
    replies = pipe.execute() if names else []
    # the second round: the window's wait histograms, each lane's head (for the
    # oldest pending), and the last claim minute of a queue that claimed nothing in
    # the window while it has something to claim
    second = conn.pipeline()
    plan: list[tuple[str, int]] = []
    for i, q in enumerate(names):
        r = replies[i * width : (i + 1) * width]
        for m in r[3]:
            second.hgetall(latency_key(q, "wait", int(float(m))))
            plan.append(("wait", i))
        for g in sorted(r[6]):
            second.zrange(queue_key(q, f"g:{g}:pending"), 0, 0)
            plan.append(("lane", i))
        if _sum(r[0]) == 0 and (c.at[q, "pending"] or r[4]):
            second.hkeys(metrics_key(q, "claimed"))
            plan.append(("last", i))
    more = second.execute() if plan else []
    heads: dict[int, list[str]] = {i: list(replies[i * width + 5]) for i in range(len(names))}
    waits: dict[int, list[histogram.Histogram]] = {i: [] for i in range(len(names))}
    last_claim: dict[int, int | None] = {}
    for (what, i), reply in zip(plan, more, strict=True):
        if what == "wait":
            waits[i].append(histogram.parse(reply))
        elif what == "lane":
            heads[i].extend(reply)
        else:
            done = [int(m) for m in reply if str(m).isdigit()]
            last_claim[i] = max(done) if done else None
    records = []
    for i, q in enumerate(names):
        r = replies[i * width : (i + 1) * width]
        claimed, completed, failed = _sum(r[0]), _sum(r[1]), _sum(r[2])
        wait = histogram.merge(waits[i])
        made = [t for t in (enqueued_ms(h) for h in heads[i]) if t is not None]
        oldest = max(0.0, (now - min(made)) / 1000) if made else math.nan
        finished = completed + failed
        row: dict[str, Any] = {
            **{k: int(c.at[q, k]) for k in ("pending", "active", "schedule", "dead")},  # type: ignore[arg-type]
            "paused": bool(c.at[q, "paused"]),
            "oldest_pending_s": oldest,
            "claimed_5m": claimed,
            "completed_5m": completed,
            "failed_5m": failed,
            "failure_rate_5m": failed / finished if finished else math.nan,
            "expired_leases": int(r[4]),
            "wait_p95_5m": histogram.percentile(wait, 0.95),
        }
        created = r[7]
        age = (now - int(created)) / 1000 if created and str(created).isdigit() else math.nan
        row["verdict"], row["why"] = judge(row, now, last_claim.get(i), age)
        records.append({"queue": q, **row})
    frame = pd.DataFrame.from_records(records, columns=["queue", *HEALTH_COLUMNS]).set_index("queue")
    ints = [
        "pending",
        "active",
        "schedule",
        "dead",
        "claimed_5m",
        "completed_5m",
        "failed_5m",
        "expired_leases",
    ]
    floats = ["oldest_pending_s", "failure_rate_5m", "wait_p95_5m"]
    return frame.astype(
        {
            **{k: "int64" for k in ints},
            **{k: "float64" for k in floats},
            "paused": "bool",
            "verdict": "object",
            "why": "object",
        }
    )


# -- the verdict and its sentence -----------------------------------------------


def ago(seconds: float) -> str:
    """A duration as an operator says it: 40 s, 7 min, 5 h, 3 d."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def ms_text(ms: float) -> str:
    """A latency as an operator reads it: 850 ms, 4.2 s, 7 min."""
    if math.isnan(ms):
        return "unmeasured"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 90_000:
        return f"{ms / 1000:.1f} s"
    return ago(ms / 1000)


def _jobs(n: int, word: str = "pending") -> str:
    return f"{n:,} {word}"


def judge(
    row: dict[str, Any], now: int, last_claim_minute: int | None, queue_age_s: float
) -> tuple[str, str]:
    """(verdict, why) for one queue's health row. `last_claim_minute` is the latest
    minute with a claim when none fell in the window (None: no claim on record);
    `queue_age_s` is how long the queue has existed (NaN when unknown)."""
    pending, active, expired = row["pending"], row["active"], row["expired_leases"]
    claimed, completed, failed = row["claimed_5m"], row["completed_5m"], row["failed_5m"]
    in_flight = f"{active:,} in flight"
    if expired:
        in_flight += f", {expired:,} of them past their lease"
    if row["paused"]:
        return "paused", f"paused by an operator: {_jobs(pending)}, held until a resume; {in_flight}"
    # how long the backlog has waited: its oldest job's age, else the queue's age
    waited = row["oldest_pending_s"]
    if math.isnan(waited):
        waited = queue_age_s
    if claimed == 0 and (pending or expired):
        if last_claim_minute is None:
            quiet, quiet_s = "never a claim on record", queue_age_s
        else:
            # the claim was at the latest at the end of that minute
            quiet_s = max(0.0, (now - (last_claim_minute + 1) * 60_000) / 1000)
            quiet = f"no claim for {ago(quiet_s)}"
        backlog_old = math.isnan(waited) or waited >= STUCK_S
        if (pending and backlog_old) or (expired and not pending):
            what = _jobs(pending) if pending else f"{expired:,} leases expired"
            return "stuck", f"{what} and {quiet}; {in_flight}: are the workers running?"
    finished = completed + failed
    if finished and failed / finished >= FAILING:
        return "failing", (
            f"{failed:,} of {finished:,} jobs finished in the last 5 min failed "
            f"({failed / finished:.0%}); {row['dead']:,} dead"
        )
    if pending > claimed:
        if claimed == 0:
            return "growing", (
                f"{_jobs(pending)} and no claim in the last 5 min yet; "
                f"the oldest waited {ago(waited) if not math.isnan(waited) else 'unknown'}"
            )
        return "growing", (
            f"{_jobs(pending)}, more than the {claimed:,} claimed in the last 5 min: "
            f"the workers are not keeping up; wait p95 {ms_text(row['wait_p95_5m'])}"
        )
    if not (pending or active or claimed or finished):
        later = f"; {row['schedule']:,} scheduled" if row["schedule"] else ""
        return "idle", f"nothing pending or in flight and no work in the last 5 min{later}"
    return "ok", (
        f"{claimed:,} claimed, {completed:,} completed in the last 5 min; "
        f"wait p95 {ms_text(row['wait_p95_5m'])}; {_jobs(pending)}, {in_flight}"
    )


def verdict_lines(frame: pd.DataFrame) -> list[str]:
    """One line per queue of a `health` frame, as an operator reads it first:
    `reports: stuck — 3,120 pending and no claim for 7 min; ...`."""
    return [f"{q}: {row['verdict']} — {row['why']}" for q, row in frame.iterrows()]
