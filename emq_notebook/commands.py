"""The verbs of `%emq` and `emq`: one parsed command -> one call, for both front ends.

Each verb is declared once, with `@verb` on its handler (how to add one: the top
of `registry.py`).  `execute(session, ns)` runs a parsed line: an action prints
one line and returns None, a query returns its value (a DataFrame, a dict, a
list).  A refusal is an answer: its one line is printed and the refusal object
returned.  Every other `EMQError` propagates (and fails a notebook cell).

Every command that destroys or moves many jobs at once passes `confirm` first: the
one confirmation gate, stating the count, the connection and its env.
"""

from __future__ import annotations

import re
from argparse import Namespace
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import admin, frames, jobs, lanes, registry
from .catalogue import Entry
from .checks import json_text
from .connector import Connection, connect
from .defaults import EXECUTORS
from .errors import ActiveJobs, NotPaused, Refused, UsageProblem
from .grammar import delay, duration, fraction, grammar, limit, rate, seconds, verb_help, whole
from .keyspace import STATES, queue_key
from .registry import arg, opt, verb
from .settings import Settings

DEFAULT_NAME = "default"
_NAME = re.compile(r"[A-Za-z0-9_.@+\-]{1,64}\Z")


class Session:
    """A front end's named connections (one current), its settings and its output.

    The current connection is opened lazily on first use (`connect()`: EMQ_URL, else
    the embedded default) with the settings' executor and env."""

    def __init__(self, say: Callable[[str], None] = print, settings: Settings | None = None):
        self.say = say
        self.settings = settings if settings is not None else Settings()
        self.connections: dict[str, Connection] = {}
        self.current: str | None = None

    @property
    def conn(self) -> Connection:
        if self.current is None:
            self.add(connect(executor=self.settings.executor, env=self.settings.env, name=DEFAULT_NAME))
        assert self.current is not None
        return self.connections[self.current]

    @conn.setter
    def conn(self, value: Connection) -> None:
        self.add(value)

    def add(self, conn: Connection) -> None:
        """Keep `conn` under its name (`default` when it has none) and make it current."""
        name = conn.name or DEFAULT_NAME
        self.connections[name] = conn
        self.current = name

    def get(self, name: str | None = None) -> Connection:
        """The connection called `name` (None: the current one)."""
        if name is None:
            return self.conn
        if name not in self.connections:
            known = ", ".join(sorted(self.connections)) or "none yet"
            raise UsageProblem(f"no connection named {name!r} (known: {known}) — see %emq connections")
        return self.connections[name]

    def where(self) -> str:
        """The current connection as a confirmation names it: name, label and env."""
        c = self.conn
        return f"{self.current} ({c.label}, env {c.env or 'not set'})"

    def progress(self, label: str, total: int) -> Callable[[int], None]:
        """A progress reporter for a bounded loop: called with the work done so far."""

        def report(done: int) -> None:
            self.say(f"{label}: {done}/{total}")

        return report

    def widget(self, make: Callable[[], Any]) -> Any:
        """Build a widget (panels, the events view); a shell session cannot show one."""
        return make()


def confirm(s: Session, ns: Namespace, count: int, doing: str = "destroy") -> None:
    """The one confirmation gate: a command that would `doing` more than
    `confirm_above` jobs raises `UsageProblem` (nothing written) unless given --yes.
    The line states the count, the connection and its env."""
    if count > s.settings.confirm_above and not getattr(ns, "yes", False):
        raise UsageProblem(
            f"{ns.verb} {ns.queue} would {doing} {count:,} jobs on {s.where()}: add --yes to go ahead"
        )


def execute(session: Session, ns: Namespace) -> Any:
    """Run one parsed command; refusals answered, errors raised."""
    if getattr(ns, "show_help", False):
        session.say(verb_help(ns.verb))
        return None
    v = registry.VERBS[ns.verb]
    if v.writes and not getattr(ns, "dry_run", False):
        # before any read: a read-only session refuses the verb, not its first write
        # (a --dry-run only reads: its verbs refuse any write themselves)
        target = " ".join(str(p) for p in (ns.verb, getattr(ns, "queue", "")) if p)
        session.conn.refuse_writes(target)
    try:
        return v.handler(session, ns)
    except Refused as refusal:
        session.say(refusal.line())
        return refusal


