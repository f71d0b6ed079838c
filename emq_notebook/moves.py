"""Moves by the job: reprocess the dead set (`reprocess_dead`, paced and watched by
`ControlledRetry`) and act on given ids (`reprocess_jobs`, `remove_jobs`).

Each runs in bounded calls: at most `budget` members (or ids) examined a call and
about `defaults.BYTE_BUDGET` bytes; a run is recorded as one `started` entry and one
closing entry (`audit.started`, `audit.changed`). `emq_notebook.admin` re-exports the
verbs (SPEC 8 names them there).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

import pandas as pd

from . import audit, checks, decoding
from .catalogue import contract
from .checks import whole
from .connector import Connection
from .defaults import BYTE_BUDGET, ID_BUDGET, ID_WORK, MOVE_BUDGET
from .errors import BadInput, EMQError, Halted, InvalidName
from .keyspace import base, check_server_id, job_key, queue_key

Progress = Callable[[int, int], None]


class Moved(int):
    """How many jobs a bulk reprocess moved (a dry run: would move), with what it left:
    `.bad_rows` (rows no transition can read, left in dead), `.ghosts` (members with no
    row, dropped) and `.foreign` (ids no verb addresses, left in dead; one over 256
    bytes as its first 200 and its length)."""

    bad_rows: int
    ghosts: int
    foreign: list[str]

    def __new__(
        cls, moved: int = 0, bad_rows: int = 0, ghosts: int = 0, foreign: Iterable[str] = ()
    ) -> Moved:
        self = super().__new__(cls, moved)
        self.bad_rows, self.ghosts, self.foreign = bad_rows, ghosts, list(foreign)
        return self

    def left(self, dry_run: bool = False) -> list[str]:
        """What stayed, a line each: "2 bad rows left in dead", "1 ghost dropped",
        "1 job with a foreign id left in dead: ord:17"."""
        stay, drop = ("would stay", "would be dropped") if dry_run else ("left in dead", "dropped")
        lines = []
        if self.bad_rows:
            lines.append(f"{_jobs(self.bad_rows, 'bad row')} (a field no transition can read) {stay}")
        if self.ghosts:
            lines.append(f"{_jobs(self.ghosts, 'ghost')} (a member with no row) {drop}")
        if self.foreign:
            shown = ", ".join(self.foreign[:5]) + (", …" if len(self.foreign) > 5 else "")
            lines.append(f"{_jobs(len(self.foreign), 'job')} with a foreign id {stay}: {shown}")
        return lines


def _jobs(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


class DeadRun:
    """One walk of the dead set, oldest death first, in bounded steps of `@reprocess_dead`
    (`@reprocess_dead_check` for a dry run): each step begins after the last member the
    one before examined, so each member is walked once, and only jobs dead when the run
    began are moved."""

    def __init__(self, conn: Connection, q: str, budget: int, dry_run: bool = False):
        self.conn, self.q, self.budget = conn, q, budget
        self.name = "reprocess_dead_check" if dry_run else "reprocess_dead"
        self.keys = [queue_key(q, "dead"), queue_key(q, "pending"), base(q)]
        self.began = conn.server_ms()
        self.dry_run = dry_run
        if not dry_run:
            audit.started()
            # a job this run moves can then only die again after `began`
            time.sleep(0.001)
        self.place: tuple[str, str] = ("", "")
        self.more = True
        self.moved = self.bad_rows = self.ghosts = 0
        self.foreign: list[str] = []

    def step(self, moves: int, listed: bool = False) -> list[str]:
        """One call moving at most `moves` jobs; answers the ids moved when `listed`."""
        argv = [self.budget, BYTE_BUDGET, *self.place, self.began, moves, "1" if listed else ""]
        score, member, more, moved, ghosts, bad, foreign, ids = self.conn.run(
            self.name, self.keys, argv, verb="reprocess", queue=self.q
        )
        self.place, self.more = (score, member), bool(more)
        if not self.dry_run:
            audit.changed(int(moved))
        self.moved += int(moved)
        self.ghosts += int(ghosts)
        self.bad_rows += int(bad)
        self.foreign += foreign
        return list(ids)

    def result(self) -> Moved:
        return Moved(self.moved, self.bad_rows, self.ghosts, self.foreign)


class Pace:
    """At most `rate` jobs a second (None: no cap): a step of a tenth of a second's
    worth at most, and a wait after each until the jobs done are due."""

    def __init__(self, rate: float | None):
        self.rate, self.began = rate, time.monotonic()

    def step(self, budget: int) -> int:
        return budget if self.rate is None else max(1, min(budget, math.ceil(self.rate / 10)))

    def wait(self, done: int) -> None:
        if self.rate is not None:
            wait = self.began + done / self.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)


@contract("reprocess", writes=True)
@audit.audited("reprocess", bulk=True)
def reprocess_dead(
    conn: Connection,
    q: str,
    budget: int = MOVE_BUDGET,
    limit: int | None = None,
    progress: Progress | None = None,
    *,
    dry_run: bool = False,
    rate: float | None = None,
    trial: int | None = None,
    stop_if_failing: float | None = None,
    watch_s: float = 30,
) -> Moved:
    """Move dead jobs back (flat to pending, grouped to their lanes), oldest death first,
    at most `limit`; answers a `Moved`. Only jobs dead when the call began are moved,
    each once; counters stay. Calls of at most `budget` members examined (a bad row, a
    ghost and a foreign id cost one like a job moved); `progress(calls, moved)` after
    each. A foreign id (`keyspace.check_server_id`) is left in dead, in `.foreign`.

    `dry_run=True` answers what the real call would move, by read-only steps (rate and
    trial aside). A controlled retry: `rate` caps the jobs moved a second; `trial=N`
    moves N first and waits (at most `watch_s`) until each has finished or is dead
    again; with `stop_if_failing` (a fraction) it then raises `Halted` (`.moved`,
    `.failed_again`) when that share of the trial is dead again.
    Refused before any I/O: `BadInput` (a budget above `defaults.MAX_MOVE_BUDGET`: each
    job moved is rewritten), `ReadOnly` (but a dry run).

    script: @reprocess_dead / @reprocess_jobs
    precondition: none; bounded calls; with rate / trial: only jobs dead when it began, each once
    writes: as reprocess_job for each job moved
    replies: int — the count moved / Halted (moved, failed_again) when a trial fails again
    native: none, a script only
    """
    checks.move_budget(budget)
    if limit is not None:
        whole(limit, "limit")
    if dry_run:
        rate = trial = stop_if_failing = None
    return ControlledRetry(
        conn,
        q,
        budget,
        limit,
        progress,
        rate=rate,
        trial=trial,
        stop_if_failing=stop_if_failing,
        watch_s=watch_s,
        dry_run=dry_run,
    ).run()


def _number(value: object, what: str, least: float, most: float) -> float:
    """A real number above `least` and at most `most`, else `BadInput`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not least < value <= most
    ):
        raise BadInput(f"{what} must be a number above {least:g} and at most {most:g}, not {value!r}")
    return float(value)


