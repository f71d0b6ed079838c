"""Do no harm, the bulk verbs: every call is bounded by the work it does (members
examined AND bytes), whatever the sets hold -- bad rows, ghosts, ids another node
wrote outside the name gate, 8 MB payloads, a :logs list of 200,000 lines -- and a run
walks each member once, so it never re-walks (or re-announces) what it left behind.
Both backends; the calls that could hold a server run under the harness's watchdog
(tests/harm.py). Work is observed in the replies and the events, never timed."""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

import pytest
from dead_letters import dead_letter, long_ids, written_dead, written_rows
from harm import Events, bounded, commands_sent, replies
from helpers import consistency_problems, dump, keys_of, server_for, server_url

import emq_notebook as emq
from emq_notebook import admin, jobs, magics, repeat, scripts, triage
from emq_notebook.defaults import BYTE_BUDGET, MAX_BUDGET, MAX_MOVE_BUDGET, MAX_PAYLOAD
from emq_notebook.errors import BadInput, ReadOnly
from emq_notebook.keyspace import MAX_SERVER_ID

Q = "harm"
P = f"emq:{{{Q}}}:"


def kill(conn, ids, group=None, error="boom"):
    """Each id enqueued, claimed and failed for good: dead, scored by its time of death."""
    for job_id in ids:
        dead_letter(conn, Q, job_id, error, group=group)


def bad_rows_and_ghosts(conn, bad: int, ghosts: int, key: str = "dead") -> list[str]:
    """`bad` rows no transition can read and `ghosts` members with no row, interleaved at
    the head of set `key` (scored 1, 2, ...: the oldest), written by pipeline; the
    bad rows' ids."""
    pipe = conn.client.pipeline(transaction=False)
    bad_ids: list[str] = []
    for i in range(bad + ghosts):
        if len(bad_ids) < bad and (i % 2 == 0 or i - len(bad_ids) == ghosts):
            job_id = f"b_{i:06d}"
            bad_ids.append(job_id)
            pipe.hset(P + "job:" + job_id, mapping={"payload": "{}", "attempts": "three", "state": key})
        else:
            job_id = f"g_{i:06d}"
        pipe.zadd(P + key, {job_id: i + 1})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    return bad_ids


def steps(conn) -> list[list]:
    """Every step reply `conn` gets from @reprocess_dead or its dry run, as it comes."""
    seen: list[list] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name.startswith("reprocess_dead"):
            seen.append(reply)
        return reply

    conn.run = run
    return seen


def examined(step: list) -> int:
    """The members a step examined, from its reply: moved, ghosts, bad rows, foreign ids."""
    return int(step[3]) + int(step[4]) + int(step[5]) + len(step[6])


# -- 1. bounded by the work, and each member walked once --------------------------------


def test_each_reprocess_dead_call_examines_at_most_its_budget_past_30000_bad_rows_and_ghosts(harm):
    conn, srv = harm
    bad = bad_rows_and_ghosts(conn, 15_000, 15_000)
    good = [f"j_{i:02d}" for i in range(20)]
    kill(conn, good)
    seen = steps(conn)
    with Events(conn, Q) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q, budget=500), srv, what="reprocess_dead")
    assert (moved, moved.bad_rows, moved.ghosts, moved.foreign) == (20, 15_000, 15_000, [])
    assert all(examined(s) <= 500 for s in seen)
    # each member examined once: 30,020 members in 61 calls, not 30,000 a call
    assert sum(examined(s) for s in seen) == 30_020
    assert len(seen) == math.ceil(30_020 / 500)
    # each bad row announced once in the run, and left in dead; the ghosts dropped
    assert events.bad_rows() == Counter(bad)
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == bad
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good


