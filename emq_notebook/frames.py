"""Pandas frames of a queue's jobs, counts, throughput, health and latency.

`counts` (counts.py), `health` and `latency` (health.py) are named here as SPEC 9
names them. Reads only. Rows are fetched a batch of `BATCH` jobs per `@read_rows` call, only
the shown fields, never one round trip per job, so a 100,000-job queue is a
snapshot of seconds (bench/snapshot.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from . import decoding, jobs, lanes
from .audit import read as _read_audit
from .checks import whole
from .connector import Connection
from .counts import counts as counts
from .defaults import BYTE_BUDGET, MAX_BUDGET
from .errors import BadInput, EMQError
from .health import health as health
from .health import latency as latency
from .keyspace import METRIC_KINDS, STATES, base, check_name, lane_key, metrics_key, queue_key

# rows one `@read_rows` call reads (each field of each row is one value it hands back)
BATCH = 500
# the longest field one `@read_rows` call copies (its ROW_BYTES, the most it takes): a
# longer one, which only another node writes, is read by itself (`_whole`), as is one
# past the call's bytes left
FIELD_BYTES = BYTE_BUDGET
# members one page asks for (`members_page`); the first page of a set FIRST_MEMBERS,
# each next one about BYTE_BUDGET bytes of members as long as the page before's. The
# script answers fewer once their bytes reach BYTE_BUDGET
MEMBERS_A_CALL = 2_000
FIRST_MEMBERS = 100
# text columns: pandas' Arrow-backed strings (a fraction of the memory of Python str
# objects); `object` where needed
TEXT: Any = "str"
COLUMNS = [
    "state",
    "group",
    "priority",
    "at",
    "attempts",
    "failures",
    "stalled",
    "last_error",
    "progress",
    "payload",
]
_INTS = ("priority", "attempts", "failures", "stalled")
# the row fields the frame shows
FIELDS = ("group", "priority", "attempts", "failures", "stalled", "last_error", "progress", "payload")
# what a set's score means: a time for these sets, a priority for pending
_TIMED = {"active": "lease deadline", "schedule": "due", "dead": "died at"}


class _Members:
    """The jobs a snapshot shows, column-wise: id, state, the set's score, and the
    lane (None for a flat set) each job was found in."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.states: list[str] = []
        self.scores: list[float] = []
        self.lanes: list[str | None] = []

    def add(self, state: str, lane: str | None, ids: list[str], scores: list[float]) -> None:
        self.ids += ids
        self.scores += scores
        self.states += [state] * len(ids)
        self.lanes += [lane] * len(ids)


def members_page(conn: Connection, key: str, start: int, most: int) -> tuple[list[str], list[float]]:
    """At most `most` members of a queue's sorted set `key` from rank `start`, and their
    scores, in one `@read_members` call: fewer once their bytes reach `BYTE_BUDGET` (one
    at least), so a page that meets ids another node made long copies about a byte
    budget of them. Reads only."""
    root = key[: key.index("}:") + 2]
    reply = conn.run("read_members", [root], [key[len(root) :], start, most, BYTE_BUDGET], verb="jobs")
    return list(reply[0::2]), [float(s) for s in reply[1::2]]


def _members(
    conn: Connection, q: str, states: tuple[str, ...], limit: int | None, offset: int = 0
) -> _Members:
    """The chosen states in order, then the lanes' backlogs (counted as pending):
    the first `offset` of that order skipped, then at most `limit` in all. A set is
    read a page at a time (`_ranks`). The states' sizes are read first (one round
    trip); the lanes holding jobs a page of lanes at a time with their sizes
    (`lanes.with_backlog`, each page by name), only as far as the rows asked reach: the
    first 1,000 jobs of a queue of a million lanes read a page of lanes, never the
    whole set of known groups nor a ZCARD a lane."""
    pipe = conn.pipeline()
    for state in states:
        pipe.zcard(queue_key(q, state))
    sets: Iterable[tuple[str, str, str | None, int]] = [
        (queue_key(q, state), state, None, size) for state, size in zip(states, pipe.execute(), strict=True)
    ]
    if "pending" in states:
        in_lanes = ((lane_key(q, g, gate=False), "pending", g, n) for g, n, _ in lanes.with_backlog(conn, q))
        sets = itertools.chain(sets, in_lanes)
    out = _Members()
    skip, left = offset, limit
    for key, state, lane, size in sets:
        if left == 0:
            break
        # each set read only where the page falls
        start = min(size, skip)
        skip -= start
        take = size - start if left is None else min(size - start, left)
        if left is not None:
            left -= take
        count = None if left is None and take else take  # None: to its end, as it is now
        if count != 0:
            out.add(state, lane, *_ranks(conn, key, start, count))
    return out