def _budget(s: Session, ns: Namespace) -> int:
    return s.settings.budget if ns.budget is None else int(ns.budget)


QUEUE = arg("queue")
JOB = arg("id")
BUDGET = opt("--budget", type=whole, default=None, help="jobs per bounded call (default: %%config budget)")
YES = opt("--yes", action="store_true", help="confirm a command on more than confirm_above jobs")
# the filtered and controlled forms of reprocess and remove (handled in commands_triage.py)
ERROR = opt("--error", metavar="GLOB", help="last_error matches this glob (fnmatch: * ? [...])")
PAYLOAD = opt("--payload", metavar="GLOB", help="payload matches this glob")
SIGNATURE = opt("--signature", help="last_error has this signature (as %%emq errors shows it)")
STATE = opt(
    "--state",
    action="append",
    choices=[*STATES, "all"],
    help="the set to search (repeat it for several; default: dead)",
)
DRY_RUN = opt("--dry-run", action="store_true", help="print the preview and each id's word; write nothing")
CONTROLLED = (
    opt("--rate", type=rate, help="at most this many jobs a second (50/s)"),
    opt("--trial", type=whole, help="with --all: move N first and watch them"),
    opt("--stop-if-failing", type=fraction, help="with --trial: halt at this share dead again"),
    opt("--watch", type=duration, default=30_000, help="how long a trial is watched (default 30s)"),
)


# -- sessions ------------------------------------------------------------------


@verb(
    "connect",
    "connect (no URL: EMQ_URL, else the embedded default) and make it current",
    arg("url", nargs="?", help="redis://, rediss://, valkey://, valkeys:// or unix://"),
    opt("--embedded", choices=["valkey", "fake"], help="a private embedded server"),
    opt("--executor", choices=list(EXECUTORS), default=None, help="default: %%config executor"),
    opt("--cluster", action="store_true", help="use the Valkey Cluster client"),
    opt("--read-only", action="store_true", help="refuse every writing verb"),
    opt("--env", help="the env this server is, e.g. production (default: %%config env)"),
    opt("--name", help="keep it under this name (default: default)"),
    needs_server=False,
)
def _connect(s: Session, ns: Namespace) -> None:
    name = ns.name or DEFAULT_NAME
    if not _NAME.match(name):
        raise UsageProblem(f"a connection name is a short word, not {name!r}")
    conn = connect(
        ns.url,
        embedded=ns.embedded,
        executor=ns.executor or s.settings.executor,
        cluster=ns.cluster or None,
        read_only=ns.read_only,
        env=ns.env if ns.env is not None else s.settings.env,
        name=name,
    )
    conn.command("PING")  # a wrong URL fails here, as one line
    s.add(conn)
    s.say(f"connected: {conn.describe()} as {name}")


@verb("use", "make the named connection current", arg("name"), needs_server=False)
def _use(s: Session, ns: Namespace) -> None:
    conn = s.get(ns.name)
    s.current = ns.name
    s.say(f"using {ns.name}: {conn.describe()}")


@verb("connections", "the named connections (redacted), the current one marked", needs_server=False)
def _connections(s: Session, ns: Namespace) -> pd.DataFrame:
    records = [
        {
            "name": n,
            "current": n == s.current,
            "label": c.label,
            "env": c.env,
            "executor": c.executor,
            "read_only": c.read_only,
        }
        for n, c in s.connections.items()
    ]
    cols = ["name", "current", "label", "env", "executor", "read_only"]
    return pd.DataFrame.from_records(records, columns=cols).set_index("name")


# -- queue scope ---------------------------------------------------------------


@verb(
    "queues",
    "every queue known, with its counts (--rescan looks for queues first)",
    opt("--rescan", action="store_true", help="find the queues again (SCAN) before counting"),
)
def _queues(s: Session, ns: Namespace) -> pd.DataFrame:
    if ns.rescan:
        found = frames.queues(s.conn, rescan=True)
        s.say(f"rescanned {s.conn.label}: {len(found):,} queue{'' if len(found) == 1 else 's'}")
    return frames.counts(s.conn)


