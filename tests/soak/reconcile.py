"""The reconciliation: the ledgers read against the final state. Every enqueued
id gets exactly one fate, every second execution of a job is a retry or is
explained, no claim was served through a pause, and obliterate left nothing.

A call cut by a fault raised `WireError`: its outcome is unknown ("maybe"), so it
is taken as possibly applied, Jepsen-style, and checked against the final state.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from .invariants import Checker
from .ledger import (
    Claim,
    Crash,
    DrainStep,
    Enqueue,
    Expiry,
    Fault,
    Finish,
    HandlerDone,
    KeysLeft,
    Record,
    VerbCall,
    parse,
)
from .roles import Q1, Q2

# A call cut by a fault may still run on the server after its caller saw the error:
# its request was already sent, and a server (or the proxy) that stalls runs it
# when it resumes -- a soak saw one land 1.5 s late. A "maybe" call may take effect
# up to LATE_S seconds after its error (its drains stay bounded by their count balance).
LATE_S = 5.0

Job = tuple[str, str]  # (queue, id)


@dataclass
class Report:
    """The soak's figures; `ok` when nothing was lost and no invariant failed."""

    backend: str
    seconds: float
    enqueued: int = 0
    completed: int = 0
    fates: Counter = field(default_factory=Counter)
    verbs: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    duplicates: Counter = field(default_factory=Counter)
    retries: int = 0
    claims: int = 0
    drained_said: int = 0
    drained_maybe_budget: int = 0
    drained_found: int = 0
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    checks: int = 0
    setup_s: float = 0.0
    stop_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.lost == 0 and not self.violations

    def lines(self) -> list[str]:
        s = max(self.seconds, 1e-9)
        dup = sum(self.duplicates.values())
        return [
            f"backend: {self.backend}, {self.seconds:.0f} s (setup {self.setup_s:.1f} s, "
            f"stop and reconcile {self.stop_s:.1f} s)",
            f"jobs enqueued: {self.enqueued} ({self.enqueued / s:.1f}/s), "
            f"completed: {self.completed} ({self.completed / s:.1f}/s), claims: {self.claims}",
            "fates: " + ", ".join(f"{k} {v}" for k, v in sorted(self.fates.items())),
            "verbs: " + ", ".join(f"{k} {v}" for k, v in sorted(self.verbs.items())),
            "verb outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
            "faults: " + (", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"),
            f"drains: said {self.drained_said} (+ at most {self.drained_maybe_budget} by calls cut short), "
            f"ledger finds {self.drained_found} gone that way",
            f"retries after a fail: {self.retries}; duplicates explained: {dup} ("
            + (", ".join(f"{k} {v}" for k, v in sorted(self.duplicates.items())) or "none")
            + ")",
            f"invariant checks: {self.checks}",
            f"lost: {self.lost}, invariant violations: {len(self.violations)}",
        ]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Execution:
    """One claim of a job, with what its worker wrote after it."""

    claim: Claim
    handler_done: bool = False
    finish: Finish | None = None


@dataclass
class Evidence:
    """What the ledger and the final state say happened to the jobs, gathered once
    before any fate is given."""

    finals: dict[str, dict]
    seen: dict[Job, float]  # when the checker last saw each job alive
    flag: Callable[[str], None]
    executions: dict[Job, list[Execution]] = field(default_factory=lambda: defaultdict(list))
    completed: set[Job] = field(default_factory=set)
    completed_maybe: set[Job] = field(default_factory=set)
    removed: set[Job] = field(default_factory=set)
    removed_maybe: set[Job] = field(default_factory=set)
    obliterated_at: list[float] = field(default_factory=list)
    drain_ends: list[float] = field(default_factory=list)

    def where(self, job: Enqueue) -> list[str] | None:
        """The sets the job is in at the end (["row"] for a row in none), None when gone."""
        final = self.finals[job.queue]
        return final["place"].get(job.id) or (["row"] if job.id in final["rows"] else None)

    def last_alive(self, job: Enqueue) -> float:
        runs = self.executions.get((job.queue, job.id), [])
        return max([job.started, self.seen.get((job.queue, job.id), 0.0)] + [r.claim.started for r in runs])


