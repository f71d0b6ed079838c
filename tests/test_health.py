"""frames.latency and frames.health on both backends: the percentiles against the
exact ones computed from the same runs, one staged queue per verdict, the order
most urgent first, and a health check that reads two time fields of a bounded
sample of rows."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
import redis
from harm import bounded, written_out
from helpers import worked
from hypothesis import given, settings
from hypothesis import strategies as st
from long_fields import OVER, longest_value, small_bounds
from long_fields import P as P_row_fields
from long_fields import Q as Q_row_fields
from ulid import ULID

from emq_notebook import Worker, admin, frames, health, histogram, jobs, watching
from emq_notebook.errors import UnknownQueue
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
        before = conn.server_ms()
        jobs.complete(conn, Q, got.id)
        bounds.append((before - claimed, conn.server_ms() - claimed))
    lat = frames.latency(conn, Q)
    if len(lat) == 1:  # one minute: the whole run is in its histogram
        for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            lo, hi = exact([b[0] for b in bounds], p), exact([b[1] for b in bounds], p)
            assert lo * 0.9 <= lat.iloc[0][f"run_{name}"] <= hi * 1.1
    assert lat["n"].sum() == 12


def test_latency_since_keeps_the_recent_minutes(conn):
    now_minute = conn.server_ms() // MIN
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
    return worked(conn, q, n, fail, error="smtp 554")


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
    later = conn.server_ms() + 10 * MIN
    h = verdicts(conn, now_ms=later).loc["quiet"]
    assert h["verdict"] == "idle" and h["claimed_5m"] == 0
    assert "nothing pending or in flight" in h["why"] and "1 scheduled" in h["why"]
    # the same queue now, with its two completions in the window, is ok
    assert verdicts(conn).loc["quiet", "verdict"] == "ok"


def test_paused(conn):
    for i in range(3):
        jobs.enqueue(conn, "held", str(i))
    admin.pause(conn, "held")
    h = verdicts(conn, now_ms=conn.server_ms() + 30 * MIN).loc["held"]
    assert h["verdict"] == "paused" and bool(h["paused"])
    assert h["why"].startswith("paused by an operator: 3 pending")


def last_claim_minute(conn, q):
    return max(int(m) for m in conn.client.hkeys(f"emq:{{{q}}}:metrics:claimed"))


def test_stuck_says_the_quiet_time_from_the_minute_of_the_last_claim(conn):
    """Judged 7 min 10 s after the end of the last claim's minute, whatever second of
    the minute the test ran at (the claims and the enqueues may straddle a minute)."""
    run_jobs(conn, "jam", 2)
    for i in range(1_200):
        jobs.enqueue(conn, "jam", str(i))
    later = (last_claim_minute(conn, "jam") + 1) * MIN + 7 * MIN + 10_000
    h = verdicts(conn, now_ms=later).loc["jam"]
    assert h["verdict"] == "stuck" and h["pending"] == 1_200 and h["claimed_5m"] == 0
    first = int(
        conn.client.hget("emq:{jam}:job:" + conn.client.zrange("emq:{jam}:pending", 0, 0)[0], "created_at")
    )
    assert h["oldest_pending_s"] == (later - first) / 1000
    assert h["why"].startswith("1,200 pending and no claim for 7 min")
    assert "0 in flight" in h["why"]


def test_the_last_claim_is_found_hours_and_days_back(conn, monkeypatch):
    """The minute of the last claim, an hour of minutes a read back a day, then by the
    hash's names; past `watching.HASH_FIELDS` names, the day's bound (a lower bound)."""
    run_jobs(conn, "jam", 2)
    for i in range(5):
        jobs.enqueue(conn, "jam", str(i))
    end = (last_claim_minute(conn, "jam") + 1) * MIN
    for after, said in ((3 * 60 * MIN, "3 h"), (3 * 1440 * MIN, "3 d")):
        h = verdicts(conn, now_ms=end + after + 10_000).loc["jam"]
        assert h["verdict"] == "stuck", h["why"]
        assert h["why"].startswith(f"5 pending and no claim for {said};"), h["why"]
    monkeypatch.setattr(watching, "HASH_FIELDS", 0)
    h = verdicts(conn, now_ms=end + 3 * 1440 * MIN + 10_000).loc["jam"]
    assert h["why"].startswith("5 pending and no claim for 24 h;"), h["why"]


def test_stuck_with_expired_leases_and_nobody_putting_them_back(conn):
    jobs.enqueue(conn, "gone", "x")
    jobs.claim(conn, "gone", 1_000)
    h = verdicts(conn, now_ms=conn.server_ms() + 6 * MIN).loc["gone"]
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
    assert len(ids) == 10


def test_health_of_named_queues_and_of_none(conn):
    assert verdicts(conn).empty
    jobs.enqueue(conn, "a", "x")
    jobs.enqueue(conn, "b", "x", group="acme")
    h = frames.health(conn, ["b"])
    assert list(h.index) == ["b"] and h.loc["b", "pending"] == 1


def spy_commands(monkeypatch) -> list[tuple]:
    """Every command sent from here on, plain or pipelined (a cluster's too)."""
    sent: list[tuple] = []
    for cls in (redis.Redis, redis.client.Pipeline):
        real = cls.execute_command

        def spy(self, *args, _real=real, **kw):
            sent.append(args)
            return _real(self, *args, **kw)

        monkeypatch.setattr(cls, "execute_command", spy)
    return sent


def test_health_reads_two_time_fields_of_a_bounded_sample_of_rows(conn, monkeypatch):
    """The only row reads are `created_at` and `due_at`, inside the one `@read_watch` call
    a queue, of the head of pending, the first job of its lowest priority and the head of
    each lane, never a payload, whatever the backlog (the cost is the same at a million
    jobs)."""
    run_jobs(conn, "big", 3, fail=1)
    for i in range(40):
        jobs.enqueue(conn, "big", str(i), id=f"j_{i:03d}", priority=i % 3)
    for g in ("acme", "globex"):
        jobs.enqueue(conn, "big", "x", group=g, id=f"j_{g}")
    jobs.claim(conn, "big", 60_000)  # j_000
    runs: list[tuple] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        runs.append((name, list(keys), list(args)))
        return real(name, keys, args, **kw)

    monkeypatch.setattr(conn, "run", run)
    sent = spy_commands(monkeypatch)
    h = frames.health(conn)
    monkeypatch.undo()
    assert h.loc["big", "dead"] == 1 and sent
    assert [a for a in sent if any(":job:" in str(x) for x in a)] == []  # no row read by name
    # one call a queue: its counts, its lanes' sizes and heads, the ends of pending, the
    # schedule and the dead set (ids and scores), the sample's two times
    assert [(name, keys) for name, keys, _ in runs] == [("read_watch", ["emq:{big}:"])]
    (read,) = watching.read(conn, ["big"], lanes=False, asked=health.asked(conn))
    ends, heads, times = read.health[5], read.health[6], read.health[7]
    sampled = [m for m in dict.fromkeys([*ends[:2], *heads[4:]]) if isinstance(m, str)]
    assert sorted(sampled) == [
        "j_002",
        "j_003",
        "j_acme",
        "j_globex",
    ]  # heads of priority 0 and 2, of each lane
    assert len(times) == 4 and all(created.isdigit() and due is None for created, due in times)


# -- issue 28, items 10-12: health says the right thing ------------------------------


def test_retries_overdue_in_schedule_with_the_workers_gone_read_stuck_not_idle(conn):
    """Ten jobs failed once (retries due a second later), then the workers died:
    ten minutes on, nothing is pending or in flight, yet ten jobs are overdue."""
    for i in range(10):
        jobs.enqueue(conn, "retry", str(i))
        got = jobs.claim(conn, "retry", 60_000)
        jobs.fail(conn, "retry", got.id, "worker lost")
    assert conn.client.zcard("emq:{retry}:schedule") == 10
    later = (last_claim_minute(conn, "retry") + 1) * MIN + 10 * MIN
    h = verdicts(conn, now_ms=later).loc["retry"]
    assert h["verdict"] == "stuck" and h["pending"] == 0 and h["schedule"] == 10
    assert h["why"].startswith("10 overdue in schedule and no claim for 10 min")
    due = conn.client.zrange("emq:{retry}:schedule", 0, 0, withscores=True)[0][1]
    assert h["oldest_pending_s"] == (later - due) / 1000
    # a retry due less than a minute ago is no backlog yet (the failures are news)
    h = verdicts(conn, now_ms=int(due) + 30_000).loc["retry"]
    assert h["verdict"] == "failing" and math.isnan(h["oldest_pending_s"])


def test_the_oldest_pending_age_comes_from_the_rows_not_from_the_id(conn):
    now = conn.server_ms()
    # a custom-id job enqueued just now in a queue made an hour ago: not stuck
    jobs.enqueue(conn, "orders", "{}", id="order-17")
    conn.client.hset("emq:{orders}:meta", "created_at", now - 60 * MIN)
    h = verdicts(conn, now_ms=now + 2_000).loc["orders"]
    assert h["verdict"] == "growing" and h["oldest_pending_s"] < 60
    # a job enqueued ten minutes before the judging, whose branded id reads young: stuck
    young = "j_" + str(ULID.from_timestamp((now + 10 * MIN) / 1000))
    jobs.enqueue(conn, "mail", "{}", id=young)
    h = verdicts(conn, now_ms=now + 10 * MIN).loc["mail"]
    assert h["verdict"] == "stuck" and h["oldest_pending_s"] >= 9 * 60
    # the head of pending is the highest priority, not the oldest job
    jobs.enqueue(conn, "prio", "{}", id="j_old", priority=5)
    conn.client.hset("emq:{prio}:job:j_old", "created_at", now - 20 * MIN)
    for i in range(3):
        jobs.enqueue(conn, "prio", "{}", id=f"j_new{i}")
    assert conn.client.zrange("emq:{prio}:pending", 0, 0) == ["j_new0"]
    h = verdicts(conn, now_ms=now + 1_000).loc["prio"]
    assert h["oldest_pending_s"] == (20 * MIN + 1_000) / 1000


def test_a_named_queue_with_no_key_is_unknown_in_health_status_and_counts(conn):
    jobs.enqueue(conn, "mailers", "{}")
    for read in (
        lambda: frames.health(conn, ["mailer"]),
        lambda: frames.counts(conn, ["mailers", "mailer"]),
        lambda: health.health(conn, ["mailer"]),
    ):
        with pytest.raises(UnknownQueue, match="no queue 'mailer' .*did you mean mailers"):
            read()
    # a listing answers what is there; a queue whose keys are all gone leaves it
    assert list(frames.health(conn).index) == ["mailers"]
    conn.client.flushall()
    assert frames.counts(conn).empty and frames.queues(conn) == []


def test_a_queue_holding_dead_jobs_reads_dead_letters_never_ok_or_idle(conn):
    run_jobs(conn, "bad", 4, fail=3)
    died = conn.client.zrevrange("emq:{bad}:dead", 0, 0, withscores=True)[0][1]
    later = int(died) + 2 * 3_600_000
    h = verdicts(conn, now_ms=later).loc["bad"]
    assert h["verdict"] == "dead_letters"
    assert h["why"] == "3 dead, the newest 2 h ago; nothing failing now"
    # paused, it still says its dead letters first
    admin.pause(conn, "bad")
    h = verdicts(conn, now_ms=later).loc["bad"]
    assert h["verdict"] == "dead_letters" and h["why"].endswith("; paused by an operator")
    # in the window, with most finished jobs failing, it is failing
    assert verdicts(conn).loc["bad", "verdict"] == "failing"


def test_a_stuck_or_growing_queue_names_its_dead_letters(conn):
    """Issue 43: a stuck queue with dead jobs said nothing of them in its reason."""
    run_jobs(conn, "jam", 3, fail=2)
    for i in range(5):
        jobs.enqueue(conn, "jam", str(i))
    later = (last_claim_minute(conn, "jam") + 1) * MIN + 7 * MIN + 10_000
    h = verdicts(conn, now_ms=later).loc["jam"]
    assert h["verdict"] == "stuck" and h["dead"] == 2
    assert h["why"] == "5 pending and no claim for 7 min; 0 in flight; 2 dead: are the workers running?"
    # in the window, 2 of 3 failed: failing, which names them as it did
    h = verdicts(conn).loc["jam"]
    assert h["verdict"] == "failing" and h["why"].endswith("; 2 dead")
    run_jobs(conn, "busy", 6, fail=1)
    for i in range(12):
        jobs.enqueue(conn, "busy", str(i))
    h = verdicts(conn).loc["busy"]
    assert h["verdict"] == "growing" and h["why"].endswith("; 1 dead")


def test_a_stuck_queue_with_2600_dead_says_so_in_its_reason(conn):
    """Issue 43's case: 2,600 dead jobs (in the dead set; ids only, as another node's
    rows may be gone) named by a stuck queue's reason, and by a paused one's."""
    run_jobs(conn, "jam", 2)
    for i in range(4):
        jobs.enqueue(conn, "jam", str(i))
    died = conn.server_ms() - 3_600_000
    conn.client.zadd("emq:{jam}:dead", {f"d{i:04d}": died + i for i in range(2_600)})
    later = (last_claim_minute(conn, "jam") + 1) * MIN + 7 * MIN + 10_000
    h = verdicts(conn, now_ms=later).loc["jam"]
    assert h["verdict"] == "stuck" and h["dead"] == 2_600
    assert h["why"] == "4 pending and no claim for 7 min; 0 in flight; 2,600 dead: are the workers running?"
    admin.pause(conn, "jam")
    h = verdicts(conn, now_ms=later).loc["jam"]
    assert h["verdict"] == "dead_letters" and h["why"].startswith("2,600 dead, the newest ")


@settings(max_examples=300, deadline=None)
@given(
    counts=st.tuples(*(st.integers(0, 3_000),) * 8),
    paused=st.booleans(),
    oldest=st.one_of(st.just(math.nan), st.floats(0, 10_000)),
    last_claim=st.one_of(st.none(), st.integers(0, 30_000_000)),
    overdue=st.integers(0, 50),
)
def test_every_verdict_names_the_dead_letters(counts, paused, oldest, last_claim, overdue):
    """Whatever the verdict, a queue holding dead jobs says how many (issue 43)."""
    pending, active, dead, claimed, completed, failed, expired, schedule = counts
    row = {
        "pending": pending,
        "active": active,
        "schedule": schedule,
        "dead": dead,
        "paused": paused,
        "oldest_pending_s": oldest,
        "claimed_5m": claimed,
        "completed_5m": completed,
        "failed_5m": failed,
        "expired_leases": expired,
        "wait_p95_5m": math.nan,
    }
    verdict, why = health.judge(row, 30_000_000 * MIN, last_claim, math.nan, overdue=overdue)
    assert verdict in health.SEVERITY
    if dead:
        assert f"{dead:,} dead" in why, (verdict, why)
    elif verdict != "failing":  # failing says "0 dead" too: its failures were retried
        assert "dead" not in why, (verdict, why)


def stage_every_verdict(conn) -> None:
    """One queue a verdict, and two each of ok and idle, of different sizes."""
    run_jobs(conn, "failing", 4, fail=3)
    run_jobs(conn, "dead", 4, fail=1)  # 1 of 4 failed: below the failing rate
    jobs.enqueue(conn, "growing", "x")
    old = conn.server_ms() - 10 * MIN
    for i in range(3):
        conn.client.hset("emq:{stuck}:job:" + jobs.enqueue(conn, "stuck", str(i)), "created_at", old)
    jobs.enqueue(conn, "paused", "x")
    admin.pause(conn, "paused")
    for q, n in (("ok-small", 1), ("ok-big", 3)):
        run_jobs(conn, q, 4)
        for i in range(n):
            jobs.enqueue(conn, q, str(i))
    for q, n in (("idle-small", 1), ("idle-big", 2)):
        for _ in range(n):
            jobs.enqueue(conn, q, "x", delay_ms=3_600_000)


def test_every_list_of_queues_is_ordered_by_severity_then_size(conn):
    stage_every_verdict(conn)
    h = frames.health(conn)
    order = list(h["verdict"])
    ranks = [health.SEVERITY.index(v) for v in order]
    assert ranks == sorted(ranks), order
    # within a verdict, the biggest first
    for verdict in set(order):
        sizes = h[h["verdict"] == verdict][["pending", "active", "schedule", "dead"]].sum(axis=1).tolist()
        assert sizes == sorted(sizes, reverse=True), verdict
    assert list(h.index) == [
        "failing",
        "stuck",
        "growing",
        "dead",
        "paused",
        "ok-big",
        "ok-small",
        "idle-big",
        "idle-small",
    ]
    assert order == [*health.SEVERITY[:5], "ok", "ok", "idle", "idle"]


def test_the_summary_counts_each_verdict_and_the_report_sums_the_quiet_ones():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "verdict": ["failing", "stuck", "stuck", "dead_letters", "ok", "ok", "idle"],
            "why": ["w"] * 7,
            "pending": [5, 4, 3, 0, 2, 1, 0],
            "active": [0] * 7,
            "schedule": [0] * 7,
            "dead": [9, 0, 0, 7, 0, 0, 0],
        },
        index=pd.Index(["f", "s1", "s2", "d", "o1", "o2", "i"], name="queue"),
    )
    assert health.summary(frame) == "1 failing · 2 stuck · 1 dead letters · 2 ok · 1 idle"
    assert health.report_lines(frame) == [
        "f: failing — w",
        "s1: stuck — w",
        "s2: stuck — w",
        "d: dead_letters — w",
        "and 2 ok, 1 idle",
    ]
    quiet = frame[frame["verdict"].isin(["ok", "idle"])]
    assert health.report_lines(quiet) == ["no problem: 2 ok, 1 idle"]
    shuffled = frame.iloc[::-1]
    assert list(health.by_severity(shuffled).index) == ["f", "s1", "s2", "d", "o1", "o2", "i"]