@verb("status", "one queue's counts, paused flag, lanes and repeatables", QUEUE)
def _status(s: Session, ns: Namespace) -> pd.DataFrame:
    return frames.counts(s.conn, [ns.queue])


@verb(
    "pause",
    "close the claim gate (idempotent; no set moves)",
    QUEUE,
    writes=True,
    catalogue=Entry(
        "admin.pause",
        "@pause",
        "none (idempotent)",
        "HSET emq:{q}:meta paused 1; publishes `paused`",
        "None — paused field set; the pending backlog is untouched",
        "none, a script only; EMQ.CLAIM reads the same paused field",
    ),
)
def _pause(s: Session, ns: Namespace) -> None:
    admin.pause(s.conn, ns.queue)
    s.say(f"paused {ns.queue}: claims answer empty; the backlog is untouched")


@verb(
    "resume",
    "open the claim gate (idempotent)",
    QUEUE,
    writes=True,
    catalogue=Entry(
        "admin.resume",
        "@resume",
        "none (idempotent)",
        "HDEL emq:{q}:meta paused; publishes `resumed`",
        "None — a later claim serves the head of pending",
        "none, a script only",
    ),
)
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
    catalogue=Entry(
        "admin.drain",
        "@drain",
        "none; bounded calls of `budget` jobs",
        "deletes pending (and lane, and with include_schedule scheduled) rows and :logs, "
        "releases their dedup keys; publishes `drained`",
        "int — the count drained; active jobs and the repeat registry survive",
        "none, a script only",
    ),
)
def _drain(s: Session, ns: Namespace) -> None:
    confirm(s, ns, admin.backlog(s.conn, ns.queue, ns.include_schedule))
    n = admin.drain(s.conn, ns.queue, include_schedule=ns.include_schedule, budget=_budget(s, ns))
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
    catalogue=Entry(
        "admin.obliterate",
        "@obliterate",
        "paused; unforced, no jobs in flight",
        "deletes up to `budget` jobs a call, then lanes, repeat records, metrics, dedup keys, "
        "orphans and meta; publishes `obliterated`",
        '"more" (call again) or "ok" (nothing left under emq:{q}:) / NotPaused / ActiveJobs',
        "none, a script only",
    ),
)
def _obliterate(s: Session, ns: Namespace) -> None:
    q, budget = ns.queue, _budget(s, ns)
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
        counts = frames.counts(s.conn, [ns.queue]).loc[ns.queue]
        total = int(sum(counts[st] for st in (STATES if ns.state == "all" else (ns.state,))))
        if total > rows:
            frame = frame.head(rows)
            s.say(f"showing {rows:,} of {total:,}; --limit 0 for all")
    return frame


# -- job scope -----------------------------------------------------------------


@verb(
    "job",
    "one job's row",
    QUEUE,
    JOB,
    catalogue=Entry(
        "jobs.get_job", "HGETALL", "the row exists", "nothing (a read)", "dict / Gone", "none, one command"
    ),
)
def _job(s: Session, ns: Namespace) -> dict:
    return dict(sorted(jobs.get_job(s.conn, ns.queue, ns.id).items()))


@verb(
    "data",
    "replace a job's payload (JSON, taken as written)",
    QUEUE,
    JOB,
    arg("json", literal=True),
    writes=True,
    catalogue=Entry(
        "jobs.update_data",
        "@update_data",
        "the row exists",
        "HSET payload; publishes `data`",
        "None / Gone",
        "none, a script only",
    ),
)
def _data(s: Session, ns: Namespace) -> None:
    jobs.update_data(s.conn, ns.queue, ns.id, json_text(ns.json, "data"))
    s.say(f"data replaced: {ns.queue} {ns.id}")


@verb(
    "progress",
    "write a job's progress and publish the event",
    QUEUE,
    JOB,
    arg("value"),
    writes=True,
    catalogue=Entry(
        "jobs.update_progress",
        "@update_progress",
        "the row exists",
        "HSET progress; PUBLISH {event: progress, job, progress}",
        "None / Gone",
        "none, a script only",
    ),
)
def _progress(s: Session, ns: Namespace) -> None:
    jobs.update_progress(s.conn, ns.queue, ns.id, ns.value)
    s.say(f"progress {ns.value}: {ns.queue} {ns.id}")