def reconcile(
    records: list[dict[str, Any]], finals: dict[str, dict], checker: Checker, report: Report, lease_s: float
) -> Report:
    """Give every enqueued id its one fate, explain every second execution, and
    check the pause gates and obliterate's end state against the ledger.

    `records` are the ledgers' lines as read (`read_ledgers`), `finals` the last
    snapshot of each queue."""
    ledger = [parse(line) for line in records]
    ev = Evidence(finals, checker.seen, checker.flag)
    enqueued = {r.id: r for r in ledger if isinstance(r, Enqueue)}
    # one operator at a time (a new instance only after one ended), so time orders them
    verbs = sorted((r for r in ledger if isinstance(r, VerbCall)), key=lambda r: r.started)

    pair_executions(ledger, ev)
    report.claims = sum(len(runs) for runs in ev.executions.values())
    read_verbs(verbs, [r for r in ledger if isinstance(r, DrainStep)], ev, report)
    give_fates(enqueued, ev, report)
    explain_second_executions(ev, ledger, report, lease_s)
    check_pause_gates(verbs, enqueued, ev)
    for r in ledger:
        if isinstance(r, KeysLeft) and r.count:
            ev.flag(f"{r.queue}: {r.count} keys left after obliterate said ok: {r.keys}")
        elif isinstance(r, Fault):
            report.faults[r.fault] += 1
    for phantom in set().union(*(set(finals[q]["rows"]) for q in finals)) - set(enqueued):
        ev.flag(f"a row {phantom} that no enqueue made")
    report.violations = list(checker.violations)
    report.checks = checker.checks
    return report


# -- what the ledger says happened ------------------------------------------------


def pair_executions(ledger: list[Record], ev: Evidence) -> None:
    """Each claim with the handler's record and the complete/fail its worker wrote
    after it, read in each role instance's own order; a crash is a finding."""
    by_source: dict[str, list[Record]] = defaultdict(list)
    for r in sorted(ledger, key=lambda r: (r.source, r.position)):
        by_source[r.source].append(r)
    for source, records in by_source.items():
        current: Execution | None = None
        for r in records:
            if isinstance(r, Claim):
                current = Execution(r)
                ev.executions[(r.queue, r.id)].append(current)
            elif isinstance(r, HandlerDone) and current is not None and current.claim.id == r.id:
                current.handler_done = True
            elif isinstance(r, Finish) and current is not None and current.claim.id == r.id:
                current.finish = r
                read_finish(r, current, ev)
            elif isinstance(r, Crash):
                ev.flag(f"{source} died: {r.error.strip().splitlines()[-1]}")
        # a worker killed between its handler's success and its complete's reply
        if current is not None and current.handler_done and current.finish is None:
            ev.completed_maybe.add((current.claim.queue, current.claim.id))


def read_finish(finish: Finish, run: Execution, ev: Evidence) -> None:
    job = (finish.queue, finish.id)
    if finish.how != "complete":
        return
    if finish.outcome == "ok":
        if not run.handler_done:
            ev.flag(f"{job[0]} {job[1]} completed with no record of its handler succeeding")
        ev.completed.add(job)
    elif finish.outcome == "maybe":
        ev.completed_maybe.add(job)


def read_verbs(verbs: list[VerbCall], steps: list[DrainStep], ev: Evidence, report: Report) -> None:
    """What the operator's verbs say they removed, drained and obliterated."""
    # the last running total of each drain (its source, its invocation number)
    totals = {(s.source, s.drain): s.total for s in sorted(steps, key=lambda s: s.call)}
    for v in verbs:
        twin = "" if v.queue == Q1 else " (twin)"
        report.verbs[v.verb + twin + (" (dry run)" if v.args.get("dry_run") else "")] += 1
        report.outcomes[v.outcome] += 1
        if v.verb == "remove_job":
            job = (v.queue, v.args["id"])
            (ev.removed if v.outcome == "ok" else ev.removed_maybe if v.outcome == "maybe" else set()).add(
                job
            )
        elif v.verb == "remove_jobs" and not v.args.get("dry_run"):
            # a dry run's "removed" explains nothing: a job it made vanish is lost
            if v.outcome == "ok":
                ev.removed.update((v.queue, i) for i, what in v.reply.items() if what == "removed")
            elif v.outcome == "maybe":
                ev.removed_maybe.update((v.queue, i) for i in v.args["ids"])
        elif v.verb == "obliterate" and v.outcome != "refused":
            ev.obliterated_at.append(v.ended)
        elif v.verb == "drain":
            read_drain(v, totals.get((v.source, v.number), 0), ev, report)


