"""The doing room: one parsed command -> one verb call, for both front ends.

`execute(session, ns)` maps a parsed line to the verb it names; an action prints
one line and returns None, a query returns its value (a DataFrame, a dict, a
list).  A refusal is an answer: its one line is printed and the refusal object
returned.  Every other `EMQError` propagates (and fails a notebook cell).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from . import admin, frames, jobs, lanes
from .connector import Connection, connect
from .errors import ActiveJobs, BadInput, NotPaused, Refused, UsageProblem
from .keyspace import queue_key
from .grammar import grammar, verb_help

# a destructive command on more jobs than this asks for --yes, stating the count
CONFIRM_ABOVE = 1000


class Session:
    """The current connection of a front end, opened lazily on first use."""

    def __init__(self, say: Callable[[str], None] = print):
        self.say = say
        self._conn: Connection | None = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = connect()
        return self._conn

    @conn.setter
    def conn(self, value: Connection) -> None:
        self._conn = value

    def progress(self, label: str, total: int) -> Callable[[int], None]:
        """A progress reporter for a bounded loop: called with the work done so far."""
        def report(done: int) -> None:
            self.say(f"{label}: {done}/{total}")
        return report

    def widget(self, make: Callable[[], Any]) -> Any:
        """Build a widget (panels, the events view); a shell session cannot show one."""
        return make()


def _json(text: str, verb: str) -> str:
    try:
        json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{verb}: malformed JSON {text!r}: {exc}") from None
    return text


def _confirm(ns, count: int, what: str) -> None:
    if count > CONFIRM_ABOVE and not ns.yes:
        raise UsageProblem(f"{what} {ns.queue} would destroy {count:,} jobs: "
                           f"add --yes to go ahead")


def execute(session: Session, ns) -> Any:
    """Run one parsed command; refusals answered, errors raised."""
    if getattr(ns, "show_help", False):
        session.say(verb_help(ns.verb))
        return None
    try:
        return _VERBS[ns.verb](session, ns)
    except Refused as refusal:
        session.say(refusal.line())
        return refusal


def _connect(s: Session, ns):
    s.conn = connect(ns.url, embedded=ns.embedded, executor=ns.executor, cluster=ns.cluster or None)
    s.conn.command("PING")          # a wrong URL fails here, as one line
    s.say(f"connected: {s.conn.label} (executor={s.conn.executor})")


def _status(s: Session, ns):
    return frames.counts(s.conn, [ns.queue])


def _pause(s: Session, ns):
    admin.pause(s.conn, ns.queue)
    s.say(f"paused {ns.queue}: claims answer empty; the backlog is untouched")


def _resume(s: Session, ns):
    admin.resume(s.conn, ns.queue)
    s.say(f"resumed {ns.queue}")


def _drain(s: Session, ns):
    _confirm(ns, admin.backlog(s.conn, ns.queue, ns.include_schedule), "drain")
    n = admin.drain(s.conn, ns.queue, include_schedule=ns.include_schedule, budget=ns.budget)
    s.say(f"drained {n} jobs from {ns.queue}")


def _obliterate(s: Session, ns):
    q = ns.queue
    if ns.step:
        s.say(f"obliterate {q}: {admin.obliterate(s.conn, q, force=ns.force, budget=ns.budget)}")
        return None
    total = admin.job_count(s.conn, q)
    if total > CONFIRM_ABOVE and not ns.yes:
        # answer the refusal the script would give before asking to confirm; only a
        # read, so nothing is deleted however the queue changes meanwhile
        if not admin.is_paused(s.conn, q):
            raise NotPaused("obliterate", q)
        if not ns.force and s.conn.command("ZCARD", queue_key(q, "active")):
            raise ActiveJobs("obliterate", q)
    _confirm(ns, total, "obliterate")
    report = s.progress(f"obliterate {q}", total)
    calls = admin.obliterate_all(s.conn, q, force=ns.force, budget=ns.budget,
                                 progress=lambda c, left: report(total - left))
    report(total)
    s.say(f"obliterated {q}: {total} jobs in {calls} calls; nothing left under emq:{{{q}}}:")


def _jobs(s: Session, ns):
    return frames.snapshot(s.conn, ns.queue, ns.state, limit=ns.limit)


def _job(s: Session, ns):
    return dict(sorted(jobs.get_job(s.conn, ns.queue, ns.id).items()))


def _data(s: Session, ns):
    jobs.update_data(s.conn, ns.queue, ns.id, _json(ns.json, "data"))
    s.say(f"data replaced: {ns.queue} {ns.id}")


def _progress(s: Session, ns):
    jobs.update_progress(s.conn, ns.queue, ns.id, ns.value)
    s.say(f"progress {ns.value}: {ns.queue} {ns.id}")


def _log(s: Session, ns):
    n = jobs.add_log(s.conn, ns.queue, ns.id, " ".join(ns.line), keep=ns.keep)
    s.say(f"logged: {ns.queue} {ns.id} has {n} log lines")


def _logs(s: Session, ns):
    return jobs.get_job_logs(s.conn, ns.queue, ns.id)


def _remove(s: Session, ns):
    jobs.remove_job(s.conn, ns.queue, ns.id, dedup=ns.dedup)
    s.say(f"removed {ns.queue} {ns.id}")


def _reprocess(s: Session, ns):
    if ns.all_dead == (ns.id is not None):
        raise UsageProblem("reprocess takes a job id or --all-dead, one of them — see %emq reprocess --help")
    if ns.id is not None:
        jobs.reprocess_job(s.conn, ns.queue, ns.id)
        s.say(f"reprocessed {ns.queue} {ns.id}: dead -> pending")
        return None
    n = admin.reprocess_dead(s.conn, ns.queue, budget=ns.budget, limit=ns.limit)
    s.say(f"reprocessed {n} dead jobs of {ns.queue}")


def _metrics(s: Session, ns):
    return frames.metrics(s.conn, ns.queue, since_ms=ns.since)


def _enqueue(s: Session, ns):
    return jobs.enqueue(s.conn, ns.queue, _json(ns.json, "enqueue"), id=ns.id, group=ns.group,
                        delay_ms=ns.delay, priority=ns.priority, max_attempts=ns.attempts,
                        dedup=ns.dedup)


def _claim(s: Session, ns):
    got = (lanes.claim if ns.grouped else jobs.claim)(s.conn, ns.queue, ns.lease)
    if got is None:
        why = "paused" if admin.is_paused(s.conn, ns.queue) else "nothing ready"
        s.say(f"no job claimed from {ns.queue}: {why}")
    return got


def _complete(s: Session, ns):
    jobs.complete(s.conn, ns.queue, ns.id)
    s.say(f"completed {ns.queue} {ns.id}")


def _fail(s: Session, ns):
    outcome = jobs.fail(s.conn, ns.queue, ns.id, " ".join(ns.error))
    s.say(f"failed {ns.queue} {ns.id}: {outcome}")


def _lane(s: Session, ns):
    if ns.pause and ns.resume:
        raise UsageProblem("lane takes --pause or --resume, not both")
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
    if not done:
        return lanes.lanes(s.conn, ns.queue).get(ns.group)
    s.say(f"lane {ns.queue}/{ns.group}: {', '.join(done)}")


def _watch(s: Session, ns):
    from .widgets import EventsView
    return s.widget(lambda: EventsView(s.conn, ns.queue, seconds=ns.seconds))


def _panel(s: Session, ns):
    from . import widgets
    if ns.dead:
        return s.widget(lambda: widgets.DeadLetterPanel(s.conn, ns.queue))
    if ns.id:
        return s.widget(lambda: widgets.JobPanel(s.conn, ns.queue, ns.id))
    return s.widget(lambda: widgets.QueuePanel(s.conn, ns.queue))


def _help(s: Session, ns):
    s.say(verb_help(ns.topic) if ns.topic else grammar())


_VERBS: dict[str, Callable[[Session, Any], Any]] = {
    "connect": _connect, "queues": lambda s, ns: frames.counts(s.conn), "status": _status,
    "pause": _pause, "resume": _resume, "drain": _drain, "obliterate": _obliterate,
    "jobs": _jobs, "job": _job, "data": _data, "progress": _progress, "log": _log,
    "logs": _logs, "remove": _remove, "reprocess": _reprocess, "metrics": _metrics,
    "enqueue": _enqueue, "claim": _claim, "complete": _complete, "fail": _fail,
    "lane": _lane, "watch": _watch, "panel": _panel, "help": _help,
}
