"""Queue scope: pause, resume, drain, obliterate -- the whole queue at once.

Each verb is one script (bounded where the work grows with the queue); the
bounded loops (`drain`, `obliterate_all`, `reprocess_dead`) are a Python loop
over atomic calls, so an interrupt between calls leaves a consistent queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .catalogue import document
from .checks import whole
from .connector import Connection
from .keyspace import base, check_name, job_key, lane_key, queue_key

DEFAULT_BUDGET = 1000
Progress = Callable[[int, int], None]


def check_budget(budget: object, what: str = "budget") -> int:
    """A budget is a whole number of jobs per call, from 1 to 2**53 - 1 (`BadInput`)."""
    return whole(budget, what)


@document
def pause(conn: Connection, q: str) -> None:
    """Close the claim gate: HSET meta paused 1. No set moves; idempotent; never refuses."""
    conn.run("pause", [queue_key(q, "meta")], [base(q)], verb="pause", queue=q)


@document
def resume(conn: Connection, q: str) -> None:
    """Open the claim gate: HDEL meta paused. Idempotent; never refuses."""
    conn.run("resume", [queue_key(q, "meta")], [base(q)], verb="resume", queue=q)


def is_paused(conn: Connection, q: str) -> bool:
    """One HGET of the paused field; any value means paused. A wire fault raises `WireError`."""
    return conn.command("HGET", queue_key(q, "meta"), "paused") is not None


@document
def drain(conn: Connection, q: str, include_schedule: bool = False,
          budget: int = DEFAULT_BUDGET, progress: Progress | None = None) -> int:
    """Delete the pending backlog (lane backlogs too; the schedule set when asked).

    Answers the total count drained. Runs in calls of at most `budget` jobs, so a
    large backlog never blocks the server in one script. Active jobs and the
    repeat registry survive; drained jobs' dedup keys are released. Never refuses.
    `progress(calls, drained_so_far)` is called after each call.
    """
    check_budget(budget)
    keys = [base(q), queue_key(q, "pending")]
    if include_schedule:
        keys.append(queue_key(q, "schedule"))
    total = calls = 0
    while True:
        n, more = conn.run("drain", keys, [budget], verb="drain", queue=q)
        total += n
        calls += 1
        if progress:
            progress(calls, total)
        if not more:
            return total


@document
def obliterate(conn: Connection, q: str, force: bool = False, budget: int = DEFAULT_BUDGET) -> str:
    """ONE bounded call of @obliterate: `"more"` (call again) or `"ok"` (queue gone).

    Refuses `NotPaused` on a running queue and, unless `force`, `ActiveJobs` when
    jobs are in flight (forced, their rows and `:lock` keys go too). After `"ok"`
    nothing is left under `emq:{q}:` -- orphan rows, logs and dedup keys included:
    "ok" comes only after a whole SCAN pass that found nothing. On a keyspace too
    large for one call that pass spans calls; a job added meanwhile, or a resume,
    starts it again, but a key another client writes by hand behind its cursor
    while the queue stays paused can outlive it (obliterate again to be sure).
    """
    check_budget(budget)
    reply = conn.run("obliterate", [queue_key(q, "meta"), base(q)],
                     ["force" if force else "", budget], verb="obliterate", queue=q)
    return "ok" if reply == 0 else "more"


def obliterate_all(conn: Connection, q: str, force: bool = False, budget: int = DEFAULT_BUDGET,
                   progress: Progress | None = None) -> int:
    """Loop `obliterate` until `"ok"`; answers the number of calls.

    `progress(calls, jobs_left)` after each `"more"`. Refuses as `obliterate` does,
    on the first call, before anything is deleted.
    """
    calls = 0
    while True:
        calls += 1
        if obliterate(conn, q, force=force, budget=budget) == "ok":
            return calls
        if progress:
            progress(calls, job_count(conn, q))


def job_count(conn: Connection, q: str) -> int:
    """Jobs held in the four state sets and every lane backlog (one pipelined read)."""
    return _count(conn, q, ("pending", "active", "schedule", "dead"))


def backlog(conn: Connection, q: str, include_schedule: bool = False) -> int:
    """What a drain would delete: pending and the lane backlogs (and the schedule set)."""
    return _count(conn, q, ("pending", "schedule") if include_schedule else ("pending",))


def _count(conn: Connection, q: str, states: Iterable[str]) -> int:
    groups = conn.command("SMEMBERS", queue_key(q, "groups")) or []
    pipe = conn.pipeline()
    for state in states:
        pipe.zcard(queue_key(q, state))
    for g in groups:
        pipe.zcard(lane_key(q, g))
    return sum(pipe.execute())


def reprocess_dead(conn: Connection, q: str, budget: int = DEFAULT_BUDGET, limit: int | None = None,
                   progress: Progress | None = None) -> int:
    """Move dead jobs back (flat to pending, grouped to their lanes), oldest death first.

    Bounded calls of at most `budget` jobs; at most `limit` jobs in all. Counters
    stay. Answers the count moved. Never refuses (an empty dead set answers 0).
    """
    check_budget(budget)
    if limit is not None:
        check_budget(limit, "limit")
    keys = [queue_key(q, "dead"), queue_key(q, "pending"), base(q)]
    total = calls = 0
    while limit is None or total < limit:
        step = budget if limit is None else min(budget, limit - total)
        n, more = conn.run("reprocess_dead", keys, [step], verb="reprocess", queue=q)
        total += n
        calls += 1
        if progress:
            progress(calls, total)
        if not more:
            break
    return total


def remove_jobs(conn: Connection, q: str, ids: Iterable[str]) -> dict[str, str]:
    """Remove many jobs by id in one call: `{id: "removed" | "gone" | "locked"}`.

    Locked jobs are left untouched; every id is gated before anything is sent. An
    id given twice is sent once, so its word says what the call did to it.
    """
    ids = list(dict.fromkeys(check_name(i, "job id") for i in ids))
    if not ids:
        return {}
    for i in ids:
        job_key(q, i)
    words = conn.run("remove_jobs", [base(q)], ids, verb="remove", queue=q)
    return dict(zip(ids, words, strict=True))
