"""The roles a soak runs, each in its own process (or thread, on the fake): the
producer, the workers, the housekeeper and the operator, and what they share (the
plan, the controls, the two queues).
"""

from __future__ import annotations

import json
import logging
import queue as queue_mod
import random
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ledger import (
    Claim,
    Crash,
    DrainStep,
    Enqueue,
    Expiry,
    Finish,
    HandlerDone,
    HandlerFailed,
    KeysLeft,
    Ledger,
    VerbCall,
    WireFault,
    brief,
    now,
)

Q1, Q2 = "soak", "soak-twin"
GROUPS = {Q1: ("g0", "g1", "g2", "g3"), Q2: ("h0", "h1")}
LEASE_MS = 2000


@dataclass(frozen=True)
class Plan:
    """What every role needs to know; picklable, so it crosses a spawn."""

    backend: str  # "valkey" or "fake"
    url: str | None  # through the proxy (valkey); None on the fake
    ledger_dir: str
    seed: int
    hard_stop: float  # wall clock: every role exits by then, whatever happens
    lease_ms: int = LEASE_MS
    workers: int = 4
    enqueue_gap: float = 0.06  # seconds between two enqueues
    fail_rate: float = 0.15
    drain_every: tuple[float, float] = (6.0, 10.0)
    obliterate_every: tuple[float, float] = (7.0, 11.0)


class Box:
    """A thread-mode stand-in for `multiprocessing.Value`."""

    def __init__(self, value: int = 0):
        self.value = value


class Controls:
    """Events and flags shared by the harness and the roles: `stop`, `go`, the hold
    on the second queue while it is obliterated (`q2_hold` / `q2_ack`), each worker
    slot's `busy` flag (set while its handler runs) and, on threads, `kill`."""

    def __init__(self, ctx: Any | None, workers: int):
        event = ctx.Event if ctx is not None else threading.Event
        self.stop, self.go, self.q2_hold, self.q2_ack = event(), event(), event(), event()
        self.ready: Any = ctx.Queue() if ctx is not None else queue_mod.Queue()
        self.busy = [ctx.Value("i", 0) if ctx is not None else Box() for _ in range(workers)]
        self.kill = [event() for _ in range(workers)]


def running(plan: Plan, ctl: Controls) -> bool:
    return not ctl.stop.is_set() and time.time() < plan.hard_stop


class Killed(BaseException):
    """Raised in a worker thread's handler to stop it mid-job (the fake's SIGKILL):
    a BaseException, so the Worker does not take it for the handler failing."""


def open_conn(plan: Plan, executor: str = "script") -> Any:
    import emq_notebook as emq

    if plan.backend == "fake":
        return emq.connect(embedded="fake", executor=executor)
    return emq.connect(plan.url, executor=executor, socket_timeout=5, socket_connect_timeout=2)


def producer(plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random, slot: int) -> None:
    """Flat and grouped jobs into both queues: 15% with a dedup key from a small
    pool (so keys collide), 15% delayed, 1 to 3 attempts. Nothing goes into the
    second queue while the operator holds it (and says so through `q2_ack`)."""
    from emq_notebook import jobs
    from emq_notebook.errors import WireError
    from emq_notebook.keyspace import new_id

    conn = open_conn(plan)
    ctl.ready.put(ledger.name)
    ctl.go.wait()
    seq = 0
    while running(plan, ctl):
        if ctl.q2_hold.is_set():
            ctl.q2_ack.set()
        q = Q2 if not ctl.q2_hold.is_set() and rng.random() < 0.25 else Q1
        seq += 1
        rec = Enqueue(
            queue=q,
            id=new_id(),
            group=rng.choice(GROUPS[q]) if rng.random() < 0.4 else None,
            dedup=f"d{rng.randrange(20)}" if rng.random() < 0.15 else None,
            delay_ms=rng.randint(100, 1500) if rng.random() < 0.15 else 0,
            started=now(),
        )
        try:
            rec.reply = jobs.enqueue(
                conn,
                q,
                json.dumps({"n": seq}),
                id=rec.id,
                group=rec.group,
                delay_ms=rec.delay_ms,
                max_attempts=rng.randint(1, 3),
                dedup=rec.dedup,
                backoff_ms=100,
            )
        except WireError as exc:
            rec.error = brief(exc)
        rec.ended = now()
        ledger.write(rec)
        time.sleep(plan.enqueue_gap)


