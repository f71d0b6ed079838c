"""The looking room: pandas frames of a queue's state, counts and throughput.

Reads only. Rows are fetched a batch of 1,000 jobs per `@read_rows` call, only
the shown fields, never one round trip per job, so a 100,000-job queue is a
snapshot of seconds (bench/snapshot.py).
"""

from __future__ import annotations

import time

import pandas as pd

from .connector import Connection
from .errors import BadInput
from .keyspace import METRIC_KINDS, STATES, base, check_name, metrics_key, queue_from_key, queue_key

BATCH = 1000
COLUMNS = ["state", "group", "priority", "at", "attempts", "failures", "stalled",
           "last_error", "progress", "payload"]
_INTS = ("priority", "attempts", "failures", "stalled")
# the row fields the frame shows
FIELDS = ("group", "priority", "attempts", "failures", "stalled", "last_error", "progress", "payload")
# what a set's score means: a time for these sets, a priority for pending
_TIMED = {"active": "lease deadline", "schedule": "due", "dead": "died at"}


def _members(conn: Connection, q: str, states, limit: int | None) -> list[tuple[str, str, float, str | None]]:
    """(id, state, score, group) for the chosen states, lanes' backlogs counted as pending."""
    stop = -1 if limit is None else limit - 1
    pipe = conn.pipeline()
    for state in states:
        pipe.zrange(queue_key(q, state), 0, stop, withscores=True)
    groups = sorted(conn.command("SMEMBERS", queue_key(q, "groups")) or []) if "pending" in states else []
    for g in groups:
        pipe.zrange(queue_key(q, f"g:{g}:pending"), 0, stop, withscores=True)
    replies = pipe.execute()
    out = []
    for state, members in zip(states, replies):
        out.extend((m, state, s, None) for m, s in members)
    for g, members in zip(groups, replies[len(states):]):
        out.extend((m, "pending", s, g) for m, s in members)
    return out


def rows(conn: Connection, q: str, ids: list[str], fields=FIELDS) -> list[list]:
    """`fields` of each row of `ids` (None where absent), in batches of `BATCH` ids:
    one `@read_rows` call a batch, so only the shown fields cross the wire."""
    out: list[list] = []
    for start in range(0, len(ids), BATCH):
        out.extend(conn.run("read_rows", [base(q)], [len(fields), *fields, *ids[start:start + BATCH]],
                            verb="jobs", queue=q))
    return out


def snapshot(conn: Connection, q: str, states=STATES, limit: int | None = None) -> pd.DataFrame:
    """One row per job, indexed by id: state, group, priority, `at` (the set's time
    score as a UTC timestamp: lease deadline, due, died at), counters, last_error,
    progress and payload. `limit` caps each set (and each lane)."""
    check_name(q)
    if isinstance(states, str):
        states = STATES if states == "all" else (states,)
    for s in states:
        if s not in STATES:
            raise BadInput(f"unknown state {s!r}: one of {', '.join(STATES)} or all")
    members = _members(conn, q, tuple(states), limit)
    if not members:     # no rows: the same columns, and an index pandas reads as empty
        return _typed(pd.DataFrame.from_records([], columns=["id", *COLUMNS]).set_index("id"))
    # column-wise: one list per field, not one dict per job
    columns = dict(zip(FIELDS, zip(*rows(conn, q, [m[0] for m in members]))))
    frame = pd.DataFrame({
        "id": [m[0] for m in members], "state": [m[1] for m in members],
        # a lane's job names its group on the row; the lane it sits in says the same
        "group": [g if g is not None else m[3] for g, m in zip(columns["group"], members)],
        "priority": columns["priority"],
        "at": [m[2] if m[1] in _TIMED else None for m in members],
        **{f: columns[f] for f in FIELDS[2:]},
    }, columns=["id", *COLUMNS]).set_index("id")
    return _typed(frame)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for col in _INTS:
        frame[col] = pd.to_numeric(frame[col].fillna(0)).astype("int64")
    frame["at"] = pd.to_datetime(frame["at"].astype("float64"), unit="ms", utc=True)
    return frame


def queues(conn: Connection) -> list[str]:
    """Every queue on the server, found by its meta hash (SCAN, never KEYS)."""
    found = {queue_from_key(k) for k in conn.scan("emq:{*}:meta")}
    return sorted(q for q in found if q)


def counts(conn: Connection, queues_: list[str] | None = None) -> pd.DataFrame:
    """queue x (pending, active, schedule, dead) counts plus paused, lanes, repeatables.
    `pending` includes the lanes' backlogs."""
    names = queues(conn) if queues_ is None else [check_name(q) for q in queues_]
    pipe = conn.pipeline()
    for q in names:
        for state in STATES:
            pipe.zcard(queue_key(q, state))
        pipe.hexists(queue_key(q, "meta"), "paused")
        pipe.smembers(queue_key(q, "groups"))
        pipe.zcard(queue_key(q, "repeat"))
    replies = pipe.execute()
    width = len(STATES) + 3
    lane_pipe = conn.pipeline()
    for i, q in enumerate(names):
        for g in sorted(replies[i * width + len(STATES) + 1]):
            lane_pipe.zcard(queue_key(q, f"g:{g}:pending"))
    lane_sizes = iter(lane_pipe.execute())
    records = []
    for i, q in enumerate(names):
        r = replies[i * width:(i + 1) * width]
        groups = r[len(STATES) + 1]
        lane_pending = sum(next(lane_sizes) for _ in groups)
        records.append({"queue": q, "pending": r[0] + lane_pending, "active": r[1],
                        "schedule": r[2], "dead": r[3], "paused": bool(r[4]),
                        "lanes": len(groups), "repeatables": r[6]})
    cols = ["queue", "pending", "active", "schedule", "dead", "paused", "lanes", "repeatables"]
    return pd.DataFrame.from_records(records, columns=cols).set_index("queue")


def metrics(conn: Connection, q: str, since_ms: int | None = None) -> pd.DataFrame:
    """The metrics hashes as a frame indexed by minute (UTC): claimed, completed,
    failed. Ready for `.plot()`. `since_ms` keeps only the last so many milliseconds.
    A field that is not a minute number (written by hand) is left out."""
    pipe = conn.pipeline()
    for kind in METRIC_KINDS:
        pipe.hgetall(metrics_key(q, kind))
    counted = dict(zip(METRIC_KINDS, pipe.execute(), strict=True))
    minutes = sorted({int(m) for h in counted.values() for m in h if m.isdigit()})
    if since_ms is not None:
        floor = (time.time() * 1000 - since_ms) // 60000
        minutes = [m for m in minutes if m >= floor]
    frame = pd.DataFrame({
        kind: [int(counted[kind].get(str(m), 0)) for m in minutes] for kind in METRIC_KINDS
    }, index=pd.to_datetime([m * 60 for m in minutes], unit="s", utc=True), dtype="int64")
    frame.index.name = "minute"
    return frame


# -- health and latency (SPEC 9): computed in `health.py`, served here -----------

def latency(conn: Connection, q: str, since_ms: int | None = None) -> pd.DataFrame:
    """Wait and run percentiles by minute: see `emq_notebook.health.latency`."""
    from . import health as _health
    return _health.latency(conn, q, since_ms)


def health(conn: Connection, queues: list[str] | None = None, *, now_ms: int | None = None) -> pd.DataFrame:
    """One verdict per queue, with its counts and a `why`: see `emq_notebook.health.health`."""
    from . import health as _health
    return _health.health(conn, queues, now_ms=now_ms)