@pytest.mark.parametrize("how", ["rate", "trial"])
def test_a_paced_or_trial_run_keeps_its_place_past_bad_rows(harm, how):
    conn, srv = harm
    bad = bad_rows_and_ghosts(conn, 1_500, 1_500)
    good = [f"j_{i:02d}" for i in range(12)]
    kill(conn, good)
    seen = steps(conn)
    control = {"rate": {"rate": 500}, "trial": {"trial": 4, "watch_s": 0.05}}[how]
    with Events(conn, Q) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q, budget=400, **control), srv, what=how)
    assert moved == 12 and (moved.bad_rows, moved.ghosts) == (1_500, 1_500)
    assert all(examined(s) <= 400 for s in seen)
    assert sum(examined(s) for s in seen) == 3_012  # never re-walked
    if how == "rate":  # a step moves at most a tenth of a second's worth
        assert all(int(s[3]) <= 50 for s in seen)
    assert events.bad_rows() == Counter(bad)
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good


@pytest.mark.parametrize("verb", ["promote", "expire_leases"])
def test_housekeeping_laps_past_bad_rows_and_announces_each_once_a_lap(harm, verb):
    conn, srv = harm
    key = "schedule" if verb == "promote" else "active"
    bad = bad_rows_and_ghosts(conn, 600, 600, key)
    for i in range(5):  # due (or expired) a moment after they are added
        jobs.enqueue(conn, Q, "{}", id=f"j_{i}", delay_ms=1 if verb == "promote" else 0)
    if verb == "expire_leases":
        while jobs.claim(conn, Q, 1):
            pass
    time.sleep(0.01)
    call = getattr(jobs, verb)
    with Events(conn, Q) as events:
        moved = [bounded(lambda: call(conn, Q, budget=500), srv, what=verb) for _ in range(3)]
    # 1,205 due members: three calls of at most 500, the good ones last
    assert moved == [0, 0, 5]
    assert events.bad_rows() == Counter(bad)
    assert conn.client.zcard(P + key) == 600  # the bad rows stay; the ghosts left
    with Events(conn, Q) as again:
        assert call(conn, Q, budget=500) == 0  # a new lap from the head
    assert set(again.bad_rows().values()) == {1} and len(again.bad_rows()) == 500


def limited_head(conn) -> tuple[list[str], list[str], list[str]]:
    """600 bad rows and 600 ghosts at the head of dead, five foreign ids before them (one
    naming a logs list that holds a line), then six good jobs: (bad ids, foreign ids, good)."""
    bad = bad_rows_and_ghosts(conn, 600, 600)
    foreign = [f"x{k}:logs" for k in range(5)]
    conn.client.zadd(P + "dead", dict.fromkeys(foreign, 0.5))
    conn.client.rpush(P + "job:x0:logs", "a line")
    good = [f"j_{i:02d}" for i in range(6)]
    kill(conn, good)
    return bad, foreign, good


LIMITED = {
    "limit 1": {"limit": 1},
    "limit 3": {"limit": 3},
    "paced": {"limit": 3, "rate": 10},  # a step of one job at a time
    "trial": {"limit": 3, "trial": 2, "watch_s": 0.05},
}


@pytest.mark.parametrize("how", sorted(LIMITED))
def test_a_limited_reprocess_dead_moves_its_limit_past_a_head_of_leftovers_in_few_calls(harm, how):
    """A step that moves at most N jobs reads N + 1 members at first, and more only past
    the members it leaves: with 1,205 leftovers at the head it still examines up to its
    budget a call, so a run of one job is three calls, not one per leftover."""
    conn, srv = harm
    bad, foreign, good = limited_head(conn)
    control = LIMITED[how]
    limit = control["limit"]
    before = dump(conn)
    would = bounded(lambda: admin.reprocess_dead(conn, Q, dry_run=True, **control), srv, what="the dry run")
    assert dump(conn) == before
    seen = steps(conn)
    with Events(conn, Q) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q, **control), srv, what=how)
    assert moved == would == limit
    assert (moved.bad_rows, moved.ghosts, sorted(moved.foreign)) == (600, 600, foreign)
    assert (would.bad_rows, would.ghosts, sorted(would.foreign)) == (600, 600, foreign)
    # each member walked once, at most the budget a call, in a handful of calls
    walked = 1_205 + limit
    assert sum(examined(s) for s in seen) == walked
    assert all(examined(s) <= 500 for s in seen)
    # (a paced step moves one job, a trial's first steps its trial: a few calls more)
    assert len(seen) == math.ceil(walked / 500) if how.startswith("limit") else len(seen) <= 3 + limit
    # each bad row and foreign id announced once; the oldest good jobs moved, the rest stay
    assert events.bad_rows() == Counter(bad + foreign)
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == good[:limit]
    assert conn.client.zrange(P + "dead", 0, -1)[-len(good) + limit :] == good[limit:]
    assert conn.client.lrange(P + "job:x0:logs", 0, -1) == ["a line"]


