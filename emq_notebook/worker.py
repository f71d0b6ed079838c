"""A small worker loop: claim, run the handler, complete or fail.

Runbooks and tests use it to make real incidents (a handler that raises).
Between claims it does the queue's housekeeping: due scheduled jobs are
promoted, expired leases put back, due repeatables produced.
"""

from __future__ import annotations

import time
from typing import Callable

from . import jobs, lanes, repeat
from .connector import Connection

Handler = Callable[[str, str, int], object]


class Worker:
    """`Worker(conn, q, handler).run(max_jobs=None, until_empty=False)`.

    `handler(id, payload, attempts)` returns on success; an exception fails the
    job with its text as `last_error`. `grouped=True` claims from the lanes.
    """

    def __init__(self, conn: Connection, q: str, handler: Handler, *,
                 lease_ms: int = 30_000, grouped: bool = False, idle_sleep: float = 0.05):
        self.conn, self.q, self.handler = conn, q, handler
        self.lease_ms, self.grouped, self.idle_sleep = lease_ms, grouped, idle_sleep
        self.completed = 0
        self.failed = 0

    def housekeeping(self) -> None:
        jobs.promote(self.conn, self.q)
        jobs.expire_leases(self.conn, self.q)
        repeat.tick(self.conn, self.q, max_jobs=10)

    def claim(self) -> jobs.Claimed | None:
        claim = lanes.claim if self.grouped else jobs.claim
        return claim(self.conn, self.q, self.lease_ms)

    def run_one(self) -> bool:
        """Claim and process one job; False when there was nothing to claim."""
        got = self.claim()
        if got is None:
            return False
        job_id, payload, attempts = got
        try:
            self.handler(job_id, payload, attempts)
        except Exception as exc:  # the handler's failure is the job's failure
            jobs.fail(self.conn, self.q, job_id, f"{type(exc).__name__}: {exc}")
            self.failed += 1
        else:
            jobs.complete(self.conn, self.q, job_id)
            self.completed += 1
        return True

    def run(self, max_jobs: int | None = None, until_empty: bool = False,
            timeout: float | None = None) -> int:
        """Process jobs; stop after `max_jobs`, when nothing is claimable
        (`until_empty`), or after `timeout` seconds. Answers the jobs processed."""
        done = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        while max_jobs is None or done < max_jobs:
            if deadline is not None and time.monotonic() > deadline:
                break
            self.housekeeping()
            if self.run_one():
                done += 1
            elif until_empty:
                break
            else:
                time.sleep(self.idle_sleep)
        return done