def read_drain(v: VerbCall, last_total: int, ev: Evidence, report: Report) -> None:
    # a drain cut short said, through its progress, what its finished calls did
    said = v.reply if v.outcome == "ok" else last_total
    report.drained_said += said
    if v.outcome == "maybe":
        report.drained_maybe_budget += v.args["budget"]
    if v.outcome == "maybe" or said > 0:
        ev.drain_ends.append(v.ended + (LATE_S if v.outcome == "maybe" else 0.0))


# -- one fate per job: the first of these that the evidence supports ----------------


def deduplicated(job: Enqueue, ev: Evidence) -> str | None:
    """The enqueue answered another job's id: this one was never made."""
    if job.error is not None or job.reply == job.id:
        return None
    if ev.where(job):
        ev.flag(f"{job.queue} {job.id}: its enqueue answered the holder {job.reply}, yet it exists")
    return "deduplicated"


def still_there(job: Enqueue, ev: Evidence) -> str | None:
    where = ev.where(job)
    if not where:
        return None
    key = (job.queue, job.id)
    if key in ev.completed or key in ev.removed:
        said = "completed" if key in ev.completed else "removed"
        ev.flag(f"{job.queue} {job.id} is in {where[0]} after a reply said it was {said}")
    return "dead" if where[0] == "dead" else "in a set"


def completed(job: Enqueue, ev: Evidence) -> str | None:
    return "completed" if (job.queue, job.id) in ev.completed else None


def removed(job: Enqueue, ev: Evidence) -> str | None:
    return "removed" if (job.queue, job.id) in ev.removed else None


def obliterated(job: Enqueue, ev: Evidence) -> str | None:
    """Gone from the second queue, which an obliterate ended after the job came."""
    if job.queue == Q2 and any(t1 >= job.started for t1 in ev.obliterated_at):
        return "obliterated"
    return None


def completed_reply_lost(job: Enqueue, ev: Evidence) -> str | None:
    return "completed (reply lost)" if (job.queue, job.id) in ev.completed_maybe else None


def removed_reply_lost(job: Enqueue, ev: Evidence) -> str | None:
    return "removed (reply lost)" if (job.queue, job.id) in ev.removed_maybe else None


def never_created(job: Enqueue, ev: Evidence) -> str | None:
    return "never created (enqueue cut)" if job.error is not None else None


def drained(job: Enqueue, ev: Evidence) -> str | None:
    """Gone from the main queue, and a drain ran after it was last seen alive; the
    drains' counts must then cover it (`give_fates`)."""
    if job.queue == Q1 and any(end >= ev.last_alive(job) for end in ev.drain_ends):
        return "drained"
    return None


FATES = (
    deduplicated,
    still_there,
    completed,
    removed,
    obliterated,
    completed_reply_lost,
    removed_reply_lost,
    never_created,
    drained,
)
# the fates of a call whose reply was lost: such a job may have gone in a drain instead
MAYBE = {"completed (reply lost)", "removed (reply lost)", "never created (enqueue cut)"}


def fate(job: Enqueue, ev: Evidence) -> str:
    for decide in FATES:
        found = decide(job, ev)
        if found:
            return found
    return "lost"


def why_lost(job: Enqueue, ev: Evidence) -> str:
    if job.queue == Q1:
        return f"{job.queue} {job.id} (last alive {ev.last_alive(job):.1f}, no drain after)"
    return f"{job.queue} {job.id} (gone, no complete, remove or obliterate explains it)"


def give_fates(enqueued: dict[str, Enqueue], ev: Evidence, report: Report) -> None:
    """Every id's one fate; then the drains' counts must balance: what they said,
    give or take the calls cut short, against the jobs only a drain explains."""
    maybe_on_main = 0
    for job in enqueued.values():
        found = fate(job, ev)
        report.fates[found] += 1
        if found == "lost":
            report.lost_ids.append(why_lost(job, ev))
        if job.queue == Q1 and found in MAYBE:
            maybe_on_main += 1
    report.enqueued = sum(1 for job in enqueued.values() if job.reply == job.id)
    report.completed = report.fates["completed"] + report.fates["completed (reply lost)"]
    drained_n = report.drained_found = report.fates["drained"]
    over = drained_n - (report.drained_said + report.drained_maybe_budget)
    report.lost = len(report.lost_ids) + max(0, over)
    if over > 0:
        report.lost_ids.append(f"{over} more jobs gone from the main queue than the drains account for")
    if report.drained_said > drained_n + maybe_on_main:
        ev.flag(
            f"drains said {report.drained_said} jobs, only {drained_n + maybe_on_main} can have gone that way"
        )


