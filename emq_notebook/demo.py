"""A demo incident, end to end on the embedded default, and the
helper runbooks use to start from clean queues.

`python -m emq_notebook.demo` runs: a worker with a bug kills jobs, the operator
pauses, inspects the dead letters, mends a payload, reprocesses, resumes, and
retires a scratch queue with a bounded obliterate.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from . import admin, frames, jobs
from .connector import Connection, connect
from .footprint import footprint
from .worker import Worker


def fresh(conn: Connection, *queues: str) -> Connection:
    """Empty the named queues (a runbook's own), so it runs the same on a shared server."""
    for q in queues:
        if footprint(conn, q):
            admin.pause(conn, q)
            admin.obliterate_all(conn, q, force=True)
    return conn


def buggy_mailer(job_id: str, payload: str, attempts: int) -> None:
    """The incident's worker: it cannot send to an address without an @."""
    to = json.loads(payload)["to"]
    if "@" not in to:
        raise ValueError(f"SMTP 553: bad recipient {to!r}")


def main(out: Callable[[str], None] = print) -> int:
    conn = fresh(connect(), "mailers", "scratch")
    out(f"connected: {conn.label}")
    for n, to in enumerate(["ana@example.com", "bo.example.com", "cy@example.com", "di.example.com"]):
        jobs.enqueue(conn, "mailers", json.dumps({"to": to}), id=f"j_mail{n}", max_attempts=1)
    done = Worker(conn, "mailers", buggy_mailer).run(until_empty=True)
    out(f"worker processed {done} jobs")
    out(frames.counts(conn, ["mailers"]).to_string())

    admin.pause(conn, "mailers")
    out(f"paused mailers; claim answers: {jobs.claim(conn, 'mailers', 1000)}")
    dead = frames.snapshot(conn, "mailers", states="dead")
    out(dead[["last_error", "payload"]].to_string())
    for job_id, row in dead.iterrows():
        mended = json.loads(row.payload)
        mended["to"] = mended["to"].replace(".example", "@example", 1)
        jobs.update_data(conn, "mailers", str(job_id), json.dumps(mended))
    out(f"reprocessed {admin.reprocess_dead(conn, 'mailers')} dead jobs")
    try:
        jobs.reprocess_job(conn, "mailers", "j_mail0")
    except Exception as refusal:  # a refusal is an answer: show it
        out(str(refusal))
    admin.resume(conn, "mailers")
    Worker(conn, "mailers", buggy_mailer).run(until_empty=True)
    out(frames.counts(conn, ["mailers"]).to_string())

    for _ in range(2500):
        jobs.enqueue(conn, "scratch", "{}")
    admin.pause(conn, "scratch")
    calls = admin.obliterate_all(conn, "scratch",
                                 progress=lambda c, left: out(f"  obliterate call {c}: {left} jobs left"))
    out(f"obliterated scratch in {calls} bounded calls; footprint now {len(footprint(conn, 'scratch'))} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main())
