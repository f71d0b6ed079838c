"""The demos: an incident end to end on the embedded default, and the guard that
lets a demo write only to queues it made itself.

`python -m emq_notebook.demo` tells as it goes: a worker with a bug kills two of four
jobs; the operator pauses, reads the dead letters, mends their payloads, reprocesses
them, resumes, and retires a scratch queue with a bounded obliterate.

Before its first write a demo calls `fresh(conn, *queues)`: a queue a demo makes is
marked in its meta hash (`created_by` = `emq_notebook.demo`, the last key an obliterate
deletes), and `fresh` refuses (`QueueInUse`, nothing written) a queue that holds a key
and no mark: somebody's real queue. `stage_dashboard(conn)` stages the dashboard
page's queues, on an empty server only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from . import admin, frames, jobs, moves, repeat
from .connector import Connection, connect
from .errors import QueueInUse, UsageProblem
from .footprint import footprint
from .keyspace import base, check_name, queue_key
from .worker import Worker

# the mark a demo leaves in the meta hash of a queue it made
MARK_FIELD, MARK = "created_by", "emq_notebook.demo"


def made_by_a_demo(conn: Connection, q: str) -> bool:
    """True when queue `q`'s meta carries the demo's mark (one HGET)."""
    return conn.command("HGET", queue_key(q, "meta"), MARK_FIELD) == MARK


def check_unused(conn: Connection, *queues: str) -> dict[str, int]:
    """{queue: keys it holds now} for queues that are empty or a demo's own; raises
    `QueueInUse` (having written nothing) for the first that holds keys and no mark."""
    held = {}
    for q in queues:
        check_name(q)
        keys = conn.scan(base(q) + "*")
        if keys and not made_by_a_demo(conn, q):
            raise QueueInUse(
                f"{q!r} on {conn.label} already holds {len(keys)} keys under {base(q)} and no "
                "demo made it: a demo writes only to queues it made itself, so nothing was "
                "written. Point EMQ_URL at an empty server, or unset it for the embedded default"
            )
        held[q] = len(keys)
    return held


def fresh(conn: Connection, *queues: str) -> Connection:
    """Give a demo empty queues of its own: check every name first (`QueueInUse` for a
    queue no demo made, before any write), empty the ones an earlier run made, mark each."""
    held = check_unused(conn, *queues)
    for q, keys in held.items():
        if keys:
            admin.pause(conn, q)
            admin.obliterate_all(conn, q, force=True)
        conn.command("HSET", queue_key(q, "meta"), MARK_FIELD, MARK)
    return conn


def buggy_mailer(job_id: str, payload: str, attempts: int) -> None:
    """The incident's worker: it cannot send to an address without an @."""
    to = json.loads(payload)["to"]
    if "@" not in to:
        raise ValueError(f"SMTP 553: bad recipient {to!r}")


RECIPIENTS = ["ana@example.com", "bo.example.com", "cy@example.com", "di.example.com"]


def main(out: Callable[[str], None] = print) -> int:
    """The incident, told as it happens: what was queued, how many failed and why, the
    payloads mended, the retry, and why a delivered job cannot be reprocessed."""
    conn = fresh(connect(), "mailers", "scratch")
    inside = (
        " (a server inside this process, gone when it exits)" if conn.label.startswith("embedded") else ""
    )
    out(f"connected: {conn.label}{inside}")
    for n, to in enumerate(RECIPIENTS):
        jobs.enqueue(conn, "mailers", json.dumps({"to": to}), id=f"j_mail{n}", max_attempts=1)
    out(f"queued {len(RECIPIENTS)} mails on mailers, one attempt each: j_mail0 … j_mail{len(RECIPIENTS) - 1}")
    out("the mailer has a bug: it cannot send to an address without an @")
    done = Worker(conn, "mailers", buggy_mailer).run(until_empty=True)
    failed = int(conn.command("ZCARD", queue_key("mailers", "dead")))
    out(f"the worker took {done} jobs: {done - failed} delivered, {failed} failed and are dead")
    out(frames.counts(conn, ["mailers"]).to_string())

    admin.pause(conn, "mailers")
    claimed = jobs.claim(conn, "mailers", 1000)
    out(f"paused mailers, so nothing runs while we look; a claim now answers {claimed}")
    dead = frames.snapshot(conn, "mailers", states="dead")
    out("the dead letters, with the error each died of:")
    out(dead[["last_error", "payload"]].to_string())
    for job_id, row in dead.iterrows():
        mended = json.loads(row.payload)
        was, mended["to"] = mended["to"], mended["to"].replace(".example", "@example", 1)
        jobs.update_data(conn, "mailers", str(job_id), json.dumps(mended))
        out(f"mended the payload of {job_id}: {was} -> {mended['to']}")
    out(f"reprocessed {moves.reprocess_dead(conn, 'mailers')} dead jobs: back in pending, waiting for resume")
    out("j_mail0 was delivered: a completed job leaves no row, so reprocessing it is refused as gone:")
    try:
        jobs.reprocess_job(conn, "mailers", "j_mail0")
    except Exception as refusal:  # a refusal is an answer: show it
        out(f"  {refusal}")
    admin.resume(conn, "mailers")
    again = Worker(conn, "mailers", buggy_mailer).run(until_empty=True)
    left = int(conn.command("ZCARD", queue_key("mailers", "dead")))
    out(f"resumed mailers: the worker took {again} jobs, {again - left} delivered, {left} dead")
    out(frames.counts(conn, ["mailers"]).to_string())

    for _ in range(2500):
        jobs.enqueue(conn, "scratch", "{}")
    admin.pause(conn, "scratch")
    out("retiring scratch (2,500 jobs): paused, then obliterated in bounded calls of 1,000")
    calls = admin.obliterate_all(
        conn, "scratch", progress=lambda c, left: out(f"  obliterate call {c}: {left} jobs left")
    )
    out(f"obliterated scratch in {calls} bounded calls; footprint now {len(footprint(conn, 'scratch'))} keys")
    return 0


# the dashboard page's queues (`stage_dashboard`)
DASHBOARD_QUEUES = ("mailers", "reports", "thumbnails")


def stage_dashboard(conn: Connection) -> list[str]:
    """A few queues with something to look at, for the dashboard's demo page; answers
    their names. Writes only to an EMPTY server (no `emq:` queue on it) and refuses
    with `UsageProblem` otherwise, so pointed at a live server it never adds a job to
    anybody's queue. Stages, through the real verbs: `mailers` (a backlog, jobs in
    flight, dead letters under two errors), `reports` (paused, with a lane and a
    repeatable) and `thumbnails` (a scheduled retry and a finished run's metrics)."""
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
    return list(DASHBOARD_QUEUES)


if __name__ == "__main__":
    sys.exit(main())
