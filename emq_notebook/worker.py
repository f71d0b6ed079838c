"""A small worker loop: claim, run the handler, complete or fail.

Runbooks and tests use it to make real incidents (a handler that raises).
Between claims it does the queue's housekeeping: due scheduled jobs are
promoted, expired leases put back, due repeatables produced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from . import jobs, repeat
from .connector import Connection
from .errors import BadRow, Gone, NotActive, NotOwner, WireError

Handler = Callable[[str, str, int], object]
log = logging.getLogger(__name__)
# what a finished job can meet after its handler ran: its lease was lost (another
# claim owns it, or the operator removed or moved it), or a row nobody can read
LOST = (NotActive, NotOwner, Gone, BadRow)
# the clock a claim's refusal is logged by (a test sets its own)
clock: Callable[[], float] = time.monotonic


class Worker:
    """`Worker(conn, q, handler).run(max_jobs=None, until_empty=False)`.

    `handler(id, payload, attempts)` returns on success; an exception fails the
    job with its text as `last_error`. `grouped=True` claims from the lanes.

    A refused complete or fail (`NotActive`, `NotOwner`, `Gone`, `BadRow`: the lease
    was lost or the row changed under the worker) is logged and counted in `lost`; a
    claim refused `BadRow` is counted in `bad_rows` and the worker idles. The loop goes
    on. The same refusal at every poll is logged when it starts, at most once every
    `REFUSAL_LOG_S` while it lasts, and when it ends.

    Ghosts (members whose row is gone) never starve the jobs behind them: each claim
    drops a bounded number and then answers "more" (`jobs.MORE`), and `run` claims
    again at once instead of sleeping `idle_sleep` (a paused queue answers "empty",
    so a worker never spins on a backlog no claim serves).

    A wire fault (a restart, a cut connection) is logged and counted in `wire_faults`;
    the loop waits (0.05 s, doubling up to `MAX_BACKOFF_S`) and tries again. A job whose
    complete or fail met the fault comes back when its lease expires.
    """

    MAX_BACKOFF_S = 2.0
    # a claim's refusal that goes on is logged again at most once this many seconds
    REFUSAL_LOG_S = 60.0

    def __init__(
        self,
        conn: Connection,
        q: str,
        handler: Handler,
        *,
        lease_ms: int = 30_000,
        grouped: bool = False,
        idle_sleep: float = 0.05,
    ):
        self.conn, self.q, self.handler = conn, q, handler
        self.lease_ms, self.grouped, self.idle_sleep = lease_ms, grouped, idle_sleep
        self.completed = 0
        self.failed = 0
        self.lost = 0
        self.bad_rows = 0
        self.wire_faults = 0
        # the last claim answered nothing but stopped at its bound: claim again at once
        self.more = False
        # the claim's refusal going on (its note), when it was last logged, and the
        # claims refused so since it started
        self._refusal: str | None = None
        self._refusal_logged = 0.0
        self._refusals = 0

    def housekeeping(self) -> None:
        jobs.promote(self.conn, self.q)
        jobs.expire_leases(self.conn, self.q)
        repeat.tick(self.conn, self.q, max_jobs=10)

    def claim(self) -> jobs.Claimed | None:
        """One claim (`jobs.claim_calls`: the flat or the grouped claim, as
        `jobs.claim` and `lanes.claim` send it); None with `more` set when it stopped
        at its bound with ghosts or lanes left to look at."""
        name, keys = jobs.claim_transition(self.q, self.grouped)
        got = jobs.claim_calls(self.conn, self.q, name, keys, jobs.check_lease(self.lease_ms))
        self.more = got == jobs.MORE
        return None if self.more or got is None else got  # type: ignore[return-value]

    def run_one(self) -> bool:
        """Claim and process one job; False when there was nothing to claim (with
        `more` set when the claim stopped at its bound: call again at once)."""
        self.more = False
        try:
            got = self.claim()
        except BadRow as exc:
            self.bad_rows += 1
            self._claim_refused(exc)
            return False
        self._claim_served()
        if got is None:
            return False
        job_id, payload, attempts = got
        try:
            self.handler(job_id, payload, attempts)
        except Exception as exc:  # the handler's failure is the job's failure
            if self._finish(job_id, "fail", f"{type(exc).__name__}: {exc}"):
                self.failed += 1
        else:
            if self._finish(job_id, "complete"):
                self.completed += 1
        return True

    def _claim_refused(self, exc: BadRow) -> None:
        """Log a claim refused `BadRow`: when the refusal starts, then at most once every
        `REFUSAL_LOG_S` while the same one (its note: field and id) goes on."""
        said, now = exc.note or str(exc), clock()
        if said != self._refusal:
            self._claim_served()
            self._refusal, self._refusal_logged, self._refusals = said, now, 1
            log.warning(
                "queue %s: a claim refused a bad row, left in place: %s (said again at most "
                "once every %.0f s while it lasts)",
                self.q,
                exc,
                self.REFUSAL_LOG_S,
            )
            return
        self._refusals += 1
        if now - self._refusal_logged >= self.REFUSAL_LOG_S:
            self._refusal_logged = now
            log.warning(
                "queue %s: the claim is still refused, the bad row left in place (%d claims "
                "refused since it started): %s",
                self.q,
                self._refusals,
                exc,
            )

    def _claim_served(self) -> None:
        """A claim not refused `BadRow` (or refused another way): a refusal that went on
        is over, and logged so once."""
        if self._refusal is None:
            return
        log.warning(
            "queue %s: the claim is no longer refused (%s), after %d claims refused so",
            self.q,
            self._refusal,
            self._refusals,
        )
        self._refusal = None

    def _finish(self, job_id: str, how: str, error: str = "") -> bool:
        """Complete or fail the job; False (logged, counted in `lost`) when refused."""
        try:
            if how == "fail":
                jobs.fail(self.conn, self.q, job_id, error)
            else:
                jobs.complete(self.conn, self.q, job_id)
        except LOST as exc:
            self.lost += 1
            log.warning("queue %s: %s of %s refused, the worker goes on: %s", self.q, how, job_id, exc)
            return False
        return True

    def run(
        self, max_jobs: int | None = None, until_empty: bool = False, timeout: float | None = None
    ) -> int:
        """Process jobs; stop after `max_jobs`, when nothing is claimable
        (`until_empty`), or after `timeout` seconds. Answers the jobs processed."""
        done = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = 0.0
        while max_jobs is None or done < max_jobs:
            if deadline is not None and time.monotonic() > deadline:
                break
            try:
                self.housekeeping()
                ran = self.run_one()
            except WireError as exc:
                self.wire_faults += 1
                backoff = min(self.MAX_BACKOFF_S, backoff * 2 or self.idle_sleep)
                log.warning("queue %s: %s; the worker tries again in %.2f s", self.q, exc, backoff)
                time.sleep(backoff)
                continue
            backoff = 0.0
            if ran:
                done += 1
            elif self.more:
                continue
            elif until_empty:
                break
            else:
                time.sleep(self.idle_sleep)
        return done
