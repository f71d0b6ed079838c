"""`@read_job` on an ordinary job row, listed as it is (HKEYS at once) against measured
first (one MEMORY USAGE, so a row of long field names is never listed), side by side on
a private Valkey: the server's own time a call (INFO commandstats, usec_per_call of the
EVALSHA), alternating rounds so a noisy machine weighs on both alike.

    python bench/read_job_names.py [--repeat 5]
    # last line: measured/listed, the usec a call of each
"""

from __future__ import annotations

import argparse

import redis
from common import server

import emq_notebook as emq
from emq_notebook import jobs, scripts
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.keyspace import base

Q = "bench"
CALLS = 20_000


def per_call(r: redis.Redis, sha: str, job_id: str) -> float:
    r.config_resetstat()
    args = [base(Q), job_id, jobs.ROW_FIELDS, BYTE_BUDGET, BYTE_BUDGET]
    pipe = r.pipeline(transaction=False)
    for i in range(CALLS):
        pipe.evalsha(sha, 1, *args)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return float(r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    with server() as srv:
        conn = emq.connect(f"redis://127.0.0.1:{srv.port}/0")
        job_id = jobs.enqueue(conn, Q, '{"order": 1234, "sku": "A-17"}', max_attempts=3)
        jobs.claim(conn, Q)
        r = redis.Redis(port=srv.port)
        measured = scripts.source("read_job")
        listed = measured.replace("count <= most and row_within(row, count, bytes)", "count <= most")
        assert listed != measured
        shas = {"listed": r.script_load(listed), "measured": r.script_load(measured)}
        assert r.evalsha(shas["listed"], 1, base(Q), job_id, 1000, BYTE_BUDGET, BYTE_BUDGET) == r.evalsha(
            shas["measured"], 1, base(Q), job_id, 1000, BYTE_BUDGET, BYTE_BUDGET
        )
        took: dict[str, list[float]] = {k: [] for k in shas}
        for _ in range(a.repeat):
            for k, sha in shas.items():
                took[k].append(per_call(r, sha, job_id))
        best = {k: min(v) for k, v in took.items()}
        print(f"row of {r.hlen(base(Q) + 'job:' + job_id)} fields; usec a call, each round:", took)
        print(
            f"measured/listed x{best['measured'] / best['listed']:.2f}: {best['listed']:.1f} us listed, "
            f"{best['measured']:.1f} us measured"
        )


if __name__ == "__main__":
    main()