def test_a_step_of_one_job_on_a_clean_head_examines_one_member(conn):
    kill(conn, [f"j_{i}" for i in range(5)])
    seen = steps(conn)
    assert admin.reprocess_dead(conn, Q, limit=1) == 1
    assert [examined(s) for s in seen] == [1]
    # the place it ended at is the job it moved, and more follow it
    assert seen[0][1:3] == ["j_0", 1]


# -- 2. big values ------------------------------------------------------------------------


def big_jobs(conn) -> None:
    """Four jobs with an 8 MB payload (another node's: over what the toolkit writes),
    then one with a :logs list of 200,000 lines."""
    big = "x" * (8 << 20)
    for i in range(4):
        jobs.enqueue(conn, Q, "{}", id=f"j_big{i}")
        conn.client.hset(P + f"job:j_big{i}", "payload", big)
    jobs.enqueue(conn, Q, "{}", id="j_logs")
    pipe = conn.client.pipeline(transaction=False)
    for _ in range(20):
        pipe.rpush(P + "job:j_logs:logs", *(f"line {i}" for i in range(10_000)))
    pipe.execute()


def test_drain_of_big_payloads_and_long_logs_returns_a_call_per_big_row(harm):
    conn, srv = harm
    big_jobs(conn)
    drained: list[int] = []
    n = bounded(lambda: admin.drain(conn, Q, progress=lambda c, k: drained.append(k)), srv, what="drain")
    # each 8 MB payload spends a call's bytes: a call of its own, then the rest
    assert n == 5 and drained == [1, 2, 3, 4, 5]
    assert keys_of(conn, Q) == [P + "meta"]


def test_obliterate_of_big_payloads_and_long_logs_returns_and_leaves_nothing(harm):
    conn, srv = harm
    big_jobs(conn)
    admin.pause(conn, Q)
    left: list[int] = []
    calls = bounded(
        lambda: admin.obliterate_all(conn, Q, progress=lambda c, k: left.append(k)), srv, what="obliterate"
    )
    assert left == [4, 3, 2, 1] and calls == 5  # one 8 MB row a call, then the rest
    assert keys_of(conn, Q) == []


