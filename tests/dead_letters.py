"""Dead letters made the way a worker makes them: enqueued with one attempt, claimed,
failed."""

from __future__ import annotations

from emq_notebook import jobs, lanes


def dead_letter(
    conn, q: str, job_id: str, error: str, *, payload: str = "{}", group: str | None = None
) -> str:
    """Job `job_id` of queue `q` enqueued with one attempt (in lane `group`, if given),
    claimed and failed with `error`: dead, scored by its time of death. Answers the id."""
    jobs.enqueue(conn, q, payload, id=job_id, max_attempts=1, group=group)
    got = (lanes.claim if group else jobs.claim)(conn, q, 60_000)
    assert got.id == job_id
    jobs.fail(conn, q, job_id, error)
    return job_id
