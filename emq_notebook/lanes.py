"""Grouped lanes: a group's jobs wait in `emq:{q}:g:<g>:pending`, each lane with
its own concurrency limit (default 1) and pause, served round-robin off a ring.

A queue with a lane per tenant easily has 100,000 lanes or more, so no read here
takes the set of known groups (`emq:{q}:groups`) whole or sends a command per lane
from the client: the lanes are walked on the server a page at a time (`@read_lanes`,
`@lane_backlog`: SSCAN a chunk at a time, at most a budget of lanes and of bytes of
names a call, the cursor answered to go on from). A read an operator asks for
(`lanes`, `backlog`, `frames.counts`, a drain's count) is exact, in as many bounded
calls as it takes; a look that only watches (`watched`: a dashboard refresh, health)
sums at most `LANE_EXACT` lanes of a queue and carries a larger queue's pass on from
look to look, showing the last whole pass's figure, marked as such, meanwhile.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from . import audit, decoding
from .catalogue import contract
from .checks import whole
from .connector import Connection
from .defaults import BYTE_BUDGET, DEFAULT_LIMIT
from .errors import InvalidName
from .jobs import Claimed, check_lease, gated_claim
from .keyspace import MAX_SERVER_ID, base, check_name, lane_key, lane_meta_key, queue_key

# lanes one `@lane_backlog` call sums at most: the walk and a ZCARD a lane cost Valkey
# about 2.4 us a lane (bench/lanes_watch.py, 1,000,000 lanes: calls of 2,000 held it 4.8
# ms on average, 9.4 at the longest; 1,000 keep a call near 2.5 ms)
LANES_A_CALL = 1000
# lanes one `@read_lanes` call answers with their counts (a listing's page): a ZCARD, two
# HSTRLEN, an HMGET and an HEXISTS a lane, about 8 us (a call of 500 held Valkey 4.5 to
# 8.2 ms; 250 about half)
LANE_ROWS_A_CALL = 250
# lanes one `@read_lanes` call examines for their names (a completion): about 0.7 us a
# lane (a call of 2,000: 1.4 ms)
NAMES_A_CALL = 2000
# a queue of at most this many lanes has its lane backlog summed whole at every watching
# look, in one call (about 1.7 ms of Valkey); a larger one is summed this many lanes a
# look, its pass carried on from look to look (`watched`): a dashboard refreshing every
# 2 s sums 100,000 lanes in about 3 min, a million in about half an hour
LANE_EXACT = 1000
# the longest member a watching look reads at the end of a set (a lane's head, health's
# sample of pending): no command answers a member's length and a read copies it whole,
# and another node may write a job id of many MB (a 30 MB head read in a script held
# Valkey 50 to 58 ms, 10 MB 13 to 17). A longer one, measured first without being read
# (lua/includes/ends.lua `probe`: MEMORY USAGE), stays on the server and the look
# says it (`HEADS_UNREAD`). No job id the toolkit writes is over 65,536 bytes
# (keyspace.MAX_SERVER_ID): a longer one is foreign, and no row is keyed by it.
HEAD_BYTES = 1 << 20


@contract("claim", writes=True)
@audit.audited("claim")
def claim(conn: Connection, q: str, lease_ms: int = 30_000) -> Claimed | None:
    """The grouped claim: `(id, payload, attempts)` from the next runnable lane, or None.

    Reads the queue's paused field first (its own round trip) before `gclaim2`,
    which carries no pause logic; the function executor folds the read in, and so
    does the claim that follows a faulted read (`native_gclaim`). A
    member whose row is gone is dropped from its lane and the claim goes on to
    the next job. Refuses `BadRow` (writing nothing) when the job it would serve,
    or the meta of a lane on the way, has a field no transition can read.
    """
    check_lease(lease_ms)
    keys = [queue_key(q, "ring"), queue_key(q, "active"), base(q)]
    return gated_claim(conn, q, "gclaim2", keys, lease_ms)


def _set(conn: Connection, q: str, group: str, what: str, limit: int = 0) -> None:
    check_name(group, "group")
    conn.run(
        "lane_set", [lane_meta_key(q, group), base(q)], [group, what, limit], verb=f"lane {what}", queue=q
    )


@contract("lane-set", writes=True)
@audit.audited("lane-set", single=True)
def set_limit(conn: Connection, q: str, group: str, limit: int) -> None:
    """How many of the lane's jobs may be in flight at once (>= 1)."""
    _set(conn, q, group, "limit", whole(limit, "limit"))


