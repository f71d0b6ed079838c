"""Grouped lanes: a group's jobs wait in `emq:{q}:g:<g>:pending`, each lane with
its own concurrency limit (default 1) and pause, served round-robin off a ring. The
grouped claim, a lane's limit and pause, and the listings of lanes.

A queue with a lane per tenant easily has 100,000 lanes or more, so no read here
takes the set of known groups (`emq:{q}:groups`) whole or sends a command per lane
from the client: the lanes are walked on the server a page at a time (`@read_lanes`:
SSCAN a chunk at a time, at most a budget of lanes and of bytes of names a call, the
cursor answered to go on from). Their backlog summed, exact or as a look that only
watches sums it, is `watching.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import audit, decoding
from .catalogue import contract
from .checks import whole
from .connector import Connection
from .defaults import BYTE_BUDGET, DEFAULT_LIMIT
from .errors import InvalidName
from .jobs import Claimed, check_lease, gated_claim
from .keyspace import LANES_A_CALL, MAX_SERVER_ID, base, check_name, lane_key, lane_meta_key, queue_key

# lanes one `@read_lanes` call answers with their counts (a listing's page): a ZCARD, two
# HSTRLEN, an HMGET and an HEXISTS a lane
LANE_ROWS_A_CALL = 250
# lanes one `@read_lanes` call examines for their names (a completion): as many as a
# drain call looks at
NAMES_A_CALL = LANES_A_CALL


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
        # starts with this prefix: nothing is sent
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
    nor a command per lane from here. With no limit
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
        # the walks skip such a lane (no key is built of its name)
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
    the lanes answers one, and no key is built of it (lua/includes/ids.lua
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