# -- every second execution is a retry or explained --------------------------------


def explain_second_executions(ev: Evidence, ledger: list[Record], report: Report, lease_s: float) -> None:
    expiries = [r for r in ledger if isinstance(r, Expiry)]
    kills = [r for r in ledger if isinstance(r, Fault) and r.fault == "kill_worker"]
    for (q, jid), runs in ev.executions.items():
        runs.sort(key=lambda run: run.claim.started)
        for first, second in pairwise(runs):
            a, b, fin = first.claim, second.claim, first.finish
            if b.attempt <= a.attempt:
                ev.flag(f"{q} {jid} claimed at attempt {b.attempt} after attempt {a.attempt}")
            if fin is not None and fin.outcome == "ok" and fin.how == "fail":
                report.retries += 1
            elif fin is not None and fin.outcome == "ok":
                ev.flag(f"{q} {jid} claimed again at {b.ended:.2f} after it was completed")
            elif why := why_served_again(first, b, expiries, kills, lease_s):
                report.duplicates[why] += 1
            else:
                ev.flag(
                    f"{q} {jid} served again at {b.ended:.2f} (attempt {b.attempt}) while its claim at "
                    f"{a.started:.2f} held the lease, with no expiry nor killed worker"
                )


def why_served_again(
    first: Execution, again: Claim, expiries: list[Expiry], kills: list[Fault], lease_s: float
) -> str:
    """Why a job was served `again` while `first` had not finished it: a lost fail
    reply, an expired lease (its worker killed or not), or "" when nothing explains it."""
    a, fin = first.claim, first.finish
    # an expiry that ran after the lease's deadline and before the second claim
    expired = any(
        x.queue == a.queue
        and x.started <= again.ended
        and x.ended + (LATE_S if x.count == "maybe" else 0.0) >= a.started + lease_s - 0.05
        for x in expiries
    )
    killed = any(k.worker == a.source and k.at is not None and k.at >= a.started for k in kills)
    if fin is not None and fin.how == "fail" and fin.outcome == "maybe":
        return "fail reply lost"
    if expired and killed:
        return "worker killed, lease expired"
    if expired:
        return "lease expired"
    return ""


# -- a paused queue (or lane) serves no claim ----------------------------------------


def check_pause_gates(verbs: list[VerbCall], enqueued: dict[str, Enqueue], ev: Evidence) -> None:
    """No claim between a pause's reply and the next call that may end the pause."""
    windows = pause_windows(verbs)
    for (q, jid), runs in ev.executions.items():
        group = enqueued[jid].group if jid in enqueued else None
        for run in runs:
            c = run.claim
            for gate in ((q, None), (q, group)) if c.grouped else ((q, None),):
                for start, end in windows.get(gate, ()):
                    if start < c.started and c.ended < end:
                        what = f"lane {gate[1]}" if gate[1] else "queue"
                        ev.flag(
                            f"{q} {jid} claimed at {c.started:.2f}-{c.ended:.2f} from a paused {what} "
                            f"(paused at {start:.2f})"
                        )


def pause_windows(verbs: list[VerbCall]) -> dict[tuple[str, str | None], list[list[float]]]:
    """For each gate (the queue, or a lane), the spans it was surely paused."""
    windows: dict[tuple[str, str | None], list[list[float]]] = defaultdict(list)
    for v in verbs:
        gate = (v.queue, v.args.get("group")) if v.verb.startswith("lane_") else (v.queue, None)
        opened = windows[gate] and windows[gate][-1][1] == float("inf")
        if v.verb in ("pause", "lane_pause") and v.outcome == "ok" and not opened:
            windows[gate].append([v.ended, float("inf")])
        elif opened and may_end_a_pause(v):
            windows[gate][-1][1] = v.started
    return windows


def may_end_a_pause(v: VerbCall) -> bool:
    if v.verb in ("resume", "lane_resume"):
        return v.outcome != "refused"
    return v.verb == "obliterate" and (v.outcome == "maybe" or v.reply == "ok")
