"""What a look that only watches reads (a dashboard refresh, health, `%emq queues`):
the lanes' backlog summed, and the members at the ends of a queue's sets, no member
read unmeasured.

A queue with a lane per tenant easily has 100,000 lanes or more. A read an operator asks
for (`backlogs`, `backlog`, `frames.counts`, a drain's count) sums every lane, in as many
bounded calls as it takes (`@lane_backlog`: SSCAN a chunk at a time, at most a budget of
lanes and of bytes of names a call); a look that only watches (`watched`) sums at most
`LANE_EXACT` lanes of a queue and carries a larger queue's pass on from look to look,
showing the last whole pass's figure, marked as such, meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .connector import Connection
from .defaults import BYTE_BUDGET
from .keyspace import base, queue_key

# lanes one `@lane_backlog` call sums at most (bench/lanes_watch.py measures a call)
LANES_A_CALL = 1000
# a queue of at most this many lanes has its lane backlog summed whole at every watching
# look, in one call; a larger one is summed this many lanes a look, its pass carried on
# from look to look (`watched`)
LANE_EXACT = 1000
# the longest member a watching look reads at the end of a set (a lane's head, health's
# sample of pending): no command answers a member's length and a read copies it whole,
# and another node may write a job id of many MB. A longer one, measured first without
# being read (lua/includes/ends.lua `probe`: MEMORY USAGE), stays on the server and the
# look says it. No job id the toolkit writes is over 65,536 bytes
# (keyspace.MAX_SERVER_ID): a longer one is foreign, and no row is keyed by it.
HEAD_BYTES = 1 << 20


@dataclass
class Backlog:
    """A queue's lane backlog as a walk summed it: the jobs waiting in its lanes, the
    lanes examined, those skipped uncounted (a name over 65,536 bytes, or a backlog key
    of another type), and the `@lane_backlog` calls it took."""

    jobs: int = 0
    lanes: int = 0
    skipped: int = 0
    calls: int = 0
    cursor: str = "0"

    def add(self, reply: list) -> list[str]:
        """One call's reply summed in; answers the heads it sent."""
        self.cursor = str(reply[0])
        self.lanes += int(reply[1])
        self.jobs += int(reply[2])
        self.skipped += int(reply[3])
        self.calls += 1
        return list(reply[4:])


def _step(conn: Connection, q: str, cursor: str, most: int, pipe: Any) -> None:
    conn.run("lane_backlog", [base(q)], [cursor, most, BYTE_BUDGET, 0], verb="lanes", pipeline=pipe)


def measured_only(conn: Connection) -> str:
    """'1' when a script may read only the set members it measured first (a server: a
    member of many MB read holds it), '' on the embedded fakeredis, which has no MEMORY
    command to measure with: its sets are this process's own memory, and a read there
    holds no server (lua/includes/ends.lua `readable`)."""
    return "" if conn.in_process else "1"


def backlogs(conn: Connection, queues: Iterable[str]) -> dict[str, Backlog]:
    """Each queue's lane backlog, exact: every lane's ZCARD summed on the server, at most
    `LANES_A_CALL` lanes and about `BYTE_BUDGET` bytes of names a call (`@lane_backlog`),
    the queues' calls pipelined a round at a time until each walk is done. A queue of
    100,000 lanes costs 100 calls of a few ms each, never one SMEMBERS of its whole set
    nor a command per lane. Reads only."""
    walks = {q: Backlog() for q in queues}
    going = list(walks)
    while going:
        pipe = conn.pipeline()
        for q in going:
            _step(conn, q, walks[q].cursor, LANES_A_CALL, pipe)
        for q, reply in zip(going, pipe.execute(), strict=True):
            walks[q].add(reply)
        going = [q for q in going if walks[q].cursor != "0"]
    return walks


def backlog(conn: Connection, q: str) -> int:
    """The jobs waiting in the queue's lanes, exact (`backlogs`). Reads only."""
    return backlogs(conn, [q])[q].jobs


def heads_unread(reply: list | None) -> list[int]:
    """The bytes of each head a `@lane_backlog` reply (with heads) left unread, as measured (over
    `HEAD_BYTES`; -1: not measurable)."""
    return [int(h) for h in reply[4:] if isinstance(h, int)] if reply else []


def unread_head(where: str, size: int) -> str:
    """What a look says of a member it left on the server (`HEAD_BYTES`): "the head of
    emq:{q}:pending not read: about 30.0 MB"."""
    if size < 0:
        return f"{where} not read: its size could not be measured"
    return f"{where} not read: about {size / 1e6:,.1f} MB, over {HEAD_BYTES:,} bytes (another node's)"