@verb(
    "log",
    "append a line to a job's logs (the rest of the line, as written)",
    QUEUE,
    JOB,
    opt("--keep", type=whole, help="trim to the last N lines"),
    arg("line", free=True),
    writes=True,
    catalogue=Entry(
        "jobs.add_log",
        "@add_log",
        "the row exists",
        "RPUSH :logs (LTRIM to the last `keep`)",
        "int — the list length / Gone",
        "none, a script only",
    ),
)
def _log(s: Session, ns: Namespace) -> None:
    n = jobs.add_log(s.conn, ns.queue, ns.id, " ".join(ns.line), keep=ns.keep)
    s.say(f"logged: {ns.queue} {ns.id} has {n} log line{'' if n == 1 else 's'}")


@verb(
    "logs",
    "a job's log lines",
    QUEUE,
    JOB,
    catalogue=Entry(
        "jobs.get_job_logs",
        "@get_logs",
        "the row exists",
        "nothing (a read)",
        "list[str] in append order ([] when empty) / Gone",
        "none, a script only",
    ),
)
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
    opt("--limit", type=whole, help="with a filter: the first N matches only"),
    DRY_RUN,
    YES,
    writes=True,
    catalogue=(
        Entry(
            "jobs.remove_job",
            "@remove_job2",
            "the row exists and no worker holds it",
            "ZREM from its set and lane (a lane slot given back when in flight), DEL row and "
            ":logs, release dedup; publishes `removed`",
            "None / Gone / Locked (a :lock key or a lock field: untouched)",
            "none, a script only",
        ),
        Entry(
            "admin.remove_jobs",
            "@remove_jobs",
            "none; each id checked on its own",
            "as remove_job for each removed id; dry_run: nothing (@remove_jobs_check, read-only)",
            "dict — {id: removed / gone / locked}; the dry run answers the same words",
            "none, a script only",
        ),
    ),
)
def _remove(s: Session, ns: Namespace) -> Any:
    if commands_triage.filtered(ns) or ns.id is None:
        return commands_triage.remove(s, ns)
    jobs.remove_job(s.conn, ns.queue, ns.id, dedup=ns.dedup)
    s.say(f"removed {ns.queue} {ns.id}")


@verb(
    "reprocess",
    "move a dead job back (or the dead a filter finds, or all dead)",
    QUEUE,
    arg("id", nargs="?"),
    opt("--all-dead", "--all", action="store_true"),
    BUDGET,
    opt("--limit", type=whole, help="at most N jobs: the first N matches (with --all: the oldest N)"),
    ERROR,
    PAYLOAD,
    SIGNATURE,
    DRY_RUN,
    *CONTROLLED,
    YES,
    writes=True,
    catalogue=(
        Entry(
            "jobs.reprocess_job",
            "@reprocess2",
            "the row exists and is in dead",
            "ZREM dead, HDEL last_error, HSET state pending, ZADD pending 0 (a grouped job: its "
            "lane and the ring); counters kept; publishes `reprocessed`",
            "None / Gone / NotDead",
            "EMQ.REPROCESS 4 emq:{q}:job:<id> emq:{q}:dead emq:{q}:pending emq:{q}: <id> — reads "
            "dead membership before writing; refuses a grouped row (reprocess lane not native)",
        ),
        Entry(
            "admin.reprocess_jobs",
            "@reprocess_jobs",
            "none; each id checked on its own",
            "as reprocess_job for each id moved (grouped jobs to their lanes); dry_run: nothing "
            "(@reprocess_jobs_check, read-only)",
            "dict — {id: reprocessed / gone / not_dead} (bad_row: left in dead); the dry "
            "run answers the same words",
            "none, a script only",
        ),
        Entry(
            "admin.reprocess_dead",
            "@reprocess_dead / @reprocess_jobs",
            "none; bounded calls; with rate / trial: only jobs dead when it began, each once",
            "as reprocess_job for each job moved",
            "int — the count moved / Halted (moved, failed_again) when a trial fails again",
            "none, a script only",
        ),
    ),
)
def _reprocess(s: Session, ns: Namespace) -> Any:
    if commands_triage.filtered(ns):
        return commands_triage.reprocess(s, ns)
    if ns.all_dead == (ns.id is not None):
        raise UsageProblem("reprocess takes a job id or --all-dead, one of them — see %emq reprocess --help")
    if ns.id is not None:
        jobs.reprocess_job(s.conn, ns.queue, ns.id)
        s.say(f"reprocessed {ns.queue} {ns.id}: dead -> pending")
        return
    # not destructive, but every moved job runs again (a mail sent twice): it is gated too
    dead = int(s.conn.command("ZCARD", queue_key(ns.queue, "dead")))
    confirm(s, ns, dead if ns.limit is None else min(dead, ns.limit), "reprocess")
    n = admin.reprocess_dead(s.conn, ns.queue, budget=_budget(s, ns), limit=ns.limit)
    s.say(f"reprocessed {n} dead jobs of {ns.queue}")


