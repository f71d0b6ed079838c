"""What the audit trail costs an operator verb: the verb as declared (recorded) against
the same function bare (`fn.__wrapped__`), side by side on one server, alternating the
two sides in one run. pause and resume never refuse: their transition and their entry
go in one MULTI/EXEC (one round trip). A verb that may refuse writes its entry after
the reply (`XADD emq:audit:{q} MAXLEN ~`, a second round trip): its outcome is not
known before, and a `done` is never written for a call that refused.

    python bench/audit_cost.py [--jobs 2000]    # last line: the worst single-verb ratio

Three verbs, as an operator runs them:
- pause then resume (a pair of one-call verbs that never refuse): two entries a pair,
  each in its transition's MULTI/EXEC;
- a single-job remove (`jobs.remove_job`, one call, may refuse): one entry;
- a bulk reprocess of 500 dead jobs (`admin.reprocess_jobs`, budget 100: five calls):
  ONE entry a call of the verb, holding the first 100 ids and a digest of all.

Each side runs in chunks of `CHUNK` calls, ABBA, so a burst of load on this shared
machine falls on both; the figure of a side is its median chunk. The record is what
a surface adds after the verb; the verb's own work is the same on both sides.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from statistics import median_high as median

from common import args, connect, fill, ratio_line, server

from emq_notebook import admin, audit, jobs
from emq_notebook.keyspace import audit_key, queue_key

CHUNK = 50
BULK = 500
BULK_BUDGET = 100

# the verbs as declared (recorded), and bare (the function the recorder wraps)
pause, bare_pause = admin.pause, admin.pause.__wrapped__
resume, bare_resume = admin.resume, admin.resume.__wrapped__
remove_job, bare_remove_job = jobs.remove_job, jobs.remove_job.__wrapped__
reprocess_jobs, bare_reprocess_jobs = admin.reprocess_jobs, admin.reprocess_jobs.__wrapped__


def timed(calls: Callable[[int], None], n: int) -> float:
    t = time.perf_counter()
    calls(n)
    return (time.perf_counter() - t) / n


def alternate(with_record: Callable[[int], None], bare: Callable[[int], None], n: int) -> tuple[float, float]:
    """`n` calls a side in chunks of `CHUNK`, ABBA; the median seconds a call of each side."""
    sides: list[list[float]] = [[], []]
    for i in range(max(1, n // CHUNK) * 2):
        side = (0, 1, 1, 0)[i % 4]
        sides[side].append(timed((with_record, bare)[side], CHUNK))
    return median(sides[0]), median(sides[1])


def pauses(conn, pause_fn, resume_fn) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            pause_fn(conn, "ops")
            resume_fn(conn, "ops")

    return run


def removes(conn, remove_fn, ids: list[str]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            remove_fn(conn, "ops", ids.pop())

    return run


def bulk(conn, reprocess_fn) -> tuple[float, int]:
    """One bulk reprocess of `BULK` dead jobs; (seconds, entries written)."""
    conn.client.delete(audit_key("bulk"))
    for key in conn.scan("emq:{bulk}:*"):
        conn.client.delete(key)
    fill(conn, "bulk", BULK, dead=BULK)
    ids = conn.client.zrange(queue_key("bulk", "dead"), 0, -1)
    t = time.perf_counter()
    words = reprocess_fn(conn, "bulk", ids, budget=BULK_BUDGET)
    took = time.perf_counter() - t
    assert sum(w == "reprocessed" for w in words.values()) == BULK
    return took, conn.client.xlen(audit_key("bulk"))


def main() -> None:
    a = args(2000, __doc__, repeat=3)
    with server() as srv:
        conn = connect(srv)
        audit.name_client(conn)
        ratios: dict[str, list[float]] = {"pause/resume": [], "remove one job": []}
        figures: dict[str, list[tuple[float, float]]] = {k: [] for k in ratios}
        for _ in range(a.repeat):
            conn.client.flushall()
            w, b = alternate(pauses(conn, pause, resume), pauses(conn, bare_pause, bare_resume), a.jobs)
            figures["pause/resume"].append((w, b))
            assert conn.client.xlen(audit_key("ops")) > 0
            conn.client.flushall()
            fill(conn, "ops", 4 * a.jobs + 4 * CHUNK)
            ids = conn.client.zrange(queue_key("ops", "pending"), 0, -1)
            w, b = alternate(removes(conn, remove_job, ids), removes(conn, bare_remove_job, ids), a.jobs)
            figures["remove one job"].append((w, b))
        bulk_runs = []
        for _ in range(a.repeat):
            (w, entries), (b, none) = bulk(conn, reprocess_jobs), bulk(conn, bare_reprocess_jobs)
            assert (entries, none) == (1, 0)
            bulk_runs.append((w, b))
    print(
        f"calls: {a.jobs:,} a side per verb, in chunks of {CHUNK} alternating ABBA, {a.repeat} runs; "
        "medians over the chunks (us a call, with the record / bare)"
    )
    worst = 0.0
    for name, runs in figures.items():
        per_run = [w / b for w, b in runs]
        w, b = median([w for w, _ in runs]), median([b for _, b in runs])
        worst = max(worst, w / b)
        print(
            f"{name}: {w * 1e6:.0f} / {b * 1e6:.0f} us, ratio {w / b:.2f} "
            f"(runs {', '.join(f'{r:.3f}' for r in per_run)})"
        )
    w, b = min(r[0] for r in bulk_runs), min(r[1] for r in bulk_runs)
    print(
        f"bulk reprocess of {BULK} dead jobs ({BULK // BULK_BUDGET} calls, one entry): "
        f"{w * 1e3:.1f} / {b * 1e3:.1f} ms, ratio {w / b:.2f}"
    )
    print(ratio_line("with/without seconds per single verb (worst)", worst, "<= 1.10"))


if __name__ == "__main__":
    main()