def test_enqueue_many_splits_large_payloads_by_bytes(conn):
    sent: list[tuple[int, int]] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        triples = args[5:]
        sent.append((len(triples) // 3, sum(len(str(a)) for a in triples)))
        return real(name, keys, args, **kw)

    conn.run = run
    payloads = ["x" * 300_000] * 12 + ["y" * 1_500_000] + ["{}"] * 3
    ids = jobs.enqueue_many(conn, Q, payloads)
    # about a megabyte a call; a payload larger than that goes alone
    assert [jobs_in for jobs_in, _ in sent] == [3, 3, 3, 3, 1, 3]
    assert all(size <= BYTE_BUDGET or jobs_in == 1 for jobs_in, size in sent)
    assert conn.client.zrange(P + "pending", 0, -1) == ids
    assert conn.client.hstrlen(P + "job:" + ids[12], "payload") == 1_500_000


# -- 3. a budget over the maximum: refused before anything is sent ------------------------

OVER = MAX_BUDGET + 1
# one over the most a call that rewrites each job it moves or writes takes
MOVES_OVER = MAX_MOVE_BUDGET + 1
OVER_BUDGET = {
    "reprocess_dead": lambda c: admin.reprocess_dead(c, Q, budget=MOVES_OVER),
    "reprocess_dead paced": lambda c: admin.reprocess_dead(c, Q, budget=MOVES_OVER, rate=10),
    "reprocess_dead trial": lambda c: admin.reprocess_dead(c, Q, budget=MOVES_OVER, trial=2),
    "reprocess_dead dry run": lambda c: admin.reprocess_dead(c, Q, budget=MOVES_OVER, dry_run=True),
    "reprocess_jobs": lambda c: admin.reprocess_jobs(c, Q, ["j_1"], budget=MOVES_OVER),
    "reprocess_jobs dry run": lambda c: admin.reprocess_jobs(c, Q, ["j_1"], budget=MOVES_OVER, dry_run=True),
    "remove_jobs": lambda c: admin.remove_jobs(c, Q, ["j_1"], budget=OVER),
    "remove_jobs dry run": lambda c: admin.remove_jobs(c, Q, ["j_1"], budget=OVER, dry_run=True),
    "drain": lambda c: admin.drain(c, Q, budget=OVER),
    "obliterate": lambda c: admin.obliterate(c, Q, budget=OVER),
    "obliterate_all": lambda c: admin.obliterate_all(c, Q, budget=OVER),
    "enqueue_many": lambda c: jobs.enqueue_many(c, Q, ["{}"], chunk=MOVES_OVER),
    "promote": lambda c: jobs.promote(c, Q, budget=MOVES_OVER),
    "expire_leases": lambda c: jobs.expire_leases(c, Q, budget=MOVES_OVER),
}
MOVES = frozenset(
    verb
    for verb in OVER_BUDGET
    if verb.split()[0] in ("reprocess_dead", "reprocess_jobs", "enqueue_many", "promote", "expire_leases")
)


def refused_before_anything_is_sent(conn, srv, call, says: str) -> None:
    """`call(conn)` raises a one-line `BadInput` naming `says`, and sends nothing."""
    before = dump(conn)

    def refused() -> None:
        with pytest.raises(BadInput) as info:
            call(conn)
        assert "\n" not in str(info.value) and says in str(info.value)

    if srv is None:  # every command the client sends
        calls: list[tuple] = []
        real = conn.client.execute_command
        conn.client.execute_command = lambda *a, **kw: (calls.append(a), real(*a, **kw))[1]
        refused()
        conn.client.execute_command = real
        assert calls == []
    else:  # counted on the server
        assert commands_sent(conn.client, refused) == {}
    assert dump(conn) == before


@pytest.mark.parametrize("verb", sorted(OVER_BUDGET))
def test_a_budget_over_the_maximum_is_refused_before_anything_is_sent(harm, verb):
    conn, srv = harm
    kill(conn, ["j_1"])
    most = MAX_MOVE_BUDGET if verb in MOVES else MAX_BUDGET
    refused_before_anything_is_sent(conn, srv, OVER_BUDGET[verb], f"{most:,}")


# a payload one byte over, counted in bytes: "é" is two
OVER_PAYLOAD = {
    "enqueue": lambda c: jobs.enqueue(c, Q, "x" * (MAX_PAYLOAD + 1)),
    "enqueue_many": lambda c: jobs.enqueue_many(c, Q, ["{}", "é" * (MAX_PAYLOAD // 2) + "x"]),
    "update_data": lambda c: jobs.update_data(c, Q, "j_1", "x" * (MAX_PAYLOAD + 1)),
    "repeat.register": lambda c: repeat.register(c, Q, "nightly", 60_000, "é" * (MAX_PAYLOAD // 2) + "x"),
}


@pytest.mark.parametrize("verb", sorted(OVER_PAYLOAD))
def test_a_payload_over_the_maximum_is_refused_before_anything_is_sent(harm, verb):
    conn, srv = harm
    kill(conn, ["j_1"])
    refused_before_anything_is_sent(conn, srv, OVER_PAYLOAD[verb], f"{MAX_PAYLOAD:,}")


def test_a_payload_of_the_maximum_is_written_whole(harm):
    conn, srv = harm
    kill(conn, ["j_1"])
    most = "é" * (MAX_PAYLOAD // 2)
    bounded(lambda: jobs.update_data(conn, Q, "j_1", most), srv, what="update_data")
    assert conn.client.hstrlen(P + "job:j_1", "payload") == MAX_PAYLOAD


# -- 4. the dry run answers what the real call does ---------------------------------------


def mixed_dead(conn, logs: bool = True) -> None:
    """Seven dead members: three that move (one grouped), two bad rows, a ghost, and an
    id naming another job's logs (j_flat's, which hold a line when `logs`)."""
    kill(conn, ["j_flat", "j_flat2"])
    kill(conn, ["j_lane"], group="acme")
    kill(conn, ["j_bad", "j_bad2"])
    conn.client.hset(P + "job:j_bad", "attempts", "three")
    conn.client.hset(P + "job:j_bad2", "priority", "1e999")
    conn.client.zadd(P + "dead", {"j_ghost": 1})
    if logs:
        conn.client.rpush(P + "job:j_flat:logs", "a line")
    conn.client.zadd(P + "dead", {"j_flat:logs": 2})


def test_the_dry_run_of_reprocess_dead_equals_the_real_call_on_the_same_state(conn, backend, request):
    mixed_dead(conn)
    before = dump(conn)
    url = server_url(backend, server_for(backend, request))
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True)
    would = admin.reprocess_dead(ro, Q, budget=2, dry_run=True)
    assert dump(conn) == before  # nothing written, on a read-only session
    with pytest.raises(ReadOnly):
        admin.reprocess_dead(ro, Q)
    moved = admin.reprocess_dead(conn, Q, budget=2)
    assert (would, would.bad_rows, would.ghosts, would.foreign) == (3, 2, 1, ["j_flat:logs"])
    assert (moved, moved.bad_rows, moved.ghosts, moved.foreign) == (would, 2, 1, ["j_flat:logs"])
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == ["j_bad", "j_bad2", "j_flat:logs"]
    assert conn.client.lrange(P + "job:j_flat:logs", 0, -1) == ["a line"]  # never addressed
    assert admin.reprocess_dead(conn, Q, limit=1, dry_run=True) == 0


def test_reprocess_all_dead_dry_run_says_what_the_real_call_moves(ip, conn, capsys):
    mixed_dead(conn, logs=False)  # (the frame of errors the dry run shows reads every member's row)
    magics.SESSION.conn = conn
    frame = ip.run_line_magic("emq", f"reprocess {Q} --all-dead --dry-run")
    said = capsys.readouterr().out
    assert "3 of 7 dead jobs would move; nothing written" in said
    assert "2 bad rows (a field no transition can read) would stay" in said
    assert "1 ghost (a member with no row) would be dropped" in said
    assert "1 job with a foreign id would stay: j_flat:logs" in said
    assert list(frame.columns)[:1] == ["count"]
    ip.run_line_magic("emq", f"reprocess {Q} --all-dead --rate 100000")
    said = capsys.readouterr().out
    assert "reprocessed 3 dead jobs of harm" in said
    assert "1 job with a foreign id left in dead: j_flat:logs" in said


def test_reprocess_all_dead_with_no_rate_walks_once_in_bounded_steps_past_a_logs_id(ip, conn, capsys):
    mixed_dead(conn)  # j_flat's logs list holds a line: an id naming it must never address it
    magics.SESSION.conn = conn
    frame = ip.run_line_magic("emq", f"reprocess {Q} --all-dead --dry-run --budget 2")
    assert "3 of 7 dead jobs would move" in capsys.readouterr().out
    assert int(frame["count"].sum()) == 5  # the rows: not the ghost, not the logs id
    seen = steps(conn)
    ip.run_line_magic("emq", f"reprocess {Q} --all-dead --yes --budget 2")
    said = capsys.readouterr().out
    assert "reprocessed 3 dead jobs of harm" in said
    assert "2 bad rows (a field no transition can read) left in dead" in said
    assert [examined(step) for step in seen] == [2, 2, 2, 1]  # each member once, 2 a call
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == ["j_bad", "j_bad2", "j_flat:logs"]
    assert conn.client.lrange(P + "job:j_flat:logs", 0, -1) == ["a line"]


# -- 5. ids another node wrote outside the name gate --------------------------------------


def foreign_dead(conn) -> list[str]:
    """Seven dead jobs, two of them with ids our gate refuses, written as another node
    writes them (the row, then the dead set)."""
    ids = [f"j_{i}" for i in range(5)]
    kill(conn, ids)
    for job_id in ("ord:17", "a b"):
        conn.client.hset(
            P + "job:" + job_id,
            mapping={"payload": "{}", "attempts": "1", "failures": "1", "max_attempts": "1"}
            | {"state": "dead", "last_error": "boom"},
        )
        conn.client.zadd(P + "dead", {job_id: int(time.time() * 1000)})
    return [*ids, "ord:17", "a b"]


FOREIGN_WAYS = {
    "reprocess_dead paced": lambda c: admin.reprocess_dead(c, Q, rate=1000),
    "reprocess_dead trial": lambda c: admin.reprocess_dead(c, Q, trial=2, watch_s=0.05),
    "reprocess_jobs of find": lambda c: admin.reprocess_jobs(c, Q, triage.find(c, Q, error="boom").index),
}


@pytest.mark.parametrize("way", sorted(FOREIGN_WAYS))
def test_foreign_ids_do_not_stop_the_rest(conn, way):
    ids = foreign_dead(conn)
    answer = FOREIGN_WAYS[way](conn)
    assert answer == 7 or answer == dict.fromkeys(ids, "reprocessed")
    assert conn.client.zcard(P + "dead") == 0
    assert sorted(conn.client.zrange(P + "pending", 0, -1)) == sorted(ids)
    assert consistency_problems(conn, Q) == []


# ids another node may write: each needs its own JSON escape, or none
ODD_IDS = ["plain_01", "ord:17", "a b", 'say "hi"', "back\\slash", "tab\there", "caf\u00e9", "j.1-2"]
# ids at the edge of the foreign rule (an id ending `:logs` or `:lock` is never addressed)
EDGE_IDS = [":logs", "x:logs", "x:lock", "logs", "lock", ":lo", "x:logsy", "xlogs", "x;lock", "x:LOGS"]


def test_reprocess_dead_announces_every_job_in_json_whatever_its_id(conn):
    written_dead(conn, Q, ODD_IDS)
    with Events(conn, Q) as events:
        moved = admin.reprocess_dead(conn, Q)
    assert moved == len(ODD_IDS)
    assert [e for e in events.seen if e["event"] == "reprocessed"] == [
        {"event": "reprocessed", "job": job_id} for job_id in ODD_IDS
    ]


def test_the_bulk_moves_leave_exactly_the_ids_the_foreign_rule_names(conn):
    written_dead(conn, Q, EDGE_IDS)
    foreign = [i for i in EDGE_IDS if i.endswith((":logs", ":lock"))]
    moved = admin.reprocess_dead(conn, Q)
    assert sorted(moved.foreign) == sorted(foreign) and moved == len(EDGE_IDS) - len(foreign)
    assert sorted(conn.client.zrange(P + "dead", 0, -1)) == sorted(foreign)


def test_the_filtered_dry_runs_answer_for_foreign_ids(conn):
    ids = foreign_dead(conn)
    found = triage.find(conn, Q, error="boom").index
    before = dump(conn)
    assert admin.reprocess_jobs(conn, Q, found, dry_run=True) == dict.fromkeys(ids, "reprocessed")
    assert admin.remove_jobs(conn, Q, found, dry_run=True) == dict.fromkeys(ids, "removed")
    assert dump(conn) == before


def test_an_id_naming_another_jobs_subkey_is_never_addressed(conn):
    jobs.enqueue(conn, Q, "{}", id="j_1")
    jobs.add_log(conn, Q, "j_1", "keep me")
    assert jobs.claim(conn, Q, 60_000).id == "j_1"  # its lock is held
    before = {k: dump(conn)[k] for k in (P + "job:j_1", P + "job:j_1:logs", P + "job:j_1:lock")}
    odd = ["j_1:logs", "j_1:lock"]
    conn.client.zadd(P + "dead", dict.fromkeys(odd, 1))
    assert admin.reprocess_jobs(conn, Q, odd) == dict.fromkeys(odd, "foreign_id")
    assert admin.remove_jobs(conn, Q, odd, dry_run=True) == dict.fromkeys(odd, "foreign_id")
    assert admin.remove_jobs(conn, Q, odd) == dict.fromkeys(odd, "foreign_id")
    assert admin.reprocess_dead(conn, Q).foreign == sorted(odd)
    conn.client.zadd(P + "pending", dict.fromkeys(odd, 1))
    assert admin.drain(conn, Q) == 2  # the members leave; no key is built from them
    after = dump(conn)
    assert {k: after[k] for k in before} == before
    assert conn.client.zrange(P + "dead", 0, -1) == sorted(odd)


# -- 6. EchoMQ's own callers send no byte budget -------------------------------------------


def test_echomqs_own_drain_and_obliterate_layouts_answer_as_echomq_does(conn):
    """EchoMQ's Elixir Admin sends drain no ARGV and obliterate two: the byte budget is
    an optional last argument, so their replies are EchoMQ's."""
    for i in range(5):
        jobs.enqueue(conn, Q, "x" * 100, id=f"j_{i}")
    assert (
        conn.client.evalsha(conn.client.script_load(scripts.source("drain")), 2, P, P + "pending") == 5
    )  # the count drained, unbounded
    for i in range(5):
        jobs.enqueue(conn, Q, "x" * 100, id=f"j_{i}")
    admin.pause(conn, Q)
    sha = conn.client.script_load(scripts.source("obliterate"))
    # five jobs at two a call: 1 (:more), 1, then the last job and the rest, 0 (:ok)
    assert [conn.client.evalsha(sha, 2, P + "meta", P, "", "2") for _ in range(3)] == [1, 1, 0]
    assert keys_of(conn, Q) == []


def test_obliterate_keeps_the_throughput_record_whole_between_calls(conn):
    """The latency minutes go in the call that deletes the metrics hashes, however small
    the budget and however many minutes the history spans."""
    for i in range(3):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i}")
    jobs.complete(conn, Q, jobs.claim(conn, Q, 60_000).id)
    for minute in (1, 2, 3):  # a history spanning more minutes than the budget
        conn.client.zadd(P + "lat:minutes", {str(minute): minute})
        conn.client.hset(P + f"lat:wait:{minute}", "0", "1")
    admin.pause(conn, Q)
    while admin.obliterate(conn, Q, budget=1) == "more":
        metrics = conn.client.exists(P + "metrics:claimed", P + "metrics:completed")
        minutes = conn.client.exists(P + "lat:minutes", *(P + f"lat:wait:{m}" for m in (1, 2, 3)))
        assert (metrics, minutes) in ((2, 4), (0, 0))
    assert keys_of(conn, Q) == []


def test_a_filtered_reprocess_line_moves_at_most_the_move_budget_a_call(conn):
    """`%emq reprocess Q --error GLOB --yes` moves in calls of at most `ID_BUDGET`
    jobs (as `admin.reprocess_jobs` does), whatever the session's `budget` setting
    (1,000 by default, for drains): each id given costs the server a lookup of its own.
    `--budget` still names the calls' size."""
    from emq_notebook import cli, grammar, verbs
    from emq_notebook.defaults import ID_BUDGET

    kill(conn, [f"j_{i}" for i in range(ID_BUDGET + 100)])
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    sizes: list[int] = []
    run = conn.run

    def counted(name: str, keys: Any, args: Any = (), **kw: Any) -> Any:
        if name == "reprocess_jobs":
            sizes.append(len(args) - 2)  # its ids follow two values (`transitions.decode`)
        return run(name, keys, args, **kw)

    conn.run = counted  # type: ignore[method-assign]
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes"))
    assert sizes == [ID_BUDGET, 100]
    assert conn.client.zcard(P + "dead") == 0
    admin.drain(conn, Q)  # the moved jobs leave pending: the next ones are claimed to die
    kill(conn, [f"k_{i}" for i in range(30)])
    sizes.clear()
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes --budget 20"))
    assert sizes == [20, 10]


# -- long ids another node wrote ----------------------------------------------------------

LONG = 20_000  # an id's characters
# what one call of a move takes of them at most: an id counts ID_WORK (16) times its
# length against the byte budget, and the call ends after the member that reaches it
LONG_A_CALL = math.ceil(BYTE_BUDGET / (16 * LONG))


@pytest.mark.parametrize("verb", ["reprocess_dead", "remove_jobs", "drain"])
def test_a_move_of_long_ids_takes_a_few_a_call_as_their_work_costs(harm, verb):
    """A move hashes and copies an id at each key and member it names: 40 ids of 20 KB
    are 800 KB, under one call's byte budget counted once, and one call of them held
    Valkey 41 ms. Counted at their work, a call takes a few."""
    conn, srv = harm
    ids = written_rows(conn, Q, "pending" if verb == "drain" else "dead", long_ids(40, LONG, "i"))
    calls = replies(conn, verb)
    run = {
        "reprocess_dead": lambda: admin.reprocess_dead(conn, Q),
        "remove_jobs": lambda: admin.remove_jobs(conn, Q, ids),
        "drain": lambda: admin.drain(conn, Q),
    }[verb]
    done = bounded(run, srv, what=verb)
    assert (len(done) if verb == "remove_jobs" else done) == 40
    assert len(calls) >= 40 / LONG_A_CALL
    assert not conn.client.zrange(P + ("pending" if verb == "drain" else "dead"), 0, -1)


def test_an_id_over_max_server_id_bytes_is_foreign_left_where_it_is_and_reported_clipped(harm):
    """One id of a megabyte held Valkey 23 ms in a call (4 MB: 95 ms): a script hashes and
    copies it at each key it names. An id over MAX_SERVER_ID bytes is foreign, as one naming
    another job's :logs: no verb addresses it, a move leaves it where it is, and its report
    (the reply, the `bad_row` event) carries its first 200 bytes and its length."""
    conn, srv = harm
    edge, long = "e" * MAX_SERVER_ID, "x" * (MAX_SERVER_ID + 1)
    written_dead(conn, Q, [edge, long])
    with Events(conn, Q) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q), srv, what="reprocess_dead")
    clipped = "x" * 200 + f"... ({MAX_SERVER_ID + 1} bytes)"
    assert (moved, moved.foreign) == (1, [clipped])
    assert [e["job"] for e in events.seen if e["event"] == "bad_row"] == [clipped]
    assert conn.client.zrange(P + "dead", 0, -1) == [long]
    assert conn.client.zrange(P + "pending", 0, -1) == [edge]
    # the bulk verbs by id answer it foreign and send it nowhere
    assert admin.remove_jobs(conn, Q, [long]) == {long: "foreign_id"}
    assert conn.client.exists(P + "job:" + long)
    # a drain takes the member out of its set and builds no key from it
    conn.client.zadd(P + "pending", {long: 5})
    bounded(lambda: admin.drain(conn, Q), srv, what="drain")
    assert not conn.client.zrange(P + "pending", 0, -1) and conn.client.exists(P + "job:" + long)
