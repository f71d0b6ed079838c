"""Queue scope: pause, resume, drain, obliterate -- the whole queue at once.

Each verb is one script (bounded where the work grows with the queue); the
bounded loops (`drain`, `obliterate_all`, `reprocess_dead`) are a Python loop
over atomic calls, so an interrupt between calls leaves a consistent queue.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

import pandas as pd

from . import triage
from .catalogue import document
from .checks import whole
from .connector import Connection
from .errors import BadInput, Halted
from .keyspace import base, check_name, lane_key, queue_key

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
def drain(
    conn: Connection,
    q: str,
    include_schedule: bool = False,
    budget: int = DEFAULT_BUDGET,
    progress: Progress | None = None,
) -> int:
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
    return conn.run(
        "obliterate",
        [queue_key(q, "meta"), base(q)],
        ["force" if force else "", budget],
        verb="obliterate",
        queue=q,
    )


def obliterate_all(
    conn: Connection,
    q: str,
    force: bool = False,
    budget: int = DEFAULT_BUDGET,
    progress: Progress | None = None,
) -> int:
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


@document
def reprocess_dead(
    conn: Connection,
    q: str,
    budget: int = DEFAULT_BUDGET,
    limit: int | None = None,
    progress: Progress | None = None,
    *,
    rate: float | None = None,
    trial: int | None = None,
    stop_if_failing: float | None = None,
    watch_s: float = 30,
) -> int:
    """Move dead jobs back (flat to pending, grouped to their lanes), oldest death first.

    Bounded calls of at most `budget` jobs; at most `limit` jobs in all. Counters
    stay. Answers the count moved. An empty dead set answers 0.
    `progress(calls, moved_so_far)` is called after each call.

    A controlled retry, for a downstream that may still be failing:
    - `rate` caps the jobs moved per second;
    - `trial=N` moves N jobs first and waits (at most `watch_s` seconds) until each has
      finished (its row gone) or is dead again;
    - `stop_if_failing` (a fraction, with `trial`): when at least that share of the
      trial's jobs are dead again, it stops there and raises `Halted` (`.moved`,
      `.failed_again`); the jobs after the trial stay in dead.
    Only jobs dead when the call began are moved, each at most once, so a job that
    dies again meanwhile is not moved again. A row no transition can read is left in
    dead. Checked before any I/O (`BadInput`, `ReadOnly`).
    """
    check_budget(budget)
    if limit is not None:
        check_budget(limit, "limit")
    if rate is None and trial is None and stop_if_failing is None:
        return _reprocess_all(conn, q, budget, limit, progress)
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
    ).run()


def _reprocess_all(
    conn: Connection, q: str, budget: int, limit: int | None, progress: Progress | None
) -> int:
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
    """`reprocess_dead` with a rate, a trial and a stop rule: ids read from the dead set
    (only those dead when it began), moved by `reprocess_jobs`, a trial watched."""

    POLL_S = 0.1

    def __init__(
        self,
        conn: Connection,
        q: str,
        budget: int,
        limit: int | None,
        progress: Progress | None,
        *,
        rate: float | None,
        trial: int | None,
        stop_if_failing: float | None,
        watch_s: float,
    ):
        self.rate = None if rate is None else _number(rate, "rate (jobs per second)", 0, 1_000_000)
        self.trial = None if trial is None else whole(trial, "trial")
        if stop_if_failing is not None:
            _number(stop_if_failing, "stop_if_failing", 0, 1)
            if trial is None:
                raise BadInput("stop_if_failing needs a trial: how many jobs to watch first")
        self.stop_if_failing = stop_if_failing
        self.watch_s = _number(watch_s, "watch_s", 0, 86_400)
        self.dead, self.pending = queue_key(q, "dead"), queue_key(q, "pending")
        conn.refuse_writes(f"reprocess {q}")
        self.conn, self.q, self.budget, self.limit, self.progress = conn, q, budget, limit, progress
        self.moved = self.calls = self.stayed = 0
        self.seen: set[str] = set()
        self.began_ms = 0

    def run(self) -> int:
        self.began_ms = triage.server_ms(self.conn)
        if self.trial is not None:
            watched = self.step(self._room(self.trial))
            failed = self.watch(watched)
            if self.stop_if_failing is not None and watched and failed / len(watched) >= self.stop_if_failing:
                raise Halted(
                    f"reprocess {self.q} halted after its trial: {failed} of {len(watched)} jobs "
                    f"dead again (stop at {self.stop_if_failing:g}); {self.moved} moved in all",
                    moved=self.moved,
                    failed_again=failed,
                )
        chunk = self.budget if self.rate is None else max(1, min(self.budget, math.ceil(self.rate / 10)))
        started, paced = time.monotonic(), 0
        while self._room(chunk):
            moved = self.step(self._room(chunk))
            if moved is None:
                break
            paced += len(moved)
            if self.rate is not None:
                wait = started + paced / self.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
        return self.moved

    def _room(self, want: int) -> int:
        return want if self.limit is None else min(want, self.limit - self.moved)

    def step(self, n: int) -> list[str] | None:
        """Move up to `n` of the oldest jobs dead when the retry began: the ids moved,
        or None when none is left to try."""
        ids = self.conn.command("ZRANGEBYSCORE", self.dead, "-inf", self.began_ms, "LIMIT", self.stayed, n)
        if not ids:
            return None
        fresh = [i for i in ids if i not in self.seen]
        self.stayed += len(ids) - len(fresh)  # died again after it was moved: left be
        self.seen.update(fresh)
        words = reprocess_jobs(self.conn, self.q, fresh, budget=self.budget) if fresh else {}
        moved = [i for i, w in words.items() if w == "reprocessed"]
        # a ghost or a bad row stays in dead: step over it next time
        self.stayed += sum(1 for w in words.values() if w in ("gone", "bad_row"))
        self.moved += len(moved)
        self.calls += 1
        if self.progress:
            self.progress(self.calls, self.moved)
        return moved

    def watch(self, ids: list[str] | None) -> int:
        """Wait (at most watch_s) until each job has finished or is dead again; the
        number dead again. Stops early once the stop rule is met."""
        if not ids:
            return 0
        deadline = time.monotonic() + self.watch_s
        while True:
            pipe = self.conn.pipeline()
            for i in ids:
                pipe.zscore(self.dead, i)
                pipe.exists(queue_key(self.q, "job:" + i))
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
    """Job ids as the bulk verbs take them: any iterable of ids (a frame's index; a frame
    stands for its index), each gated by the key builder, duplicates dropped, first
    order kept. One id alone (a str) is `BadInput`: pass `[id]`."""
    if isinstance(ids, pd.DataFrame):
        ids = ids.index
    if isinstance(ids, str):
        raise BadInput(f"ids is a collection of job ids, not one id: pass [{ids!r}]")
    return list(dict.fromkeys(check_name(i, "job id") for i in ids))


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
) -> dict[str, str]:
    """Run script `name` over `ids` in calls of at most `budget` ids (and, with a `rate`,
    at most a tenth of a second's worth, paced to that many ids a second)."""
    words: dict[str, str] = {}
    step = budget if rate is None else max(1, min(budget, math.ceil(rate / 10)))
    began = time.monotonic()
    for calls, start in enumerate(range(0, len(ids), step), 1):
        chunk = ids[start : start + step]
        words.update(conn.run(name, keys, chunk, verb=verb, queue=q))
        if progress:
            progress(calls, len(words))
        if rate is not None:
            wait = began + len(words) / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    return words


@document
def reprocess_jobs(
    conn: Connection,
    q: str,
    ids: Iterable[str],
    *,
    dry_run: bool = False,
    budget: int = DEFAULT_BUDGET,
    rate: float | None = None,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Move the given dead jobs back (flat to pending, grouped to their lanes), in calls
    of at most `budget` ids: `{id: "reprocessed" | "gone" | "not_dead"}` (and "bad_row"
    for a row no transition can read, left in dead).

    `dry_run=True` answers the words the real call would give on the same state,
    from a read-only script, and writes nothing (it works on a read-only session).
    `rate` caps the ids sent a second; `progress(calls, ids_answered)` after each call.
    Counters stay. Ids are gated and de-duplicated before anything is sent.
    """
    check_budget(budget)
    if rate is not None:
        rate = _number(rate, "rate (jobs per second)", 0, 1_000_000)
    keys = [queue_key(q, "dead"), queue_key(q, "pending"), base(q)]
    chosen = job_ids(ids)
    if not dry_run:
        conn.refuse_writes(f"reprocess {q}")
    return _bulk(
        conn,
        q,
        "reprocess_jobs_check" if dry_run else "reprocess_jobs",
        keys,
        chosen,
        budget,
        "reprocess",
        rate=None if dry_run else rate,
        progress=progress,
    )


@document
def remove_jobs(conn: Connection, q: str, ids: Iterable[str], *, dry_run: bool = False) -> dict[str, str]:
    """Remove many jobs by id: `{id: "removed" | "gone" | "locked"}`, in calls of at most
    1,000 ids.

    Locked jobs are left untouched; every id is gated (and duplicates dropped) before
    anything is sent. `dry_run=True` answers the words the real call would give on the
    same state, from a read-only script, and writes nothing.
    """
    keys = [base(q)]
    chosen = job_ids(ids)
    if not dry_run:
        conn.refuse_writes(f"remove {q}")
    return _bulk(
        conn, q, "remove_jobs_check" if dry_run else "remove_jobs", keys, chosen, DEFAULT_BUDGET, "remove"
    )
