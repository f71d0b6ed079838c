"""The runner: `Soak` starts the server, the proxy and every role, injects the
faults on their schedule while the checker reads snapshots, then stops it all and
reconciles the ledgers with the final state."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .faults import Faults, Proxy, Server
from .invariants import Checker
from .ledger import Crash, Go, Ledger, Straggler, read_ledgers
from .reconcile import Report, reconcile
from .roles import Controls, Plan, role_main


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
            self.ctx.set_forkserver_preload(["emq_notebook", role_main.__module__])
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

    def kill_busy_worker(self) -> tuple[str, int | None, float] | None:
        """SIGKILL a worker in its handler (a thread is stopped by an exception from its
        handler) and start its slot again; None when no worker is in its handler."""
        busy = [s for s in range(self.n_workers) if self.ctl.busy[s].value]
        if not busy:
            return None
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
        self.spawn("worker", slot)
        return name, getattr(proc, "pid", None), t

    # the run
    def run(self) -> Report:
        start = time.time()
        end = start + self.seconds
        self.ctl.go.set()
        self.ledger.write(Go())
        checker = Checker(self.client)
        faults = Faults(
            self.backend, self.rng, self.ledger, self.client, self.kill_busy_worker, self.server, self.proxy
        )
        every = faults.schedule() if self.faults else {}
        due = {k: start + self.rng.uniform(*v) / (2 if k == "server_kill" else 1) for k, v in every.items()}
        next_check = start + self.check_every
        while time.time() < end:
            t = time.time()
            for kind, at in due.items():
                if t >= at and t < end - 1.5:
                    hit = faults.inject(kind)
                    due[kind] = time.time() + (self.rng.uniform(*every[kind]) if hit else 0.2)
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
            self.ledger.write(Crash(role=name, error=f"ended early (exit code {code})"))
            kind = name.split(".")[0]
            role = kind.rstrip("0123456789")
            slot = int(kind[len("worker") :]) if role == "worker" else 0
            self.spawn(role, slot)

    def stop_roles(self) -> None:
        for name, proc in self.roles.items():
            proc.join(15)
            if proc.is_alive() and not isinstance(proc, threading.Thread):
                self.ledger.write(Straggler(role=name))
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(5)


def run_soak(backend: str, seconds: float, workdir: Path, **kw: Any) -> Report:
    """One soak of `seconds` on `backend`, everything started and stopped here."""
    with Soak(backend, seconds, workdir, **kw) as soak:
        return soak.run()
