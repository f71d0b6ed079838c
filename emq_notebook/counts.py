"""How many jobs each queue holds: the four sets' sizes (pending with its lanes'
backlog), its pause, its lanes and repeatables. `frames.counts` is `counts`; health
builds on it. Reads only: a fixed handful of commands a queue, whatever its keys.
"""

from __future__ import annotations

import difflib
from typing import Any

import pandas as pd

from . import watching
from .connector import Connection
from .errors import UnknownQueue
from .keyspace import STATES, check_name, queue_key

# what `counts` reads of each queue, in this order
_READS = (*STATES, "paused", "lanes", "repeatables")


def counts(conn: Connection, queues_: list[str] | None = None, *, watch: bool = False) -> pd.DataFrame:
    """queue x (pending, active, schedule, dead) counts plus paused, lanes, repeatables:
    `look(...).frame`, without the notes a view shows beside it. Reads only."""
    return look(conn, queues_, watch=watch).frame


def look(conn: Connection, queues_: list[str] | None = None, *, watch: bool = False) -> watching.Look:
    """queue x (pending, active, schedule, dead) counts plus paused, lanes, repeatables,
    and the notes a view shows beside them. `pending` includes the lanes' backlogs.

    With no names: every queue the directory knows (`frames.queues`); one found with no key
    left leaves the list and the frame. A named queue with no key at all (no meta
    hash, every set empty) raises `UnknownQueue`: a typo is not an empty queue.

    The lanes' backlogs are summed on the server, never by reading the set of known
    groups whole nor with a command per lane from here: exact, in as many bounded calls
    as the lanes take (`watching.backlogs`: a queue of 100,000 lanes, 50 calls of a few
    ms), or with `watch=True` as a look that only watches sums them (`watching.watched`, the
    dashboard's and health's: one call a queue, whatever its lanes; a queue of more than
    `watching.LANE_EXACT` lanes shows the total of its last whole pass over them, or while
    its first pass goes on the jobs counted so far). A queue whose figure is not this
    read's whole sum, or that holds lanes no call could count, has a note saying so
    (`watching.LaneCount.note`); so has one holding a key of another type than its own
    (another client's), counted as empty (`watching.unread_keys`)."""
    listed = queues_ is None
    names = conn.directory.queues() if queues_ is None else [check_name(q) for q in queues_]
    stamp = conn.directory.stamp()
    pipe = conn.pipeline()
    for q in names:
        for state in STATES:
            pipe.zcard(queue_key(q, state))
        pipe.hexists(queue_key(q, "meta"), "paused")
        pipe.scard(queue_key(q, "groups"))
        pipe.zcard(queue_key(q, "repeat"))
    # a key of another type (another client's) stands as its error: counted as empty,
    # said in a note, so one queue's bad key never blinds a look at all
    replies = pipe.execute(raise_on_error=False) if names else []
    width = len(_READS)
    read = [dict(zip(_READS, replies[i * width : (i + 1) * width], strict=True)) for i in range(len(names))]
    unread = {q: _unread(q, r) for q, r in zip(names, read, strict=True)}
    # the second round: whether a queue that counted nothing has its meta hash (every
    # queue has one; no meta, nothing counted and no key unread: no key of it is left)
    counted = [any(r.values()) or bool(unread[q]) for q, r in zip(names, read, strict=True)]
    more = conn.pipeline()
    for q, some in zip(names, counted, strict=True):
        if not some:
            more.exists(queue_key(q, "meta"))
    answers = iter(more.execute() if not all(counted) else [])
    for r, some in zip(read, counted, strict=True):
        r["there"] = some or bool(next(answers))
    gone = [q for q, r in zip(names, read, strict=True) if not r["there"]]
    conn.directory.forget(gone, since=stamp)
    if gone and not listed:
        raise _unknown(conn, gone)
    if not listed:
        conn.directory.note_all(names)
    kept = [(q, r) for q, r in zip(names, read, strict=True) if r["there"]]
    in_lanes = _lane_counts(conn, {q: int(r["lanes"]) for q, r in kept if r["lanes"]}, watch)
    records = []
    for q, r in kept:
        records.append(
            {
                "queue": q,
                "pending": r["pending"] + (in_lanes[q].jobs if q in in_lanes else 0),
                "active": r["active"],
                "schedule": r["schedule"],
                "dead": r["dead"],
                "paused": bool(r["paused"]),
                "lanes": r["lanes"],
                "repeatables": r["repeatables"],
            }
        )
    cols = ["queue", "pending", "active", "schedule", "dead", "paused", "lanes", "repeatables"]
    frame = pd.DataFrame.from_records(records, columns=cols).set_index("queue")
    notes: dict[str, list[str]] = {}
    for q, count in in_lanes.items():
        if said := count.note():
            notes.setdefault(q, []).append(said)
    for q, keys in unread.items():
        if keys and q in frame.index:
            notes.setdefault(q, []).append(watching.unread_keys(keys))
    return watching.Look(frame, notes, frame)


# the key each of `_READS` reads, by its name in `queue_key`
_READ_KEYS = {**{s: s for s in STATES}, "paused": "meta", "lanes": "groups", "repeatables": "repeat"}


def _unread(q: str, read: dict[str, Any]) -> list[str]:
    """The keys of `read` (one queue's counts) whose reply was an error (a key of
    another type), each count set to 0; answers their names."""
    keys = []
    for name, value in read.items():
        if isinstance(value, Exception):
            read[name] = 0
            keys.append(queue_key(q, _READ_KEYS[name]))
    return keys


def _lane_counts(conn: Connection, sizes: dict[str, int], watch: bool) -> dict[str, watching.LaneCount]:
    """The lane backlog of each queue of `sizes` ({queue: its lanes}): as a watching look
    sums it, or exact (every lane, `watching.backlogs`)."""
    if watch:
        return watching.watched(conn, sizes)
    walked = watching.backlogs(conn, sizes)
    return {
        q: watching.LaneCount(b.jobs, sizes[q], counted=b.lanes, skipped=b.skipped) for q, b in walked.items()
    }


def _unknown(conn: Connection, gone: list[str]) -> UnknownQueue:
    """The refusal of named queues with no key, with the nearest known names."""
    known = [q for q in conn.directory.known() if q not in gone]
    near = sorted({m for q in gone for m in difflib.get_close_matches(q, known, n=3)})
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    names = ", ".join(repr(q) for q in gone)
    return UnknownQueue(f"no queue {names} on {conn.label}: no key under emq:{{{gone[0]}}}:{hint}")