class ControlledRetry:
    """A run of `reprocess_dead`: one `DeadRun`, its steps paced, its first jobs watched."""

    POLL_S = 0.1

    def __init__(
        self,
        conn: Connection,
        q: str,
        budget: int,
        limit: int | None,
        progress: Progress | None,
        *,
        rate: float | None = None,
        trial: int | None = None,
        stop_if_failing: float | None = None,
        watch_s: float = 30,
        dry_run: bool = False,
    ):
        self.rate = None if rate is None else _number(rate, "rate (jobs per second)", 0, 1_000_000)
        self.trial = None if trial is None else whole(trial, "trial")
        if stop_if_failing is not None:
            _number(stop_if_failing, "stop_if_failing", 0, 1)
            if trial is None:
                raise BadInput("stop_if_failing needs a trial: how many jobs to watch first")
        self.stop_if_failing = stop_if_failing
        controlled = rate is not None or trial is not None or stop_if_failing is not None
        self.watch_s = _number(watch_s, "watch_s", 0, 86_400) if controlled else watch_s
        self.dead = queue_key(q, "dead")
        if not dry_run:
            conn.refuse_writes(f"reprocess {q}")
        self.conn, self.q, self.budget, self.limit, self.progress = conn, q, budget, limit, progress
        self.dry_run = dry_run
        self.calls = 0

    def run(self) -> Moved:
        self.walk = DeadRun(self.conn, self.q, self.budget, self.dry_run)
        if self.trial is not None:
            watched = self.move(self._room(self.trial))
            failed = self.watch(watched)
            if self.stop_if_failing is not None and watched and failed / len(watched) >= self.stop_if_failing:
                raise Halted(
                    f"reprocess {self.q} halted after its trial: {failed} of {len(watched)} jobs "
                    f"dead again (stop at {self.stop_if_failing:g}); {self.walk.moved} moved in all",
                    moved=self.walk.moved,
                    failed_again=failed,
                )
        pace, paced = Pace(self.rate), 0
        chunk = pace.step(self.budget)
        while self.walk.more and self._room(chunk):
            before = self.walk.moved
            self.step(self._room(chunk))
            paced += self.walk.moved - before
            pace.wait(paced)
        return self.walk.result()

    def _room(self, want: int) -> int:
        return want if self.limit is None else min(want, self.limit - self.walk.moved)

    def step(self, moves: int, listed: bool = False) -> list[str]:
        ids = self.walk.step(moves, listed)
        self.calls += 1
        if self.progress:
            self.progress(self.calls, self.walk.moved)
        return ids

    def move(self, n: int) -> list[str]:
        """Move `n` jobs (fewer when the run ends first), in steps; the ids moved."""
        moved: list[str] = []
        while self.walk.more and len(moved) < n:
            moved += self.step(n - len(moved), listed=True)
        return moved

    def watch(self, ids: list[str]) -> int:
        """Wait (at most watch_s) until each job has finished or is dead again, or the
        stop rule is met; the number dead again."""
        if not ids:
            return 0
        deadline = time.monotonic() + self.watch_s
        rows = [job_key(self.q, i, gate=False) for i in ids]
        while True:
            pipe = self.conn.pipeline()
            for i, row in zip(ids, rows, strict=True):
                pipe.zscore(self.dead, i)
                pipe.exists(row)
            replies = pipe.execute()
            dead = sum(1 for s in replies[0::2] if s is not None)
            done = sum(
                1 for s, row in zip(replies[0::2], replies[1::2], strict=True) if s is not None or not row
            )
            stop = self.stop_if_failing is not None and dead / len(ids) >= self.stop_if_failing
            if stop or done == len(ids) or time.monotonic() >= deadline:
                return dead
            time.sleep(self.POLL_S)


