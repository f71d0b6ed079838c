"""Dead rows written straight, as the reads' harm cases stage them: long payloads and
errors, ids naming another job's `:logs` list."""

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