def test_a_sampled_time_that_is_no_ascii_whole_number_is_no_time(conn):
    """A `created_at` another node wrote as "²²" (`str.isdigit` says digits, int() refuses
    it) is no time, as a time too long to read is none: the row is skipped, health
    answers. A histogram's bucket or count of that kind is left out too."""
    conn.client.flushall()
    head = jobs.enqueue(conn, Q, "{}")
    created = int(conn.client.hget(P + "job:" + head, "created_at"))
    conn.client.hset(P + "job:" + head, "created_at", "²²")
    got = health.health(conn, [Q], now_ms=created + 5_000)
    assert got.loc[Q, "pending"] == 1 and math.isnan(got.loc[Q, "oldest_pending_s"])
    conn.client.hset(P + "job:" + head, "created_at", created)
    assert health.health(conn, [Q], now_ms=created + 5_000).loc[Q, "oldest_pending_s"] == 5.0
    assert histogram.parse({"-²": "1", "5": "²", "7": "3", "-2": "1" * 5_000}) == {7: 3}


# -- do no harm, a sampled row's long time (the snapshot's long fields: test_frames.py)


def times_read(monkeypatch) -> list:
    """The sampled rows' times each health read answers from now on, as they come."""
    seen: list = []
    real = watching.read

    def read(*args, **kw):
        got = real(*args, **kw)
        seen.extend(r.health[7] for r in got if r.health)
        return got

    monkeypatch.setattr(watching, "read", read)
    return seen


