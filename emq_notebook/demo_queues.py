"""A few queues with something to look at, for the dashboard's demo page.

`stage(conn)` writes only to an EMPTY server (no `emq:` queue on it) and refuses
with `UsageProblem` otherwise, so pointed at a live server it never adds a job to
anybody's queue. It stages, through the real verbs: `mailers` (a backlog, jobs in
flight, dead letters under two errors), `reports` (paused, with a lane and a
repeatable) and `thumbnails` (a scheduled retry and a finished run's metrics).
"""

from __future__ import annotations

import json

from . import admin, frames, jobs, repeat
from .connector import Connection
from .errors import UsageProblem

QUEUES = ("mailers", "reports", "thumbnails")


def stage(conn: Connection) -> list[str]:
    """Stage the demo queues on an empty server; answers their names."""
    # walked afresh: the staging's promise (an empty server) is not taken from memory
    found = frames.queues(conn, rescan=True)
    if found:
        raise UsageProblem(
            f"not staging the demo: {conn.label} already holds {len(found)} queues "
            f"({', '.join(found[:5])}{' …' if len(found) > 5 else ''})"
        )
    for i in range(1_240):
        jobs.enqueue(
            conn,
            "mailers",
            json.dumps({"to": f"user{i}@example.com", "template": "welcome"}),
            id=f"j_mail_{i:04d}",
            max_attempts=1,
        )
    errors = ["SMTP 550: mailbox unavailable", "SMTP 553: bad recipient 'ops'"]
    for n in range(36):
        job = jobs.claim(conn, "mailers", 60_000)
        assert job is not None
        if n < 24:
            jobs.fail(conn, "mailers", job[0], errors[n % 3 == 2])
        elif n < 30:
            jobs.complete(conn, "mailers", job[0])
    # the other six stay in flight
    for i in range(40):
        jobs.enqueue(conn, "reports", json.dumps({"report": i}), group=("acme", "globex")[i % 2])
    repeat.register(conn, "reports", "nightly", 86_400_000, '{"report": "nightly"}')
    admin.pause(conn, "reports")
    for i in range(12):
        jobs.enqueue(conn, "thumbnails", json.dumps({"image": f"img{i}.png"}), delay_ms=3_600_000)
    for _ in range(3):
        jobs.enqueue(conn, "thumbnails", '{"image": "done.png"}')
        job = jobs.claim(conn, "thumbnails", 60_000)
        assert job is not None
        jobs.complete(conn, "thumbnails", job[0])
    return list(QUEUES)
