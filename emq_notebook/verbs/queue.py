"""The queue verbs: its counts, the claim gate (pause, resume), drain and
obliterate, its jobs, its metrics, its lanes."""

from __future__ import annotations

from argparse import Namespace

import pandas as pd

from .. import admin, audit, counts, frames, lanes, watching
from ..decoding import shown_id, visible
from ..errors import ActiveJobs, NotPaused, UsageProblem
from ..grammar import duration, limit, whole_arg
from ..keyspace import STATES, queue_key
from ..registry import arg, opt, verb
from .session import BUDGET, QUEUE, YES, Session, budget_of, confirm


@verb(
    "queues",
    "every queue known, with its counts (--rescan looks for queues first)",
    opt("--rescan", action="store_true", help="find the queues again (SCAN) before counting"),
    opt("--exact", action="store_true", help="sum every lane's backlog (as many bounded calls as it takes)"),
)
def _queues(s: Session, ns: Namespace) -> pd.DataFrame:
    """A look that only watches (SPEC 11): its commands depend on the queues shown,
    never on their lanes; a queue of more lanes than one call sums shows its last whole
    pass's lane backlog, unless `--exact`; each queue's notes are said in a line."""
    if ns.rescan:
        found = frames.queues(s.conn, rescan=True)
        s.say(f"rescanned {s.conn.label}: {len(found):,} queue{'' if len(found) == 1 else 's'}")
    return _said(s, counts.look(s.conn, watch=not ns.exact))


@verb("status", "one queue's counts, paused flag, lanes and repeatables", QUEUE)
def _status(s: Session, ns: Namespace) -> pd.DataFrame:
    return _said(s, counts.look(s.conn, [ns.queue]))


def _said(s: Session, look: watching.Look) -> pd.DataFrame:
    """The look's frame, each queue's notes said first in a line ("q: ...")."""
    for q in look.notes:
        s.say(f"{q}: {look.note(q)}")
    return look.frame


@verb("pause", "close the claim gate (idempotent; no set moves)", QUEUE, writes=True)
def _pause(s: Session, ns: Namespace) -> None:
    admin.pause(s.conn, ns.queue)
    s.say(f"paused {ns.queue}: claims answer empty; the backlog is untouched")


@verb("resume", "open the claim gate (idempotent)", QUEUE, writes=True)
def _resume(s: Session, ns: Namespace) -> None:
    admin.resume(s.conn, ns.queue)
    s.say(f"resumed {ns.queue}")


@verb(
    "drain",
    "delete the pending backlog; active jobs and repeatables survive",
    QUEUE,
    opt("--include-schedule", action="store_true", help="the schedule set too"),
    BUDGET,
    YES,
    writes=True,
)
def _drain(s: Session, ns: Namespace) -> None:
    confirm(s, ns, admin.backlog(s.conn, ns.queue, ns.include_schedule))
    n = admin.drain(s.conn, ns.queue, include_schedule=ns.include_schedule, budget=budget_of(s, ns))
    s.say(f"drained {n} jobs from {ns.queue}")


@verb(
    "obliterate",
    "destroy a PAUSED queue, bounded; refuses not_paused / active",
    QUEUE,
    opt("--force", action="store_true", help="also destroy jobs in flight"),
    BUDGET,
    opt("--step", action="store_true", help="ONE bounded call: answers more or ok"),
    YES,
    writes=True,
)
def _obliterate(s: Session, ns: Namespace) -> None:
    q, budget = ns.queue, budget_of(s, ns)
    # one run for the command, its read-first refusals included: a `started` entry at
    # its first writing call, and a closing one with the jobs its calls deleted
    args = {"force": ns.force, "budget": budget, "step": ns.step}
    with audit.recorded(s.conn, "obliterate", q, args=args, bulk=True):
        _obliterate_checked(s, ns, q, budget)


