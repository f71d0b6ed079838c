"""Do no harm, the tick: bad definitions another node wrote, due before the good ones,
hold them back a call per `TICK_NAMES` of them, never for ever (each call walks on from
the place the one before answered, and from the head again at the due names' end), and
each is reported by one `bad_row` event while it stays as it is, at most `TICK_REPORTS`
a call. Both backends, under the harness's watchdog (tests/harm.py)."""

from __future__ import annotations

import math
import re

import pytest
from harm import Events, bounded

import emq_notebook as emq
from emq_notebook import admin, repeat, scripts
from emq_notebook.errors import EMQError

Q = "ticks"
P = f"emq:{{{Q}}}:"
REPORTED = P + "repeat:reported"
# the bad definitions another node may write, every kind a tick skips
BAD_KINDS = [
    "not json",
    '{"every": 0, "payload": "{}"}',
    '{"every": 1000, "payload": 7}',
    "[1, 2]",
    '"text"',
    '{"every": 1000, "payload": "{}", "group": 3}',
    '{"every": 1000, "payload": "{}", "max_attempts": "three"}',
    '{"every": 0.5, "payload": "{}"}',
]
OVER = '{"every": 1000, "payload": "' + "p" * (repeat.DEF_BYTES + 1) + '"}'


def written(conn, defs: dict[str, str], due) -> None:
    """Repeatables written straight into the registry, as another node may have."""
    pipe = conn.client.pipeline(transaction=False)
    for k, (name, d) in enumerate(defs.items()):
        pipe.zadd(P + "repeat", {name: due(k)})
        pipe.hset(P + "repeat:defs", name, d)
        if k % 500 == 499:
            pipe.execute()
    pipe.execute()


def bad_defs(n: int, over: int = 0) -> dict[str, str]:
    """`n` bad definitions of every kind, the first `over` of them over DEF_BYTES."""
    return {f"bad_{i:04d}": OVER if i < over else BAD_KINDS[i % len(BAD_KINDS)] for i in range(n)}


def good_defs(n: int) -> dict[str, str]:
    return {f"good_{i}": f'{{"every": 3600000, "payload": "job {i}"}}' for i in range(n)}


def tick(conn, srv, max_jobs: int = 10) -> list[str]:
    return bounded(lambda: repeat.tick(conn, Q, max_jobs=max_jobs), srv, what="tick")


def reports(events: Events) -> list[str]:
    return [e["repeat"] for e in events.seen if e["event"] == "bad_row"]


# -- bad definitions ahead hold the good ones back a call per TICK_NAMES, not for ever --------


def test_good_repeatables_behind_1000_bad_ones_each_make_one_job_within_three_ticks(harm):
    conn, srv = harm
    bad, good = bad_defs(1_000, over=4), good_defs(10)
    written(conn, bad, due=lambda k: 1_000 + k)
    written(conn, good, due=lambda k: 5_000 + k)
    before = {n: conn.client.zscore(P + "repeat", n) for n in bad}
    # the bad ones are examined TICK_NAMES a call, then the good ones behind them
    bound = math.ceil(len(bad) / repeat.TICK_NAMES) + 1
    assert bound == 3
    made, per_call = [], []
    for _ in range(bound):
        with Events(conn, Q) as events:
            made += tick(conn, srv)
        per_call.append(len(reports(events)))
    payloads = sorted(conn.client.hget(P + "job:" + j, "payload") for j in made)
    assert payloads == sorted(f"job {i}" for i in range(10))  # one job each, within the bound
    assert all(n <= repeat.TICK_REPORTS for n in per_call), per_call
    # the bad ones left as they were: their definitions and their due times
    assert {n: conn.client.zscore(P + "repeat", n) for n in bad} == before
    assert conn.client.hget(P + "repeat:defs", "bad_0005") == bad["bad_0005"]
    assert conn.client.hstrlen(P + "repeat:defs", "bad_0000") == len(OVER)
    # and the good ones are not due again for an hour: the ticks after make nothing
    for _ in range(3):
        assert tick(conn, srv) == []


def test_a_repeatable_due_before_the_place_is_made_when_the_walk_goes_round(harm):
    conn, srv = harm
    written(conn, bad_defs(repeat.TICK_NAMES + 100), due=lambda k: 1_000 + k)
    assert tick(conn, srv) == [] and repeat._PLACES[conn][Q] == repeat.TICK_NAMES
    # due at the head, behind the place: the walk meets the due names' end after 100
    # names and goes on from the head in the same call
    written(conn, good_defs(1), due=lambda k: 1)
    [job] = tick(conn, srv)
    assert conn.client.hget(P + "job:" + job, "payload") == "job 0"
    # the good one put the rest a rank further: 101 names from the place, then 399 from
    # the head (the good one and 398 bad ones): the next call goes on after them
    assert repeat._PLACES[conn][Q] == repeat.TICK_NAMES - 101 - 1


def test_a_place_past_the_due_names_starts_the_walk_at_the_head(harm):
    conn, srv = harm
    written(conn, good_defs(2), due=lambda k: 1_000 + k)
    repeat._PLACES.setdefault(conn, {})[Q] = 10**12  # the registry changed since
    assert len(tick(conn, srv)) == 2
    assert repeat._PLACES[conn][Q] == 0