class TestHarmRowFields:
    """Do no harm, a sampled row's time fields: the health's `@read_rows` copies no time
    another node made long; such a row is skipped. Under the harness's watchdog, the bounds
    made small (tests/long_fields.py); observed in the replies and the bytes Valkey wrote."""

    @pytest.fixture(autouse=True)
    def _small_bounds(self, monkeypatch):
        small_bounds(monkeypatch)

    def test_health_reads_no_long_time_of_a_sampled_row(self, harm, monkeypatch):
        conn, srv = harm
        head = jobs.enqueue(conn, Q_row_fields, "{}")
        created = int(conn.client.hget(P_row_fields + "job:" + head, "created_at"))
        conn.client.hset(P_row_fields + "job:" + head, "created_at", "1" * OVER)
        calls = times_read(monkeypatch)
        got, out = written_out(
            conn, srv, lambda: bounded(lambda: health.health(conn, [Q_row_fields]), srv, what="health")
        )
        # the long created_at is no time: the row is skipped, its bytes left on the server
        assert got.loc[Q_row_fields, "pending"] == 1 and got["oldest_pending_s"].isna().all()
        assert calls and longest_value(calls) <= health.TIME_BYTES
        if out is not None:
            assert out < 64_000
        # a time of its 13 digits is read
        conn.client.hset(P_row_fields + "job:" + head, "created_at", created)
        age = health.health(conn, [Q_row_fields], now_ms=created + 5_000).loc[
            Q_row_fields, "oldest_pending_s"
        ]
        assert age == 5.0