def make_worker_class() -> type:
    from emq_notebook.errors import WireError
    from emq_notebook.worker import Worker

    class LedgerWorker(Worker):
        """`Worker` with each claim and each complete/fail written to the ledger."""

        def __init__(self, conn: Any, q: str, handler: Any, ledger: Ledger, **kw: Any):
            super().__init__(conn, q, handler, **kw)
            self.ledger = ledger

        def claim(self) -> Any:
            t0 = now()
            got = super().claim()
            if got is not None:
                self.ledger.write(
                    Claim(
                        queue=self.q,
                        id=got.id,
                        attempt=got.attempts,
                        grouped=self.grouped,
                        started=t0,
                        ended=now(),
                    )
                )
            return got

        def _finish(self, job_id: str, how: str, error: str = "") -> bool:
            rec = Finish(queue=self.q, id=job_id, how=how, started=now())
            try:
                ok = super()._finish(job_id, how, error)
            except WireError as exc:
                rec.outcome, rec.error, rec.ended = "maybe", brief(exc), now()
                self.ledger.write(rec)
                raise
            rec.outcome, rec.ended = "ok" if ok else "refused", now()
            self.ledger.write(rec)
            return ok

    return LedgerWorker


def nap_length(rng: random.Random) -> float:
    """How long a handler works: now and then past the lease, mostly briefly."""
    r = rng.random()
    if r < 0.04:
        return rng.uniform(2.3, 3.0)
    if r < 0.3:
        return rng.uniform(0.05, 0.3)
    return rng.uniform(0.0, 0.03)


def worker(plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random, slot: int) -> None:
    """`Worker.run_one` round-robin over both queues, flat and grouped; the even
    slots use the script executor, the odd ones the function library."""
    from emq_notebook.errors import WireError

    conn = open_conn(plan, "function" if slot % 2 else "script")
    busy, kill = ctl.busy[slot], ctl.kill[slot]

    def handler_for(q: str) -> Any:
        def handler(job_id: str, payload: str, attempts: int) -> None:
            busy.value = 1
            try:
                until = time.time() + nap_length(rng)
                while time.time() < until and not ctl.stop.is_set():
                    if kill.is_set():
                        raise Killed()
                    time.sleep(min(0.05, max(0.0, until - time.time())))
                if rng.random() < plan.fail_rate:
                    ledger.write(HandlerFailed(queue=q, id=job_id, attempt=attempts))
                    raise RuntimeError("the handler failed on purpose")
                ledger.write(HandlerDone(queue=q, id=job_id, attempt=attempts))
            finally:
                busy.value = 0

        return handler

    cls = make_worker_class()
    loops = [
        cls(conn, q, handler_for(q), ledger, lease_ms=plan.lease_ms, grouped=g, idle_sleep=0)
        for q in (Q1, Q2)
        for g in (False, True)
    ]
    ctl.ready.put(ledger.name)
    ctl.go.wait()
    while running(plan, ctl):
        if kill.is_set():
            raise Killed()
        worked = False
        for w in loops:
            try:
                worked = w.run_one() or worked
            except WireError as exc:
                ledger.write(WireFault(where=f"worker {w.q}", error=brief(exc)))
                time.sleep(0.05)
        if not worked:
            time.sleep(0.02)


def housekeeper(plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random, slot: int) -> None:
    """Due scheduled jobs promoted and expired leases put back, both queues, every 0.1 s;
    each expiry call that put jobs back (or whose reply was lost) is written down."""
    from emq_notebook import jobs
    from emq_notebook.errors import WireError

    conn = open_conn(plan)
    ctl.ready.put(ledger.name)
    ctl.go.wait()
    while running(plan, ctl):
        for q in (Q1, Q2):
            t0 = now()
            try:
                n = jobs.expire_leases(conn, q)
                if n:
                    ledger.write(Expiry(queue=q, count=n, started=t0, ended=now()))
                jobs.promote(conn, q)
            except WireError as exc:
                ledger.write(Expiry(queue=q, count="maybe", started=t0, ended=now(), error=brief(exc)))
        time.sleep(0.1)


