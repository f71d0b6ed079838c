"""The job verbs: one job's row and logs, its payload, progress and log lines, its
removal, its move back from dead; a job run now (a scheduled one promoted, one
made from a repeatable); and the queue underneath (enqueue, claim, complete, fail),
as a worker runs it."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pandas as pd

from .. import admin, jobs, lanes, moves, repeat
from ..checks import json_text
from ..defaults import MOVE_BUDGET
from ..errors import UsageProblem
from ..grammar import delay, duration, whole_arg
from ..keyspace import queue_key
from ..registry import arg, opt, verb
from . import bulk
from .session import (
    BUDGET,
    CONTROLLED,
    DRY_RUN,
    ERROR,
    JOB,
    PAYLOAD,
    QUEUE,
    SIGNATURE,
    STATE,
    YES,
    Session,
    budget_of,
    confirm,
)


@verb("job", "one job's row", QUEUE, JOB)
def _job(s: Session, ns: Namespace) -> dict:
    return dict(sorted(jobs.get_job(s.conn, ns.queue, ns.id).items()))


@verb(
    "data",
    "replace a job's payload (JSON, taken as written)",
    QUEUE,
    JOB,
    arg("json", literal=True),
    writes=True,
)
def _data(s: Session, ns: Namespace) -> None:
    jobs.update_data(s.conn, ns.queue, ns.id, json_text(ns.json, "data"))
    s.say(f"data replaced: {ns.queue} {ns.id}")


@verb("progress", "write a job's progress and publish the event", QUEUE, JOB, arg("value"), writes=True)
def _progress(s: Session, ns: Namespace) -> None:
    jobs.update_progress(s.conn, ns.queue, ns.id, ns.value)
    s.say(f"progress {ns.value}: {ns.queue} {ns.id}")


@verb(
    "log",
    "append a line to a job's logs (the rest of the line, as written)",
    QUEUE,
    JOB,
    opt("--keep", type=whole_arg, help="trim to the last N lines"),
    arg("line", free=True),
    writes=True,
)
def _log(s: Session, ns: Namespace) -> None:
    n = jobs.add_log(s.conn, ns.queue, ns.id, " ".join(ns.line), keep=ns.keep)
    s.say(f"logged: {ns.queue} {ns.id} has {n} log line{'' if n == 1 else 's'}")


@verb("logs", "a job's log lines", QUEUE, JOB)
def _logs(s: Session, ns: Namespace) -> list[str]:
    return jobs.get_job_logs(s.conn, ns.queue, ns.id)


@verb(
    "remove",
    "remove a job (or the jobs a filter finds); refuses gone / locked",
    QUEUE,
    arg("id", nargs="?"),
    opt("--dedup", help="release this dedup key"),
    ERROR,
    PAYLOAD,
    SIGNATURE,
    STATE,
    opt("--limit", type=whole_arg, help="with a filter: the first N matches only"),
    DRY_RUN,
    YES,
    writes=True,
)
def _remove(s: Session, ns: Namespace) -> Any:
    if bulk.filtered(ns) or ns.id is None:
        return bulk.remove(s, ns)
    jobs.remove_job(s.conn, ns.queue, ns.id, dedup=ns.dedup)
    s.say(f"removed {ns.queue} {ns.id}")


@verb(
    "reprocess",
    "move a dead job back (or the dead a filter finds, or all dead)",
    QUEUE,
    arg("id", nargs="?"),
    opt("--all-dead", "--all", action="store_true"),
    BUDGET,
    opt("--limit", type=whole_arg, help="at most N jobs: the first N matches (with --all: the oldest N)"),
    ERROR,
    PAYLOAD,
    SIGNATURE,
    DRY_RUN,
    *CONTROLLED,
    YES,
    writes=True,
)
def _reprocess(s: Session, ns: Namespace) -> Any:
    if bulk.filtered(ns):
        return bulk.reprocess(s, ns)
    if ns.all_dead == (ns.id is not None):
        raise UsageProblem(
            f"reprocess takes a job id or --all-dead, one of them — {s.front.see('reprocess')}"
        )
    if ns.id is not None:
        jobs.reprocess_job(s.conn, ns.queue, ns.id)
        s.say(f"reprocessed {ns.queue} {ns.id}: dead -> pending")
        return
    # not destructive, but every moved job runs again (a mail sent twice): it is gated too
    dead = int(s.conn.command("ZCARD", queue_key(ns.queue, "dead")))
    confirm(s, ns, dead if ns.limit is None else min(dead, ns.limit), "reprocess")
    n = moves.reprocess_dead(s.conn, ns.queue, budget=budget_of(s, ns, most=MOVE_BUDGET), limit=ns.limit)
    s.say(f"reprocessed {n} dead jobs of {ns.queue}")
    for line in n.left():
        s.say(f"  {line}")


@verb("promote", "run a scheduled job now (schedule -> pending)", QUEUE, JOB, writes=True)
def _promote(s: Session, ns: Namespace) -> None:
    jobs.promote_job(s.conn, ns.queue, ns.id)
    s.say(f"promoted {ns.queue} {ns.id}: schedule -> pending")


@verb("repeats", "the repeatables: name, every, next due, payload (a frame)", QUEUE)
def _repeats(s: Session, ns: Namespace) -> pd.DataFrame:
    records = repeat.registered(s.conn, ns.queue)
    names = [r["name"] for r in records]
    frame = pd.DataFrame(
        {
            "every": repeat.periods(r["every_ms"] for r in records),
            "next_due": repeat.due_times(r["next_due_ms"] for r in records),
            "payload": repeat.text([r["payload"] for r in records]),
            "group": repeat.text([r["group"] for r in records]),
            "problem": repeat.text([r["problem"] for r in records]),
        },
    )
    frame.index = pd.Index(names, dtype=repeat.text(names).dtype, name="name")
    return frame


@verb("run-now", "one job from a repeatable now; its cadence is kept", QUEUE, arg("name"), writes=True)
def _run_now(s: Session, ns: Namespace) -> str:
    job_id = repeat.run_now(s.conn, ns.queue, ns.name)
    [due] = repeat.due_times([repeat.next_due(s.conn, ns.queue, ns.name)])
    when = "unchanged" if pd.isna(due) else due
    s.say(f"run-now {ns.queue} {ns.name}: {job_id} is pending; next due {when}, as before")
    return job_id


@verb(
    "enqueue",
    "add a job (its JSON taken as written)",
    QUEUE,
    arg("json", literal=True),
    opt("--group"),
    opt("--delay", type=delay, default=0),
    opt("--id"),
    opt("--priority", type=int, default=0),
    opt("--attempts", type=whole_arg, default=3),
    opt("--dedup"),
    writes=True,
)
def _enqueue(s: Session, ns: Namespace) -> str:
    return jobs.enqueue(
        s.conn,
        ns.queue,
        json_text(ns.json, "enqueue"),
        id=ns.id,
        group=ns.group,
        delay_ms=ns.delay,
        priority=ns.priority,
        max_attempts=ns.attempts,
        dedup=ns.dedup,
    )


@verb(
    "claim",
    "claim the head of pending (or the next lane with --grouped)",
    QUEUE,
    opt("--lease", type=duration, default=30_000),
    opt("--grouped", action="store_true"),
    writes=True,
)
def _claim(s: Session, ns: Namespace) -> Any:
    got = (lanes.claim if ns.grouped else jobs.claim)(s.conn, ns.queue, ns.lease)
    if got is None:
        s.say(f"no job claimed from {ns.queue}: {_unclaimed(s, ns.queue, ns.grouped)}")
    return got


def _unclaimed(s: Session, q: str, grouped: bool) -> str:
    """Why a claim answered no job: paused, nothing ready, or (a backlog left after the
    claim's `jobs.CLAIM_CALLS` bounded calls) ghosts or lanes no claim serves ahead."""
    if admin.is_paused(s.conn, q):
        return "paused"
    _, (head, *_) = jobs.claim_transition(q, grouped)
    left = s.conn.command("LLEN" if grouped else "ZCARD", head)
    if not left:
        return "nothing ready"
    what = "lanes on the ring" if grouped else "members of pending"
    return (
        f"{left:,} {what} still ahead, none servable within {jobs.CLAIM_CALLS} bounded calls "
        "(members with no row, or lanes at their limit or paused): claim again to go on"
    )


@verb("complete", "finish a claimed job", QUEUE, JOB, writes=True)
def _complete(s: Session, ns: Namespace) -> None:
    jobs.complete(s.conn, ns.queue, ns.id)
    s.say(f"completed {ns.queue} {ns.id}")


@verb(
    "fail",
    "fail a claimed job (retry or dead); the error is the rest of the line",
    QUEUE,
    JOB,
    arg("error", free=True),
    writes=True,
)
def _fail(s: Session, ns: Namespace) -> None:
    outcome = jobs.fail(s.conn, ns.queue, ns.id, " ".join(ns.error))
    s.say(f"failed {ns.queue} {ns.id}: {outcome}")
