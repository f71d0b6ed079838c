"""How many jobs each queue holds: the four sets' sizes (pending with its lanes'
backlog), its pause, its lanes and repeatables. `frames.counts` is `counts`; health
builds on it. Reads only: one `@read_watch` call a queue (`watching.read`), whatever its
keys.
"""

from __future__ import annotations

import difflib

import pandas as pd

from . import watching
from .connector import Connection
from .errors import UnknownQueue
from .keyspace import check_name

COLUMNS = ["pending", "active", "schedule", "dead", "paused", "lanes", "repeatables"]


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

    The lanes' backlogs are summed on the server: exact, in as many bounded calls as the
    lanes take (`watching.backlogs`), or with `watch=True` within one call a queue
    (`watching.watched`: past `watching.LANE_EXACT` lanes, the total of its last whole
    pass). A figure that is not this read's whole sum has a note saying so
    (`watching.LaneCount.note`); so has a key of another type than its own, counted as
    empty (`watching.unread_keys`)."""
    names, stamp = named(conn, queues_)
    readings = watching.read(conn, names, lanes=watch)
    return of(conn, readings, listed=queues_ is None, stamp=stamp)


def named(conn: Connection, queues: list[str] | None) -> tuple[list[str], int]:
    """The queues a look reads (None: every queue the directory knows; else these, each
    name checked) and a stamp taken before the read (`of`'s)."""
    names = conn.directory.queues() if queues is None else [check_name(q) for q in queues]
    return names, conn.directory.stamp()


def of(conn: Connection, readings: list[watching.Reading], *, listed: bool, stamp: int) -> watching.Look:
    """The counts look of `readings` (`watching.read` of the queues asked: `listed`, every
    queue the directory knew at `stamp`; else named ones). A queue with no key left
    leaves the directory; a named one raises `UnknownQueue`. A reading that did not step
    the lanes' pass has its lanes summed exact here (`watching.backlogs`). Reads only."""
    gone = [r.queue for r in readings if not r.there]
    conn.directory.forget(gone, since=stamp)
    if gone and not listed:
        raise _unknown(conn, gone)
    kept = [r for r in readings if r.there]
    if not listed:
        conn.directory.note_all(r.queue for r in kept)
    in_lanes = {r.queue: r.lanes for r in kept if r.lanes is not None}
    exact = {r.queue: r.sizes["lanes"] for r in kept if r.lanes is None and r.sizes["lanes"]}
    for q, walked in watching.backlogs(conn, exact).items():
        in_lanes[q] = watching.LaneCount(walked.jobs, exact[q], counted=walked.lanes, skipped=walked.skipped)
    frame = pd.DataFrame.from_records(
        [
            {
                "queue": r.queue,
                **r.sizes,
                "pending": r.sizes["pending"] + (in_lanes[r.queue].jobs if r.queue in in_lanes else 0),
                "paused": bool(r.sizes["paused"]),
            }
            for r in kept
        ],
        columns=["queue", *COLUMNS],
    ).set_index("queue")
    notes: dict[str, list[str]] = {}
    for q, count in in_lanes.items():
        if said := count.note():
            notes.setdefault(q, []).append(said)
    for r in kept:
        if r.unread:
            notes.setdefault(r.queue, []).append(watching.unread_keys(r.unread))
    return watching.Look(frame, notes, frame)


def _unknown(conn: Connection, gone: list[str]) -> UnknownQueue:
    """The refusal of named queues with no key, with the nearest known names."""
    known = [q for q in conn.directory.known() if q not in gone]
    near = sorted({m for q in gone for m in difflib.get_close_matches(q, known, n=3)})
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    names = ", ".join(repr(q) for q in gone)
    return UnknownQueue(f"no queue {names} on {conn.label}: no key under emq:{{{gone[0]}}}:{hint}")