def job_ids(ids: Iterable[str]) -> list[str]:
    """Job ids as the bulk verbs take them: any iterable of ids (a frame stands for its
    index), duplicates dropped, first order kept, each taken as the server holds it
    (`ord:17`, `a b`). Refuses before any I/O: one id alone (a str: pass `[id]`) and an
    id holding half of a character pair (`BadInput`), an id not a string (`InvalidName`)."""
    if isinstance(ids, pd.DataFrame):
        ids = ids.index
    if isinstance(ids, str):
        raise BadInput(f"ids is a collection of job ids, not one id: pass [{ids!r:.80}]")
    chosen = list(dict.fromkeys(ids))
    for i in chosen:
        if not isinstance(i, str):
            raise InvalidName(f"job id must be a string, not {type(i).__name__}")
        if not i.isascii():
            decoding.wire(i)
    return chosen


def is_foreign(job_id: str) -> bool:
    """True for an id no verb addresses (`keyspace.check_server_id`)."""
    return not checks.passes(check_server_id, job_id)


def _bulk(
    conn: Connection,
    q: str,
    name: str,
    keys: list[str],
    ids: list[str],
    budget: int,
    verb: str,
    rate: float | None = None,
    progress: Progress | None = None,
    dry_run: bool = False,
) -> dict[str, str]:
    """Run script `name` over `ids` in bounded steps (at most `budget` ids, `Pace`d, and
    about `BYTE_BUDGET` of id bytes counted `ID_WORK` times, as the script counts them:
    `decoding.batch`); a step answers the ids it examined, the rest go again. A foreign
    id is not sent: its word is "foreign_id"."""
    sent = [i for i in ids if not is_foreign(i)]
    words: dict[str, str] = {}
    pace, calls, at = Pace(rate), 0, 0
    step = pace.step(budget)
    if not dry_run:
        audit.started()
    while at < len(sent):
        chunk = decoding.batch(sent, at, step, BYTE_BUDGET, ID_WORK)
        answered = conn.run(name, keys, [budget, BYTE_BUDGET, *chunk], verb=verb, queue=q)
        if not answered:  # every step examines one id at least: this is a script's bug
            raise EMQError(f"{name} answered no word for {len(chunk)} ids")
        if not dry_run:
            audit.changed(*audit.touched(answered))
        words.update(answered)
        at += len(answered)
        calls += 1
        if progress:
            progress(calls, len(words))
        pace.wait(len(words))
    return {i: words.get(i, "foreign_id") for i in ids}


