"""Dead letters made the way a worker makes them: enqueued with one attempt, claimed,
failed."""

from __future__ import annotations

from typing import Any

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


def row_as_written(state: str) -> dict[str, str]:
    """The fields of a row in `state` as another node writes it: a dead one with its
    failure and `last_error`, any other not tried yet."""
    if state == "dead":
        return {"payload": "{}", "attempts": "1", "failures": "1", "max_attempts": "1"} | {
            "state": "dead",
            "last_error": "boom",
        }
    return {"payload": "{}", "attempts": "0", "state": state}


def written_rows(conn, q: str, state: str, ids: list[str], *, first: int = 1, **fields: Any) -> list[str]:
    """Rows of queue `q` in set `state` as another node writes them (the row, then the
    set, ids outside the gate too), scored `first`, `first + 1`, ...: `row_as_written`'s
    fields, `fields` over them (None leaves one out; a function of the row's place
    gives each row its own). Answers the ids."""
    prefix = f"emq:{{{q}}}:"
    row = {k: v for k, v in (row_as_written(state) | fields).items() if v is not None}
    pipe = conn.client.pipeline(transaction=False)
    for i, job_id in enumerate(ids):
        pipe.hset(prefix + "job:" + job_id, mapping={k: v(i) if callable(v) else v for k, v in row.items()})
        pipe.zadd(prefix + state, {job_id: first + i})
    pipe.execute()
    return ids


def hundred_thousand_dead(conn, q: str, n: int = 100_000) -> list[str]:
    """`n` dead rows `d000000`... another node wrote, died in id order one ms apart, with
    attempts 1 to 7 by place: the stage of the dead-letter paging tests. Answers the ids."""
    ids = [f"d{i:06d}" for i in range(n)]
    for at in range(0, n, 10_000):
        written_rows(
            conn,
            q,
            "dead",
            ids[at : at + 10_000],
            first=1_700_000_000_000 + at,
            attempts=lambda i, at=at: str(1 + (at + i) % 7),
        )
    return ids


def written_dead(conn, q: str, ids: list[str]) -> None:
    """Dead rows of queue `q` as another node writes them, scored from 1000."""
    written_rows(conn, q, "dead", ids, first=1000)


def long_ids(n: int, size: int, fill: str = "L") -> list[str]:
    """`n` ids another node made `size` characters long, in order (`0000LLL...`)."""
    return [f"{i:04d}" + fill * (size - 4) for i in range(n)]
