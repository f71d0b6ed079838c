"""Dead rows written straight, as the reads' harm cases stage them: long payloads and
errors, ids naming another job's `:logs` list."""

from collections.abc import Iterator
from typing import Any

import pytest
from dead_letters import long_ids, written_rows

Q = "reads"
P = f"emq:{{{Q}}}:"
BIG = 3 * 2**20  # over a call's byte budget: a script never reads it


def dead_row(conn, job_id: str, error: str | None = "boom", body: str = "{}", score: int = 1) -> None:
    """A dead row as @fail leaves it, written straight (ids outside the gate too)."""
    written_rows(conn, Q, "dead", [job_id], first=score, last_error=error, payload=body)


def long_dead(conn, n: int, size: int) -> list[str]:
    """`n` dead rows whose ids (another node's) are `size` characters long, in order."""
    error = "upstream timed out after {} ms".format
    return written_rows(conn, Q, "dead", long_ids(n, size, "i"), first=0, last_error=error)


@pytest.fixture(params=(5, 200), ids=("small set", "large set"))
def dead_with_a_logs_id(harm, request) -> Iterator[tuple[Any, Any, list[str]]]:
    """Dead holding `j_0:logs` (job j_0's logs list: its "row" key is a list), ids other
    nodes wrote (`ord:17`, `a b`) and ordinary rows: a small set (a listpack: rows read
    by HMGET) or a large one (rows read by SORT)."""
    conn, srv = harm
    ordinary = [f"j_{i}" for i in range(request.param)]
    for k, job_id in enumerate(ordinary):
        dead_row(conn, job_id, error=f"upstream 10.0.0.{k % 250}:6379 timed out", score=10 + k)
    conn.client.rpush(P + "job:j_0:logs", "one", "two")
    conn.client.zadd(P + "dead", {"j_0:logs": 1})
    dead_row(conn, "ord:17", error="written by another node", score=2)
    dead_row(conn, "a b", error="written by another node", score=3)
    yield conn, srv, ["ord:17", "a b", *ordinary]
