"""Pandas frames of a queue's jobs, counts and throughput.

Reads only. Rows are fetched a batch of 1,000 jobs per `@read_rows` call, only
the shown fields, never one round trip per job, so a 100,000-job queue is a
snapshot of seconds (bench/snapshot.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import pandas as pd

from .checks import whole
from .connector import Connection
from .errors import BadInput, InvalidName
from .keyspace import STATES, base, check_name, queue_from_key, queue_key

BATCH = 1000
COLUMNS = ["state", "group", "priority", "at", "attempts", "failures", "stalled",
           "last_error", "progress", "payload"]
_INTS = ("priority", "attempts", "failures", "stalled")
# the row fields the frame shows
FIELDS = ("group", "priority", "attempts", "failures", "stalled", "last_error", "progress", "payload")
# what a set's score means: a time for these sets, a priority for pending
_TIMED = {"active": "lease deadline", "schedule": "due", "dead": "died at"}


def _members(conn: Connection, q: str, states: tuple[str, ...], limit: int | None,
             offset: int = 0) -> list[tuple[str, str, float, str | None]]:
    """(id, state, score, group) for the chosen states, lanes' backlogs counted as pending."""
    stop = -1 if limit is None else offset + limit - 1
    pipe = conn.pipeline()
    for state in states:
        pipe.zrange(queue_key(q, state), offset, stop, withscores=True)
    groups = sorted(conn.command("SMEMBERS", queue_key(q, "groups")) or []) if "pending" in states else []
    for g in groups:
        pipe.zrange(queue_key(q, f"g:{g}:pending"), offset, stop, withscores=True)
    replies = pipe.execute()
    out: list[tuple[str, str, float, str | None]] = []
    for state, members in zip(states, replies[:len(states)], strict=True):
        out.extend((m, state, s, None) for m, s in members)
    for g, members in zip(groups, replies[len(states):], strict=True):
        out.extend((m, "pending", s, g) for m, s in members)
    return out


def rows(conn: Connection, q: str, ids: list[str], fields: Sequence[str] = FIELDS) -> list[list]:
    """`fields` of each row of `ids` (None where absent), in batches of `BATCH` ids:
    one `@read_rows` call a batch, so only the shown fields cross the wire."""
    out: list[list] = []
    for start in range(0, len(ids), BATCH):
        out.extend(conn.run("read_rows", [base(q)], [len(fields), *fields, *ids[start:start + BATCH]],
                            verb="jobs", queue=q))
    return out


def snapshot(conn: Connection, q: str, states: str | Sequence[str] = STATES, limit: int | None = None,
             offset: int = 0) -> pd.DataFrame:
    """One row per job, indexed by id: state, group, priority, `at` (the set's time
    score as a UTC timestamp: lease deadline, due, died at), counters, last_error,
    progress and payload. `limit` caps each set (and each lane); `offset` skips that
    many members of each set (and each lane) first, in set order, so a page of a
    large set reads only its own rows. A `limit` is a whole number
    from 1 or None for all; a negative `offset` is `BadInput` (both before any I/O).

    Text columns hold the server's text as read (object dtype, see `_text_column`), so a
    row with bytes that are not UTF-8 is shown, not an error."""
    check_name(q)
    whole(offset, "offset", least=0)
    if isinstance(states, str):
        states = STATES if states == "all" else (states,)
    for s in states:
        if s not in STATES:
            raise BadInput(f"unknown state {s!r}: one of {', '.join(STATES)} or all")
    if limit is not None:
        whole(limit, "limit")
    members = _members(conn, q, tuple(states), limit, offset)
    if not members:     # no rows: the same columns, and an index pandas reads as empty
        return _typed(pd.DataFrame.from_records([], columns=["id", *COLUMNS]).set_index("id"))
    found = rows(conn, q, [m[0] for m in members])
    return frame([m[0] for m in members], [m[1] for m in members], [m[2] for m in members],
                 [m[3] for m in members], found)


def frame(ids: list[str], states: list[str], scores: list[float], lanes: list[str | None],
          found: list[list]) -> pd.DataFrame:
    """The jobs frame, from each job's id, state, set score, lane (None outside a
    lane) and row fields (`FIELDS`, as `rows` reads them): the one place that shapes
    it, for `snapshot` and `triage.find` alike."""
    # column-wise: one list per field, not one dict per job
    columns = dict(zip(FIELDS, zip(*found, strict=True), strict=True)) if found else {f: () for f in FIELDS}
    out = pd.DataFrame({
        "id": _text_column(ids), "state": _text_column(states),
        # a lane's job names its group on the row; the lane it sits in says the same
        "group": _text_column([g if g is not None else lane
                               for g, lane in zip(columns["group"], lanes, strict=True)]),
        "priority": _text_column(columns["priority"]),
        "at": [score if state in _TIMED else None for state, score in zip(states, scores, strict=True)],
        **{f: _text_column(columns[f]) for f in FIELDS[2:]},
    }, columns=["id", *COLUMNS]).set_index("id")
    return _typed(out)


def _text_column(values: Iterable[object]) -> pd.Series:
    """A column of server text as Python strings (object dtype): pandas' own string
    dtype (pyarrow) refuses the surrogates `decoding.ERRORS` reads foreign
    non-UTF-8 bytes as, and an object column keeps them as read, so a value taken
    from the frame writes back the same bytes."""
    return pd.Series(list(values), dtype=object)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for col in _INTS:
        frame[col] = _counts(frame[col])
    frame["at"] = pd.to_datetime(frame["at"].astype("float64"), unit="ms", utc=True)
    return frame


def _counts(column: pd.Series) -> pd.Series:
    """A counter column as int64 (an absent field is 0). A field that does not read
    as a whole number (a row written by another node) shows as <NA>, in pandas'
    nullable Int64, rather than failing the whole frame."""
    numbers = pd.to_numeric(column.fillna(0), errors="coerce")
    bad = numbers.isna() | (numbers != numbers.round())
    if not bad.any():
        return numbers.astype("int64")
    return numbers.mask(bad).astype("Int64")


def queues(conn: Connection) -> list[str]:
    """Every queue on the server, found by its meta hash (SCAN, never KEYS). A key
    whose name fails the name gate (another client's `emq:{a b}:meta`) is not a
    queue this toolkit can address, so it is left out rather than failing the list."""
    found = {queue_from_key(k) for k in conn.scan("emq:{*}:meta")}
    return sorted(q for q in found if q and _addressable(q))


def _addressable(q: str) -> bool:
    try:
        check_name(q)
    except InvalidName:
        return False
    return True


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
    """The metrics hashes as a frame indexed by minute (UTC): completed, failed.
    Ready for `.plot()`. `since_ms` keeps only the last so many milliseconds."""
    pipe = conn.pipeline()
    pipe.hgetall(queue_key(q, "metrics:completed"))
    pipe.hgetall(queue_key(q, "metrics:failed"))
    completed, failed = pipe.execute()
    minutes = sorted({int(m) for m in completed} | {int(m) for m in failed})
    if since_ms is not None:
        floor = (time.time() * 1000 - since_ms) // 60000
        minutes = [m for m in minutes if m >= floor]
    frame = pd.DataFrame({
        "completed": [int(completed.get(str(m), 0)) for m in minutes],
        "failed": [int(failed.get(str(m), 0)) for m in minutes],
    }, index=pd.to_datetime([m * 60 for m in minutes], unit="s", utc=True), dtype="int64")
    frame.index.name = "minute"
    return frame