@contract("lane-set", writes=True)
@audit.audited("lane-set", single=True)
def pause_lane(conn: Connection, q: str, group: str) -> None:
    """Stop serving this lane only; the rest of the queue runs on."""
    _set(conn, q, group, "pause")


@contract("lane-set", writes=True)
@audit.audited("lane-set", single=True)
def resume_lane(conn: Connection, q: str, group: str) -> None:
    """Serve the lane again; it rejoins the ring when runnable."""
    _set(conn, q, group, "resume")


# the most lane names a refusal or a note lists
NAMES_SHOWN = 20


class LaneList(dict):
    """`lanes`' answer, a dict `{group: {"pending", "active", "limit", "paused"}}`, with
    `.total`, the lanes the queue has (SCARD), `.complete`, True when every lane is in
    it, and `.skipped`, the lanes left out for a name over 65,536 bytes."""

    total: int
    complete: bool
    skipped: int


def _count(value: Any, absent: int) -> int | None:
    """A lane's limit or active count as `@read_lanes` answers it: `absent` when the meta
    has none; None when it holds no whole number (text another node wrote, or a number:
    the length of a field too long to be one)."""
    if value is None:
        return absent
    return decoding.whole_text(value) if isinstance(value, str) else None


def _lane(pending: Any, limit: Any, active: Any, paused: Any) -> dict:
    """One lane's entry: its backlog, its jobs in flight, its limit and its pause. A count
    the server holds no whole number for reads None (another node wrote it)."""
    return {
        "pending": pending if isinstance(pending, int) else None,
        "active": _count(active, 0),
        "limit": _count(limit, 1),
        "paused": bool(paused),
    }


@dataclass
class Page:
    """One `@read_lanes` call's answer: the cursor to go on from ("0": the set was
    walked whole), the lanes examined, those left out (a name over MAX_ID bytes), and the
    lanes whose names start with the prefix asked: their entries (`_lane`) when counted,
    else None."""

    cursor: str
    examined: int
    skipped: int
    lanes: dict[str, dict | None]


def page(
    conn: Connection,
    q: str,
    cursor: str = "0",
    most: int | None = None,
    *,
    counts: bool = True,
    prefix: str = "",
) -> Page:
    """One `@read_lanes` call: at most `most` lanes examined from SSCAN cursor `cursor`
    (None: `LANE_ROWS_A_CALL` with their counts, `NAMES_A_CALL` by name), and about
    `BYTE_BUDGET` bytes of names, each answered with its counts (`counts`) or by name,
    those whose names start with `prefix`. Reads only."""
    width = 5 if counts else 1
    if _over(prefix):
        # no name answered is over MAX_SERVER_ID bytes (no key is built of one), so none
        # starts with this prefix: nothing is sent (a prefix of 16 MB held Valkey 29 ms)
        return Page(cursor, 0, 0, {})
    if most is None:
        most = LANE_ROWS_A_CALL if counts else NAMES_A_CALL
    reply = conn.run(
        "read_lanes", [base(q)], [cursor, most, BYTE_BUDGET, "1" if counts else "", prefix], verb="lanes"
    )
    cursor, examined, skipped, rest = str(reply[0]), int(reply[1]), int(reply[2]), reply[3:]
    found: dict[str, dict | None] = {}
    for at in range(0, len(rest), width):
        found[rest[at]] = _lane(*rest[at + 1 : at + 5]) if counts else None
    return Page(cursor, examined, skipped, found)