@contract("reprocess", writes=True)
@audit.audited("reprocess", bulk=True)
def reprocess_jobs(
    conn: Connection,
    q: str,
    ids: Iterable[str],
    *,
    dry_run: bool = False,
    budget: int = ID_BUDGET,
    rate: float | None = None,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Move the given dead jobs back (flat to pending, grouped to their lanes):
    `{id: "reprocessed" | "gone" | "not_dead" | "bad_row" | "foreign_id"}` (a bad row
    stays in dead; a foreign id is never addressed). Ids are taken as the server holds
    them (a frame's index from `triage.find`). Calls of at most `budget` ids; `rate`
    caps the ids sent a second; `progress(calls, ids_answered)` after each call.
    `dry_run=True` answers the same words from a read-only script. Counters stay.
    Refused before any I/O: a budget above `defaults.MAX_MOVE_BUDGET` or a rate that is
    not a positive number (`BadInput`), an id that is not a string, `ReadOnly`.

    script: @reprocess_jobs
    precondition: none; each id checked on its own
    writes: as reprocess_job for each id moved (grouped jobs to their lanes); dry_run: nothing
      (@reprocess_jobs_check, read-only)
    replies: dict — {id: reprocessed / gone / not_dead} (bad_row: left in dead); the dry run answers the same
      words
    native: none, a script only
    """
    checks.move_budget(budget)
    if rate is not None:
        rate = _number(rate, "rate (jobs per second)", 0, 1_000_000)
    keys = [queue_key(q, "dead"), queue_key(q, "pending"), base(q)]
    chosen = job_ids(ids)
    if not dry_run:
        conn.refuse_writes(f"reprocess {q}")
    name = "reprocess_jobs_check" if dry_run else "reprocess_jobs"
    return _bulk(
        conn, q, name, keys, chosen, budget, "reprocess", None if dry_run else rate, progress, dry_run
    )


@contract("remove", writes=True)
@audit.audited("remove", bulk=True)
def remove_jobs(
    conn: Connection, q: str, ids: Iterable[str], *, dry_run: bool = False, budget: int = 2 * ID_BUDGET
) -> dict[str, str]:
    """Remove many jobs by id: `{id: "removed" | "gone" | "locked" | "foreign_id"}`;
    locked jobs are left untouched. Calls of at most `budget` work (an id costs 1, a
    removed job 2, a ghost one more a lane it is looked for in). `dry_run=True` answers
    the same words from a read-only script. Refused before any I/O: a budget above
    `defaults.MAX_BUDGET`, an id that is not a string, `ReadOnly`.

    script: @remove_jobs
    precondition: none; each id checked on its own
    writes: as remove_job for each removed id; dry_run: nothing (@remove_jobs_check, read-only)
    replies: dict — {id: removed / gone / locked}; the dry run answers the same words
    native: none, a script only
    """
    checks.budget(budget)
    keys = [base(q)]
    chosen = job_ids(ids)
    if not dry_run:
        conn.refuse_writes(f"remove {q}")
    name = "remove_jobs_check" if dry_run else "remove_jobs"
    return _bulk(conn, q, name, keys, chosen, budget, "remove", dry_run=dry_run)
