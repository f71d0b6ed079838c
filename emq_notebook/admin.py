"""Queue scope: pause, resume, drain, obliterate -- the whole queue at once.

Each verb is one script; `drain` and `obliterate_all` are a Python loop over bounded
calls (`budget` members and about `defaults.BYTE_BUDGET` bytes a call), so an
interrupt between calls leaves a consistent queue. The moves by the job
(`reprocess_dead`, `reprocess_jobs`, `remove_jobs`) live in `moves` and are
re-exported here (SPEC 8 names them under `admin`).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import audit, checks, lanes
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


@contract(
    "pause",
    writes=True,
    script="@pause",
    precondition="none (idempotent)",
    changes="HSET emq:{q}:meta paused 1; publishes `paused`",
    replies="None — paused field set; the pending backlog is untouched",
    native="none, a script only; EMQ.CLAIM reads the same paused field",
)
@audit.audited("pause", single=True)
def pause(conn: Connection, q: str) -> None:
    """Close the claim gate: HSET meta paused 1. No set moves; idempotent; never refuses."""
    conn.run("pause", [queue_key(q, "meta")], [base(q)], verb="pause", queue=q)


@contract(
    "resume",
    writes=True,
    script="@resume",
    precondition="none (idempotent)",
    changes="HDEL emq:{q}:meta paused; publishes `resumed`",
    replies="None — a later claim serves the head of pending",
    native="none, a script only",
)
@audit.audited("resume", single=True)
def resume(conn: Connection, q: str) -> None:
    """Open the claim gate: HDEL meta paused. Idempotent; never refuses."""
    conn.run("resume", [queue_key(q, "meta")], [base(q)], verb="resume", queue=q)


@contract(
    "drain",
    writes=True,
    script="@drain",
    precondition="none; bounded calls of `budget` jobs",
    changes="deletes pending (and lane, and with include_schedule scheduled) rows and :logs, "
    "releases their dedup keys; publishes `drained`",
    replies="int — the count drained; active jobs and the repeat registry survive",
    native="none, a script only",
)
@audit.audited("drain", bulk=True)
def drain(
    conn: Connection,
    q: str,
    include_schedule: bool = False,
    budget: int = DEFAULT_BUDGET,
    progress: Progress | None = None,
) -> int:
    """Delete the pending backlog (lane backlogs too; the schedule set when asked).

    Answers the total count drained (recorded: a `started` entry, then one closing
    entry with the jobs drained, whatever ends it; an exception that ends it part way
    carries that count, `.done`). Runs in calls of at most `budget` jobs (and
    about `defaults.BYTE_BUDGET` bytes of payloads freed) and a bounded number of lanes
    (each call walks the groups set on from where the last stopped), so a large
    backlog or 100,000 lanes never block the server in one script; rows and logs go
    by UNLINK, so a long `:logs` list costs no more than a short one. Active jobs and the repeat registry
    survive; drained jobs' dedup keys are released. A member with a foreign id
    (`keyspace.check_server_id`: it names another job's `:logs` or `:lock`, or is over
    65,536 bytes) leaves the set and no key is built from it: an over-long id's row and
    logs stay, as no verb addresses them (a key of 4 MB held Valkey 19 ms to delete),
    until `obliterate`'s sweep, which matches keys by pattern, takes them. Refuses
    only a budget above `defaults.MAX_BUDGET` (`BadInput`, before any I/O).
    `progress(calls, drained_so_far)` is called after each call.
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


@contract(
    "obliterate",
    writes=True,
    script="@obliterate",
    precondition="paused; unforced, no jobs in flight",
    changes="deletes up to `budget` jobs a call, then lanes, repeat records, metrics, dedup keys, "
    "orphans and meta; publishes `obliterated`",
    replies='"more" (call again) or "ok" (nothing left under emq:{q}:) / NotPaused / ActiveJobs',
    native="none, a script only",
)
@audit.audited("obliterate", bulk=True)
def obliterate(conn: Connection, q: str, force: bool = False, budget: int = DEFAULT_BUDGET) -> str:
    """ONE bounded call of @obliterate: `"more"` (call again) or `"ok"` (queue gone).

    Refuses `NotPaused` on a running queue and, unless `force`, `ActiveJobs` when
    jobs are in flight (forced, their rows and `:lock` keys go too). After `"ok"`
    nothing is left under `emq:{q}:` -- orphan rows, logs and dedup keys included:
    "ok" comes only after a whole SCAN pass that found nothing. On a keyspace too
    large for one call that pass spans calls; a job added meanwhile, or a resume,
    starts it again, but a key another client writes by hand behind its cursor
    while the queue stays paused can outlive it (obliterate again to be sure).
    A call does at most `budget` units of work and frees about
    `defaults.BYTE_BUDGET` bytes of payloads; a budget above `defaults.MAX_BUDGET` is
    `BadInput`, before any I/O. Recorded with the jobs the call deleted (the script
    says them when asked, its fourth argument; EchoMQ's callers send three at most and
    are answered 1 or 0, as ever).
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

    `progress(calls, jobs_left)` after each `"more"` (`jobs_left` counted in bounded
    reads: `job_count(exact=False)`). Refuses as `obliterate` does, on the first call,
    before anything is deleted, or on a later one (another client resumed the queue):
    the refusal then carries the jobs deleted before it (`.done`, and its line: "...,
    after deleting 2,000 jobs"), and so does a wire fault. Recorded as one
    `obliterate` run: a `started` entry, then one closing entry whose count is the jobs
    its calls deleted.
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
    """Jobs held in the four state sets and every lane backlog: the sets' sizes in one
    pipelined read, the lanes' summed on the server in bounded calls (`lanes.backlog`:
    at most `lanes.LANES_A_CALL` lanes a call, as many calls as the lanes take).
    `exact=False` sums them as a watching look does instead (`lanes.watched`: one call,
    the last whole pass's figure for a queue of more than `lanes.LANE_EXACT` lanes): a
    progress report between the calls of a long run."""
    return _count(conn, q, ("pending", "active", "schedule", "dead"), exact)


def backlog(conn: Connection, q: str, include_schedule: bool = False) -> int:
    """What a drain would delete: pending and the lane backlogs (and the schedule set),
    exact (`job_count`)."""
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
    in_lanes = lanes.backlog(conn, q) if exact else lanes.watched(conn, {q: known})[q].jobs
    return sum(sizes) + in_lanes
