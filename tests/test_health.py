"""frames.latency and frames.health on both backends: the percentiles against the
exact ones computed from the same runs, one staged queue per verdict, and a
health check that reads no row."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
import redis

from emq_notebook import Worker, admin, frames, health, histogram, jobs
from emq_notebook.health import HEALTH_COLUMNS, LATENCY_COLUMNS

Q = "lat"
P = f"emq:{{{Q}}}:"
MIN = 60_000


def exact(values: list[int], p: float) -> int:
    """The nearest-rank percentile: the ceil(p * n)-th smallest value."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) - 1e-9)) - 1]


def close(estimate: float, truth: int) -> bool:
    """Within 10% of the exact value (a whole number of ms: 0 must read as 0)."""
    return abs(estimate - truth) <= 0.10 * truth


@pytest.mark.parametrize("executor", ("script", "function"))
def test_percentiles_are_within_ten_percent_of_the_exact_ones(conn, connect_as, executor):
    """A worker whose handler sleeps a known 20-200 ms and then raises: with one
    attempt each job dies, and its row keeps the exact times (created_at,
    claimed_at, and the death time as the dead set's score), so the exact wait and
    run of every job are known and compared minute by minute."""
    work = connect_as(executor)
    rng = random.Random(7)
    sleeps = {f"j_{i:03d}": rng.uniform(0.02, 0.2) for i in range(24)}
    for job_id in sleeps:
        jobs.enqueue(conn, Q, "{}", id=job_id, max_attempts=1)

    def handler(job_id, payload, attempts):
        import time

        time.sleep(sleeps[job_id])
        raise RuntimeError("planned")

    assert Worker(work, Q, handler).run(until_empty=True) == len(sleeps)
    waits: dict[int, list[int]] = {}
    runs: dict[int, list[int]] = {}
    for job_id, died in conn.client.zrange(P + "dead", 0, -1, withscores=True):
        row = conn.client.hgetall(P + "job:" + job_id)
        claimed = int(row["claimed_at"])
        waits.setdefault(claimed // MIN, []).append(claimed - int(row["created_at"]))
        runs.setdefault(int(died) // MIN, []).append(int(died) - claimed)
    assert sum(map(len, runs.values())) == len(sleeps)
    lat = frames.latency(conn, Q)
    assert list(lat.columns) == LATENCY_COLUMNS and isinstance(lat.index, pd.DatetimeIndex)
    for minute, row in lat.iterrows():
        m = int(minute.timestamp()) // 60
        assert row["n"] == len(waits.get(m, []))
        for kind, exacts in (("wait", waits.get(m)), ("run", runs.get(m))):
            for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                estimate = row[f"{kind}_{name}"]
                if not exacts:
                    assert math.isnan(estimate)
                    continue
                assert close(estimate, exact(exacts, p)), (kind, name, estimate, sorted(exacts))
    # the run times are the handler's sleeps (a run is at least its sleep)
    every_run = [r for rs in runs.values() for r in rs]
    assert min(every_run) >= 20 and exact(every_run, 0.5) >= 0.9 * exact(
        [round(s * 1000) for s in sleeps.values()], 0.5
    )


def test_completed_runs_are_within_ten_percent(conn):
    """The complete path: the run lies between two server clock reads around the
    complete call, and the reported percentile is within 10% of those bounds."""
    rng = random.Random(3)
    bounds: list[tuple[int, int]] = []
    for i in range(12):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i:03d}")
    while (got := jobs.claim(conn, Q, 60_000)) is not None:
        import time

        time.sleep(rng.uniform(0.02, 0.2))
        claimed = int(conn.client.hget(P + "job:" + got.id, "claimed_at"))
        before = health.server_ms(conn)
        jobs.complete(conn, Q, got.id)
        bounds.append((before - claimed, health.server_ms(conn) - claimed))
    lat = frames.latency(conn, Q)
    if len(lat) == 1:  # one minute: the whole run is in its histogram
        for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            lo, hi = exact([b[0] for b in bounds], p), exact([b[1] for b in bounds], p)
            assert lo * 0.9 <= lat.iloc[0][f"run_{name}"] <= hi * 1.1
    assert lat["n"].sum() == 12


def test_latency_since_keeps_the_recent_minutes(conn):
    now_minute = health.server_ms(conn) // MIN
    for m in (now_minute - 90, now_minute):
        conn.client.zadd(P + "lat:minutes", {str(m): m})
        conn.client.hset(P + f"lat:wait:{m}", str(histogram.bucket(250)), 4)
    lat = frames.latency(conn, Q, since_ms=3_600_000)
    assert len(lat) == 1 and lat["n"].tolist() == [4]
    assert close(lat["wait_p50"].iloc[0], 250) and math.isnan(lat["run_p50"].iloc[0])
    assert len(frames.latency(conn, Q)) == 2
    assert frames.latency(conn, "nothing").empty


def test_the_histogram_reads_back_within_five_percent():
    for ms in [0, 1, 2, 3, 7, 10, 19, 20, 99, 100, 101, 999, 1000, 12_345, 86_400_000]:
        assert abs(histogram.value(histogram.bucket(ms)) - ms) <= 0.05 * ms, ms


# -- the verdicts: one staged queue each ------------------------------------------


def run_jobs(conn, q, n, fail=0):
    """Enqueue `n` jobs and work them: the first `fail` raise (one attempt, so dead)."""
    ids = [jobs.enqueue(conn, q, str(i), max_attempts=1) for i in range(n)]
    broken = set(ids[:fail])

    def handler(job_id, payload, attempts):
        if job_id in broken:
            raise RuntimeError("smtp 554")

    Worker(conn, q, handler).run(until_empty=True)
    return ids


def verdicts(conn, now_ms=None):
    h = frames.health(conn, now_ms=now_ms)
    assert list(h.columns) == HEALTH_COLUMNS
    return h


def test_ok(conn):
    run_jobs(conn, "ok", 4)
    jobs.enqueue(conn, "ok", "next")
    h = verdicts(conn).loc["ok"]
    assert h["verdict"] == "ok" and h["claimed_5m"] == 4 and h["completed_5m"] == 4
    assert h["failure_rate_5m"] == 0 and h["pending"] == 1
    assert "4 claimed, 4 completed" in h["why"] and "wait p95" in h["why"]


def test_idle(conn):
    run_jobs(conn, "quiet", 2)
    jobs.enqueue(conn, "quiet", "later", delay_ms=3_600_000)
    later = health.server_ms(conn) + 10 * MIN
    h = verdicts(conn, now_ms=later).loc["quiet"]
    assert h["verdict"] == "idle" and h["claimed_5m"] == 0
    assert "nothing pending or in flight" in h["why"] and "1 scheduled" in h["why"]
    # the same queue now, with its two completions in the window, is ok
    assert verdicts(conn).loc["quiet", "verdict"] == "ok"


def test_paused(conn):
    for i in range(3):
        jobs.enqueue(conn, "held", str(i))
    admin.pause(conn, "held")
    h = verdicts(conn, now_ms=health.server_ms(conn) + 30 * MIN).loc["held"]
    assert h["verdict"] == "paused" and bool(h["paused"])
    assert h["why"].startswith("paused by an operator: 3 pending")


def test_stuck(conn):
    run_jobs(conn, "jam", 2)
    for i in range(1_200):
        jobs.enqueue(conn, "jam", str(i))
    later = health.server_ms(conn) + 7 * MIN + 30_000
    h = verdicts(conn, now_ms=later).loc["jam"]
    assert h["verdict"] == "stuck" and h["pending"] == 1_200 and h["claimed_5m"] == 0
    assert h["oldest_pending_s"] >= 7 * 60
    assert h["why"].startswith("1,200 pending and no claim for 7 min")
    assert "0 in flight" in h["why"]


def test_stuck_with_expired_leases_and_nobody_putting_them_back(conn):
    jobs.enqueue(conn, "gone", "x")
    jobs.claim(conn, "gone", 1_000)
    h = verdicts(conn, now_ms=health.server_ms(conn) + 6 * MIN).loc["gone"]
    assert h["verdict"] == "stuck" and h["expired_leases"] == 1
    assert "1 leases expired and no claim for" in h["why"] and "past their lease" in h["why"]


def test_a_fresh_backlog_nobody_claimed_yet_is_growing_not_stuck(conn):
    for i in range(5):
        jobs.enqueue(conn, "new", str(i))
    h = verdicts(conn).loc["new"]
    assert h["verdict"] == "growing" and "no claim in the last 5 min yet" in h["why"]


def test_failing(conn):
    run_jobs(conn, "bad", 4, fail=3)
    h = verdicts(conn).loc["bad"]
    assert h["verdict"] == "failing" and h["failed_5m"] == 3 and h["failure_rate_5m"] == 0.75
    assert h["why"] == "3 of 4 jobs finished in the last 5 min failed (75%); 3 dead"


def test_growing(conn):
    ids = [jobs.enqueue(conn, "busy", str(i)) for i in range(10)]
    Worker(conn, "busy", lambda *a: None).run(max_jobs=2)
    h = verdicts(conn).loc["busy"]
    assert h["verdict"] == "growing" and h["pending"] == 8 and h["claimed_5m"] == 2
    assert h["why"].startswith("8 pending, more than the 2 claimed in the last 5 min")
    assert h["oldest_pending_s"] >= 0 and not math.isnan(h["oldest_pending_s"])
    assert health.enqueued_ms(ids[2]) is not None and health.enqueued_ms("j_1") is None


def test_health_of_named_queues_and_of_none(conn):
    assert verdicts(conn).empty
    jobs.enqueue(conn, "a", "x")
    jobs.enqueue(conn, "b", "x", group="acme")
    h = frames.health(conn, ["b"])
    assert list(h.index) == ["b"] and h.loc["b", "pending"] == 1


def test_health_reads_no_row(conn, monkeypatch):
    """Every command health sends, plain or pipelined, names no job row: the cost is
    the same at a million jobs (another test measures it there)."""
    run_jobs(conn, "big", 3, fail=1)
    jobs.enqueue(conn, "big", "x", group="acme")
    jobs.claim(conn, "big", 60_000)
    sent: list[tuple] = []
    for cls in (redis.Redis, redis.client.Pipeline):
        real = cls.execute_command

        def spy(self, *args, _real=real, **kw):
            sent.append(args)
            return _real(self, *args, **kw)

        monkeypatch.setattr(cls, "execute_command", spy)
    h = frames.health(conn)
    monkeypatch.undo()
    assert h.loc["big", "dead"] == 1 and sent
    touched = [a for a in sent if any(":job:" in str(x) for x in a)]
    assert touched == []