def test_the_place_must_be_a_whole_number():
    conn = emq.connect(embedded="fake")
    with pytest.raises(EMQError, match="place"):
        conn.run("repeat_tick", [P], ["-1", "j_1"], verb="tick", queue=Q)


# -- each bad definition reported once while it stays as it is --------------------------------


def test_each_bad_definition_is_reported_once_at_most_tick_reports_a_call(harm):
    conn, srv = harm
    bad = {f"bad_{i:02d}": f"not json {i}" for i in range(50)}
    written(conn, bad, due=lambda k: 1_000 + k)
    per_call, seen = [], []
    for _ in range(5):
        with Events(conn, Q) as events:
            assert tick(conn, srv) == []
        per_call.append(len(reports(events)))
        seen += reports(events)
    assert per_call == [20, 20, 10, 0, 0] and repeat.TICK_REPORTS == 20
    assert sorted(seen) == sorted(bad)  # each once, in due order
    assert conn.client.hlen(REPORTED) == 50
    # another content is reported once again; the same content never
    conn.client.hset(P + "repeat:defs", "bad_07", "[still bad]")
    with Events(conn, Q) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert reports(events) == ["bad_07"]
    # made good, its report is forgotten: bad again (as it was) it is reported again
    conn.client.hset(P + "repeat:defs", "bad_07", '{"every": 1, "payload": "now good"}')
    [job] = tick(conn, srv)
    assert conn.client.hget(P + "job:" + job, "payload") == "now good"
    assert not conn.client.hexists(REPORTED, "bad_07")
    conn.client.hset(P + "repeat:defs", "bad_07", "[still bad]")
    conn.client.zadd(P + "repeat", {"bad_07": 0})
    with Events(conn, Q) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert reports(events) == ["bad_07"]


def test_a_long_bad_definition_is_known_by_its_problem_length_and_ends(harm):
    """What a report remembers of a definition: its problem, its length, its first and
    last 32 bytes. A change of its length is reported; one in its middle alone is not."""
    conn, srv = harm
    written(conn, {"long": "[" + "x" * 1_000}, due=lambda k: 0)
    with Events(conn, Q) as events:
        for text in ("[" + "x" * 1_000, "[" + "x" * 1_001, "[" + "x" * 500 + "y" + "x" * 500):
            conn.client.hset(P + "repeat:defs", "long", text)
            for _ in range(2):
                tick(conn, srv)
    assert reports(events) == ["long", "long"]


def test_register_and_unregister_forget_a_report(harm):
    conn, srv = harm
    written(conn, {"a": "nope", "b": "nope"}, due=lambda k: 0)
    tick(conn, srv)
    assert sorted(conn.client.hkeys(REPORTED)) == ["a", "b"]
    repeat.register(conn, Q, "a", 60_000, "{}")
    assert repeat.unregister(conn, Q, "b")
    assert conn.client.hkeys(REPORTED) == []


def test_the_reports_are_forgotten_when_they_name_more_than_the_registry(harm):
    """Another node took bad repeatables out by hand: the reports naming them would stay
    for ever, so once they outnumber the registry they are emptied and made again."""
    conn, srv = harm
    bad = {f"bad_{i:02d}": "nope" for i in range(30)}
    written(conn, bad, due=lambda k: 1_000 + k)
    tick(conn, srv)
    tick(conn, srv)
    assert conn.client.hlen(REPORTED) == 30
    gone = [f"bad_{i:02d}" for i in range(5)]
    conn.client.zrem(P + "repeat", *gone)
    conn.client.hdel(P + "repeat:defs", *gone)
    with Events(conn, Q) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert sorted(reports(events)) == sorted(set(bad) - set(gone))
    assert conn.client.hlen(REPORTED) == 25


def test_a_reports_key_of_another_type_is_left_and_each_tick_reports_at_most_tick_reports(harm):
    conn, srv = harm
    conn.client.set(REPORTED, "mine")
    written(conn, bad_defs(30), due=lambda k: 1_000 + k)
    written(conn, good_defs(1), due=lambda k: 5_000)
    with Events(conn, Q) as events:
        made = tick(conn, srv)
    assert len(made) == 1 and len(reports(events)) == repeat.TICK_REPORTS
    assert conn.client.get(REPORTED) == "mine"


def test_a_queue_with_reports_is_obliterated_to_nothing(harm):
    conn, srv = harm
    written(conn, bad_defs(3), due=lambda k: 0)
    tick(conn, srv)
    assert conn.client.exists(REPORTED)
    admin.pause(conn, Q)
    admin.obliterate_all(conn, Q)
    assert list(conn.client.scan_iter(match=P + "*")) == []


def test_the_scripts_report_bound_is_the_clients():
    said = re.search(r"^local TICK_REPORTS = (\d+)$", scripts.source("repeat_tick"), re.M)
    assert said is not None and int(said.group(1)) == repeat.TICK_REPORTS