@verb(
    "metrics", "claimed / completed / failed per minute", QUEUE, opt("--since", type=duration, help="e.g. 1h")
)
def _metrics(s: Session, ns: Namespace) -> pd.DataFrame:
    return frames.metrics(s.conn, ns.queue, since_ms=ns.since)


# -- the queue underneath --------------------------------------------------------


@verb(
    "enqueue",
    "add a job (its JSON taken as written)",
    QUEUE,
    arg("json", literal=True),
    opt("--group"),
    opt("--delay", type=delay, default=0),
    opt("--id"),
    opt("--priority", type=int, default=0),
    opt("--attempts", type=whole, default=3),
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
        why = "paused" if admin.is_paused(s.conn, ns.queue) else "nothing ready"
        s.say(f"no job claimed from {ns.queue}: {why}")
    return got


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


@verb(
    "lane",
    "a lane's state (with options: set its limit, pause or resume it)",
    QUEUE,
    arg("group"),
    opt("--limit", type=whole),
    opt("--pause", action="store_true"),
    opt("--resume", action="store_true"),
)
def _lane(s: Session, ns: Namespace) -> dict | None:
    if ns.pause and ns.resume:
        raise UsageProblem("lane takes --pause or --resume, not both")
    done = []
    if ns.limit is not None or ns.pause or ns.resume:
        s.conn.refuse_writes(f"lane {ns.queue} {ns.group}")
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
        known = lanes.lanes(s.conn, ns.queue)
        if ns.group not in known:
            s.say(f"no lane {ns.group} in {ns.queue}" + (f" (lanes: {', '.join(known)})" if known else ""))
            return None
        return known[ns.group]
    s.say(f"lane {ns.queue}/{ns.group}: {', '.join(done)}")
    return None


# -- live views ------------------------------------------------------------------


@verb(
    "watch",
    "live events of a queue",
    QUEUE,
    opt("--seconds", type=seconds, default=None, help="stop after N seconds (the shell waits 10s)"),
)
def _watch(s: Session, ns: Namespace) -> Any:
    from .widgets import EventsView

    return s.widget(lambda: EventsView(s.conn, ns.queue, seconds=ns.seconds))


@verb(
    "panel",
    "the queue panel (with an id: the job panel; --dead: dead letters)",
    QUEUE,
    arg("id", nargs="?"),
    opt("--dead", action="store_true"),
)
def _panel(s: Session, ns: Namespace) -> Any:
    from . import widgets

    if ns.dead:
        return s.widget(lambda: widgets.DeadLetterPanel(s.conn, ns.queue))
    if ns.id:
        return s.widget(lambda: widgets.JobPanel(s.conn, ns.queue, ns.id))
    return s.widget(lambda: widgets.QueuePanel(s.conn, ns.queue, refresh_every=s.settings.refresh_s))


@verb(
    "help", "the grammar, or one verb's options", arg("topic", nargs="?", metavar="VERB"), needs_server=False
)
def _help(s: Session, ns: Namespace) -> None:
    s.say(verb_help(ns.topic) if ns.topic else grammar())


# -- triage verbs (find, errors, bulk remove) go here ------------------------------


# -- health verbs (health, latency) go here -----------------------------------------

# verb modules of their own: their verbs follow these in help and the README
from . import commands_dashboard, commands_health, commands_triage  # noqa: E402,F401
