"""Grouped lanes: a group's jobs wait in `emq:{q}:g:<g>:pending`, each lane with
its own concurrency limit (default 1) and pause, served round-robin off a ring.
"""

from __future__ import annotations

from .catalogue import contract
from .checks import whole
from .connector import Connection
from .jobs import Claimed, check_lease, gated_claim
from .keyspace import base, check_name, lane_key, lane_meta_key, queue_key


@contract("claim", writes=True)
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


@contract("lane-set", writes=True, single=True)
def set_limit(conn: Connection, q: str, group: str, limit: int) -> None:
    """How many of the lane's jobs may be in flight at once (>= 1)."""
    _set(conn, q, group, "limit", whole(limit, "limit"))


@contract("lane-set", writes=True, single=True)
def pause_lane(conn: Connection, q: str, group: str) -> None:
    """Stop serving this lane only; the rest of the queue runs on."""
    _set(conn, q, group, "pause")


@contract("lane-set", writes=True, single=True)
def resume_lane(conn: Connection, q: str, group: str) -> None:
    """Serve the lane again; it rejoins the ring when runnable."""
    _set(conn, q, group, "resume")


def lanes(conn: Connection, q: str) -> dict[str, dict]:
    """Every known lane: `{group: {"pending", "active", "limit", "paused"}}`."""
    groups = sorted(conn.command("SMEMBERS", queue_key(q, "groups")) or [])
    pipe = conn.pipeline()
    for g in groups:
        pipe.zcard(lane_key(q, g))
        pipe.hmget(lane_meta_key(q, g), "limit", "active", "paused")
    replies = pipe.execute()
    out = {}
    for i, g in enumerate(groups):
        limit, active, paused = replies[2 * i + 1]
        out[g] = {
            "pending": replies[2 * i],
            "active": int(active or 0),
            "limit": int(limit or 1),
            "paused": paused is not None,
        }
    return out