def lanes(conn: Connection, q: str, limit: int | None = DEFAULT_LIMIT) -> LaneList:
    """The queue's lanes, at most `limit` of them (None: every one), by name:
    `{group: {"pending", "active", "limit", "paused"}}`; `.total` says how many lanes
    the queue has and `.complete` whether all are in. A count the lane's meta holds no
    whole number for (another node wrote it) reads None.

    Read a page at a time (`@read_lanes`: at most `LANE_ROWS_A_CALL` lanes and about
    `BYTE_BUDGET` bytes of names a call), in the set's own order (SSCAN's), so a queue of
    1,000,000 lanes costs the first `limit` of them, never one SMEMBERS of the whole set
    (100,000 lanes: 18.9 ms of Valkey) nor a command per lane from here. With no limit
    every lane is read, in as many calls as it takes (a queue of 1,000,000 lanes: 4,000
    calls, a dict of a million). A lane name over 65,536 bytes (only another node writes
    one) is left out: no key is built of it. Reads only."""
    if limit is not None:
        whole(limit, "limit", least=0)
    total = int(conn.command("SCARD", queue_key(q, "groups")) or 0)
    found: dict[str, dict] = {}
    cursor, walked, left_out, skipped = "0", False, False, 0
    while not walked and (limit is None or len(found) < limit):
        want = LANE_ROWS_A_CALL if limit is None else max(1, min(LANE_ROWS_A_CALL, limit - len(found)))
        got = page(conn, q, cursor, want)
        for g, entry in got.lanes.items():
            if limit is None or len(found) < limit or g in found:
                found[g] = entry or {}
            else:
                left_out = True
        cursor, skipped = got.cursor, skipped + got.skipped
        walked = cursor == "0"
    out = LaneList(sorted(found.items()))
    out.total = max(total, len(out))
    out.complete = walked and not left_out
    out.skipped = skipped
    return out


def lane(conn: Connection, q: str, group: str) -> dict | None:
    """One lane by its name: `{"pending", "active", "limit", "paused"}`, or None when the
    queue knows no lane of that name. A fixed handful of commands, however many lanes
    the queue has; the limit and the active count are measured before they are read
    (another node may have written anything there). Reads only."""
    check_name(q)
    if _over(group):
        # the walks skip such a lane (no key is built of its name): a name of 16 MB typed
        # here held Valkey 20 ms at each of the five commands that name it
        raise InvalidName(
            f"group {group[:40]!r}... is over {MAX_SERVER_ID:,} bytes: no key is built of a lane so named"
        )
    pending_key = decoding.wire(lane_key(q, group, gate=False))
    meta = decoding.wire(lane_meta_key(q, group, gate=False))
    pipe = conn.pipeline()
    pipe.sismember(queue_key(q, "groups"), decoding.wire(group))
    pipe.zcard(pending_key)
    pipe.hstrlen(meta, "limit")
    pipe.hstrlen(meta, "active")
    pipe.hexists(meta, "paused")
    known, pending, limit_size, active_size, paused = pipe.execute()
    if not known:
        return None
    # a field longer than a whole number can be is answered by its length (`_count`: none)
    values: dict[str, Any] = {"limit": limit_size, "active": active_size}
    fields = [f for f, size in values.items() if size <= _FIELD]
    if fields:
        values.update(zip(fields, conn.command("HMGET", meta, *fields), strict=True))
    return _lane(pending, values["limit"], values["active"], paused)


def _over(name: str) -> bool:
    """True for a lane name (or a prefix of one) over `MAX_SERVER_ID` bytes: no walk of
    the lanes answers one, and no key is built of it (lua/includes/lane_walk.lua
    `foreign_lane`)."""
    return len(name) > MAX_SERVER_ID // 4 and decoding.wire_size(name) > MAX_SERVER_ID


def with_backlog(conn: Connection, q: str, cursor: str = "0") -> Iterator[tuple[str, int, str]]:
    """The lanes holding jobs, a page at a time from SSCAN cursor `cursor` (`page`: at
    most `LANE_ROWS_A_CALL` lanes a call), each page by name (as `keyspace.lane_sets`
    orders): (name, its backlog, the cursor its page was read from, to read that page
    again). What a listing of pending jobs walks (`frames.snapshot`, `triage.find`): a
    page read only when the listing reaches it. A lane whose backlog key is of another
    type is passed over. Reads only."""
    while True:
        got = page(conn, q, cursor)
        for g in sorted(got.lanes):
            pending = (got.lanes[g] or {}).get("pending")
            if pending:
                yield g, pending, cursor
        if got.cursor == "0":
            return
        cursor = got.cursor


# the longest limit or active count read (lua/read_lanes.lua LANE_FIELD): a whole number
# is 19 digits at most
_FIELD = 32


def names(conn: Connection, q: str, prefix: str = "", most: int | None = None) -> list[str]:
    """Lane names starting with `prefix`, from ONE `@read_lanes` call of at most `most`
    lanes examined (None: `NAMES_A_CALL`) and about `BYTE_BUDGET` bytes of names, sorted:
    every such lane of a queue of fewer lanes, the first met of a larger one. A
    completion's read. Reads only."""
    return sorted(page(conn, q, "0", most, counts=False, prefix=prefix).lanes)


