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


def written_dead(conn, q: str, ids: list[str]) -> None:
    """Dead rows of queue `q` as another node writes them (the row, then the dead set)."""
    prefix = f"emq:{{{q}}}:"
    for i, job_id in enumerate(ids):
        conn.client.hset(
            prefix + "job:" + job_id,
            mapping={"payload": "{}", "attempts": "1", "failures": "1", "max_attempts": "1"}
            | {"state": "dead", "last_error": "boom"},
        )
        conn.client.zadd(prefix + "dead", {job_id: 1000 + i})