@dataclass(frozen=True)
class LaneCount:
    """The lane backlog a watching look shows for a queue (`watched`).

    `jobs` is exact when `exact` (the look summed every lane); else it is the total of
    the last whole pass, which ended at `as_of` (epoch seconds), or, while a queue's
    first pass is still going, the jobs in the `counted` lanes summed so far (`partial`:
    a lower bound). `lanes` is how many lanes the queue has; `skipped` the lanes a pass
    could not count (a name over 65,536 bytes, a backlog key of another type)."""

    jobs: int
    lanes: int
    exact: bool = True
    counted: int = 0
    as_of: float | None = None
    partial: bool = False
    skipped: int = 0

    def note(self, now: float | None = None) -> str:
        """What a view says beside the figure: "" when it is exact and whole."""
        skipped = f"; {self.skipped:,} lanes not counted (a name too long, a key of another type)"
        skipped = skipped if self.skipped else ""
        if self.exact:
            return skipped.removeprefix("; ")
        if self.partial:
            return (
                f"at least: lanes counted so far {self.counted:,} of {self.lanes:,} "
                f"(a pass in progress){skipped}"
            )
        ago = _ago((now if now is not None else time.time()) - (self.as_of or 0))
        return f"lane backlog as of a pass over {self.counted:,} lanes that ended {ago} ago{skipped}"


def _ago(seconds: float) -> str:
    if seconds < 60:
        return "under a minute"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


class _Pass:
    """One queue's pass over its lanes, carried on from look to look, and the last whole one."""

    def __init__(self) -> None:
        self.now = Backlog()
        self.last: Backlog | None = None
        self.ended: float | None = None

    def carry(self, reply: list, lanes: int, now: float) -> LaneCount:
        """One step's reply (`@lane_backlog`'s, from `self.now.cursor`) summed in: the
        queue's lane backlog as the look shows it (`watched`)."""
        fresh = self.now.cursor == "0"
        self.now.add(reply)
        if self.now.cursor == "0":
            done, self.now = self.now, Backlog()
            self.last, self.ended = done, now
            if fresh:  # walked whole in this look
                return LaneCount(done.jobs, lanes, counted=done.lanes, skipped=done.skipped)
        if self.last is not None:
            last = self.last
            return LaneCount(
                last.jobs, lanes, exact=False, counted=last.lanes, as_of=self.ended, skipped=last.skipped
            )
        walked = self.now
        return LaneCount(
            walked.jobs, lanes, exact=False, counted=walked.lanes, partial=True, skipped=walked.skipped
        )