# how often the operator picks each verb, against the others
VERBS = {
    "pause": 3,
    "reprocess_dead": 4,
    "remove_jobs": 4,
    "remove_job": 4,
    "update_data": 6,
    "update_progress": 6,
    "add_log": 6,
    "reprocess_job": 5,
    "lane_pause": 2,
    "lane_limit": 3,
    "find": 2,
    "reprocess_jobs": 3,
    "promote_job": 3,
}
# the verbs that take one picked id, and where the operator picks it
ONE_JOB = ("remove_job", "update_data", "update_progress", "add_log")
EVERYWHERE = ("pending", "active", "schedule", "dead", *GROUPS[Q1])


class Operator:
    """Random operator verbs on the main queue, a bounded drain now and then, and
    the obliterate of the second queue while it is worked. Each verb is written
    down with its invocation number, its arguments, its times and its outcome."""

    def __init__(self, plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random):
        self.plan, self.ctl, self.ledger, self.rng = plan, ctl, ledger, rng
        self.conn = open_conn(plan)
        self.n = 0
        self.resume_at: float | None = None
        self.lane_resume_at: dict[str, float] = {}
        t = time.time()
        self.next_drain = t + rng.uniform(*plan.drain_every)
        self.next_obliterate = t + rng.uniform(*plan.obliterate_every) / 2

    def call(self, verb: str, q: str, fn: Any, summary: Any = None, **args: Any) -> VerbCall:
        """Run one verb and write it down; `summary(reply)` is written in place of a
        large reply (a frame)."""
        from emq_notebook.errors import Halted, Refused, WireError

        self.n += 1
        rec = VerbCall(verb=verb, queue=q, args=args, number=self.n, started=now())
        try:
            reply = fn()
        except Refused as exc:
            rec.outcome, rec.reason = "refused", exc.reason
        except Halted as exc:  # a controlled retry whose trial died again: an answer
            rec.outcome, rec.reply = "halted", {"moved": exc.moved, "failed_again": exc.failed_again}
        except WireError as exc:
            rec.outcome, rec.error = "maybe", brief(exc)
        else:
            rec.outcome, rec.reply = "ok", summary(reply) if summary else reply
        rec.ended = now()
        self.ledger.write(rec)
        return rec

    def pick(self, q: str, states: tuple[str, ...]) -> str | None:
        """A job id from one of `states` (a lane when the state is a group), now and
        then an id that never existed; None when there is none (or the read failed)."""
        from emq_notebook.errors import WireError
        from emq_notebook.keyspace import lane_key, queue_key

        if self.rng.random() < 0.1:
            return f"j_nosuch{self.rng.randrange(1000)}"
        for state in self.rng.sample(states, len(states)):
            key = lane_key(q, state) if state in GROUPS[q] else queue_key(q, state)
            try:
                ids = self.conn.command("ZRANGE", key, 0, 40)
            except WireError:
                return None
            if ids:
                return self.rng.choice(ids)
        return None

    def step(self) -> None:
        t = time.time()
        self.resume_what_is_due(t)
        if t >= self.next_drain:
            self.drain()
            self.next_drain = time.time() + self.rng.uniform(*self.plan.drain_every)
        if t >= self.next_obliterate:
            self.obliterate_twin()
            self.next_obliterate = time.time() + self.rng.uniform(*self.plan.obliterate_every)
        verb = self.rng.choices(list(VERBS), list(VERBS.values()))[0]
        if verb in ("remove_jobs", "reprocess_jobs"):
            self.act_on_jobs(verb)
        elif verb in ONE_JOB:
            self.act_on_one_job(verb)
        else:
            getattr(self, verb)()  # a verb with a method of its own

    def resume_what_is_due(self, t: float) -> None:
        """The queue and each lane paused by `pause`/`lane_pause` resumed once its
        time has come (a call that did not answer "ok" is tried again next step)."""
        from emq_notebook import admin, lanes

        c = self.conn
        if self.resume_at is not None and t >= self.resume_at:
            if self.call("resume", Q1, lambda: admin.resume(c, Q1)).outcome == "ok":
                self.resume_at = None
        for g, at in list(self.lane_resume_at.items()):
            if (
                t >= at
                and self.call("lane_resume", Q1, lambda g=g: lanes.resume_lane(c, Q1, g), group=g).outcome
                == "ok"
            ):
                del self.lane_resume_at[g]

    def pause(self) -> None:
        from emq_notebook import admin

        if (
            self.resume_at is None
            and self.call("pause", Q1, lambda: admin.pause(self.conn, Q1)).outcome != "refused"
        ):
            self.resume_at = time.time() + self.rng.uniform(0.3, 1.5)

    def reprocess_dead(self) -> None:
        """Plain, paced (`rate`), or a watched trial that halts when its jobs die again."""
        from emq_notebook import admin

        rng = self.rng
        budget, limit = rng.randint(5, 50), rng.randint(1, 80)
        how: dict[str, Any] = rng.choice(
            ({}, {}, {"rate": 40.0}, {"trial": 3, "stop_if_failing": 0.5, "watch_s": 1.0})
        )
        if how:
            limit = min(limit, 20)
        self.call(
            "reprocess_dead",
            Q1,
            lambda: admin.reprocess_dead(self.conn, Q1, budget=budget, limit=limit, **how),
            budget=budget,
            limit=limit,
            **how,
        )

    def act_on_jobs(self, verb: str) -> None:
        """`remove_jobs` or `reprocess_jobs` on a few picked ids, a dry run now and then."""
        from emq_notebook import admin

        rng = self.rng
        states = EVERYWHERE if verb == "remove_jobs" else ("dead", "dead", "pending")
        ids = sorted({i for i in (self.pick(Q1, states) for _ in range(rng.randint(1, 4))) if i})
        dry = rng.random() < 0.3
        act = admin.remove_jobs if verb == "remove_jobs" else admin.reprocess_jobs
        if ids:
            self.call(verb, Q1, lambda: act(self.conn, Q1, ids, dry_run=dry), ids=ids, dry_run=dry)

    def promote_job(self) -> None:
        from emq_notebook import jobs

        jid = self.pick(Q1, ("schedule",))
        if jid:
            self.call("promote_job", Q1, lambda: jobs.promote_job(self.conn, Q1, jid), id=jid)

    def reprocess_job(self) -> None:
        from emq_notebook import jobs

        jid = self.pick(Q1, ("dead",) if self.rng.random() < 0.8 else EVERYWHERE)
        if jid:
            self.call("reprocess_job", Q1, lambda: jobs.reprocess_job(self.conn, Q1, jid), id=jid)

    def lane_pause(self) -> None:
        from emq_notebook import lanes

        g = self.rng.choice(GROUPS[Q1])
        if (
            g not in self.lane_resume_at
            and self.call("lane_pause", Q1, lambda: lanes.pause_lane(self.conn, Q1, g), group=g).outcome
            != "refused"
        ):
            self.lane_resume_at[g] = time.time() + self.rng.uniform(0.5, 2.0)

    def find(self) -> None:
        from emq_notebook import triage

        self.call(
            "find",
            Q1,
            lambda: triage.find(
                self.conn,
                Q1,
                state=("dead", "schedule"),
                error="*on purpose*",
                limit=50,
                budget=self.rng.choice((10, 100)),
            ),
            summary=len,
        )

    def lane_limit(self) -> None:
        from emq_notebook import lanes

        g, limit = self.rng.choice(GROUPS[Q1]), self.rng.randint(1, 3)
        self.call("lane_limit", Q1, lambda: lanes.set_limit(self.conn, Q1, g, limit), group=g, limit=limit)

    def act_on_one_job(self, verb: str) -> None:
        """One of the `ONE_JOB` verbs on a picked id."""
        from emq_notebook import jobs

        c, rng = self.conn, self.rng
        jid = self.pick(Q1, EVERYWHERE)
        if not jid:
            return
        one = {
            "remove_job": lambda: jobs.remove_job(c, Q1, jid),
            "update_data": lambda: jobs.update_data(c, Q1, jid, json.dumps({"edited": self.n})),
            "update_progress": lambda: jobs.update_progress(c, Q1, jid, rng.randint(0, 100)),
            "add_log": lambda: jobs.add_log(c, Q1, jid, f"operator note {self.n}", keep=3),
        }
        self.call(verb, Q1, one[verb], id=jid)

    def drain(self) -> None:
        """A bounded drain of the main queue; each call's running total is written
        (`DrainStep`), so a drain cut by a fault still says what its calls did."""
        from emq_notebook import admin

        budget, schedule = self.rng.choice((25, 100, 400)), self.rng.random() < 0.4
        seq = self.n + 1

        def progress(calls: int, total: int) -> None:
            self.ledger.write(DrainStep(queue=Q1, drain=seq, call=calls, total=total))

        self.call(
            "drain",
            Q1,
            lambda: admin.drain(self.conn, Q1, include_schedule=schedule, budget=budget, progress=progress),
            budget=budget,
            schedule=schedule,
        )

    def obliterate_twin(self) -> None:
        """Hold the producer off the second queue, pause it, obliterate it in bounded
        calls (unforced first now and then, which refuses while jobs are in flight),
        and on "ok" count the keys left under it (`KeysLeft`: there must be none)."""
        from emq_notebook import admin
        from emq_notebook.errors import WireError

        ctl, c = self.ctl, self.conn
        ctl.q2_hold.set()
        ctl.q2_ack.clear()
        try:
            waited = time.time() + 5
            while not ctl.q2_ack.wait(0.1):
                if not running(self.plan, ctl) or time.time() > waited:
                    return
            time.sleep(0.2)  # an enqueue cut by a fault has reached the server by now
            force = self.rng.random() < 0.7
            deadline = time.time() + 15
            while running(self.plan, ctl) and time.time() < deadline:
                self.call("pause", Q2, lambda: admin.pause(c, Q2))
                budget = self.rng.choice((20, 100, 1000))
                rec = self.call(
                    "obliterate",
                    Q2,
                    lambda f=force, b=budget: admin.obliterate(c, Q2, force=f, budget=b),
                    force=force,
                    budget=budget,
                )
                if rec.reason == "active":
                    force = True
                if rec.outcome == "maybe":
                    time.sleep(0.05)  # the server may be down: do not spin
                if rec.outcome == "ok" and rec.reply == "ok":
                    for _ in range(20):
                        try:
                            left = c.scan(f"emq:{{{Q2}}}:*")
                        except WireError:
                            time.sleep(0.05)
                            continue
                        self.ledger.write(KeysLeft(queue=Q2, count=len(left), keys=sorted(left)[:10]))
                        break
                    return
        finally:
            ctl.q2_hold.clear()


def operator(plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random, slot: int) -> None:
    op = Operator(plan, ctl, ledger, rng)
    ctl.ready.put(ledger.name)
    ctl.go.wait()
    while running(plan, ctl):
        op.step()
        time.sleep(rng.uniform(0.03, 0.15))


ROLES = {"producer": producer, "worker": worker, "housekeeper": housekeeper, "operator": operator}


def role_main(role: str, plan: Plan, ctl: Controls, slot: int, name: str) -> None:
    """One role instance, in its own process or thread; an unexpected exception is
    written down (`Crash`, a finding) before it ends the role."""
    ledger = Ledger(Path(plan.ledger_dir) / f"{name}.jsonl")
    rng = random.Random(f"{plan.seed}:{name}")
    # a refused complete is expected here (the ledger has it); keep the run's output quiet
    logging.getLogger("emq_notebook.worker").setLevel(logging.ERROR)
    try:
        ROLES[role](plan, ctl, ledger, rng, slot)
    except Killed:
        return
    except BaseException:
        ledger.write(Crash(role=name, error=traceback.format_exc()[-2000:]))
        raise