# -- the lane backlog: exact, or a watching look's --------------------------------


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


def _step(conn: Connection, q: str, cursor: str, most: int, pipe: Any, heads: int = 0) -> None:
    asked: list[Any] = [cursor, most, BYTE_BUDGET, heads]
    if heads:
        asked += [HEAD_BYTES, measured_only(conn)]
    conn.run("lane_backlog", [base(q)], asked, verb="lanes", pipeline=pipe)


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


def heads(conn: Connection, q: str, most: int, lanes_: int, pipe: Any) -> None:
    """Queue on `pipe` one `@lane_backlog` call from the set's start: at most `lanes_`
    lanes examined, answering the id of the first job of each of the first `most` with a
    backlog (`head_ids` reads them from its reply), each measured first and read only
    within `HEAD_BYTES` (`heads_unread`: those left on the server). Health's lane sample."""
    _step(conn, q, "0", lanes_, pipe, most)


def head_ids(reply: list | None) -> list[str]:
    """The heads' ids a `@lane_backlog` reply holds (none for no reply)."""
    return [h for h in reply[4:] if isinstance(h, str)] if reply else []


def heads_unread(reply: list | None) -> list[int]:
    """The bytes of each head a `@lane_backlog` reply left unread, as measured (over
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
    out: dict[str, LaneCount] = {}
    asked = [q for q, n in sizes.items() if n]
    for q in sizes:
        if not sizes[q]:
            out[q] = LaneCount(0, 0)
            passes.queues.pop(q, None)
    if not asked:
        return out
    with passes.lock:
        pipe = conn.pipeline()
        for q in asked:
            p = passes.queues.setdefault(q, _Pass())
            _step(conn, q, p.now.cursor, LANE_EXACT, pipe)
        replies = pipe.execute()
        now = time.time()
        for q, reply in zip(asked, replies, strict=True):
            p = passes.queues[q]
            fresh = p.now.cursor == "0"
            p.now.add(reply)
            if p.now.cursor == "0":
                done, p.now = p.now, Backlog()
                if fresh:  # walked whole in this look
                    out[q] = LaneCount(done.jobs, sizes[q], counted=done.lanes, skipped=done.skipped)
                    p.last, p.ended = done, now
                    continue
                p.last, p.ended = done, now
            if p.last is not None:
                last = p.last
                out[q] = LaneCount(
                    last.jobs, sizes[q], exact=False, counted=last.lanes, as_of=p.ended, skipped=last.skipped
                )
            else:
                out[q] = LaneCount(
                    p.now.jobs,
                    sizes[q],
                    exact=False,
                    counted=p.now.lanes,
                    partial=True,
                    skipped=p.now.skipped,
                )
    return out


# where `frames.counts(watch=True)` leaves the lane counts a look did not sum whole: the
# frame's `attrs[WATCHED]`, {queue: LaneCount}
WATCHED = "lanes_watched"
# where `frames.counts` leaves the keys of a queue it could not count (another type than
# its own, written by another client): the frame's `attrs[UNREAD]`, {queue: [key, ...]}
UNREAD = "keys_unread"
# where health leaves the members at the ends of a queue's sets it did not read (over
# `HEAD_BYTES`): the frame's `attrs[HEADS_UNREAD]`, {queue: [what `unread_head` says]}
HEADS_UNREAD = "heads_unread"


def notes(frame: Any, now: float | None = None) -> dict[str, str]:
    """{queue: what a view says beside its counts} for each queue of a counts frame
    whose lane backlog a watching look did not sum whole (`LaneCount.note`), or which
    holds a key of another type than its own, counted as empty (`UNREAD`), or a member at
    the end of a set too long to read (`HEADS_UNREAD`)."""
    attrs = getattr(frame, "attrs", {})
    said = {q: count.note(now) for q, count in attrs.get(WATCHED, {}).items()}
    for q, keys in attrs.get(UNREAD, {}).items():
        unread = f"{', '.join(keys)} {'holds' if len(keys) == 1 else 'hold'} another type: counted as empty"
        said[q] = f"{said[q]}; {unread}" if said.get(q) else unread
    for q, heads_ in attrs.get(HEADS_UNREAD, {}).items():
        unread = "; ".join(heads_)
        said[q] = f"{said[q]}; {unread}" if said.get(q) else unread
    return {q: note for q, note in said.items() if note}
