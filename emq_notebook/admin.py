"""Queue scope: pause, resume, drain, obliterate -- the whole queue at once.

Each verb is one script; `drain` and `obliterate_all` are a Python loop over bounded
calls (`budget` members and about `defaults.BYTE_BUDGET` bytes a call), so an
interrupt between calls leaves a consistent queue. The moves by the job
(`reprocess_dead`, `reprocess_jobs`, `remove_jobs`) live in `moves` and are
re-exported here (SPEC 8 names them under `admin`).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import audit, checks, watching
from .catalogue import contract
from .connector import Connection
from .defaults import BYTE_BUDGET, DEFAULT_BUDGET
from .jobs import is_paused
from .keyspace import base, queue_key
from .moves import Moved, Progress, remove_jobs, reprocess_dead, reprocess_jobs

__all__ = [
    "Moved",
    "backlog",
    "drain",
    "is_paused",
    "job_count",
    "obliterate",
    "obliterate_all",
    "pause",
    "remove_jobs",
    "reprocess_dead",
    "reprocess_jobs",
    "resume",
]


@contract("pause", writes=True)
@audit.audited("pause", single=True)
def pause(conn: Connection, q: str) -> None:
    """Close the claim gate: HSET meta paused 1. No set moves; idempotent; never refuses.

    script: @pause
    precondition: none (idempotent)
    writes: HSET emq:{q}:meta paused 1; publishes `paused`
    replies: None — paused field set; the pending backlog is untouched
    native: none, a script only; EMQ.CLAIM reads the same paused field
    """
    conn.run("pause", [queue_key(q, "meta")], [base(q)], verb="pause", queue=q)


@contract("resume", writes=True)
@audit.audited("resume", single=True)
def resume(conn: Connection, q: str) -> None:
    """Open the claim gate: HDEL meta paused. Idempotent; never refuses.

    script: @resume
    precondition: none (idempotent)
    writes: HDEL emq:{q}:meta paused; publishes `resumed`
    replies: None — a later claim serves the head of pending
    native: none, a script only
    """
    conn.run("resume", [queue_key(q, "meta")], [base(q)], verb="resume", queue=q)


@contract("drain", writes=True)
@audit.audited("drain", bulk=True)
def drain(
    conn: Connection,
    q: str,
    include_schedule: bool = False,
    budget: int = DEFAULT_BUDGET,
    progress: Progress | None = None,
) -> int:
    """Delete the pending backlog (lane backlogs too; the schedule set when asked);
    answers the count drained. Active jobs and the repeat registry survive; drained
    jobs' dedup keys are released. Calls of at most `budget` jobs, about
    `defaults.BYTE_BUDGET` bytes of payloads freed and a bounded number of lanes (each
    call walks the groups set on from where the last stopped); `progress(calls,
    drained)` after each. A foreign id (`keyspace.check_server_id`) leaves the set with
    no key built from it (`obliterate`'s sweep takes its row). An exception that ends
    it part way carries the count (`.done`). Refuses a budget above
    `defaults.MAX_BUDGET` (`BadInput`, before any I/O).

    script: @drain
    precondition: none; bounded calls of `budget` jobs
    writes: deletes pending (and lane, and with include_schedule scheduled) rows and :logs, releases their
      dedup keys; publishes `drained`
    replies: int — the count drained; active jobs and the repeat registry survive
    native: none, a script only
    """
    checks.budget(budget)
    keys = [base(q), queue_key(q, "pending")]
    if include_schedule:
        keys.append(queue_key(q, "schedule"))
    total = calls = 0
    lanes_from = "0"  # where the walk of the lanes goes on (an SSCAN cursor of the groups set)
    audit.started()
    while True:
        asked = [budget, BYTE_BUDGET, lanes_from]
        n, more, lanes_from = conn.run("drain", keys, asked, verb="drain", queue=q)
        audit.changed(n)
        total += n
        calls += 1
        if progress:
            progress(calls, total)
        if not more:
            return total


@contract("obliterate", writes=True)
@audit.audited("obliterate", bulk=True)
def obliterate(conn: Connection, q: str, force: bool = False, budget: int = DEFAULT_BUDGET) -> str:
    """ONE bounded call of @obliterate: `"more"` (call again) or `"ok"` (nothing left
    under `emq:{q}:`, orphans included: "ok" comes only after a whole SCAN pass found
    nothing; a key another client writes behind its cursor can outlive it). A call does
    at most `budget` units of work and frees about `defaults.BYTE_BUDGET` bytes.
    Refuses `NotPaused` on a running queue, `ActiveJobs` unless `force` (forced, jobs
    in flight go too), a budget above `defaults.MAX_BUDGET` (`BadInput`, before any
    I/O). The script's fourth argument asks it for the jobs deleted (EchoMQ's callers
    send three and are answered as ever).

    script: @obliterate
    precondition: paused; unforced, no jobs in flight
    writes: deletes up to `budget` jobs a call, then lanes, repeat records, metrics, dedup keys, orphans and
      meta; publishes `obliterated`
    replies: "more" (call again) or "ok" (nothing left under emq:{q}:) / NotPaused / ActiveJobs
    native: none, a script only
    """
    checks.budget(budget)
    audit.started()
    reply, deleted = conn.run(
        "obliterate",
        [queue_key(q, "meta"), base(q)],
        ["force" if force else "", budget, BYTE_BUDGET, "1"],
        verb="obliterate",
        queue=q,
    )
    audit.changed(deleted)
    return reply


@contract("obliterate", writes=True)
@audit.audited("obliterate", bulk=True)
def obliterate_all(
    conn: Connection,
    q: str,
    force: bool = False,
    budget: int = DEFAULT_BUDGET,
    progress: Progress | None = None,
) -> int:
    """Loop `obliterate` until `"ok"`; answers the number of calls.
    `progress(calls, jobs_left)` after each `"more"` (`job_count(exact=False)`).
    Refuses as `obliterate` does; a refusal or a wire fault after the first call
    carries the jobs deleted before it (`.done`, and its line).
    """
    checks.budget(budget)
    audit.started()
    calls = 0
    while True:
        calls += 1
        if obliterate(conn, q, force=force, budget=budget) == "ok":
            return calls
        if progress:
            progress(calls, job_count(conn, q, exact=False))


def job_count(conn: Connection, q: str, *, exact: bool = True) -> int:
    """Jobs held in the four state sets and every lane backlog (`watching.backlog`, in
    bounded calls). `exact=False` sums the lanes as a watching look does
    (`watching.watched`: one call; a progress report between the calls of a long run)."""
    return _count(conn, q, ("pending", "active", "schedule", "dead"), exact)


def backlog(conn: Connection, q: str, include_schedule: bool = False) -> int:
    """What a drain would delete: pending, the lane backlogs (and the schedule set)."""
    return _count(conn, q, ("pending", "schedule") if include_schedule else ("pending",))


def _count(conn: Connection, q: str, states: Iterable[str], exact: bool = True) -> int:
    """The jobs of `states`' sets, a lane's backlog counted as pending. Reads only."""
    pipe = conn.pipeline()
    for state in states:
        pipe.zcard(queue_key(q, state))
    pipe.scard(queue_key(q, "groups"))
    *sizes, known = pipe.execute()
    if "pending" not in states or not known:
        return sum(sizes)
    in_lanes = watching.backlog(conn, q) if exact else watching.watched(conn, {q: known})[q].jobs
    return sum(sizes) + in_lanes