def _obliterate_checked(s: Session, ns: Namespace, q: str, budget: int) -> None:
    # the refusals the script would give, read first (only reads): a running queue
    # answers not_paused before any confirmation or progress bar
    if not admin.is_paused(s.conn, q):
        raise NotPaused("obliterate", q)
    if not ns.force and s.conn.command("ZCARD", queue_key(q, "active")):
        raise ActiveJobs("obliterate", q)
    total = admin.job_count(s.conn, q)
    confirm(s, ns, total)
    if ns.step:
        s.say(f"obliterate {q}: {admin.obliterate(s.conn, q, force=ns.force, budget=budget)}")
        return
    report = s.progress(f"obliterate {q}", total)
    calls = admin.obliterate_all(
        s.conn, q, force=ns.force, budget=budget, progress=lambda c, left: report(total - left)
    )
    report(total)
    s.say(f"obliterated {q}: {total} jobs in {calls} calls; nothing left under emq:{{{q}}}:")


@verb(
    "jobs",
    "a frame of jobs with their rows (at most default_limit rows)",
    QUEUE,
    opt("--state", choices=[*STATES, "all"], default="all"),
    opt("--limit", type=limit, help="at most N rows (0: all; default: %%config default_limit)"),
)
def _jobs(s: Session, ns: Namespace) -> pd.DataFrame:
    rows = s.settings.default_limit if ns.limit is None else ns.limit
    frame = frames.snapshot(s.conn, ns.queue, ns.state, limit=rows or None)
    if rows and len(frame) >= rows:
        sizes = frames.counts(s.conn, [ns.queue]).loc[ns.queue]
        total = int(sum(sizes[st] for st in (STATES if ns.state == "all" else (ns.state,))))
        if total > rows:
            frame = frame.head(rows)
            s.say(f"showing {rows:,} of {total:,}; --limit 0 for all")
    return frame


@verb(
    "metrics", "claimed / completed / failed per minute", QUEUE, opt("--since", type=duration, help="e.g. 1h")
)
def _metrics(s: Session, ns: Namespace) -> pd.DataFrame:
    return frames.metrics(s.conn, ns.queue, since_ms=ns.since)


@verb("lane", "a lane's state: its limit, its jobs in flight, pending and paused", QUEUE, arg("group"))
def _lane(s: Session, ns: Namespace) -> dict | None:
    found = lanes.lane(s.conn, ns.queue, ns.group)
    if found is None:
        # some of its lanes, from one bounded walk of them (a queue may have a million)
        got = lanes.page(s.conn, ns.queue, counts=False)
        met = sorted(got.lanes)
        shown = ", ".join(visible(shown_id(g)) for g in met[: lanes.NAMES_SHOWN])
        shown += ", …" if len(met) > lanes.NAMES_SHOWN or got.cursor != "0" else ""
        s.say(f"no lane {visible(shown_id(ns.group))} in {ns.queue}" + (f" (lanes: {shown})" if met else ""))
        return None
    return found


@verb(
    "lane-set",
    "set a lane's concurrency limit, pause it or resume it",
    QUEUE,
    arg("group"),
    opt("--limit", type=whole_arg, help="at most N of its jobs in flight"),
    opt("--pause", action="store_true", help="its jobs wait; other lanes are served"),
    opt("--resume", action="store_true"),
    writes=True,
)
def _lane_set(s: Session, ns: Namespace) -> None:
    if ns.pause and ns.resume:
        raise UsageProblem("lane-set takes --pause or --resume, not both")
    if ns.limit is None and not ns.pause and not ns.resume:
        raise UsageProblem(f"lane-set takes --limit N, --pause or --resume — {s.front.see('lane-set')}")
    done = []
    if ns.limit is not None:
        lanes.set_limit(s.conn, ns.queue, ns.group, ns.limit)
        done.append(f"limit {ns.limit}")
    if ns.pause:
        lanes.pause_lane(s.conn, ns.queue, ns.group)
        done.append("paused")
    if ns.resume:
        lanes.resume_lane(s.conn, ns.queue, ns.group)
        done.append("resumed")
    s.say(f"lane {ns.queue}/{ns.group}: {', '.join(done)}")
