"""frames.snapshot against the raw floor on the same rows.

The floor is what a person would write by hand: the ids from the three sets,
redis-py pipelined HGETALL in batches of 1,000, one DataFrame. Ours also types
the columns (ints, UTC timestamps) and fills state and set scores.

    python bench/snapshot.py [--jobs 100000]     # last line: snapshot/floor
"""

from __future__ import annotations

import pandas as pd
from common import BATCH, args, best, connect, fill, ratio_line, server, side_by_side

from emq_notebook import frames
from emq_notebook.keyspace import queue_key

Q = "bench"
STATES = ("pending", "schedule", "dead")


def floor(conn) -> pd.DataFrame:
    pipe = conn.client.pipeline(transaction=False)
    for s in STATES:
        pipe.zrange(queue_key(Q, s), 0, -1)
    ids = [i for members in pipe.execute() for i in members]
    rows = []
    for start in range(0, len(ids), BATCH):
        pipe = conn.client.pipeline(transaction=False)
        for job_id in ids[start : start + BATCH]:
            pipe.hgetall(queue_key(Q, "job:" + job_id))
        rows.extend(pipe.execute())
    return pd.DataFrame.from_records(rows, index=ids)


def main() -> None:
    a = args(100_000, __doc__)
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        fill(conn, Q, a.jobs, delayed=a.jobs * 3 // 10, dead=a.jobs * 3 // 10)
        frame = frames.snapshot(conn, Q, STATES)
        assert len(frame) == len(floor(conn)) == a.jobs
        ours, raw = side_by_side(
            a.repeat,
            lambda: best(lambda: frames.snapshot(conn, Q, STATES)),
            lambda: best(lambda: floor(conn)),
        )
    print(f"jobs: {a.jobs:,} (pending / schedule / dead: 40/30/30, 100-byte payloads)")
    print(f"frames.snapshot: {ours:.3f}s   floor (pipelined HGETALL into a DataFrame): {raw:.3f}s")
    print(ratio_line("snapshot/floor", ours / raw, "<= 1.25"))


if __name__ == "__main__":
    main()
