"""Rows whose fields another node made long, under bounds made small (64 KB a
`@read_rows` field, a byte budget and 64 KB whole) so a field over them stays small:
the constants, the bounds and a dead job of such a row, shared by test_frames.py's and
test_health.py's `TestHarmRowFields`."""

from emq_notebook import frames, jobs
from emq_notebook.defaults import BYTE_BUDGET

Q = "rowfields"
P = f"emq:{{{Q}}}:"
FIELD = 64 << 10  # the longest field `@read_rows` copies, here
WHOLE = BYTE_BUDGET + FIELD  # the longest field read whole (MAX_WHOLE_FIELD), here
BETWEEN = 2 * FIELD  # over the snapshot script's bound: read by itself (`@read_job`)
OVER = 2 * BYTE_BUDGET  # over WHOLE: never read


def small_bounds(monkeypatch) -> None:
    """Make the bounds above the ones frames and jobs read with."""
    # raising=False: the same test runs (and fails) where frames has no such bound
    monkeypatch.setattr(frames, "FIELD_BYTES", FIELD, raising=False)
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", WHOLE)


def longest_value(calls: list) -> int:
    """The longest value any of these `@read_rows` replies holds (a place is a number)."""
    return max((len(v) for reply in calls for row in reply for v in row if isinstance(v, str)), default=0)


def dead(conn, **fields: str) -> str:
    """A dead job whose row another node gave `fields`."""
    job_id = jobs.enqueue(conn, Q, '{"n": 1}', max_attempts=1)
    jobs.claim(conn, Q)
    jobs.fail(conn, Q, job_id, "boom")
    if fields:
        conn.client.hset(P + "job:" + job_id, mapping=fields)
    return job_id
