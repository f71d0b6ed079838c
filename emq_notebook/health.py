"""Health and latency at a glance: the wait and run percentiles by minute, and one
verdict per queue with the sentence that explains it, most urgent first.

Reads only: the counts are the sets' sizes, the oldest pending age comes from a
bounded sample of rows (`created_at` and `due_at`, two fields each, never a
payload), expired leases from the active set's scores (lease deadlines), the
overdue scheduled jobs from the schedule's scores (due times), throughput from the
per-minute metrics hashes and the wait from the per-minute histograms the claim
scripts keep, all of a queue in ONE `@read_watch` call (`watching.read`). So a health
check costs the same at 100 jobs and at a million, and a call a queue however many.
`frames.latency` and `frames.health` are these functions.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from . import counts as counting
from . import decoding, histogram, watching
from .connector import Connection
from .keyspace import check_name, latency_index_key, latency_key, queue_key

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
# the verdicts, most urgent first: every list of queues is ordered by it, then by size
SEVERITY = ("failing", "stuck", "growing", "dead_letters", "paused", "ok", "idle")
VERDICTS = SEVERITY
# the verdicts `%emq health` sums in one line instead of a line each
QUIET = ("ok", "idle")
WINDOW_MS = 5 * 60_000  # "the last 5 minutes": every minute bucket that overlaps it
STUCK_S = 300  # a backlog with no claim for this long is stuck
FAILING = 0.5  # a failure rate at or above this is failing
OVERDUE_MS = 60_000  # a scheduled job due longer ago than this is backlog: nobody promoted it
# the lanes whose head row is read for the oldest pending age, at most
LANE_SAMPLE = 10
# the lanes examined to find them, at most, from the start of the set of known groups
# (SSCAN's order), whatever the lanes
LANE_WALK = 100
# the longest time field of a sampled row read (bytes): a time is a whole number of
# milliseconds, 13 digits now; a longer field, which only another node writes, is no
# time, and its bytes stay on the server (`@read_watch` measures it first)
TIME_BYTES = 32
_QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


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
        floor = (conn.server_ms() - since_ms) // 60_000
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


def _whole(value: Any) -> int | None:
    """The whole number a time read from the server holds: ASCII digits
    (`decoding.whole_text`); anything else another node wrote ("²²", "1e9") is none."""
    return None if value is None else decoding.whole_text(str(value))


def health(conn: Connection, queues: list[str] | None = None, **options: Any) -> pd.DataFrame:
    """One row per queue, most urgent first: `look(conn, queues, **options).frame`,
    without the notes a view shows beside it. Reads only."""
    return look(conn, queues, **options).frame


def look(
    conn: Connection,
    queues: list[str] | None = None,
    *,
    now_ms: int | None = None,
    counts: pd.DataFrame | None = None,
) -> watching.Look:
    """One row per queue, most urgent first (`by_severity`): the counts, `paused`,
    `oldest_pending_s`, `claimed_5m`, `completed_5m`, `failed_5m`,
    `failure_rate_5m`, `expired_leases`, `wait_p95_5m` (ms), `verdict` and `why`,
    one sentence naming the cause (`judge` says which verdict holds when); the notes a
    view shows beside it, and the counts it read.

    `queues` None is every queue the connection's directory knows; a named queue
    with no key raises `UnknownQueue`. The counts are a watching look's
    (`counts.look(watch=True)`), with its notes; `counts` given (a `frames.counts` frame)
    is taken instead. `now_ms` judges at another time than the server's clock.

    `oldest_pending_s`: how long the longest-waiting job has waited, from rows (the
    later of `created_at` and `due_at`), read in a bounded sample of at most
    `LANE_SAMPLE + 2` rows a queue: the head of pending, the first job of its lowest
    priority, the heads of the first `LANE_SAMPLE` lanes with a backlog within
    `LANE_WALK` lanes, and the most overdue scheduled job. An older job elsewhere is
    not seen (the figure is then a lower bound); NaN when no sampled row holds a time.

    Reads: one `@read_watch` call a queue, all in one pipeline (`watching.read`).
    """
    if counts is None:
        names, stamp = counting.named(conn, queues)
        readings = watching.read(conn, names, lanes=True, now_ms=now_ms, asked=asked(conn))
        return of(readings, counting.of(conn, readings, listed=queues is None, stamp=stamp))
    if queues is not None:
        counts = counts.loc[[check_name(q) for q in queues]]
    names = [str(q) for q in counts.index]
    readings = watching.read(conn, names, lanes=False, now_ms=now_ms, asked=asked(conn))
    return of(readings, watching.Look(counts, {}, counts))


def of(readings: list[watching.Reading], seen: watching.Look) -> watching.Look:
    """The health look of `readings` (`watching.read`, asked `asked(conn)`), of the queues
    of `seen` (their counts look: its frame's sizes and its notes) alone."""
    counts = seen.frame
    sizes = counts.to_dict("index")
    notes = {q: list(said) for q, said in seen.notes.items()}
    records = []
    for r in readings:
        if r.queue not in sizes:
            continue
        q, c, now = r.queue, sizes[r.queue], r.now
        claimed, completed, failed, waits, expired, ends_read, heads, times, quiet, created = r.health
        ends = _Ends.of(q, ends_read, heads)
        wait = histogram.merge(histogram.parse(dict(zip(h[0::2], h[1::2], strict=True))) for h in waits)
        finished = completed + failed
        row: dict[str, Any] = {
            **{k: int(c[k]) for k in ("pending", "active", "schedule", "dead")},
            "paused": bool(c["paused"]),
            "oldest_pending_s": _oldest(now, times, ends.due),
            "claimed_5m": claimed,
            "completed_5m": completed,
            "failed_5m": failed,
            "failure_rate_5m": failed / finished if finished else math.nan,
            "expired_leases": int(expired),
            "wait_p95_5m": histogram.percentile(wait, 0.95),
        }
        born = _whole(created)
        row["verdict"], row["why"] = judge(
            row,
            now,
            _whole(quiet),
            (now - born) / 1000 if born is not None else math.nan,
            overdue=ends.overdue,
            newest_dead_ms=ends.newest,
        )
        records.append({"queue": q, **row})
        if ends.unread:
            notes.setdefault(q, []).extend(ends.unread)
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
    typed = frame.astype(
        {
            **{k: "int64" for k in ints},
            **{k: "float64" for k in floats},
            "paused": "bool",
            "verdict": "object",
            "why": "object",
        }
    )
    return watching.Look(by_severity(typed), notes, counts)


def asked(conn: Connection) -> list[Any]:
    """What health asks `@read_watch` of each queue besides its counts (ARGV[5] on)."""
    return [
        "1",
        WINDOW_MS,
        OVERDUE_MS,
        watching.HEAD_BYTES,
        watching.measured_only(conn),
        LANE_SAMPLE,
        LANE_WALK,
        TIME_BYTES,
        watching.HASH_FIELDS,
    ]


class _Ends:
    """What a look read at the ends of a queue's sets (`@read_watch`'s ends, as `@read_ends`
    answers them, and its lanes' heads): `overdue`, the scheduled jobs due over
    `OVERDUE_MS` ago; `due`, the
    earliest due time among them; `newest`, when the newest dead job died; `unread`, what
    the look says of each member it left on the server (over `watching.HEAD_BYTES`)."""

    def __init__(self) -> None:
        self.overdue = 0
        self.due: int | None = None
        self.newest: float | None = None
        self.unread: list[str] = []

    @classmethod
    def of(cls, q: str, reply: list | None, lane_reply: list | None) -> _Ends:
        out = cls()
        if reply:
            _, _, overdue, due, newest, *unread = reply
            out.overdue = int(overdue or 0)
            out.due = int(due) if due is not None else None
            out.newest = float(newest) if newest is not None else None
            pending = queue_key(q, "pending")
            where = {
                "head": f"the head of {pending}",
                "band": f"the first job of {pending}'s lowest priority",
            }
            for at in range(0, len(unread) - 1, 2):
                place = where.get(unread[at], unread[at])
                out.unread.append(watching.unread_head(place, int(unread[at + 1])))
        for size in watching.heads_unread(lane_reply):
            out.unread.append(watching.unread_head(f"the head of a lane of {q}", size))
        return out


def _oldest(now: int, times: Any, due: int | None) -> float:
    """Seconds the longest-waiting sampled job has waited: the later of each row's
    `created_at` and `due_at` (as `@read_rows` answers them; a row with neither, or with
    fields too long to be times, is skipped), and `due`, the due time of the most
    overdue scheduled job. NaN when none is known."""
    starts = []
    for created, due_at, *_ in times:
        known = [t for t in (_whole(created), _whole(due_at)) if t is not None]
        if known:
            starts.append(max(known))
    if due is not None:
        starts.append(due)
    return max(0.0, (now - min(starts)) / 1000) if starts else math.nan


def by_severity(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame with a `verdict` column (and the counts), most urgent first
    (`SEVERITY`), then the biggest (pending + active + schedule + dead), then by name."""
    if frame.empty:
        return frame
    rank = frame["verdict"].map(lambda v: SEVERITY.index(v) if v in SEVERITY else len(SEVERITY))
    size = sum(frame[c].astype("int64") for c in ("pending", "active", "schedule", "dead") if c in frame)
    keys = pd.DataFrame({"rank": rank, "size": -size, "name": frame.index.astype(str)}, index=frame.index)
    order = keys.sort_values(["rank", "size", "name"], kind="stable").index
    return frame.loc[order]


def summary(frame: pd.DataFrame) -> str:
    """How many queues hold each verdict, most urgent first:
    "3 failing · 12 stuck · 1 dead letters · 180 ok" ("" for no queue)."""
    counted = frame["verdict"].value_counts() if not frame.empty else pd.Series(dtype="int64")
    return " · ".join(f"{int(counted[v]):,} {_word(v)}" for v in SEVERITY if v in counted)


def _word(verdict: str) -> str:
    return verdict.replace("_", " ")


def report_lines(frame: pd.DataFrame) -> list[str]:
    """What `%emq health` prints for a list of queues: a line for each queue that is
    not `ok` or `idle`, most urgent first, then the rest summed in one line
    ("and 180 ok, 5 idle"; "no problem: 180 ok, 5 idle" when nothing else)."""
    problems = frame[~frame["verdict"].isin(QUIET)]
    lines = verdict_lines(problems)
    counted = frame["verdict"].value_counts()
    rest = ", ".join(f"{int(counted[v]):,} {v}" for v in QUIET if v in counted)
    if rest:
        lines.append(f"and {rest}" if lines else f"no problem: {rest}")
    return lines


# -- the verdict and its sentence -----------------------------------------------


def ago(seconds: float) -> str:
    """A duration as an operator says it: under a minute, 7 min, 5 h, 3 d. Never in
    seconds: a sentence that changed every second would redraw every row of a live
    overview on every refresh."""
    if seconds < 60:
        return "under a minute"
    if seconds < 90:
        return "1 min"
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


def _backlog(pending: int, overdue: int) -> str:
    if not overdue:
        return _jobs(pending)
    late = f"{overdue:,} overdue in schedule"
    return f"{_jobs(pending)}, {late}" if pending else late


def judge(
    row: dict[str, Any],
    now: int,
    last_claim_minute: int | None,
    queue_age_s: float,
    *,
    overdue: int = 0,
    newest_dead_ms: float | None = None,
) -> tuple[str, str]:
    """(verdict, why) for one queue's health row: the most urgent that holds, in
    `SEVERITY` order.

    - `failing`: at least half of the jobs finished in the last 5 minutes failed;
    - `stuck`: a backlog (pending, and scheduled jobs overdue by more than a minute:
      due, and nobody promoting or claiming them), or expired leases, and no claim
      for 5 minutes while the backlog is at least that old;
    - `growing`: a backlog bigger than the last 5 minutes claimed;
    - `dead_letters`: the queue holds dead jobs (a queue holding them is never
      `ok` or `idle`);
    - `paused`: the operator closed the claim gate (a paused queue is never `stuck`
      or `growing`: its backlog is held on purpose);
    - `idle`: nothing pending or in flight and no work for 5 minutes; else `ok`.

    A queue holding dead jobs says how many whatever its verdict ("...; 2,600 dead").

    `last_claim_minute` is the latest minute with a claim when none fell in the
    window (None: no claim on record); `queue_age_s` is how long the queue has
    existed (NaN when unknown); `overdue` counts the scheduled jobs due more than
    `OVERDUE_MS` ago; `newest_dead_ms` is when the newest dead job died."""
    pending, active, expired, dead = row["pending"], row["active"], row["expired_leases"], row["dead"]
    claimed, completed, failed = row["claimed_5m"], row["completed_5m"], row["failed_5m"]
    backlog = pending + overdue
    paused = row["paused"]
    held = "; paused by an operator" if paused else ""
    # the dead jobs, named by a verdict about something else ("" for none)
    and_dead = f"; {dead:,} dead" if dead else ""
    in_flight = f"{active:,} in flight"
    if expired:
        in_flight += f", {expired:,} of them past their lease"
    finished = completed + failed
    if finished and failed / finished >= FAILING:
        return "failing", (
            f"{failed:,} of {finished:,} jobs finished in the last 5 min failed "
            f"({failed / finished:.0%}); {dead:,} dead{held}"
        )
    # how long the backlog has waited: its oldest job's age, else the queue's age
    waited = row["oldest_pending_s"]
    if math.isnan(waited):
        waited = queue_age_s
    if not paused and claimed == 0 and (backlog or expired):
        if last_claim_minute is None:
            quiet = "never a claim on record"
        else:
            # the claim was at the latest at the end of that minute
            quiet_s = max(0.0, (now - (last_claim_minute + 1) * 60_000) / 1000)
            quiet = f"no claim for {ago(quiet_s)}"
        backlog_old = math.isnan(waited) or waited >= STUCK_S
        if (backlog and backlog_old) or (expired and not backlog):
            what = _backlog(pending, overdue) if backlog else f"{expired:,} leases expired"
            return "stuck", f"{what} and {quiet}; {in_flight}{and_dead}: are the workers running?"
    if not paused and backlog > claimed:
        if claimed == 0:
            return "growing", (
                f"{_backlog(pending, overdue)} and no claim in the last 5 min yet; "
                f"the oldest waited {ago(waited) if not math.isnan(waited) else 'unknown'}{and_dead}"
            )
        return "growing", (
            f"{_backlog(pending, overdue)}, more than the {claimed:,} claimed in the last 5 min: "
            f"the workers are not keeping up; wait p95 {ms_text(row['wait_p95_5m'])}{and_dead}"
        )
    if dead:
        newest = (
            f", the newest {ago(max(0.0, (now - newest_dead_ms) / 1000))} ago"
            if newest_dead_ms is not None
            else ""
        )
        now_failing = (
            f"{failed:,} of {finished:,} finished in the last 5 min failed"
            if failed
            else "nothing failing now"
        )
        return "dead_letters", f"{dead:,} dead{newest}; {now_failing}{held}"
    if paused:
        return "paused", f"paused by an operator: {_jobs(pending)}, held until a resume; {in_flight}"
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