class _Passes:
    """The passes of the queues of one server as this process watches them (one per
    connection's directory, shared with its `with_executor` twins)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queues: dict[str, _Pass] = {}


_passes: weakref.WeakKeyDictionary[Any, _Passes] = weakref.WeakKeyDictionary()
_passes_lock = threading.Lock()


def _passes_of(conn: Connection) -> _Passes:
    with _passes_lock:
        found = _passes.get(conn.directory)
        if found is None:
            found = _passes[conn.directory] = _Passes()
        return found


def watched(conn: Connection, sizes: dict[str, int]) -> dict[str, LaneCount]:
    """The lane backlog of each queue of `sizes` ({queue: its lanes}) as a watching look
    reads it: ONE `@lane_backlog` call a queue with lanes (all in one pipeline), at most
    `LANE_EXACT` lanes each, whatever the number of lanes. A queue whose lanes that call
    walks whole is exact; a larger one's pass goes on from where its last look left it
    (kept for this connection's server), and the look shows the last whole pass's total
    (or, during the first pass, what it has summed so far), marked (`LaneCount`). So a
    dashboard left open costs the server the same at 1,000 lanes and at a million: a
    pass over a million lanes takes 1,000 looks. Reads only."""
    passes = _passes_of(conn)
    out = {q: LaneCount(0, 0) for q, n in sizes.items() if not n}
    for q in out:
        passes.queues.pop(q, None)
    asked = [q for q, n in sizes.items() if n]
    if not asked:
        return out
    with passes.lock:
        pipe = conn.pipeline()
        for q in asked:
            _step(conn, q, passes.queues.setdefault(q, _Pass()).now.cursor, LANE_EXACT, pipe)
        replies = pipe.execute()
        now = time.time()
        for q, reply in zip(asked, replies, strict=True):
            out[q] = passes.queues[q].carry(reply, sizes[q], now)
    return out


# -- one call a queue: what a look reads -------------------------------------------------

# the most fields of a hash a look reads whole (`@read_watch`): a minute's wait histogram
# (one field a 10% step of ms, about 200 at most) and the claim minutes (a day: 1,440)
HASH_FIELDS = 4096
# what `@read_watch` counts, in its order (its eighth count: whether the meta hash is there)
_COUNTED = ("pending", "active", "schedule", "dead", "paused", "lanes", "repeatables")
# the key each count reads, by its name in `queue_key`
_COUNTED_KEYS = ("pending", "active", "schedule", "dead", "meta", "groups", "repeat")


@dataclass(frozen=True)
class Reading:
    """What one `@read_watch` call read of a queue: the server's time `now` (ms),
    `sizes` (the sets' sizes, pending without its lanes, `paused` 1 or 0, `lanes`,
    `repeatables`; 0 for a key of another type), `unread` (those keys, by name),
    `there` (some key of the queue is left), `lanes` (its lane backlog as this look
    shows it, when the look stepped the lanes' pass), `health` (what health asked, as
    the script answers it; empty when it asked nothing) and `scraped` (what a scrape
    asked besides, as `@read_monitor` answers it; None when it asked nothing)."""

    queue: str
    now: int
    sizes: dict[str, int]
    unread: list[str]
    there: bool
    lanes: LaneCount | None
    health: list
    scraped: Any = None


def read(
    conn: Connection,
    queues: list[str],
    *,
    lanes: bool,
    now_ms: int | None = None,
    asked: Sequence[Any] = (),
    also: Mapping[str, Sequence[Any]] | None = None,
) -> list[Reading]:
    """Each queue of `queues` as ONE `@read_watch` call reads it, all in one pipeline: a
    round trip to each server, and on a cluster to every primary at once (redis-py's
    cluster pipeline writes each primary its commands before it reads any reply), each
    call on the primary holding its queue. `lanes`: the look steps each queue's pass over
    its lanes (`watched`: at most `LANE_EXACT` lanes a call). `asked`: what health reads
    of each queue besides (the script's ARGV from its 5th; none: the counts only), and
    with it `also`, what a scrape reads of each queue after that (ARGV[14] on). `now_ms` None is each
    server's own clock. Reads only."""
    passes = _passes_of(conn)
    now = "" if now_ms is None else int(now_ms)
    with passes.lock if lanes else contextlib.nullcontext():
        pipe = conn.pipeline()
        for q in queues:
            cursor = passes.queues.setdefault(q, _Pass()).now.cursor if lanes else ""
            argv = [now, cursor, LANE_EXACT, BYTE_BUDGET, *(asked or ("",)), *(also or {}).get(q, ())]
            conn.run("read_watch", [base(q)], argv, verb="watch", pipeline=pipe)
        replies = pipe.execute() if queues else []
        stepped = time.time()
        out = []
        for q, (at, counted, step, health, *scraped) in zip(queues, replies, strict=True):
            sizes = {k: (0 if n is None else int(n)) for k, n in zip(_COUNTED, counted, strict=False)}
            unread = [queue_key(q, key) for key, n in zip(_COUNTED_KEYS, counted, strict=False) if n is None]
            lane_count = None
            if lanes and sizes["lanes"]:
                lane_count = passes.queues[q].carry(step, sizes["lanes"], stepped)
            elif lanes:
                passes.queues.pop(q, None)
                lane_count = LaneCount(0, 0)
            there = bool(counted[7]) or any(sizes.values()) or bool(unread)
            out.append(Reading(q, int(at), sizes, unread, there, lane_count, health, *scraped))
    return out


def unread_keys(keys: list[str]) -> str:
    """What a look says of a queue's keys it could not count (another type than its own,
    written by another client): "emq:{q}:dead holds another type: counted as empty"."""
    return f"{', '.join(keys)} {'holds' if len(keys) == 1 else 'hold'} another type: counted as empty"


@dataclass(frozen=True)
class Look:
    """What a look that only watches answers: `frame`, one row a queue (`counts.look`'s
    counts, `health.look`'s verdicts), `notes`, {queue: [what a view says beside its
    row]} for each queue whose figures need a word (a lane backlog not summed whole in
    this look: `LaneCount.note`; keys of another type counted as empty: `unread_keys`;
    members left on the server at the ends of its sets: `unread_head`), and `counts`,
    the counts frame it read (`frame` itself for `counts.look`)."""

    frame: pd.DataFrame
    notes: dict[str, list[str]]
    counts: pd.DataFrame

    def note(self, q: str) -> str:
        """The queue's notes in one line ("" for none)."""
        return "; ".join(self.notes.get(q, ()))