def _ranks(conn: Connection, key: str, start: int, count: int | None) -> tuple[list[str], list[float]]:
    """`count` members of sorted set `key` from rank `start` (None: to its end) and their
    scores, read `MEMBERS_A_CALL` at a time at most (`FIRST_MEMBERS` first, then about
    `BYTE_BUDGET` bytes of members a page: `members_page`), each call its own round
    trip: one ZRANGE of a whole big set would hold the server (400,000 members: over 100
    ms). Each page
    starts after the last member of the one before, wherever it is then (its ZRANK), so
    members coming and going ahead of the place shift nothing; a member that moves
    while the pages are read may be missed, as one that moves before its row is read
    shows its new state."""
    ids: list[str] = []
    scores: list[float] = []
    at, last, most = start, set[str](), min(MEMBERS_A_CALL, FIRST_MEMBERS)
    while count is None or len(ids) < count:
        want = most if count is None else min(most, count - len(ids))
        page, page_scores = members_page(conn, key, at, want)
        for m, sc in zip(page, page_scores, strict=True):
            if m not in last:
                ids.append(m)
                scores.append(sc)
        # the page's bytes, as the script counts them against its budget
        size = sum(map(decoding.wire_size, page))
        # fewer than asked: the set ended, or their bytes reached the budget
        if not page or (len(page) < want and size < BYTE_BUDGET):
            break
        rank = conn.command("ZRANK", key, page[-1])
        at, last = (at + len(page) if rank is None else int(rank) + 1), set(page)
        # the next page about BYTE_BUDGET of members, as long as this page's were
        most = min(MEMBERS_A_CALL, max(1, BYTE_BUDGET * len(page) // max(1, size)))
    return ids, scores


def rows(conn: Connection, q: str, ids: list[str], fields: Sequence[str] = FIELDS) -> list[list]:
    """`fields` of each row of `ids` (None where absent), in batches of at most `BATCH`
    ids: one `@read_rows` call a batch, so only the shown fields cross the wire, each
    call about `BYTE_BUDGET` bytes of them whatever a row holds (`_row_batches`)."""
    out: list[list] = []
    for batch in _row_batches(conn, q, ids, fields):
        out.extend(batch)
    return out


def _row_batches(conn: Connection, q: str, ids: list[str], fields: Sequence[str]) -> Iterator[list]:
    """The rows of `ids` a call at a time: a call is sent at most `BATCH` ids and about
    `defaults.BYTE_BUDGET` bytes of them (`decoding.batch`), and copies at most
    `BYTE_BUDGET` bytes of fields and no field over `FIELD_BYTES`. It answers the rows
    that fit its bytes (the ids it did not answer go again) and its first row as far as
    they go, field by field in order; a field it left out, over `FIELD_BYTES` or past
    the bytes left, is read here (`_whole`), so 64 fields of 1 MiB-1 asked of one row
    are one call of about a MiB and 63 reads of one field each."""
    n = len(fields)
    start = 0
    while start < len(ids):
        batch = decoding.batch(ids, start, BATCH, BYTE_BUDGET)
        start += len(batch)
        while batch:
            got = conn.run("read_rows", [base(q)], [n, FIELD_BYTES, *fields, *batch], verb="jobs", queue=q)
            if not got:  # every call reads one row at least: this is a script's bug
                raise EMQError(f"read_rows answered no row for {len(batch)} ids")
            yield [
                row if len(row) == n else _whole(conn, q, job_id, row, fields)
                for job_id, row in zip(batch, got, strict=False)
            ]
            batch = batch[len(got) :]


def _whole(conn: Connection, q: str, job_id: str, row: list, fields: Sequence[str]) -> list:
    """A row `@read_rows` (or `@find`) answered without some of its fields (their places
    after the values): those over `FIELD_BYTES`, and those past its call's bytes left.
    Each is read as `jobs.get_job` reads a field (`jobs.whole_field`: its length
    first, then one call that reads it, within `BYTE_BUDGET`, or one plain HGET), or is
    `decoding.not_read(length)` when it is over `defaults.MAX_WHOLE_FIELD`, its bytes
    left on the server (a counter column shows that as <NA>)."""
    values, places = row[: len(fields)], row[len(fields) :]
    for place in places:
        at = int(place) - 1
        values[at] = jobs.whole_field(conn, q, job_id, fields[at])
    return values


class _Text:
    """A text column built a batch at a time as Arrow chunks, so each batch's Python
    strings are freed as it goes (a million-row frame never holds them all at once).
    A batch holding text Arrow refuses (the surrogates a non-UTF-8 byte decodes to)
    turns the column into Python objects from then on; so does `TEXT = object`."""

    def __init__(self) -> None:
        self.chunks: list[pa.Array] = []
        self.objects: list[str | None] | None = [] if TEXT is object else None

    def add(self, values: Sequence[str | None]) -> None:
        if self.objects is None:
            try:
                self.chunks.append(pa.array(values, type=pa.large_string()))
                return
            except UnicodeEncodeError:
                self.objects = [v for chunk in self.chunks for v in chunk.to_pylist()]
                self.chunks = []
        self.objects.extend(values)

    def column(self) -> pd.Series:
        """`TEXT` (pandas' Arrow-backed `str`); `object` for refused text and, as
        pandas infers it, for a column with no text at all."""
        if self.objects is None and any(c.null_count < len(c) for c in self.chunks):
            chunked = pa.chunked_array(self.chunks, pa.large_string())
            dtype = pd.api.types.pandas_dtype(TEXT)
            return pd.Series(pd.arrays.ArrowStringArray(chunked, dtype=dtype))  # type: ignore[call-arg]
        if self.objects is None:
            self.objects = [None] * sum(len(c) for c in self.chunks)
        return pd.Series(self.objects, dtype=object)


def _text_column(values: Sequence[str | None]) -> pd.Series:
    text = _Text()
    text.add(values)
    return text.column()


def _whole_column(values: Sequence[Any]) -> Any:
    """A counter column as int64, an absent field as 0 (numpy parses the digits). A
    column with gaps or odd text goes through `_counts`: a field that does not read as
    a whole number (a row written by another node) shows as <NA>."""
    try:
        return np.asarray(values, dtype="int64")
    except (TypeError, ValueError, OverflowError):
        return _counts(pd.Series(values, dtype=object)).array


def _joined(parts: list[Any]) -> Any:
    """The batches of one counter column as one column: int64, or nullable Int64 when
    a batch holds a field that does not read as a whole number."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts) if parts else np.zeros(0, dtype="int64")
    return pd.concat([pd.Series(p, dtype="Int64") for p in parts], ignore_index=True).array


def snapshot(
    conn: Connection, q: str, states: str | Sequence[str] = STATES, limit: int | None = None, offset: int = 0
) -> pd.DataFrame:
    """One row per job, indexed by id: state, group, priority, `at` (the set's time
    score as a UTC timestamp: lease deadline, due, died at), counters, last_error,
    progress and payload.

    Jobs come in state order (as `states` lists them), each set in its own order,
    then the lanes' backlogs (state pending). `offset` skips the first jobs of that
    order and `limit` caps the rows in all, so a page of a million-job queue reads
    only the rows it shows. `limit` is a whole number from 1 or None for all; a
    negative `offset` is `BadInput` (both before any I/O). Text columns are
    Arrow-backed strings (`TEXT`), `object` where a row holds bytes that are not
    UTF-8, so such a row is shown, not an error."""
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
    return frame(
        members.ids, members.states, members.scores, members.lanes, _row_batches(conn, q, members.ids, FIELDS)
    )


# how a page of a set is ordered (`dead_page`)
PAGE_ORDERS = ("time", "oldest", "attempts")


def dead_page(
    conn: Connection,
    q: str,
    start: int = 0,
    count: int = 100,
    *,
    by: str = "time",
    state: str = "dead",
) -> Any:
    """A page of `count` jobs of `state` (dead by default) from place `start`, as a
    `snapshot` frame: `by="time"` the newest death first (the set's score,
    highest first), `"oldest"` the oldest first, `"attempts"` the most attempts first
    (then the newest) among the `defaults.MAX_BUDGET` newest. The order is the
    server's (one `@read_dead_page` call, bounded by MAX_BUDGET members and
    BYTE_BUDGET bytes of ids; then the rows, `rows`), so a page costs the same
    at the end of a 100,000-job set as at its start. `attrs`: `total` (the set's size)
    and `ranked` (how many the order ranked: the size, or those examined for
    attempts). Reads only."""
    check_name(q)
    whole(start, "start", least=0)
    whole(count, "count", most=MAX_BUDGET)
    if by not in PAGE_ORDERS:
        raise BadInput(f"unknown order {by!r}: one of {', '.join(PAGE_ORDERS)}")
    if state not in STATES:
        raise BadInput(f"unknown state {state!r}: one of {', '.join(STATES)}")
    reply = conn.run(
        "read_dead_page", [base(q)], [state, by, start, count, MAX_BUDGET, BYTE_BUDGET], verb="jobs", queue=q
    )
    total, ranked, rest = int(reply[0]), int(reply[1]), reply[2:]
    ids, scores = [str(i) for i in rest[0::3]], [float(s) for s in rest[1::3]]
    out = frame(ids, [state] * len(ids), scores, [None] * len(ids), [rows(conn, q, ids)])
    out.attrs.update(total=total, ranked=ranked)
    return out


def frame(
    ids: list[str],
    states: list[str],
    scores: list[float],
    lanes: list[str | None],
    batches: Iterable[list[list]],
) -> pd.DataFrame:
    """The jobs frame, from each job's id, state, set score and lane (None outside a
    lane), and its row fields (`FIELDS`) in batches as `@read_rows` answers them: the
    one place that shapes it, for `snapshot` and `triage.find` alike. Built a batch at a
    time, so a million-row frame never holds every row's Python strings at once."""
    if not ids:  # no rows: the same columns, and an index pandas reads as empty
        return _typed(pd.DataFrame.from_records([], columns=["id", *COLUMNS]).set_index("id"))
    texts = {f: _Text() for f in ("group", *FIELDS[5:])}
    wholes: dict[str, list] = {f: [] for f in FIELDS[1:5]}
    has_lanes = any(lane is not None for lane in lanes)
    done = 0
    # column-wise, a batch at a time: one list per field, never one dict per job
    for batch in batches:
        if not batch:
            continue
        columns = dict(zip(FIELDS, zip(*batch, strict=True), strict=True))
        groups = columns["group"]
        if has_lanes:
            # a lane's job names its group on the row; the lane it sits in says the same
            groups = tuple(
                g if g is not None else lane
                for g, lane in zip(groups, lanes[done : done + len(batch)], strict=True)
            )
        texts["group"].add(groups)
        for f in FIELDS[5:]:
            texts[f].add(columns[f])
        for f in FIELDS[1:5]:
            wholes[f].append(_whole_column(columns[f]))
        done += len(batch)
    timed = [s if state in _TIMED else None for s, state in zip(scores, states, strict=True)]
    out = pd.DataFrame(
        {
            "state": _text_column(states),
            "group": texts["group"].column(),
            "priority": _joined(wholes["priority"]),
            "at": pd.to_datetime(pd.array(timed, dtype="float64"), unit="ms", utc=True),
            **{f: _joined(wholes[f]) for f in FIELDS[2:5]},
            **{f: texts[f].column() for f in FIELDS[5:]},
        },
        columns=COLUMNS,
    )
    index = _text_column(ids)
    out.index = pd.Index(index.array, dtype=index.dtype, name="id")
    return out


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


def queues(conn: Connection, *, rescan: bool = False) -> list[str]:
    """Every queue on the server, as the connection's directory knows it
    (`directory.py`): found by its meta hash (SCAN, never KEYS) at first use, when
    asked (`rescan=True`) and at most once a minute in the background, never on every
    look; a queue this process named is known at once. A key whose name fails the
    name gate (another client's `emq:{a b}:meta`) is not a queue this toolkit can
    address, so it is left out rather than failing the list."""
    return conn.directory.rescan() if rescan else conn.directory.queues()


def metrics(conn: Connection, q: str, since_ms: int | None = None) -> pd.DataFrame:
    """The metrics hashes as a frame indexed by minute (UTC): claimed, completed,
    failed. Ready for `.plot()`. `since_ms` keeps only the last so many milliseconds.
    A field that is not a minute number (written by hand) is left out."""
    pipe = conn.pipeline()
    for kind in METRIC_KINDS:
        pipe.hgetall(metrics_key(q, kind))
    counted = dict(zip(METRIC_KINDS, pipe.execute(), strict=True))
    minutes = sorted({n for h in counted.values() for n in map(decoding.whole_text, h) if n is not None})
    if since_ms is not None:
        floor = (time.time() * 1000 - since_ms) // 60000
        minutes = [m for m in minutes if m >= floor]
    frame = pd.DataFrame(
        {kind: [_count(counted[kind].get(str(m))) for m in minutes] for kind in METRIC_KINDS},
        index=pd.to_datetime([m * 60 for m in minutes], unit="s", utc=True),
        dtype="int64",
    )
    frame.index.name = "minute"
    return frame


def _count(value: object) -> int:
    """A metrics field's count; one that holds no whole number (damaged by hand) reads 0."""
    return decoding.whole_text(value) or 0


def audit(
    conn: Connection, queue: str | None = None, *, since_ms: int | None = None, limit: int = 1000
) -> pd.DataFrame:
    """The audit trail: who did what to which queue, when, why, and what came
    of it, newest first: `time`, `queue`, `verb`, `outcome`, `count`, `who`, `env`,
    `conn`, `surface`, `reason`, `args`, `ids` (then `notebook`, `acl_user`,
    `ids_digest`, `entry`). One queue's, or every queue's with a stream (obliterated
    ones too); the last `since_ms` ms by the server's clock; at most `limit` entries.
    Reads only (`audit.read`)."""
    return _read_audit(conn, queue, since_ms=since_ms, limit=limit)
